"""DataFrames and files (issue 12, item 4): Batch.to_pandas(), sysprof.read_trace() over every trace layout,
sysprof.trace.load's format detection, the Composer-name inverse, ``sysprof export`` to Parquet and CSV.

Expected frames are literal numbers written out by hand from the events each test builds."""
from __future__ import annotations

import gzip
import json
import math
import os
import sys
import time
import types

import numpy as np
import pytest

import sysprof
from sysprof.report import ReportError, TraceData
from sysprof.trace.composer import sampler_channel, sampler_channels
from sysprof.trace.load import load_events, trace_format
from sysprof.trace.tracks import EventRenderer, TrackLayout

from cli_support import assert_one_line_error, run_cli
from test_sampler_fixtures import OFF, Tree

pd = pytest.importorskip("pandas")

NAN = float("nan")
T0 = 1_764_600_000_000_000  # µs since the epoch (2025-12-01): every hand-built trace starts here


def ns(*us):
    """The index, in ns, of trace timestamps given in µs after T0."""
    return [T0 * 1000 + int(round(u * 1000)) for u in us]


def frame(index_ns, columns):
    """The expected frame: UTC index ``time`` from ns, float64 columns in the given order."""
    idx = pd.DatetimeIndex(np.asarray(index_ns, dtype=np.int64).view("datetime64[ns]"), name="time").tz_localize("UTC")
    df = pd.DataFrame({k: np.asarray(v, dtype=np.float64) for k, v in columns.items()}, index=idx)
    df.columns.name = "channel"
    return df


def same(got, want):
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert got.index.asi8.tolist() == want.index.asi8.tolist()  # ns for ns


# --------------------------------------------------------------------------------------------------
# Batch.to_pandas on a fixture tree
# --------------------------------------------------------------------------------------------------
def test_batch_to_pandas_is_the_batch(tmp_path):
    tree = Tree("full", tmp_path)
    flags = dict(OFF, cpu=True, per_cpu=True, memory=True, disk=True, net=True, load=True)
    s = sysprof.Sampler(interval=0.01, capacity=4096, backend="native", proc_root=tree.proc, sys_root=tree.sys,
                        **flags)
    s.start()
    time.sleep(0.1)
    tree.apply("v2")
    time.sleep(0.1)
    s.stop()
    batch = s.drain()
    assert len(batch) >= 3
    df = batch.to_pandas()
    assert list(df.columns) == list(batch.channels)
    assert df.shape == batch.values.shape
    assert all(str(t) == "float64" for t in df.dtypes)
    assert np.array_equal(df.to_numpy(), batch.values, equal_nan=True)
    assert str(df.index.tz) == "UTC" and df.index.name == "time"
    assert df.index.asi8.tolist() == batch.timestamps_ns.tolist()
    assert np.shares_memory(df["load/1m"].to_numpy(), batch.values)  # a view, not a copy
    assert (df["memory/total_bytes"] == 8000000 * 1024).all()  # tests/fixtures/full: MemTotal 8000000 kB
    assert (df["load/procs_total"] == 345.0).all()
    assert df.attrs["interval_s"] == 0.01
    units = df.attrs["units"]
    assert set(units) == set(batch.channels)
    assert (units["memory/total_bytes"], units["cpu/0/percent"], units["disk/sda/read_bytes_per_second"],
            units["load/1m"]) == ("B", "%", "B/s", "")


def test_empty_batch_and_missing_pandas(monkeypatch, tmp_path):
    from sysprof.frames import parquet_bytes

    batch = sysprof.Batch(np.zeros(0, dtype=np.int64), np.zeros((0, 2)), ("cpu/percent", "memory/used_bytes"))
    df = batch.to_pandas()
    assert df.shape == (0, 2) and list(df.columns) == ["cpu/percent", "memory/used_bytes"]
    assert df.attrs["interval_s"] is None
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r"Parquet files need pyarrow .*pip install 'sysprof\[pandas\]'"):
        parquet_bytes(df)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"DataFrames need pandas .*pip install 'sysprof\[pandas\]'"):
        batch.to_pandas()
    with pytest.raises(ImportError, match=r"pip install 'sysprof\[pandas\]'"):
        sysprof.read_trace(write_json(tmp_path / "t.json", record_events()))


