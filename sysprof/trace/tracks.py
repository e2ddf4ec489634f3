"""Counter tracks: the one model of how sampler rows become trace counter events, for every sink.

A :class:`TrackLayout` is built once per channel set. It groups the channels into tracks (one counter event name
each) with their args keys, source columns, scale, units, category and pid, under one of two naming presets:

* ``"sysprof"`` (``sysprof record``): a track per :func:`~sysprof.trace.schema.split_channel` group, values as
  sampled, units from the registry, ``pid`` the recorder's (the followed process's for ``process/*``).
* ``"composer"`` (``SystemProfiler`` and ``JSONTraceHandler``): Composer's names, keys and scales, read from the
  data in :mod:`sysprof.trace.composer`; ``pid``/``tid`` are the writer's (global rank, OS pid).

Renderers over a layout:

* :class:`EventRenderer`: dict events, optionally changes-only, with the ``finish()`` rule
  (:class:`EventBuilder` is the CLI's name for it);
* :class:`RowTemplate`: the JSON text of whole rows in Composer's layout, one ``%``-template per row (the fast path
  of ``JSONTraceHandler``; the text is :func:`~sysprof.trace.chrome.encode_event`'s);
* :func:`counter_event`: one counter event dict, the only place a counter event is spelled out.

Every renderer follows the NaN rule (:func:`~sysprof.trace.chrome.counter_args`): NaN and +/-inf keys are left out,
an event with no key left is not written. :class:`EventRenderer` writes a whole value (within 2^53) as an integer
(``4096``, not ``4096.0``: the same number to every JSON reader) and, given ``decimals``, each value at its
channel's resolution (:class:`Quantiser`).

Values at the time they were true: a track with a :data:`~sysprof.trace.schema.READING_TIME_KEY` channel (each GPU's
``reading_time_seconds``, the wall-clock time its values were read) is stamped with that time, not the row's: the GPU
reader runs on its own thread and a row finds its latest reading up to an interval + 250 ms old, more when the
machine is loaded. The key itself is not written (the event's ``ts`` holds it); :meth:`TrackLayout.track_times_ns`
gives the times, every renderer takes them. Every row (not changes only), such a track is written once per reading.
"""
from __future__ import annotations

import itertools
import json
from functools import lru_cache
from typing import Any, NamedTuple, Optional, Sequence

from .chrome import counter_args, encode_event
from .composer import COUNTER_RULES, NAMED_SOURCES, counter_of
from .events import counter_event
from .schema import READING_TIME_KEY, join_channel, reading_times_ns, split_channel, units_event

__all__ = ["Track", "TrackLayout", "CounterTrack", "CounterRow", "EventRenderer", "EventBuilder", "RowTemplate",
           "Quantiser", "counter_event", "numbers"]

PRESETS = ("sysprof", "composer")


class Track:
    """One counter track: event ``name``, args ``keys``, the source ``columns`` of the keys (channel indices),
    ``scale`` (per key ``(multiplier, divisor)``; None: values as sampled), ``units`` (per key; None where not
    known), ``category`` (None: no ``cat``), ``pid`` (None: the writer's) and ``time_column`` (the channel that says
    when the values were read, never a key: :meth:`take_reading_time`; None: the row's time)."""

    __slots__ = ("name", "keys", "columns", "scale", "units", "category", "pid", "time_column")

    def __init__(self, name, keys, columns, scale=None, units=None, category=None, pid=None):
        self.name = name
        self.keys = tuple(keys)
        self.columns = list(columns)
        self.scale = scale
        self.units = tuple(units) if units is not None else (None,) * len(self.keys)
        self.category = category
        self.pid = pid
        self.time_column = None

    def take_reading_time(self, clocks: dict, channels) -> None:
        """Moves the reading-time channels (``clocks``: channel index -> the prefix it times, ``gpu/0`` for
        ``gpu/0/reading_time_seconds``) out of the keys, and sets ``time_column`` where every channel left shares
        one timed prefix (sysprof's ``gpu/0`` track; Composer's ``gpu/0/power_watts``)."""
        keep = [k for k, c in enumerate(self.columns) if c not in clocks]
        if len(keep) < len(self.columns):
            pick = lambda seq: tuple(seq[k] for k in keep)  # noqa: E731
            self.keys, self.units = pick(self.keys), pick(self.units)
            self.columns = list(pick(self.columns))
            if self.scale is not None:
                self.scale = list(pick(self.scale))
        prefixes = {channels[c].rpartition("/")[0] for c in self.columns}
        if len(prefixes) == 1:
            self.time_column = {p: c for c, p in clocks.items()}.get(prefixes.pop())


