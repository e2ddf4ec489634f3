"""The flight recorder (sysprof.flight; issue 30 item 3): the window in bounded memory, the dumps around each trigger
(what they hold, their names, the rate limit and the bounds), and its sources: slow steps, XIDs and clocks-event
reasons, sysprof.dump(), SIGUSR1 to `record --flight`, an exception reaching a callback."""
from __future__ import annotations

import gc
import json
import logging
import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import sysprof
from sysprof.flight import DUMP_EVENT, FLIGHT_EVENT, SLACK_S, FlightOptions, FlightRecorder
from sysprof.report import TraceData
from sysprof.sampling.rows import Batch
from sysprof.trace.chrome import read_trace
from sysprof.trace.gpu_events import XID_EVENT, xid_meaning
from sysprof.trace.load import load_events

from cli_support import SYSPROF, in_forked_child, run_cli, wait_for
from fake_nvml.support import fake, fake_builds, needs_native  # noqa: F401 - fixtures

T0 = 1_700_000_000_000_000_000  # ns
MS = 1_000_000
CH = ("cpu/percent", "memory/used_bytes")


def _rows(k0, n, dt_ms=10, channels=CH, fill=None):
    """``n`` rows from row ``k0`` on, ``dt_ms`` apart from T0: cpu/percent = the row's index, memory = 2x."""
    k = np.arange(k0, k0 + n)
    ts = T0 + k.astype(np.int64) * dt_ms * MS
    values = np.zeros((n, len(channels)))
    values[:, 0] = k
    values[:, 1] = 2 * k
    if fill is not None:
        fill(k, values)
    return Batch(ts, values, channels, dt_ms / 1e3)


def _recorder(tmp_path, window=3.0, interval=0.01, channels=CH, lines=None, **opts):
    opts.setdefault("min_gap_s", 0.0)
    return FlightRecorder(tmp_path / "dumps", channels, interval, FlightOptions(window_s=window, **opts),
                          pid=4242, notify=(lines.append if lines is not None else (lambda line: None)))


def _feed(rec, k0, n, per=20, events=None, **kw):
    """Rows k0 .. k0 + n in batches of ``per`` (10 ms apart), with ``events(k)`` fed before each batch."""
    for k in range(k0, k0 + n, per):
        if events is not None:
            rec.feed_events(events(k, min(per, k0 + n - k)))
        rec.feed(_rows(k, min(per, k0 + n - k), **kw))


def _dumps(folder):
    return sorted(str(p) for p in folder.glob("flight-*.json")) if folder.exists() else []


def _ts(k):  # row k's ts in a trace (whole µs)
    return (T0 + k * 10 * MS) // 1000


def test_ring_is_preallocated_and_keeps_the_last_rows(tmp_path):
    rec = _recorder(tmp_path, window=2.0)
    rows = math.ceil((2.0 + SLACK_S) / 0.01)
    assert rec.memory_bytes == rows * (8 + 8 * len(CH))  # the times and the values, preallocated
    assert rec.bytes_per_second == (8 + 8 * len(CH)) / 0.01
    assert rec.window_s == 2.0 and rec.cut is None
    _feed(rec, 0, 3 * rows + 7, per=333)
    assert rec.memory_bytes == rows * (8 + 8 * len(CH))  # unchanged after three laps
    times, values = rec._ring.window(0, 2**62)
    last = 3 * rows + 7
    assert (values[:, 0] == np.arange(last - rows, last)).all()  # the newest rows, in order
    assert (times == T0 + np.arange(last - rows, last) * 10 * MS).all()
    rec.close()
    assert _dumps(tmp_path / "dumps") == []  # nothing triggered: nothing written


def test_memory_cap_cuts_the_window_and_says_so(tmp_path):
    rec = _recorder(tmp_path, window=30.0, interval=0.001, memory_bytes=500_000)
    rows = 500_000 // (8 + 8 * len(CH))
    assert rec.memory_bytes == rows * (8 + 8 * len(CH))
    assert rec.window_s == pytest.approx(rows * 0.001 - SLACK_S)
    assert rec.cut.startswith(f"the window is {rec.window_s:.3g} s, not 30 s")
    rec.close()


