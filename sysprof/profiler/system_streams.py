"""What SystemProfiler sends where: :class:`RecordingLog` (when the profiler was recording, so which drained rows
are emitted) and :class:`ChangedEvents` (changes-only counter events for a handler that takes one event at a
time, e.g. Composer's own ``JSONTraceHandler``)."""
from __future__ import annotations

from typing import Any

import numpy as np

from sysprof.trace.tracks import Changes

__all__ = ["RecordingLog", "ChangedEvents"]


class RecordingLog:
    """When the profiler was recording: a step function of wall-clock time built from event observations.

    ``observe(t_ns, recording, timestamp)`` appends a step when ``recording`` or the ``timestamp`` object changes;
    the value at time ``t`` is that of the last step at or before ``t`` (not recording before the first step).
    """

    def __init__(self) -> None:
        self.times: list = []
        self.recording: list = []
        self.stamps: list = []

    def observe(self, t_ns: int, recording: bool, timestamp: Any) -> None:
        if self.times and self.recording[-1] == recording and self.stamps[-1] is timestamp:
            return
        self.times.append(t_ns)
        self.recording.append(recording)
        self.stamps.append(timestamp)

    def classify(self, ts_ns: np.ndarray) -> tuple:
        """For sample times ``ts_ns`` (int64, ascending): ``(mask, step_index)``; ``mask`` (bool array) is true for
        rows sampled while recording, ``step_index`` (int array) indexes :attr:`stamps` for each row."""
        if not self.times:
            return np.zeros(len(ts_ns), dtype=bool), np.zeros(len(ts_ns), dtype=np.intp)
        idx = np.searchsorted(np.asarray(self.times, dtype=np.int64), ts_ns, side="right") - 1
        valid = idx >= 0
        idx = np.maximum(idx, 0)
        mask = np.asarray(self.recording, dtype=bool)[idx] & valid
        return mask, idx

    def prune(self, before_ns: int) -> None:
        """Forget steps no longer needed for samples taken at or after ``before_ns`` (keeps the step in force)."""
        keep_from = max(0, int(np.searchsorted(np.asarray(self.times, dtype=np.int64), before_ns, side="right")) - 1)
        if keep_from:
            del self.times[:keep_from], self.recording[:keep_from], self.stamps[:keep_from]


class ChangedEvents:
    """Changes-only counter events for one handler without ``process_counter_rows`` (e.g. Composer's
    ``JSONTraceHandler``): the rule of :class:`~sysprof.trace.tracks.Changes`, restarted at each cycle's end
    (:meth:`finish`: the last row's other counters, so each saved file holds every counter's values)."""

    def __init__(self, series: list) -> None:
        self.series = series
        self.changes = Changes([(lo, hi) for _, _, _, lo, hi in series])
        self.last: Any = None  # (wall ns, timestamp) of the last row sent

    def _send(self, handler: Any, g: int, row: list, t_ns: int, timestamp: Any) -> None:
        name, categories, keys, lo, hi = self.series[g]
        values = self.changes.args(g, keys, row[lo:hi])
        if values is not None:
            handler.process_counter_event(name=name, categories=categories, timestamp=timestamp,
                                          wall_clock_time_ns=t_ns, values=values)

    def send(self, handler: Any, rows: Any) -> None:
        if not len(rows):
            return
        mask = self.changes.mask(rows.values)
        self.last = (int(rows.times_ns[-1]), rows.timestamps[-1])
        own = rows.track_ns  # a series stamped with its reading time (a GPU's)
        for r in np.flatnonzero(mask.any(axis=1)).tolist():
            row, t_ns, timestamp = rows.values[r].tolist(), int(rows.times_ns[r]), rows.timestamps[r]
            for g in np.flatnonzero(mask[r]).tolist():
                self._send(handler, g, row, int(own[g][r]) if g in own else t_ns, timestamp)

    def finish(self, handler: Any) -> None:
        if self.changes.prev is not None and self.last is not None:
            row = self.changes.prev.tolist()
            for g in self.changes.finish_tracks():
                self._send(handler, g, row, *self.last)
        self.changes.reset()
