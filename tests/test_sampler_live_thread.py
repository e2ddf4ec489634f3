"""Sampler tests on the live machine: the ring buffer, the life cycle, the sampling thread at 1 kHz
(absolute deadlines, rows at start and stop, cost statistics)."""

import math
import os
import time

import numpy as np
import psutil
import pytest

import sysprof
from sysprof import Sampler

from sampler_live_support import OFF, between, check_invariant, wait_taken

# --------------------------------------------------------------------------------------------------
# ring buffer and life cycle
# --------------------------------------------------------------------------------------------------
def test_ring_accounting_under_overflow():
    cap = 16
    s = Sampler(interval=0.0005, capacity=cap, **dict(OFF, cpu=True))
    s.start()
    wait_taken(s, 4 * cap)  # more rows than slots: some were dropped
    first = s.drain()
    wait_taken(s, s.stats["taken"] + 2 * cap)
    s.stop()
    st = s.stats
    check_invariant(st)
    assert st["dropped"] > 0, st
    assert 0 < len(first) <= cap
    assert st["drained"] == len(first)
    assert 0 <= st["buffered"] <= cap
    rest = s.drain()
    assert len(rest) == st["buffered"]
    st2 = s.stats
    check_invariant(st2)
    assert st2["buffered"] == 0 and st2["taken"] == st["taken"] and st2["dropped"] == st["dropped"]
    assert st2["drained"] == len(first) + len(rest)
    if len(rest):
        assert rest.timestamps_ns[0] > first.timestamps_ns[-1]


def test_start_stop_start():
    s = Sampler(interval=0.005, **dict(OFF, cpu=True, memory=True))
    s.start()
    wait_taken(s, 5)
    s.stop()
    b1 = s.drain()
    taken = s.stats["taken"]
    time.sleep(0.05)
    assert s.stats["taken"] == taken, "thread still sampling after stop()"
    t_mid = time.time_ns()
    s.start()
    wait_taken(s, taken + 5)
    s.stop()
    b2 = s.drain()
    assert len(b1) >= 5 and len(b2) >= 5, (len(b1), len(b2))
    assert b1.timestamps_ns[-1] < t_mid < b2.timestamps_ns[0]
    assert b1.channels == b2.channels == s.channels
    st = s.stats
    check_invariant(st)
    assert st["drained"] == len(b1) + len(b2) and st["dropped"] == 0


def test_stop_without_start():
    s = Sampler(interval=0.01, **dict(OFF, memory=True))
    s.stop()
    s.stop()
    st = s.stats
    assert st["taken"] == 0 and st["buffered"] == 0 and st["dropped"] == 0
    b = s.drain()
    assert len(b) == 0
    assert b.timestamps_ns.shape == (0,) and b.values.shape == (0, len(s.channels))
    # still usable afterwards
    s.start()
    time.sleep(0.05)
    s.stop()
    s.stop()
    assert len(s.drain()) > 0


def test_two_samplers_at_once():
    a = Sampler(interval=0.002, **dict(OFF, cpu=True, memory=True))
    b = Sampler(interval=0.005, **dict(OFF, disk=True, net=True))
    assert set(a.channels).isdisjoint(b.channels)
    a.start()
    b.start()
    wait_taken(a, 60)  # both threads run at once (the count each reaches is a benchmark, not a test)
    wait_taken(b, 25)
    a.stop()
    b.stop()
    ba, bb = a.drain(), b.drain()
    assert len(ba) >= 60 and len(bb) >= 25, (len(ba), len(bb))
    assert ba.values.shape[1] == len(a.channels) and bb.values.shape[1] == len(b.channels)
    assert np.all(ba.column("memory/total_bytes") == psutil.virtual_memory().total)
    check_invariant(a.stats)
    check_invariant(b.stats)


def test_context_manager():
    with Sampler(interval=0.005, **dict(OFF, memory=True)) as s:
        assert isinstance(s, Sampler)
        wait_taken(s, 5)
    taken = s.stats["taken"]
    assert taken >= 5
    time.sleep(0.05)
    assert s.stats["taken"] == taken, "context exit must stop the thread"
    assert len(s.drain()) == taken


