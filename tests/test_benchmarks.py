"""The benchmark suite runs (``benchmarks/run.py --quick``) and writes every section with sane numbers.

Structure and sanity only (n > 0, p99 >= median, ...): no timing assertion, since CI machines are noisy.
The benchmark itself lives in benchmarks/, not here.
"""
from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(REPO, "benchmarks", "run.py")
SECTIONS = ("cost", "paced", "latest", "interference", "timing", "marker", "memory", "scaling", "writer", "kstat", "node",
            "density", "mark", "phases", "frames", "pftrace", "smaps", "prometheus", "gpu")  # "cold", "integrations" only with --only (minutes)


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    import sysprof

    if sysprof.Sampler(interval=1e-3, cpu=False, memory=False, disk=False, net=False).backend != "native":
        pytest.skip("the benchmarks measure the native backend")
    out = tmp_path_factory.mktemp("bench") / "quick.json"
    r = subprocess.run([sys.executable, RUN, "--quick", "--json", str(out)], capture_output=True, text=True,
                       timeout=900, cwd=REPO)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    with open(out) as f:
        doc = json.load(f)
    return doc, r.stdout


def _dist_ok(d, positive=True):
    assert d["n"] > 0
    for k in ("median", "p99", "p25", "p75", "min", "max", "mean"):
        assert isinstance(d[k], (int, float)) and math.isfinite(d[k]), (k, d)
    assert d["min"] <= d["p25"] <= d["median"] <= d["p75"] <= d["max"]
    assert d["median"] <= d["p99"] <= d["max"]
    if positive:
        assert d["min"] > 0


def test_every_section_present(quick):
    doc, stdout = quick
    assert doc["quick"] is True and doc["backend"] == "native"
    for s in SECTIONS:
        assert s in doc["sections"], s
        assert doc["sections"][s]["seconds"] >= 0
    for title in ("1. Per-sample cost", "Paced cost at 1 kHz", "Reading the present", "2. Interference", "3. Timing", "4. Marker", "5. Memory", "6. Scaling",
                  "7. Writer", "Goals"):
        assert title in stdout


def test_cost(quick):
    c = quick[0]["sections"]["cost"]
    _dist_ok(c["empty_native_call"])
    for name in ("cpu", "cpu+per_cpu", "memory+swap", "disk", "net", "load", "host set", "seed set"):
        r = c["sets"][name]
        assert r["channels"] > 0
        _dist_ok(r["native_sample"])
        _dist_ok(r["psutil"])
        if c["floor_error"] is None:
            _dist_ok(r["floor"])
            _dist_ok(r["floor_paced_1khz"])
            assert r["native_over_floor"] > 0
        assert r["thread"]["taken"] > 0 and r["thread"]["sample_ns_mean"] > 0
        assert r["thread"]["sample_ns_p99"] > 0
    assert c["sets"]["host set"]["channels"] >= c["sets"]["seed set"]["channels"]


def test_interference(quick):
    i = quick[0]["sections"]["interference"]
    _dist_ok(i["alone_seconds"])
    assert {f"{k}@{r}" for k in ("sysprof", "seed") for r in (100, 1000, 10000)} <= set(i["configs"])
    for r in i["configs"].values():
        _dist_ok(r["loop_seconds"])
        if r.get("control"):
            _dist_ok(r["slowdown_percent"], positive=False)
            continue
        _dist_ok(r["asked"])
        _dist_ok(r["slowdown_percent"], positive=False)
        _dist_ok(r["cpu_time_slowdown_percent"], positive=False)
        assert r["taken"]["n"] > 0 and r["taken_percent_of_asked"]["n"] > 0
        assert r["taken_percent_of_asked"]["min"] >= 0
        assert 0 <= r["deadlines_hit_percent_pooled"] <= 100 + 1e-9
    assert i["configs"]["sysprof@1000"]["taken"]["median"] > 0


