"""The drop-in replacement for Composer's ``SystemProfiler`` callback, fed by sysprof's native sampler.

Data flow: one recording session (:class:`sysprof.pipeline.Session`: :class:`sysprof.Sampler`'s rows and the
standard producers' events, drained on a thread of its own every ``max(1 s, 4 * drain_interval_seconds)`` and at
training events: when due, and at each cycle's save) -> its sinks: Composer's profiler
(:class:`~sysprof.profiler.composer_sink.ComposerSink`: one counter event per (row, trace name) to every trace
handler of ``state.profiler``, stamped with the wall-clock time its row was sampled, only rows sampled while the
profiler's action was one that markers record by default: WARMUP, ACTIVE, ACTIVE_AND_SAVE), and with their options
the Prometheus endpoint, the summary window and the flight recorder.

Trace names, categories and argument keys are Composer's (fixed: GB = 1e9 bytes, kB = 1e3 bytes, the disk key is
the field name): the ``"composer"`` :class:`~sysprof.trace.tracks.TrackLayout` over the data in
:mod:`sysprof.trace.composer` (:data:`COUNTER_RULES`, :data:`CUDA_MEMORY_KEYS`).
"""

from __future__ import annotations

import collections
import logging
import math
import numbers
import os
import sys
import time
from typing import Any, Dict, Optional

from sysprof import distributed, forks
from sysprof.pipeline import Session
from sysprof.pipeline.session import Producer
from sysprof.profiler.callback import Callback, event_name
from sysprof.sampling.registry import SOURCES, source_available
from sysprof.trace.composer import COUNTER_RULES, CUDA_MEMORY_KEYS, CUDA_MEMORY_UNITS
from sysprof.profiler.composer_sink import ComposerSink
from sysprof.profiler.schedule import RECORDED_ACTION_VALUES, current_action
from sysprof.sampling.budget import check_budget
from sysprof.trace import events as ev
from sysprof.trace.tracks import TrackLayout

__all__ = ["SystemProfiler", "COUNTER_RULES", "CUDA_MEMORY_KEYS", "counter_plan"]

log = logging.getLogger(__name__)

_now_ns = time.time_ns  # wall clock of event observations (tests substitute a fake)


def counter_plan(channels: tuple, rates: bool) -> list:
    """The trace counters of ``channels`` under Composer's names (the ``"composer"``
    :class:`~sysprof.trace.tracks.TrackLayout`, rules in :data:`COUNTER_RULES`).

    Returns:
        list of ``(name, categories, keys, columns, multipliers, divisors)``: trace event name (str), categories
        (1-tuple of str), args keys (tuple of str, in :data:`COUNTER_RULES` order), channel column indices (list of
        int) and per-key multipliers and divisors (lists of float); names in the order of their first channel.
    """
    return [(t.name, (t.category,), t.keys, t.columns, [m for m, _ in t.scale], [d for _, d in t.scale])
            for t in TrackLayout(channels, "composer", rates=rates).tracks]


