"""A sysprof trace read back into per-channel series: the start and stop metadata, the declared units, the final
sampler statistics. Errors are :class:`ReportError`."""
from __future__ import annotations

import math
from array import array
from typing import Optional

from ..trace.columns import HeldSeries, expand, held
from ..trace.columns import event_ns as _event_ns
from ..trace.schema import (SAMPLES_EVENT, START_EVENT, STATS_COUNTER, STOP_EVENT, UNITS_EVENT, join_channel,
                            sample_times_array)

__all__ = ["ReportError", "Span", "Instant", "TraceData"]


class Span(tuple):
    """A duration event of the trace: ``(name, start_us, end_us, pid, tid, args)``. From an ``X`` event (``dur``)
    or a matched ``B``/``E`` pair (matched per (pid, tid) as a stack, as Chrome and Perfetto do; an ``E`` may
    omit its name). A ``B`` never closed ends at the trace's end (the stop event, else its last timestamp)."""

    __slots__ = ()
    _fields = ("name", "start_us", "end_us", "pid", "tid", "args")

    def __new__(cls, name, start_us, end_us, pid=None, tid=None, args=None):
        return tuple.__new__(cls, (name, float(start_us), float(end_us), pid, tid, args or {}))

    name = property(lambda self: self[0])
    start_us = property(lambda self: self[1])
    end_us = property(lambda self: self[2])
    pid = property(lambda self: self[3])
    tid = property(lambda self: self[4])
    args = property(lambda self: self[5])

    @property
    def duration_us(self) -> float:
        return self[2] - self[1]


class Instant(tuple):
    """An instant event of the trace other than sysprof's own start/stop: ``(name, ts_us, pid, tid, args)``."""

    __slots__ = ()
    _fields = ("name", "ts_us", "pid", "tid", "args")

    def __new__(cls, name, ts_us, pid=None, tid=None, args=None):
        return tuple.__new__(cls, (name, float(ts_us), pid, tid, args or {}))

    name = property(lambda self: self[0])
    ts_us = property(lambda self: self[1])
    pid = property(lambda self: self[2])
    tid = property(lambda self: self[3])
    args = property(lambda self: self[4])


_NUMBER = (int, float)
#: the types report relies on in sysprof's own metadata: a key with another type is left out (unknown)
_START_TYPES = {"channels": list, "errors": dict, "interval_s": _NUMBER, "cpu_count": int}
_STOP_TYPES = {"stats": dict}
_STATS_TYPES = {k: _NUMBER for k in ("taken", "dropped", "missed_deadlines", "sample_ns_mean", "sample_ns_p99")}


def _checked(args, types: dict) -> dict:
    """``args`` (empty unless a dict) without the keys of ``types`` whose values have other types."""
    if not isinstance(args, dict):
        return {}
    return {k: v for k, v in args.items() if k not in types or isinstance(v, types[k])}


#: µs: counter events at or past this (the year 10000) are left out, as are negative and non-finite times
_MAX_TS = 253402300800e6


def _ascending_distinct(a):
    """``a`` sorted with repeats left out (``a`` itself where it already is)."""
    import numpy as np

    if a.size < 2 or (a[1:] > a[:-1]).all():
        return a
    return np.unique(a)


def _sorted_times(t, ns, earlier):
    """``(t, order, times, ns)`` of a counter's times ``t`` (µs) and exact ``ns``: ``times`` sorted (stable),
    ``order`` the permutation (None where ``t`` was sorted). Where an ``earlier`` counter's sorted times are equal
    (``sysprof record --every-row`` writes every counter at every sample), its arrays are shared."""
    import numpy as np

    order = None
    if t.size > 1 and not (t[1:] >= t[:-1]).all():
        order = np.argsort(t, kind="stable")
    times = t if order is None else t[order]
    tns = ns if ns is None or order is None else ns[order]
    for _, _, other, other_ns in earlier:
        if other.size == times.size and other.size and other[0] == times[0] and other[-1] == times[-1] \
                and np.array_equal(other, times):
            times = other
            if tns is not None and other_ns is not None and np.array_equal(other_ns, tns):
                tns = other_ns
            break
    return t, order, times, tns


