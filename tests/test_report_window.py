"""A time window of a trace (``report --from/--to/--steps``, :mod:`sysprof.report.window`): exact values of the
samples inside it, the value held into it, clipped spans, steps, and the errors of a window the trace lacks."""
from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from sysprof.report import ReportError, TraceData, by_phase, summarize
from sysprof.report.window import TraceWindow, parse_steps, window_bounds
from sysprof.trace.chrome import ChromeTraceWriter

from cli_support import assert_one_line_error, run_cli

T0 = 1_700_000_000_000_000  # µs
IV = 10_000


def _events():
    """101 rows at 10 ms: cpu/percent = row; a disk rate written when it changes (rows 0, 90, 95, 100: 0, 1 MB/s,
    0, 0); five "step" spans [k * 200 + 50, k * 200 + 150) ms; stop at 1.01 s, 101 samples taken, 3 dropped."""
    ev = [{"name": "sysprof start", "ph": "i", "s": "g", "ts": T0, "pid": 1, "tid": 0,
           "args": {"interval_s": 0.01, "channels": ["cpu/percent", "disk/sda/write_bytes_per_second"]}}]
    for i in range(101):
        ev.append({"name": "cpu", "ph": "C", "ts": T0 + i * IV, "pid": 1, "tid": 0, "args": {"percent": float(i)}})
        if i in (0, 90, 95, 100):
            ev.append({"name": "disk/sda", "ph": "C", "ts": T0 + i * IV, "pid": 1, "tid": 0,
                       "args": {"write_bytes_per_second": 1e6 if i == 90 else 0.0}})
    for k in range(5):
        ev.append({"name": "step", "ph": "X", "ts": T0 + k * 200_000 + 50_000, "dur": 100_000, "pid": 1, "tid": 2})
    ev.append({"name": "sysprof stop", "ph": "i", "s": "g", "ts": T0 + 101 * IV, "pid": 1, "tid": 0,
               "args": {"stats": {"taken": 104, "dropped": 3, "missed_deadlines": 5, "sample_ns_mean": 2000.0}}})
    return ev


@pytest.fixture
def data():
    return TraceData(_events())


def test_window_values_and_counts(data):
    win = TraceWindow(data, window_bounds(data, 0.2, 0.5))
    s = summarize(win)
    cpu = s["channels"]["cpu/percent"]
    # rows 20..49, each held 10 ms: the value of row 20 holds from the window's start
    assert (cpu["min"], cpu["mean"], cpu["max"]) == (20.0, pytest.approx(34.5), 49.0)
    assert s["duration_s"] == pytest.approx(0.3) and s["samples"] == 30
    assert s["effective_rate_hz"] == pytest.approx(100.0)
    # drops and missed deadlines are the whole recording's: unknown in a window; the sample cost is kept
    assert s["dropped"] is None and s["missed_deadlines"] is None and s["sample_ns_mean"] == 2000.0
    assert s["truncated"] is False
    disk = win.series["disk/sda/write_bytes_per_second"]
    assert disk[0].tolist() == [T0 + 200_000, T0 + 490_000] and disk[1].tolist() == [0.0, 0.0]
    # a rate held across the window's edges: 1 MB/s for 50 of its 120 ms
    win = TraceWindow(data, window_bounds(data, 0.85, 0.97))
    disk = summarize(win)["channels"]["disk/sda/write_bytes_per_second"]
    assert disk["mean"] == pytest.approx(1e6 * 50 / 120) and disk["max"] == 1e6
    assert win.series["disk/sda/write_bytes_per_second"][0].tolist() == [T0 + 850_000, T0 + 900_000,
                                                                        T0 + 950_000, T0 + 960_000]


def test_window_from_the_end_and_clamped(data):
    b = window_bounds(data, -0.3)  # the last 300 ms
    assert (b.lo_us, b.hi_us) == (T0 + 710_000, T0 + 1_010_000)
    assert b.json == {"from_s": pytest.approx(0.71), "to_s": pytest.approx(1.01), "trace_s": pytest.approx(1.01)}
    b = window_bounds(data, -60, 0.5)  # past the start: clamped to it
    assert (b.lo_us, b.hi_us) == (T0, T0 + 500_000)
    b = window_bounds(data, None, -0.01)
    assert (b.lo_us, b.hi_us) == (T0, T0 + 1_000_000)
    assert b.label == "0 s to 1 s of 1.01 s"


def test_window_spans_are_clipped(data):
    win = TraceWindow(data, window_bounds(data, 0.1, 0.3))
    assert [(s.start_us - T0, s.end_us - T0) for s in win.spans] == [(100_000, 150_000), (250_000, 300_000)]
    (step,) = by_phase(win, ["step"])
    assert step.count == 2 and step.duration_seconds == pytest.approx(0.1)
    assert step.channels["cpu/percent"].mean == pytest.approx((sum(range(10, 15)) + sum(range(25, 30))) / 10)