def _unnamed_source(channel: str):
    """The registry source of a channel that Composer's layout has no names for (not in ``NAMED_SOURCES``)."""
    from sysprof.sampling.registry import source_of

    source = source_of(channel)
    return None if source is None or source in NAMED_SOURCES else source


def _unit_of(channel: str):
    from sysprof.sampling.registry import unit_of

    return unit_of(channel)


def _sysprof_tracks(channels, system_pid, process_pid) -> list:
    groups: dict = {}
    for i, ch in enumerate(channels):
        group, key = split_channel(ch)
        groups.setdefault(group, ([], [], []))
        groups[group][0].append(i)
        groups[group][1].append(key)
        groups[group][2].append(_unit_of(ch))
    tracks = []
    for group, (idx, keys, units) in groups.items():
        followed = process_pid is not None and group.split("/", 1)[0] in _followed_prefixes()
        tracks.append(Track(group, keys, idx, None, units, None, process_pid if followed else system_pid))
    return tracks


@lru_cache(maxsize=1)
def _followed_prefixes() -> tuple:
    """Channel prefixes of the sources that measure the followed process itself (``SourceSpec.needs_target``):
    their tracks carry that process's pid in the sysprof preset."""
    from sysprof.sampling.registry import SOURCES

    return tuple(p.rstrip("/") for s in SOURCES.values() if s.needs_target for p in s.prefixes)


def _composer_tracks(channels, rates: bool) -> list:
    groups: dict = {}  # name -> (category, [(rule index, key, column, multiplier, divisor, unit)])
    for col, channel in enumerate(channels):
        hit = counter_of(channel)
        if hit is not None:
            index, rule, name, key = hit
            if rule.rates and not rates:
                continue
            entry = groups.setdefault(name, (rule.category, []))
            entry[1].append((index, key, col, float(rule.mul), float(rule.div),
                             _unit_of(channel) if rule.unit is None else rule.unit))
            continue
        source = _unnamed_source(channel)
        if source is not None and (rates or not channel.endswith("_per_second")):
            group, key = split_channel(channel)  # a source Composer never had: sysprof's name, unscaled
            entry = groups.setdefault(group, (source, []))
            entry[1].append((len(COUNTER_RULES), key, col, 1.0, 1.0, _unit_of(channel)))
    tracks = []
    for name, (category, members) in groups.items():
        members.sort(key=lambda m: m[0])  # keys in rule order (e.g. used_gb before available_gb)
        tracks.append(Track(name, [m[1] for m in members], [m[2] for m in members],
                            [(m[3], m[4]) for m in members], [m[5] for m in members], category, None))
    return tracks


