"""Sampler.latest() and Sampler.wait_next(): the newest row without a drain (csrc/engine/latest.hpp).

Native cases run on fixture trees (tests/fixtures, see tests/test_sampler_fixtures.py) so that values are
exact; psutil cases read the live system and compare with the rows drain() returned. No test asserts a
duration: the waits that must end are bounded by generous joins, which only a hang reaches.
"""
from __future__ import annotations

import shutil
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import sysprof
from sysprof.sampling.sampler import Row
from test_lifecycle import assert_clean, run_py
from test_sampler_fixtures import MEM_CHANNELS, OFF, Tree

CSRC = Path(__file__).resolve().parent.parent / "csrc"
HANG_S = 60  # a join that reaches this means a hang
KB = 1024
MEMINFO = {  # tests/fixtures/meminfo_modern/v1, as tests/test_sampler_fixtures_memory_disk_net.py reads it
    "memory/total_bytes": 16307652 * KB,
    "memory/available_bytes": 8000000 * KB,
    "memory/free_bytes": 1234567 * KB,
    "swap/free_bytes": 1048576 * KB,
}


def fixture_sampler(tmp_path, interval=0.001, capacity=1 << 16):
    tree = Tree("meminfo_modern", tmp_path)
    s = sysprof.Sampler(interval, backend="native", capacity=capacity, proc_root=tree.proc, sys_root=tree.sys,
                        **dict(OFF, memory=True))
    assert s.channels == MEM_CHANNELS
    return tree, s


def rows_of(batch):
    """seq (1-based, in the order taken) -> (timestamp, values' bytes) of every drained row."""
    return {i + 1: (int(t), v.tobytes()) for i, (t, v) in enumerate(zip(batch.timestamps_ns, batch.values))}


def wait_until(pred):
    deadline = time.monotonic() + HANG_S
    while not pred():
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.002)


# --------------------------------------------------------------------------------------------------
# the seqlock itself, under sanitizers: csrc/tests/latest_test.cpp
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sanitizer, rows", [("thread", 100000), ("address,undefined", 300000)])
def test_latest_hpp_under_sanitizer(tmp_path, sanitizer, rows):
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("no g++ on this machine")
    exe = tmp_path / "latest_test"
    cmd = [gxx, "-std=c++17", "-O1", "-g", "-Wall", "-Wextra", f"-fsanitize={sanitizer}", "-pthread", f"-I{CSRC}",
           str(CSRC / "tests" / "latest_test.cpp"), "-o", str(exe)]
    build = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if build.returncode != 0 and "sanitize" in build.stderr:
        pytest.skip(f"g++ cannot build with -fsanitize={sanitizer} here: {build.stderr[-300:]}")
    assert build.returncode == 0, f"{' '.join(cmd)} failed:\n{build.stderr}"
    run = subprocess.run([str(exe), str(rows)], capture_output=True, text=True, timeout=600)
    if run.returncode != 0 and "FATAL: ThreadSanitizer" in run.stderr and "WARNING" not in run.stderr:
        pytest.skip(f"ThreadSanitizer cannot run here: {run.stderr[-300:]}")  # e.g. an unsupported memory layout
    assert run.returncode == 0 and "FAIL" not in run.stderr and "Sanitizer" not in run.stderr, run.stderr
    assert run.stdout.startswith(f"rows {rows} "), run.stdout


# --------------------------------------------------------------------------------------------------
# latest()
# --------------------------------------------------------------------------------------------------
def test_latest_is_none_before_the_first_row(tmp_path):
    _, s = fixture_sampler(tmp_path)
    assert s.latest() is None
    s.sample()  # a synchronous read is not the thread's row
    assert s.latest() is None
    assert s.wait_next(0) is None and s.wait_next() is None  # not running: at once


def test_latest_after_stop_is_the_last_drained_row_with_the_fixture_values(tmp_path):
    _, s = fixture_sampler(tmp_path)
    with s:
        wait_until(lambda: s.stats["taken"] >= 3)
    r = s.latest()
    b = s.drain()
    st = s.stats
    assert st["dropped"] == 0 and r.seq == st["taken"] == len(b)
    assert r.timestamp_ns == int(b.timestamps_ns[-1])
    assert r.array.tobytes() == b.values[-1].tobytes()
    for name, want in MEMINFO.items():
        assert r[name] == want, name
    assert r["memory/used_bytes"] == (16307652 - 8000000) * KB
    assert s.latest().seq == r.seq  # the drain did not take it away; stopped: it stays


