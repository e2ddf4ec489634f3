"""The ``sysprof`` command line: ``report`` on known traces (values, table, plots), foreign and Composer
layout traces, and the event builder behind recorded counters."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from sysprof.trace.chrome import ChromeTraceWriter

from cli_support import run_cli, assert_one_line_error

# --------------------------------------------------------------------------------------------------
# report on a known trace
# --------------------------------------------------------------------------------------------------

T0 = 1_700_000_000_000_000  # µs


@pytest.fixture
def known_trace(tmp_path):
    """101 rows at 10 ms: cpu/percent = 0..100; a disk rate written only when it changes
    (0 for rows 0-89, 1e6 for rows 90-94, 0 for rows 95-100); memory constant."""
    path = tmp_path / "known.json"
    channels = ["cpu/percent", "memory/used_bytes", "disk/sda/write_bytes_per_second", "net/eth0/bytes_recv"]
    w = ChromeTraceWriter(path)
    w.write({"name": "sysprof start", "ph": "i", "s": "g", "ts": T0, "pid": 1, "tid": 0,
             "args": {"version": "test", "command_line": "train", "interval_s": 0.01, "backend": "native",
                      "channels": channels, "errors": {"gpu": "no NVML"}}})
    for i in range(101):
        ts = T0 + i * 10_000
        w.write({"name": "cpu", "ph": "C", "ts": ts, "pid": 1, "tid": 0, "args": {"percent": float(i)}})
        if i in (0, 100):
            w.write({"name": "memory", "ph": "C", "ts": ts, "pid": 1, "tid": 0, "args": {"used_bytes": 2.5e9}})
        if i in (0, 90, 95, 100):
            w.write({"name": "disk/sda", "ph": "C", "ts": ts, "pid": 1, "tid": 0,
                     "args": {"write_bytes_per_second": 1e6 if i == 90 else 0.0}})
        w.write({"name": "net/eth0", "ph": "C", "ts": ts, "pid": 1, "tid": 0,
                 "args": {"bytes_recv": float("nan") if i == 50 else 1000.0 * i}})
    w.write({"name": "sysprof stop", "ph": "i", "s": "g", "ts": T0 + 1_010_000, "pid": 1, "tid": 0,
             "args": {"stats": {"taken": 104, "dropped": 3, "missed_deadlines": 5, "sample_ns_mean": 2000.0,
                                "sample_ns_p99": 5000.0}, "returncode": 0}})
    w.close()
    return path


def test_report_json_values(known_trace):
    proc = run_cli("report", "--json", known_trace)
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    assert s["samples"] == 101 and s["dropped"] == 3 and s["missed_deadlines"] == 5
    assert s["duration_s"] == pytest.approx(1.01)
    assert s["effective_rate_hz"] == pytest.approx(101 / 1.01)
    assert s["interval_s"] == 0.01 and s["truncated"] is False and s["errors"] == {"gpu": "no NVML"}
    cpu = s["channels"]["cpu/percent"]
    assert cpu["unit"] == "%"
    assert (cpu["min"], cpu["mean"], cpu["p50"], cpu["p95"], cpu["max"]) == (0, pytest.approx(50), 50, 95, 100)
    disk = s["channels"]["disk/sda/write_bytes_per_second"]
    assert disk["unit"] == "B/s" and disk["events"] == 4
    # time-weighted: 1e6 held for 5 of 101 intervals
    assert disk["mean"] == pytest.approx(5e6 / 101) and disk["p50"] == 0 and disk["p95"] == 0
    assert disk["max"] == 1e6
    mem = s["channels"]["memory/used_bytes"]
    assert (mem["unit"], mem["min"], mem["mean"], mem["max"]) == ("B", 2.5e9, pytest.approx(2.5e9), 2.5e9)
    net = s["channels"]["net/eth0/bytes_recv"]
    assert net["unit"] == "B" and net["valid"] == 100 and net["max"] == 100_000 and net["first"] == 0


def test_report_table(known_trace):
    proc = run_cli("report", known_trace)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "effective rate 100.0 Hz" in out and "interval 10 ms" in out
    assert "dropped:    3" in out and "missed deadlines: 5" in out
    assert "unavailable: gpu: no NVML" in out  # no gpu channel at all
    assert "(interval 10 ms = 100 Hz)" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(("  cpu/", "  memory/"))}
    assert rows["cpu/percent"][1:] == ["%", "0.0", "50.0", "95.0", "100.0"]  # min, mean, p95, max
    assert rows["memory/used_bytes"][1:4] == ["B", "2.50", "GB"]  # decimal, as in plots: GB = 1e9 B


def test_report_units_rate_and_source_problems(tmp_path):
    """Hz with significant digits, clocks scaled like bytes (decimal), and an error of a source that has channels
    (one refused metric) reported as a problem, not as the source being unavailable."""
    from sysprof.report.table import format_si, format_value, human_bytes

    path = tmp_path / "slow.json"
    w = ChromeTraceWriter(path)
    w.write({"name": "sysprof start", "ph": "i", "s": "g", "ts": T0, "pid": 1, "tid": 0,
             "args": {"interval_s": 2.0, "channels": ["gpu/0/sm_clock_hz", "gpu/0/utilization_percent"],
                      "errors": {"gpu": "gpu 0: power_watts: NOT_SUPPORTED", "pressure": "no /proc/pressure"}}})
    for i in range(3):
        w.write({"name": "gpu/0", "ph": "C", "ts": T0 + i * 2_000_000, "pid": 1, "tid": 0,
                 "args": {"sm_clock_hz": 1103157481.0, "utilization_percent": 50.0}})
    w.close()
    proc = run_cli("report", path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "(interval 2 s = 0.5 Hz)" in out
    assert "problems: gpu: gpu 0: power_watts: NOT_SUPPORTED" in out and "unavailable: gpu" not in out
    assert "unavailable: pressure: no /proc/pressure" in out
    row = next(line.split() for line in out.splitlines() if line.startswith("  gpu/0/sm_clock_hz"))
    assert row[1:4] == ["Hz", "1.10", "GHz"]
    assert json.loads(run_cli("report", "--json", path).stdout)["unavailable"] == ["pressure"]
    assert (format_si(0.5, "Hz"), format_si(999.996, "B"), format_si(-1.5e6, "B/s")) == ("0.5 Hz", "1.00 kB", "-1.50 MB/s")
    assert human_bytes(2.5e9) == format_value(2.5e9, "B") == "2.50 GB" and format_value(512.0, "B") == "512 B"


def test_plot_title_is_the_first_line_of_the_command(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sysprof.report.model import TraceData
    from sysprof.report.plot import plot_trace

    events = [{"name": "cpu", "ph": "C", "ts": T0 + i * 10_000, "args": {"percent": float(i % 7)}} for i in range(50)]
    figures = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig))
    plot_trace(TraceData(events), str(tmp_path / "p.png"), title="python -c 'import x\nx.run()\n'")
    assert figures[-1]._suptitle.get_text().startswith("sysprof: python -c 'import x  (")
    plot_trace(TraceData(events), str(tmp_path / "p.png"), title="python train.py " + "--flag " * 40)
    title = figures[-1]._suptitle.get_text()
    assert "\n" not in title and title.split("  (")[0].endswith("...") and len(title.split("  (")[0]) <= 90


def test_report_plot_writes_png(known_trace, tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "plot.png"
    proc = run_cli("report", known_trace, "--plot", png)
    assert proc.returncode == 0, proc.stderr
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    img = matplotlib.image.imread(png)
    assert img.shape[0] >= 300 and img.shape[1] >= 800  # a readable figure, not a thumbnail
    assert f"plot: {png} (3 series)" in proc.stdout  # cpu, disk rate, net; the constant memory in the footnote


def test_report_plot_without_matplotlib_is_one_line(known_trace, tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from sysprof.cli import main\n"
            f"sys.exit(main(['report', {str(known_trace)!r}, '--plot', {str(tmp_path / 'p.png')!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert_one_line_error(proc, 1)
    assert "pip install sysprof[plot]" in proc.stderr


# --------------------------------------------------------------------------------------------------
# QA fixes: report filters, NaN, foreign traces, plots
# --------------------------------------------------------------------------------------------------

def test_report_channel_filter_without_match_and_smooth_without_plot(known_trace):
    proc = run_cli("report", known_trace, "-k", "nomatch")
    assert_one_line_error(proc, 1)
    assert proc.stderr.startswith("sysprof: no channel matches 'nomatch'")
    proc = run_cli("report", known_trace, "--smooth", "100ms")
    assert_one_line_error(proc, 2)
    assert "--smooth" in proc.stderr and "--plot" in proc.stderr


class _Batch:
    def __init__(self, t0_ns, rows):
        import numpy as np

        self.values = np.asarray(rows, dtype=np.float64)
        self.timestamps_ns = np.arange(len(rows), dtype=np.int64) * 1_000_000 + t0_ns

    def __len__(self):
        return len(self.values)


def test_event_builder_leaves_nan_out_and_marks_where_values_end():
    from sysprof.trace.tracks import EventBuilder

    nan = float("nan")
    b = EventBuilder(["cpu/percent", "cpu/user_percent", "cpu/0/percent", "cpu/1/percent"], system_pid=1)
    ev = b.events(_Batch(0, [[nan, nan, nan, 5.0],     # cpu and cpu/0 unknown: no event
                             [10.0, nan, nan, 5.0],    # cpu known, user_percent still unknown
                             [10.0, nan, nan, 5.0],    # nothing changed (NaN equals NaN)
                             [10.0, 2.0, nan, nan]]))  # cpu/1 turns unknown: an empty event ends its 5.0
    ev += b.events(_Batch(4_000_000, [[10.0, 2.0, nan, nan], [10.0, 2.0, nan, nan]]))
    got = [(e["ts"], e["name"], e["args"]) for e in ev + b.finish()]
    assert got == [(0, "cpu/1", {"percent": 5.0}),
                   (1000, "cpu", {"percent": 10.0}),
                   (3000, "cpu", {"percent": 10.0, "user_percent": 2.0}),
                   (3000, "cpu/1", {}),
                   (5000, "cpu", {"percent": 10.0, "user_percent": 2.0})]  # finish: the last row
    assert b.rows == 6


def test_event_builder_leaves_infinity_out_like_nan():
    """cgroup/memory_max_bytes reads +inf for "max": left out (the one counter_args rule), never null."""
    from sysprof.trace.tracks import EventBuilder
    from sysprof.trace.chrome import encode_event

    inf = float("inf")
    b = EventBuilder(["cgroup/memory_current_bytes", "cgroup/memory_max_bytes", "x/only_inf"], system_pid=1)
    ev = b.events(_Batch(0, [[5.0, inf, inf], [5.0, 8.0, -inf], [5.0, inf, inf]]))
    got = [(e["ts"], e["name"], e["args"]) for e in ev]
    assert got == [(0, "cgroup", {"memory_current_bytes": 5.0}),
                   (1000, "cgroup", {"memory_current_bytes": 5.0, "memory_max_bytes": 8.0}),
                   (2000, "cgroup", {"memory_current_bytes": 5.0})]
    assert all("null" not in encode_event(e) for e in ev)


def test_report_does_not_hold_a_value_across_an_unknown_period(tmp_path):
    # cpu/0: 50 for 0.5 s, unknown (an event without the key) for 0.4 s, then 100 for one 0.1 s interval;
    # memory: a = 1 throughout, b = 4 until an event without b at 0.5 s
    path = tmp_path / "gap.json"
    w = ChromeTraceWriter(path)
    w.write({"name": "sysprof start", "ph": "i", "s": "g", "ts": T0, "pid": 1, "tid": 0,
             "args": {"interval_s": 0.1, "channels": ["cpu/0/percent", "memory/a", "memory/b"]}})
    for ts, cpu, mem in [(0, {"percent": 50.0}, {"a": 1.0, "b": 4.0}), (500_000, {}, {"a": 1.0}),
                         (900_000, {"percent": 100.0}, {"a": 1.0})]:
        w.write({"name": "cpu/0", "ph": "C", "ts": T0 + ts, "pid": 1, "tid": 0, "args": cpu})
        w.write({"name": "memory", "ph": "C", "ts": T0 + ts, "pid": 1, "tid": 0, "args": mem})
    w.write({"name": "sysprof stop", "ph": "i", "s": "g", "ts": T0 + 1_000_000, "pid": 1, "tid": 0,
             "args": {"stats": {"taken": 10, "dropped": 0}}})
    w.close()
    proc = run_cli("report", "--json", "--all", path)
    assert proc.returncode == 0, proc.stderr
    ch = json.loads(proc.stdout)["channels"]
    assert ch["cpu/0/percent"]["mean"] == pytest.approx((50 * 0.5 + 100 * 0.1) / 0.6)  # not (50*.9+100*.1)/1
    assert ch["cpu/0/percent"]["valid"] == 2 and ch["cpu/0/percent"]["p50"] == 50
    assert ch["memory/b"]["mean"] == 4 and ch["memory/b"]["valid"] == 1 and ch["memory/b"]["events"] == 3
    assert ch["memory/a"]["mean"] == 1 and ch["memory/a"]["valid"] == 3


@pytest.fixture
def composer_trace(tmp_path):
    """A trace in the layout of sysprof.profile() / JSONTraceHandler: no recording metadata, *_gb, kb_*,
    disk/<dev>/<field> {<field>}, read_time in ms; rows every 10 ms; one batch span [0.1, 0.3 s)."""
    path = tmp_path / "composer.json"
    w = ChromeTraceWriter(path)
    w.write({"name": "process_name", "ph": "M", "pid": 0, "tid": 1, "args": {"name": "Rank 0 training loop process"}})
    for i in range(50):
        ts = T0 + i * 10_000
        for name, args in [("cpu", {"cpu_percent": float(i)}),
                           ("memory/virtual", {"used_gb": 1.5 + i / 100, "available_gb": 20.0}),
                           ("disk/sda/read_bytes", {"read_bytes": 1e6 * i}),
                           ("disk/sda/read_time", {"read_time": 3.0 * i}),
                           ("network/eth0/kb_recv", {"kb_recv": 2.0 * i}),
                           ("network/eth0/kb_recv_per_second", {"kb_recv_per_second": 200.0})]:
            w.write({"name": name, "cat": "", "ph": "C", "ts": ts, "pid": 0, "tid": 1, "args": args})
    w.write({"name": "event/batch", "ph": "X", "ts": T0 + 100_000, "dur": 200_000, "pid": 0, "tid": 1})
    w.close()
    return path


def test_report_on_a_composer_layout_trace(composer_trace):
    proc = run_cli("report", composer_trace)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "not a sysprof record trace: no recording metadata" in out
    assert "truncated" not in out and "n/an/a" not in out and "median spacing 10 ms" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("  ")}
    # the sampler's names and units, as --by and the verdict read them (sysprof.report.names)
    assert rows["memory/used_bytes"][1] == "B" and rows["memory/available_bytes"][1] == "B"
    assert rows["disk/sda/read_time_seconds"][1] == "s" and rows["disk/sda/read_bytes"][1] == "B"
    assert rows["net/eth0/bytes_recv_per_second"][1] == "B/s" and rows["cpu/percent"][1] == "%"
    assert not any(ch.endswith(("_gb", "read_time", "kb_recv", "kb_recv_per_second")) for ch in rows)
    s = json.loads(run_cli("report", "--json", composer_trace).stdout)
    assert s["recorded"] is False and s["truncated"] is False
    assert s["interval_s"] == pytest.approx(0.01) and s["interval_source"] == "median spacing"
    assert s["samples"] == 50 and s["channels"]["disk/sda/read_time_seconds"]["max"] == pytest.approx(0.147)


def test_report_on_a_sysprof_profile_trace(tmp_path):
    import sysprof

    with sysprof.profile(str(tmp_path / "traces"), sys_prof_memory=True, sys_prof_disk=True,
                         sys_prof_stats_thread_interval_seconds=0.005) as prof:
        for _ in range(5):
            time.sleep(0.02)
            prof.step()
    proc = run_cli("report", "--all", tmp_path / "traces" / "merged_trace.json")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "no recording metadata" in out and "truncated" not in out
    assert any(line.split()[:2] == ["memory/used_bytes", "B"] for line in out.splitlines()), out
    assert "/read_bytes/read_bytes" not in out


def test_plot_uses_decimal_byte_units_and_keeps_task_counts_apart(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sysprof.report.model import TraceData
    from sysprof.report.plot import _plot_selection, plot_trace

    events = [{"name": "sysprof start", "ph": "i", "ts": T0, "args": {"interval_s": 0.01}}]
    for i in range(100):
        ts = T0 + i * 10_000
        events += [{"name": "memory", "ph": "C", "ts": ts, "args": {"used_bytes": 1e8 + 1e6 * i}},
                   {"name": "load", "ph": "C", "ts": ts, "args": {"1m": 0.5 + i / 100, "procs_running": i % 3}}]
    data = TraceData(events)
    panels = {(src, unit): chs for src, unit, chs in _plot_selection(data, lambda ch: True)}
    assert panels[("load", "")] == ["load/1m"] and panels[("load/procs", "")] == ["load/procs_running"]
    figures = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig))
    assert plot_trace(data, str(tmp_path / "p.png")) == 3
    fig = figures[-1]
    fig.canvas.draw()
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_text()]
    assert labels and all(lab.endswith(" MB") for lab in labels), labels  # 100 MB .. 199 MB, SI
    assert not any("MiB" in lab for lab in labels)


def test_weighted_mean_of_a_constant_is_the_constant():
    from sysprof.report.stats import weighted_stats

    # 0.45 weighted by irregular spans: the float sum alone gives 0.4499999999999999, below the minimum
    weights = [0.013, 0.0071, 0.25, 0.0009, 0.031] * 8
    st = weighted_stats([0.45] * len(weights), weights)
    assert st["min"] == st["mean"] == st["max"] == 0.45


# --------------------------------------------------------------------------------------------------
# phases (--by), the verdict, the effective rate over sampling windows
# --------------------------------------------------------------------------------------------------

@pytest.fixture
def phased_trace(tmp_path):
    """2 s at 100 ms: cpu 95 % during "compute" [0, 1 s) (X events on two threads: [0, 0.6), [0.4, 1.0)), 10 %
    during "ckpt" [1.0, 1.45) and after; disk writes 1 MB/s during ckpt's samples [1.0, 1.5) only."""
    path = tmp_path / "phased.json"
    w = ChromeTraceWriter(path)
    w.write({"name": "sysprof start", "ph": "i", "s": "g", "ts": T0, "pid": 1, "tid": 0,
             "args": {"interval_s": 0.1, "cpu_count": 2,
                      "channels": ["cpu/percent", "disk/sda/write_bytes_per_second"]}})
    for i in range(20):
        ts = T0 + i * 100_000
        w.write({"name": "cpu", "ph": "C", "ts": ts, "pid": 1, "tid": 0, "args": {"percent": 95.0 if i < 10 else 10.0}})
        w.write({"name": "disk/sda", "ph": "C", "ts": ts, "pid": 1, "tid": 0,
                 "args": {"write_bytes_per_second": 1e6 if 10 <= i < 15 else 0.0}})
    w.write({"name": "compute", "ph": "X", "ts": T0, "dur": 600_000, "pid": 1, "tid": 1})
    w.write({"name": "compute", "ph": "X", "ts": T0 + 400_000, "dur": 600_000, "pid": 1, "tid": 2})
    w.write({"name": "ckpt", "ph": "B", "ts": T0 + 1_000_000, "pid": 1, "tid": 1})
    w.write({"name": "ckpt", "ph": "E", "ts": T0 + 1_450_000, "pid": 1, "tid": 1})
    w.write({"name": "sysprof stop", "ph": "i", "s": "g", "ts": T0 + 2_000_000, "pid": 1, "tid": 0,
             "args": {"stats": {"taken": 20, "dropped": 0}}})
    w.close()
    return path