# --------------------------------------------------------------------------------------------------
# read_trace: a changes-only trace of sysprof record's layout
# --------------------------------------------------------------------------------------------------
META = {"version": "0.1.0", "interval_s": 0.001, "backend": "native",
        "channels": ["cpu/percent", "cpu/user_percent", "memory/used_bytes", "disk/sda/read_bytes"]}


def c(name, t, **args):
    return {"name": name, "ph": "C", "ts": T0 + t, "pid": 7, "tid": 0, "args": args}


def record_events():
    return [
        {"name": "sysprof start", "ph": "i", "s": "g", "ts": T0, "pid": 7, "tid": 0, "args": META},
        {"name": "sysprof units", "ph": "M", "pid": 7, "tid": 0,
         "args": {"units": {"cpu/percent": "%", "cpu/user_percent": "%", "memory/used_bytes": "B",
                            "disk/sda/read_bytes": "B"}}},
        c("cpu", 1000, percent=10.0, user_percent=5.0),
        c("memory", 1000, used_bytes=100.0),
        c("cpu", 2000, percent=20.0),                        # user_percent unknown from here
        c("sysprof", 2000, taken=2, dropped=0),              # the stats counter: not a channel
        c("disk/sda", 3000.25, read_bytes=4096.0),           # sub-µs: 0.25 µs is exact in float64 here
        c("memory", 3000.25, used_bytes=300.0),
        {"name": "phase", "ph": "X", "ts": T0 + 1500, "dur": 1000, "pid": 7, "tid": 1},  # not a sample time
        c("cpu", 4000, percent=20.0, user_percent=7.0),
        c("memory", 4000),                                   # all-unknown: the old value stops holding
        {"name": "sysprof stop", "ph": "i", "s": "g", "ts": T0 + 5000, "pid": 7, "tid": 0,
         "args": {"stats": {"taken": 4, "dropped": 0}}},
    ]


RECORD_FRAME = {
    "cpu/percent": [10, 20, 20, 20],
    "cpu/user_percent": [5, NAN, NAN, 7],
    "memory/used_bytes": [100, 100, 300, NAN],
    "disk/sda/read_bytes": [NAN, NAN, 4096, 4096],
}
RECORD_TIMES = (1000, 2000, 3000.25, 4000)


def write_json(path, events, opener=open, cut=None):
    text = "[\n" + ",\n".join(json.dumps(e) for e in events) + "\n]\n"
    if cut is not None:
        text = text[:cut]
    with opener(path, "wt") as f:
        f.write(text)
    return path


def test_read_trace_forward_fills_a_changes_only_trace(tmp_path):
    df = sysprof.read_trace(write_json(tmp_path / "t.json", record_events()))
    same(df, frame(ns(*RECORD_TIMES), RECORD_FRAME))
    assert df.index.asi8[2] == (T0 + 3000) * 1000 + 250
    assert df.attrs["units"] == {"cpu/percent": "%", "cpu/user_percent": "%", "memory/used_bytes": "B",
                                 "disk/sda/read_bytes": "B"}
    assert df.attrs["meta"] == META
    assert (df.attrs["interval_s"], df.attrs["interval_source"]) == (0.001, "metadata")
    assert (df.attrs["layout"], df.attrs["renamed"], df.attrs["truncated"]) == ("sysprof", {}, False)
    assert df.attrs["stats"] == {"taken": 4, "dropped": 0}


def test_read_trace_gzip_truncated_and_named_by_content(tmp_path):
    events = record_events()
    text = "[\n" + ",\n".join(json.dumps(e) for e in events) + "\n]\n"
    cut = text.index('"sysprof stop"') - 5  # inside the stop event: a killed recorder's trace
    want = frame(ns(*RECORD_TIMES), RECORD_FRAME)
    gz = write_json(tmp_path / "t.json.gz", events, gzip.open, cut=cut)
    df = sysprof.read_trace(gz)
    same(df, want)
    assert df.attrs["truncated"] is True
    plain = tmp_path / "gzip-named.json"  # gzip content under a .json name: decided by content
    plain.write_bytes(gz.read_bytes())
    same(sysprof.read_trace(plain), want)
    lead = tmp_path / "newline.trace"  # JSON opening with a newline (0x0a, as a protobuf packet tag)
    lead.write_text("\n" + json.dumps(events))
    same(sysprof.read_trace(lead), want)