def test_drain_types():
    s = Sampler(interval=0.005, **dict(OFF, cpu=True, memory=True, net=True))
    t0 = time.time_ns()
    s.start()
    wait_taken(s, 5)
    s.stop()
    t1 = time.time_ns()
    b = s.drain()
    n = len(b)
    assert n >= 5
    assert isinstance(b, sysprof.Batch)
    assert isinstance(b.timestamps_ns, np.ndarray) and b.timestamps_ns.dtype == np.int64
    assert b.timestamps_ns.shape == (n,)
    assert isinstance(b.values, np.ndarray) and b.values.dtype == np.float64
    assert b.values.shape == (n, len(s.channels))
    assert b.channels == s.channels and isinstance(b.channels, tuple)
    assert np.all(np.diff(b.timestamps_ns) > 0)
    assert t0 <= b.timestamps_ns[0] and b.timestamps_ns[-1] <= t1
    for i, c in enumerate(s.channels):
        col = b.column(c)
        assert col.dtype == np.float64 and col.shape == (n,)
        np.testing.assert_array_equal(col, b.values[:, i])


def test_psutil_backend_threaded():
    s = Sampler(backend="psutil", interval=0.02, **dict(OFF, memory=True, net=True))
    s.start()
    wait_taken(s, 3)
    s.stop()
    b = s.drain()
    assert len(b) >= 3
    assert np.all(b.column("memory/total_bytes") == psutil.virtual_memory().total)
    assert np.all(np.diff(b.timestamps_ns) > 0)
    check_invariant(s.stats)


# --------------------------------------------------------------------------------------------------
# 1 kHz
# --------------------------------------------------------------------------------------------------
def check_deadline_accounting(b, st, interval_ns, t_before_start, t_after_stop):
    """What absolute deadlines guarantee on any machine, busy or not (csrc/engine/sampler.cpp, Sampler::run).

    Rows are taken at deadlines S + k * interval, S = when the thread starts; a deadline passed during a sample or
    a late wake-up is skipped and counted in missed_deadlines; stop() adds one row unless one was just taken.
    Each deadline row is stamped between its sample's start t0 >= its deadline and end t1 < the next deadline taken,
    and after the last deadline row the pending deadline lies in (t1, t1 + interval]. Hence, with D the deadline
    rows (taken or taken - 1) and w the row stamps:
      (D + missed) * interval = pending - S, within [w[-2] - w[0], t_after_stop - t_before_start + interval];
      w[i + 2] - w[i] > interval for deadline rows (two rows never share a deadline: no burst catching up).
    Wall stamps vs the monotonic deadlines: allow NTP's 500 ppm slew and a microsecond of rounding."""
    w = b.timestamps_ns
    taken, missed = st["taken"], st["missed_deadlines"]
    assert len(w) == taken >= 2, (len(w), st)
    slew = 5e-4 * (t_after_stop - t_before_start) / interval_ns + 1
    lo = (w[-2] - w[0]) / interval_ns
    hi = (t_after_stop - t_before_start) / interval_ns + 2
    assert lo - slew <= taken + missed <= hi + slew, (lo, taken, missed, hi, st)
    spans = w[2:-1] - w[:-3]  # rows i and i + 2, both on deadlines (the last row may be the one at stop)
    assert spans.size == 0 or spans.min() > interval_ns * (1 - 5e-4) - 1000, (spans.min(), interval_ns)


@pytest.mark.parametrize("backend,interval", [("native", 0.001), ("psutil", 0.005)])
def test_rows_and_missed_deadlines_account_for_every_deadline(backend, interval):
    """rows + missed == deadlines elapsed, exactly up to the bounds of check_deadline_accounting. Catches: a
    missed deadline not counted, relative instead of absolute deadlines (the period stretches by each sample's
    cost and wake-up latency: fewer deadlines accounted than elapsed), bursts that make up missed deadlines, rows
    lost between the thread and drain(). How many of the 1 kHz deadlines a free core hits (>= 99 %) is measured in
    benchmarks/run.py (interference section), not asserted here."""
    s = Sampler(backend=backend, interval=interval, cpu=True, memory=True, disk=True, net=True)
    t0 = time.time_ns()
    s.start()
    wait_taken(s, 100)
    time.sleep(1.0)
    s.stop()
    t1 = time.time_ns()
    b = s.drain()
    st = s.stats
    assert st["dropped"] == 0 and st["buffered"] == 0
    check_invariant(st)
    check_deadline_accounting(b, st, round(interval * 1e9), t0, t1)
    assert np.all(np.diff(b.timestamps_ns) > 0)
    assert t0 <= b.timestamps_ns[0] and b.timestamps_ns[-1] <= t1
    # cost statistics are a distribution of positive costs (their size is a benchmark)
    assert 0 < st["sample_ns_mean"] <= st["sample_ns_max"] and 0 < st["sample_ns_p99"] <= st["sample_ns_max"], st