def _steps(slow_at, step_rows=5, slow_rows=100):
    """X events every ``step_rows`` rows, ``step_rows`` rows long; the one at row ``slow_at`` ``slow_rows``."""
    def events(k, n):
        return [{"name": "step", "ph": "X", "ts": _ts(j), "dur": _ts(j + (slow_rows if j == slow_at else step_rows))
                 - _ts(j), "pid": 7, "tid": 1} for j in range(k, k + n) if j % step_rows == 0]
    return events


def test_slow_step_gives_one_dump_with_the_window_before_and_after(tmp_path):
    lines = []
    rec = _recorder(tmp_path, window=3.0, lines=lines, min_steps=10, min_gap_s=60)
    # steps of 50 ms; the one at row 500 takes 1 s (20x); ends at row 600
    _feed(rec, 0, 1000, events=_steps(500))
    rec.close()
    dumps = _dumps(tmp_path / "dumps")
    assert len(dumps) == 1 and dumps[0].endswith("-slow_step.json")
    assert os.path.basename(dumps[0]) == "flight-20231114T221326.000Z-slow_step.json"  # the step's end, UTC
    data = TraceData(load_events(dumps[0]))
    flight = data.meta["flight"]
    assert flight["trigger"] == "slow_step"
    assert flight["reason"] == "step 'step' took 1 s, 20x the median 0.05 s of the previous 100"
    assert flight["at_ns"] == T0 + 600 * 10 * MS
    # 2 s before the trigger (2/3 of 3 s), 1 s after: rows 400 .. 700, every one
    assert data.sample_ns.tolist() == [T0 + k * 10 * MS for k in range(400, 701)]
    assert data.start_ts == _ts(400) and data.stop_ts == _ts(700)
    assert data.series["cpu/percent"][1].tolist() == list(range(400, 701))
    assert (flight["before_s"], flight["after_s"]) == (2.0, 1.0)
    slow = [s for s in data.spans if s.name == "step" and s.duration_us == 1e6]
    assert [(s.start_us, s.end_us) for s in slow] == [(_ts(500), _ts(600))]
    assert len([s for s in data.spans if s.name == "step"]) == len(range(400, 701, 5))  # every step begun in it
    marks = [i for i in data.instants if i.name == FLIGHT_EVENT]
    assert [(i.ts_us, i.args["trigger"]) for i in marks] == [(_ts(600), "slow_step")]
    assert data.stop["samples_written"] == 301 and data.stop["stats"] == {"taken": 301}
    assert data.stop["flight"]["cut"] is None
    assert len(lines) == 1 and lines[0].startswith(
        f"sysprof: flight dump {dumps[0]}: slow_step: {flight['reason']}; 2 s before, 1 s after, 301 samples, ")
    assert rec.suppressed == {}


def test_slow_step_needs_min_steps_and_matching_names(tmp_path):
    rec = _recorder(tmp_path, min_steps=200)  # armed after 200 steps: the slow one is the 101st
    _feed(rec, 0, 1000, events=_steps(500))
    rec2 = _recorder(tmp_path / "b", min_steps=10, step_patterns=("event/batch",))  # "step" is not a step here
    _feed(rec2, 0, 1000, events=_steps(500))
    assert rec.close() == [] and rec2.close() == []