def test_report_by_json_is_the_phases_layout(phased_trace):
    # compute: 2 spans, 0.6 + 0.6 = 1.2 s, union [0, 1) s: cpu 95 % -> 0.95 x 1 s x 2 CPUs = 1.9 CPU-s; no writes.
    # ckpt: 0.45 s of 1 MB/s = 450000 B, cpu 10 % -> 0.1 x 0.45 x 2 = 0.09 CPU-s
    proc = run_cli("report", "--json", "--by", "comp*", "--by", "ckpt", "--by", "c*", phased_trace)
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    assert s["phases"] == [
        {"name": "compute", "count": 2, "duration_seconds": pytest.approx(1.2),
         "channels": {"cpu/percent": {"mean": pytest.approx(95), "amount": pytest.approx(1.9), "unit": "%"},
                      "disk/sda/write_bytes_per_second": {"mean": 0, "amount": 0, "unit": "B/s"}}},
        {"name": "ckpt", "count": 1, "duration_seconds": pytest.approx(0.45),
         "channels": {"cpu/percent": {"mean": pytest.approx(10), "amount": pytest.approx(0.09), "unit": "%"},
                      "disk/sda/write_bytes_per_second": {"mean": pytest.approx(1e6), "amount": pytest.approx(450000),
                                                          "unit": "B/s"}}},
    ]
    # the verdict: compute 1 s of 2 (CPU 95 >= 90), ckpt 0.45 s of 2 = 22 % (nothing fires)
    assert [v["text"] for v in s["verdict"]] == ["compute: 50 % of wall time; CPU busy 95 %",
                                                 "ckpt: 22 % of wall time; no clear bottleneck"]
    assert s["samples"] == 20 and "channels" in s
    k = json.loads(run_cli("report", "--json", "--by", "ckpt", "-k", "disk/*", phased_trace).stdout)
    assert list(k["phases"][0]["channels"]) == ["disk/sda/write_bytes_per_second"]


