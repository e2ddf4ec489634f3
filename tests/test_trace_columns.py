"""Long traces in bounded memory (issue 28, item 5): a trace is read streaming into columns (sysprof.trace.columns,
TraceData over a reader's stream), for JSON, .json.gz and .pftrace, and ``export`` writes its table in blocks.

The columns must be what the event-list reader gave: literal values for hand-built traces, and, for traces written
by sysprof's own writers (NaN gaps, empty args, unit events, parts, gzip, a cut file, Perfetto), the series of the
reference below -- the rule TraceData documents, computed the direct way from the whole event list."""
from __future__ import annotations

import gzip
import io
import json
import os

import numpy as np
import pytest

import sysprof
from sysprof.report import TraceData
from sysprof.trace import columns as columns_module
from sysprof.trace.chrome import ChromeTraceWriter, iter_trace, read_trace
from sysprof.trace.columns import CounterColumns
from sysprof.trace.load import iter_events, load_events
from sysprof.trace.schema import (START_EVENT, STOP_EVENT, join_channel, sample_times_array, sample_times_ns,
                                  samples_event)
from sysprof.trace.tracks import EventBuilder

NAN = float("nan")
T0 = 1_764_600_000_000_000  # µs (2025-12-01)


def reference_series(events):
    """channel -> (times, values) by the documented rule, the direct way: per counter its events' times and args
    (the ``sysprof`` statistics counter and events at impossible times left out); every key the counter has
    anywhere, NaN where an event lacks it or has null; stable-sorted by time; start-event channels first."""
    groups = {}
    meta = {}
    for ev in events:
        if not isinstance(ev, dict):
            continue
        if ev.get("ph") in ("i", "I") and ev.get("name") == START_EVENT and isinstance(ev.get("args"), dict):
            meta = ev["args"]
        if ev.get("ph") != "C" or ev.get("name") == "sysprof":
            continue
        ts, args = ev.get("ts"), ev.get("args") or {}
        if not isinstance(ts, (int, float)) or not 0 <= ts < 253402300800e6 or not isinstance(args, dict):
            continue
        g = groups.setdefault(ev.get("name"), ([], []))
        g[0].append(ts)
        g[1].append(args)
    raw = {}
    for name, (ts, argss) in groups.items():
        for key in dict.fromkeys(k for a in argss for k in a):
            vals = [a.get(key) for a in argss]
            try:
                v = np.asarray([NAN if x is None else x for x in vals], dtype=np.float64)
            except (TypeError, ValueError):
                continue
            t = np.asarray(ts, dtype=np.float64)
            order = np.argsort(t, kind="stable")
            raw[join_channel(str(name), str(key))] = (t[order], v[order])
    order = [c for c in meta.get("channels") or [] if isinstance(c, str) and c in raw]
    order += [c for c in raw if c not in order]
    return {c: raw[c] for c in order}


def assert_same_series(got, want):
    assert list(got) == list(want)
    for ch in want:
        assert np.array_equal(got[ch][0], want[ch][0]), ch
        assert np.array_equal(got[ch][1], want[ch][1], equal_nan=True), ch
        assert got[ch][0].dtype == got[ch][1].dtype == np.float64


def c(name, t, **args):
    return {"name": name, "ph": "C", "ts": T0 + t, "pid": 7, "tid": 0, "args": args}