def test_marker_spans_are_steps_and_spans_are_balanced_in_the_window(tmp_path):
    rec = _recorder(tmp_path, window=3.0, min_steps=10)

    def events(k, n):
        """B/E steps of 5 rows on tid 1 (the one begun at row 500: 100 rows); "epoch" on tid 2 from row 3 to 650;
        "save" on tid 3 from row 680 to 950."""
        out = []
        for j in range(k, k + n):
            ts = _ts(j)
            if j % 5 == 0 and not 500 < j < 600:
                if j > 0:
                    out.append({"name": "step", "ph": "E", "ts": ts, "pid": 7, "tid": 1})
                out.append({"name": "step", "ph": "B", "ts": ts, "pid": 7, "tid": 1})
            for row, ph, name, tid in ((3, "B", "epoch", 2), (650, "E", "epoch", 2), (680, "B", "save", 3),
                                       (950, "E", "save", 3)):
                if j == row:
                    out.append({"name": name, "ph": ph, "ts": ts, "pid": 7, "tid": tid})
        return out
    _feed(rec, 0, 1000, events=events)
    rec.close()
    (dump,) = _dumps(tmp_path / "dumps")
    events = read_trace(dump)
    spans = lambda name: [(e["ph"], e["ts"], e.get("args")) for e in events if e["name"] == name]  # noqa: E731
    # begun before the window (row 400): a B at its start; still open at its end (row 700): an E there
    assert spans("epoch") == [("B", _ts(400), {"clipped": "began before the window"}), ("E", _ts(650), None)]
    assert spans("save") == [("B", _ts(680), None), ("E", _ts(700), {"closed": "window end"})]
    steps = spans("step")
    assert steps[0] == ("B", _ts(400), {"clipped": "began before the window"}) and steps[1] == ("E", _ts(400), None)
    assert steps[-2:] == [("B", _ts(700), None), ("E", _ts(700), {"closed": "window end"})]
    data = TraceData(events)
    assert [(s.start_us, s.end_us) for s in data.spans if s.duration_us == 1e6] == [(_ts(500), _ts(600))]
    assert data.meta["flight"]["reason"] == "step 'step' took 1 s, 20x the median 0.05 s of the previous 100"


def test_rate_limit_joins_gap_count_and_bytes(tmp_path):
    lines = []
    rec = _recorder(tmp_path, window=1.5, lines=lines, min_gap_s=2.0, max_dumps=2)
    at = lambda k: T0 + k * 10 * MS  # noqa: E731
    _feed(rec, 0, 200)
    rec.trigger("signal", "first", at(150))
    rec.trigger("dump", "inside the first's window", at(160))  # joins it
    rec.trigger("dump", "too soon", at(250))  # 1 s after the first: within the 2 s gap
    _feed(rec, 200, 200)
    rec.trigger("exception", "second", at(380))  # 2.3 s after the first
    rec.trigger("xid", "third", at(700))  # past the count
    _feed(rec, 400, 500)
    rec.close()
    dumps = _dumps(tmp_path / "dumps")
    assert [os.path.basename(d).rsplit("-", 1)[1] for d in dumps] == ["signal.json", "exception.json"]
    first = read_trace(dumps[0])[0]["args"]["flight"]
    assert first["reason"] == "first" and first["also"] == [
        {"trigger": "dump", "reason": "inside the first's window", "at_ns": at(160)}]
    # counted when its window was copied: the third trigger came (and went) before that
    assert read_trace(dumps[1])[0]["args"]["flight"]["suppressed_before"] == {"min_gap": 1, "max_dumps": 1}
    assert rec.suppressed == {"min_gap": 1, "max_dumps": 1}
    assert len(lines) == 2 and "1 more trigger(s) in its window" in lines[0]
    assert rec.summary().endswith("; triggers turned away: 1 by min gap, 1 by max dumps")


def test_size_bound_cuts_the_dump_and_stops_the_next(tmp_path):
    lines = []
    rec = _recorder(tmp_path, window=60.0, lines=lines, max_bytes=100_000, min_steps=10)
    _feed(rec, 0, 10000, per=500)
    rec.trigger("signal", "big", T0 + 8000 * 10 * MS)
    _feed(rec, 10000, 4000, per=500)
    wait_for(lambda: rec.written, 60, "the first dump")
    rec.trigger("signal", "next", T0 + 13500 * 10 * MS)
    rec.close()
    (dump,) = _dumps(tmp_path / "dumps")
    events = read_trace(dump)  # whole: read strictly
    json.loads(open(dump).read())
    stop = events[-1]
    assert stop["name"] == "sysprof stop"
    assert stop["args"]["flight"]["cut"] == "the dumps' size bound (100.00 kB) was reached"
    n = stop["args"]["samples_written"]
    assert 0 < n < 6000 and n % 2000 == 0  # whole chunks, up to the one that passed the bound
    assert TraceData(events).sample_ns.size == n
    assert rec.suppressed == {"max_bytes": 1} and lines[0].endswith("; cut: " + stop["args"]["flight"]["cut"])


