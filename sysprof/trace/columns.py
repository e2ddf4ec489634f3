"""Counter events gathered into columns as a trace is read: the one place where a trace's counter values are kept.

A reader hands each counter event to :meth:`CounterColumns.add` as it parses it (``sysprof.report.TraceData`` does,
for every format); the event itself is not kept. Per counter (event name) there is one column of times (float64
µs, 8 B an event, shared by the counter's keys) and per args key a *held* column: the value of each event that
differs from the key's previous one (bit for bit: -0.0 after 0.0 and one NaN after another of a different payload
count as changes) and the event's index (8 + 8 B a change). A counter event repeats its counter's every key
(``sysprof record`` writes a counter's whole group when one of its values changed, ``--every-row`` every group at
every sample), so most of a long trace's values are repeats: they cost nothing. The columns grow in place
(:class:`array.array`); the events of a counter wait in a small buffer (``FLUSH`` events) and go into the columns
together, a few numpy operations per buffer rather than a Python step per value.

:class:`HeldSeries` hands the columns out as ``channel -> (times, values)``, each value array rebuilt from its
changes when asked for (exactly the values the events held, one per event), so only the channel in use is whole.

What a column holds (the rules ``TraceData`` documents): each event gives a value to every key the counter has
anywhere in the trace, NaN where the event lacks the key or has ``null``; keys in the order they first appear. A
value numpy cannot take as a float64 (a string that is no number, an object) makes its channel no channel (left
out), as a whole.
"""
from __future__ import annotations

from array import array
from collections.abc import MutableMapping
from itertools import chain
from operator import itemgetter
from typing import Any, Dict, Iterator, Optional, Tuple

__all__ = ["CounterColumns", "HeldSeries", "event_ns", "held", "expand", "FLUSH"]

#: events of one counter buffered before they go into its columns
FLUSH = 1024
_NO_NS = -1  # an event without an exact ns where the trace has them


def event_ns(ev: dict) -> Optional[int]:
    """The exact ns of an event where its reader kept them: its integer ``ts_ns``, or the ``.ns`` of a
    :class:`~sysprof.trace.perfetto.TraceTime` ``ts`` (the Perfetto reader's); None when it has neither."""
    ns = ev.get("ts_ns")
    if not isinstance(ns, int):
        ns = getattr(ev.get("ts"), "ns", None)
    return ns if isinstance(ns, int) else None


def _changes(v, last: Optional[int]):
    """Positions in ``v`` (float64) whose bits differ from the value before (``last``: the bits before ``v[0]``;
    None: none, so ``v[0]`` is a change)."""
    import numpy as np

    bits = v.view(np.int64)
    change = np.empty(v.size, dtype=bool)
    if v.size:
        change[0] = last is None or bits[0] != last
        np.not_equal(bits[1:], bits[:-1], out=change[1:])
    return np.flatnonzero(change)


def held(v):
    """``(index, values)`` of the changes of the float64 array ``v`` (see the module docstring); ``expand`` is the
    inverse."""
    import numpy as np

    v = np.ascontiguousarray(v, dtype=np.float64)
    at = _changes(v, None)
    return at, v[at]


def expand(index, values, n: int):
    """The ``n`` values whose changes are ``index`` (ascending, 0 first), ``values`` (float64): each held until the
    next change."""
    import numpy as np

    if not n:
        return np.zeros(0)
    counts = np.empty(index.size, dtype=np.int64)
    np.subtract(index[1:], index[:-1], out=counts[:-1])
    counts[-1] = n - index[-1]
    return np.repeat(values, counts)


class _Column:
    """One key's held column: the index and value of each change, and the bits of the last value."""

    __slots__ = ("index", "values", "last", "rows")

    def __init__(self, rows: int) -> None:
        import numpy as np

        self.index = array("q")
        self.values = array("d")
        self.last = None
        self.rows = 0
        if rows:  # a key first seen after ``rows`` events: unknown (NaN) until then
            self.extend(np.full(rows, np.nan))

    def extend(self, v) -> None:
        at = _changes(v, self.last)
        if at.size:
            self.index.frombytes((at + self.rows).tobytes())
            self.values.frombytes(v[at].tobytes())
        if v.size:
            self.last = int(v[-1:].view("int64")[0])
        self.rows += v.size