class TrackLayout:
    """The counter tracks of one channel set (see the module docstring for the presets).

    Args:
        channels: sampler channel names, in column order.
        preset: ``"sysprof"`` or ``"composer"``.
        rates: composer preset: trace the ``*_per_second`` channels too.
        system_pid, process_pid: sysprof preset: ``pid`` of the tracks (``process/*`` and ``process_tree/*`` get
            ``process_pid`` when it is given).

    Attributes:
        tracks (list[Track]): in the order of their first channel.
        columns (list[int]): every track's source columns, track after track (the columns of :meth:`project`).
        series (list[tuple]): ``(name, categories, keys, lo, hi)`` per track: its keys are columns ``[lo, hi)`` of
            :meth:`project` (the :class:`~sysprof.profiler.trace_handler.CounterRows` layout).
        units (dict): channel name as the trace reader joins it (``join_channel(name, key)``) -> unit.

    Raises:
        ValueError: an unknown preset.
    """

    def __init__(self, channels: Sequence[str], preset: str = "sysprof", *, rates: bool = True,
                 system_pid: Any = 0, process_pid: Any = None) -> None:
        import numpy as np

        if preset not in PRESETS:
            raise ValueError(f"unknown track preset {preset!r} (one of {', '.join(PRESETS)})")
        self.channels = tuple(channels)
        self.preset = preset
        if preset == "composer":
            tracks = _composer_tracks(self.channels, rates)
        else:
            tracks = _sysprof_tracks(self.channels, system_pid, process_pid)
        clocks = {i: ch.rpartition("/")[0] for i, ch in enumerate(self.channels)
                  if ch.rpartition("/")[2] == READING_TIME_KEY}
        for t in tracks if clocks else ():
            t.take_reading_time(clocks, self.channels)
        self.tracks = [t for t in tracks if t.keys]
        #: ``(track index, channel index)`` of every track stamped with its own reading time
        self.timed = [(g, t.time_column) for g, t in enumerate(self.tracks) if t.time_column is not None]
        self.columns = [c for t in self.tracks for c in t.columns]
        self.series = []
        lo = 0
        for t in self.tracks:
            cats = () if t.category is None else (t.category,)
            self.series.append((t.name, cats, t.keys, lo, lo + len(t.keys)))
            lo += len(t.keys)
        scaled = any(t.scale is not None for t in self.tracks)
        self._columns = np.asarray(self.columns, dtype=np.intp)
        self._identity = not scaled and self.columns == list(range(len(self.channels)))
        self._mul = self._div = self._rounded = None
        if scaled:
            self._mul = np.array([s[0] for t in self.tracks for s in (t.scale or [(1.0, 1.0)] * len(t.keys))])
            self._div = np.array([s[1] for t in self.tracks for s in (t.scale or [(1.0, 1.0)] * len(t.keys))])
            rounded = [(k, hit[1].decimals) for k, c in enumerate(self.columns) if preset == "composer"
                       for hit in (counter_of(self.channels[c]),) if hit is not None and hit[1].decimals is not None]
            if rounded:  # scaled values rounded as their rule says (Composer's ms of the sampler's seconds)
                self._rounded = (np.asarray([k for k, _ in rounded], dtype=np.intp), Quantiser([d for _, d in rounded]))
        self.units = {join_channel(t.name, k): u for t in self.tracks for k, u in zip(t.keys, t.units)
                      if u is not None}

    def __len__(self) -> int:
        return len(self.tracks)

    def project(self, values):
        """Sampled values (rows x channels) -> float64 rows x :attr:`columns`, scaled to the tracks' units."""
        import numpy as np

        values = np.asarray(values, dtype=np.float64)
        if self._identity:
            return values
        out = values[:, self._columns]
        if self._mul is not None:
            out = out * self._mul / self._div
        if self._rounded is not None:
            cols, quantise = self._rounded
            out[:, cols] = quantise(out[:, cols])
        return out

    def units_event(self, pid: Any) -> dict:
        """The ``"sysprof units"`` metadata event declaring :attr:`units` (:func:`~sysprof.trace.schema.units_event`)."""
        return units_event(self.units, pid)

    def track_times_ns(self, times_ns, values) -> dict:
        """``{track index: int64 ns per row}`` for the :attr:`timed` tracks: when each row's values of the track were
        read (:func:`~sysprof.trace.schema.reading_times_ns`). Empty for a layout without timed tracks."""
        import numpy as np

        if not self.timed:
            return {}
        values = np.asarray(values, dtype=np.float64)
        return {g: reading_times_ns(times_ns, values[:, col]) for g, col in self.timed}

    def counter_rows(self, times_ns, values, timestamps):
        """The :class:`~sysprof.profiler.trace_handler.CounterRows` of sampled ``values`` at ``times_ns``."""
        from sysprof.profiler.trace_handler import CounterRows

        return CounterRows(self.series, times_ns, self.project(values), timestamps, units=self.units,
                           track_ns=self.track_times_ns(times_ns, values))


def new_readings(track_ns):
    """bool array: the rows whose reading time differs from the row before's (the first row: True): where a track
    stamped with its reading time gets an event when every row is written."""
    import numpy as np

    fresh = np.ones(len(track_ns), dtype=bool)
    fresh[1:] = track_ns[1:] != track_ns[:-1]
    return fresh


