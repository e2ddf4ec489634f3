"""The node model's arithmetic (benchmarks/bench_node_model.py): the budget's stretching, the cost per tick, the
per-read model of each file and the line counts of a diskstats text. Exact values from given coefficients; no
timing."""
from __future__ import annotations

import os
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
sys.path.insert(0, BENCH)
try:
    from bench_node_model import disk_shape, node_reads, scenarios, stretch, tick_cost  # noqa: E402
finally:
    sys.path.remove(BENCH)


def test_tick_cost():
    # 500 µs every 10 ms + 20 µs every 1 ms = 0.05 + 0.02 = 0.07 core-s/s: 7 % of a core, 0.07 ms per 1 ms tick
    r = tick_cost({"cpu": 500.0, "disk": 20.0}, {"cpu": 0.01, "disk": 0.001}, 0.001)
    assert r["core_percent"] == pytest.approx(7.0, rel=1e-12)
    assert r["ms_per_tick"] == pytest.approx(0.07, rel=1e-12)


def test_stretch_leaves_sources_that_fit():
    p = {"cpu": 0.01, "disk": 0.001}
    assert stretch({"cpu": 400.0, "disk": 10.0}, p, 0.001, budget=0.05) == p  # 0.04 + 0.01 = 0.05


def test_stretch_caps_the_costliest_first():
    # rates: cpu 600 µs / 10 ms = 0.06, disk 100 µs / 1 ms = 0.1, net 10 µs / 1 ms = 0.01; budget 0.05.
    # net (0.01) stays; the cap c on the other two: 0.01 + 2c = 0.05 -> c = 0.02;
    # cpu: 600 µs / 0.02 = 30 ms; disk: 100 µs / 0.02 = 5 ms
    got = stretch({"cpu": 600.0, "disk": 100.0, "net": 10.0}, {"cpu": 0.01, "disk": 0.001, "net": 0.001}, 0.001,
                  budget=0.05)
    assert got["net"] == 0.001
    assert got["cpu"] == pytest.approx(0.030, rel=1e-12)
    assert got["disk"] == pytest.approx(0.005, rel=1e-12)
    # rounded up to whole base intervals: 601 µs / 0.02 = 30.05 ms -> 31 ms
    got = stretch({"cpu": 601.0, "disk": 100.0, "net": 10.0}, {"cpu": 0.01, "disk": 0.001, "net": 0.001}, 0.001,
                  budget=0.05)
    assert got["cpu"] == pytest.approx(0.031, rel=1e-12)
    assert tick_cost({"cpu": 601.0, "disk": 100.0, "net": 10.0}, got, 0.001)["core_percent"] <= 5.0


def test_node_reads_from_coefficients():
    co = {"proc_fixed_ns": 1000.0, "disk_line_ns": 500.0, "sys_fixed_ns": 800.0, "sys_stat_ns": 1200.0,
          "nic_line_ns": 900.0, "meminfo_ns": 5000.0}
    node = {"cpus": 10, "disks": 2, "partitions": 2, "loops": 1, "nics": 3}
    r = node_reads(co, 2, node, (100.0, 200.0), line_ns=(1.0, 10.0))
    assert r["/proc/stat"] == (100.0, 200.0)
    # 5 lines x 110 B = 550 B: one read. 1000 + 5 x (500 + 8 CPUs x 3 lines x t): t=1 -> 3620 ns, t=10 -> 4700 ns
    assert r["/proc/diskstats"] == pytest.approx((3.62, 4.7), rel=1e-12)
    # 2 disks x (800 + 1200 + 8 x 3 x t): t=1 -> 4048, t=10 -> 4480
    assert r["/sys/block/*/stat"] == pytest.approx((4.048, 4.48), rel=1e-12)
    # 1000 + 3 x (900 + (10 - 2) queues x 2 lines x t): t=1 -> 3748, t=10 -> 4180
    assert r["/proc/net/dev"] == pytest.approx((3.748, 4.18), rel=1e-12)
    # 5000 + 8 CPUs x 1 line x t
    assert r["/proc/meminfo"] == pytest.approx((5.008, 5.08), rel=1e-12)


def test_scenarios_pick_the_cheaper_disk_file_in_the_new_defaults():
    node_us = {"/proc/stat": (500.0, 500.0), "/proc/meminfo": (5.0, 5.0), "/proc/diskstats": (80.0, 80.0),
               "/sys/block/*/stat": (50.0, 90.0), "/proc/net/dev": (20.0, 20.0)}
    rows = scenarios(node_us, {})
    assert [(r["interval_s"], r["defaults"]) for r in rows] == [(1e-3, "old"), (1e-3, "new"), (1e-2, "old"),
                                                                (1e-2, "new")]
    old, new = rows[0], rows[1]
    assert old["low"]["disk_files"] == "/proc/diskstats"
    assert new["low"]["disk_files"] == "/sys/block/*/stat" and new["high"]["disk_files"] == "/proc/diskstats"
    assert new["low"]["periods_s"]["cpu"] == 0.01 and old["low"]["periods_s"]["cpu"] == 0.001
    # old at 1 kHz: (500 + 5 + 80 + 20) µs per ms = 60.5 % of a core
    assert old["low"]["plain"]["core_percent"] == pytest.approx(60.5, rel=1e-12)
    # new at 1 kHz, low end: 500 / 10 + 5 + 50 + 20 = 125 µs per ms = 12.5 %
    assert new["low"]["plain"]["core_percent"] == pytest.approx(12.5, rel=1e-12)
    assert new["low"]["budget"]["core_percent"] <= 5.0


def test_disk_shape(tmp_path):
    block = tmp_path / "block"
    for d in ("sda", "loop0", "cciss!c0d0"):
        (block / d).mkdir(parents=True)
    text = (" 8 0 sda 1 2 3 4 5 6 7 8 9 10 11\n 8 1 sda1 1 2 3 4\n 7 0 loop0 0 0 0 0 0 0 0 0 0 0 0\n"
            " 104 0 cciss/c0d0 1 2 3 4 5 6 7 8 9 10 11\n")
    s = disk_shape(text, str(block))
    assert s["kept"] == ["sda", "cciss/c0d0"] and s["left_out"] == ["loop0"] and s["partitions"] == ["sda1"]
    assert s["lines"] == 4 and s["bytes"] == len(text)