def test_report_opens_with_the_verdict_and_prints_phases(phased_trace):
    proc = run_cli("report", phased_trace)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    # no --by: every span name is a phase
    assert lines[:3] == ["verdict:", "  compute: 50 % of wall time; CPU busy 95 %",
                         "  ckpt: 22 % of wall time; no clear bottleneck"]
    assert lines[4].startswith("trace:")
    assert not any(line.startswith("phase ") for line in lines)  # the phases table only with --by
    out = run_cli("report", "--by", "ckpt", phased_trace).stdout
    rows = out.split("\nphase")[1].splitlines()
    assert rows[1].split() == ["ckpt", "1", "450", "ms", "450", "ms"]
    assert rows[2].split() == ["cpu/percent", "10.0", "%", "(90", "ms);", "disk/sda/write_bytes_per_second", "1.00",
                               "MB/s", "(450.00", "kB)"]


def test_report_by_without_a_matching_span_names_the_spans(phased_trace, known_trace):
    proc = run_cli("report", "--by", "dataloader", phased_trace)
    assert_one_line_error(proc, 1)
    assert proc.stderr.strip() == "sysprof: no span matches 'dataloader'; span names in the trace: compute, ckpt"
    proc = run_cli("report", "--by", "x", known_trace)
    assert_one_line_error(proc, 1)
    assert "the trace has no duration events" in proc.stderr