def test_free_space_floor_skips_the_dump(tmp_path):
    lines = []
    rec = _recorder(tmp_path, lines=lines, min_free=(1 << 62, 0.0))
    _feed(rec, 0, 100)
    rec.trigger("signal", "x", T0)
    rec.close()
    assert _dumps(tmp_path / "dumps") == [] and rec.suppressed == {"low_disk_space": 1}
    assert len(lines) == 1 and lines[0].startswith("sysprof: flight dump (signal: x) skipped: ")


def test_a_dump_never_replaces_a_file(tmp_path):
    rec = _recorder(tmp_path)
    name = tmp_path / "dumps" / "flight-20231114T221320.000Z-dump.json"
    name.parent.mkdir()
    name.write_text("mine")
    os.symlink(tmp_path / "elsewhere", tmp_path / "dumps" / "flight-20231114T221320.000Z-dump-1.json")
    _feed(rec, 0, 300)
    rec.trigger("dump", "x", T0)
    rec.close()
    assert name.read_text() == "mine" and not (tmp_path / "elsewhere").exists()
    assert [d["path"] for d in rec.written] == [str(tmp_path / "dumps" / "flight-20231114T221320.000Z-dump-2.json")]


def test_xid_and_clock_reason_triggers_from_rows(tmp_path):
    ch = ("gpu/0/clocks_event_reasons", "gpu/0/xid_total", "gpu/0/xid_last", "gpu/1/clocks_event_reasons")

    def fill(k, v):
        v[:, 0] = np.where(k >= 100, 0x1, 0x0)  # GPU idle turns on at 100: no anomaly
        v[k >= 150, 0] = 0x1 | 0x4  # SW power cap turns on at 150
        v[:, 1] = np.where(k >= 400, 1, 0)  # XID 79 at 400
        v[:, 2] = np.where(k >= 400, 79, 0)
        v[:, 3] = 0x48  # on from the first reading: the baseline, no trigger
        v[k == 600, 3] = math.nan  # an unknown reading changes nothing
    rec = _recorder(tmp_path, window=1.5, channels=ch, min_gap_s=0)
    _feed(rec, 0, 800, channels=ch, fill=fill)
    rec.close()
    dumps = _dumps(tmp_path / "dumps")
    assert [os.path.basename(d) for d in dumps] == ["flight-20231114T221321.500Z-clocks_event.json",
                                                   "flight-20231114T221324.000Z-xid.json"]
    reasons = read_trace(dumps[0])[0]["args"]["flight"]
    assert reasons["reason"] == "gpu/0: clocks event reason SW power cap turned on"
    data = TraceData(load_events(dumps[1]))
    assert data.meta["flight"]["reason"] == f"gpu/0: XID 79 ({xid_meaning(79)})"
    assert [(i.ts_us, i.args) for i in data.instants if i.name == XID_EVENT] == [
        (_ts(400), {"gpu": 0, "xid": 79, "meaning": xid_meaning(79), "count": 1})]


def test_dump_reaches_the_recorders_of_this_process(tmp_path):
    rec = _recorder(tmp_path)
    _feed(rec, 0, 100)
    before = time.time_ns()
    assert sysprof.dump("looked odd") is True
    rec.feed(_rows(100, 10))
    rec.close()
    (written,) = rec.written
    assert written["trigger"] == "dump" and written["reason"] == "looked odd"
    flight = read_trace(written["path"])[0]["args"]["flight"]
    assert flight["at_ns"] >= before
    gc.collect()
    assert sysprof.dump("no one") is False  # closed: no recorder left (not run under record either)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_dump_in_a_forked_child_is_heard_by_nobody(tmp_path):
    """A forked child (a DataLoader worker) inherits the parent's recorder, which nothing there feeds: its dump()
    said True for a dump never written. The parent's still hears its own."""
    rec = _recorder(tmp_path)
    _feed(rec, 0, 100)
    assert not in_forked_child(lambda: sysprof.dump("in the worker"))
    assert sysprof.dump("in the parent") is True
    rec.feed(_rows(100, 10))
    rec.close()
    assert [(d["trigger"], d["reason"]) for d in rec.written] == [("dump", "in the parent")]


