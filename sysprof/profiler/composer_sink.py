"""Composer's profiler as a sink of the recording session (:class:`ComposerSink`): what
:class:`sysprof.SystemProfiler` (hence :class:`sysprof.Profiler` and :func:`sysprof.profile`) hands its trace
handlers from each :class:`~sysprof.pipeline.Chunk`, only what was sampled while the profiler recorded (the
:class:`~sysprof.profiler.system_streams.RecordingLog` the callback keeps from the training events), each with the
training timestamp current then:

* the rows: one counter event per (row, trace name) under Composer's names (the ``"composer"``
  :class:`~sysprof.trace.tracks.TrackLayout`), as :class:`~sysprof.profiler.trace_handler.CounterRows` to a
  handler with ``process_counter_rows`` (sysprof's), else changes only
  (:class:`~sysprof.profiler.system_streams.ChangedEvents`, finished at each cycle's end) or every event;
* the session's instants (:mod:`sysprof.pipeline.producers`), with the args ``sysprof record`` gives them:
  ``gpu xid`` at the row where ``gpu/<i>/xid_total`` rose, ``sysprof intervals`` at each change the CPU budget made
  to the intervals, and ``sysprof gpu_refresh`` (the GPU refresh periods measured at start) at the first drain
  while recording after it is known (so it lands in one cycle's file); through ``process_system_instant``
  (sysprof's handlers write the args; a handler without it, Composer's, gets ``process_instant_event``, no args);
* the GPU driver's buffered samples, ``gpu/<i>/<series>`` ``{<series>: value}`` at the driver's own times, through
  ``process_system_counter`` with their units (a plain ``process_counter_event`` for a handler without it). The
  reader asks the driver every 0.5 s, so a sample reaches a drain late: one taken in a cycle whose file was
  already saved is left out (counted: :attr:`ComposerSink.late`) rather than written into the next cycle's file;
* the torch allocator's statistics (``memory/cuda/<name>``, with ``profile_memory``) and the clock-sync rounds of a
  distributed run (``sysprof clock``), at each drain while recording.

All categories of the instants and driver samples are ``("gpu",)``. A handler that raises is reported once and
skipped for the rest of that call; the others are still served.
"""
from __future__ import annotations

import logging
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from sysprof import distributed
from sysprof.pipeline import Chunk, Sink
from sysprof.trace.composer import CUDA_MEMORY_KEYS
from sysprof.profiler.system_streams import ChangedEvents, RecordingLog
from sysprof.profiler.trace_handler import report_handler_error, send_counter_rows, send_system_events
from sysprof.trace import events as ev

__all__ = ["ComposerSink", "send_instants", "send_counters"]

log = logging.getLogger("sysprof.profiler.system_profiler")

_CATEGORIES = ("gpu",)


def send_instants(handlers: list, instants: Sequence[tuple]) -> None:
    """``(event, timestamp)`` instants to each handler (``process_system_instant``, else the plain
    ``process_instant_event``); one handler's failure is reported once and skips it only."""
    send_system_events(handlers, "process_system_instant", "process_instant_event", "args",
                       [dict(name=e.name, categories=_CATEGORIES, timestamp=timestamp, wall_clock_time_ns=e.t_ns,
                             args=e.args) for e, timestamp in instants])


def send_counters(handlers: list, counters: Sequence[tuple]) -> None:
    """``(event, timestamp, units)`` counters to each handler (``process_system_counter``, else the plain
    ``process_counter_event``); one handler's failure is reported once and skips it only."""
    send_system_events(handlers, "process_system_counter", "process_counter_event", "units",
                       [dict(name=e.name, categories=_CATEGORIES, timestamp=timestamp, wall_clock_time_ns=e.t_ns,
                             values=e.args, units=units) for e, timestamp, units in counters])