def test_json_object_format_and_foreign_chrome_trace(tmp_path):
    p = tmp_path / "obj.json"
    p.write_text(json.dumps({"traceEvents": [
        {"name": "gpu", "ph": "C", "ts": 10, "pid": 1, "args": {"temp": 50}},
        {"name": "gpu", "ph": "C", "ts": 30, "pid": 1, "args": {"temp": 55}},
        {"name": "fps", "ph": "C", "ts": 20, "pid": 1, "args": {"value": 60}},
    ]}))
    df = sysprof.read_trace(p)
    idx = [10_000, 20_000, 30_000]
    same(df, frame(idx, {"gpu/temp": [50, 50, 55], "fps": [NAN, 60, 60]}))
    assert (df.attrs["layout"], df.attrs["meta"], df.attrs["interval_source"]) == ("chrome", {}, "median spacing")
    assert df.attrs["interval_s"] == 1e-5  # 10 µs between samples


# --------------------------------------------------------------------------------------------------
# the Composer layout: names mapped back to the sampler's
# --------------------------------------------------------------------------------------------------
COMPOSER_CHANNELS = ("cpu/percent", "cpu/0/percent", "memory/used_bytes", "memory/available_bytes",
                     "disk/sda/read_bytes", "disk/sda/busy_time_seconds", "disk/sda/busy_time_seconds_per_second",
                     "net/eth0/bytes_sent", "process/rss_bytes", "pressure/cpu/some_avg10_percent")
COMPOSER_ROWS = [  # values whose Composer scaling and its inverse are both exact in float64
    [12.5, 50.0, 2.5e9, 5e8, 4096.0, 1.5, 0.25, 12000.0, 1.5e9, 0.5],
    [25.0, 75.0, 2.5e9, 5e8, 8192.0, 2.0, 0.5, 24000.0, 1.5e9, 1.0],
]


class _Rows:
    def __init__(self, ts_ns, values):
        self.timestamps_ns, self.values = np.asarray(ts_ns, dtype=np.int64), np.asarray(values, dtype=np.float64)

    def __len__(self):
        return len(self.timestamps_ns)


def test_composer_layout_maps_back_to_sampler_names(tmp_path):
    layout = TrackLayout(COMPOSER_CHANNELS, "composer", rates=True)
    r = EventRenderer(layout, changes_only=False, pid=0, tid=4321)
    times = ns(0, 5000)
    events = [layout.units_event(0)] + r.events(_Rows(times, COMPOSER_ROWS))
    events.append({"name": "memory/cuda/current_allocated_mem", "cat": "memory", "ph": "C", "ts": T0 + 5000,
                   "pid": 0, "tid": 4321, "args": {"current_allocated_mem": 1.25}})
    names = {e["name"] for e in events if e.get("ph") == "C"}
    assert {"memory/virtual", "disk/sda/busy_time", "network/eth0/kb_sent", "process/memory"} <= names
    df = sysprof.read_trace(write_json(tmp_path / "composer.json", events))
    want = {ch: [row[i] for row in COMPOSER_ROWS] for i, ch in enumerate(COMPOSER_CHANNELS)}
    want["memory/cuda/current_allocated_mem"] = [NAN, 1.25]
    same(df[sorted(df.columns)], frame(times, {k: want[k] for k in sorted(want)}))
    assert df.attrs["layout"] == "composer"
    assert df.attrs["renamed"] == {
        "cpu/cpu_percent": "cpu/percent", "cpu/0/cpu_percent": "cpu/0/percent",
        "memory/virtual/used_gb": "memory/used_bytes", "memory/virtual/available_gb": "memory/available_bytes",
        "disk/sda/busy_time": "disk/sda/busy_time_seconds",
        "disk/sda/busy_percent": "disk/sda/busy_time_seconds_per_second",
        "network/eth0/kb_sent": "net/eth0/bytes_sent", "process/memory/rss_gb": "process/rss_bytes"}
    units = df.attrs["units"]
    assert (units["memory/used_bytes"], units["disk/sda/busy_time_seconds"], units["net/eth0/bytes_sent"],
            units["disk/sda/busy_time_seconds_per_second"], units["memory/cuda/current_allocated_mem"],
            units["pressure/cpu/some_avg10_percent"]) == ("B", "s", "B", "s/s", "GB", "%")