class Quantiser:
    """Values rounded to a number of decimals per column (``decimals[i]``: column ``i``'s, None: as it is).

    ``round(x * 10**d) / 10**d``, the double nearest the decimal with ``d`` places, whose shortest repr (what JSON
    writes) has at most ``d`` of them; a value too large for that to be exact (``|x| * 10**d >= 2**52``) is kept as
    it is, and so are NaN and +/-inf. ``-0.0`` becomes ``0.0``."""

    def __init__(self, decimals: Sequence[Optional[int]]) -> None:
        import numpy as np

        by: dict = {}
        for i, d in enumerate(decimals):
            if d is not None:
                by.setdefault(int(d), []).append(i)
        self.groups = [(np.asarray(cols, dtype=np.intp), 10.0 ** d) for d, cols in sorted(by.items())]

    def __call__(self, values):
        """A rounded copy of ``values`` (rows x columns, float64); ``values`` is left as it is."""
        import numpy as np

        out = np.array(values, dtype=np.float64)  # a copy: the caller's rows stay as sampled
        for cols, scale in self.groups:
            block = out[:, cols]
            scaled = block * scale
            with np.errstate(invalid="ignore"):
                exact = np.abs(scaled) < 2.0 ** 52  # False for NaN and +/-inf
            out[:, cols] = np.where(exact, np.rint(scaled) / scale, block)
        out += 0.0  # -0.0 -> 0.0
        return out


def numbers(block) -> list:
    """Rows of ``block`` (rows x columns, float64) as lists of Python numbers for JSON: a whole value within 2^53
    as an ``int`` (``4096``: two characters less than ``4096.0``, the same number to every reader), the others as
    ``float``."""
    import numpy as np

    with np.errstate(invalid="ignore"):
        whole = (block == np.rint(block)) & (np.abs(block) < 2.0 ** 53)
    if not whole.any():
        return block.tolist()
    if whole.all():
        return block.astype(np.int64).tolist()
    out = block.astype(object)
    out[whole] = block[whole].astype(np.int64).astype(object)
    return out.tolist()


class Changes:
    """The changes-only rule, one state per trace file and track layout (every changes-only renderer uses it).

    :meth:`mask` says which tracks of which rows are written: a track's event is written at a row when one of its
    values differs from the row before (NaN equal to NaN), and at the first row after construction or
    :meth:`reset` (every track: a file starts with every value). :meth:`args` applies the NaN rule to an event
    that is written: NaN and +/-inf keys are left out; an event with no key left is written as ``"args": {}``
    only when the track had values before (the old values end there), else not at all (None).
    :meth:`finish_tracks` names the tracks not written at the last row seen, for the closing row that repeats
    it (so the last values hold to the end of the file)."""

    def __init__(self, bounds: Sequence[tuple]) -> None:
        import numpy as np

        self._starts = np.asarray([lo for lo, _ in bounds], dtype=np.intp)
        self.n_tracks = len(bounds)
        self.reset()

    def reset(self) -> None:
        """Forget the previous row: the next row writes every track (a new file)."""
        self.prev = None  # the last row seen (projected values)
        self.differs = None  # the last mask()'s per-column changes
        self.known = [False] * self.n_tracks  # per track: whether its last event had a value
        self.written_last = None  # per track: whether the last row seen was written

    def mask(self, values):
        """bool array (rows x tracks) of the events to write for ``values`` (rows x projected columns)."""
        import numpy as np

        n = len(values)
        if n == 0 or self.n_tracks == 0:
            return np.zeros((n, self.n_tracks), dtype=bool)
        prev = np.empty_like(values)
        prev[1:] = values[:-1]
        if self.prev is not None:
            prev[0] = self.prev
        differs = (values != prev) & ~(np.isnan(values) & np.isnan(prev))
        if self.prev is None:
            differs[0] = True
        self.differs = differs  # per column: the rows whose value differs from the row before (CounterRow.changed)
        out = np.logical_or.reduceat(differs, self._starts, axis=1)
        self.prev = values[-1].copy()
        self.written_last = out[-1].tolist()
        return out

    def args(self, g: int, keys, values):
        """The args of track ``g``'s event (the NaN rule above); None: write no event."""
        args = counter_args(keys, values)
        if not args and not self.known[g]:
            return None  # still unknown: nothing to say
        self.known[g] = bool(args)
        return args

    def finish_tracks(self) -> list:
        """Indices of the tracks not written at the last row seen (none before the first row)."""
        if self.prev is None or self.written_last is None:
            return []
        return [g for g, done in enumerate(self.written_last) if not done]


