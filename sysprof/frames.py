"""Samples and traces as pandas DataFrames, and DataFrames as Parquet or CSV files (``pip install 'sysprof[pandas]'``).

* :func:`batch_frame` (``Batch.to_pandas()``): a drained batch, row for row.
* :func:`read_trace` (``sysprof.read_trace(path)``): any sysprof trace file (``sysprof record``'s Chrome JSON,
  ``.json.gz``, truncated ones too; the Composer layout of ``JSONTraceHandler`` / ``sysprof.profile()``;
  Perfetto protobuf), through :class:`sysprof.report.TraceData`. A trace stores a counter's value only when it
  changes, and (``sysprof record``) the times of all its samples (``sysprof samples`` events): the frame has a
  row per sample, each value holding from its event until its counter's next event (Chrome's and Perfetto's
  step semantics), so ``df.mean()`` weighs values by samples, i.e. by time at a fixed interval. NaN before a
  channel's first event, and from an event of its counter that lacks it (unknown) until the counter's next one.
  A trace that does not list its samples (every row written, Composer's layout, older sysprof) has a row per
  time a counter event was written; ``read_trace(path, changes=True)`` gives that for any trace (the raw
  changes).
* :func:`parquet_bytes`, :func:`csv_text`: the files ``sysprof export`` writes.

Every frame has a UTC :class:`pandas.DatetimeIndex` named ``time`` (ns resolution), one float64 column per channel
(the sampler's channel names and units), and ``attrs``:

* ``units``: channel -> unit symbol (``B``, ``B/s``, ``%``, ``s``, ...): a batch's and a renamed channel's from
  the registry; a trace's from its ``sysprof units`` declaration, else inferred from the name;
* ``interval_s``: the sampling interval (the sampler's; a trace's metadata, else the median spacing of its
  samples; None when unknown) and, for traces, ``interval_source`` (``"metadata"`` or ``"median spacing"``);
* traces only: ``meta`` (the ``sysprof start`` event's args: command line, backend, channels, errors, ...; ``{}``
  for a Composer-layout trace), ``stats`` (the sampler's final statistics), ``truncated`` (a ``sysprof record``
  trace without its stop event), ``layout`` (``"sysprof"`` for ``sysprof record``'s, ``"composer"`` where
  Composer names were mapped back, else ``"chrome"``) and ``renamed`` (trace channel -> sampler channel).

Composer-layout channels are mapped back to the sampler's names and units where
:mod:`sysprof.trace.composer` has an exact inverse (``memory/virtual/used_gb`` -> ``memory/used_bytes``,
multiplied by 1e9; ``disk/<dev>/busy_time`` ms -> ``disk/<dev>/busy_time_seconds``; ``network/<nic>/kb_sent`` ->
``net/<nic>/bytes_sent``; ``cpu/cpu_percent`` -> ``cpu/percent``; ...); those without one (``memory/cuda/*``, a
foreign trace's counters) keep their names and the trace's units. ``sysprof record`` traces are never renamed.

Timestamps: the index holds each sample's time in ns since the epoch, ``round(ts_us * 1000)`` of the trace's
µs timestamp, or the exact ns where the reader keeps them (an integer ``ts_ns``, or the ``.ns`` of the Perfetto
reader's :class:`~sysprof.trace.perfetto.TraceTime` timestamps). ``sysprof record`` writes
whole µs at intervals of 1 ms and more (the ns below a µs are not in the file) and µs with three decimals below
1 ms, which JSON readers parse into a float64: at today's epoch that resolves 0.25 µs, so sub-µs digits are
approximate. A batch's index is its ``timestamps_ns``, exactly.
"""
from __future__ import annotations

import json
import os
from functools import lru_cache
from typing import Any, Dict, Optional, Union

import numpy as np

__all__ = ["batch_frame", "trace_frame", "TraceFrame", "read_trace", "read_trace_data", "parquet_bytes",
           "write_parquet", "csv_text", "write_csv", "require_pandas", "require_pyarrow", "PANDAS_HINT"]

PANDAS_HINT = "pip install 'sysprof[pandas]'"
PathLike = Union[str, "os.PathLike[str]"]


def require_pandas():
    """The ``pandas`` module, or ImportError naming the extra to install."""
    try:
        import pandas
    except ImportError as e:
        raise ImportError(f"DataFrames need pandas ({e}): {PANDAS_HINT}") from None
    return pandas