# --------------------------------------------------------------------------------------------------
# exact columns of hand-built traces
# --------------------------------------------------------------------------------------------------
def test_columns_hold_every_key_nan_where_unknown():
    events = [
        {"name": "sysprof start", "ph": "i", "ts": T0, "pid": 7, "tid": 0,
         "args": {"channels": ["memory/used_bytes", "cpu/percent"]}},
        c("cpu", 1000, percent=10.0),
        c("memory", 1000, used_bytes=5),
        c("cpu", 2000, percent=20.0, user_percent=1.5),  # a key first seen here: NaN before
        c("cpu", 3000),                                  # "args": {}: every value unknown from here
        c("cpu", 4000, percent=None, user_percent=2.5),  # null: unknown
        c("sysprof", 4000, taken=4),                     # the statistics counter: no channel
        c("cpu", 1500, percent=15.0),                    # out of order: sorted in
        {"name": "cpu", "ph": "C", "ts": -5, "pid": 7, "tid": 0, "args": {"percent": 1.0}},  # impossible time
        {"name": "cpu", "ph": "C", "ts": T0 + 5000, "pid": 7, "tid": 0, "args": [1]},       # args not an object
    ]
    d = TraceData(iter(events))
    assert list(d.series) == ["memory/used_bytes", "cpu/percent", "cpu/user_percent"]
    t, v = d.series["cpu/percent"]
    assert t.tolist() == [T0 + 1000, T0 + 1500, T0 + 2000, T0 + 3000, T0 + 4000]
    assert np.array_equal(v, [10.0, 15.0, 20.0, NAN, NAN], equal_nan=True)
    t2, v2 = d.series["cpu/user_percent"]
    assert t2 is t  # a counter's keys share its times
    assert np.array_equal(v2, [NAN, NAN, 1.5, NAN, 2.5], equal_nan=True)
    assert d.series["memory/used_bytes"][0].tolist() == [T0 + 1000]
    assert d.series["memory/used_bytes"][1].tolist() == [5.0]
    assert d.last_counter_stats == {"taken": 4}
    assert d.timestamps().tolist() == [T0 + t for t in (1000, 1500, 2000, 3000, 4000)]
    assert_same_series(d.series, reference_series(events))


def test_columns_across_buffers_keys_appearing_and_leaving():
    """More events than one buffer holds (columns.FLUSH), keys that come, go and come back, a value numpy
    cannot read (its channel is no channel, as a whole) and one it can ("2.5")."""
    n = 3 * columns_module.FLUSH + 17
    events = []
    for i in range(n):
        args = {"a": float(i)}
        if i % 7:
            args["b"] = i * 0.5
        if i >= columns_module.FLUSH + 3:
            args["late"] = -float(i)
        if i == 2 * columns_module.FLUSH + 5:
            args["odd"] = "not a number"
            args["a"] = "2.5"
        if i % 3 == 0:
            args.pop("a")
        events.append(c("g", i, **args))
        events.append(c("h", i, x=i))
    d = TraceData(events)
    assert list(d.series) == ["g/a", "g/b", "g/late", "h/x"]  # g/odd: not numeric
    a = d.series["g/a"][1]
    assert a[2 * columns_module.FLUSH + 5] == 2.5
    assert np.isnan(a[::3]).all() and np.isnan(d.series["g/late"][1][:columns_module.FLUSH + 3]).all()
    assert d.series["g/late"][1][-1] == -(n - 1)
    assert d.series["h/x"][0] is d.series["g/a"][0]  # equal times: one array
    assert_same_series(d.series, reference_series(events))


def test_exact_ns_kept_per_counter():
    from sysprof.trace.perfetto import TraceTime

    exact = (T0 + 1000) * 1000 + 1
    events = [{"name": "cpu", "ph": "C", "ts": TraceTime(exact), "pid": 1, "tid": 0, "args": {"percent": 1.0}},
              {"name": "mem", "ph": "C", "ts": TraceTime(exact + 7), "pid": 1, "tid": 0, "args": {"used": 2.0}},
              {"name": "cpu", "ph": "C", "ts": T0 + 2000, "pid": 1, "tid": 0, "args": {"percent": 3.0}}]
    d = TraceData(events)
    assert d.series_ns["cpu/percent"].tolist() == [exact, -1]  # -1: no exact ns (an int µs ts)
    assert d.series_ns["mem/used"].tolist() == [exact + 7]
    assert TraceData(events[2:]).series_ns is None  # the first counter event decides


