"""Sampler tests on the live machine: arguments, the fallback to psutil without the extension, and the
psutil backend's statement of the native rules (sysprof/sampling/portable/rules.py)."""

import math
import subprocess
import sys
import textwrap
import time

import numpy as np
import psutil
import pytest

from sysprof import Sampler

from sampler_live_support import OFF

# --------------------------------------------------------------------------------------------------
# arguments and import fallback
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["native", "psutil"])
@pytest.mark.parametrize("kwargs,word", [
    (dict(interval=0), "interval"),
    (dict(interval=-0.5), "interval"),
    (dict(capacity=1), "capacity"),
    (dict(capacity=0), "capacity"),
    (dict(interval=float("inf")), "interval"),
    (dict(interval=float("nan")), "interval"),
    (dict(interval=True), "interval"),
    (dict(capacity=2.5), "capacity"),
    (dict(capacity=10**12), "capacity"),
    (dict(pid=1), "pid"),  # pid without process/cgroup would be silently ignored
    (dict(pid=0, process=True), "pid"),
    (dict(proc_root="fixtures\0x"), "proc_root"),  # a NUL would cut the path short in the C++ side
    (dict(sys_root=""), "sys_root"),
    (dict(cpu="no"), "cpu must be True or False"),  # truthy, yet no switch: never read as "on"
    (dict(cpu="False"), "cpu must be True or False"),
    (dict(memory=2), "memory must be True or False"),
    (dict(net=[0]), "net must be True or False"),
    (dict(disk=None), "disk must be True or False"),
    (dict(per_cpu=1.0), "per_cpu must be True or False"),
])
def test_bad_arguments(backend, kwargs, word):
    with pytest.raises(ValueError, match=word):
        Sampler(backend=backend, **kwargs)


def test_source_switches_take_python_and_numpy_bools():
    s = Sampler(backend="psutil", **dict(OFF, memory=np.bool_(True), cpu=np.False_))
    assert [c for c in s.channels if c.startswith("cpu/")] == [] and "memory/used_bytes" in s.channels


def test_capacity_too_large_for_memory_is_a_value_error():
    # 2^31 rows of 8 * (1 + channels) bytes: terabytes, refused up front rather than std::bad_alloc
    with pytest.raises(ValueError, match="capacity"):
        Sampler(backend="native", capacity=2**31)


@pytest.mark.parametrize("max_rows", [-1, 1.5, "2", True])
def test_bad_drain_max_rows(max_rows):
    s = Sampler(**dict(OFF, memory=True))
    with pytest.raises(ValueError, match="max_rows"):
        s.drain(max_rows)
    assert len(s.drain(0)) == 0


def test_bad_backend_and_proc_root():
    with pytest.raises(ValueError, match="backend"):
        Sampler(backend="bogus")
    with pytest.raises(ValueError, match="proc_root"):
        Sampler(backend="psutil", proc_root="/tmp")


BLOCKED = textwrap.dedent(r"""
    import sys, time
    sys.modules["sysprof._native"] = None   # the extension cannot be imported
    import sysprof
    s = sysprof.Sampler(interval=0.01)
    assert s.backend == "psutil", s.backend
    row = s.sample()
    assert row["memory/total_bytes"] > 0, row
    try:
        sysprof.Sampler(backend="native")
    except ValueError as e:
        assert "backend" in str(e), e
    else:
        raise SystemExit("backend='native' did not raise ValueError")
    s.start()
    end = time.monotonic() + 60
    while s.stats["taken"] < 2 and time.monotonic() < end:  # rows taken, however busy the machine
        time.sleep(0.005)
    s.stop()
    b = s.drain()
    assert len(b) >= 2, len(b)
    assert b.values.shape == (len(b), len(s.channels))
    print("BLOCKED-OK")
""")


