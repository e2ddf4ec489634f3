"""Shares over a span from counter increases (issue 27, item 1; sysprof.report.shares): on a VM the kernel
accounts steal in bursts, so the time-weighted mean of the per-row shares is not the share of the ticks. Every
aggregate (report's mean, --by, the verdict) takes a share from its counters where the trace holds them; the native
and psutil cpu sources give the counters (cpu/<mode>_seconds_total, node_cpu_seconds_total semantics)."""
from __future__ import annotations

import pytest

from sysprof.report.phases import by_phase, whole_trace
from sysprof.report.shares import MODES, counter_means, counters_of
from sysprof.report.stats import summarize
from sysprof.report.verdict import verdict
from test_phases import recorded
from test_sampler_fixtures import Tree, exact, nan, open_sampler, take

# Ten 0.1 s rows on a 1-CPU VM at USER_HZ 100, after a first read: rows 1-9 each add 10 user ticks; row 10 adds
# 90 steal ticks at once (the hypervisor's stolen time reported in one burst, as on a VM). Per-row shares: user
# 100 % in rows 1-9, steal 100 % in row 10: time-weighted, steal 10 % and user 90 %. Over the span the counters
# give 90 user and 90 steal ticks: steal 50 %, user 50 %.
HZ = 100.0


def _rows():
    user = steal = 0
    rows = []
    for k in range(11):  # row 0: the first read (no share yet)
        if k:
            if k < 10:
                user += 10
            else:
                steal += 90
        ticks = {"user": user, "nice": 0, "system": 0, "idle": 1000, "iowait": 0, "irq": 0, "softirq": 0,
                 "steal": steal}
        rows.append((k * 0.1, ticks))
    return rows


def _trace(spans=()):
    counters = []
    prev = None
    for t, ticks in _rows():
        args = {f"{m}_seconds_total": ticks[m] / HZ for m in MODES}
        if prev is not None:
            d = {m: ticks[m] - prev[m] for m in MODES}
            total = sum(d.values())
            args.update({f"{m}_percent": 100.0 * d[m] / total for m in MODES})
            args["percent"] = 100.0 * (total - d["idle"] - d["iowait"]) / total
        prev = ticks
        counters.append(("cpu", t, args))
    return recorded(counters, spans, interval_s=0.1, cpu_count=1, stop_s=1.1)


def test_counters_of_each_share():
    assert counters_of("cpu/steal_percent") == [f"cpu/{m}_seconds_total" for m in MODES]
    assert counters_of("cpu/7/percent") == [f"cpu/7/{m}_seconds_total" for m in MODES]
    assert counters_of("process_tree/3/cpu_percent") == ["process_tree/3/cpu_seconds_total"]
    assert counters_of("cgroup/cpu_percent") == ["cgroup/cpu_usage_seconds_total"]
    assert counters_of("pressure/io/full_seconds_per_second") == ["pressure/io/full_seconds_total"]
    assert counters_of("memory/used_bytes") == counters_of("cpu/bogus_percent") == []
    inc = {f"cpu/{m}_seconds_total": 0.0 for m in MODES}
    inc.update({"cpu/user_seconds_total": 3.0, "cpu/idle_seconds_total": 1.0, "process/cpu_seconds_total": 1.5})
    got = counter_means(["cpu/percent", "cpu/user_percent", "cpu/idle_percent", "process/cpu_percent"], inc,
                        {"process/cpu_seconds_total": 2.0})
    assert got == {"cpu/percent": (75.0, 3.0), "cpu/user_percent": (75.0, 3.0), "cpu/idle_percent": (25.0, 1.0),
                   "process/cpu_percent": (75.0, 1.5)}


def test_bursty_steal_report_mean_is_the_share_of_ticks():
    data = _trace()
    ch = summarize(data)["channels"]
    # rows: steal 0 % x 9, 100 % x 1 (time-weighted 10 %); ticks: 90 user, 90 steal over the span
    assert ch["cpu/steal_percent"]["mean"] == pytest.approx(50.0)
    assert ch["cpu/user_percent"]["mean"] == pytest.approx(50.0)
    assert ch["cpu/percent"]["mean"] == pytest.approx(100.0)
    assert ch["cpu/steal_percent"]["max"] == 100.0 and ch["cpu/steal_percent"]["min"] == 0.0
    whole = whole_trace(data)
    assert whole.channels["cpu/steal_percent"].mean == pytest.approx(50.0)
    assert whole.channels["cpu/steal_percent"].amount == pytest.approx(0.9)  # CPU-seconds stolen: 90 ticks
    found = {f["rule"]: f for f in verdict(data)[0]["findings"]}
    assert "cpu_steal" in found  # 50 % >= 5 %: the rows' 10 % said so too, but not its size
    assert found["cpu_steal"]["value"] == pytest.approx(50.0)


def test_by_phase_share_from_counters_and_a_filter_keeps_only_what_was_asked():
    # a span [0.45, 1.05 s): a row's step accrues over the interval before it, so the span holds half of row 5's
    # (5 user ticks), rows 6-9 (40) and row 10 (90 steal): steal 90 / 135
    data = _trace([("late", 0.45, 1.05, 1)])
    (p,) = by_phase(data, "late", channels=lambda ch: ch == "cpu/steal_percent")
    assert list(p.channels) == ["cpu/steal_percent"]
    assert p.channels["cpu/steal_percent"].mean == pytest.approx(100 * 90 / 135)


def test_a_trace_without_counters_keeps_the_time_weighted_mean():
    counters = [("cpu", t, {"steal_percent": v}) for t, v in ((0.0, 0.0), (0.1, 0.0), (0.2, 100.0))]
    data = recorded(counters, interval_s=0.1, stop_s=0.3)
    assert summarize(data)["channels"]["cpu/steal_percent"]["mean"] == pytest.approx(100 / 3)


def test_native_cpu_counters_are_the_ticks_in_seconds(tmp_path):
    import os

    hz = os.sysconf("SC_CLK_TCK")
    tree = Tree("cpu_fields8", tmp_path)  # cpu 5000 0 2000 40000 100 0 100 0, then 5300 0 2100 40500 100 0 100 100
    s, _ = open_sampler(tree, cpu=True, per_cpu=True)
    assert [c for c in s.channels if c.endswith("_seconds_total")] == (
        [f"cpu/{m}_seconds_total" for m in MODES] + [f"cpu/0/{m}_seconds_total" for m in MODES])
    tree.apply("v2")
    row, _ = take(s)
    for m, v in zip(MODES, (5300, 0, 2100, 40500, 100, 0, 100, 100)):
        exact(f"cpu/{m}_seconds_total", row[f"cpu/{m}_seconds_total"], v / hz)
        exact(f"cpu/0/{m}_seconds_total", row[f"cpu/0/{m}_seconds_total"], v / hz)
    s.stop()


def test_native_cpu_counters_of_an_offline_cpu_are_nan(tmp_path):
    tree = Tree("cpu_sparse", tmp_path)  # cpu4 goes offline in v2; cpu8 never online
    s, _ = open_sampler(tree, cpu=True, per_cpu=True)
    tree.apply("v2")
    row, _ = take(s)
    nan("cpu/4/user_seconds_total", row["cpu/4/user_seconds_total"])
    nan("cpu/8/steal_seconds_total", row["cpu/8/steal_seconds_total"])
    assert row["cpu/0/user_seconds_total"] == row["cpu/0/user_seconds_total"]  # known
    s.stop()
