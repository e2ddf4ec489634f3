"""The flight recorder's decimated trace of the whole run (sysprof.flight, FlightOptions.trace_every_s, ``record
--flight-trace``; issue 30 item 3): its rows are the spans' values (totals at the row, rates and gauges as the
time-weighted mean, bit masks OR-ed), report reads it and finds the full-rate trace's means and amounts, it is
bounded on disk, and the dumps are as without it."""
from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from sysprof.flight import FLIGHT_EVENT, FlightOptions, FlightRecorder, decimation_modes
from sysprof.report import TraceData
from sysprof.sampling.rows import Batch
from sysprof.trace.chrome import read_trace
from sysprof.trace.load import load_events

from cli_support import run_cli, series, wait_for
from fake_nvml.support import needs_native

T0 = 1_700_000_000_000_000_000  # ns, a multiple of 100 ms: the spans start at rows 0, 10, 20, ...
MS = 1_000_000
CH = ("cpu/percent", "net/eth0/bytes_recv", "disk/sda/read_bytes_per_second", "gpu/0/clocks_event_reasons")


def _rows(k0, n):
    """Rows k0 .. k0 + n - 1, 10 ms apart from T0: cpu/percent = k, bytes_recv = 500 k (a total), a disk's read
    rate 1000 x (k mod 10) (not the total's: report integrates it), the clocks-event reasons 1 (GPU idle) before
    row 55 and 2 (applications clocks) from it."""
    k = np.arange(k0, k0 + n)
    values = np.stack([k, 500.0 * k, 1000.0 * (k % 10), np.where(k < 55, 1.0, 2.0)], axis=1)
    return Batch(T0 + k.astype(np.int64) * 10 * MS, values, CH, 0.01)


def _recorder(tmp_path, every=0.1, **opts):
    opts.setdefault("min_gap_s", 0.0)
    lines = []
    rec = FlightRecorder(tmp_path / "out", CH, 0.01, FlightOptions(window_s=3.0, trace_every_s=every, **opts),
                         pid=4242, notify=lines.append)
    return rec, lines


def _feed(rec, n=100, per=7, steps=True):
    """Rows 0 .. n - 1 in batches of ``per`` (spans cross batches), a 50 ms step span every 100 ms before each."""
    for k in range(0, n, per):
        if steps:
            rec.feed_events([{"name": "step", "ph": "X", "ts": (T0 + j * 10 * MS) // 1000, "dur": 50_000,
                              "pid": 1, "tid": 1} for j in range(k, min(n, k + per)) if j % 10 == 0])
        rec.feed(_rows(k, min(per, n - k)))


def test_modes_by_kind():
    assert decimation_modes(CH + ("gpu/0/xid_last", "gpu/0/reading_time_seconds", "process_tree/3/pid",
                                  "memory/used_bytes", "cpu/user_seconds_total", "no/such_channel")) == [
        "mean", "at", "mean", "any", "at", "at", "at", "mean", "at", "at"]


