"""The in-process recorder behind the trainer callbacks: a :class:`sysprof.Sampler` drained into a sysprof trace by
a background thread, with the trainer's phases as duration events and a :class:`SummaryWindow` for the logger.

The trace is a ``sysprof record`` trace (the start event with its metadata, the units, the samples as counter
tracks, the stop event with the sampler's statistics), plus one ``X`` event per phase on the training thread's
pid/tid (category ``sysprof.phase``), so ``sysprof report`` (its verdict and ``--by``), :func:`sysprof.by_phase`
and :func:`sysprof.read_trace` read it like a recorded one. ``.json`` (default), ``.json.gz`` or ``.pftrace``
by the file's name. The file is flushed every second, so a process killed mid-way (SIGKILL, OOM) leaves a trace
that every reader takes (:func:`sysprof.trace.chrome.read_trace` accepts a truncated one; ``sysprof repair``
closes it).

On the training thread: the phase calls (:class:`~sysprof.integrations.phase_log.PhaseLog`'s: a clock read and an
append each), and :meth:`Recorder.summaries` at log steps: the summaries the recorder's thread left ready at its
latest drain (the window then ends there, at most :data:`DRAIN_PERIOD` and 10 % of the window before the log; what
came after goes into the next window), or, for a log more often than every 5 s, a drain and
:meth:`SummaryWindow.take` there. Drains, pairing the phases, folding the summaries, encoding and I/O
happen on the recorder's thread every :data:`DRAIN_PERIOD` s. Nothing here raises into the caller once
:meth:`Recorder.start` has returned; failures are logged once (logger ``sysprof.integrations``).
"""
from __future__ import annotations

import atexit
import logging
import os
import pathlib
import sys
import threading
import time
from typing import Any, Dict, Optional, Sequence

from sysprof import forks
from sysprof.integrations.phase_log import PhaseLog
from sysprof.integrations.summaries import SummarySink, SummaryWindow
from sysprof.pipeline.session import Producer
from sysprof.trace import events

__all__ = ["Recorder", "free_path", "DEFAULT_SOURCES", "DEFAULT_INTERVALS", "DRAIN_PERIOD", "FLUSH_PERIOD", "PHASE_CATEGORY"]

log = logging.getLogger("sysprof.integrations")

#: sources sampled when none are named: the Sampler's defaults, the training process, PSI and the GPUs (each
#: where this machine has it; one it lacks has no channels and says why in the start event's ``errors``)
DEFAULT_SOURCES = ("cpu", "memory", "disk", "net", "process", "pressure", "gpu")
#: per-source intervals (s) used unless ``intervals`` names the source (each at least the interval): CPU, the
#: training process and the GPUs at every sample; memory, disks and NICs every 50 ms, PSI every 100 ms (its ten
#: counters move at every read: 40 % of the trace's bytes at 10 ms). Measured (benchmarks/bench_integrations.py's
#: machine, 2 vCPUs): the sampling thread at 10 ms costs 1.8 % of a core with every source at 10 ms, 1.2 % so
#: (the kernel's rendering of /proc/meminfo, diskstats and net/dev is most of it)
DEFAULT_INTERVALS = {"memory": 0.05, "disk": 0.05, "net": 0.05, "pressure": 0.1}
#: the recorder's thread drains the sampler this often (s), and flushes the trace at least every FLUSH_PERIOD s
DRAIN_PERIOD = 0.5
FLUSH_PERIOD = 1.0
#: the category of the phases' duration events
PHASE_CATEGORY = "sysprof.phase"


def free_path(path: "os.PathLike[str] | str") -> pathlib.Path:
    """``path`` when nothing is there, else the first of ``stem-1.ext``, ``stem-2.ext``, ... that is free (a
    trace never replaces a file; ``.json.gz`` stays the suffix)."""
    path = pathlib.Path(path)
    name = path.name
    ext = ".json.gz" if name.lower().endswith(".json.gz") else path.suffix
    stem = name[: len(name) - len(ext)] if ext else name
    candidate, n = path, 0
    while os.path.lexists(candidate):
        n += 1
        candidate = path.with_name(f"{stem}-{n}{ext}")
    return candidate