@pytest.mark.parametrize("backend,interval", [("native", 0.001), ("psutil", 0.005)])
def test_process_cpu_percent_is_smooth_at_1khz(backend, interval):
    # stat's utime+stime advance in whole ticks (10 ms at USER_HZ 100): read every 1 ms they would
    # give rows of 0 % and 1000 %. Both backends read this process's CPU clock and take the percent
    # over the trailing 20 ms. Thread run: NaN only until the history spans the window, never more CPUs than exist.
    s = Sampler(interval=interval, backend=backend, **dict(OFF, process=True))
    with s:
        end = time.monotonic() + 0.3
        while True:  # one busy thread, for 0.3 s and until 100 rows (their history spans the window)
            if time.monotonic() >= end:
                if s.stats["taken"] >= 100:
                    break
                end = time.monotonic() + 0.05
    v = s.drain().column("process/cpu_percent")
    known = ~np.isnan(v)
    first = int(np.argmax(known))
    assert known.any() and known[first:].all(), v
    v = v[known]
    ncpu = os.cpu_count() or 1
    assert np.all(v >= 0) and np.max(v) <= 100 * ncpu * 1.2, np.max(v)


@pytest.mark.parametrize("backend", ["native", "psutil"])
def test_process_cpu_percent_is_the_cpu_clock_over_the_elapsed_time(backend):
    """Two samples with busy Python between them: the second's cpu_percent is exactly 100 x the change of its
    own cpu_seconds_total (the CPU clock, ns) over the monotonic time between the two readings, which lies
    between the Python clock reads around the calls, and cpu_seconds_total lies between time.process_time()
    reads (an independent reader at the same moment). Holds however little of a core this process gets; a rate
    from stat's 10 ms ticks, or over the wrong time, or in the wrong unit misses the bracket."""
    s = Sampler(backend=backend, **dict(OFF, process=True))
    m0, c0 = time.monotonic_ns(), time.process_time()
    a = s.sample()
    m1, c1 = time.monotonic_ns(), time.process_time()
    between("cpu_seconds_total", a["process/cpu_seconds_total"], c0, c1, slack=1e-9)
    end = time.monotonic() + 0.03
    while time.monotonic() < end:  # > the 20 ms window: the reading at a is the one the rate uses
        pass
    m2 = time.monotonic_ns()
    b = s.sample()
    m3, c3 = time.monotonic_ns(), time.process_time()
    assert b["process/cpu_seconds_total"] <= c3 + 1e-9
    used = b["process/cpu_seconds_total"] - a["process/cpu_seconds_total"]
    assert used > 0
    between("process/cpu_percent", b["process/cpu_percent"], 100 * used / ((m3 - m0) / 1e9),
            100 * used / ((m2 - m1) / 1e9), slack=1e-6)


@pytest.mark.parametrize("backend", ["native", "psutil"])
def test_rows_at_start_and_stop_even_below_one_interval(backend):
    # A run shorter than the interval still has both ends: a row at start() and one at stop(). Ordering, not
    # latency: the first row is stamped after start() was called and before the test saw it taken; the last
    # after stop() was called (a second row on a deadline would need an hour). Catches a first row only after
    # one interval (the wait would time out), a missing or early stop row, a deadline row at stop.
    s = Sampler(interval=3600.0, backend=backend, **dict(OFF, memory=True))
    t0 = time.time_ns()
    s.start()
    wait_taken(s, 1)
    t_seen = time.time_ns()
    time.sleep(0.01)  # a row "just taken" (< min(interval / 2, 1 ms)) replaces the one at stop
    t_stop = time.time_ns()
    s.stop()
    t1 = time.time_ns()
    b = s.drain()
    assert len(b) == 2, len(b)
    assert t0 <= b.timestamps_ns[0] <= t_seen  # at start
    assert t_stop <= b.timestamps_ns[1] <= t1  # at stop
    st = s.stats
    assert st["taken"] == 2 and st["missed_deadlines"] == 0
    # nearest-rank p99 of two costs is the larger one, reported as the middle of its histogram bucket (16 per
    # octave) and never above the max: at most half a bucket (1/32 of the max) below the mean
    assert st["sample_ns_mean"] - st["sample_ns_max"] / 32 <= st["sample_ns_p99"] <= st["sample_ns_max"]


def test_cost_stats_are_nan_before_any_sample():
    st = Sampler(**dict(OFF, memory=True)).stats
    assert math.isnan(st["sample_ns_mean"]) and math.isnan(st["sample_ns_p99"]) and math.isnan(st["sample_ns_max"])