class CounterTrack:
    """One counter track as a renderer writes it: event ``name``, ``pid``, ``tid``, category ``cat`` (None: none),
    args ``keys``, their ``units`` (None where not known; the registry's, from :class:`Track`) and ``idx`` (the
    track's columns in the renderer's projected rows). A writer declares it once (Perfetto: a counter track per
    key, with its unit) and takes its :class:`CounterRow` values as they come."""

    __slots__ = ("name", "pid", "tid", "cat", "keys", "units", "idx")

    def __init__(self, name, pid, tid, cat, keys, units, idx) -> None:
        self.name, self.pid, self.tid, self.cat = name, pid, tid, cat
        self.keys, self.units, self.idx = tuple(keys), tuple(units), idx


class CounterRow(NamedTuple):
    """One event of a :class:`CounterTrack`, as the renderer decided it (the changes-only and NaN rules applied
    once, here): at wall-clock ns ``t_ns``, ``args`` the finite values by key (``{}``: the track's values end
    here), ``changed`` per key of the track whether its value differs from the track's event before (NaN equal
    to NaN; None: not known, every value is new). ``chrome(ts)`` is the Chrome counter event."""

    track: CounterTrack
    t_ns: int
    args: dict
    changed: Optional[list] = None

    def chrome(self, ts) -> dict:
        """The counter event of this row, ``ts(t_ns)`` its ``ts`` (the sink's time rule)."""
        t = self.track
        return counter_event(t.name, ts(self.t_ns), t.pid, t.tid, self.args, t.cat)