def test_steps(data):
    b = window_bounds(data, steps=(2, 3))  # step 2 starts at 250 ms, step 3 ends at 550 ms
    assert (b.lo_us, b.hi_us) == (T0 + 250_000, T0 + 550_000)
    assert b.json["steps"] == [2, 3] and b.json["step"] == "step"
    assert b.label == "250 ms to 550 ms of 1.01 s (steps 2-3 of 5, 'step' spans)"
    b = window_bounds(data, steps=(4, None))  # to the end
    assert (b.lo_us, b.hi_us) == (T0 + 650_000, T0 + 1_010_000)
    assert window_bounds(data, steps=(5, 5)).label.endswith("(step 5 of 5, 'step' spans)")
    with pytest.raises(ReportError, match=r"^--steps 6: the trace has 5 steps \('step' spans\), counted from 1$"):
        window_bounds(data, steps=(6, 6))
    with pytest.raises(ReportError, match="no step spans \\('event/batch' or 'step'\\)"):
        window_bounds(TraceData([e for e in _events() if e.get("ph") != "X"]), steps=(1, 1))
    with pytest.raises(ReportError, match="no step spans \\('batch\\*'\\)"):
        window_bounds(data, steps=(1, 2), step=["batch*"])
    assert parse_steps("100") == (100, 100) and parse_steps("100-120") == (100, 120)
    assert parse_steps(" 7 - ") == (7, None)
    for bad in ("0", "3-2", "a-b", "-5", "1-2-3", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_steps(bad)


def test_empty_windows_are_errors(data):
    with pytest.raises(ReportError, match=r"^--from 2 s is at or past the trace's end \(1.010 s after its start\)$"):
        window_bounds(data, 2.0)
    with pytest.raises(ReportError, match="^the window is empty"):
        window_bounds(data, 0.5, 0.4)
    with pytest.raises(ReportError, match="^--to -2 s is at or before the trace's start$"):
        window_bounds(data, None, -2.0)


def test_a_foreign_trace_is_cut_not_carried_across_a_gap():
    """A trace without recording metadata (Composer's profiling windows): a window starting in a gap between its
    sampling windows does not carry the value from before the gap."""
    ev = [{"name": "cpu", "ph": "C", "ts": T0 + i * IV, "args": {"percent": float(i)}} for i in range(10)]
    ev += [{"name": "cpu", "ph": "C", "ts": T0 + 1_000_000 + i * IV, "args": {"percent": 50.0}} for i in range(10)]
    data = TraceData(ev)
    win = TraceWindow(data, window_bounds(data, 0.5))  # in the gap
    t, v = win.series["cpu/percent"]
    assert t[0] == T0 + 1_000_000 and set(v.tolist()) == {50.0}
    assert summarize(win)["samples"] == 10


def _write(path, events):
    w = ChromeTraceWriter(path)
    for e in events:
        w.write(e)
    w.close()


def test_report_window_on_the_command_line(tmp_path):
    path = tmp_path / "t.json"
    _write(path, _events())
    proc = run_cli("report", "--json", path, "--from", "0.2", "--to", "500ms")
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    assert s["window"] == {"from_s": pytest.approx(0.2), "to_s": pytest.approx(0.5), "trace_s": pytest.approx(1.01)}
    assert s["channels"]["cpu/percent"]["mean"] == pytest.approx(34.5) and s["samples"] == 30
    proc = run_cli("report", path, "--from", "-300ms")  # a negative value: from the end, not an option
    assert proc.returncode == 0, proc.stderr
    assert f"trace:      {path}, 710 ms to 1.01 s of 1.01 s\n" in proc.stdout
    proc = run_cli("report", "--json", path, "--steps", "2-3", "--by", "step")
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    assert s["window"]["steps"] == [2, 3] and s["phases"][0]["count"] == 2
    for argv, message in [(["--steps", "9"], "--steps 9: the trace has 5 steps ('step' spans), counted from 1"),
                          (["--from", "5s"], "--from 5 s is at or past the trace's end (1.010 s after its start)"),
                          (["--steps", "2", "--to", "1"], "--steps is a window of its own; give it or --from/--to, "
                                                          "not both"),
                          (["--steps", "0"], "argument --steps: invalid steps '0': steps count from 1, the first "
                                             "before the last (see 'sysprof report --help')")]:
        proc = run_cli("report", path, *argv)
        assert_one_line_error(proc, 2)
        assert proc.stderr == f"sysprof: {message}\n", argv


def test_window_plot_is_on_the_whole_traces_axis(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sysprof.report.plot import build_figure

    data = TraceData(_events())
    fig, res = build_figure(TraceWindow(data, window_bounds(data, steps=(2, 3))))
    try:
        assert fig.axes[-1].get_xlim() == (pytest.approx(0.25), pytest.approx(0.55))
        assert fig._suptitle.get_text().endswith("\nwindow: 250 ms to 550 ms of 1.01 s (steps 2-3 of 5, 'step' spans)")
        (line,) = fig.axes[0].get_lines()  # cpu/percent, raw: from the value held at 250 ms to 550 ms
        x = np.asarray(line.get_xdata())
        assert x[0] == pytest.approx(0.25) and x[-1] == pytest.approx(0.55)
    finally:
        plt.close(fig)