def test_dump_event_from_the_markers_triggers(tmp_path):
    rec = _recorder(tmp_path)
    rec.feed_events([{"name": DUMP_EVENT, "cat": "sysprof.mark", "ph": "i", "s": "t", "ts": _ts(50), "pid": 7,
                      "tid": 7, "args": {"reason": "from the program"}}])
    _feed(rec, 0, 400)
    rec.close()
    (written,) = rec.written
    assert (written["trigger"], written["reason"]) == ("dump", "from the program")


def test_flight_sink_feeds_a_sessions_stream(tmp_path):
    """FlightSink: the head's typed events by the recorder's time rule, each chunk's events then its rows (a dump
    instant triggers), the session's XID instants left out (the recorder finds its own in the rows), the stop
    closes the recorder."""
    from sysprof.flight import FlightSink
    from sysprof.pipeline import Chunk, Start
    from sysprof.trace import events as ev

    rec = _recorder(tmp_path)
    sink = FlightSink(rec, head=lambda start: [ev.instant("sysprof start", start.t_start_ns, 4242, {"x": 1})])
    sink.open(Start(None, CH, T0))
    assert rec.head == [{"name": "sysprof start", "ph": "i", "s": "g", "ts": T0 // 1000, "pid": 4242, "tid": 0,
                         "args": {"x": 1}}]
    at = T0 + 50 * 10 * MS
    sink.take(Chunk(_rows(0, 100), [ev.instant(XID_EVENT, at, 4242, {"gpu": 0, "xid": 79}),
                                     ev.instant(DUMP_EVENT, at, 7, {"reason": "asked"}, 7, "t")], at))
    sink.take(Chunk(_rows(100, 300), [], at))
    sink.close({})
    assert rec.closed
    (written,) = rec.written
    assert (written["trigger"], written["reason"]) == ("dump", "asked")
    events = read_trace(written["path"])
    assert events[0]["name"] == "sysprof start" and events[0]["args"]["x"] == 1
    assert [e["name"] for e in events if e.get("ph") == "i"] == ["sysprof start", DUMP_EVENT, FLIGHT_EVENT,
                                                                 "sysprof stop"]


def test_options_of_callbacks():
    assert FlightOptions.of(30) == FlightOptions(window_s=30.0)
    assert FlightOptions.of("500ms").window_s == 0.5
    assert FlightOptions.of({"window_s": 10, "min_gap_s": 5}).min_gap_s == 5
    for bad in ("soon", -1, True, [30], {"window_s": 1, "step_factor": 1}):
        with pytest.raises(ValueError):
            FlightOptions.of(bad)
    rec = FlightRecorder("/nonexistent", CH, 0.01)
    with pytest.raises(ValueError, match="unknown flight trigger 'later'"):
        rec.trigger("later")
    rec.close()


# ---- sysprof record --flight ----

SLOW_PROGRAM = """
import sys, time, sysprof
for i in range(200):
    with sysprof.mark("step"):
        time.sleep(1.0 if i == 120 else 0.02)
"""


@needs_native
def test_record_flight_one_slow_step_among_200(tmp_path):
    out = tmp_path / "dumps"
    r = run_cli("record", "--flight", "6s", "--flight-step-factor", "10", "-o", out, "--interval", "5ms", "--",
                sys.executable, "-c", SLOW_PROGRAM, timeout=300)
    assert r.returncode == 0, r.stderr
    dumps = _dumps(out)
    assert len(dumps) == 1 and dumps[0].endswith("-slow_step.json"), (dumps, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("sysprof: flight dump ")]
    assert len(lines) == 1 and lines[0].startswith(f"sysprof: flight dump {dumps[0]}: slow_step: step 'step' took ")
    assert "sysprof: flight recorder: " in r.stderr and "1 flight dump(s) in" in r.stderr
    data = TraceData(load_events(dumps[0]))
    assert data.meta["command_line"].startswith(sys.executable) and data.meta["interval_s"] == 0.005
    slow = [s for s in data.spans if s.name == "step" and s.duration_us >= 1e6]
    assert len(slow) == 1
    start_ns = slow[0].start_us * 1000
    # the seconds before it at full rate: the rows from at least 2 s before its start (4 s are kept before its
    # end; 120 steps of 20 ms came before), a sample every interval
    t = data.sample_ns
    assert t[0] <= start_ns - 2e9 and t[-1] >= slow[0].end_us * 1000
    assert np.median(np.diff(t[t < start_ns])) == pytest.approx(5e6, rel=0.2)
    assert data.meta["flight"]["trigger"] == "slow_step"
    rep = run_cli("report", "--json", dumps[0])  # report reads it like any trace
    assert rep.returncode == 0, rep.stderr
    summary = json.loads(rep.stdout)
    assert summary["recorded"] and not summary["truncated"] and summary["samples"] == t.size