def test_counter_columns_alone():
    cols = CounterColumns()
    for ts, args in ((5, {"k": 1}), (3, {"k": None, "j": 2}), (4, {"k": 1.0, "j": 2}), (6, {"k": 1.0, "j": 2.5})):
        cols.add("g", ts, args)
    got = [(n, k, t.tolist(), i.tolist(), v.tolist()) for n, k, t, i, v, ns in cols.columns()]
    assert [g[:4] for g in got] == [("g", "k", [5.0, 3.0, 4.0, 6.0], [0, 1, 2]),  # changes only: 1, NaN, 1.0
                                    ("g", "j", [5.0, 3.0, 4.0, 6.0], [0, 1, 3])]  # NaN, 2, 2.5
    assert got[0][4][0] == 1.0 and np.isnan(got[0][4][1]) and got[0][4][2] == 1.0
    assert np.isnan(got[1][4][0]) and got[1][4][1:] == [2.0, 2.5]
    assert list(cols.columns()) == []  # handed over


def test_held_keeps_every_bit():
    """Changes are told apart bit for bit, so values come back exactly: -0.0 after 0.0, NaN payloads, inf."""
    other_nan = np.array([0x7FF8000000000001], dtype=np.int64).view(np.float64)[0]
    v = np.array([0.0, 0.0, -0.0, -0.0, NAN, NAN, other_nan, np.inf, np.inf, 1e-300, 5.0, 5.0])
    index, values = columns_module.held(v)
    assert index.tolist() == [0, 2, 4, 6, 7, 9, 10]
    back = columns_module.expand(index, values, v.size)
    assert back.view(np.int64).tolist() == v.view(np.int64).tolist()
    assert columns_module.expand(np.zeros(0, np.int64), np.zeros(0), 0).size == 0


def test_held_series_is_a_mapping_of_whole_values():
    s = columns_module.HeldSeries()
    s["a"] = ([1.0, 2.0, 3.0], [7.0, 7.0, 8.0])
    t, v = s["a"]
    assert t.tolist() == [1.0, 2.0, 3.0] and v.tolist() == [7.0, 7.0, 8.0]
    assert s.changes("a")[1].tolist() == [0, 2] and s.times("a") is t
    assert dict(s.items())["a"][1].tolist() == [7.0, 7.0, 8.0] and "a" in s and len(s) == 1
    del s["a"]
    assert not s


# --------------------------------------------------------------------------------------------------
# sample lists
# --------------------------------------------------------------------------------------------------
def test_sample_times_array_matches_the_list_rule():
    good = samples_event([5_000_000, 6_000_000, 6_000_000, 9_000_000], 1, 5000, 1000)["args"]
    assert sample_times_array(good).tolist() == [5_000_000, 6_000_000, 6_000_000, 9_000_000]
    assert sample_times_array(good).dtype == np.int64
    assert sample_times_ns({"t0_ns": 7, "dt_ns": []}) == [7]
    assert sample_times_ns({"t0_ns": 7, "dt_ns": [True, 2]}) == [7, 8, 10]  # a bool is an int, as before
    assert sample_times_ns({"t0_us": 1, "dt_us": [1.0]}) == []
    assert sample_times_ns({"t0_us": 1, "dt_us": [[1]]}) == []
    assert sample_times_ns({"t0_us": 1, "dt_us": [1], "t0_ns": 3, "dt_ns": [1]}) == [1000, 2000]
    assert sample_times_ns({"t0_us": 1.5, "dt_us": [1], "t0_ns": 3, "dt_ns": [1]}) == [3, 4]  # us malformed: ns
    assert sample_times_ns({"t0_ns": 2 ** 62, "dt_ns": [2 ** 62]}) == []  # past int64
    assert sample_times_ns({"t0_ns": 1, "dt_ns": [2 ** 64]}) == []
    assert sample_times_ns({"t0_ns": -5, "dt_ns": [2, 3]}) == [-5, -3, 0]


# --------------------------------------------------------------------------------------------------
# traces written by sysprof's writers, read streaming: the reference's series
# --------------------------------------------------------------------------------------------------
CHANNELS = ("cpu/percent", "cpu/user_percent", "memory/used_bytes", "memory/available_bytes", "disk/sda/read_bytes",
            "load/1m")


