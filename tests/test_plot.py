"""The default plot: panel order, nothing dropped silently, constant series drawn, spikes clipped, phases shaded.

Figures are built with ``build_figure`` (matplotlib's Agg backend) and inspected, not saved."""
from __future__ import annotations

import math

import pytest

pytest.importorskip("matplotlib")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from sysprof.report import Span, TraceData  # noqa: E402
from sysprof.report.panels import MAX_LINES, MAX_PANELS, choose_panels  # noqa: E402
from sysprof.report.plot import CLIP_QUANTILE, build_figure, weighted_quantile  # noqa: E402

T0 = 1_000_000
IV = 10_000  # µs
N = 300


def _start(channels=()):
    return {"name": "sysprof start", "ph": "i", "s": "g", "ts": T0, "pid": 1, "tid": 0,
            "args": {"interval_s": IV / 1e6, "channels": list(channels)}}


def _counter(name, i, **args):
    return {"name": name, "ph": "C", "ts": T0 + i * IV, "pid": 1, "tid": 0, "args": args}


def full_trace():
    """Every group of the default plot, 3 s at 10 ms, with Composer's batch / dataloader spans."""
    ev = [_start()]
    for i in range(N):
        busy = i % 50 < 35  # compute 350 ms, then a 150 ms data-loading stall
        ev += [
            _counter("cpu", i, percent=80.0 if busy else 5.0, user_percent=70.0 if busy else 3.0,
                     system_percent=10.0 if busy else 2.0, iowait_percent=0.0 if busy else 40.0,
                     steal_percent=0.0, idle_percent=20.0 if busy else 55.0),
            _counter("cpu/0", i, percent=100.0 if busy else 10.0),
            _counter("cpu/1", i, percent=60.0 if busy else 0.0),
            _counter("memory", i, used_bytes=2e9 + 1e6 * (i % 50), cached_bytes=3e9, available_bytes=6e9,
                     total_bytes=8e9),
            _counter("process_tree", i, rss_bytes=9e8, pss_bytes=4e8 + 1e5 * i, cpu_percent=95.0 if busy else 30.0,
                     num_processes=3.0 + i % 2),
            _counter("disk/sda", i, read_bytes_per_second=0.0 if busy else 2e8,
                     write_bytes_per_second=5e7 * (i % 7) + (8e9 if i == 123 else 0.0),
                     busy_time_seconds_per_second=0.05 if busy else 0.9, read_bytes=1e9 + 1e6 * i),
            _counter("net/eth0", i, bytes_recv_per_second=1e6 * (i % 3), bytes_sent_per_second=2e5),
            _counter("pressure/io", i, some_seconds_per_second=0.0 if busy else 0.6, some_avg10_percent=12.0,
                     full_seconds_per_second=0.0 if busy else 0.3),
            _counter("gpu/0", i, utilization_percent=90.0 if busy else 3.0, memory_used_bytes=2e10 + 1e6 * (i % 5),
                     power_watts=250.0 if busy else 80.0),
        ]
        for slot in range(3):
            ev.append(_counter(f"process_tree/{slot}", i, pid=100.0 + slot,
                               cpu_percent=(90.0 if busy else 5.0) if slot == 0 else (2.0 if busy else 40.0),
                               rss_bytes=3e8, pss_bytes=1e8 + 1e6 * slot + 1e4 * i))
    for k in range(N // 50):
        b0 = T0 + k * 50 * IV
        ev += [{"name": "event/dataloader", "ph": "X", "ts": b0 + 35 * IV, "dur": 15 * IV, "pid": 1, "tid": 2},
               {"name": "event/batch", "ph": "X", "ts": b0, "dur": 35 * IV, "pid": 1, "tid": 2}]
    return ev


@pytest.fixture
def figure():
    figs = []

    def build(data, **kw):
        fig, res = build_figure(data, **kw)
        figs.append(fig)
        return fig, res
    yield build
    for fig in figs:
        plt.close(fig)


EXPECTED_ORDER = ["cpu", "per-cpu", "memory", "process memory", "disk", "disk busy", "network", "pressure",
                  "process CPU", "member cpu_percent", "member pss_bytes", "GPU utilisation",
                  "GPU memory", "GPU power"]


def test_panel_order_with_every_group(figure):
    data = TraceData(full_trace())
    fig, res = figure(data)
    assert res.panels == EXPECTED_ORDER
    assert [ax.get_ylabel().split("\n")[0] for ax in fig.axes[:len(EXPECTED_ORDER)]] == EXPECTED_ORDER
    sel = choose_panels(data)
    cpu = sel.panels[0]
    # modes stacked in /proc/stat's busy order, iowait on top; steal (always 0) hidden; busy drawn as a line
    assert cpu.stacked and cpu.channels == ("cpu/user_percent", "cpu/system_percent", "cpu/iowait_percent")
    assert cpu.line == "cpu/percent"
    assert fig.axes[0].get_lines()[0].get_color() == "black"
    assert [p.channels for p in sel.panels if p.title == "member cpu_percent"] == [
        ("process_tree/0/cpu_percent", "process_tree/1/cpu_percent", "process_tree/2/cpu_percent")]
    labels = [t.get_text() for t in fig.axes[EXPECTED_ORDER.index("member pss_bytes")].get_legend().texts]
    assert labels == ["slot 0 (pid 100)", "slot 1 (pid 101)", "slot 2 (pid 102)"]
    # mirrors and totals whose rate is drawn are neither drawn nor "left out"; the member RSS (PSS drawn) is
    assert set(sel.redundant) == {"cpu/idle_percent", "memory/available_bytes", "memory/total_bytes",
                                  "disk/sda/read_bytes", "pressure/io/some_avg10_percent",
                                  "process_tree/0/pid", "process_tree/1/pid", "process_tree/2/pid"}
    assert res.hidden == ["cpu/steal_percent"]
    assert res.left_out == ["process_tree/num_processes", "process_tree/0/rss_bytes", "process_tree/1/rss_bytes",
                            "process_tree/2/rss_bytes"]
    assert len(res.panels) == MAX_PANELS  # the 15th panel (members' count) is named as left out, not lost
    foot = fig.texts[-1].get_text()
    assert res.left_out_text() in foot and res.left_out_text() == (
        "left out: 4 channels (process_tree/num_processes, process_tree/*/rss_bytes); show them with -k PATTERN")
    assert "not drawn: 1 channel always 0 or never valid" in foot


def test_plot_hides_what_the_table_hides():
    """A channel always 0 is hidden by the plot exactly as by the table, even when it is also a mirror of a drawn one
    (cpu/idle_percent): the footnote's count and the table's agree."""
    from sysprof.report import summarize
    from sysprof.report.table import _is_boring

    ev = [_start()]
    for i in range(40):
        ev.append(_counter("cpu", i, percent=float(i % 7), idle_percent=0.0, steal_percent=0.0,
                           user_percent=float(i % 7)))
        ev.append(_counter("memory", i, used_bytes=1e9 + i, total_bytes=0.0))
    data = TraceData(ev)
    table_hidden = {ch for ch, e in summarize(data)["channels"].items() if _is_boring(e)}
    sel = choose_panels(data)
    assert set(sel.hidden) == table_hidden == {"cpu/idle_percent", "cpu/steal_percent", "memory/total_bytes"}
    assert "cpu/idle_percent" not in sel.redundant


def test_too_many_channels_are_named_exactly(figure):
    """12 NICs in one panel (8 lines drawn) and more panels than fit: the left-out list is exact."""
    ev = [_start()]
    for i in range(40):
        ev.append(_counter("cpu", i, percent=float(i)))
        for k in range(12):  # nic k's received rate spans k * 1e3: the 8 widest (4..11) are drawn
            ev.append(_counter(f"net/eth{k}", i, bytes_recv_per_second=(k + 1) * 1e3 * (i % 2)))
        for s in range(MAX_PANELS + 1):  # sources "x00".."x14": one panel each, after the rule panels
            ev.append(_counter(f"x{s:02d}", i, level=float(i % 3 + s)))
        ev.append(_counter("disk/sda", i, read_count_per_second=float(i % 4)))  # IOPS: off by default
    data = TraceData(ev)
    fig, res = figure(data)
    nics = [f"net/eth{k}/bytes_recv_per_second" for k in range(12)]
    assert res.panels == ["cpu", "network"] + [f"x{s:02d}" for s in range(MAX_PANELS - 2)]
    drawn_nics = [line.get_label() for line in fig.axes[1].get_lines()]
    assert drawn_nics == [f"eth{k}/bytes_recv" for k in range(12 - MAX_LINES, 12)]
    expected = (nics[:12 - MAX_LINES] + [f"x{s:02d}/level" for s in range(MAX_PANELS - 2, MAX_PANELS + 1)]
                + ["disk/sda/read_count_per_second"])
    assert res.left_out == expected
    assert res == 1 + MAX_LINES + MAX_PANELS - 2  # an int: the series drawn, as before
    # -k draws exactly what it matches, IOPS included
    fig, res = figure(data, channel_filter=lambda ch: ch.startswith("disk/"))
    assert res.panels == ["disk"] and res.left_out == [] and res == 1
    fig, res = figure(data, channel_filter=lambda ch: ch.startswith("net/"))
    assert res.left_out == nics[:12 - MAX_LINES]
    assert res.left_out_text().endswith("; narrow -k PATTERN to show them")


def test_constant_panels_fold_into_the_footnote(figure):
    """A panel whose every series is flat says no more than its values: the footnote names them; a panel with one
    varying series keeps its flat ones; when everything is flat, it is drawn (a padded axis, 0-100 % for shares)."""
    ev = [_start()]
    for i in range(50):
        ev += [_counter("cpu", i, percent=float(i % 5)),
               _counter("net/eth0", i, bytes_recv_per_second=5.2e6),
               _counter("load", i, **{"1m": 2.0}),
               _counter("memory", i, used_bytes=2e9 + i, cached_bytes=3e9)]  # varying with a flat one: drawn
    ev += [_counter("gpu/0", i, power_watts=70.0) for i in (0, 49)]  # two events, the same value
    fig, res = figure(TraceData(ev))
    assert res.panels == ["cpu", "memory"] and res == 3
    assert res.constant == [("net/eth0/bytes_recv_per_second", "B/s", 5.2e6), ("load/1m", "", 2.0),
                            ("gpu/0/power_watts", "W", 70.0)]
    assert res.constant_text() == "constant: net/eth0/bytes_recv_per_second 5.2 MB/s, load/1m 2, gpu/0/power_watts 70 W"
    assert res.constant_text() in fig.texts[-1].get_text().splitlines()
    assert [line.get_label() for line in fig.axes[1].get_lines()] == ["used", "cached"]

    ev = [_start()] + [_counter("cpu", i, percent=100.0) for i in range(50)]
    ev += [_counter("memory", i, used_bytes=2.5e9) for i in range(0, 50, 49)]
    fig, res = figure(TraceData(ev))
    assert res.panels == ["cpu", "memory"] and res == 2 and res.constant == []
    assert fig.axes[0].get_ylim() == (-2.0, 102.0)  # a share: its fixed axis
    (line,) = fig.axes[1].get_lines()
    y = np.asarray(line.get_ydata())
    assert y.size >= 2 and np.all(y == 2.5e9)
    assert fig.axes[1].get_ylim() == (2.5e9 - 0.05 * 2.5e9, 2.5e9 + 0.05 * 2.5e9)


def test_single_sample_spike_does_not_set_the_axis(figure):
    values = [float(i % 10) * 1e6 for i in range(1000)]
    values[500] = 8e9  # one 10 ms spike: 8 GB/s
    ev = [_start()] + [_counter("disk/sda", i, write_bytes_per_second=v) for i, v in enumerate(values)]
    data = TraceData(ev)
    t, v = data.series["disk/sda/write_bytes_per_second"]
    w = np.append(data.weights(t), 0.0)  # as drawn: the held last value adds no time
    expected = weighted_quantile(np.append(v, v[-1]), w, CLIP_QUANTILE)
    assert expected == 9e6  # the 99.5th percentile of 0..9 MB/s, each held 10 % of the time
    fig, res = figure(data)
    ax = fig.axes[0]
    assert ax.get_ylim()[1] == expected
    assert res.clipped == {"disk": (9e6, 8e9)}
    (marker,) = [line for line in ax.get_lines() if line.get_gid() == "clipped"]
    assert list(marker.get_xdata()) == [pytest.approx(5.0)] and list(marker.get_ydata()) == [9e6]
    assert "clipped at 9 MB/s (p99.5), max 8 GB/s" in [t.get_text() for t in ax.texts]
    assert "disk: y axis clipped at 9 MB/s (p99.5), max 8 GB/s" in fig.texts[-1].get_text()
    # eight bursts are the panel's signal, not a spike: drawn whole
    bursts = [8e9 if i % 125 == 60 else x for i, x in enumerate(values)]
    ev = [_start()] + [_counter("disk/sda", i, write_bytes_per_second=v) for i, v in enumerate(bursts)]
    fig, res = figure(TraceData(ev))
    assert res.clipped == {} and fig.axes[0].get_ylim()[1] >= 8e9
    # a percent panel is never clipped (100 % is a real value); a spike that is the only signal is kept
    ev = [_start()] + [_counter("gpu/0", i, utilization_percent=100.0 if i == 500 else 1.0) for i in range(1000)]
    ev += [_counter("disk/sdb", i, read_bytes_per_second=8e9 if i == 500 else 0.0) for i in range(1000)]
    fig, res = figure(TraceData(ev))
    assert res.panels == ["disk", "GPU utilisation"] and res.clipped == {}
    assert fig.axes[0].get_ylim()[1] >= 8e9 and fig.axes[1].get_ylim()[1] >= 100


def _phase_extents(fig):
    out = {}
    for ax in fig.axes:
        for coll in ax.collections:
            gid = coll.get_gid() or ""
            if gid.startswith("phase:"):
                out.setdefault(gid[len("phase:"):], []).append(
                    [(float(p.vertices[:, 0].min()), float(p.vertices[:, 0].max())) for p in coll.get_paths()])
    return out


def test_phases_are_shaded_on_every_panel(figure):
    data = TraceData(full_trace())
    fig, res = figure(data)  # default: Composer's batch and dataloader spans
    ext = _phase_extents(fig)
    assert list(ext) == ["event/batch", "event/dataloader"]
    batches = [((k * 50 * IV) / 1e6, (k * 50 + 35) * IV / 1e6) for k in range(N // 50)]
    for name, spans in ext.items():
        assert len(spans) == len(res.panels)  # every panel
        want = batches if name == "event/batch" else [(b, b + 15 * IV / 1e6) for _, b in batches]
        assert all(s == want for s in spans), (name, spans[0], want)
    legend = fig.legends[0]
    assert [t.get_text() for t in legend.texts] == ["event/batch (6)", "event/dataloader (6)"]
    # given phases (Spans or tuples): exactly their times; a name's overlapping spans shade as one
    phases = [Span("load", T0 + 100_000, T0 + 250_000), ("step", T0 + 300_000, T0 + 1_234_567),
              ("load", T0 + 200_000, T0 + 400_000), ("load", T0 + 2_000_000, T0 + 2_500_000)]
    fig, res = figure(data, phases=phases)
    ext = _phase_extents(fig)
    assert ext["load"][0] == [(0.1, 0.4), (2.0, 2.5)] and ext["step"][0] == [(0.3, 1.234567)]
    assert all(e == ext["load"][0] for e in ext["load"]) and len(ext["step"]) == len(res.panels)
    fig, res = figure(data, phases=[])
    assert _phase_extents(fig) == {} and not fig.legends


def test_weighted_quantile_is_the_tables():
    from sysprof.report.stats import weighted_stats

    v = [3.0, 1.0, 2.0, 9.0, math.nan]
    w = [1.0, 2.0, 0.5, 0.1, 5.0]
    st = weighted_stats(v, w)
    assert weighted_quantile(v, w, 0.5) == st["p50"] and weighted_quantile(v, w, 0.95) == st["p95"]
    assert weighted_quantile([math.nan], [1.0], 0.5) is None


def test_report_names_what_the_plot_left_out(tmp_path):
    from cli_support import run_cli

    from sysprof.trace.chrome import ChromeTraceWriter

    path = tmp_path / "t.json"
    w = ChromeTraceWriter(path)
    for ev in [_start()] + [_counter("disk/sda", i, write_bytes_per_second=1e6 * (i % 3),
                                     write_count_per_second=float(i % 5)) for i in range(20)]:
        w.write(ev)
    w.close()
    proc = run_cli("report", path, "--plot", tmp_path / "p.png")
    assert proc.returncode == 0, proc.stderr
    assert ("plot left out: 1 channel (disk/sda/write_count_per_second); show them with -k PATTERN"
            in proc.stdout.splitlines())
    proc = run_cli("report", path, "--json", "--plot", tmp_path / "p.png")
    assert proc.returncode == 0 and proc.stdout.lstrip().startswith("{")
    assert "plot left out: 1 channel" in proc.stderr


def test_composer_layout_panels_and_batch_spans(figure):
    """A ``sysprof.profile()`` / JSONTraceHandler trace: Composer's names land in the same panels, and its
    ``event/batch`` B/E pairs are shaded by default."""
    ev = []
    for i in range(40):
        ts = T0 + i * IV
        ev += [{"name": "cpu", "ph": "C", "ts": ts, "args": {"cpu_percent": float(i % 4)}},
               {"name": "network/eth0/kb_recv_per_second", "ph": "C", "ts": ts, "args": {"kb_recv_per_second": i % 3}},
               {"name": "memory/virtual", "ph": "C", "ts": ts, "args": {"used_gb": 3 + i / 100, "available_gb": 5.0}}]
    ev += [{"name": "event/batch", "ph": "B", "ts": T0 + 50_000, "pid": 0, "tid": 7},
           {"name": "event/batch", "ph": "E", "ts": T0 + 150_000, "pid": 0, "tid": 7}]
    fig, res = figure(TraceData(ev))
    assert res.panels == ["cpu", "memory", "network"] and res == 3  # available_gb: the mirror of used_gb
    assert fig.axes[1].get_ylabel() == "memory\n[GB]"
    assert _phase_extents(fig) == {"event/batch": [[(0.05, 0.15)]] * 3}


def test_nothing_to_plot_is_a_clear_error():
    from sysprof.report import ReportError

    ev = [_start()] + [_counter("disk/sda", i, read_bytes_per_second=0.0) for i in range(5)]
    with pytest.raises(ReportError, match="^nothing to plot: every selected channel is always 0 or never valid$"):
        build_figure(TraceData(ev))


def test_share_axes_are_fixed(figure):
    """98.3-100 % is not a collapse: a percent panel is 0-100 %, a share above 100 % (a process on 3.4 cores)
    0 to the next multiple of 100 %, a stall share 0-1 s/s; with a 2 % margin so a line at the edge shows."""
    ev = [_start()]
    for i in range(60):
        ev += [_counter("cpu", i, percent=98.3 + (i % 3) * 0.85),
               _counter("process", i, cpu_percent=340.0 if i % 2 else 120.0),
               _counter("pressure/io", i, some_seconds_per_second=0.1 * (i % 4))]
    fig, res = figure(TraceData(ev))
    assert res.panels == ["cpu", "pressure", "process CPU"]
    assert fig.axes[0].get_ylim() == (-2.0, 102.0)
    assert fig.axes[1].get_ylim() == (-0.02, 1.02)
    assert fig.axes[2].get_ylim() == (-8.0, 408.0)


def test_identical_lines_are_merged(figure):
    """A process and its one-member process tree are one line labelled "a = b": equal within MERGE_TOLERANCE of
    their scale (a percent's 100 %, else the series' range) with values at the same times; a series that differs
    by more, or is unknown at another time, stays a line of its own."""
    from sysprof.report.plot import MERGE_TOLERANCE

    ev = [_start()]
    for i in range(60):
        p = 90.0 if i % 10 < 7 else 20.0
        r = 1e6 * (i % 2)
        ev += [_counter("process", i, cpu_percent=p),
               _counter("process_tree", i, cpu_percent=p + 0.4 * MERGE_TOLERANCE * 100.0),
               _counter("net/eth0", i, bytes_recv_per_second=r),
               _counter("net/eth1", i, bytes_recv_per_second=r + 0.4 * MERGE_TOLERANCE * 1e6),
               _counter("net/eth2", i, bytes_recv_per_second=r + (2 * MERGE_TOLERANCE * 1e6 if i == 30 else 0.0))]
    fig, res = figure(TraceData(ev))
    assert res.panels == ["network", "process CPU"]
    assert [line.get_label() for line in fig.axes[1].get_lines()] == ["process/cpu = process_tree/cpu"]
    assert [line.get_label() for line in fig.axes[0].get_lines()] == ["eth0/bytes_recv = eth1/bytes_recv",
                                                                     "eth2/bytes_recv"]
    assert res.merged == [("net/eth0/bytes_recv_per_second", "net/eth1/bytes_recv_per_second"),
                          ("process/cpu_percent", "process_tree/cpu_percent")]
    assert res == 5  # every series counts as drawn
    # NaN in one only: not the same line
    ev = [_start()] + [_counter("process", i, cpu_percent=50.0 + i % 2) for i in range(20)]
    ev += [_counter("process_tree", i, cpu_percent=float("nan") if i == 5 else 50.0 + i % 2) for i in range(20)]
    fig, res = figure(TraceData(ev))
    assert len(fig.axes[0].get_lines()) == 2 and res.merged == []


def test_dense_panels_are_smoothed_and_say_so(figure):
    """Past AUTO_SMOOTH_POINTS points a panel is a moving average over about 1/500 of the time shown, rounded to
    1-2-5 (here 50 s -> 100 ms): a signal with a 50 ms period averages to its mean exactly; a sparse panel stays
    raw; --smooth 0 draws every panel raw."""
    from sysprof.report.plot import AUTO_SMOOTH_POINTS

    n = 5000
    assert n > AUTO_SMOOTH_POINTS
    ev = [_start()]
    for i in range(n):
        ev.append(_counter("cpu", i, percent=100.0 if i % 5 == 0 else 0.0))  # 20 % on average, period 50 ms
        if i % 10 == 0:
            ev.append(_counter("memory", i, used_bytes=1e9 + 1e6 * (i % 70)))  # 500 points: raw
    data = TraceData(ev)
    fig, res = figure(data)
    assert res.smoothed == {"cpu": pytest.approx(0.1)}
    cpu, memory = fig.axes
    (line,) = cpu.get_lines()
    y = np.asarray(line.get_ydata())
    assert y.size <= n / 2 and np.allclose(y[2:-2], 20.0)  # the edges average what the window holds of the trace
    assert [t.get_text() for t in cpu.texts if t.get_gid() == "smoothed"] == ["mean over 100 ms"]
    assert not [t for t in memory.texts if t.get_gid() == "smoothed"]
    assert memory.get_lines()[0].get_drawstyle() == "steps-post"
    assert res.smoothed_text() == ("smoothed: 1 panel of more than 1,000 points drawn as a 100 ms moving average "
                                   "(--smooth TIME sets the window, --smooth 0 draws the raw steps)")
    assert res.smoothed_text() in fig.texts[-1].get_text().splitlines()
    fig, res = figure(data, smooth_s=0)
    assert res.smoothed == {} and len(fig.axes[0].get_lines()[0].get_ydata()) == n + 1
    fig, res = figure(data, smooth_s=0.05)  # asked for: every panel, said in the heading
    assert res.smoothed == {} and fig._suptitle.get_text().endswith(", 50 ms moving average")
    assert np.allclose(np.asarray(fig.axes[0].get_lines()[0].get_ydata())[2:-2], 20.0)


def test_phase_shading_lies_over_stacked_areas(figure):
    data = TraceData(full_trace())
    fig, res = figure(data)
    cpu = fig.axes[0]
    stack = [c for c in cpu.collections if not (c.get_gid() or "").startswith("phase:")]
    shade = [c for c in cpu.collections if (c.get_gid() or "").startswith("phase:")]
    assert stack and shade
    assert max(c.get_zorder() for c in stack) < min(c.get_zorder() for c in shade)
    assert max(c.get_zorder() for c in shade) < min(line.get_zorder() for line in cpu.get_lines())


def test_plot_names_are_checked_before_drawing(tmp_path):
    from sysprof.report import ReportError
    from sysprof.report.plot import check_plot_name, plot_trace

    assert check_plot_name("a/b.PNG") == "png" and check_plot_name("x.svg") == "svg"
    for bad in ("out.txt", "out", "dir/.png.bak"):
        with pytest.raises(ReportError):
            check_plot_name(bad)
    with pytest.raises(ReportError, match=r"^matplotlib cannot write \.txt"):
        plot_trace(None, str(tmp_path / "p.txt"))  # before the figure: the data is never looked at
    assert list(tmp_path.iterdir()) == []