READY_PROGRAM = """
import sys, time, sysprof
open(sys.argv[1], "w").close()
if len(sys.argv) > 2:
    time.sleep(0.5)
    sysprof.dump(sys.argv[2])
time.sleep(2.5)
"""


@needs_native
def test_record_flight_sigusr1(tmp_path):
    out, ready = tmp_path / "dumps", tmp_path / "ready"
    proc = subprocess.Popen(SYSPROF + ["record", "--flight", "2s", "-o", str(out), "--", sys.executable, "-c",
                                       READY_PROGRAM, str(ready)], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists()
        proc.send_signal(signal.SIGUSR1)  # the handler is in place before the command starts
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    (dump,) = _dumps(out)
    assert dump.endswith("-signal.json")
    flight = TraceData(load_events(dump)).meta["flight"]
    assert flight["trigger"] == "signal" and flight["reason"] == f"SIGUSR1 to pid {proc.pid}"
    assert f"sysprof: flight dump {dump}: signal: SIGUSR1 to pid {proc.pid}; " in err


@needs_native
def test_record_flight_dump_from_the_program(tmp_path):
    out = tmp_path / "dumps"
    r = run_cli("record", "--flight", "2s", "-o", out, "--", sys.executable, "-c", READY_PROGRAM,
                tmp_path / "ready", "loss spiked", timeout=120)
    assert r.returncode == 0, r.stderr
    (dump,) = _dumps(out)
    assert dump.endswith("-dump.json")
    data = TraceData(load_events(dump))
    assert (data.meta["flight"]["trigger"], data.meta["flight"]["reason"]) == ("dump", "loss spiked")
    asked = [i for i in data.instants if i.name == DUMP_EVENT]
    assert len(asked) == 1 and asked[0].args == {"reason": "loss spiked"}  # the marker that asked, in the dump


@needs_native
def test_record_flight_xid_on_the_fake_nvml(fake, tmp_path):  # noqa: F811
    fake(xids="0:79:300")
    out = tmp_path / "dumps"
    r = run_cli("record", "--flight", "2s", "-o", out, "--gpu", "--", sys.executable, "-c",
                "import time; time.sleep(1.5)", timeout=120)
    assert r.returncode == 0, r.stderr
    (dump,) = _dumps(out)  # the fake's reasons hold from the first reading: no clocks event
    assert dump.endswith("-xid.json")
    data = TraceData(load_events(dump))
    assert data.meta["flight"]["reason"] == f"gpu/0: XID 79 ({xid_meaning(79)})"
    assert [i.args["xid"] for i in data.instants if i.name == XID_EVENT] == [79]


@needs_native
def test_record_flight_clocks_event_on_the_fake_nvml(fake, tmp_path):  # noqa: F811
    fake(reasons_duty="3/10")  # the reasons hold at readings 1-3, 11-13, ...: on again at the 11th
    out = tmp_path / "dumps"
    r = run_cli("record", "--flight", "2s", "-o", out, "--gpu", "--", sys.executable, "-c",
                "import time; time.sleep(1.5)", timeout=120)
    assert r.returncode == 0, r.stderr
    dumps = _dumps(out)
    assert len(dumps) == 1 and dumps[0].endswith("-clocks_event.json"), dumps  # the next ones within the gap
    flight = TraceData(load_events(dumps[0])).meta["flight"]
    assert flight["reason"] in ("gpu/0: clocks event reason SW power cap turned on",
                                "gpu/1: clocks event reason HW slowdown, HW thermal slowdown turned on")
    assert flight["also"]  # the next turn-on, 100 ms later, in its window


def test_record_flight_bad_arguments(tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    for args, msg in ((["-o", f], f"with --flight, -o names a folder for the dumps; {f} is not one"),
                      (["--max-size", "1G", "-o", tmp_path], "--max-size does not apply"),
                      (["--flight-step-factor", "1", "-o", tmp_path], "--flight-step-factor must be more than 1"),
                      (["--flight-max", "0", "-o", tmp_path], "--flight-max must be at least 1")):
        r = run_cli("record", "--flight", "10s", *args, "--", "true")
        assert r.returncode == 2 and msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


# ---- the callbacks ----

def test_session_exception_dumps_and_logs(tmp_path, caplog):
    from sysprof.integrations.session import Session

    session = Session(tmp_path / "out", interval=0.01, sources=["cpu"], flight={"window_s": 2, "min_gap_s": 0},
                      summaries=False)
    rec = session.start(tmp_path, "lightning", rank=3)
    assert rec is not None and rec.writer is None and rec.flight is not None
    time.sleep(0.3)
    with caplog.at_level(logging.WARNING, logger="sysprof.integrations"):
        session.stop("ValueError", ValueError("boom"))  # what SysprofCallback.on_exception does
    assert rec.wait_closed(30)
    (dump,) = _dumps(tmp_path / "out")
    assert dump.endswith("-exception-rank3.json")
    data = TraceData(load_events(dump))
    assert (data.meta["flight"]["trigger"], data.meta["flight"]["reason"]) == ("exception", "ValueError: boom")
    assert data.meta["framework"] == "lightning" and data.meta["rank"] == 3 and data.sample_ns.size > 0
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("sysprof: flight dump ")]
    assert len(said) == 1 and said[0].startswith(f"sysprof: flight dump {dump}: exception: ValueError: boom; ")


def test_recorder_phases_are_steps(tmp_path):
    from sysprof.integrations.recorder import Recorder

    rec = Recorder(tmp_path / "out", interval=0.01, sources=["cpu"], framework="transformers",
                   flight=FlightOptions(window_s=2, min_steps=5, min_gap_s=0))
    rec.start()
    t = time.time_ns()
    for k in range(10):  # 10 steps of 10 ms, then one of 500 ms (50x)
        rec.add_span("step", t + k * 10 * MS, t + (k + 1) * 10 * MS)
    rec.add_span("step", t + 100 * MS, t + 600 * MS)
    time.sleep(0.2)
    rec.stop()
    (dump,) = _dumps(tmp_path / "out")
    assert dump.endswith("-slow_step-rank0.json")
    flight = TraceData(load_events(dump)).meta["flight"]
    assert flight["reason"] == "step 'step' took 0.5 s, 50x the median 0.01 s of the previous 10"


def test_composer_system_profiler_batches_and_exception(tmp_path, monkeypatch):
    from sysprof.profiler import Profiler
    from test_system_profiler import CHANNELS, ROW, FakeSampler

    sampler = FakeSampler()
    from sysprof.profiler.system_profiler import SystemProfiler

    monkeypatch.setattr(SystemProfiler, "_make_sampler", lambda self: sampler)
    sampler.interval, sampler.stats = 0.01, {"taken": 0}
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[], sys_prof_memory=True,
                    sys_prof_flight={"window_s": 20, "min_gap_s": 0, "min_steps": 1000},
                    sys_prof_flight_folder=str(tmp_path / "out"))
    prof.system_profiler.drain_interval_seconds = 1e-9  # every event drains
    prof.start()
    t = time.time_ns()
    sampler.rows = [(t + k * 10 * MS, ROW) for k in range(-100, 0)]
    for _ in range(5):
        prof.step()
    try:
        raise RuntimeError("loss is NaN")
    except RuntimeError:
        prof.stop()  # close() sees the exception being handled
    dumps = _dumps(tmp_path / "out")
    assert [os.path.basename(d).split("-", 2)[2] for d in dumps] == ["exception-rank0.json"]
    data = TraceData(load_events(dumps[0]))
    assert data.meta["flight"]["reason"] == "RuntimeError: loss is NaN"
    assert data.meta["framework"] == "composer" and data.sample_ns.size == 100
    assert len([s for s in data.spans if s.name == "event/batch"]) == 5
    assert set(data.meta["channels"]) == set(CHANNELS)