def require_pyarrow():
    """``(pyarrow, pyarrow.parquet)``, or ImportError naming the extra to install."""
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as e:
        raise ImportError(f"Parquet files need pyarrow ({e}): {PANDAS_HINT}") from None
    return pyarrow, pyarrow.parquet


def _index(pd, ts_ns):
    """UTC DatetimeIndex ``time`` of int64 ns since the epoch (a view where pandas allows)."""
    ts = np.ascontiguousarray(ts_ns, dtype=np.int64)
    return pd.DatetimeIndex(ts.view("datetime64[ns]"), name="time").tz_localize("UTC")


def _unit(channel: str) -> str:
    """A sampler channel's unit: the registry's, else the one its name says."""
    from .report.units import infer_unit
    from .sampling.registry import unit_of

    unit = unit_of(channel)
    return unit if unit is not None else infer_unit(channel)


@lru_cache(maxsize=32)
def _columns(channels: tuple):
    """The columns Index of a channel set, built once per set (each frame gets a shallow copy: its own name)."""
    return require_pandas().Index(list(channels), name="channel")


@lru_cache(maxsize=32)
def _units(channels: tuple) -> Dict[str, str]:
    """The units of a sampler's channel set (looked up once per set: a drain's batches share it)."""
    return {ch: _unit(ch) for ch in channels}


def batch_frame(batch) -> Any:
    """A :class:`~sysprof.sampling.sampler.Batch` as a DataFrame: index ``time`` (UTC, its ``timestamps_ns``
    exactly), one float64 column per channel in the batch's order, the values as drained (NaN: unknown);
    ``attrs["units"]`` (channel -> unit, from the registry) and ``attrs["interval_s"]``.

    The values are not copied: the frame is a view of ``batch.values`` (``df.copy()`` before changing either).
    """
    pd = require_pandas()
    values = np.asarray(batch.values, dtype=np.float64)
    columns = _columns(tuple(batch.channels)).copy()
    df = pd.DataFrame(values, index=_index(pd, batch.timestamps_ns), columns=columns, copy=False)
    df.attrs["units"] = dict(_units(tuple(batch.channels)))
    df.attrs["interval_s"] = getattr(batch, "interval", None)
    return df


def _us_to_ns(ts_us):
    """float64 µs -> int64 ns, ``round(ts * 1000)`` computed exactly (the product itself, above 2**53, is not):
    the whole µs and the fraction (exact in float64) apart."""
    whole = np.floor(ts_us)
    return whole.astype(np.int64) * 1000 + np.rint((ts_us - whole) * 1000.0).astype(np.int64)


def _exact_ns(events) -> Optional[Dict[float, int]]:
    """``{ts_us: ts_ns}`` of counter events that carry exact ns (:func:`~sysprof.trace.columns.event_ns`: a reader
    that keeps them), or None when the first counter event has none (then the µs timestamps are all there is)."""
    from .trace.columns import event_ns

    if events is None:
        return None
    exact = None
    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph") != "C":
            continue
        ns = event_ns(ev)
        if exact is None:
            if ns is None:
                return None
            exact = {}
        if ns is not None:
            exact[float(ev["ts"])] = ns
    return exact


def _series_ns(data, times):
    """The exact ns of each time of ``times`` (the union of ``data``'s series times) from the trace's own exact ns
    (``data.series_ns``: a ``.pftrace``), ``_us_to_ns`` where it has none; None for a trace without them."""
    exact = getattr(data, "series_ns", None)
    if not exact:
        return None
    pairs = {id(t): (t, exact[ch]) for ch in data.series for t in (_changes(data.series, ch)[0],)
             if exact.get(ch) is not None and len(exact[ch]) == len(t)}
    if not pairs:
        return None
    t = np.concatenate([t for t, _ in pairs.values()])
    ns = np.concatenate([n for _, n in pairs.values()])
    known = ns >= 0
    t, ns = t[known], ns[known]
    order = np.argsort(t, kind="stable")
    t, ns = t[order], ns[order]
    out = _us_to_ns(times)
    if t.size:
        j = np.minimum(np.searchsorted(t, times), t.size - 1)
        hit = t[j] == times
        out[hit] = ns[j[hit]]
    return out