class EventRenderer:
    """Sampler batches -> counter events: one event per track and row, as :class:`CounterRow` values
    (:meth:`counter_rows`, what the trace writers take: :meth:`~sysprof.trace.chrome.TraceWriter.write_typed`) or
    as Chrome counter dicts (:meth:`events`).

    With ``changes_only`` (the default) a track's event is written only for rows where one of its values differs
    from the row before (NaN equal to NaN), plus the first row; :meth:`finish` writes every track's last row
    (:class:`Changes`). Chrome and Perfetto draw a counter as a step function that holds its value until the next
    event, so nothing is lost, and idle devices (loop disks, a quiet NIC) cost nothing after their first event.
    ``report`` weighs each value by how long it held.

    NaN and +/-inf values are left out of an event (:func:`~sysprof.trace.chrome.counter_args`); a row with no
    value left writes nothing, except ``"args": {}`` when the track had values before: the old values end there.
    ``rows`` counts the sample rows seen (the samples written). ``pid``/``tid`` of tracks without their own pid:
    ``pid``, ``tid``. ``decimals``: per column of the layout (:attr:`TrackLayout.columns`), the decimals its values
    are written to (:class:`Quantiser`; None: as sampled), before the changes are found, so a value that moved
    less than that is no change. Whole values are written as integers (:func:`numbers`)."""

    def __init__(self, layout: TrackLayout, float_ts: bool = False, changes_only: bool = True, pid: Any = 0,
                 tid: Any = 0, decimals: Optional[Sequence[Optional[int]]] = None) -> None:
        import numpy as np

        self.layout = layout
        self.float_ts = float_ts
        self.changes_only = changes_only
        self.rows = 0
        #: the :class:`CounterTrack` of each track of the layout
        self.tracks = [CounterTrack(t.name, pid if t.pid is None else t.pid, tid, t.category, t.keys, t.units,
                                    np.arange(lo, hi, dtype=np.intp))
                       for t, (_, _, _, lo, hi) in zip(layout.tracks, layout.series)]
        self._changes = Changes([(lo, hi) for _, _, _, lo, hi in layout.series])
        self._quantise = Quantiser(decimals) if decimals is not None and any(d is not None for d in decimals) \
            else None
        self._last_ts_ns = None

    def ts(self, t_ns: int):
        return round(t_ns / 1000.0, 3) if self.float_ts else t_ns // 1000

    def counter_rows(self, batch, changed: bool = False) -> list:
        """The :class:`CounterRow` events of ``batch`` (``timestamps_ns``, ``values`` rows x channels), in time
        order, tracks in channel order within a row; ``changed``: with each row's per-key changes (what a writer
        that writes a value only when it changes needs)."""
        import numpy as np

        n = len(batch)
        self.rows += n
        if n == 0 or not self.tracks:
            return []
        ts_ns = batch.timestamps_ns.tolist()
        values = self.layout.project(batch.values)
        if self._quantise is not None:
            values = self._quantise(values)
        mask = self._changes.mask(values) if self.changes_only or changed else None
        differs = self._changes.differs if changed else None
        if not self.changes_only:
            mask = None
        track_ns = self.layout.track_times_ns(batch.timestamps_ns, batch.values)
        self._last_ts_ns = ts_ns[-1]
        rule = self._changes.args
        out = []
        for g, track in enumerate(self.tracks):
            own = track_ns.get(g)
            if mask is not None:
                rows = np.flatnonzero(mask[:, g]).tolist()
            else:
                rows = range(n) if own is None else np.flatnonzero(new_readings(own)).tolist()
            if len(rows):
                at = ts_ns if own is None else own.tolist()
                idx, keys = track.idx, track.keys
                flags = differs[rows][:, idx].tolist() if differs is not None and (mask is not None or own is None) \
                    else itertools.repeat(None)  # (a timed track, every row: its rows between readings unseen)
                for r, v, c in zip(rows, numbers(values[rows][:, idx]), flags):
                    args = rule(g, keys, v)
                    if args is not None:
                        out.append((r, CounterRow(track, at[r], args, c)))
        out.sort(key=lambda e: e[0])  # stable: time order, tracks in channel order within a row
        return [e for _, e in out]

    def events(self, batch) -> list:
        """:meth:`counter_rows` as Chrome counter event dicts (``ts`` by :meth:`ts`)."""
        ts = self.ts
        return [row.chrome(ts) for row in self.counter_rows(batch)]

    @property
    def last_ns(self):
        """The time (ns) of the last row seen, None before the first."""
        return self._last_ts_ns

    def new_file_rows(self) -> list:
        """The rows that end this file (:meth:`finish_rows`); the next row then writes every track (a new file
        starts with every value)."""
        out = self.finish_rows()
        self._changes.reset()
        return out

    def new_file(self) -> list:
        """:meth:`new_file_rows` as event dicts."""
        ts = self.ts
        return [row.chrome(ts) for row in self.new_file_rows()]

    def finish_rows(self) -> list:
        """Rows that repeat the last row for every track not written at that row (the trace's end); nothing in
        them changed."""
        if not self.changes_only or self._changes.prev is None:
            return []
        t = self._last_ts_ns
        last = numbers(self._changes.prev[None, :])[0]
        out = []
        for g in self._changes.finish_tracks():
            track = self.tracks[g]
            args = self._changes.args(g, track.keys, [last[i] for i in track.idx.tolist()])
            if args is not None:
                out.append(CounterRow(track, t, args, [False] * len(track.keys)))
        return out

    def finish(self) -> list:
        """:meth:`finish_rows` as event dicts."""
        ts = self.ts
        return [row.chrome(ts) for row in self.finish_rows()]