def test_import_without_extension_falls_back_to_psutil():
    r = subprocess.run([sys.executable, "-c", BLOCKED], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "BLOCKED-OK" in r.stdout, r.stdout + r.stderr


# --------------------------------------------------------------------------------------------------
# psutil backend: the native rules in Python (csrc/derive/rules.hpp, csrc/sources/cpu.cpp, process.cpp)
# --------------------------------------------------------------------------------------------------
def test_psutil_counter_unwraps_32_bits_and_treats_other_decreases_as_resets():
    from sysprof.sampling.portable.rules import Counter
    c = Counter()
    assert c.update(2**32 - 10) == 0 and c.total == 2**32 - 10  # first read: a baseline
    assert c.update(2**32 - 4) == 6 and c.total == 2**32 - 4
    assert c.update(5) == 9 and c.total == 2**32 + 5  # wrapped at 32 bits: unwrapped, monotonic
    assert c.update(5) == 0 and c.total == 2**32 + 5
    assert c.update(2) == 2**32 - 3 and c.total == 2**33 + 2  # any decrease from below 2^32 is a wrap
    c.update(2**40)
    assert c.total == 2**40 + 2**33
    assert c.update(7) == 0 and c.total == 7 + 2**33  # a decrease from 2^32 or more: a reset, delta 0
    assert c.update(10) == 3 and c.total == 10 + 2**33


def test_psutil_trailing_rate_window():
    from sysprof.sampling.portable.rules import TrailingRate
    ms = 1_000_000
    r = TrailingRate()
    assert math.isnan(r.update(0, 0))  # no history
    assert math.isnan(r.update(5 * ms, 5 * ms))  # history spans 5 ms < 20 ms
    assert math.isnan(r.update(19 * ms, 9 * ms))
    assert r.update(20 * ms, 10 * ms) == 0.5e9  # over [0, 20 ms]: 10 ms of CPU per 20 ms
    assert r.update(30 * ms, 30 * ms) == 1e9  # over [5 ms, 30 ms], the newest reading >= 20 ms old
    assert r.update(41 * ms, 5 * ms) == 0.0  # below the reading at 20 ms (a reset): 0, not negative
    assert r.update(141 * ms, 55 * ms) == 0.5e9  # an interval longer than the window: the last one
    # Readings closer than 20 ms / 256: the fixed history (256) is shorter than the window; all of it is used.
    r = TrailingRate()
    for i in range(256):
        assert math.isnan(r.update(i * 10_000, i * 5_000))
    assert r.update(256 * 10_000, 256 * 5_000) == 0.5e9  # over [0, 2.56 ms]
    assert r.update(257 * 10_000, 257 * 5_000) == 0.5e9  # over [10 us, 2.57 ms]
    assert len(r.hist) == 256


def test_psutil_ticks_rebase_backwards_fields_and_hold_without_ticks():
    from sysprof.sampling.portable.rules import Ticks as _Ticks
    t = _Ticks()
    nan9 = t.update([100, 0, 0, 1000, 0, 0, 0, 0])
    assert all(math.isnan(x) for x in nan9) and len(nan9) == 9  # NaN before the first tick
    assert t.update([110, 0, 0, 1030, 10, 0, 0, 0]) == [20.0, 20.0, 0, 0, 60.0, 20.0, 0, 0, 0]
    assert t.update([110, 0, 0, 1030, 10, 0, 0, 0])[0] == 20.0  # no tick elapsed: repeated
    # idle goes backwards: it contributes 0 (not a negative share) and counting resumes from 500
    assert t.update([120, 0, 0, 500, 10, 0, 0, 0]) == [100.0, 100.0, 0, 0, 0, 0, 0, 0, 0]
    assert t.update([120, 0, 0, 510, 10, 0, 0, 0]) == [0.0, 0, 0, 0, 100.0, 0, 0, 0, 0]
    assert all(math.isnan(x) for x in t.update(None))  # offline


def test_psutil_disk_device_unwraps_and_caps_busy_at_one():
    from types import SimpleNamespace

    from sysprof.sampling.portable.host import DISK_FIELDS, DISK_RATES, RATE_CAPS, SECTOR
    from sysprof.sampling.portable.rules import CounterDevice
    dev = CounterDevice(DISK_FIELDS, DISK_RATES, RATE_CAPS)

    def disk(sectors_read, busy_ms):
        return SimpleNamespace(read_bytes=sectors_read * SECTOR, write_bytes=0, read_count=1, write_count=2,
                               busy_time=busy_ms, read_time=4, write_time=5)
    ms = 1_000_000
    row = dev.row(disk(2**32 - 1, 1000), 0)
    assert row[:7] == [(2**32 - 1) * SECTOR, 0, 1, 2, 1.0, 0.004, 0.005]
    assert all(math.isnan(x) for x in row[7:])  # no rate before a second read
    row = dev.row(disk(1, 1030), 10 * ms)  # the sector counter wrapped; 30 ms busy in 10 ms
    assert row[0] == (2**32 + 1) * SECTOR
    assert row[7] == 2 * SECTOR / 0.01
    assert row[11] == 1.0  # busy_time_seconds_per_second capped at 1
    row = dev.row(disk(1, 1035), 20 * ms)
    assert row[11] == 0.5
    assert all(math.isnan(x) for x in dev.row(None, 30 * ms))  # gone
    row = dev.row(disk(3, 1040), 40 * ms)  # back: re-primed, the total keeps its unwrapping
    assert row[0] == (2**32 + 3) * SECTOR and math.isnan(row[7])


def test_psutil_zombie_process_reads_nan_memory_and_threads():
    # the child lives until its stdin closes (not for a fixed time: the first sample must find it alive however
    # slowly this process runs)
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        s = Sampler(backend="psutil", pid=child.pid, **dict(OFF, process=True))
        alive = s.sample()
        assert alive["process/rss_bytes"] > 0 and alive["process/num_threads"] >= 1
        child.stdin.close()
        deadline = time.monotonic() + 120  # a guard against a hang only
        while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:  # exited, not yet reaped
            assert time.monotonic() < deadline
            time.sleep(0.01)
        row = s.sample()
        for c in ("process/rss_bytes", "process/vms_bytes", "process/cpu_percent", "process/num_threads"):
            assert math.isnan(row[c]), (c, row)
        assert row["process/cpu_seconds_total"] >= 0
    finally:
        child.wait()
    row = s.sample()  # reaped: nothing left to read
    assert all(math.isnan(v) for v in row.values()) and "process" in s.errors