def _row_times(data, changes: bool):
    """``(times in µs, exact ns or None)`` of the frame's rows: the listed samples (and, in a trace cut short, the
    counter events after the last one listed), else the counter events' times."""
    times = data.timestamps()
    listed = getattr(data, "sample_ns", None)
    if changes or listed is None or not listed.size:
        return times, None
    listed_us = listed / 1000.0
    extra = times[times > listed_us[-1] + _half_spacing(listed_us)] if data.stop_ts is None else times[:0]  # a stop's end rows: none
    if not extra.size:
        return listed_us, listed
    return np.concatenate([listed_us, extra]), np.concatenate([listed, _us_to_ns(extra)])


def _half_spacing(times) -> float:
    """Half the closest spacing of ascending ``times`` (µs): an event further than this past the last is after it."""
    return float(np.min(np.diff(times))) / 2 if times.size > 1 else 0.5


def _nearest_rows(t, times):
    """For each event time ``t`` (ascending), the row of ``times`` (ascending) nearest to it: a µs float of one
    ns time rounds differently in the event and in the sample list (0.25 µs apart at most today), while samples
    are at least 1 µs apart. An event more than half a spacing after the last row gets ``times.size``."""
    j = np.searchsorted(times, t)
    prev = np.maximum(j - 1, 0)
    nxt = np.minimum(j, times.size - 1)
    rows = np.where((j >= times.size) | ((j > 0) & (t - times[prev] <= times[nxt] - t)), prev, nxt)
    rows[t > times[-1] + _half_spacing(times)] = times.size  # after the last row (a stop's end rows): no row's value
    return rows


def _changes(series, ch):
    """``(times, index, values)`` of a channel: its events' times and its values' changes (a
    :class:`~sysprof.trace.columns.HeldSeries` keeps them; another mapping's values are taken whole)."""
    changes = getattr(series, "changes", None)
    if changes is not None:
        return changes(ch)
    t, v = series[ch]
    return (t, np.arange(len(v)), np.asarray(v, dtype=np.float64))


#: rows of a frame built at a time where a frame is written in blocks (``sysprof export``): about 16 MiB of values
BLOCK_VALUES = 1 << 21