def test_effective_rate_counts_the_sampling_windows_only(tmp_path):
    # Composer's layout: 3 profiling windows of 100 rows at 5 ms, starting 2.5 s apart. Sampled time:
    # 3 x 100 x 5 ms = 1.5 s (each window first..last row plus one spacing) -> 300 / 1.5 = 200 Hz.
    # Over the whole span (5.495 s) it would read (300 - 1) / 5.495 = 54.4 Hz.
    path = tmp_path / "windows.json"
    w = ChromeTraceWriter(path)
    for start in (0, 2_500_000, 5_000_000):
        for i in range(100):
            w.write({"name": "cpu", "cat": "", "ph": "C", "ts": T0 + start + i * 5_000, "pid": 0, "tid": 1,
                     "args": {"cpu_percent": float(i)}})
    w.close()
    s = json.loads(run_cli("report", "--json", path).stdout)
    assert s["samples"] == 300 and s["windows"] == 3
    assert s["sampled_s"] == pytest.approx(1.5) and s["effective_rate_hz"] == pytest.approx(200)
    assert s["duration_s"] == pytest.approx(5.495)
    assert s["verdict"][0]["phase"] == "(whole trace)" and s["verdict"][0]["share"] == pytest.approx(1.0)
    out = run_cli("report", path).stdout
    assert "(3 sampling windows, 1.500 s sampled); effective rate 200.0 Hz" in out