def _times_of(series):
    """The time array of each channel of ``series`` (without rebuilding the values of a HeldSeries)."""
    if isinstance(series, HeldSeries):
        return [series.times(ch) for ch in series]
    return [t for t, _ in series.values()]


class ReportError(ValueError):
    """A trace that cannot be reported on or plotted, with a one-line reason."""


def _parts_of_one(a, b) -> bool:
    """Whether start (or stop) event args ``a`` and ``b`` are of two parts of one ``record --max-size``."""
    pa, pb = (x.get("part") if isinstance(x, dict) else None for x in (a, b))
    return (isinstance(pa, dict) and isinstance(pb, dict) and pa.get("recording_id") is not None
            and pa.get("recording_id") == pb.get("recording_id"))


def _before(a, b) -> bool:
    return isinstance(a, (int, float)) and isinstance(b, (int, float)) and a < b


def _add_parts(a: dict, b: dict) -> dict:
    """The stop event args of two parts read as one: the later one's (``b``), with ``samples_written`` and the
    counted statistics (``taken``, ``dropped``, ``missed_deadlines``, ``cpu_seconds_total``) added up."""
    out = dict(b)
    sa, sb = a.get("stats") or {}, b.get("stats") or {}
    out["stats"] = dict(sb)
    for k in ("taken", "dropped", "missed_deadlines", "cpu_seconds_total"):
        if isinstance(sa.get(k), (int, float)) and isinstance(sb.get(k), (int, float)):
            out["stats"][k] = sa[k] + sb[k]
    if isinstance(a.get("samples_written"), int) and isinstance(b.get("samples_written"), int):
        out["samples_written"] = a["samples_written"] + b["samples_written"]
    return out