class TraceFrame:
    """The frame of a :class:`~sysprof.report.TraceData` (see :func:`trace_frame`), built a block of rows at a time
    (:meth:`block`, :meth:`blocks`), so a long trace is written (``sysprof export``) without holding all its rows.

    Attributes: ``rows`` (int), ``columns`` (the frame's channel names), ``attrs`` (the frame's ``attrs``).

    Raises:
        ReportError: the trace has no counter events.
    """

    def __init__(self, data, events=None, changes: bool = False) -> None:
        from .report.model import ReportError
        from .report.units import unit_of
        from .trace.composer import sampler_channels

        if not data.series:
            raise ReportError("no counter events (is it a sysprof trace?)")
        self._data = data
        self._times, self._listed_ns = _row_times(data, changes)
        self.rows = int(self._times.size)
        renamed = {} if data.recorded else sampler_channels(data.series)
        self._channels = []  # (trace channel, frame column, multiplier, divisor)
        units = {}
        for ch in data.series:
            if ch in renamed:
                name, mul, div = renamed[ch]
                units[name] = _unit(name)
            else:
                name, mul, div = ch, 1.0, 1.0
                units[name] = unit_of(ch, data.units)
            self._channels.append((ch, name, mul, div))
        if self._listed_ns is not None:
            self._ts_ns = self._listed_ns
        else:
            exact = _exact_ns(events)
            if exact:
                self._ts_ns = np.array([exact.get(t, n) for t, n in zip(self._times.tolist(),
                                                                        _us_to_ns(self._times).tolist())],
                                       dtype=np.int64)
            else:
                got = _series_ns(data, self._times) if events is None else None
                self._ts_ns = got if got is not None else _us_to_ns(self._times)
        self._nearest: Dict[int, Any] = {}  # id(times) -> each event's row (listed samples): per counter, once
        interval, source = data.interval()
        layout = "sysprof" if data.recorded else ("composer" if renamed else "chrome")
        self.attrs = {"units": units, "interval_s": interval, "interval_source": source, "meta": dict(data.meta),
                      "stats": data.stats(), "truncated": data.truncated, "layout": layout,
                      "renamed": {ch: r[0] for ch, r in renamed.items()}}

    @property
    def columns(self) -> list:
        return [name for _, name, _, _ in self._channels]

    def time_unit(self) -> str:
        """The resolution of the frame's times, the coarsest that shows them all exactly: ``"s"``, ``"ms"``,
        ``"us"`` or ``"ns"`` (what pandas writes a time index with)."""
        ts = self._ts_ns
        for unit, step in (("ns", 1000), ("us", 1_000_000), ("ms", 1_000_000_000)):
            if np.remainder(ts, step).any():
                return unit
        return "s"

    def select(self, keep) -> None:
        """Keep only the columns whose names ``keep(name)`` accepts (their units too)."""
        self._channels = [c for c in self._channels if keep(c[1])]
        self.attrs["units"] = {c[1]: self.attrs["units"][c[1]] for c in self._channels}

    def _positions(self, t, a: int, b: int):
        """For rows ``a`` to ``b``: the index of the event of times ``t`` whose value each row holds (-1: none)."""
        if self._listed_ns is None:
            return np.searchsorted(t, self._times[a:b], side="right") - 1
        rows = self._nearest.get(id(t))
        if rows is None:  # each event at the listed sample it was written at; a row takes the last one at or before
            rows = self._nearest[id(t)] = (t, _nearest_rows(t, self._times))
        return np.searchsorted(rows[1], np.arange(a, b), side="right") - 1

    def block(self, a: int = 0, b: Optional[int] = None) -> Any:
        """Rows ``a`` to ``b`` (default: the end) as a DataFrame, with the frame's ``attrs``."""
        pd = require_pandas()
        b = self.rows if b is None else min(b, self.rows)
        a = min(a, b)
        series = self._data.series
        out = np.empty((b - a, len(self._channels)), dtype=np.float64, order="F")  # columns contiguous: no copy
        positions: Dict[int, Any] = {}
        for j, (ch, _, mul, div) in enumerate(self._channels):
            t, index, values = _changes(series, ch)
            pos = positions.get(id(t))
            if pos is None:  # the event each row holds (-1: none), and where no event is held
                at = self._positions(t, a, b)
                pos = positions[id(t)] = (at, at < 0, t)
            at, none = pos[0], pos[1]
            col = out[:, j]
            np.take(values, np.maximum(np.searchsorted(index, at, side="right") - 1, 0), out=col)
            col[none] = np.nan
            if mul != 1.0:
                col *= mul
            if div != 1.0:
                col /= div
        df = pd.DataFrame(out, index=_index(pd, self._ts_ns[a:b]), columns=self.columns, copy=False)
        df.columns.name = "channel"
        df.attrs.update(self.attrs)
        return df

    def blocks(self, rows: Optional[int] = None):
        """The frame in blocks of ``rows`` rows (default: about ``BLOCK_VALUES`` values each); at least one."""
        rows = rows or max(1024, BLOCK_VALUES // max(1, len(self._channels)))
        for a in range(0, max(self.rows, 1), rows):
            yield self.block(a, a + rows)


def trace_frame(data, events=None, changes: bool = False) -> Any:
    """A :class:`~sysprof.report.TraceData` as a DataFrame (see the module docstring): a row per sample (a
    changes-only ``sysprof record`` trace lists its samples' times), each channel's value held from its event to
    its counter's next. ``changes=True``: a row per time a counter event was written instead (the raw changes).
    ``events``: the event list ``data`` was read from, only for exact ``ts_ns`` timestamps where a reader
    supplied them (``data`` keeps those of the reader it was read from).

    Raises:
        ReportError: the trace has no counter events.
    """
    return TraceFrame(data, events, changes).block()


def read_trace_data(path: PathLike):
    """A trace file (any format :func:`sysprof.trace.load.iter_events` reads) as a
    :class:`~sysprof.report.TraceData`, streamed: its counter values go into columns as they are read."""
    from .report.model import TraceData
    from .trace.load import iter_events

    return TraceData(iter_events(path))


def read_trace(path: PathLike, changes: bool = False) -> Any:
    """Any sysprof trace file as a DataFrame (see the module docstring): ``sysprof record``'s Chrome JSON
    (``.json``, ``.json.gz``, truncated too), the Composer layout, Perfetto protobuf (``.pftrace``). A row per
    sample; ``changes=True``: a row per written change instead.

    Raises:
        FileNotFoundError / OSError: the file cannot be read.
        ValueError: not a trace (:class:`~sysprof.report.ReportError`: one without counter events).
        ImportError: pandas is missing (``pip install 'sysprof[pandas]'``), or the Perfetto reader for a
            ``.pftrace``.
    """
    from .report.model import ReportError

    require_pandas()
    data = read_trace_data(path)
    try:
        return trace_frame(data, changes=changes)
    except ReportError as e:
        raise ReportError(f"{os.fspath(path)}: {e}") from None


def _jsonable(obj):
    return json.loads(json.dumps(obj, default=str))


def write_parquet(frames, out) -> None:
    """Write ``frames`` (DataFrames: the blocks of one frame, :meth:`TraceFrame.blocks`, or one frame) to ``out`` (a
    path, or a writable binary file) as one Parquet file, a row group per block (see :func:`parquet_bytes`; the
    units and ``attrs`` are the first block's).

    Raises:
        ImportError: pyarrow is missing.
    """
    pa, pq = require_pyarrow()
    writer = schema = None
    try:
        for df in frames:
            table = pa.Table.from_pandas(df, preserve_index=True)
            if writer is None:
                units = df.attrs.get("units") or {}
                fields = [f.with_metadata({"unit": units[f.name]}) if f.name in units else f for f in table.schema]
                meta = dict(table.schema.metadata or {})
                meta[b"sysprof"] = json.dumps(_jsonable(df.attrs)).encode()
                schema = pa.schema(fields, metadata=meta)
                writer = pq.ParquetWriter(out, schema, compression="zstd", version="2.6")
            writer.write_table(pa.Table.from_arrays(table.columns, schema=schema))
    finally:
        if writer is not None:
            writer.close()


def parquet_bytes(df) -> bytes:
    """A frame of :func:`read_trace` / :func:`batch_frame` as a Parquet file (zstd; the ``time`` index as a
    ``timestamp[ns, UTC]`` column; format version 2.6, which keeps ns). Each channel's field carries its unit
    (field metadata ``unit``); the schema's metadata ``sysprof`` holds ``attrs`` as JSON (units, interval_s,
    meta, ...).

    Raises:
        ImportError: pyarrow is missing.
    """
    pa, _ = require_pyarrow()
    sink = pa.BufferOutputStream()
    write_parquet([df], sink)
    return sink.getvalue().to_pybytes()


def _csv_options() -> dict:
    pd = require_pandas()
    major, minor = (int(x) for x in pd.__version__.split(".")[:2])
    newline = {"lineterminator" if (major, minor) >= (1, 5) else "line_terminator": "\n"}  # renamed in 1.5
    return dict(index=True, index_label="time", na_rep="", **newline)


def csv_text(df) -> str:
    """A frame as CSV text: a header row ``time,<channel>,...``, then a row per sample: the time in ISO 8601 UTC
    with ns (``2026-12-01 17:37:33.123456789+00:00``), the values in the shortest form that reads back exactly,
    an empty field for NaN. The units are not in the file (the channel names say them: ``_bytes``, ``_percent``,
    ``_seconds``, ``_per_second``; ``sysprof report`` and the Parquet file carry them).

    Read it back with ``pandas.read_csv(path, index_col="time", parse_dates=["time"])``."""
    return df.to_csv(**_csv_options())


def write_csv(frames, out, unit: Optional[str] = None) -> None:
    """Write ``frames`` (the blocks of one frame, or one frame) to the writable binary file ``out`` as the CSV text
    :func:`csv_text` gives for the whole frame (one header row). ``unit``: the whole frame's time resolution
    (:meth:`TraceFrame.time_unit`), so that every block writes its times with the digits the whole frame's have
    (pandas gives a frame the fewest that show all its times exactly); None: each block's own."""
    pd = require_pandas()
    options = _csv_options()
    for i, df in enumerate(frames):
        if unit is not None:
            text = np.datetime_as_string(df.index.asi8.view("datetime64[ns]"), unit=unit)
            text = np.char.add(np.char.replace(text, "T", " "), "+00:00")
            df = df.set_axis(pd.Index(text, name=df.index.name), axis=0)
        out.write(df.to_csv(header=i == 0, **options).encode())