class EventBuilder(EventRenderer):
    """``sysprof record``'s renderer: the ``"sysprof"`` preset over ``channels`` (see :class:`EventRenderer`).

    ``decimals``: per channel (in ``channels``' order), the decimals its values are written to (None: as sampled;
    ``sampling.registry.decimals_of`` gives each channel's). ``groups``: ``(name, pid, column indices, keys)`` per
    track."""

    def __init__(self, channels, system_pid: int, process_pid=None, float_ts: bool = False,
                 changes_only: bool = True, decimals: Optional[Sequence[Optional[int]]] = None):
        layout = TrackLayout(channels, "sysprof", system_pid=system_pid, process_pid=process_pid)
        super().__init__(layout, float_ts=float_ts, changes_only=changes_only, pid=system_pid,
                         decimals=None if decimals is None else [decimals[c] for c in layout.columns])
        import numpy as np

        self.system_pid = system_pid
        self.groups = [(t.name, t.pid, np.asarray(t.columns, dtype=np.intp), t.keys) for t in layout.tracks]

    def units_event(self) -> dict:
        """The units metadata event of this channel set, with the recorder's pid."""
        return self.layout.units_event(self.system_pid)


_TS_SENTINEL = "\x01ts\x01"
_VALUE_SENTINEL = "\x01v\x01"