class TraceData:
    """What ``report`` needs from a trace: per-channel series, the start metadata, the final stats.

    ``series[channel] = (ts_us, values)``, sorted by time; a counter holds its value until its next
    event (Chrome's step semantics), so statistics weigh each value by how long it held. Each event of a
    counter gives a value to every key the counter has anywhere in the trace: NaN where the event lacks
    the key (or has ``null``), so a value is never held across a time it was unknown. ``units`` holds the
    units the trace declares (its ``sysprof units`` metadata events: channel -> symbol; empty in a trace
    without them). ``spans`` holds the duration events (:class:`Span`, sorted by start) and ``instants`` the
    instant events (:class:`Instant`, sorted by time), for phase attribution and plots.

    Memory follows the trace's changes, not its events: ``events`` (any iterable of Chrome-style event dicts: a
    list, or a reader's stream such as :func:`sysprof.trace.load.iter_events`) are taken one at a time and not kept;
    counter values go into columns as they come (:mod:`sysprof.trace.columns`: 8 B per counter event for its
    time, 16 B per value that changed), and ``series`` (a :class:`~sysprof.trace.columns.HeldSeries`) gives a
    channel's values whole only when it is asked for."""

    def __init__(self, events):
        import numpy as np

        from ..trace.columns import CounterColumns

        self.meta = {}
        self.stop = None
        self.start_ts = None
        self.stop_ts = None
        self.last_counter_stats = None
        self.last_counter_ts = None
        self.units = {}
        columns = None  # the counters' columns, from the first counter event on (it says whether ns are exact)
        self.spans = []
        self.instants = []
        open_spans = {}  # (pid, tid) -> stack of B events
        sample_ns = array("q")  # the times of the samples (SAMPLES_EVENT), where the trace lists them
        last_ts = None
        number = (int, float)
        add = exact = None
        for ev in events:
            if not isinstance(ev, dict):
                continue
            ph = ev.get("ph")
            name = ev.get("name")
            ts = ev.get("ts")
            if isinstance(ts, number):
                if last_ts is None or ts > last_ts:
                    last_ts = ts
                if ph == "C" and add is not None and 0 <= ts < _MAX_TS:  # (the common case first)
                    args = ev.get("args") or {}
                    if isinstance(args, dict):
                        if name == STATS_COUNTER:
                            self.last_counter_stats = args
                            self.last_counter_ts = ts
                        else:
                            add(name, ts, args, _event_ns(ev) if exact else None)
                    continue
            if ph == "C":
                if columns is None:
                    columns = CounterColumns(exact=_event_ns(ev) is not None)
                    add, exact = columns.add, columns.exact
                args = ev.get("args") or {}
                if not isinstance(ts, number) or not 0 <= ts < _MAX_TS or not isinstance(args, dict):
                    continue  # a time no sample can have (NaN, inf, negative, past the year 9999): left out
                if name == STATS_COUNTER:
                    self.last_counter_stats = args
                    self.last_counter_ts = ts
                    continue
                add(name, ts, args, _event_ns(ev) if exact else None)
            elif ph == "M" and name == SAMPLES_EVENT:
                sample_ns.frombytes(sample_times_array(ev.get("args")).tobytes())
            elif ph == "M" and name == UNITS_EVENT:
                args = ev.get("args")
                units = args.get("units") if isinstance(args, dict) else None
                if isinstance(units, dict):
                    self.units.update((str(ch), u) for ch, u in units.items() if isinstance(u, str))
            elif ph in ("i", "I") and name == START_EVENT:
                args = _checked(ev.get("args"), _START_TYPES)
                if not (_parts_of_one(self.meta, args) and _before(self.start_ts, ts)):  # parts: the first start's
                    self.meta = args
                    self.start_ts = ts
            elif ph in ("i", "I") and name == STOP_EVENT:
                args = _checked(ev.get("args"), _STOP_TYPES)
                if _parts_of_one(self.stop, args):  # parts: the last stop's, their counts added up
                    if _before(ts, self.stop_ts):
                        args, ts = _add_parts(args, self.stop), self.stop_ts
                    else:
                        args = _add_parts(self.stop, args)
                self.stop = args
                self.stop_ts = ts
            elif not isinstance(ts, (int, float)):
                continue
            elif ph == "X":
                dur = ev.get("dur")
                if isinstance(dur, (int, float)) and dur >= 0 and name is not None:
                    self.spans.append(Span(str(name), ts, ts + dur, ev.get("pid"), ev.get("tid"), ev.get("args")))
            elif ph == "B":
                open_spans.setdefault((ev.get("pid"), ev.get("tid")), []).append(ev)
            elif ph == "E":
                stack = open_spans.get((ev.get("pid"), ev.get("tid")))
                if stack:
                    b = stack.pop()
                    if ts >= b["ts"] and b.get("name") is not None:
                        self.spans.append(Span(str(b["name"]), b["ts"], ts, b.get("pid"), b.get("tid"),
                                               {**(b.get("args") or {}), **(ev.get("args") or {})}))
            elif ph in ("i", "I") and name is not None:
                self.instants.append(Instant(str(name), ts, ev.get("pid"), ev.get("tid"), ev.get("args")))
        end = self.stop_ts if isinstance(self.stop_ts, (int, float)) else last_ts
        for stack in open_spans.values():
            for b in stack:
                if b.get("name") is not None and end is not None and end >= b["ts"]:
                    self.spans.append(Span(str(b["name"]), b["ts"], end, b.get("pid"), b.get("tid"), b.get("args")))
        self.spans.sort(key=lambda s: (s.start_us, -s.end_us))
        self.instants.sort(key=lambda i: i.ts_us)
        #: the sample times (int64 ns, ascending, distinct) a changes-only ``sysprof record`` trace lists (its
        #: ``sysprof samples`` events); empty for a trace without them (every row, older, foreign)
        self.sample_ns = _ascending_distinct(np.frombuffer(sample_ns, dtype=np.int64) if len(sample_ns)
                                             else np.zeros(0, dtype=np.int64))
        raw = {}
        exact = {}
        shared = {}  # a counter's times, sorted, by the identity of its column (its keys share them)
        for name, key, t, index, values, ns in (columns.columns() if columns is not None else ()):
            sort = shared.get(id(t))
            if sort is None:
                sort = shared[id(t)] = _sorted_times(t, ns, shared.values())
            order, ts, tns = sort[1:]
            if order is not None:  # events out of time order (rare): its values sorted with them
                index, values = held(expand(index, values, t.size)[order])
            ch = join_channel(str(name), str(key))
            raw[ch] = (ts, index, values)
            exact[ch] = tns
        order = [c for c in self.meta.get("channels") or [] if isinstance(c, str)]
        known = set(order)
        order += [c for c in raw if c not in known]
        #: channel -> (times, values): see the class docstring (a :class:`~sysprof.trace.columns.HeldSeries`, which
        #: keeps each channel's changes and gives its values whole when asked for)
        self.series = HeldSeries({ch: raw[ch] for ch in order if ch in raw})
        #: channel -> int64 ns of each of its times (-1 where unknown), where the trace carries exact ns
        #: (``.pftrace``: :class:`~sysprof.trace.perfetto.TraceTime` timestamps; an integer ``ts_ns``); else None
        self.series_ns = {ch: exact[ch] for ch in self.series} if columns is not None and columns.exact else None
        self._timestamps = None  # (the time arrays it was taken from, the union)

    @property
    def recorded(self) -> bool:
        """Whether the trace has ``sysprof record``'s metadata (its start event)."""
        return self.start_ts is not None

    @property
    def truncated(self) -> bool:
        """A ``sysprof record`` trace without its stop event (the recorder was killed or the disk filled)."""
        return self.recorded and self.stop is None

    def stats(self) -> dict:
        if self.stop is not None and self.stop.get("stats"):
            return _checked(self.stop["stats"], _STATS_TYPES)
        return _checked(self.last_counter_stats, _STATS_TYPES)

    def timestamps(self):
        """The distinct times of the series' events (µs, ascending). Taken once while the series keep their time
        arrays (the keys of a counter share theirs: each distinct array is taken once)."""
        import numpy as np

        arrays = list({id(t): t for t in _times_of(self.series)}.values())
        cached = getattr(self, "_timestamps", None)
        if cached is not None and len(cached[0]) == len(arrays) and all(a is b for a, b in zip(cached[0], arrays)):
            return cached[1]
        if not arrays:
            union = np.zeros(0)
        elif len(arrays) == 1:
            union = _ascending_distinct(arrays[0])
        else:
            union = np.unique(np.concatenate(arrays))
        self._timestamps = (arrays, union)
        return union

    def interval(self):
        """``(seconds, source)``: the sampling interval from the metadata (source ``"metadata"``), else the
        median spacing of the counter timestamps (``"median spacing"``); ``(None, None)`` when neither."""
        import numpy as np

        iv = self.meta.get("interval_s")
        if isinstance(iv, (int, float)) and iv > 0:
            return float(iv), "metadata"
        ts = self.timestamps()
        if ts.size >= 2:
            return float(np.median(np.diff(ts))) / 1e6, "median spacing"
        return None, None

    def interval_us(self, channel: Optional[str] = None) -> float:
        """The sampling interval in µs (see :meth:`interval`; 1 when unknown); with a sampler ``channel``, its
        source's own interval where the metadata has one (``intervals_s``: ``record --interval-gpu``, the GPU's
        10 ms default) and it is longer."""
        iv, _ = self.interval()
        iv = iv * 1e6 if iv else 1.0
        own = self.meta.get("intervals_s")
        if channel is not None and isinstance(own, dict):
            from sysprof.sampling.registry import source_of

            v = own.get(source_of(channel))
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v * 1e6 > iv:
                return v * 1e6
        return iv

    def weights(self, t):
        """How long (µs) each value of a series held: until the series' next event; the last one an interval."""
        import numpy as np

        w = np.empty_like(t)
        if t.size:
            w[:-1] = np.diff(t)
            w[-1] = self.interval_us()
        return w
