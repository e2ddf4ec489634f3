"""Helpers shared by the Sampler tests on the live machine (tests/test_sampler_live*.py): source switches,
bracketing asserts, the ring's accounting invariant, and waits for rows instead of fixed sleeps."""

import time

OFF = dict(cpu=False, per_cpu=False, memory=False, disk=False, net=False, load=False, process=False)
ALL = dict(cpu=True, per_cpu=True, memory=True, disk=True, net=True, load=True, process=True)


def devices(channels, prefix):
    return {c[len(prefix):].rsplit("/", 1)[0] for c in channels if c.startswith(prefix)}


def between(name, value, lo, hi, slack=0.0):
    assert lo - slack <= value <= hi + slack, f"{name}: {value} not in [{lo}, {hi}]"


def check_invariant(st):
    assert st["taken"] == st["drained"] + st["dropped"] + st["buffered"], st


def wait_until(pred, what, timeout=60.0):
    """Polls ``pred`` until it holds. The suite must pass with every core busy, so tests wait for the work they
    need (rows taken, CPU time used) instead of assuming how much a fixed sleep gives; ``timeout`` only turns a
    thread that never runs (a real defect) into a failure instead of a hang."""
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, f"not within {timeout} s: {what}"
        time.sleep(0.002)


def wait_taken(s, n):
    wait_until(lambda: s.stats["taken"] >= n, f"{n} rows taken ({s.stats})")