def _rows(n):
    """Rows with NaN gaps (a whole counter unknown for a while, one key unknown) and held stretches."""
    rng = np.random.default_rng(28)
    v = np.round(rng.random((n, len(CHANNELS))) * 100, 2)
    v[:, 2] = np.repeat(np.arange(n // 10 + 1) * 4096.0, 10)[:n]  # changes every 10th row
    v[30:45, 0] = NAN             # one key of cpu unknown
    v[50:60, 2:4] = NAN           # the whole memory counter unknown: "args": {}
    v[:, 4] = 7.0                 # never changes
    v[100:, 5] = NAN              # unknown to the end
    return v


def _write(path, n, every_row=False, gz=False, writer=ChromeTraceWriter, part=None, start_ns=T0 * 1000):
    builder = EventBuilder(CHANNELS, system_pid=7, changes_only=not every_row)
    exact = getattr(writer, "timestamp", None)
    if exact is not None:
        builder.ts = exact
    ts = exact if exact is not None else (lambda t: t // 1000)
    values = _rows(n)
    start = {"interval_s": 0.001, "channels": list(CHANNELS)}
    if part is not None:
        start["part"] = {"index": part, "recording_id": "rec"}
    with writer(path, overwrite=True) as w:
        w.write({"name": START_EVENT, "ph": "i", "s": "g", "ts": ts(start_ns), "pid": 7, "tid": 0, "args": start})
        w.write(builder.units_event())
        for i in range(0, n, 40):
            times = start_ns + np.arange(i, min(n, i + 40), dtype=np.int64) * 1_000_000 + 250
            batch = sysprof.Batch(times, values[i:i + 40], CHANNELS, 0.001)
            if builder.changes_only:
                w.write(samples_event(times.tolist(), 7, ts(int(times[0])), 1 if exact is not None else 1000))
            w.write_many(builder.events(batch))
            if i == 40:
                w.write({"name": "step", "ph": "X", "ts": ts(int(times[0])), "dur": 5000, "pid": 7, "tid": 1})
        w.write_many(builder.finish())
        w.write({"name": STOP_EVENT, "ph": "i", "s": "g", "ts": ts(start_ns + n * 1_000_000), "pid": 7, "tid": 0,
                 "args": {"samples_written": n, "part": start.get("part")}})
    return path


@pytest.mark.parametrize("kind", ["changes", "every-row", "gz", "cut", "pftrace"])
def test_streamed_columns_equal_the_event_list_rule(tmp_path, kind):
    n = 250
    if kind == "pftrace":
        pytest.importorskip("perfetto")
        from sysprof.trace.perfetto import PerfettoTraceWriter

        path = _write(tmp_path / "t.pftrace", n, writer=PerfettoTraceWriter)
    else:
        name = "t.json.gz" if kind == "gz" else "t.json"
        path = _write(tmp_path / name, n, every_row=kind == "every-row")
    if kind == "cut":  # a killed recorder's: no closing bracket, the last event cut
        data = path.read_bytes()
        path.write_bytes(data[:len(data) * 2 // 3])
    events = load_events(path)
    d = TraceData(iter_events(path))
    assert_same_series(d.series, reference_series(events))
    assert d.units == TraceData(events).units and d.units["memory/used_bytes"] == "B"
    assert d.sample_ns.tolist() == TraceData(events).sample_ns.tolist()
    assert d.spans == TraceData(events).spans and [s.name for s in d.spans] == ["step"]
    if kind == "every-row":  # counters written at every sample share one times array (memory and load left rows
        assert d.series["cpu/percent"][0] is d.series["disk/sda/read_bytes"][0]  # out where wholly unknown)
        assert d.series["memory/used_bytes"][0].size == n - 9 and d.series["load/1m"][0].size == 101
    if kind != "cut":
        assert d.stop["samples_written"] == n
    memory = d.series["memory/used_bytes"][1]
    if kind in ("changes", "gz", "pftrace"):  # "args": {} where memory turned unknown, its value back after
        t = d.series["memory/used_bytes"][0]
        unknown = t[np.isnan(memory)]
        assert unknown.size == 1 and ((unknown - T0) // 1000).tolist() == [50]


def test_parts_read_as_one(tmp_path):
    from sysprof.cli.commands import _read_parts

    one = _write(tmp_path / "t.part0001.json", 120, part=1)
    two = _write(tmp_path / "t.part0002.json", 80, part=2, start_ns=(T0 + 200_000) * 1000)
    d = _read_parts([str(one), str(two)])
    events = read_trace(one) + read_trace(two)
    assert_same_series(d.series, reference_series(events))
    assert d.sample_ns.size == 200 and d.stop["samples_written"] == 200
    with pytest.raises(Exception, match="distinct parts"):
        _read_parts([str(one), str(one)])


def test_composer_layout_reads_the_same(tmp_path):
    from sysprof.trace.tracks import EventRenderer, TrackLayout

    channels = ("cpu/percent", "memory/used_bytes", "disk/sda/read_bytes")
    layout = TrackLayout(channels, "composer")
    r = EventRenderer(layout, changes_only=False, pid=0, tid=0)
    values = np.array([[10.0, 2e9, 4096.0], [NAN, 3e9, 8192.0], [30.0, NAN, 8192.0]])
    batch = sysprof.Batch(np.array([1, 2, 3], dtype=np.int64) * 1_000_000 + T0 * 1000, values, channels, 0.001)
    path = tmp_path / "composer.json"
    with ChromeTraceWriter(path) as w:
        w.write_many(r.events(batch))
    events = read_trace(path)
    d = TraceData(iter_trace(path))
    assert_same_series(d.series, reference_series(events))
    assert d.series["memory/virtual/used_gb"][1].tolist()[:2] == [2.0, 3.0]


def test_damaged_trace_streams_its_warning_after_the_events(tmp_path):
    from sysprof.trace.chrome import TraceDamageWarning

    path = tmp_path / "t.json"
    events = [c("cpu", i, percent=float(i)) for i in range(5)]
    lines = [json.dumps(e) for e in events]
    lines[2] = lines[2][:20] + "\x00" + lines[2][21:]  # damaged: that event is lost
    path.write_text("[\n" + ",\n".join(lines) + "\n]\n")
    with pytest.warns(TraceDamageWarning, match="1 damaged event"):
        d = TraceData(iter_events(path))
    assert d.series["cpu/percent"][1].tolist() == [0.0, 1.0, 3.0, 4.0]


def test_not_a_trace_is_told_by_the_stream(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("hello\n")
    with pytest.raises(ValueError, match="not a trace"):
        TraceData(iter_events(p))
    p.write_bytes(b"")
    with pytest.raises(ValueError, match="empty file"):
        list(iter_events(p))


def test_perfetto_stream_is_its_event_list(tmp_path):
    pytest.importorskip("perfetto")
    from sysprof.trace.perfetto import PerfettoTraceWriter, iter_events as pf_events, read_events

    path = _write(tmp_path / "t.pftrace", 120, writer=PerfettoTraceWriter)
    streamed = list(pf_events(path))
    assert streamed == read_events(path) and len(streamed) > 120


# --------------------------------------------------------------------------------------------------
# frames in blocks (export)
# --------------------------------------------------------------------------------------------------
def test_frame_blocks_are_the_frame(tmp_path):
    pd = pytest.importorskip("pandas")
    from sysprof.frames import TraceFrame, csv_text, trace_frame, write_csv

    path = _write(tmp_path / "t.json", 250)
    d = TraceData(iter_events(path))
    whole = trace_frame(d)
    assert whole.shape == (250, len(CHANNELS))
    blocks = list(TraceFrame(d).blocks(rows=37))
    assert len(blocks) == 7 and [len(b) for b in blocks][-1] == 250 - 6 * 37
    joined = pd.concat(blocks)
    pd.testing.assert_frame_equal(joined, whole, check_exact=True)
    assert joined.index.asi8.tolist() == whole.index.asi8.tolist()
    assert all(b.attrs == whole.attrs for b in blocks)
    out = io.BytesIO()
    write_csv(TraceFrame(d).blocks(rows=37), out)
    assert out.getvalue().decode() == csv_text(whole)
    # the every-row trace and the changes-only one are the same table
    every = trace_frame(TraceData(iter_events(_write(tmp_path / "e.json", 250, every_row=True))))
    pd.testing.assert_frame_equal(every, whole, check_exact=True)


def test_csv_blocks_write_the_times_of_the_whole_frame():
    """pandas writes a time index with the fewest digits that show all its times: a block of whole ms among others
    with ns must write ns, as the whole frame does."""
    pd = pytest.importorskip("pandas")
    from sysprof.frames import csv_text, write_csv

    for times, unit in (([1, 2, 3], "s"), ([1.001, 2, 3], "ms"), ([1, 2, 3.000001], "us"),
                        ([1, 2.5, 3.000000001], "ns")):
        ns = [T0 * 1000 + round(t * 1e9) for t in times]
        idx = pd.DatetimeIndex(np.array(ns, dtype=np.int64).view("datetime64[ns]"), name="time").tz_localize("UTC")
        df = pd.DataFrame({"a": [1.0, NAN, 2.5]}, index=idx)
        out = io.BytesIO()
        write_csv([df.iloc[:1], df.iloc[1:2], df.iloc[2:]], out, unit)
        assert out.getvalue().decode() == csv_text(df)
    assert csv_text(df).splitlines()[1] == "2025-12-01 14:40:01.000000000+00:00,1.0"


def test_frame_time_unit(tmp_path):
    from sysprof.frames import TraceFrame

    d = TraceData(iter_events(_write(tmp_path / "t.json", 50)))
    assert TraceFrame(d).time_unit() == "ms"  # whole ms
    events = [c("cpu", 1000, percent=1.0), c("cpu", 1000.25, percent=2.0)]
    assert TraceFrame(TraceData(events)).time_unit() == "ns"
    assert TraceFrame(TraceData(events[:1])).time_unit() == "ms"


def test_parquet_in_blocks_reads_back(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from sysprof.frames import TraceFrame, trace_frame, write_parquet

    d = TraceData(iter_events(_write(tmp_path / "t.json", 250)))
    frame = TraceFrame(d)
    frame.select(lambda ch: not ch.startswith("load/"))
    out = tmp_path / "t.parquet"
    write_parquet(frame.blocks(rows=100), str(out))
    assert pq.ParquetFile(out).num_row_groups == 3
    back = pd.read_parquet(out)
    back.columns.name = "channel"
    want = trace_frame(d).drop(columns=["load/1m"])
    pd.testing.assert_frame_equal(back, want, check_exact=True)
    assert json.loads(pq.read_schema(out).metadata[b"sysprof"])["units"] == {
        ch: want.attrs["units"][ch] for ch in want.columns}


def test_export_writes_blocks_of_a_long_table(tmp_path, monkeypatch):
    pd = pytest.importorskip("pandas")
    import sysprof.frames as frames
    from sysprof.cli import main

    monkeypatch.setattr(frames, "BLOCK_VALUES", 64)  # blocks of 1024 rows (the least)
    trace = _write(tmp_path / "t.json.gz", 2500)
    out = tmp_path / "t.csv"
    assert main(["export", str(trace), "-o", str(out), "-q"]) == 0
    back = pd.read_csv(out, index_col="time", parse_dates=["time"])
    back.columns.name = "channel"
    want = sysprof.read_trace(trace)
    assert back.shape == want.shape == (2500, len(CHANNELS))
    text = out.read_text()
    assert text.count("time,") == 1
    assert text.splitlines()[1].startswith("2025-12-01 14:40:00.000+00:00,")  # whole ms: the whole table's digits
    assert np.array_equal(back.to_numpy(), want.to_numpy(), equal_nan=True)
    assert (back.index == want.index).all()