class ComposerSink(Sink):
    """The trace handlers of Composer's profiler fed from a session (see the module).

    Args:
        handlers: ``handlers() -> list``: the profiler's trace handlers now.
        layout: the ``"composer"`` :class:`~sysprof.trace.tracks.TrackLayout` of the session's channels.
        changes_only: what a handler without ``process_counter_rows`` gets (changes only, else every event).
        counts: ``{"rows_drained", "rows_recorded"}`` added to at each drain (the callback's ``stats``).
        now: wall ns now (the clock of the callback's observations).
        arrival_ns: how long after it was taken a driver sample may still arrive (0: no GPU channels): the
            recording log is kept that far back.
        cuda_device: ``cuda_device() -> int | None``: the training thread's CUDA device (None: read no allocator
            statistics).
        clock_rows: the clock-sync estimates not yet emitted (appended to by
            :class:`sysprof.distributed.ClockSync`; emptied here).
    """

    name = "composer profiler"

    def __init__(self, handlers: Callable[[], list], layout: Any, *, changes_only: bool = True,
                 counts: Optional[Dict[str, int]] = None, now: Callable[[], int],
                 arrival_ns: int = 0, cuda_device: Callable[[], Optional[int]] = lambda: None,
                 clock_rows: Optional[list] = None) -> None:
        self.handlers = handlers
        self.layout = layout
        self.changes_only = bool(changes_only)
        self.counts = counts if counts is not None else {"rows_drained": 0, "rows_recorded": 0}
        self.now = now
        self.arrival_ns = int(arrival_ns)
        self.cuda_device = cuda_device
        self.clock_rows = clock_rows if clock_rows is not None else []
        self.log = RecordingLog()
        # the log: observed on the training thread, read by the drains; re-entered by a stop from a signal handler
        # that interrupted a drain on the training thread
        self.lock = threading.RLock()
        self.streams: Dict[int, ChangedEvents] = {}  # id(handler) -> its changes-only state
        self.units: Dict[str, dict] = {}  # a driver sample series -> {series: unit}, shared by its events
        self.pending_refresh: List[dict] = []  # GPU refresh args waiting for a drain while recording
        self.saved_ns: Optional[int] = None  # when the last cycle was saved: driver samples taken before are late
        self.late = 0
        self.cuda_failed = False

    def observe(self, t_ns: int, recording: bool, timestamp: Any) -> None:
        """The profiler's action at ``t_ns`` (any thread)."""
        with self.lock:
            self.log.observe(t_ns, recording, timestamp)

    @property
    def recording(self) -> bool:
        return bool(self.log.recording and self.log.recording[-1])

    def take(self, chunk: Chunk) -> None:
        with self.lock:
            self._take(chunk)

    def _take(self, chunk: Chunk) -> None:
        batch, log = chunk.batch, self.log
        n = len(batch)
        self.counts["rows_drained"] += n
        now = self.now()
        if chunk.events or self.pending_refresh:
            self._events(chunk.events, now)
        if n:
            ts = batch.timestamps_ns
            mask, step = log.classify(ts)
            if mask.any():
                self._emit(ts[mask], batch.values[mask], step[mask])
            before = int(ts[-1])
            if self.arrival_ns:  # keep the steps of driver samples still to come
                before = min(before, now - self.arrival_ns)
            log.prune(before)
        if self.recording:
            self._cuda_memory()
            if self.clock_rows:
                self._clock()
        if chunk.cycle_end or chunk.final:  # a handler is about to save the cycle (or the run ends)
            if self.streams:
                self._finish_streams()
            if self.arrival_ns:
                self.saved_ns = now

    # ---- the session's events ----
    def _events(self, events: list, now: int) -> None:
        """Instants and driver samples sampled while recording, to every handler (the refresh instant once, at the
        first drain while recording)."""
        from sysprof.sampling.gpu_refresh import REFRESH_EVENT
        from sysprof.trace.schema import UNITS_EVENT

        timed = []
        for e in events:
            if e.kind == ev.METADATA:
                if e.name == UNITS_EVENT:
                    self.units.update((s, {s: u}) for s, u in (e.args or {}).get("units", {}).items())
            elif e.kind == ev.INSTANT and e.name == REFRESH_EVENT:
                self.pending_refresh.append(e.args)
            elif e.kind in (ev.INSTANT, ev.COUNTER):
                timed.append(e)
        log = self.log
        instants, counters = [], []
        if timed:
            mask, step = log.classify(np.array([e.t_ns for e in timed], dtype=np.int64))
            stamps, saved = log.stamps, self.saved_ns
            for e, m, i in zip(timed, mask.tolist(), step.tolist()):
                if not m:
                    continue
                if e.kind == ev.INSTANT:
                    instants.append((e, stamps[i]))
                elif saved is not None and e.t_ns < saved:
                    self.late += 1
                else:
                    counters.append((e, stamps[i], self.units.get(e.name) or {}))
        if self.pending_refresh and self.recording:
            instants += [(ev.instant(REFRESH_EVENT, now, 0, args), log.stamps[-1]) for args in self.pending_refresh]
            self.pending_refresh = []
        if instants or counters:
            handlers = self.handlers()
            if instants:
                send_instants(handlers, instants)
            if counters:
                send_counters(handlers, counters)

    # ---- the rows ----
    def _emit(self, times: np.ndarray, values: np.ndarray, steps: np.ndarray) -> None:
        layout = self.layout
        if not layout:
            return
        stamps = self.log.stamps
        rows = layout.counter_rows(times, values, [stamps[i] for i in steps.tolist()])
        for h in self.handlers():
            try:
                bulk = getattr(h, "process_counter_rows", None)
                if bulk is not None:
                    bulk(rows)
                elif self.changes_only:  # e.g. Composer's handlers: one call per event that says something new
                    stream = self.streams.get(id(h))
                    if stream is None or stream.series is not rows.series:
                        stream = self.streams[id(h)] = ChangedEvents(rows.series)
                    stream.send(h, rows)
                else:
                    send_counter_rows(h, rows)
            except Exception as e:  # noqa: BLE001 - the rest of this batch is skipped for this handler only
                report_handler_error(h, e, "process_counter_event")
        self.counts["rows_recorded"] += len(rows)

    def _finish_streams(self) -> None:
        handlers = {id(h): h for h in self.handlers()}
        for key, stream in list(self.streams.items()):
            h = handlers.get(key)
            if h is None:
                del self.streams[key]
                continue
            try:
                stream.finish(h)
            except Exception as e:  # noqa: BLE001
                report_handler_error(h, e, "process_counter_event")

    # ---- counters of the callback's own ----
    def _counter(self, name: str, category: str, t_ns: int, values: dict) -> None:
        timestamp = self.log.stamps[-1]
        for h in self.handlers():
            try:
                h.process_counter_event(name=name, categories=(category,), timestamp=timestamp,
                                        wall_clock_time_ns=t_ns, values=values)
            except Exception as e:  # noqa: BLE001
                report_handler_error(h, e, "process_counter_event")

    def _clock(self) -> None:
        """The clock-sync rounds measured since the last drain, as ``sysprof clock`` counter events."""
        rows = [self.clock_rows.pop(0) for _ in range(len(self.clock_rows))]  # pop: safe against the appender
        for e in rows:
            self._counter(distributed.CLOCK_COUNTER, "clock", e.at_ns,
                          {"offset_us": e.offset_us, "uncertainty_us": e.uncertainty_us})

    def _cuda_memory(self) -> None:
        """The torch allocator's statistics of the training thread's device (read on the drain's thread, whose
        own current device is 0), once CUDA was seen initialized there."""
        device = self.cuda_device()
        torch = sys.modules.get("torch")
        if torch is None or device is None or self.cuda_failed:
            return
        try:
            stats = torch.cuda.memory_stats(device=device)
        except Exception:  # noqa: BLE001 - the rest of the trace goes on without them
            log.exception("sysprof SystemProfiler: reading the CUDA allocator's statistics failed; no more reads")
            self.cuda_failed = True
            return
        t = self.now()
        for torch_name, name in CUDA_MEMORY_KEYS.items():
            if torch_name in stats:
                value = stats[torch_name] / 1e9 if "bytes" in torch_name else stats[torch_name]
                self._counter(f"memory/cuda/{name}", "memory", t, {name: value})