def _seconds(name: str, value: Any) -> float:
    """``value`` as float seconds, or ValueError naming ``name`` unless it is a finite real number > 0 (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number of seconds > 0, got {value!r}")
    return float(value)


def source_switches(given: Dict[str, Any], owner: str, prefix: str = "profile_") -> Dict[str, bool]:
    """``{source: on}`` for the registry sources other than Composer's four (cpu, memory, disk, net), from
    ``profile_<source>`` keywords (off unless given). Raises TypeError for a keyword naming no source."""
    names = [n for n in SOURCES if n not in _COMPOSER_SOURCES]
    for key in given:
        if not key.startswith("profile_") or key[len("profile_"):] not in names:
            bad = prefix + key[len("profile_"):] if key.startswith("profile_") else key
            raise TypeError(f"{owner}() got an unexpected keyword argument {bad!r}")
    return {n: bool(given.get(f"profile_{n}", False)) for n in names}


_COMPOSER_SOURCES = ("cpu", "memory", "disk", "net")  # Composer's own profile_* arguments


class SystemProfiler(Callback):
    """Record system metrics into the profiler's trace, sampled by sysprof's native sampler.

    Drop-in for ``composer.profiler.SystemProfiler``: pass it in ``Trainer(callbacks=[...])`` with a profiler
    whose ``sys_prof_*`` flags are off (or let :class:`sysprof.Profiler` build it from its ``sys_prof_*``
    arguments).

    Counter events (name: args keys, units; category in brackets):

    * ``cpu``: ``cpu_percent`` (% of all CPUs busy, /proc/stat) [cpu]; with ``per_cpu`` also ``cpu/<id>``.
    * ``memory/virtual``: ``used_gb`` (MemTotal - MemAvailable), ``available_gb``; ``memory/swap``: ``used_gb``,
      ``free_gb`` (GB = 1e9 bytes, /proc/meminfo) [memory]; ``memory/cuda/<name>``: torch allocator statistics
      (:data:`CUDA_MEMORY_KEYS`, read at each drain while CUDA is initialized) [memory].
    * ``disk/<dev>/<field>``: key ``<field>`` for read_count, write_count, read_bytes, write_bytes (cumulative)
      and read_time, write_time, busy_time (cumulative ms), /proc/diskstats [disk].
    * ``network/<nic>/kb_sent``, ``kb_recv``: cumulative kB (1e3 bytes), /proc/net/dev [net].
    * with ``rates``: ``disk/<dev>/{read,write}_{bytes,count}_per_second``, ``disk/<dev>/busy_percent``,
      ``network/<nic>/kb_{sent,recv}_per_second``.
    * with ``profile_process``: ``process/cpu`` (cpu_percent, % of one core), ``process/memory`` (rss_gb,
      vms_gb), ``process/threads`` (num_threads) [process]; with ``profile_gpu``: ``gpu/<index>/<field>`` [gpu],
      and the driver's own buffered samples ``gpu/<index>/power_samples_watts`` etc. at the driver's timestamps
      (:mod:`sysprof.profiler.composer_sink`).

    Values the sampler could not read (NaN) are left out of an event; an event with no value is not emitted.

    Args:
        profile_cpu, profile_memory, profile_disk, profile_net: sources, as Composer's.
        stats_thread_interval_seconds: sampling interval (float seconds > 0).
        profile_<source>: any other source of the registry (``sysprof.sampling.registry.SOURCES``: ``profile_gpu``,
            ``profile_process``, ``profile_pressure``, ...), off by default; channels that Composer's layout has no
            name for are traced under their sysprof names.
        per_cpu, rates: sysprof extensions (see above).
        backend: sampler backend, ``"auto"``, ``"native"`` or ``"psutil"``.
        drain_interval_seconds: least time between two drains done from training events (float > 0); a
            background thread also drains when no event came for ``4 * drain_interval_seconds`` (at least 1 s).
        intervals: seconds between two reads of a source, by name (``{"gpu": 0.1}``), as :class:`sysprof.Sampler`'s
            ``intervals``; checked when the sampler is made (``init``).
        gpu_interval_seconds: seconds between two reads of the GPUs (with ``profile_gpu``), as :class:`sysprof.Sampler`'s
            ``gpu_interval`` (None: 10 ms, or ``stats_thread_interval_seconds`` if longer).
        budget: the CPU sysprof's sampling threads may use, a share of one core (default 5 % or $SYSPROF_BUDGET;
            None: none), as
            :class:`sysprof.Sampler`'s ``budget``: its interval changes are ``sysprof intervals`` instants.
        devices: the disks and network interfaces sampled, globs as :class:`sysprof.Sampler`'s ``devices``
            (``["nvme*", "!net/docker*"]``); None: all but loop, RAM and zram disks and ``lo``.
        changes_only: what handlers without ``process_counter_rows`` get (see below).
        prometheus_listen: also serve the samples at ``http://ADDR/metrics`` for Prometheus (``"127.0.0.1:9464"``;
            loopback unless a host is given; see :mod:`sysprof.prometheus`), from ``init`` to ``close``, fed by this
            callback's drains; an address that cannot be bound is logged, not raised. Needs
            ``sysprof[prometheus]``. ``prometheus_window_seconds``: the window of its ``_max``/``_min`` gauges.
        host_sampling: ``"per_node"`` (default): in a distributed job, host sources are sampled by local rank 0
            only, and every rank samples its own process and GPU; ``"every_rank"``: every rank samples all it is
            asked (see :mod:`sysprof.distributed`, which also aligns the ranks' clocks: counter ``sysprof clock``).
        log_summaries: at each ``batch_end`` (Composer's trainer logs its loss at every batch), log summaries of
            the samples since the previous batch end through Composer's ``Logger.log_metrics`` (the logger
            destinations: W&B, MLflow, TensorBoard, ...): True for the default set, or a list of
            ``"channel:stat"`` strings or :class:`~sysprof.integrations.summaries.Summary` objects (see
            :mod:`sysprof.integrations.summaries`); ``dataloader_wait_share`` is the share of the window between
            ``before_dataloader`` and ``after_dataloader``. Default False.

    Changes only: a handler with ``process_counter_rows`` (sysprof's :class:`~sysprof.JSONTraceHandler`) gets every
    row and writes changes only itself (its ``changes_only``); a handler without it (Composer's) gets a counter's
    event only at a sample where one of its values changed, every counter at the first sample recorded after
    each cycle's save and again at the cycle's last sample, and an event with ``values == {}`` where all of a
    counter's values turn unknown (``changes_only=False``: every sample, as Composer's ``SystemProfiler``). An idle
    device then costs nothing after the first sample of each cycle file.

    Raises:
        ValueError: ``stats_thread_interval_seconds`` or ``drain_interval_seconds`` is not a finite number > 0
            (or is a bool); a ``budget`` that is not None or in (0, 1]; ``devices`` is not a list of globs (see
            :mod:`sysprof.sampling.devices`); a bad ``prometheus_listen``. ImportError: ``prometheus_listen`` without prometheus_client.
    """

    def __init__(
        self,
        profile_cpu: bool = True,
        profile_memory: bool = False,
        profile_disk: bool = False,
        profile_net: bool = False,
        stats_thread_interval_seconds: float = 0.5,
        *,
        per_cpu: bool = False,
        rates: bool = False,
        backend: str = "auto",
        drain_interval_seconds: float = 0.25,
        intervals: Optional[Dict[str, float]] = None,
        devices: Optional[list] = None,
        changes_only: bool = True,
        prometheus_listen: Optional[str] = None,
        prometheus_window_seconds: float = 15.0,
        gpu_interval_seconds: Optional[float] = None,
        host_sampling: str = "per_node",
        log_summaries: Any = False,
        flight: Any = None,
        flight_folder: Optional[str] = None,
        budget: Any = "default",
        **sources: bool,
    ) -> None:
        super().__init__()
        self.budget = check_budget(budget) or None
        if prometheus_listen is not None:
            from sysprof.prometheus.endpoint import parse_listen, require_prometheus_client

            require_prometheus_client()
            parse_listen(prometheus_listen)
        self.prometheus_listen = prometheus_listen
        self.prometheus_window_seconds = _seconds("prometheus_window_seconds", prometheus_window_seconds)
        self._endpoint: Any = None
        from sysprof.sampling.devices import check_devices

        distributed.plan_sources({}, distributed.RankInfo(), host_sampling)  # checks the value
        self.host_sampling = host_sampling
        self._rank = distributed.RankInfo()
        self._clock: Any = None
        self._clock_rows: list = []  # clock-sync estimates not yet emitted

        self.devices = list(check_devices(devices)) if devices is not None else None
        self.changes_only = bool(changes_only)
        self.log_summaries = log_summaries
        self._summaries: Any = None  # the SummaryWindow of a run with log_summaries
        self._dataloader_ns: Optional[int] = None
        if log_summaries is not False:
            from sysprof.integrations.summaries import parse_summaries

            parse_summaries(log_summaries)  # a bad spec fails here, in the user's code
        _seconds("stats_thread_interval_seconds", stats_thread_interval_seconds)
        _seconds("drain_interval_seconds", drain_interval_seconds)
        self.profile_cpu = profile_cpu
        self.profile_memory = profile_memory
        self.profile_disk = profile_disk
        self.profile_net = profile_net
        self.stats_thread_interval_seconds = stats_thread_interval_seconds
        # profile_<source> of every other registry source (profile_gpu, profile_process, ...), off by default
        for name, on in source_switches(sources, type(self).__name__).items():
            setattr(self, f"profile_{name}", on)
        self.per_cpu = per_cpu
        self.rates = rates
        self.backend = backend
        self.drain_interval_seconds = drain_interval_seconds
        self.intervals = dict(intervals or {})
        self.gpu_interval_seconds = gpu_interval_seconds
        self.sampler: Any = None
        self.session: Any = None  # the recording Session of the last init (kept once stopped: its stats)
        self._sink: Optional[ComposerSink] = None  # Composer's profiler, the session's sink
        self._driver: Any = None  # the session's GPU driver samples producer (with GPU channels)
        self._state: Any = None
        self._last_drain = 0.0
        self._last_action = "skip"
        self._counts = {"rows_drained": 0, "rows_recorded": 0}
        from sysprof.flight import FlightOptions

        self.flight = FlightOptions.of(flight) if flight is not None else None
        self.flight_folder = flight_folder
        self._flight: Any = None  # the FlightRecorder of the running sampler
        self._spans: Optional[BatchSpans] = None  # the batches' spans, for the flight recorder
        self._cuda_device: Optional[int] = None  # the training thread's CUDA device, for memory_stats(device=)
        forks.register(self)

    def _after_fork_in_child(self) -> None:
        """In a forked child the sampler and the drain thread are the parent's, and the lock may have been held
        by that thread: forget them, so that nothing here drains, emits or waits. A new init() starts afresh."""
        self.session = None  # (the session forgets its own sampler, thread and sinks)
        self._sink = None
        self.sampler = None
        self._endpoint = None  # its server thread is the parent's
        self._clock = None
        self._flight = None

    # ------------------------------------------------------------------ lifecycle
    def _make_sampler(self) -> Any:
        """The :class:`sysprof.Sampler` for the configured sources (tests substitute a fake here)."""
        from sysprof.sampling.sampler import Sampler, ring_capacity

        interval = float(self.stats_thread_interval_seconds)
        fallback = max(1.0, 4 * self.drain_interval_seconds)  # the drain thread's period when no event comes
        capacity = ring_capacity(interval, 8 * fallback, 4096, 1 << 20)
        sources = self._sources()
        return Sampler(interval=interval, per_cpu=self.per_cpu and self.profile_cpu, capacity=capacity,
                       backend=self.backend, intervals=self.intervals, devices=self.devices, budget=self.budget,
                       gpu_interval=self.gpu_interval_seconds if self.profile_gpu else None, **sources,
                       **distributed.gpu_keywords(Sampler, sources, self._rank, self.host_sampling))

    def _sources(self) -> Dict[str, bool]:
        """Registry source -> whether this rank samples it (its ``profile_<source>`` switch, then
        :func:`sysprof.distributed.plan_sources`: host sources on local rank 0 only in a distributed job)."""
        asked = {name: bool(getattr(self, f"profile_{name}", False)) for name in SOURCES}
        return distributed.plan_sources(asked, self._rank, self.host_sampling)

    def init(self, state: Any, logger: Any) -> None:
        """Build and start the sampler and the fallback drain thread.

        Raises:
            RuntimeError: ``state.profiler`` is ``None``.
        """
        del logger
        if state.profiler is None:
            raise RuntimeError(f"The profiler is not enabled, which is required to use the {type(self).__name__}. "
                               "To enable it, pass `profiler=Profiler(...)` (composer.profiler.Profiler or "
                               "sysprof.Profiler) to the Trainer.")
        self._shutdown()  # reused after an earlier run
        self._state = state
        self.session = self._sink = self._driver = self._spans = None
        self._cuda_device = None
        self._note_cuda_device()
        self._rank = distributed.rank_info()
        if self._rank.distributed:  # measured on its own thread over the process group's store
            self._clock = distributed.ClockSync(rank=self._rank.rank, world_size=self._rank.world_size,
                                                on_estimate=self._clock_rows.append).start()
        if not any(self._sources().values()):
            return
        sampler = self._make_sampler()
        channels = tuple(sampler.channels)
        for source, why in dict(sampler.errors).items():  # "unavailable" only for a source without channels
            log.warning("sysprof SystemProfiler: source %r%s: %s", source,
                        "" if source_available(source, channels) else " unavailable", why)
        layout = TrackLayout(channels, "composer", rates=self.rates)
        if self.profile_memory:  # the allocator statistics' units travel with the sampled ones
            layout.units.update({f"memory/cuda/{name}": CUDA_MEMORY_UNITS[stat]
                                 for stat, name in CUDA_MEMORY_KEYS.items()})
        self.sampler = sampler
        from sysprof.pipeline.producers import DriverSamples, standard
        from sysprof.sampling.gpu_samples import ARRIVAL_S

        pid = os.getpid()
        producers = standard(sampler, pid)  # XIDs, interval changes, GPU refresh periods and driver samples
        self._driver = next((p for p in producers if isinstance(p, DriverSamples)), None)
        gpus = any(c.startswith("gpu/") for c in channels)
        self._sink = ComposerSink(lambda: list(self._state.profiler.trace_handlers), layout,
                                  changes_only=self.changes_only, counts=self._counts, now=lambda: _now_ns(),
                                  arrival_ns=int(ARRIVAL_S * 1e9) if gpus else 0,
                                  cuda_device=lambda: self._cuda_device, clock_rows=self._clock_rows)
        sinks: list = []
        self._start_endpoint(sampler)
        if self._endpoint is not None:
            sinks.append(self._endpoint)
        self._summaries = None
        if self.log_summaries is not False:
            from sysprof.integrations.summaries import SummarySink, SummaryWindow

            self._summaries = SummaryWindow(self.log_summaries)
            sinks.append(SummarySink(self._summaries))
        self._observe(state)
        self._flight = self._start_flight(sampler, channels) if self.flight is not None else None
        if self._flight is not None:
            self._spans = BatchSpans(pid)
            producers.append(self._spans)
            from sysprof.flight import FlightSink

            sinks.append(FlightSink(self._flight))
        sinks.append(self._sink)
        period = max(1.0, 4 * self.drain_interval_seconds)  # the fallback when no training event drains
        self.session = Session(sampler, sinks, producers, period=period, name="sysprof-drain",
                               on_failure=_failed)
        self.session.after_pump(self._drained)
        self._last_drain = time.monotonic()
        self.session.start(thread=True)

    def _start_flight(self, sampler: Any, channels: tuple) -> Any:
        """The flight recorder of ``flight`` (None, logged, where it cannot be made)."""
        from sysprof.flight import FlightRecorder

        try:
            pid, rank = os.getpid(), self._rank.rank
            float_ts = sampler.interval < 1e-3
            ts = (lambda t: t / 1000.0) if float_ts else (lambda t: t // 1000)
            t_start = time.time_ns()
            meta = ev.start_metadata(sampler, channels, t_start, recorder_pid=pid, pid=pid, framework="composer",
                                     ranks=self._rank.as_dict())
            units = TrackLayout(channels, "sysprof", system_pid=pid).units
            head = ev.chrome_events(ev.head(meta, pid, t_start, units, ev.process_name(pid, f"composer (pid {pid})")),
                                    ts)
            return FlightRecorder(self.flight_folder or "sysprof-flight", channels, sampler.interval, self.flight,
                                  head=head, float_ts=float_ts, pid=pid, notify=log.warning, suffix=f"-rank{rank}",
                                  stop_args=lambda: {"stats": dict(sampler.stats), "errors": dict(sampler.errors)})
        except Exception as e:  # noqa: BLE001 - training goes on without it
            log.warning("sysprof SystemProfiler: no flight recorder: %s: %s", type(e).__name__, e)
            return None

    def run_event(self, event: Any, state: Any, logger: Any) -> None:
        """Observe the profiler action at every event, drain when due, then dispatch the event."""
        if self._spans is not None:  # the batches' times, fed to the flight recorder at the next drain
            self._spans.event(event_name(event))
        if self.sampler is not None and state.profiler is not None:
            if self._cuda_device is None:
                self._note_cuda_device()
            previous = self._last_action
            self._observe(state)
            cycle_end = previous == "active_and_save" and event_name(event) == "batch_end"
            if cycle_end or time.monotonic() - self._last_drain >= self.drain_interval_seconds:
                self._drain(cycle_end)
            if self._summaries is not None:
                self._summary_event(event_name(event), logger)
        super().run_event(event, state, logger)

    def _summary_event(self, name: str, logger: Any) -> None:
        """log_summaries: the dataloader phase, and the summaries at each batch end (never raises)."""
        try:
            if name == "before_dataloader":
                self._dataloader_ns = time.time_ns()
            elif name == "after_dataloader" and self._dataloader_ns is not None:
                self._summaries.add_span("dataloader", self._dataloader_ns, time.time_ns())
                self._dataloader_ns = None
            elif name == "batch_end" and logger is not None:
                self._drain()
                logger.log_metrics(self._summaries.take())
        except Exception:  # noqa: BLE001 - summaries never stop training
            log.exception("sysprof SystemProfiler: logging summaries failed")

    def close(self, state: Any, logger: Any) -> None:
        """Stop and join the sampler and the drain thread, then emit every sample still buffered."""
        del logger
        flight = self._flight
        exc = sys.exc_info()[1] or getattr(sys, "last_value", None)  # an exception that ended training
        if flight is not None and exc is not None:
            flight.trigger("exception", f"{type(exc).__name__}: {exc}")
        if self.sampler is not None and state is not None and getattr(state, "profiler", None) is not None:
            self._observe(state)
        self._shutdown()

    def _shutdown(self) -> None:
        clock, self._clock = self._clock, None
        if clock is not None:
            clock.stop()
        session = self.session
        if session is not None:
            session.stop()  # the sampler stopped, the last rows emitted (a cycle's end), the flight recorder closed
        self.sampler = None
        self._flight = self._spans = None
        endpoint, self._endpoint = self._endpoint, None
        if endpoint is not None:
            endpoint.stop()

    def _start_endpoint(self, sampler: Any) -> None:
        """The Prometheus endpoint of ``prometheus_listen``, a sink of the session (a bind failure is logged)."""
        if self.prometheus_listen is None:
            return
        from sysprof.prometheus.endpoint import PrometheusEndpoint

        try:
            self._endpoint = PrometheusEndpoint(sampler, listen=self.prometheus_listen, drain=False,
                                                window=self.prometheus_window_seconds)
        except (OSError, ValueError) as e:  # the address is taken (another rank's?), or the window too long
            log.warning("sysprof SystemProfiler: no Prometheus endpoint on %s: %s", self.prometheus_listen, e)

    def _note_cuda_device(self) -> None:
        """Remember the calling (training) thread's current CUDA device once CUDA is initialized (never initializes
        it): the drain thread's own current device is 0, so allocator statistics are read with this ``device=``."""
        torch = sys.modules.get("torch") if self.profile_memory else None
        if torch is not None and torch.cuda.is_initialized():
            self._cuda_device = torch.cuda.current_device()

    # ------------------------------------------------------------------ sampling -> events
    def _observe(self, state: Any) -> None:
        action = current_action(state)
        self._last_action = action
        sink = self._sink
        if sink is not None:
            sink.observe(_now_ns(), action in RECORDED_ACTION_VALUES, state.timestamp)

    def _drain(self, cycle_end: bool = False) -> None:
        """Drain now (any thread): the session's pump; ``cycle_end``: a handler is about to save the cycle, so the
        changes-only streams close it."""
        session = self.session
        if session is not None and session.running:
            session.pump(cycle_end=cycle_end)

    def _drained(self, chunk: Any) -> None:
        self._last_drain = time.monotonic()

    @property
    def stats(self) -> dict:
        """Counters: ``rows_drained``, ``rows_recorded`` (rows inside recording windows), plus the sampler's
        ``stats`` while it runs; with GPUs ``gpu_samples``, the driver samples' totals (samples drained, dropped by
        the full side buffer, absent series: the stop event's ``gpu_samples`` of ``record``) and ``late`` (taken in
        a cycle already saved: :class:`~sysprof.profiler.composer_sink.ComposerSink`)."""
        out = dict(self._counts)
        if self.sampler is not None:
            out.update(self.sampler.stats)
        if self._driver is not None and self._sink is not None:
            out["gpu_samples"] = dict(self._driver.samples.summary(), late=self._sink.late)
        return out


def _failed(what: str, exc: BaseException) -> None:
    log.warning("sysprof SystemProfiler: %s failed (%s: %s); it is off from here, training and the rest go on",
                what, type(exc).__name__, exc)


class BatchSpans(Producer):
    """The batches' times (``batch_start`` to ``batch_end``) as ``event/batch`` spans: the flight recorder's steps."""

    name = "batch spans"

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.spans: collections.deque = collections.deque()  # (start, end) ns of batches not yet taken
        self.start_ns: Optional[int] = None

    def event(self, name: str) -> None:
        """A training event (on the training thread)."""
        if name == "batch_start":
            self.start_ns = time.time_ns()
        elif name == "batch_end" and self.start_ns is not None:
            self.spans.append((self.start_ns, time.time_ns()))
            self.start_ns = None

    def take(self, batch: Any, stop_ns: Optional[int]) -> list:
        out, spans = [], self.spans
        while spans:
            start, end = spans.popleft()
            out.append(ev.span("event/batch", start, end, self.pid, cat="event"))
        return out