def test_row_is_a_read_only_mapping(tmp_path):
    _, s = fixture_sampler(tmp_path)
    with s:
        wait_until(lambda: s.latest() is not None)
    r = s.latest()
    assert isinstance(r, Row) and len(r) == len(s.channels) and list(r) == list(s.channels) == list(r.channels)
    assert "memory/total_bytes" in r and "nope" not in r
    with pytest.raises(KeyError):
        r["nope"]
    a = r.array
    assert a.dtype == np.float64 and a.shape == (len(s.channels),) and not a.flags.writeable
    with pytest.raises(ValueError):
        a[0] = 1.0
    assert r.to_dict() == {c: float(v) for c, v in zip(s.channels, a)}
    assert dict(r) == r.to_dict() and r.get("nope", 7) == 7
    with pytest.raises(AttributeError):
        r.seq = 0
    assert "seq=" in repr(r)


def test_latest_never_returns_a_torn_row(tmp_path):
    # The file changes under the sampler (a counter in MemFree), the thread runs at 10 kHz and a reader
    # hammers latest(): every row it sees must be, bit for bit, the row drain() returns with that seq.
    tree, s = fixture_sampler(tmp_path, interval=1e-4, capacity=1 << 20)
    meminfo = (tree.root / "proc" / "meminfo").read_text()
    stop = threading.Event()

    def rewrite():
        k = 0
        while not stop.is_set():
            k += 1
            tree.write("meminfo", meminfo.replace("MemFree:         1234567 kB", f"MemFree: {1000000 + k} kB"))

    seen = {}

    def read():
        while not stop.is_set():
            r = s.latest()
            if r is not None:
                seen[r.seq] = (r.timestamp_ns, r.array.tobytes())

    threads = [threading.Thread(target=rewrite), threading.Thread(target=read)]
    s.start()
    for t in threads:
        t.start()
    wait_until(lambda: len(seen) >= 200 and s.stats["taken"] >= 2000)
    stop.set()
    for t in threads:
        t.join(HANG_S)
    s.stop()
    drained = rows_of(s.drain())
    assert s.stats["dropped"] == 0 and len(drained) == s.stats["taken"]
    assert len({v for _, v in seen.values()}) > 1  # the values did change under the reader
    for seq, row in seen.items():
        assert drained[seq] == row, seq


def test_latest_alongside_drain(tmp_path):
    _, s = fixture_sampler(tmp_path)
    got = []
    with s:
        # Until someone asks, the thread publishes a row only every 10 ms; wait_next() asks, and returns once
        # a row is published after that: from then on every row is.
        assert s.wait_next(5.0) is not None
        for _ in range(20):
            got += list(rows_of(s.drain()).values())
            r = s.latest()
            if r is not None:
                assert r.seq >= len(got) - 1  # the thread pushes, then publishes: at most one behind drain
            time.sleep(0.001)
    n = s.stats["taken"]
    assert s.latest().seq == n and len(got) + len(s.drain()) == n


# --------------------------------------------------------------------------------------------------
# wait_next()
# --------------------------------------------------------------------------------------------------
def test_wait_next_returns_a_newer_row(tmp_path):
    _, s = fixture_sampler(tmp_path)
    with s:
        first = s.wait_next(HANG_S, after=0)
        assert first is not None and first.seq >= 1
        now = s.latest().seq
        r = s.wait_next(HANG_S)
        assert r is not None and r.seq > now
        r2 = s.wait_next(HANG_S, after=r.seq + 3)
        assert r2 is not None and r2.seq > r.seq + 3
        assert r2["memory/total_bytes"] == MEMINFO["memory/total_bytes"]
        assert s.wait_next(HANG_S, after=0).seq >= r2.seq  # one is there already: at once, the newest
    drained = rows_of(s.drain())
    assert drained[r2.seq] == (r2.timestamp_ns, r2.array.tobytes())