class RowTemplate:
    """JSON text of whole rows of :class:`~sysprof.profiler.trace_handler.CounterRows` ``series`` in Composer's
    layout (``cat`` = categories joined with ``,``; ``pid``, ``tid`` given), the text
    :func:`~sysprof.trace.chrome.encode_event` gives each event: rows whose values are all finite are filled
    into ``%``-templates (the fast path: one per row, or one per written track); the others are encoded event by
    event, non-finite keys left out.

    Every row (``changes_only=False``): an event with no key left is not written. Changes only: the tracks
    :class:`Changes` selects (``self.changes``; the caller resets it at each new file), with its NaN rule
    (``"args": {}`` where a track's values end), and :meth:`finish` repeats the last row's other tracks.

    ``timed``: the series stamped with their own reading times (:attr:`TrackLayout.timed`), which :meth:`render`
    takes as ``track_ns``; with any, rows are rendered track by track (no whole-row template)."""

    __slots__ = ("series", "n_events", "changes", "timed", "_text", "_parts", "_pid", "_tid", "_cats", "_last_us",
                 "_starts")

    def __init__(self, series: list, pid: Any, tid: Any, changes_only: bool = False, timed=()) -> None:
        import numpy as np

        self.series = series
        self.timed = frozenset(timed)
        self._starts = np.asarray([lo for _, _, _, lo, _ in series], dtype=np.intp)
        self.n_events = len(series)
        self._pid, self._tid = pid, tid
        self._cats = [",".join(cats) or None for _, cats, _, _, _ in series]  # None: no "cat" (sysprof's layout)
        self._parts = []
        for (name, _, keys, _, _), cat in zip(series, self._cats):
            text = encode_event(counter_event(name, _TS_SENTINEL, pid, tid, {k: _VALUE_SENTINEL for k in keys}, cat))
            text = text.replace("%", "%%").replace(json.dumps(_VALUE_SENTINEL), "%r")
            self._parts.append(text.replace(json.dumps(_TS_SENTINEL), "\x00"))
        self._text = ",\n".join(self._parts)
        self.changes = Changes([(lo, hi) for _, _, _, lo, hi in series]) if changes_only else None
        self._last_us = None

    def _encode(self, g: int, t_us: int, row: list):
        """The text of track ``g``'s event at ``t_us`` from a row with a non-finite value; None: no event."""
        name, _, keys, lo, hi = self.series[g]
        values = row[lo:hi]
        args = counter_args(keys, values) if self.changes is None else self.changes.args(g, keys, values)
        if args is None or (not args and self.changes is None):
            return None
        return encode_event(counter_event(name, t_us, self._pid, self._tid, args, self._cats[g]))

    def render(self, times_ns, values, track_ns=None) -> list:
        """``(text, events)`` per row with at least one event: its events' text, ``,\\n``-joined, and their count.
        ``track_ns``: the reading times of the ``timed`` series (:meth:`TrackLayout.track_times_ns`)."""
        import numpy as np

        if self.timed:
            return self._render_tracks(times_ns, values, track_ns or {})
        if self.changes is not None:
            return self._render_changes(times_ns, values)
        template, n = self._text, self.n_events
        finite = np.isfinite(values).all(axis=1).tolist()
        out = []
        append = out.append
        for t_us, row, ok in zip((times_ns // 1000).tolist(), values.tolist(), finite):
            if ok:
                append((template.replace("\x00", str(t_us)) % tuple(row), n))
            else:
                parts = [text for g in range(n) for text in (self._encode(g, t_us, row),) if text is not None]
                if parts:
                    append((",\n".join(parts), len(parts)))
        return out

    def _render_tracks(self, times_ns, values, track_ns: dict) -> list:
        """render() with timed series: each track's event at its own time, every row's (changes only: the tracks
        :class:`Changes` selects), a timed track's once per reading."""
        import numpy as np

        n = len(values)
        if n == 0 or not self.n_events:
            return []
        if self.changes is not None:
            mask = self.changes.mask(values)
            self._last_us = int(times_ns[-1]) // 1000
        else:
            mask = np.ones((n, self.n_events), dtype=bool)
            for g, own in track_ns.items():
                mask[:, g] = new_readings(own)
        finite = np.logical_and.reduceat(np.isfinite(values), self._starts, axis=1).tolist()
        t_rows = (np.asarray(times_ns) // 1000).tolist()
        own_us = {g: (np.asarray(own) // 1000).tolist() for g, own in track_ns.items()}
        known = self.changes.known if self.changes is not None else None
        series, parts, all_rows = self.series, self._parts, values.tolist()
        rows_at, tracks_at = np.nonzero(mask)
        tracks_at = tracks_at.tolist()
        rows, starts = np.unique(rows_at, return_index=True)
        ends = starts[1:].tolist() + [len(tracks_at)]
        out = []
        for r, a, b in zip(rows.tolist(), starts.tolist(), ends):
            row, texts = all_rows[r], []
            for g in tracks_at[a:b]:
                t_us = own_us[g][r] if g in own_us else t_rows[r]
                if finite[r][g]:
                    if known is not None:
                        known[g] = True
                    texts.append(parts[g].replace("\x00", str(t_us)) % tuple(row[series[g][3]:series[g][4]]))
                else:
                    text = self._encode(g, t_us, row)
                    if text is not None:
                        texts.append(text)
            if texts:
                out.append((",\n".join(texts), len(texts)))
        return out

    def _render_changes(self, times_ns, values) -> list:
        import numpy as np

        if len(values) == 0:
            return []
        mask = self.changes.mask(values)
        finite = np.isfinite(values).all(axis=1).tolist()
        full = mask.all(axis=1).tolist()
        template, n, parts, series, known = self._text, self.n_events, self._parts, self.series, self.changes.known
        t_all = (times_ns // 1000).tolist()
        self._last_us = t_all[-1]
        out = []
        append = out.append
        rows_at, tracks_at = np.nonzero(mask)  # one pass for the whole batch: (row, track) of each event, by row
        tracks_at = tracks_at.tolist()
        rows, starts = np.unique(rows_at, return_index=True)
        ends = starts[1:].tolist() + [len(tracks_at)]
        all_rows = values.tolist()
        for r, a, b in zip(rows.tolist(), starts.tolist(), ends):
            row, t_us = all_rows[r], t_all[r]
            if finite[r]:
                if full[r]:
                    known[:] = [True] * n
                    append((template.replace("\x00", str(t_us)) % tuple(row), n))
                    continue
                texts = []
                for g in tracks_at[a:b]:
                    known[g] = True
                    lo, hi = series[g][3], series[g][4]
                    texts.append(parts[g].replace("\x00", str(t_us)) % tuple(row[lo:hi]))
            else:
                texts = [text for g in tracks_at[a:b] for text in (self._encode(g, t_us, row),) if text is not None]
            if texts:
                append((",\n".join(texts), len(texts)))
        return out

    def finish(self) -> list:
        """Changes only: ``(text, events)`` repeating the last row rendered for every track not written at it (the
        end of a file: the last values hold to there); [] when there is nothing to repeat."""
        if self.changes is None or self.changes.prev is None:
            return []
        row, t_us = self.changes.prev.tolist(), self._last_us
        texts = [text for g in self.changes.finish_tracks() for text in (self._encode(g, t_us, row),)
                 if text is not None]
        return [(",\n".join(texts), len(texts))] if texts else []
