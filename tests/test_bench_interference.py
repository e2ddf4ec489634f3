"""The interference benchmark's helpers (benchmarks/bench_busy.py): schedstat parsing, the interleaved-pair
schedule and statistics, and the spinning processes' clean-up. Exact values; no timing."""
from __future__ import annotations

import os
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
sys.path.insert(0, BENCH)
try:
    from bench_busy import A, Spinners, against_neighbours, other_cores, parse_schedstat, schedule  # noqa: E402
finally:
    sys.path.remove(BENCH)


def test_parse_schedstat_three_fields():
    # /proc/<pid>/schedstat: time on a CPU (ns), time runnable waiting for a CPU (ns), timeslices run
    assert parse_schedstat("324102131 132007 17\n") == (324102131, 132007, 17)


def test_schedule_rotates_and_runs_secondary_every_nth_round():
    assert schedule(("n", "a", "b"), ("x", "y"), 3, 2) == [
        "n", "a", "b", "x", "y",  # round 0: every label, no rotation
        "a", "b", "n",            # round 1: primary only, rotated by 1
        "b", "x", "y", "n", "a",  # round 2: every label, rotated by 2
    ]
    assert schedule(("n",), (), 2, 5) == ["n", "n"]


def test_against_neighbours_relative_and_difference():
    slots = [(A, 2.0), ("b", 3.0), (A, 4.0), ("c", 9.0), (A, 2.0), ("b", 1.0), (A, 2.0)]
    assert against_neighbours(slots, "b") == [0.0, -50.0]  # 3 vs mean(2, 4) = 3; 1 vs mean(2, 2)
    assert against_neighbours(slots, "c") == [200.0]  # 9 vs mean(4, 2) = 3
    assert against_neighbours(slots, "b", relative=False) == [0.0, -1.0]
    assert against_neighbours(slots, "missing") == []


def test_against_neighbours_skips_unknown_values_and_uses_the_one_neighbour_left():
    slots = [(A, None), ("b", 3.0), (A, 2.0), ("b", None), (A, 4.0)]
    assert against_neighbours(slots, "b") == [50.0]  # only the A after it is known
    assert against_neighbours([("b", 1.0)], "b") == []  # no A beside it


def test_other_cores():
    assert other_cores(10.0, 16.0, 2.0, 2.0) == 2.0  # 6 busy s in 2 s, 2 of them ours
    assert other_cores(10.0, 11.0, 3.0, 1.0) == 0.0  # never below 0
    assert other_cores(None, 11.0, 0.0, 1.0) is None
    assert other_cores(1.0, 2.0, 0.0, 0.0) is None


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_spinners_are_killed_when_the_block_raises(exc):
    with pytest.raises(exc):
        with Spinners(2) as sp:
            procs = list(sp.procs)
            assert len(procs) == 2 and sp.running() == 2
            raise exc()
    assert all(p.poll() is not None for p in procs)
    assert sp.running() == 0