def test_rows_are_the_spans_values(tmp_path):
    rec, lines = _recorder(tmp_path)
    _feed(rec)
    rec.close()
    path = str(tmp_path / "out" / "trace.json.gz")
    assert rec.trace == {"path": path, "every_s": 0.1, "rows_in": 100, "rows": 11, "bytes": os.path.getsize(path),
                         "cut": None, "done": True}
    assert lines == [] and rec.written == []
    events = read_trace(path)
    got = series(events)
    span = [(T0 + j * 100 * MS) // 1000 for j in range(10)]
    last, end = (T0 + 990 * MS) // 1000, (T0 + 1000 * MS) // 1000
    # a row per span at its first sample, the last sample's own row, then the values end (NaN: an empty event)
    # where that sample's interval does
    assert got["cpu/percent"] == list(zip(span, [10 * j + 4.5 for j in range(9)] + [94])) + [(last, 99)]
    assert got["net/eth0/bytes_recv"] == list(zip(span, [5000 * j for j in range(10)])) + [(last, 49500)]
    assert got["disk/sda/read_bytes_per_second"] == [(span[0], 4500), (span[9], 4000), (last, 9000)]
    assert got["gpu/0/clocks_event_reasons"] == [(span[0], 1), (span[5], 3), (span[6], 2)]
    assert [e["ts"] for e in events if e.get("ph") == "C" and e["args"] == {}] == [end] * 4
    data = TraceData(load_events(path))
    assert data.sample_ns.tolist() == [T0 + j * 100 * MS for j in range(10)] + [T0 + 990 * MS]
    assert data.meta["interval_s"] == 0.1
    dec = data.meta["decimation"]
    assert (dec["every_s"], dec["sampled_interval_s"], dec["at"], dec["any"], dec["modes"]) == (
        0.1, 0.01, ["net/eth0/bytes_recv"], ["gpu/0/clocks_event_reasons"], {"at": 1, "mean": 2, "any": 1})
    assert [(s.start_us, s.end_us) for s in data.spans if s.name == "step"] == [(t, t + 50_000) for t in span]
    assert data.stop["stats"] == {"taken": 11} and data.stop_ts == end
    assert data.stop["flight_trace"] == {"every_s": 0.1, "rows_in": 100, "rows": 11, "cut": None, "dumps": [],
                                         "suppressed": {}}


def test_time_weighted_mean_leaves_nan_out():
    from sysprof.flight import _Decimator

    dec = _Decimator(["mean", "at"], 100 * MS)
    t = T0 + np.array([0, 10, 20, 90, 100, 150], dtype=np.int64) * MS
    v = np.array([[1, 1], [2, 2], [np.nan, 3], [4, 4], [5, 5], [11, 6]], dtype=float)
    times, values = dec.push(t[:4], v[:4])
    assert len(times) == 0  # the span is open until a row of the next arrives
    times, values = dec.push(t[4:], v[4:])
    # [0, 100 ms): 1 for 10 ms, 2 for 10 ms, NaN for 70 ms (left out), 4 for 10 ms: 70 / 30
    assert times.tolist() == [T0] and values.tolist() == [[70 / 30, 1]]
    times, values = dec.end()
    # the open span up to its last sample (5 for 50 ms), then that sample
    assert times.tolist() == [T0 + 100 * MS, T0 + 150 * MS] and values.tolist() == [[5, 5], [11, 6]]


def test_report_finds_the_full_rate_means_and_amounts(tmp_path):
    """The trace at 100 ms and at the sampling interval (a span per row: the full-rate trace): report's
    time-weighted means and amounts (a rate's integral, a total's increase) are the same."""
    paths = []
    for every in (0.1, 0.01):
        rec, _ = _recorder(tmp_path / str(every), every=every)
        rec.trigger("signal", "the whole run", T0 + 500 * MS)
        _feed(rec)
        rec.close()
        paths.append(rec.trace["path"])
        data = TraceData(load_events(rec.trace["path"]))
        assert [(i.ts_us, i.args["trigger"]) for i in data.instants if i.name == FLIGHT_EVENT] == [
            ((T0 + 500 * MS) // 1000, "signal")]
        assert data.stop["flight_trace"]["dumps"] == [os.path.basename(d["path"]) for d in rec.written]
    full = TraceData(load_events(paths[1]))
    assert full.sample_ns.tolist() == _rows(0, 100).timestamps_ns.tolist()
    assert full.series["cpu/percent"][1].tolist()[:-1] == list(range(100))  # every row as sampled, then NaN
    reports = [json.loads(run_cli("report", "--json", p).stdout) for p in paths]
    # the rule each trace was decimated by (CH: cpu and the disk's rate averaged, the total at the row, the mask OR-ed)
    assert [r["decimation"] for r in reports] == [
        {"every_s": every, "sampled_interval_s": 0.01, "modes": {"at": 1, "mean": 2, "any": 1}} for every in (0.1, 0.01)]
    assert ("decimated:  a row per 100 ms of a recording at 10 ms: 2 rates and gauges as time-weighted means over "
            "the span, 1 totals and identities at the row, 1 bit masks OR-ed (min, p95 and max of the means are over "
            "span means)") in run_cli("report", paths[0]).stdout.splitlines()
    dec, full = (r["channels"] for r in reports)
    assert full["cpu/percent"]["mean"] == pytest.approx(49.5, rel=1e-12)  # the mean of rows 0 .. 99, 10 ms each
    assert full["disk/sda/read_bytes_per_second"]["amount"] == pytest.approx(4500, rel=1e-12)  # 1000 x 45 x 0.1
    assert full["net/eth0/bytes_recv"]["amount"] == 49500
    assert (dec["net/eth0/bytes_recv"]["first"], dec["net/eth0/bytes_recv"]["last"]) == (0, 49500)  # a total's
    for ch, keys in (("cpu/percent", ("mean",)), ("disk/sda/read_bytes_per_second", ("mean", "amount")),
                     ("net/eth0/bytes_recv", ("amount",))):  # (a total's mean level: its value held from each row)
        for key in keys:
            assert dec[ch][key] == pytest.approx(full[ch][key], rel=1e-12), (ch, key)


def test_dumps_are_the_same_with_the_trace(tmp_path):
    made = []
    for name, every in (("with", 0.1), ("without", None)):
        rec = FlightRecorder(tmp_path / name, CH, 0.01, FlightOptions(window_s=3.0, trace_every_s=every),
                             pid=4242, notify=lambda line: None)
        rec.trigger("signal", "same", T0 + 500 * MS)
        _feed(rec)
        rec.close()
        (d,) = rec.written
        with open(d["path"]) as f:
            made.append(f.read())
    assert made[0] == made[1]
    assert sorted(os.listdir(tmp_path / "with")) == sorted(os.listdir(tmp_path / "without") + ["trace.json.gz"])


def test_size_bound_ends_the_trace_closed(tmp_path):
    rec, lines = _recorder(tmp_path, every=0.01, trace_max_bytes=20_000)  # every row its own span
    rng = np.random.default_rng(1)
    for k in range(0, 20_000, 500):  # noisy values: little compression
        b = _rows(k, 500)
        b.values[:, 0] = rng.random(500) * 100
        rec.feed(b)
    rec.close()
    t = rec.trace
    assert t["cut"] == "the trace's size bound (20.00 kB) was reached" and t["bytes"] > 20_000
    assert 0 < t["rows"] < 20_000 and t["rows_in"] > t["rows"]
    data = TraceData(load_events(t["path"]))
    assert not data.truncated and data.stop["flight_trace"]["cut"] == t["cut"]
    assert data.stop["stats"] == {"taken": t["rows"]} and len(data.sample_ns) == t["rows"]
    assert len(lines) == 1 and lines[0].startswith(f"sysprof: flight trace {t['path']} ended early: ")


def test_never_over_a_file_and_options(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "trace.json.gz").write_text("mine")
    rec, _ = _recorder(tmp_path)
    _feed(rec, n=30)
    rec.close()
    assert rec.trace["path"] == str(tmp_path / "out" / "trace-1.json.gz")
    assert (tmp_path / "out" / "trace.json.gz").read_text() == "mine"
    assert FlightOptions.of({"window_s": 10, "trace_every_s": 0.5}).trace_every_s == 0.5
    assert FlightOptions.of(30).trace_every_s is None
    for bad in (0, -1, float("inf"), True):
        with pytest.raises(ValueError, match="flight trace_every_s must be a time > 0"):
            FlightOptions.of({"trace_every_s": bad})


def test_a_failing_trace_leaves_the_dumps(tmp_path, monkeypatch):
    from sysprof import flight

    rec, lines = _recorder(tmp_path)
    rec.trigger("signal", "still dumped", T0 + 500 * MS)
    monkeypatch.setattr(flight._Trace, "_write_rows", lambda self, t, v: 1 / 0)
    _feed(rec)
    rec.close()
    assert len(rec.written) == 1 and rec.trace["cut"] == "failed: ZeroDivisionError: division by zero"
    assert [ln for ln in lines if "flight trace" in ln] == [
        f"sysprof: flight trace {rec.trace['path']} failed: ZeroDivisionError: division by zero"]


def test_callbacks_flight_option_writes_the_trace(tmp_path):
    from sysprof.integrations.session import Session

    session = Session(tmp_path / "out", interval=0.01, sources=["cpu"],
                      flight={"window_s": 2, "trace_every_s": 0.05}, summaries=False)
    rec = session.start(tmp_path, "lightning", rank=3)
    assert rec is not None and rec.flight is not None
    wait_for(lambda: rec.flight.trace["rows_in"] >= 20, 60, "20 rows fed")
    session.stop()
    assert rec.wait_closed(30)
    t = rec.flight.trace
    assert t["path"] == str(tmp_path / "out" / "trace-rank3.json.gz") and t["done"] and t["cut"] is None
    data = TraceData(load_events(t["path"]))
    assert data.meta["framework"] == "lightning" and data.meta["rank"] == 3 and data.meta["interval_s"] == 0.05
    assert data.sample_ns.size == data.stop["stats"]["taken"] == t["rows"] > 0
    assert rec.flight.written == []


# ---- sysprof record --flight --flight-trace ----

PROGRAM = """
import sys, time, sysprof
for i in range(30):
    with sysprof.mark("step"):
        time.sleep(0.02)
sysprof.dump("asked")
time.sleep(0.3)
"""


@needs_native
def test_record_writes_the_dumps_and_the_trace(tmp_path):
    out = tmp_path / "out"
    r = run_cli("record", "--flight", "2s", "--flight-trace", "50ms", "-i", "5ms", "-o", out, "--",
                sys.executable, "-c", PROGRAM, timeout=300)
    assert r.returncode == 0, r.stderr
    names = sorted(os.listdir(out))
    assert len(names) == 2 and names[0].endswith("-dump.json") and names[1] == "trace.json.gz", names
    assert f"; trace {out}/trace.json.gz: " in r.stderr and ", one per 0.05 s, " in r.stderr
    data = TraceData(load_events(out / "trace.json.gz"))
    assert data.meta["interval_s"] == 0.05 and data.meta["decimation"]["sampled_interval_s"] == 0.005
    assert data.meta["command_line"].startswith(sys.executable)
    assert len([s for s in data.spans if s.name == "step"]) == 30
    assert [i.args["trigger"] for i in data.instants if i.name == FLIGHT_EVENT] == ["dump"]
    assert data.stop["flight_trace"]["dumps"] == [names[0]]
    t = data.sample_ns
    assert t.size == data.stop["stats"]["taken"] and np.all(np.diff(t) > 0)
    assert data.stop["flight_trace"]["rows_in"] > t.size
    rep = run_cli("report", "--json", out / "trace.json.gz")
    assert rep.returncode == 0, rep.stderr
    summary = json.loads(rep.stdout)
    assert summary["recorded"] and not summary["truncated"] and summary["samples"] == t.size
    assert summary["interval_s"] == 0.05


def test_record_flight_trace_needs_flight(tmp_path):
    r = run_cli("record", "--flight-trace", "-o", tmp_path / "x.json", "--", "true")
    assert r.returncode == 2 and "--flight-trace needs --flight WINDOW" in r.stderr
    r = run_cli("record", "--flight", "10s", "--flight-trace", "0", "-o", tmp_path, "--", "true")
    assert r.returncode == 2 and "must be > 0" in r.stderr
