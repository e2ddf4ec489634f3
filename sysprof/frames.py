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
:mod:`sysprof.trace.composer_map` has an exact inverse (``memory/virtual/used_gb`` -> ``memory/used_bytes``,
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

__all__ = ["batch_frame", "trace_frame", "read_trace", "parquet_bytes", "csv_text", "require_pandas",
           "require_pyarrow", "PANDAS_HINT"]

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


def _event_ns(ev) -> Optional[int]:
    """The exact ns of a counter event: its integer ``ts_ns``, or the ``.ns`` of a
    :class:`~sysprof.trace.perfetto.TraceTime` ``ts`` (the Perfetto reader's); None when it has neither."""
    if not isinstance(ev, dict) or ev.get("ph") != "C":
        return None
    ns = ev.get("ts_ns")
    if not isinstance(ns, int):
        ns = getattr(ev.get("ts"), "ns", None)
    return ns if isinstance(ns, int) else None


def _exact_ns(events) -> Optional[Dict[float, int]]:
    """``{ts_us: ts_ns}`` of counter events that carry exact ns (:func:`_event_ns`: a reader that keeps them), or
    None when the first counter event has none (then the µs timestamps are all there is)."""
    if events is None:
        return None
    it = iter(events)
    for ev in it:
        if isinstance(ev, dict) and ev.get("ph") == "C":
            ns = _event_ns(ev)
            if ns is None:
                return None
            exact = {float(ev["ts"]): ns}
            break
    else:
        return None
    for ev in it:
        ns = _event_ns(ev)
        if ns is not None:
            exact[float(ev["ts"])] = ns
    return exact


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


def trace_frame(data, events=None, changes: bool = False) -> Any:
    """A :class:`~sysprof.report.TraceData` as a DataFrame (see the module docstring): a row per sample (a
    changes-only ``sysprof record`` trace lists its samples' times), each channel's value held from its event to
    its counter's next. ``changes=True``: a row per time a counter event was written instead (the raw changes).
    ``events``: the event list ``data`` was read from, only for exact ``ts_ns`` timestamps where a reader
    supplied them.

    Raises:
        ReportError: the trace has no counter events.
    """
    from .report.model import ReportError
    from .report.units import unit_of
    from .trace.composer_map import sampler_channels

    pd = require_pandas()
    if not data.series:
        raise ReportError("no counter events (is it a sysprof trace?)")
    times, listed_ns = _row_times(data, changes)
    renamed = {} if data.recorded else sampler_channels(data.series)
    out = np.empty((times.size, len(data.series)), dtype=np.float64, order="F")  # columns contiguous: no copy
    columns, units = [], {}
    for j, (ch, (t, v)) in enumerate(data.series.items()):
        if listed_ns is None:
            pos = np.searchsorted(t, times, side="right") - 1
        else:  # each event at the listed sample it was written at; a row takes the last one at or before it
            pos = np.searchsorted(_nearest_rows(t, times), np.arange(times.size), side="right") - 1
        col = out[:, j]
        np.take(v, np.maximum(pos, 0), out=col)
        col[pos < 0] = np.nan
        if ch in renamed:
            name, mul, div = renamed[ch]
            if mul != 1.0:
                col *= mul
            if div != 1.0:
                col /= div
            units[name] = _unit(name)
        else:
            name = ch
            units[name] = unit_of(ch, data.units)
        columns.append(name)
    ts_ns = _us_to_ns(times) if listed_ns is None else listed_ns
    exact = _exact_ns(events) if listed_ns is None else None
    if exact:
        ts_ns = np.array([exact.get(t, n) for t, n in zip(times.tolist(), ts_ns.tolist())], dtype=np.int64)
    df = pd.DataFrame(out, index=_index(pd, ts_ns), columns=columns, copy=False)
    df.columns.name = "channel"
    interval, source = data.interval()
    layout = "sysprof" if data.recorded else ("composer" if renamed else "chrome")
    df.attrs.update({"units": units, "interval_s": interval, "interval_source": source, "meta": dict(data.meta),
                     "stats": data.stats(), "truncated": data.truncated, "layout": layout,
                     "renamed": {ch: r[0] for ch, r in renamed.items()}})
    return df


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
    from .report.model import ReportError, TraceData
    from .trace.load import load_events

    require_pandas()
    events = load_events(path)
    try:
        return trace_frame(TraceData(events), events, changes=changes)
    except ReportError as e:
        raise ReportError(f"{os.fspath(path)}: {e}") from None


def _jsonable(obj):
    return json.loads(json.dumps(obj, default=str))


def parquet_bytes(df) -> bytes:
    """A frame of :func:`read_trace` / :func:`batch_frame` as a Parquet file (zstd; the ``time`` index as a
    ``timestamp[ns, UTC]`` column; format version 2.6, which keeps ns). Each channel's field carries its unit
    (field metadata ``unit``); the schema's metadata ``sysprof`` holds ``attrs`` as JSON (units, interval_s,
    meta, ...).

    Raises:
        ImportError: pyarrow is missing.
    """
    pa, pq = require_pyarrow()
    table = pa.Table.from_pandas(df, preserve_index=True)
    units = df.attrs.get("units") or {}
    fields = [f.with_metadata({"unit": units[f.name]}) if f.name in units else f for f in table.schema]
    meta = dict(table.schema.metadata or {})
    meta[b"sysprof"] = json.dumps(_jsonable(df.attrs)).encode()
    table = pa.Table.from_arrays(table.columns, schema=pa.schema(fields, metadata=meta))
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", version="2.6")
    return sink.getvalue().to_pybytes()


def csv_text(df) -> str:
    """A frame as CSV text: a header row ``time,<channel>,...``, then a row per sample: the time in ISO 8601 UTC
    with ns (``2026-12-01 17:37:33.123456789+00:00``), the values in the shortest form that reads back exactly,
    an empty field for NaN. The units are not in the file (the channel names say them: ``_bytes``, ``_percent``,
    ``_seconds``, ``_per_second``; ``sysprof report`` and the Parquet file carry them).

    Read it back with ``pandas.read_csv(path, index_col="time", parse_dates=["time"])``."""
    pd = require_pandas()
    major, minor = (int(x) for x in pd.__version__.split(".")[:2])
    newline = {"lineterminator" if (major, minor) >= (1, 5) else "line_terminator": "\n"}  # renamed in 1.5
    return df.to_csv(index=True, index_label="time", na_rep="", **newline)