def _head_events(pid: int, rank: int, framework: str, t_start_ns: int, sampler, channels, units: dict) -> list:
    from sysprof.distributed import rank_info

    ranks = dict(rank_info().as_dict(), rank=rank)
    meta = events.start_metadata(sampler, channels, t_start_ns, recorder_pid=pid, pid=pid, framework=framework,
                                 ranks=ranks)
    return events.head(meta, pid, t_start_ns, units, events.process_name(pid, f"{framework or 'training'} (pid {pid})"))


class _Phases(Producer):
    """The trainer's phases (:class:`PhaseLog`) as duration events on the training thread, at each drain; at the
    stop the phases still open but tentative ones end then (``args.closed``: :attr:`reason`)."""

    name = "phases"

    def __init__(self, log: PhaseLog, pid: int) -> None:
        self.log, self.pid, self.reason = log, pid, "end"

    def take(self, batch, stop_ns):
        spans = self.log.collect() if stop_ns is None else self.log.close(stop_ns, self.reason)
        out = [events.span(name, start, end, self.pid, tid, args or None, PHASE_CATEGORY)
               for name, start, end, tid, args in spans]
        out.sort(key=lambda e: e.t_ns)
        return out


class Recorder:
    """One recording: :meth:`start`, phases and summaries while training, :meth:`stop` (idempotent).

    Args:
        path: the trace file; an existing file is never replaced (:func:`free_path` picks the name written,
            :attr:`path`), unless ``overwrite``.
        interval: sampling interval (s); intervals (over :data:`DEFAULT_INTERVALS`, which are defaults to the
            budget: stretched first), devices, backend, budget: as :class:`sysprof.Sampler`'s.
        sources: source names to sample (:data:`DEFAULT_SOURCES` when None); ``per_cpu`` etc. via ``options``.
        summaries: the :class:`SummaryWindow` fed by every drain and phase (None: no summaries).
        framework: ``"lightning"``, ``"transformers"``: written into the start event.
        flight: :class:`~sysprof.flight.FlightOptions`: no trace of the whole run; a flight recorder
            (:attr:`flight`) keeps the last window and writes dumps around anomalies into the folder ``path``
            (``flight-<UTC>-<trigger>-rank<R>.json``), each named in one line of the ``sysprof.integrations``
            logger.
    """

    def __init__(self, path, *, interval: float = 0.01, sources: Optional[Sequence[str]] = None,
                 intervals: Optional[Dict[str, float]] = None, devices: Optional[Sequence[str]] = None,
                 backend: str = "auto", options: Optional[Dict[str, Any]] = None,
                 summaries: Optional[SummaryWindow] = None, overwrite: bool = False, framework: str = "",
                 rank: int = 0, flight: Any = None, budget: Any = "default") -> None:
        self.requested_path = pathlib.Path(path)
        self.path = self.requested_path
        self.interval = interval
        self.sources = tuple(DEFAULT_SOURCES if sources is None else sources)
        self.defaults = {k: v for k, v in DEFAULT_INTERVALS.items()
                         if k in self.sources and max(v, interval) == v}  # at least the interval itself
        self.intervals = dict(intervals or {})  # the user's: the budget stretches them last
        self.budget = budget
        self.devices = None if devices is None else list(devices)
        self.backend = backend
        self.options = dict(options or {})
        self.window = summaries
        self.overwrite = overwrite
        self.framework = framework
        self.rank = int(rank)
        self.flight_options = flight
        self.flight: Any = None  # the FlightRecorder of a flight recording
        self.sampler: Any = None
        self.writer: Any = None
        self.session: Any = None  # the pipeline: sampler -> drain -> the trace (or the flight recorder), summaries
        self._summaries: Optional[SummarySink] = None
        self._stopped = threading.Event()  # stopping or stopped
        self._finished = threading.Event()  # the trace is closed
        self._stop_lock = threading.RLock()  # re-entered by a stop from a signal handler
        # the phases: the hooks append (one clock read, one append), the session's thread pairs them
        self.phases = PhaseLog()
        self.phase_begin = self.phases.begin
        self.phase_end = self.phases.end
        self.phase_cancel = self.phases.cancel
        self.phase_restart = self.phases.restart
        self.add_span = self.phases.span
        self._phases = _Phases(self.phases, os.getpid())
        self._pid = os.getpid()
        self._watch: Optional[tuple] = None  # (thread ident, frame id, code) of the trainer's call
        self._failed = False
        self.reason: Optional[str] = None
        self.t_start_ns = 0
        forks.register(self)

    def _after_fork_in_child(self) -> None:
        """A forked child (a DataLoader worker) inherits the parent's recording: it must never write or stop it
        (its session forgets its sampler and sinks: sysprof.pipeline)."""
        self._stopped.set()
        self.sampler = self.writer = self.session = None
        self._stop_lock = threading.RLock()

    @property
    def samples(self) -> int:
        """Sample rows drained so far."""
        return self.session.rows if self.session is not None else 0

    @property
    def running(self) -> bool:
        """Recording (started, not stopping)."""
        return self.session is not None and not self._stopped.is_set()

    def wait_closed(self, timeout: Optional[float] = None) -> bool:
        """Wait until a stop has closed the trace (from any thread); False on timeout."""
        return self._finished.wait(timeout)

    # ---- start ----
    def start(self) -> None:
        """Make the sampler and the trace, write its head, start sampling and the session's drain thread.

        Raises:
            ValueError: a bad sampler argument; OSError: the trace cannot be created.
        """
        from sysprof.pipeline import Session
        from sysprof.pipeline.producers import standard
        from sysprof.sampling.sampler import Sampler, ring_capacity
        from sysprof.trace.sink import TraceSink

        flags = {name: True for name in self.sources}
        flags.update(self.options)
        capacity = ring_capacity(self.interval, 8.0, 1024, 1 << 20)  # drained every 0.5 s: 8 s of margin
        sampler = Sampler(interval=self.interval, capacity=capacity, backend=self.backend, intervals=self.intervals,
                          default_intervals=self.defaults, devices=self.devices, budget=self.budget, **flags)
        channels = tuple(sampler.channels)
        float_ts = self.interval < 1e-3
        pid = self._pid
        sinks: list = []
        if self.flight_options is not None:  # a folder for the dumps, no trace
            from sysprof.flight import FlightRecorder, FlightSink

            self.path.mkdir(parents=True, exist_ok=True)
            self.flight = FlightRecorder(self.path, channels, sampler.interval, self.flight_options,
                                         float_ts=float_ts, pid=pid,
                                         stop_args=lambda: {"stats": dict(sampler.stats), "errors": dict(sampler.errors)},
                                         notify=log.warning, suffix=f"-rank{self.rank}")
            sinks.append(FlightSink(self.flight, head=lambda start: _head_events(
                pid, self.rank, self.framework, start.t_start_ns, sampler, start.channels, _units(start.channels, pid))))
        else:
            self._open_writer()
            sinks.append(TraceSink(self.writer, self._head, system_pid=pid, float_ts=float_ts, fast=True,
                                   stats=lambda: dict(sampler.stats)))
        if self.window is not None:
            self._summaries = SummarySink(self.window, snapshots=True, spans=PHASE_CATEGORY)
            sinks.append(self._summaries)
        self.sampler = sampler
        session = Session(sampler, sinks, [self._phases] + standard(sampler, pid), period=DRAIN_PERIOD,
                          flush_period=FLUSH_PERIOD, on_failure=self._fail, name="sysprof-recorder")
        session.after_pump(self._check_watch)
        self.session = session
        self._stopped.clear()
        try:
            session.start()
        except BaseException:
            if self.writer is not None:
                self.writer.close()
            raise
        self.t_start_ns = session.t_start_ns
        atexit.register(self._stop_at_exit)

    def _open_writer(self) -> None:
        from sysprof.trace.perfetto import writer_class_for

        self.path.parent.mkdir(parents=True, exist_ok=True)
        writer_class = writer_class_for(self.path)
        for _ in range(100):  # a name taken between the look and the create: the next one
            self.path = self.requested_path if self.overwrite else free_path(self.requested_path)
            try:
                self.writer = writer_class(self.path, overwrite=self.overwrite)
                return
            except FileExistsError:
                continue
        raise FileExistsError(f"no free trace name next to {self.requested_path}")

    def _head(self, sink) -> list:
        return _head_events(self._pid, self.rank, self.framework, self.session.t_start_ns, self.sampler,
                            self.session.channels, sink.builder.layout.units)

    # ---- the training thread ----
    # phase_begin(name, t_ns=None, tentative=False), phase_end(name, t_ns=None, **args), phase_cancel(name),
    # phase_restart(name, t_ns=None) and add_span(name, start_ns, end_ns, **args) are the PhaseLog's
    # (sysprof/integrations/phase_log.py: its rules; each a clock read and an append on the calling thread)

    def summaries(self) -> Dict[str, float]:
        """The summary window that ends now (a drain first, so it holds every sample until now); {} when the
        recorder has no window or no longer runs."""
        if self.window is None or not self.running:
            return {}
        ready = self.window.take_ready()
        if ready is not None:  # the window as of the session's latest drain (at most DRAIN_PERIOD ago)
            return ready
        sink = self._summaries
        sink.snapshots = False  # none since the previous log: the samples until now, here
        try:
            self.session.pump()
        finally:
            sink.snapshots = True
        return self.window.take()

    def watch(self, frame) -> None:
        """Stop when ``frame`` (the trainer's ``fit``/``train`` call) has left its thread's stack: the backstop for
        an exception or interrupt that no trainer hook reports. The session's thread looks every drain."""
        if frame is not None:
            self._watch = (threading.get_ident(), id(frame), frame.f_code)

    def _check_watch(self, chunk) -> None:
        if self._watch is None or chunk.final or self._stopped.is_set() or self._watched_alive():
            return
        if self.flight is not None:  # without the trainer's end hook: an exception or an interrupt
            self.flight.trigger("exception", "the training call ended without its end hook")
        self._finish("training call ended")

    def _watched_alive(self) -> bool:
        ident, frame_id, code = self._watch
        frame = sys._current_frames().get(ident)
        while frame is not None:
            if id(frame) == frame_id and frame.f_code is code:
                return True
            frame = frame.f_back
        return False

    def _fail(self, what: str, e: BaseException) -> None:
        if not self._failed:
            self._failed = True
            log.warning("sysprof: %s failed (%s: %s); the trace %s keeps what was written", what,
                        type(e).__name__, e, self.path)

    # ---- stop ----
    def stop(self, reason: str = "end") -> None:
        """Stop sampling, write the last rows, the phases still open but tentative ones (ended now,
        ``args.closed``: the reason) and the stop event, close the trace. Idempotent; never raises."""
        self._finish(reason)

    def _stop_at_exit(self) -> None:
        """atexit: a recording still running when the interpreter exits (an exception that ended the program)."""
        exc = getattr(sys, "last_value", None)  # the exception that ended the program, if one did
        if exc is not None and self.flight is not None:
            self.flight.trigger("exception", f"{type(exc).__name__}: {exc}")
        self.stop("interpreter exit")

    def _finish(self, reason: str) -> None:
        with self._stop_lock:
            session = self.session
            if session is None or self._stopped.is_set():
                return
            self._stopped.set()
        self.reason = reason
        self._watch = None
        atexit.unregister(self._stop_at_exit)
        self._phases.reason = reason
        try:
            session.stop({"reason": reason})  # closes the trace (or the flight recorder, its pending dumps)
        except Exception as e:  # noqa: BLE001
            self._fail("stop", e)
        finally:
            self.sampler = self.writer = None
            self._finished.set()


def _units(channels, pid) -> dict:
    from sysprof.trace.tracks import TrackLayout

    return TrackLayout(channels, "sysprof", system_pid=pid).units