def test_composer_inverse_is_exact_in_names():
    assert sampler_channel("memory/swap/free_gb") == ("swap/free_bytes", 1e9, 1.0)
    assert sampler_channel("network/ib0/kb_recv_per_second") == ("net/ib0/bytes_recv_per_second", 1e3, 1.0)
    assert sampler_channel("disk/nvme0n1/write_time") == ("disk/nvme0n1/write_time_seconds", 1.0, 1000.0)
    assert sampler_channel("disk/sda/read_count") == ("disk/sda/read_count", 1.0, 1.0)
    assert sampler_channel("gpu/1/power_watts") == ("gpu/1/power_watts", 1.0, 1.0)
    for foreign in ("memory/cuda/current_allocated_mem", "cpu/x/cpu_percent", "memory/virtual/total_gb",
                    "network/eth0/kb_lost"):
        assert sampler_channel(foreign) is None, foreign
    # a sampler name already in the set is never taken twice; identities are not listed
    assert sampler_channels(["cpu/cpu_percent", "cpu/percent", "disk/sda/read_bytes"]) == {}
    every = TrackLayout(["disk/sda/" + k for k in ("read_bytes", "write_time_seconds",
                                                   "write_count_per_second")], "composer", rates=True)
    back = [sampler_channel(ch)[0] for ch in every.units]
    assert back == ["disk/sda/read_bytes", "disk/sda/write_time_seconds", "disk/sda/write_count_per_second"]


# --------------------------------------------------------------------------------------------------
# the dispatcher: formats by content; Perfetto through sysprof.trace.perfetto
# --------------------------------------------------------------------------------------------------
def test_trace_format_by_content():
    assert trace_format("a.json", b"\x1f\x8b\x08") == "gzip"
    assert trace_format("a.pftrace", b"\x1f\x8b\x08") == "gzip"
    assert trace_format("a.json", b" \n[{") == "json"
    assert trace_format("a", b'{"traceEvents": []}') == "json"
    assert trace_format("a", b"\x0a\x05\x08\x01\x10\x02\x18") == "perfetto"
    assert trace_format("a.PFTRACE", b"\x0a\x5b" + bytes(91)) == "perfetto"  # 91-byte packet, not "\n["
    assert trace_format("a.json", b"\x0a\x5b{}") == "json"
    assert trace_format("a", b"\x0a\x00") == "unknown"  # an empty first packet
    assert trace_format("a", b"hello") == "unknown"
    assert trace_format("a", b"") == "unknown"


def test_perfetto_goes_to_its_reader(tmp_path, monkeypatch):
    p = tmp_path / "t.pftrace"
    p.write_bytes(b"\x0a\x02\x08\x01")
    exact = (T0 + 1000) * 1000 + 1  # 1 ns past a µs: not a float64 µs at this epoch
    fake = types.ModuleType("sysprof.trace.perfetto")
    seen = []

    def read_events(path):
        seen.append(os.fspath(path))
        return [{"name": "cpu", "ph": "C", "ts": exact / 1000, "ts_ns": exact, "pid": 1, "args": {"percent": 1.0}},
                {"name": "cpu", "ph": "C", "ts": (exact + 999) / 1000, "ts_ns": exact + 999, "pid": 1,
                 "args": {"percent": 2.0}}]
    fake.read_events = read_events
    monkeypatch.setitem(sys.modules, "sysprof.trace.perfetto", fake)
    df = sysprof.read_trace(p)
    assert seen == [str(p)]
    assert df.index.asi8.tolist() == [exact, exact + 999]
    assert df["cpu/percent"].tolist() == [1.0, 2.0]


def test_perfetto_without_its_reader(tmp_path, monkeypatch):
    import importlib

    p = tmp_path / "t.pftrace"
    p.write_bytes(b"\x0a\x02\x08\x01")
    real = importlib.import_module

    def no_perfetto(name, *a, **kw):
        if name == "sysprof.trace.perfetto":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real(name, *a, **kw)
    monkeypatch.setattr(importlib, "import_module", no_perfetto)
    with pytest.raises(ImportError, match="Perfetto protobuf trace.*sysprof.trace.perfetto is missing"):
        load_events(p)