def test_wait_next_times_out_with_none(tmp_path):
    _, s = fixture_sampler(tmp_path, interval=3600.0)  # one row at start, the next in an hour
    with s:
        wait_until(lambda: s.latest() is not None)
        assert s.wait_next(0) is None
        assert s.wait_next(0.05) is None
        assert s.wait_next(0.01, after=0).seq == 1


@pytest.mark.parametrize("backend", ["native", "psutil"])
def test_stop_wakes_waiters_with_none(tmp_path, backend):
    if backend == "native":
        _, s = fixture_sampler(tmp_path, interval=3600.0)
    else:
        s = sysprof.Sampler(3600.0, backend="psutil", **dict(OFF, memory=True))
    s.start()
    wait_until(lambda: s.latest() is not None)
    out = {}
    waiters = [threading.Thread(target=lambda i=i: out.__setitem__(i, s.wait_next(timeout))) for i, timeout in
               enumerate([None, 3600.0, None])]
    for t in waiters:
        t.start()
    time.sleep(0.05)  # let them sleep (not required: a waiter that comes after stop() returns None too)
    s.stop()
    for t in waiters:
        t.join(HANG_S)
        assert not t.is_alive()
    assert out == {0: None, 1: None, 2: None}
    assert s.wait_next(3600.0) is None and s.wait_next() is None  # stopped: at once


def test_wait_next_rejects_bad_arguments(tmp_path):
    _, s = fixture_sampler(tmp_path)
    for bad in (-1, float("nan"), "1", True):
        with pytest.raises(ValueError, match="timeout"):
            s.wait_next(bad)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="after"):
            s.wait_next(0, after=bad)
    assert s.wait_next(0, after=2**70) is None


# --------------------------------------------------------------------------------------------------
# psutil backend: the same API
# --------------------------------------------------------------------------------------------------
def test_psutil_latest_and_wait_next():
    s = sysprof.Sampler(0.002, backend="psutil", **dict(OFF, cpu=True, memory=True))
    assert s.latest() is None and s.wait_next(0) is None
    with s:
        r = s.wait_next(HANG_S)
        assert r is not None and r.seq >= 1 and set(r) == set(s.channels)
        r2 = s.wait_next(HANG_S, after=r.seq + 2)
        assert r2.seq > r.seq + 2
    last = s.latest()
    b = s.drain()
    assert last.seq == s.stats["taken"] == len(b)
    assert last.timestamp_ns == int(b.timestamps_ns[-1]) and last.array.tobytes() == b.values[-1].tobytes()
    assert rows_of(b)[r2.seq] == (r2.timestamp_ns, r2.array.tobytes())
    assert not last.array.flags.writeable


# --------------------------------------------------------------------------------------------------
# fork() and interpreter exit
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["native", "psutil"])
def test_inherited_sampler_has_no_latest_and_never_waits(backend):
    runs = run_py(f"""
        import os, sys, time, warnings, sysprof
        warnings.simplefilter("ignore")
        s = sysprof.Sampler(interval=0.001, backend={backend!r}).start()
        while s.latest() is None:
            time.sleep(0.001)
        pid = os.fork()
        if pid == 0:
            ok = s.latest() is None and s.wait_next() is None and s.wait_next(3600) is None
            ok = ok and s.wait_next(3600, after=0) is None
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        seq = s.latest().seq
        r = s.wait_next(60)
        s.stop()
        sys.exit(0 if status == 0 and r is not None and r.seq > seq else 1)
        """, repeat=2)
    assert_clean(runs)


@pytest.mark.parametrize("backend", ["native", "psutil"])
def test_exit_while_a_daemon_thread_waits(backend):
    # The interpreter finalizes while a daemon thread sleeps in wait_next (GIL released): no abort.
    runs = run_py(f"""
        import threading, time, warnings, sysprof
        warnings.simplefilter("ignore")
        s = sysprof.Sampler(interval=3600.0, backend={backend!r}).start()
        def spin():
            while True:
                s.latest()
        threading.Thread(target=lambda: s.wait_next(), daemon=True).start()
        threading.Thread(target=spin, daemon=True).start()
        time.sleep(0.05)
        """, repeat=3)
    assert_clean(runs)