class _Track:
    """One counter's columns: ``times`` (µs), ``ns`` (exact ns, where the trace has them), ``cols`` per key (None:
    not numeric), and the events not yet in them."""

    __slots__ = ("times", "ns", "cols", "known", "getter", "buf_ts", "buf_args", "buf_ns", "rows")

    def __init__(self, exact: bool) -> None:
        self.times = array("d")
        self.ns = array("q") if exact else None
        self.cols: Dict[Any, Optional[_Column]] = {}  # key -> its column; insertion order: first appearance
        self.known: set = set()
        self.getter = None  # itemgetter of every key, in order (None: rebuild)
        self.buf_ts: list = []
        self.buf_args: list = []
        self.buf_ns: list = []
        self.rows = 0  # events in the columns

    def flush(self) -> None:
        import numpy as np

        args = self.buf_args
        n = len(args)
        if not n:
            return
        known, cols = self.known, self.cols
        if not known.issuperset(chain.from_iterable(args)):  # new keys (one C loop over them all), in the order
            for a in args:                                   # they appear
                for k in a:
                    if k not in known:
                        known.add(k)
                        cols[k] = _Column(self.rows)
                        self.getter = None
        self.times.frombytes(np.array(self.buf_ts, dtype=np.float64).tobytes())
        if self.ns is not None:
            self.ns.frombytes(np.array(self.buf_ns, dtype=np.int64).tobytes())
        keys = list(cols)
        if keys:
            self._values(keys, args, n)
        self.rows += n
        self.buf_ts, self.buf_args, self.buf_ns = [], [], []

    def _values(self, keys, args, n) -> None:
        import numpy as np

        cols = self.cols
        if self.getter is None:
            self.getter = itemgetter(*keys)
        block = None
        if all(cols[k] is not None for k in keys):
            full, getter = len(keys), self.getter
            try:  # one conversion of the whole buffer: every event with every key, every value a number
                rows = map(getter, args)
                block = np.fromiter(rows if full == 1 else chain.from_iterable(rows), dtype=np.float64,
                                    count=n * full).reshape(n, full)
            except (KeyError, TypeError, ValueError, OverflowError):
                try:  # ... or some event without some key (an event has every key that has as many)
                    block = np.array([getter(a) if len(a) == full else tuple(map(a.get, keys)) if full > 1 else
                                      a.get(keys[0]) for a in args], dtype=np.float64).reshape(n, full)
                except (TypeError, ValueError, OverflowError):
                    block = None
            if block is not None:
                block = block.T.copy()
        if block is not None:
            for k, v in zip(keys, block):
                cols[k].extend(v)
            return
        for k in keys:  # some event lacks a key (NaN there), or a value is not a number
            col = cols[k]
            if col is None:
                continue
            try:
                v = np.array([a.get(k) for a in args], dtype=np.float64)
                if v.ndim != 1:
                    raise ValueError("not a number")
            except (TypeError, ValueError, OverflowError):
                cols[k] = None  # not numeric: not a channel
                continue
            col.extend(v)


class CounterColumns:
    """The counter events of a trace as columns (see the module docstring). ``exact``: the trace carries each
    event's exact ns (``.pftrace``: :class:`~sysprof.trace.perfetto.TraceTime`); they get a column too."""

    def __init__(self, exact: bool = False) -> None:
        self.exact = exact
        self._tracks: Dict[Any, _Track] = {}

    def add(self, name, ts, args: dict, ns: Optional[int] = None) -> None:
        """One counter event of counter ``name`` at ``ts`` (µs: int, float or TraceTime) with values ``args``;
        ``ns`` its exact time where the trace has it."""
        track = self._tracks.get(name)
        if track is None:
            track = self._tracks[name] = _Track(self.exact)
        track.buf_ts.append(ts)
        track.buf_args.append(args)
        if self.exact:
            track.buf_ns.append(_NO_NS if ns is None else ns)
        if len(track.buf_args) >= FLUSH:
            track.flush()

    def columns(self) -> Iterator[Tuple[Any, Any, Any, Any, Any, Optional[Any]]]:
        """``(name, key, times, index, values, ns)`` of every numeric (counter, key), counters in the order they
        first appear, keys too: ``times`` (float64 µs, one per event, shared by a counter's keys), the key's changes
        (``index`` int64 into ``times``, ``values`` float64: :func:`expand` gives a value per event), ``ns`` (int64,
        -1 where an event had none, shared; None unless ``exact``). A counter's columns are handed over as they
        are taken: the builder is empty afterwards."""
        import numpy as np

        tracks, self._tracks = self._tracks, {}
        for name in list(tracks):
            track = tracks.pop(name)
            track.flush()
            times = np.frombuffer(track.times, dtype=np.float64) if track.rows else np.zeros(0)
            ns = None
            if track.ns is not None:
                ns = np.frombuffer(track.ns, dtype=np.int64) if track.rows else np.zeros(0, dtype=np.int64)
            for key, col in track.cols.items():
                if col is not None:
                    index = np.frombuffer(col.index, dtype=np.int64) if len(col.index) else np.zeros(0, np.int64)
                    values = np.frombuffer(col.values, dtype=np.float64) if len(col.values) else np.zeros(0)
                    yield name, key, times, index, values, ns


class HeldSeries(MutableMapping):
    """``channel -> (times, values)``, kept as their changes (:func:`held`): ``series[ch]`` rebuilds the values (a
    new array each time), :meth:`times` and :meth:`changes` give a channel without it. A channel set with
    ``series[ch] = (t, v)`` is kept as its changes too."""

    __slots__ = ("_held",)

    def __init__(self, channels: Optional[Dict[str, tuple]] = None) -> None:
        self._held: Dict[str, tuple] = dict(channels or {})  # ch -> (times, index, values)

    def __getitem__(self, ch: str):
        t, index, values = self._held[ch]
        return t, expand(index, values, t.size)

    def __setitem__(self, ch: str, series) -> None:
        import numpy as np

        t, v = series
        self._held[ch] = (np.asarray(t, dtype=np.float64),) + held(v)

    def __delitem__(self, ch: str) -> None:
        del self._held[ch]

    def __iter__(self):
        return iter(self._held)

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, ch) -> bool:
        return ch in self._held

    def times(self, ch: str):
        """The times (µs) of channel ``ch``'s events, without its values."""
        return self._held[ch][0]

    def changes(self, ch: str):
        """``(times, index, values)`` of channel ``ch``: its events' times and its changes."""
        return self._held[ch]

    def __repr__(self) -> str:
        return f"HeldSeries({len(self._held)} channels)"