@pytest.mark.parametrize("content, match", [
    (b"", "empty file"),
    (b"hello, world\n", "not a trace"),
    (b'{"a": 1}', "traceEvents"),
    (b"[]", "no counter events"),
    (b'[{"name": "x", "ph": "i", "ts": 1}]', "no counter events"),
])
def test_read_trace_refuses_what_is_no_trace(tmp_path, content, match):
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    with pytest.raises(ValueError, match=match) as err:
        sysprof.read_trace(p)
    assert isinstance(err.value, ReportError) == (match == "no counter events")


def test_read_trace_missing_file_and_fifo(tmp_path):
    with pytest.raises(FileNotFoundError):
        sysprof.read_trace(tmp_path / "nope.json")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        sysprof.read_trace(fifo)  # refused without blocking on the FIFO


# --------------------------------------------------------------------------------------------------
# sysprof export
# --------------------------------------------------------------------------------------------------
def test_export_parquet_reads_back_equal(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    trace = write_json(tmp_path / "t.json", record_events())
    out = tmp_path / "t.parquet"
    proc = run_cli("export", trace, "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and "4 rows x 4 channels" in proc.stderr
    want = frame(ns(*RECORD_TIMES), RECORD_FRAME)
    back = pd.read_parquet(out)
    back.columns.name = "channel"
    same(back, want)
    schema = pq.read_schema(out)
    assert schema.field("time").type == pa.timestamp("ns", tz="UTC")
    assert schema.field("memory/used_bytes").metadata == {b"unit": b"B"}
    attrs = json.loads(schema.metadata[b"sysprof"])
    assert attrs["units"]["cpu/percent"] == "%" and attrs["meta"] == META and attrs["layout"] == "sysprof"


def test_export_csv_reads_back_equal_and_selects(tmp_path):
    trace = write_json(tmp_path / "t.json", record_events())
    out = tmp_path / "t.csv"
    proc = run_cli("export", trace, "-o", out, "-k", "cpu/*", "-q")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    lines = out.read_text().splitlines()
    assert lines[0] == "time,cpu/percent,cpu/user_percent"
    assert lines[3] == "2025-12-01 14:40:00.003000250+00:00,20.0,"  # NaN: an empty field
    back = pd.read_csv(out, index_col="time", parse_dates=["time"])
    back.columns.name = "channel"
    same(back, frame(ns(*RECORD_TIMES), {k: RECORD_FRAME[k] for k in ("cpu/percent", "cpu/user_percent")}))
    stdout = run_cli("export", trace, "-o", "-", "-k", "memory")
    assert stdout.returncode == 0, stdout.stderr
    assert stdout.stdout.splitlines()[0] == "time,memory/used_bytes"
    assert stdout.stdout.splitlines()[1:] == ["2025-12-01 14:40:00.001000000+00:00,100.0",
                                              "2025-12-01 14:40:00.002000000+00:00,100.0",
                                              "2025-12-01 14:40:00.003000250+00:00,300.0",
                                              "2025-12-01 14:40:00.004000000+00:00,"]


def test_export_refuses_to_clobber(tmp_path):
    trace = write_json(tmp_path / "t.json", record_events())
    out = tmp_path / "out.csv"
    out.write_text("mine\n")
    proc = run_cli("export", trace, "-o", out)
    assert_one_line_error(proc, 1)
    assert "output exists" in proc.stderr and out.read_text() == "mine\n"
    assert run_cli("export", trace, "-o", out, "--force").returncode == 0
    assert out.read_text().startswith("time,cpu/percent,")
    victim = tmp_path / "victim.csv"
    victim.write_text("keep\n")
    link = tmp_path / "link.csv"
    link.symlink_to(victim)
    proc = run_cli("export", trace, "-o", link, "--force")
    assert_one_line_error(proc, 1)
    assert "symbolic link" in proc.stderr and victim.read_text() == "keep\n"
    proc = run_cli("export", trace, "-o", trace, "--format", "csv", "--force")
    assert_one_line_error(proc, 1)
    assert "the trace itself" in proc.stderr and sysprof.read_trace(trace).shape == (4, 4)


@pytest.mark.parametrize("args, rc, match", [
    (["missing.json", "-o", "x.csv"], 1, "no such file: missing.json"),
    (["bad.json", "-o", "x.csv"], 1, "cannot read bad.json: .*not a trace"),
    (["t.json", "-o", "x.txt"], 2, "cannot tell the format"),
    (["t.json", "-o", "-", "--format", "parquet"], 2, "not written to stdout"),
    (["t.json", "-o", "x.csv", "-k", "gpu"], 1, "no channel matches 'gpu'"),
])
def test_export_errors(tmp_path, args, rc, match):
    write_json(tmp_path / "t.json", record_events())
    (tmp_path / "bad.json").write_text("hello\n")
    proc = run_cli("export", *args, cwd=tmp_path)
    assert_one_line_error(proc, rc)
    assert __import__("re").search(match, proc.stderr), proc.stderr
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "x.txt").exists()


# --------------------------------------------------------------------------------------------------
# a real recording
# --------------------------------------------------------------------------------------------------
def test_recorded_trace_matches_trace_data(tmp_path):
    trace = tmp_path / "rec.json"
    proc = run_cli("record", "-q", "--duration", "0.3s", "--cpu", "--memory", "--disk", "-o", trace)
    assert proc.returncode == 0, proc.stderr
    from sysprof.trace.chrome import read_trace as read_events

    from sysprof.trace.schema import SAMPLES_EVENT, sample_times_ns

    events = read_events(trace)
    data = TraceData(events)
    df = sysprof.read_trace(trace)
    times = data.timestamps()
    assert all(t == int(t) for t in times.tolist())  # whole µs at the default 1 ms interval
    samples = [t for e in events if e.get("name") == SAMPLES_EVENT for t in sample_times_ns(e["args"])]
    assert df.index.asi8.tolist() == samples  # a row per sample (a sample where nothing changed has no event)
    assert {int(t) * 1000 for t in times.tolist()} <= set(samples)  # every event at a sample's time
    rows = df.index.asi8 // 1000
    assert list(df.columns) == list(data.series)
    assert df.attrs["meta"] == data.meta and df.attrs["meta"]["channels"]
    for ch, (t, v) in data.series.items():
        held = pd.Series(v, index=t).groupby(level=0).last()  # an event's value, the last at its time
        want = held.reindex(rows, method="ffill")  # held from each event until the next (NaN included)
        got = df[ch].to_numpy()
        assert np.array_equal(got, want.to_numpy(), equal_nan=True), ch
        assert df.attrs["units"][ch] == data.units[ch]
    assert math.isclose(df.attrs["interval_s"], data.interval()[0])


def test_profile_trace_reads_back_under_sampler_names(tmp_path):
    with sysprof.profile(str(tmp_path / "traces"), sys_prof_memory=True, sys_prof_disk=True,
                         sys_prof_stats_thread_interval_seconds=0.005) as prof:
        for _ in range(5):
            time.sleep(0.02)
            prof.step()
    trace = tmp_path / "traces" / "merged_trace.json"
    from sysprof.trace.chrome import read_trace as read_events

    data = TraceData(read_events(trace))
    df = sysprof.read_trace(trace)
    assert df.attrs["layout"] == "composer" and df.attrs["meta"] == {}
    assert df.attrs["renamed"]["memory/virtual/used_gb"] == "memory/used_bytes"
    assert "memory/virtual/used_gb" not in df.columns and df.attrs["units"]["memory/used_bytes"] == "B"
    t, v = data.series["memory/virtual/used_gb"]
    want = pd.Series(v * 1e9, index=t).groupby(level=0).last().reindex(data.timestamps(), method="ffill")
    assert np.array_equal(df["memory/used_bytes"].to_numpy(), want.to_numpy(), equal_nan=True)
    assert df["memory/used_bytes"].notna().all() and (df["memory/used_bytes"] > 0).all()
    disks = [c for c in df.columns if c.startswith("disk/") and c.endswith("/busy_time_seconds")]
    assert disks and all(df.attrs["units"][c] == "s" for c in disks)