def test_timing(quick):
    t = quick[0]["sections"]["timing"]
    assert t["rows"] > 1 and t["taken"] >= t["rows"] - 1
    _dist_ok(t["abs_period_error_us"], positive=False)
    if t["floor_error"] is None:
        _dist_ok(t["floor_abs_period_error_us"], positive=False)


def test_marker(quick):
    m = quick[0]["sections"]["marker"]
    assert m["available"], m.get("reason")  # benchmarks/marker_bench.py is part of the checkout
    sp = m["profilers"]["sysprof"]
    assert sp["available"], sp.get("reason")
    assert sp["ops"]
    for op in sp["ops"].values():
        _dist_ok(op["call_us"])
    comp = m["profilers"].get("composer")
    if comp is None or not comp["available"]:
        pytest.skip(f"Composer part: {comp['reason'] if comp else 'marker_bench.py has no bench_composer'}")
    for op in comp["ops"].values():
        _dist_ok(op["call_us"])


def test_memory(quick):
    m = quick[0]["sections"]["memory"]
    assert m["samples_drained"] >= 1000
    assert m["ring_bytes_per_sample"] == 8 * (1 + m["channels"])
    assert m["ring_bytes"] == m["capacity"] * m["ring_bytes_per_sample"]
    assert "1000" in m["checkpoints"] and m["rss_growth_bytes"] is not None
    for v in m["checkpoints"].values():
        assert v["rss_bytes"] > 0 and v["samples"] > 0
    tr = m["trace"]
    if tr["available"]:
        for f in tr["files"].values():
            assert f["bytes_per_sample"] > 0 and f["samples"] > 0


def test_memory_default_sampler(quick):
    d = quick[0]["sections"]["memory"]["default_sampler"]
    assert d["ring_bytes"] == d["capacity_rows"] * 8 * (1 + d["channels"])
    assert d["ring_bytes"] <= 4 << 20 or d["capacity_rows"] == 64  # the default sizing rule
    assert d["taken"] > 0 and d["dropped"] >= 0 and d["growth_by_second_bytes"]


def test_paced(quick):
    p = quick[0]["sections"]["paced"]
    for name in ("default set", "host set", "--all"):
        r = p["sets"][name]
        assert r["files"], name
        _dist_ok(r["thread_cpu_us"])
        if not p["floor_error"]:
            _dist_ok(r["floor_cpu_us"])
            _dist_ok(r["ratio"])
    for name in ("default set", "host set"):
        sc = p["sets"][name]["same_core"]
        if "error" in sc:
            assert p["floor_error"] or not hasattr(os, "sched_setaffinity"), sc
            continue
        for k in ("thread_cpu_us", "floor_cpu_us", "ratio", "bias"):
            _dist_ok(sc[k])
        lo, hi = sc["ratio_median_ci"]
        assert lo <= sc["ratio"]["median"] <= hi
        assert set(sc["cpus"]) <= os.sched_getaffinity(0)
    ph = p["phase"]
    if "error" in ph:
        assert p["floor_error"] or not hasattr(os, "sched_setaffinity"), ph
    else:
        assert [pt["phase_ns"] for pt in ph["points"]] == [0, 125_000, 250_000, 375_000]
        for pt in ph["points"]:
            ratios = [a / b for a, b in zip(pt["first_cpu_us"], pt["second_cpu_us"])]
            assert ratios and all(a > 0 for a in pt["first_cpu_us"] + pt["second_cpu_us"])
            assert pt["ratio"]["n"] == len(ratios) and pt["ratio"]["median"] == pytest.approx(statistics.median(ratios))
        assert ph["furthest_from_1"] in [pt["ratio"]["median"] for pt in ph["points"]]
    runs = p["intervals"]["runs"]
    assert set(runs) == {"every 1 ms", "cpu, disk every 10 ms"}
    for r in runs.values():
        _dist_ok(r["thread_cpu_us"])
        assert set(r["reads_per_second"]) == {"cpu", "memory", "disk", "net"}