def test_report_by_shades_the_matched_phases_on_the_plot(tmp_path, monkeypatch):
    # `report --by PATTERN --plot` hands exactly the spans --by matched to the plot (and no others)
    import sysprof.cli.commands as commands
    from sysprof.cli import main

    events = [{"name": "cpu", "ph": "C", "ts": T0 + i * 10_000, "pid": 1, "tid": 0, "args": {"percent": float(i % 7)}}
              for i in range(50)]
    events += [{"name": "step", "ph": "X", "ts": T0 + 50_000, "dur": 100_000, "pid": 1, "tid": 2},
               {"name": "step", "ph": "X", "ts": T0 + 300_000, "dur": 20_000, "pid": 1, "tid": 2},
               {"name": "ckpt", "ph": "X", "ts": T0 + 200_000, "dur": 30_000, "pid": 1, "tid": 2}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    seen = {}

    class Plotted(int):
        left_out = ()

    def fake_plot(data, out, **kw):
        seen.update(kw)
        return Plotted(1)

    monkeypatch.setattr(commands, "plot_trace", fake_plot)
    monkeypatch.setattr(commands, "require_matplotlib", lambda: None)
    assert main(["report", str(path), "--by", "st*", "--plot", str(tmp_path / "p.png")]) == 0
    assert [(s.name, s.start_us - T0, s.end_us - T0) for s in seen["phases"]] == [("step", 50_000, 150_000),
                                                                                  ("step", 300_000, 320_000)]
    assert main(["report", str(path), "--plot", str(tmp_path / "p.png")]) == 0
    assert seen["phases"] is None  # no --by: the plot's own default (Composer's batch spans)
