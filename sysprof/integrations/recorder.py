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
import collections
import logging
import os
import pathlib
import platform
import sys
import threading
import time
from typing import Any, Dict, Optional, Sequence

from sysprof import forks
from sysprof.integrations.phase_log import PhaseLog
from sysprof.integrations.summaries import SummaryWindow

__all__ = ["Recorder", "free_path", "trace_head", "DEFAULT_SOURCES", "DEFAULT_INTERVALS", "DRAIN_PERIOD", "FLUSH_PERIOD", "PHASE_CATEGORY"]

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


def trace_head(pid: int, rank: int, framework: str, t_start_ns: int, sampler, channels, ts, units: dict) -> list:
    """The first events of an in-process recording's trace (and of its flight dumps): the process name, the rank
    metadata, the start event with the metadata, the ``units`` event; ``ts`` turns ns into the trace's ``ts``."""
    from sysprof import __version__
    from sysprof.trace.schema import START_EVENT

    meta = {"version": __version__, "command_line": " ".join(sys.argv), "framework": framework,
            "pid": pid, "recorder_pid": pid, "rank": rank, "interval_s": sampler.interval,
            "intervals_s": dict(getattr(sampler, "intervals", {})), "capacity": getattr(sampler, "capacity", None),
            "backend": getattr(sampler, "backend", None), "channels": list(channels),
            "errors": dict(getattr(sampler, "errors", {})), "host": platform.node(), "kernel": platform.release(),
            "cpu_count": os.cpu_count(), "start_time_ns": t_start_ns,
            "devices": list(sampler.device_filter.globs) if hasattr(sampler, "device_filter") else None}
    return [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
             "args": {"name": f"{framework or 'training'} (pid {pid})"}},
            {"name": "global_rank", "ph": "M", "pid": pid, "tid": 0, "args": {"value": rank}},
            {"name": "clock_sync_timestamp_us", "ph": "M", "pid": pid, "tid": 0, "args": {"value": t_start_ns // 1000}},
            {"name": START_EVENT, "ph": "i", "s": "g", "ts": ts(t_start_ns), "pid": pid, "tid": 0, "args": meta},
            units]


class Recorder:
    """One recording: :meth:`start`, phases and summaries while training, :meth:`stop` (idempotent).

    Args:
        path: the trace file; an existing file is never replaced (:func:`free_path` picks the name written,
            :attr:`path`), unless ``overwrite``.
        interval: sampling interval (s); intervals (over :data:`DEFAULT_INTERVALS`), devices, backend: as
            :class:`sysprof.Sampler`'s.
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
                 rank: int = 0, flight: Any = None) -> None:
        self.requested_path = pathlib.Path(path)
        self.path = self.requested_path
        self.interval = interval
        self.sources = tuple(DEFAULT_SOURCES if sources is None else sources)
        self.intervals = {k: v for k, v in DEFAULT_INTERVALS.items()
                          if k in self.sources and max(v, interval) == v}  # at least the interval itself
        self.intervals.update(intervals or {})
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
        self.builder: Any = None
        self._rows: Any = None  # the RowTemplate of a Chrome JSON trace (the fast path), else None
        self._pending: collections.deque = collections.deque()  # (batch, spans) collected, not yet written
        self.samples = 0
        self._lock = threading.Lock()  # collecting (drain, phases, window): the recorder's thread or a log step
        self._write_lock = threading.Lock()  # writing the trace: the recorder's thread or the stop
        self._stopped = threading.Event()  # stopping or stopped
        self._finished = threading.Event()  # the trace is closed
        self._thread: Optional[threading.Thread] = None
        # the phases: the hooks append (one clock read, one append), the recorder's thread pairs them
        self.phases = PhaseLog()
        self.phase_begin = self.phases.begin
        self.phase_end = self.phases.end
        self.phase_cancel = self.phases.cancel
        self.phase_restart = self.phases.restart
        self.add_span = self.phases.span
        self._pid = os.getpid()
        self._watch: Optional[tuple] = None  # (thread ident, frame id, code) of the trainer's call
        self._failed = False
        self.reason: Optional[str] = None
        self.t_start_ns = 0
        forks.register(self)

    def _after_fork_in_child(self) -> None:
        """A forked child (a DataLoader worker) inherits the parent's recording: it must never write or stop it."""
        self._stopped.set()
        self.sampler = self.writer = None
        self._thread = None
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()

    @property
    def running(self) -> bool:
        """Recording (started, not stopping)."""
        return self._thread is not None and not self._stopped.is_set()

    def wait_closed(self, timeout: Optional[float] = None) -> bool:
        """Wait until a stop has closed the trace (from any thread); False on timeout."""
        return self._finished.wait(timeout)

    # ---- start ----
    def start(self) -> None:
        """Make the sampler and the trace, write its head, start sampling and the recorder's thread.

        Raises:
            ValueError: a bad sampler argument; OSError: the trace cannot be created.
        """
        from sysprof.sampling.sampler import Sampler, ring_capacity
        from sysprof.trace.chrome import ChromeTraceWriter
        from sysprof.trace.tracks import EventBuilder, RowTemplate

        flags = {name: True for name in self.sources}
        flags.update(self.options)
        capacity = ring_capacity(self.interval, 8.0, 1024, 1 << 20)  # drained every 0.5 s: 8 s of margin
        sampler = Sampler(interval=self.interval, capacity=capacity, backend=self.backend, intervals=self.intervals,
                          devices=self.devices, **flags)
        if self.flight_options is not None:  # a folder for the dumps, no trace
            self.path.mkdir(parents=True, exist_ok=True)
        else:
            self._open_writer()
        self.sampler = sampler
        channels = tuple(sampler.channels)
        self.builder = EventBuilder(channels, system_pid=self._pid, float_ts=self.interval < 1e-3)
        exact = getattr(self.writer, "timestamp", None)
        if exact is not None:  # .pftrace keeps every ns
            self.builder.ts = exact
        if isinstance(self.writer, ChromeTraceWriter) and not self.builder.float_ts:
            # rows as text from %-templates: half the drain's time of event dicts + the JSON encoder, same events
            layout = self.builder.layout
            self._rows = RowTemplate(layout.series, self._pid, 0, changes_only=True, timed=[g for g, _ in layout.timed])
        if self.window is not None:
            self.window.bind(channels)
        self.t_start_ns = time.time_ns()
        if self.writer is not None:
            self.writer.write_many(self._head(channels))
            self.writer.flush()
        else:
            from sysprof.flight import FlightRecorder

            self.flight = FlightRecorder(self.path, channels, sampler.interval, self.flight_options,
                                         head=self._head(channels), float_ts=self.builder.float_ts, pid=self._pid,
                                         stop_args=lambda: {"stats": dict(sampler.stats), "errors": dict(sampler.errors)},
                                         notify=log.warning, suffix=f"-rank{self.rank}")
        sampler.start()
        self._stopped.clear()
        self._thread = threading.Thread(target=self._loop, name="sysprof-recorder", daemon=True)
        self._thread.start()
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

    def _head(self, channels) -> list:
        return trace_head(self._pid, self.rank, self.framework, self.t_start_ns, self.sampler, channels,
                          self.builder.ts, self.builder.units_event())

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
        if ready is not None:  # the window as of the recorder's latest drain (at most DRAIN_PERIOD ago)
            return ready
        try:
            self._collect(snapshot=False)  # none since the previous log: the samples until now, here
        except Exception as e:  # noqa: BLE001 - the summaries still cover what was drained before
            self._fail("drain", e)
        return self.window.take()

    def watch(self, frame) -> None:
        """Stop when ``frame`` (the trainer's ``fit``/``train`` call) has left its thread's stack: the backstop for
        an exception or interrupt that no trainer hook reports. The recorder's thread looks every drain."""
        if frame is not None:
            self._watch = (threading.get_ident(), id(frame), frame.f_code)

    # ---- the recorder's thread ----
    def _loop(self) -> None:
        last_flush = time.monotonic()
        while not self._stopped.wait(DRAIN_PERIOD):
            try:
                self._drain()
                if self.writer is not None and time.monotonic() - last_flush >= FLUSH_PERIOD:
                    with self._write_lock:
                        self._write_stats()
                        self.writer.flush()
                    last_flush = time.monotonic()
            except Exception as e:  # noqa: BLE001 - e.g. the disk filled up: what was flushed stays readable
                self._fail("write", e)
            if self._watch is not None and not self._watched_alive():
                if self.flight is not None:  # without the trainer's end hook: an exception or an interrupt
                    self.flight.trigger("exception", "the training call ended without its end hook")
                self._stop_here("training call ended")
                return

    def _watched_alive(self) -> bool:
        ident, frame_id, code = self._watch
        frame = sys._current_frames().get(ident)
        while frame is not None:
            if id(frame) == frame_id and frame.f_code is code:
                return True
            frame = frame.f_back
        return False

    def _collect(self, snapshot: bool = True, stop: Optional[tuple] = None) -> None:
        """Drain the sampler, pair the phases, fold both into the summary window (and, from the recorder's thread,
        leave the window's summaries ready for the next log: ``snapshot``); the rows and spans wait in
        ``_pending`` for :meth:`_write`. ``stop``: (ns, reason), the last collection (open phases closed)."""
        with self._lock:
            sampler = self.sampler
            if sampler is None:
                return
            spans = self.phases.collect() if stop is None else self.phases.close(*stop)
            batch = sampler.drain()
            self.samples += len(batch)
            window = self.window
            if window is not None:
                for name, start, end, _, _ in spans:
                    window.add_span(name, start, end)
                window.add(batch, snapshot_ns=time.time_ns() if snapshot else None)
            if len(batch) or spans:
                self._pending.append((batch, spans))

    def _drain(self, stop: Optional[tuple] = None) -> None:
        """Collect, then write what was collected (the recorder's thread, and the stop)."""
        self._collect(stop=stop)
        self._write(last=stop is not None)

    def _write(self, last: bool = False) -> None:
        with self._write_lock:
            writer, rows, pending = self.writer, self._rows, self._pending
            if self.flight is not None:
                while pending:
                    batch, spans = pending.popleft()
                    self.flight.feed_events(self._phase_events(spans))
                    self.flight.feed(batch)
                return
            if writer is None:
                return
            while pending:
                batch, spans = pending.popleft()
                if rows is None:
                    writer.write_many(self.builder.events(batch) if len(batch) else [])
                elif len(batch):
                    layout = self.builder.layout
                    rendered = rows.render(batch.timestamps_ns, layout.project(batch.values),
                                           layout.track_times_ns(batch.timestamps_ns, batch.values))
                    if rendered:
                        writer.write_encoded(",\n".join(t for t, _ in rendered), sum(n for _, n in rendered))
                if spans:  # after the counters: readers sort, the format allows it
                    writer.write_many(self._phase_events(spans))
            if last:
                if rows is None:
                    writer.write_many(self.builder.finish())
                else:
                    for text, count in rows.finish():
                        writer.write_encoded(text, count)

    def _phase_events(self, spans) -> list:
        ts, pid, out = self.builder.ts, self._pid, []
        for name, start, end, tid, args in spans:
            ev = {"name": name, "cat": PHASE_CATEGORY, "ph": "X", "ts": ts(start), "dur": ts(end) - ts(start),
                  "pid": pid, "tid": tid}
            if args:
                ev["args"] = args
            out.append(ev)
        out.sort(key=_ts)
        return out

    def _write_stats(self) -> None:
        from sysprof.trace.schema import STATS_COUNTER
        from sysprof.trace.tracks import counter_event

        st = self.sampler.stats
        self.writer.write(counter_event(STATS_COUNTER, self.builder.ts(time.time_ns()), self._pid, 0,
                                        {k: st.get(k) for k in ("taken", "dropped", "missed_deadlines")}))

    def _fail(self, what: str, e: BaseException) -> None:
        if not self._failed:
            self._failed = True
            log.warning("sysprof: %s failed (%s: %s); the trace %s keeps what was written", what,
                        type(e).__name__, e, self.path)

    # ---- stop ----
    def stop(self, reason: str = "end") -> None:
        """Stop sampling, write the last rows, the phases still open but tentative ones (ended now,
        ``args.closed``: the reason) and the stop event, close the trace. Idempotent; never raises."""
        thread = self._thread
        if thread is None or self._stopped.is_set():
            return
        self._stopped.set()
        if thread is not threading.current_thread():
            thread.join()
        self._finish(reason)

    def _stop_at_exit(self) -> None:
        """atexit: a recording still running when the interpreter exits (an exception that ended the program)."""
        exc = getattr(sys, "last_value", None)  # the exception that ended the program, if one did
        if exc is not None and self.flight is not None:
            self.flight.trigger("exception", f"{type(exc).__name__}: {exc}")
        self.stop("interpreter exit")

    def _stop_here(self, reason: str) -> None:
        if not self._stopped.is_set():
            self._stopped.set()
            self._finish(reason)

    def _finish(self, reason: str) -> None:
        from sysprof.trace.schema import STOP_EVENT

        self.reason = reason
        self._watch = None
        atexit.unregister(self._stop_at_exit)
        sampler, writer = self.sampler, self.writer
        if sampler is None or (writer is None and self.flight is None):
            self._finished.set()
            return
        try:
            sampler.stop()
            self._drain(stop=(time.time_ns(), reason))  # phases still open end with the recording
            if writer is None:  # a flight recording: the pending dumps, with what arrived
                self.flight.close()
                return
            with self._write_lock:
                self._write_stats()
                stats = dict(sampler.stats)
                writer.write({"name": STOP_EVENT, "ph": "i", "s": "g", "ts": self.builder.ts(time.time_ns()),
                              "pid": self._pid, "tid": 0,
                              "args": {"stats": stats, "samples_written": self.samples, "reason": reason,
                                       "elapsed_s": (time.time_ns() - self.t_start_ns) / 1e9,
                                       "errors": dict(sampler.errors)}})
        except Exception as e:  # noqa: BLE001
            self._fail("stop", e)
        finally:
            try:
                if writer is not None:
                    writer.close()
            except Exception as e:  # noqa: BLE001
                self._fail("close", e)
            self.sampler = self.writer = None
            self._finished.set()


def _ts(event: dict):
    return event["ts"]
