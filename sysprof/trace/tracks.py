"""Counter tracks: how sampler rows become trace counter events, for every sink."""
from __future__ import annotations

from .chrome import counter_args
from .schema import split_channel

__all__ = ["EventBuilder"]


class EventBuilder:
    """Turns sampler batches into Chrome counter events: one event per channel group and row.

    With ``changes_only`` (the default) a group's event is written only for rows where one of its values
    differs from the row before (NaN equal to NaN), plus the first row; ``finish()`` writes every group's
    last row. Chrome and Perfetto draw a counter as a step function that holds its value until the next
    event, so nothing is lost, and idle devices (loop disks, a quiet NIC) cost nothing after their first
    event. ``report`` weighs each value by how long it held.

    NaN and +/-inf values are left out of an event (:func:`~sysprof.trace.chrome.counter_args`); a row with no
    value left writes nothing, except ``"args": {}`` when the group had values before: the old values end there.
    ``rows`` counts the sample rows seen (the samples written)."""

    def __init__(self, channels, system_pid: int, process_pid=None, float_ts: bool = False,
                 changes_only: bool = True):
        import numpy as np

        groups = {}
        for i, ch in enumerate(channels):
            group, key = split_channel(ch)
            groups.setdefault(group, ([], []))
            groups[group][0].append(i)
            groups[group][1].append(key)
        self.groups = []
        for group, (idx, keys) in groups.items():
            followed = process_pid is not None and group.split("/", 1)[0] in ("process", "process_tree")
            pid = process_pid if followed else system_pid
            self.groups.append((group, pid, np.asarray(idx, dtype=np.intp), tuple(keys)))
        self.float_ts = float_ts
        self.changes_only = changes_only
        self.rows = 0
        self._known = [False] * len(self.groups)  # per group: whether its last event had a value
        self._prev = None          # the last row seen (values), to compare the next batch's first row with
        self._last_ts_ns = None
        self._emitted_last = None  # per group: whether the last row seen was written for it

    def ts(self, t_ns: int):
        return round(t_ns / 1000.0, 3) if self.float_ts else t_ns // 1000

    def events(self, batch):
        import numpy as np

        n = len(batch)
        self.rows += n
        if n == 0 or not self.groups:
            return []
        ts_ns = batch.timestamps_ns.tolist()
        ts = [self.ts(t) for t in ts_ns]
        values = np.asarray(batch.values, dtype=np.float64)
        if self.changes_only:
            prev = np.empty_like(values)
            prev[1:] = values[:-1]
            if self._prev is not None:
                prev[0] = self._prev
            nan = np.isnan(values)
            differs = (values != prev) & ~(nan & np.isnan(prev))
            if self._prev is None:
                differs[0] = True
        rows_by_group = []
        emitted_last = []
        for g, (group, pid, idx, keys) in enumerate(self.groups):
            if self.changes_only:
                mask = differs[:, idx].any(axis=1)
                rows = np.flatnonzero(mask).tolist()
                emitted_last.append(bool(mask[-1]))
            else:
                rows = range(n)
                emitted_last.append(True)
            if len(rows):
                rows_by_group.append((g, group, pid, keys, rows, values[rows][:, idx].tolist()))
        self._prev = values[-1].copy()
        self._last_ts_ns = ts_ns[-1]
        self._emitted_last = emitted_last
        out = []
        for g, group, pid, keys, rows, vals in rows_by_group:
            for r, v in zip(rows, vals):
                args = self._args(g, keys, v)
                if args is not None:
                    out.append((r, {"name": group, "ph": "C", "ts": ts[r], "pid": pid, "tid": 0, "args": args}))
        out.sort(key=lambda e: e[0])  # stable: time order, groups in channel order within a row
        return [e for _, e in out]

    def _args(self, g, keys, values):
        """The args of group ``g``'s event for one row, NaN and +/-inf left out; None: write no event."""
        args = counter_args(keys, values)
        if not args and not self._known[g]:
            return None  # still unknown: nothing to say
        self._known[g] = bool(args)
        return args

    def finish(self):
        """Events that repeat the last row for every group not written at that row (the trace's end)."""
        if self._prev is None or not self.changes_only:
            return []
        t = self.ts(self._last_ts_ns)
        last = self._prev.tolist()
        out = []
        for g, ((group, pid, idx, keys), done) in enumerate(zip(self.groups, self._emitted_last)):
            args = None if done else self._args(g, keys, [last[i] for i in idx.tolist()])
            if args is not None:
                out.append({"name": group, "ph": "C", "ts": t, "pid": pid, "tid": 0, "args": args})
        return out