def test_latest(quick):
    r = quick[0]["sections"]["latest"]
    for k in ("latest", "sample", "latest_reader_call"):
        _dist_ok(r[k])
    assert r["channels"] > 0


def test_scaling(quick):
    s = quick[0]["sections"]["scaling"]
    for dim in ("cpus", "disks", "nics"):
        r = s[dim]
        assert r["n_points"] >= 2 and math.isfinite(r["slope_us_per_unit"])
        for p in r["points"]:
            assert p["errors"] == {}, p
            _dist_ok(p["cost_us"])
        counts = [p["count"] for p in r["points"]]
        chans = [p["channels"] for p in r["points"]]
        assert counts == sorted(counts) and chans == sorted(chans) and chans[0] < chans[-1]


def test_writer(quick):
    w = quick[0]["sections"]["writer"]
    if not w["available"]:
        assert w["reason"]
        return
    assert w["samples"] > 0 and w["modes"]
    for r in w["modes"].values():
        _dist_ok(r["samples_per_s"])
        _dist_ok(r["bytes_per_s"])


def test_node(quick):
    n = quick[0]["sections"]["node"]
    if not n["available"]:
        assert n["reason"]
        return
    for d in n["here"]["reads"].values():
        _dist_ok(d)
    co = n["here"]["coefficients"]
    assert co["proc_fixed_ns"] > 0 and co["meminfo_ns"] > 0
    for f, (lo, hi) in n["node_us"].items():
        assert 0 < lo <= hi, f
    assert len(n["scenarios"]) == 4
    for sc in n["scenarios"]:
        for end in ("low", "high"):
            r = sc[end]
            assert set(r["cost_us"]) == {"cpu", "memory", "disk", "net"}
            # the budget never adds cost: its intervals are at least the requested ones
            assert r["budget"]["core_percent"] <= r["plain"]["core_percent"] * (1 + 1e-12)
            assert all(r["budget_periods_s"][k] >= r["periods_s"][k] for k in r["periods_s"])


def test_goals(quick):
    doc, stdout = quick
    assert len(doc["goals"]) >= 7
    for g in doc["goals"]:
        assert g["goal"] and g["target"] and g["ok"] in (True, False, None)
        if g["ok"] is False:
            assert f"MISSED: {g['goal']}" in stdout


def test_main_entry_point():
    sys.path.insert(0, os.path.dirname(RUN))
    try:
        import importlib.util

        spec = importlib.util.spec_from_file_location("sysprof_bench_run", RUN)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(os.path.dirname(RUN))
    assert callable(mod.main)
    with pytest.raises(SystemExit):
        mod.main(["--help"])


def test_compare_builds_same_core():
    """compare_builds --same-core with one build given twice (its A-vs-A): both threads found, offsets half a period
    apart, a ratio per window, and the median inside its interval."""
    import sysprof

    if sysprof.Sampler(interval=1e-3, cpu=False, memory=False, disk=False, net=False).backend != "native":
        pytest.skip("the benchmarks measure the native backend")
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no sched_setaffinity")
    r = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "compare_builds.py"), sys.executable,
                        sys.executable, "--same-core", "--pairs", "2", "--seconds", "0.3", "--sources", "cpu,memory",
                        "--json"], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert doc["sources"] == "cpu,memory" and doc["pairs"] == 2
    assert len(doc["ratios"]) == len(doc["before_ns"]) == len(doc["after_ns"]) == 2
    for b, a, x in zip(doc["before_ns"], doc["after_ns"], doc["ratios"]):
        assert b > 0 and a > 0 and x == pytest.approx(a / b)
    assert all(350_000 <= o <= 650_000 for o in doc["offsets_ns"]), doc["offsets_ns"]
    lo, hi = doc["median_ci"]
    assert lo <= doc["median"] <= hi
