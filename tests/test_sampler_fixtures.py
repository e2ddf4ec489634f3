"""Exact-value tests of the native Sampler against hand-written /proc and /sys trees.

Every tree lives in tests/fixtures/<scenario>/v1 (see tests/fixtures/README.md). A test copies v1 to a
temporary directory, constructs the Sampler on it (the construction read is the baseline), writes the
files of v2, v3, ... over the copy *in place* and calls sample(). Expected values are literal numbers
derived by hand in the comments, never by re-parsing the fixture.

Rates are checked against the time measured around the calls: if the previous read happened inside
[a0, a1] and this one inside [b0, b1] (time.monotonic, i.e. CLOCK_MONOTONIC), then
delta / (b1 - a0) <= rate <= delta / (b0 - a1).
"""

import math
import os
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

import sysprof

FIXTURES = Path(__file__).parent / "fixtures"
PAGE = os.sysconf("SC_PAGE_SIZE")
CLK_TCK = os.sysconf("SC_CLK_TCK")
GAP = 0.02  # seconds slept between reads so that the lower bound on dt is positive
REL = 1e-12  # "exact" for values the sampler computes by a division or a scaling

OFF = dict(cpu=False, per_cpu=False, memory=False, disk=False, net=False, load=False, process=False)

CPU_AGG = (
    "cpu/percent",
    "cpu/user_percent",
    "cpu/nice_percent",
    "cpu/system_percent",
    "cpu/idle_percent",
    "cpu/iowait_percent",
    "cpu/irq_percent",
    "cpu/softirq_percent",
    "cpu/steal_percent",
)
MEM_CHANNELS = (
    "memory/total_bytes",
    "memory/available_bytes",
    "memory/used_bytes",
    "memory/free_bytes",
    "memory/buffers_bytes",
    "memory/cached_bytes",
    "memory/dirty_bytes",
    "memory/writeback_bytes",
    "memory/used_percent",
    "swap/total_bytes",
    "swap/used_bytes",
    "swap/free_bytes",
)
DISK_SUFFIXES = (
    "read_bytes",
    "write_bytes",
    "read_count",
    "write_count",
    "busy_time_seconds",
    "read_time_seconds",
    "write_time_seconds",
    "read_bytes_per_second",
    "write_bytes_per_second",
    "read_count_per_second",
    "write_count_per_second",
    "busy_time_seconds_per_second",
)
NET_SUFFIXES = (
    "bytes_recv",
    "bytes_sent",
    "packets_recv",
    "packets_sent",
    "errors_in",
    "errors_out",
    "drops_in",
    "drops_out",
    "bytes_recv_per_second",
    "bytes_sent_per_second",
    "packets_recv_per_second",
    "packets_sent_per_second",
)
LOAD_CHANNELS = ("load/1m", "load/5m", "load/15m", "load/procs_running", "load/procs_total")
PROCESS_CHANNELS = (
    "process/rss_bytes",
    "process/vms_bytes",
    "process/cpu_percent",
    "process/cpu_seconds_total",
    "process/num_threads",
)


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------
class Tree:
    """A private, writable copy of tests/fixtures/<name>/v1."""

    def __init__(self, name, tmp_path):
        self.name = name
        self.root = tmp_path / name
        shutil.copytree(FIXTURES / name / "v1", self.root, symlinks=True)
        (self.root / "proc").mkdir(exist_ok=True)
        (self.root / "sys").mkdir(exist_ok=True)

    @property
    def proc(self):
        return str(self.root / "proc")

    @property
    def sys(self):
        return str(self.root / "sys")

    def write(self, rel, data):
        """Overwrite proc/<rel> in place (same inode), or create it."""
        if isinstance(data, str):
            data = data.encode()
        path = self.root / "proc" / rel
        if path.exists():
            with open(path, "r+b") as f:
                f.write(data)
                f.truncate()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

    def apply(self, version, skip=()):
        src = FIXTURES / self.name / version / "proc"
        files = sorted(p for p in src.rglob("*") if p.is_file())
        assert files, f"fixture {self.name}/{version} is empty"
        for p in files:
            rel = p.relative_to(src).as_posix()
            if rel not in skip:
                self.write(rel, p.read_bytes())

    def remove(self, rel):
        (self.root / "proc" / rel).unlink()


def open_sampler(tree, **sources):
    """Construct a native sampler on `tree`; returns (sampler, (t_before, t_after))."""
    kw = dict(OFF, capacity=64)  # a small ring: construction stays short, so the rate windows stay tight
    kw.update(sources)
    t0 = time.monotonic()
    s = sysprof.Sampler(backend="native", proc_root=tree.proc, sys_root=tree.sys, **kw)
    t1 = time.monotonic()
    assert s.backend == "native"
    _last_window[id(s)] = (t0, t1)
    return s, (t0, t1)


_last_window = {}


def take(s):
    """One synchronous sample with the monotonic time window around it.

    Sleeps at least GAP, and at least 20x the width of the previous read's window, so that the rate
    bounds stay within a few percent even on a loaded machine."""
    prev = _last_window.get(id(s))
    time.sleep(max(GAP, 20 * (prev[1] - prev[0])) if prev else GAP)
    t0 = time.monotonic()
    row = s.sample()
    t1 = time.monotonic()
    _last_window[id(s)] = (t0, t1)
    assert set(row) == set(s.channels)
    return row, (t0, t1)


def check_rate(name, r, delta, prev, now, cap=math.inf):
    """min(cap, delta / dt_max) <= r <= min(cap, delta / dt_min) with dt bounded by the windows around both
    reads (cap: utilisation rates are capped at 1, since io_ticks advance in whole jiffies)."""
    assert not math.isnan(r), f"{name} is NaN, expected {delta}/dt"
    if delta == 0:
        assert r == 0.0, f"{name}: counter did not move (or moved backwards), rate must be 0, got {r}"
        return
    dt_max = now[1] - prev[0]
    dt_min = now[0] - prev[1]
    assert dt_min > 0
    lo, hi = min(cap, delta / dt_max), min(cap, delta / dt_min)
    assert dt_max / dt_min < 2.0, f"timing window too wide to check {name}: [{dt_min}, {dt_max}]"
    assert lo * (1 - 1e-9) <= r <= hi * (1 + 1e-9), f"{name}: {r} not in [{lo}, {hi}] (delta {delta})"


def exact(name, got, want):
    if isinstance(want, int):
        assert got == want, f"{name}: got {got!r}, expected {want!r}"
    else:
        assert got == pytest.approx(want, rel=REL, abs=0), f"{name}: got {got!r}, expected {want!r}"


def nan(name, got):
    assert isinstance(got, float) and math.isnan(got), f"{name}: expected NaN, got {got!r}"


def devices(channels, prefix):
    """Device names from channel names prefix<dev>/<suffix> (a device name may contain '/' or ':')."""
    return {c[len(prefix):].rsplit("/", 1)[0] for c in channels if c.startswith(prefix)}


def check_error(s, source):
    assert source in s.errors, f"errors[{source!r}] missing; errors = {s.errors!r}"
    assert isinstance(s.errors[source], str) and s.errors[source].strip()


# --------------------------------------------------------------------------------------------------
# cpu: /proc/stat
# --------------------------------------------------------------------------------------------------
# (percent, user, nice, system, idle, iowait, irq, softirq, steal), {cpu id: percent}
CPU_CASES = {
    # 2.4 kernel, 4 fields: user nice system idle; iowait..steal count as 0.
    # agg deltas: user 150-100=50, nice 30-20=10, system 70-30=40, idle 1200-1000=200 -> total 300,
    # busy 300-200 = 100.  cpu0: 30+5+15+50 = 100, busy 50.  cpu1: 20+5+25+150 = 200, busy 50.
    "cpu_fields4": (
        (100 * 100 / 300, 100 * 50 / 300, 100 * 10 / 300, 100 * 40 / 300, 100 * 200 / 300, 0.0, 0.0, 0.0, 0.0),
        {0: 100 * 50 / 100, 1: 100 * 50 / 200},
    ),
    # 2.6.0, 7 fields: deltas user 100, nice 10, system 40, idle 200, iowait 30, irq 5, softirq 15
    # -> total 400, busy 400-200-30 = 170.
    "cpu_fields7": (
        (100 * 170 / 400, 100 * 100 / 400, 100 * 10 / 400, 100 * 40 / 400, 100 * 200 / 400,
         100 * 30 / 400, 100 * 5 / 400, 100 * 15 / 400, 0.0),
        {0: 100 * 170 / 400},
    ),
    # 2.6.11, 8 fields: deltas user 300, system 100, idle 500, steal 100 -> total 1000, busy 500.
    "cpu_fields8": (
        (50.0, 30.0, 0.0, 10.0, 50.0, 0.0, 0.0, 0.0, 10.0),
        {0: 50.0},
    ),
    # 2.6.33, 10 fields: deltas user 600, nice 100, system 100, idle 200, guest 400, guest_nice 50.
    # guest/guest_nice are inside user/nice: total 600+100+100+200 = 1000 (not 1450), busy 800.
    "cpu_fields10": (
        (80.0, 60.0, 10.0, 10.0, 20.0, 0.0, 0.0, 0.0, 0.0),
        {0: 80.0},
    ),
    # 12 fields (a future kernel or a virtualization layer adds two): the first 8 keep their places,
    # 9-10 (guest) are inside user/nice, 11-12 are not read. Deltas user 300, nice 100, system 100,
    # idle 300, iowait 50, irq 5, softirq 25, steal 50 -> total 930, busy 930-300-50 = 580.
    "cpu_fields12": (
        (100 * 580 / 930, 100 * 300 / 930, 100 * 100 / 930, 100 * 100 / 930, 100 * 300 / 930,
         100 * 50 / 930, 100 * 5 / 930, 100 * 25 / 930, 100 * 50 / 930),
        {0: 100 * 580 / 930},
    ),
}


@pytest.mark.parametrize("scenario", sorted(CPU_CASES))
def test_cpu_field_variants(tmp_path, scenario):
    agg, per_cpu = CPU_CASES[scenario]
    tree = Tree(scenario, tmp_path)
    s, _ = open_sampler(tree, cpu=True, per_cpu=True)
    per_names = tuple(f"cpu/{i}/percent" for i in sorted(per_cpu))
    assert s.channels == CPU_AGG + per_names
    assert "cpu" not in s.errors
    tree.apply("v2")
    row, _ = take(s)
    for name, want in zip(CPU_AGG, agg):
        exact(name, row[name], want)
    for i, want in per_cpu.items():
        exact(f"cpu/{i}/percent", row[f"cpu/{i}/percent"], want)


def test_cpu_aggregate_without_per_cpu(tmp_path):
    tree = Tree("cpu_fields7", tmp_path)
    s, _ = open_sampler(tree, cpu=True)
    assert s.channels == CPU_AGG
    tree.apply("v2")
    row, _ = take(s)
    exact("cpu/percent", row["cpu/percent"], 100 * 170 / 400)  # see CPU_CASES["cpu_fields7"]


def test_cpu_sparse_ids_and_offline(tmp_path):
    # possible = "0-1,4-5,8-10"; /proc/stat has cpu0 cpu1 cpu4 cpu5 cpu10; cpu4 disappears in v2.
    tree = Tree("cpu_sparse", tmp_path)
    s, _ = open_sampler(tree, cpu=True, per_cpu=True)
    per = [c for c in s.channels if re.fullmatch(r"cpu/\d+/percent", c)]
    # sorted numerically (10 after 9), ids from /proc/stat and from the possible mask
    assert per == [f"cpu/{i}/percent" for i in (0, 1, 4, 5, 8, 9, 10)]
    assert [c for c in s.channels if c in CPU_AGG] == list(CPU_AGG)
    tree.apply("v2")
    row, _ = take(s)
    # aggregate: user +400, system +100, idle +500 -> total 1000, busy 500
    exact("cpu/percent", row["cpu/percent"], 50.0)
    exact("cpu/0/percent", row["cpu/0/percent"], 100 * 100 / 200)  # user+50 sys+50 idle+100
    exact("cpu/1/percent", row["cpu/1/percent"], 0.0)  # idle +200 only: a real 0, not NaN
    nan("cpu/4/percent", row["cpu/4/percent"])  # went offline: NaN, never 0
    exact("cpu/5/percent", row["cpu/5/percent"], 100 * 150 / 200)  # user+150 idle+50
    nan("cpu/8/percent", row["cpu/8/percent"])  # possible but never online
    nan("cpu/9/percent", row["cpu/9/percent"])
    exact("cpu/10/percent", row["cpu/10/percent"], 100.0)  # user+20 sys+5, idle+0


def test_cpu_fully_busy_is_exactly_100(tmp_path):
    # cpu0: user +11 of 11 ticks; cpu1: user +50, system +47 of 97; aggregate user +61, system +47 of 108.
    # 100*busy/total is exactly 100.0 here; busy*(100/total) would give 100.00000000000001 (11)
    # and 99.99999999999999 (97), so compare with ==.
    tree = Tree("cpu_saturated", tmp_path)
    s, _ = open_sampler(tree, cpu=True, per_cpu=True)
    tree.apply("v2")
    row, _ = take(s)
    for n in ("cpu/percent", "cpu/0/percent", "cpu/1/percent"):
        assert row[n] == 100.0, (n, row[n])
    assert row["cpu/idle_percent"] == 0.0
    exact("cpu/user_percent", row["cpu/user_percent"], 100 * 61 / 108)
    exact("cpu/system_percent", row["cpu/system_percent"], 100 * 47 / 108)


def test_cpu_backwards_and_no_tick(tmp_path):
    tree = Tree("cpu_backwards", tmp_path)
    s, _ = open_sampler(tree, cpu=True, per_cpu=True)
    names = CPU_AGG + ("cpu/0/percent",)
    assert s.channels == names
    # nothing changed since construction: no tick elapsed -> NaN (not 0)
    row, _ = take(s)
    for n in names:
        nan(n, row[n])
    # v2: user 1000->1100 (+100), idle 5000->4000 went backwards -> 0; total 100, busy 100
    tree.apply("v2")
    row, _ = take(s)
    want_v2 = {"cpu/percent": 100.0, "cpu/user_percent": 100.0, "cpu/idle_percent": 0.0,
               "cpu/system_percent": 0.0, "cpu/iowait_percent": 0.0, "cpu/0/percent": 100.0}
    for n, w in want_v2.items():
        exact(n, row[n], w)
    # v3: system 500->450 backwards (0), everything else unchanged: total 0 -> previous values repeat
    tree.apply("v3")
    row, _ = take(s)
    for n, w in want_v2.items():
        exact(n, row[n], w)
    # v4: at v3 the fields that went backwards (system 500->450) were re-based, so counting resumes
    # from the new value; the others keep the v2 baseline (user 1100, idle 4000):
    # user +50, system 450->550 +100, idle +50 -> total 200, busy 150.
    tree.apply("v4")
    row, _ = take(s)
    exact("cpu/percent", row["cpu/percent"], 100 * 150 / 200)
    exact("cpu/user_percent", row["cpu/user_percent"], 100 * 50 / 200)
    exact("cpu/system_percent", row["cpu/system_percent"], 100 * 100 / 200)
    exact("cpu/idle_percent", row["cpu/idle_percent"], 100 * 50 / 200)
    exact("cpu/0/percent", row["cpu/0/percent"], 100 * 150 / 200)


# --------------------------------------------------------------------------------------------------
# memory + swap: /proc/meminfo
# --------------------------------------------------------------------------------------------------
def test_meminfo_modern(tmp_path):
    tree = Tree("meminfo_modern", tmp_path)
    s, _ = open_sampler(tree, memory=True)
    assert s.channels == MEM_CHANNELS
    assert "memory" not in s.errors and "swap" not in s.errors  # HugePages_* lines without kB are valid
    row, _ = take(s)
    want = {
        "memory/total_bytes": 16307652 * 1024,
        "memory/available_bytes": 8000000 * 1024,  # MemAvailable
        "memory/used_bytes": (16307652 - 8000000) * 1024,
        "memory/free_bytes": 1234567 * 1024,
        "memory/buffers_bytes": 4096 * 1024,  # "Buffers:4096 kB", no blank after ':'
        "memory/cached_bytes": 5000000 * 1024,  # Cached, not SwapCached (77777)
        "memory/dirty_bytes": 1234 * 1024,
        "memory/writeback_bytes": 8 * 1024,  # Writeback, not WritebackTmp (0)
        "memory/used_percent": 100 * 8307652 / 16307652,
        "swap/total_bytes": 2097148 * 1024,
        "swap/used_bytes": (2097148 - 1048576) * 1024,
        "swap/free_bytes": 1048576 * 1024,
    }
    for n, w in want.items():
        exact(n, row[n], w)


def test_meminfo_without_memavailable(tmp_path):
    # pre-3.14 kernel: available = MemFree + Buffers + Cached = 512000 + 64000 + 256000 = 832000 kB
    tree = Tree("meminfo_old", tmp_path)
    s, _ = open_sampler(tree, memory=True)
    assert s.channels == MEM_CHANNELS
    assert "memory" not in s.errors
    row, _ = take(s)
    want = {
        "memory/total_bytes": 2048000 * 1024,
        "memory/available_bytes": 832000 * 1024,
        "memory/used_bytes": (2048000 - 832000) * 1024,
        "memory/free_bytes": 512000 * 1024,
        "memory/buffers_bytes": 64000 * 1024,
        "memory/cached_bytes": 256000 * 1024,
        "memory/dirty_bytes": 40 * 1024,
        "memory/writeback_bytes": 0,
        "memory/used_percent": 100 * 1216000 / 2048000,  # = 59.375
        "swap/total_bytes": 0,  # "SwapTotal:0 kB"
        "swap/used_bytes": 0,
        "swap/free_bytes": 0,
    }
    for n, w in want.items():
        exact(n, row[n], w)


def test_meminfo_floors_and_huge_values(tmp_path):
    tree = Tree("meminfo_odd", tmp_path)
    s, _ = open_sampler(tree, memory=True)
    row, _ = take(s)
    exact("memory/total_bytes", row["memory/total_bytes"], 1000000 * 1024)
    # MemAvailable 1200000 kB > MemTotal: available is at most the total, so used is 0, never negative
    exact("memory/available_bytes", row["memory/available_bytes"], 1000000 * 1024)
    exact("memory/used_bytes", row["memory/used_bytes"], 0)
    exact("memory/used_percent", row["memory/used_percent"], 0.0)
    # SwapFree 300 > SwapTotal 100: free is at most the total (100 kB), used 100 - 100 = 0
    exact("swap/used_bytes", row["swap/used_bytes"], 0)
    exact("swap/free_bytes", row["swap/free_bytes"], 100 * 1024)
    # Dirty = 18014398509481985 kB = (2^54 + 1) kB = 2^64 + 1024 bytes: a uint64 multiply wraps to 1024.
    # Must come out as about 1.8447e19 (or inf), never small. NaN fails the comparison too.
    assert row["memory/dirty_bytes"] >= 1.8e19, row["memory/dirty_bytes"]
    # Writeback = 99999999999999999999999 kB does not even fit a uint64 as a kB count: ~1.024e26 or inf.
    assert row["memory/writeback_bytes"] >= 1e26, row["memory/writeback_bytes"]


def test_meminfo_malformed_lines_skipped(tmp_path):
    # "this line has no colon at all" and "Active(anon):   notanumber kB" are skipped and reported
    tree = Tree("meminfo_badlines", tmp_path)
    s, _ = open_sampler(tree, memory=True)
    assert s.channels == MEM_CHANNELS
    row, _ = take(s)
    check_error(s, "memory")
    want = {
        "memory/total_bytes": 4000000 * 1024,
        "memory/available_bytes": 3000000 * 1024,
        "memory/used_bytes": 1000000 * 1024,
        "memory/free_bytes": 1000000 * 1024,
        "memory/buffers_bytes": 100000 * 1024,
        "memory/cached_bytes": 1500000 * 1024,
        "memory/dirty_bytes": 100 * 1024,
        "memory/used_percent": 25.0,  # 100 * 1000000 / 4000000
        "swap/total_bytes": 1000000 * 1024,
        "swap/used_bytes": 750000 * 1024,
        "swap/free_bytes": 250000 * 1024,
    }
    for n, w in want.items():
        exact(n, row[n], w)


# --------------------------------------------------------------------------------------------------
# disk: /proc/diskstats + /sys/block
# --------------------------------------------------------------------------------------------------
# v2 totals and v1->v2 deltas; rb/wb = sectors * 512, times = ms / 1000
DISK_V2 = {
    # 14 fields (2.6+): sectors_read 9550688->9551688, written 5922052->5923052, io ms 3376340->3376440
    "hda": dict(read_bytes=9551688 * 512, write_bytes=5923052 * 512, read_count=446316, write_count=424947,
                busy=3376440 / 1000, read_time=4382410 / 1000, write_time=19310480 / 1000,
                d_rb=1000 * 512, d_wb=1000 * 512, d_rc=100, d_wc=100, d_busy=100 / 1000),
    # 14 fields: sectors 20000->20800, 40000->41000; reads 1000->1100, writes 2000->2050; io 1800->2000
    "sda": dict(read_bytes=20800 * 512, write_bytes=41000 * 512, read_count=1100, write_count=2050,
                busy=2000 / 1000, read_time=600 / 1000, write_time=1700 / 1000,
                d_rb=800 * 512, d_wb=1000 * 512, d_rc=100, d_wc=50, d_busy=200 / 1000),
    # 14 fields, '/' in the name (sysfs: cciss!c0d0): sectors 6000->6200, 8000->8400; io 200->230
    "cciss/c0d0": dict(read_bytes=6200 * 512, write_bytes=8400 * 512, read_count=310, write_count=420,
                       busy=230 / 1000, read_time=100 / 1000, write_time=140 / 1000,
                       d_rb=200 * 512, d_wb=400 * 512, d_rc=10, d_wc=20, d_busy=30 / 1000),
    # 18 fields (4.18+ discard stats): sectors 4000000->4100000, 8000000->8200000; io 40000->40700
    "nvme0n1": dict(read_bytes=4100000 * 512, write_bytes=8200000 * 512, read_count=51000, write_count=60500,
                    busy=40700 / 1000, read_time=20500 / 1000, write_time=30600 / 1000,
                    d_rb=100000 * 512, d_wb=200000 * 512, d_rc=1000, d_wc=500, d_busy=700 / 1000),
    # 20 fields (5.5+ flush stats): sectors 140000->140700, 160000->160800; io 6000->6050
    "vda": dict(read_bytes=140700 * 512, write_bytes=160800 * 512, read_count=7070, write_count=8080,
                busy=6050 / 1000, read_time=3600 / 1000, write_time=4100 / 1000,
                d_rb=700 * 512, d_wb=800 * 512, d_rc=70, d_wc=80, d_busy=50 / 1000),
    # 20 fields, unchanged: 24 sectors read, 12 reads, io 4 ms, read 1 ms
    "loop0": dict(read_bytes=24 * 512, write_bytes=0, read_count=12, write_count=0,
                  busy=4 / 1000, read_time=1 / 1000, write_time=0.0,
                  d_rb=0, d_wb=0, d_rc=0, d_wc=0, d_busy=0),
    # 20 fields, unchanged; a whole disk whose name ends in digits (sysfs says so, not the name)
    "md127": dict(read_bytes=4000 * 512, write_bytes=4800 * 512, read_count=500, write_count=600,
                  busy=0.0, read_time=0.0, write_time=0.0,
                  d_rb=0, d_wb=0, d_rc=0, d_wc=0, d_busy=0),
}


def check_disk(row, dev, want, prev, now):
    p = f"disk/{dev}/"
    exact(p + "read_bytes", row[p + "read_bytes"], want["read_bytes"])
    exact(p + "write_bytes", row[p + "write_bytes"], want["write_bytes"])
    exact(p + "read_count", row[p + "read_count"], want["read_count"])
    exact(p + "write_count", row[p + "write_count"], want["write_count"])
    exact(p + "busy_time_seconds", row[p + "busy_time_seconds"], want["busy"])
    exact(p + "read_time_seconds", row[p + "read_time_seconds"], want["read_time"])
    exact(p + "write_time_seconds", row[p + "write_time_seconds"], want["write_time"])
    check_rate(p + "read_bytes_per_second", row[p + "read_bytes_per_second"], want["d_rb"], prev, now)
    check_rate(p + "write_bytes_per_second", row[p + "write_bytes_per_second"], want["d_wb"], prev, now)
    check_rate(p + "read_count_per_second", row[p + "read_count_per_second"], want["d_rc"], prev, now)
    check_rate(p + "write_count_per_second", row[p + "write_count_per_second"], want["d_wc"], prev, now)
    check_rate(p + "busy_time_seconds_per_second", row[p + "busy_time_seconds_per_second"], want["d_busy"],
               prev, now, cap=1.0)


def test_disk_formats_and_whole_disks(tmp_path):
    tree = Tree("disk_formats", tmp_path)
    s, built = open_sampler(tree, disk=True)
    assert "disk" not in s.errors
    # partitions hda1 (7-field), sda1, cciss/c0d0p1, vda1, nvme0n1p1 and "foo" (no /sys/block entry) are out
    assert devices(s.channels, "disk/") == set(DISK_V2)
    assert [c for c in s.channels if c.startswith("disk/sda/")] == [f"disk/sda/{x}" for x in DISK_SUFFIXES]
    assert [c for c in s.channels if c.startswith("disk/cciss/c0d0/")] == [
        f"disk/cciss/c0d0/{x}" for x in DISK_SUFFIXES]
    tree.apply("v2")
    row, now = take(s)
    for dev, want in DISK_V2.items():
        check_disk(row, dev, want, built, now)


def test_disk_old_partition_lines_without_sys_block(tmp_path):
    # no <sys_root>/block at all: every device is kept (hda and the 7-field hda1), errors["disk"] says so
    tree = Tree("disk_nosysblock", tmp_path)
    s, built = open_sampler(tree, disk=True)
    check_error(s, "disk")
    assert devices(s.channels, "disk/") == {"hda", "hda1"}
    assert [c for c in s.channels if c.startswith("disk/hda1/")] == [f"disk/hda1/{x}" for x in DISK_SUFFIXES]
    tree.apply("v2")
    row, now = take(s)
    check_disk(row, "hda", DISK_V2["hda"], built, now)  # same hda lines as disk_formats
    # hda1 "35586 38530 38130 39030" = reads, sectors read, writes, sectors written; v1 35486 38030 38030 38030
    p = "disk/hda1/"
    exact(p + "read_count", row[p + "read_count"], 35586)
    exact(p + "read_bytes", row[p + "read_bytes"], 38530 * 512)
    exact(p + "write_count", row[p + "write_count"], 38130)
    exact(p + "write_bytes", row[p + "write_bytes"], 39030 * 512)
    for x in ("busy_time_seconds", "read_time_seconds", "write_time_seconds", "busy_time_seconds_per_second"):
        nan(p + x, row[p + x])  # not on 7-field lines: unknown, not 0
    check_rate(p + "read_bytes_per_second", row[p + "read_bytes_per_second"], 500 * 512, built, now)
    check_rate(p + "write_bytes_per_second", row[p + "write_bytes_per_second"], 1000 * 512, built, now)
    check_rate(p + "read_count_per_second", row[p + "read_count_per_second"], 100, built, now)
    check_rate(p + "write_count_per_second", row[p + "write_count_per_second"], 100, built, now)


def test_disk_counter_wrap(tmp_path):
    tree = Tree("disk_wrap", tmp_path)
    s, built = open_sampler(tree, disk=True)
    assert devices(s.channels, "disk/") == {"sda", "sdb"}  # sda1 lives under sda in sysfs
    p = "disk/sdb/"
    tree.apply("v2")
    row, t2 = take(s)
    # reads 4294967000 -> 200: before < 2^32, after < before: wrapped, delta 200 + 2^32 - 4294967000 = 496
    exact(p + "read_count", row[p + "read_count"], 4294967496)  # 200 + 2^32, unwrapped total
    check_rate(p + "read_count_per_second", row[p + "read_count_per_second"], 496, built, t2)
    # sectors read 4294967290 -> 10: delta 10 + 2^32 - 4294967290 = 16 sectors = 8192 bytes
    exact(p + "read_bytes", row[p + "read_bytes"], 2199023260672)  # (10 + 2^32) * 512
    check_rate(p + "read_bytes_per_second", row[p + "read_bytes_per_second"], 16 * 512, built, t2)
    # io ms 4294967295 -> 999: delta 999 + 2^32 - 4294967295 = 1000 ms
    exact(p + "busy_time_seconds", row[p + "busy_time_seconds"], 4294968295 / 1000)  # (999 + 2^32) ms
    check_rate(p + "busy_time_seconds_per_second", row[p + "busy_time_seconds_per_second"], 1.0, built, t2, cap=1.0)
    # writes 5000000000 -> 4999999000 and sectors 6000000000 -> 5999999999: before >= 2^32, a decrease
    # that is not a 32-bit wrap -> delta 0
    check_rate(p + "write_count_per_second", row[p + "write_count_per_second"], 0, built, t2)
    check_rate(p + "write_bytes_per_second", row[p + "write_bytes_per_second"], 0, built, t2)
    exact(p + "read_time_seconds", row[p + "read_time_seconds"], 100 / 1000)
    # untouched sda: rates exactly 0
    check_rate("disk/sda/read_bytes_per_second", row["disk/sda/read_bytes_per_second"], 0, built, t2)
    # v3: reads 200 -> 300 (+100), sectors 10 -> 20 (+10), io 999 -> 1999 (+1000 ms): totals stay unwrapped
    tree.apply("v3")
    row, t3 = take(s)
    exact(p + "read_count", row[p + "read_count"], 4294967596)  # 300 + 2^32
    check_rate(p + "read_count_per_second", row[p + "read_count_per_second"], 100, t2, t3)
    exact(p + "read_bytes", row[p + "read_bytes"], 2199023265792)  # (20 + 2^32) * 512
    check_rate(p + "read_bytes_per_second", row[p + "read_bytes_per_second"], 10 * 512, t2, t3)
    exact(p + "busy_time_seconds", row[p + "busy_time_seconds"], 4294969295 / 1000)  # (1999 + 2^32) ms
    check_rate(p + "busy_time_seconds_per_second", row[p + "busy_time_seconds_per_second"], 1.0, t2, t3, cap=1.0)
    check_rate(p + "write_count_per_second", row[p + "write_count_per_second"], 0, t2, t3)


def test_disk_malformed_lines_skipped(tmp_path):
    # sdb has non-numeric statistics, sdc only 3, "garbage" has no fields at all; sda and sdd are fine
    tree = Tree("disk_badlines", tmp_path)
    s, _ = open_sampler(tree, disk=True)
    check_error(s, "disk")
    assert devices(s.channels, "disk/") == {"sda", "sdd"}
    row, _ = take(s)
    exact("disk/sda/read_bytes", row["disk/sda/read_bytes"], 20000 * 512)
    exact("disk/sda/write_count", row["disk/sda/write_count"], 2000)
    exact("disk/sdd/read_count", row["disk/sdd/read_count"], 100)
    exact("disk/sdd/read_bytes", row["disk/sdd/read_bytes"], 800 * 512)
    exact("disk/sdd/write_bytes", row["disk/sdd/write_bytes"], 1600 * 512)
    exact("disk/sdd/read_bytes_per_second", row["disk/sdd/read_bytes_per_second"], 0.0)


# --------------------------------------------------------------------------------------------------
# net: /proc/net/dev
# --------------------------------------------------------------------------------------------------
# totals after v2 and v1->v2 deltas (rb = rx bytes, sb = tx bytes, rp/sp = packets)
NET_V2 = {
    # modern format "%6s: %7llu": everything +10000 bytes / +100 packets
    "lo": dict(bytes_recv=133456, bytes_sent=133456, packets_recv=889, packets_sent=889,
               errors_in=0, errors_out=0, drops_in=0, drops_out=0, d_rb=10000, d_sb=10000, d_rp=100, d_sp=100),
    # rx bytes 4294967200 -> 100 wrapped at 32 bits: delta 100 + 2^32 - 4294967200 = 196, total 100 + 2^32;
    # tx bytes 5000000000 -> 4999999999: before >= 2^32 -> delta 0 (total not pinned by the contract)
    "eth0": dict(bytes_recv=4294967396, bytes_sent=None, packets_recv=1010, packets_sent=2020,
                 errors_in=2, errors_out=3, drops_in=3, drops_out=5, d_rb=196, d_sb=0, d_rp=10, d_sp=20),
    # old format "%6s:%8lu" (no blank after ':'); fifo/frame/compressed/multicast/colls/carrier set to
    # 7..14 so that a column mix-up shows
    "eth1": dict(bytes_recv=123466789, bytes_sent=987659321, packets_recv=54421, packets_sent=12395,
                 errors_in=1, errors_out=3, drops_in=2, drops_out=4, d_rb=10000, d_sb=5000, d_rp=100, d_sp=50),
    # name containing ':' and glued to a 13-digit number: "vnet:0:1234567900123"
    "vnet:0": dict(bytes_recv=1234567900123, bytes_sent=99765, packets_recv=4667, packets_sent=53,
                   errors_in=0, errors_out=0, drops_in=0, drops_out=0, d_rb=10000, d_sb=1000, d_rp=100, d_sp=10),
    # 15-character name, longer than the 6-wide column, glued to its number
    "br-3f2a9c1d7e6b": dict(bytes_recv=12345688901, bytes_sent=300, packets_recv=20, packets_sent=3,
                            errors_in=0, errors_out=0, drops_in=0, drops_out=0,
                            d_rb=10000, d_sb=200, d_rp=10, d_sp=2),
}


def check_nic(row, nic, want, prev, now):
    p = f"net/{nic}/"
    for k in ("bytes_recv", "bytes_sent", "packets_recv", "packets_sent",
              "errors_in", "errors_out", "drops_in", "drops_out"):
        if want[k] is not None:
            exact(p + k, row[p + k], want[k])
    check_rate(p + "bytes_recv_per_second", row[p + "bytes_recv_per_second"], want["d_rb"], prev, now)
    check_rate(p + "bytes_sent_per_second", row[p + "bytes_sent_per_second"], want["d_sb"], prev, now)
    check_rate(p + "packets_recv_per_second", row[p + "packets_recv_per_second"], want["d_rp"], prev, now)
    check_rate(p + "packets_sent_per_second", row[p + "packets_sent_per_second"], want["d_sp"], prev, now)


def test_net_formats_and_wrap(tmp_path):
    tree = Tree("net_formats", tmp_path)
    s, built = open_sampler(tree, net=True)
    assert "net" not in s.errors
    assert devices(s.channels, "net/") == set(NET_V2)
    assert [c for c in s.channels if c.startswith("net/vnet:0/")] == [f"net/vnet:0/{x}" for x in NET_SUFFIXES]
    tree.apply("v2")
    row, t2 = take(s)
    for nic, want in NET_V2.items():
        check_nic(row, nic, want, built, t2)
    # v3: eth0 rx 100 -> 1100 (+1000): total stays unwrapped, 1100 + 2^32; packets 1010 -> 1020, 2020 -> 2030;
    # eth1 unchanged; vnet:0 vanished -> NaN
    tree.apply("v3")
    row, t3 = take(s)
    exact("net/eth0/bytes_recv", row["net/eth0/bytes_recv"], 4294968396)
    check_rate("net/eth0/bytes_recv_per_second", row["net/eth0/bytes_recv_per_second"], 1000, t2, t3)
    check_rate("net/eth0/packets_recv_per_second", row["net/eth0/packets_recv_per_second"], 10, t2, t3)
    check_rate("net/eth0/packets_sent_per_second", row["net/eth0/packets_sent_per_second"], 10, t2, t3)
    check_rate("net/eth0/bytes_sent_per_second", row["net/eth0/bytes_sent_per_second"], 0, t2, t3)
    check_rate("net/lo/bytes_recv_per_second", row["net/lo/bytes_recv_per_second"], 10000, t2, t3)
    check_rate("net/eth1/bytes_recv_per_second", row["net/eth1/bytes_recv_per_second"], 0, t2, t3)
    exact("net/eth1/bytes_recv", row["net/eth1/bytes_recv"], 123466789)
    for x in NET_SUFFIXES:
        nan("net/vnet:0/" + x, row["net/vnet:0/" + x])


def test_net_malformed_lines_skipped(tmp_path):
    # "this line has no colon", "eth9: 1 2 3" (3 of 16 numbers) and eth8 ("x") are skipped and reported
    tree = Tree("net_badlines", tmp_path)
    s, _ = open_sampler(tree, net=True)
    check_error(s, "net")
    assert devices(s.channels, "net/") == {"lo", "eth0"}
    row, _ = take(s)
    exact("net/lo/bytes_recv", row["net/lo/bytes_recv"], 123456)
    exact("net/lo/packets_sent", row["net/lo/packets_sent"], 789)
    exact("net/eth0/bytes_recv", row["net/eth0/bytes_recv"], 5000)
    exact("net/eth0/packets_recv", row["net/eth0/packets_recv"], 60)
    exact("net/eth0/bytes_sent", row["net/eth0/bytes_sent"], 7000)
    exact("net/eth0/packets_sent", row["net/eth0/packets_sent"], 80)


# --------------------------------------------------------------------------------------------------
# load and process
# --------------------------------------------------------------------------------------------------
def test_loadavg(tmp_path):
    tree = Tree("loadavg", tmp_path)  # "0.52 2.72 11.07 3/1234 56789"
    s, _ = open_sampler(tree, load=True)
    assert s.channels == LOAD_CHANNELS
    assert "load" not in s.errors
    row, _ = take(s)
    # the double nearest to the printed decimal, as strtod gives it (2 + 72/100 would be 2.7199999999999998)
    assert row["load/1m"] == 0.52
    assert row["load/5m"] == 2.72
    assert row["load/15m"] == 11.07
    assert row["load/procs_running"] == 3.0
    assert row["load/procs_total"] == 1234.0


def test_process_stat_name_with_parens(tmp_path):
    # comm is "my) (proc 1 2": fields are counted after the LAST ')'
    tree = Tree("process", tmp_path)
    s, built = open_sampler(tree, process=True)
    assert s.channels == PROCESS_CHANNELS
    assert "process" not in s.errors
    tree.apply("v2")
    row, now = take(s)
    # v2: utime 300, stime 130, num_threads 9, vsize 2147483648, rss 3000 pages
    exact("process/rss_bytes", row["process/rss_bytes"], 3000 * PAGE)
    exact("process/vms_bytes", row["process/vms_bytes"], 2147483648)
    exact("process/num_threads", row["process/num_threads"], 9)
    exact("process/cpu_seconds_total", row["process/cpu_seconds_total"], (300 + 130) / CLK_TCK)
    # v1 utime+stime = 250+100 = 350 ticks, v2 430: +80 ticks = 80/CLK_TCK s of CPU, as percent of one core
    check_rate("process/cpu_percent", row["process/cpu_percent"], 100 * 80 / CLK_TCK, built, now)


def test_process_explicit_pid(tmp_path):
    # proc/4242/stat: "4242 (python3) S ..." utime 40 stime 10 threads 3 vsize 536870912 rss 1024
    tree = Tree("process", tmp_path)
    s = sysprof.Sampler(backend="native", proc_root=tree.proc, sys_root=tree.sys, pid=4242,
                        **dict(OFF, process=True))
    row, _ = take(s)
    exact("process/rss_bytes", row["process/rss_bytes"], 1024 * PAGE)
    exact("process/vms_bytes", row["process/vms_bytes"], 536870912)
    exact("process/num_threads", row["process/num_threads"], 3)
    exact("process/cpu_seconds_total", row["process/cpu_seconds_total"], (40 + 10) / CLK_TCK)
    exact("process/cpu_percent", row["process/cpu_percent"], 0.0)  # file did not change


# --------------------------------------------------------------------------------------------------
# the "full" tree: every source together, missing / malformed files, the threaded path
# --------------------------------------------------------------------------------------------------
ALL = dict(cpu=True, per_cpu=True, memory=True, disk=True, net=True, load=True, process=True)
SOURCE_ORDER = ("cpu", "memory", "swap", "disk", "net", "load", "process")

# values of the full tree after v2 (construction on v1)
FULL_V2 = {
    # cpu deltas: user +100, system +50, idle +150, iowait +50, softirq +50 -> total 400, busy 200
    "cpu/percent": 50.0,
    "cpu/user_percent": 25.0,
    "cpu/system_percent": 12.5,
    "cpu/idle_percent": 37.5,
    "cpu/iowait_percent": 12.5,
    "cpu/softirq_percent": 12.5,
    "cpu/0/percent": 100.0,  # user +100
    "cpu/1/percent": 50.0,  # system +50, iowait +50
    "cpu/2/percent": 0.0,  # idle +150
    "cpu/3/percent": 100.0,  # softirq +50
    "memory/total_bytes": 8000000 * 1024,
    "memory/available_bytes": 6000000 * 1024,
    "memory/used_bytes": 2000000 * 1024,
    "memory/used_percent": 25.0,
    "swap/used_bytes": 1000000 * 1024,  # 4000000 - 3000000 kB
    "disk/sda/read_bytes": 21000 * 512,
    "disk/sda/write_bytes": 42000 * 512,
    "disk/sda/busy_time_seconds": 2000 / 1000,
    "net/eth0/bytes_recv": 5100000,
    "net/eth0/bytes_sent": 3050000,
    "net/lo/bytes_recv": 10000,
    "load/1m": 1.5,
    "load/5m": 0.75,
    "load/15m": 0.25,
    "load/procs_running": 2.0,
    "load/procs_total": 345.0,
    "process/num_threads": 4,
    "process/cpu_seconds_total": (350 + 100) / CLK_TCK,
    "process/rss_bytes": 2560 * PAGE,
}


def source_of(channel):
    return channel.split("/", 1)[0]


def test_full_tree_channel_order_and_values(tmp_path):
    tree = Tree("full", tmp_path)
    s, built = open_sampler(tree, **ALL)
    assert s.errors == {}
    assert isinstance(s.channels, tuple) and len(set(s.channels)) == len(s.channels)
    order = [SOURCE_ORDER.index(source_of(c)) for c in s.channels]
    assert order == sorted(order), "channels must come grouped in the documented source order"
    assert {source_of(c) for c in s.channels} == set(SOURCE_ORDER)
    assert [c for c in s.channels if c.startswith("memory/") or c.startswith("swap/")] == list(MEM_CHANNELS)
    assert [c for c in s.channels if c.startswith("load/")] == list(LOAD_CHANNELS)
    assert [c for c in s.channels if c.startswith("process/")] == list(PROCESS_CHANNELS)
    tree.apply("v2")
    row, now = take(s)
    assert all(isinstance(v, float) for v in row.values())
    for n, w in FULL_V2.items():
        exact(n, row[n], w)
    check_rate("disk/sda/read_bytes_per_second", row["disk/sda/read_bytes_per_second"], 1000 * 512, built, now)
    check_rate("net/eth0/bytes_sent_per_second", row["net/eth0/bytes_sent_per_second"], 50000, built, now)
    # process: utime 250 -> 350, +100 ticks (5000 % of one core over ~20 ms), but the tree has 4 online
    # CPUs (sys/devices/system/cpu/online "0-3"): a percent of one core is at most 400
    check_rate("process/cpu_percent", row["process/cpu_percent"], 100 * 100 / CLK_TCK, built, now, cap=400.0)


FILES = [  # (file under proc, source, channel prefixes)
    ("stat", "cpu", ("cpu/",)),
    ("meminfo", "memory", ("memory/", "swap/")),
    ("diskstats", "disk", ("disk/",)),
    ("net/dev", "net", ("net/",)),
    ("loadavg", "load", ("load/",)),
    ("self/stat", "process", ("process/",)),
]


def check_others(s, row, disabled_prefixes):
    """Every value of FULL_V2 outside the disabled source is still exact."""
    checked = 0
    for n, w in FULL_V2.items():
        if n.startswith(disabled_prefixes):
            continue
        exact(n, row[n], w)
        checked += 1
    assert checked >= 15


@pytest.mark.parametrize("rel,source,prefixes", FILES, ids=[f[1] for f in FILES])
def test_missing_file_disables_only_its_source(tmp_path, rel, source, prefixes):
    tree = Tree("full", tmp_path)
    tree.remove(rel)
    s, _ = open_sampler(tree, **ALL)
    assert not [c for c in s.channels if c.startswith(prefixes)]
    check_error(s, source)
    others = {source_of(c) for c in s.channels}
    assert others == set(SOURCE_ORDER) - {source_of(p.rstrip("/")) for p in prefixes}
    for other in others:
        assert other not in s.errors, s.errors
    tree.apply("v2", skip={rel})
    row, _ = take(s)
    check_others(s, row, prefixes)


MALFORMED = [
    ("stat", "cpu", ("cpu/",), "this is not /proc/stat\n"),
    ("stat", "cpu", ("cpu/",), ""),
    ("meminfo", "memory", ("memory/", "swap/"), "no colons here\njust words\n"),
    ("meminfo", "memory", ("memory/", "swap/"), ""),
    ("diskstats", "disk", ("disk/",), "garbage\n"),
    ("net/dev", "net", ("net/",), "garbage\nmore garbage\nstill no colon here\n"),
    ("loadavg", "load", ("load/",), "garbage\n"),
    ("loadavg", "load", ("load/",), ""),
    ("self/stat", "process", ("process/",), "garbage\n"),
]


@pytest.mark.parametrize("rel,source,prefixes,content", MALFORMED,
                         ids=[f"{m[1]}-{'empty' if not m[3] else 'garbage'}" for m in MALFORMED])
def test_malformed_file_disables_only_its_source(tmp_path, rel, source, prefixes, content):
    tree = Tree("full", tmp_path)
    tree.write(rel, content)
    s, _ = open_sampler(tree, **ALL)
    assert not [c for c in s.channels if c.startswith(prefixes)]
    check_error(s, source)
    tree.apply("v2", skip={rel})
    row, _ = take(s)
    check_others(s, row, prefixes)


def test_runtime_failure_gives_nan_and_recovers(tmp_path):
    tree = Tree("full", tmp_path)
    s, _ = open_sampler(tree, **ALL)
    assert s.errors == {}
    tree.write("loadavg", "garbage\n")
    tree.write("meminfo", "")
    row, _ = take(s)
    for c in s.channels:
        if c.startswith(("load/", "memory/", "swap/")):
            nan(c, row[c])
    check_error(s, "load")
    check_error(s, "memory")
    exact("net/lo/bytes_recv", row["net/lo/bytes_recv"], 10000)  # other sources unaffected
    exact("process/num_threads", row["process/num_threads"], 4)
    # files repaired: values come back
    tree.write("loadavg", "1.50 0.75 0.25 2/345 6789\n")
    tree.write("meminfo", (FIXTURES / "full" / "v1" / "proc" / "meminfo").read_bytes())
    row, _ = take(s)
    assert row["load/1m"] == 1.5
    exact("memory/total_bytes", row["memory/total_bytes"], 8000000 * 1024)
    exact("swap/used_bytes", row["swap/used_bytes"], 1000000 * 1024)


def test_threaded_path_on_fixture_tree(tmp_path):
    tree = Tree("full", tmp_path)
    s, _ = open_sampler(tree, interval=0.01, capacity=4096, **ALL)
    t_start = time.time_ns()
    s.start()
    time.sleep(0.2)
    tree.apply("v2")
    time.sleep(0.2)
    s.stop()
    t_stop = time.time_ns()
    batch = s.drain()
    n = len(batch)
    assert n >= 10, f"only {n} rows in 0.4 s at 100 Hz"
    assert batch.channels == s.channels
    ts, vals = batch.timestamps_ns, batch.values
    assert ts.dtype == np.int64 and ts.shape == (n,)
    assert vals.dtype == np.float64 and vals.shape == (n, len(s.channels))
    assert np.all(np.diff(ts) > 0), "timestamps must increase"
    assert t_start <= ts[0] and ts[-1] <= t_stop, (t_start, ts[0], ts[-1], t_stop)

    col = batch.column
    # static sources: every row exact
    assert np.all(col("memory/total_bytes") == 8000000 * 1024)
    assert np.all(col("swap/used_bytes") == 1000000 * 1024)
    assert np.all(col("load/1m") == 1.5)
    assert np.all(col("net/lo/bytes_recv") == 10000)
    assert np.all(col("process/num_threads") == 4)
    # changed sources: the v1 value, then (from one row on) the v2 value
    for name, v1, v2 in [("disk/sda/read_bytes", 20000 * 512, 21000 * 512),
                         ("net/eth0/bytes_recv", 5000000, 5100000),
                         ("process/cpu_seconds_total", (250 + 100) / CLK_TCK, (350 + 100) / CLK_TCK)]:
        c = col(name)
        is_v1 = np.isclose(c, v1, rtol=REL, atol=0)
        is_v2 = np.isclose(c, v2, rtol=REL, atol=0)
        k = int(np.argmax(~is_v1))
        assert is_v1[0] and is_v2[-1], (name, c[0], c[-1])
        assert np.all(is_v1[:k]) and np.all(is_v2[k:]), (name, c)
    # rates: 0 while nothing moves, positive on exactly the one row that saw the change
    # (the first row may be NaN if the thread has no baseline yet)
    r = col("disk/sda/read_bytes_per_second")
    assert np.all((r[1:] >= 0)) and (r[0] >= 0 or math.isnan(r[0]))
    assert int(np.sum(r[1:] > 0)) + int(r[0] > 0) == 1, r
    # cpu: no tick until v2 -> NaN; the change row gives 50 %; later rows repeat it (total == 0)
    cp = col("cpu/percent")
    k = int(np.argmax(~np.isnan(cp)))
    assert math.isnan(cp[0]) and np.all(np.isnan(cp[:k])) and np.all(cp[k:] == 50.0), cp
    assert np.all(col("cpu/0/percent")[k:] == 100.0)

    st = s.stats
    assert st["taken"] == st["drained"] + st["dropped"] + st["buffered"]
    assert st["buffered"] == 0 and st["dropped"] == 0
    assert st["drained"] >= n
    assert len(s.drain()) == 0


# --------------------------------------------------------------------------------------------------
# process_tree: a process and its descendants, from task/<tid>/children (or a /proc/*/stat scan)
# --------------------------------------------------------------------------------------------------
TREE_CHANNELS = (
    "process_tree/num_processes",
    "process_tree/rss_bytes",
    "process_tree/cpu_percent",
    "process_tree/cpu_seconds_total",
    "process_tree/num_threads",
)


def _tree_v1_checks(s):
    # v1: 100 (root: utime 100 stime 50, 2 threads, rss 1000 pages; its thread 105 forked 102),
    # 101 (200+20, 3, 2000), 102 (300+30, 4, 3000), 103 (child of 101: 400+40, 5, 4000, comm with ')'),
    # 200 unrelated (999+99, 7, 9999) and never counted.
    assert s.channels == TREE_CHANNELS
    row, window = take(s)
    exact("num_processes", row["process_tree/num_processes"], 4.0)
    exact("rss_bytes", row["process_tree/rss_bytes"], float((1000 + 2000 + 3000 + 4000) * PAGE))
    exact("num_threads", row["process_tree/num_threads"], 14.0)
    exact("cpu_seconds_total", row["process_tree/cpu_seconds_total"], (150 + 220 + 330 + 440) / CLK_TCK)
    exact("cpu_percent", row["process_tree/cpu_percent"], 0.0)  # nothing moved since construction
    return window


def test_process_tree_sums_from_children_files(tmp_path):
    tree = Tree("process_tree", tmp_path)
    s, built = open_sampler(tree, process_tree=True, pid=100)
    assert "process_tree" not in s.errors, s.errors
    v1 = _tree_v1_checks(s)
    tree.apply("v2")  # utime +10, +20, +30, +40 = +100 ticks in the tree (200's +500 is outside)
    row, now = take(s)
    exact("num_processes", row["process_tree/num_processes"], 4.0)
    exact("cpu_seconds_total", row["process_tree/cpu_seconds_total"], (160 + 240 + 360 + 480) / CLK_TCK)
    check_rate("process_tree/cpu_percent", row["process_tree/cpu_percent"], 100 * 100 / CLK_TCK, v1, now)

    # v3: 103 has exited (101's children file no longer lists it) and 101 used 5 more ticks. The
    # stat file still reads (a fixture file does not vanish as /proc does): only discovery, at most
    # every 100 ms, drops it.
    tree.apply("v3")
    time.sleep(0.15)
    row3, now3 = take(s)
    exact("num_processes", row3["process_tree/num_processes"], 3.0)
    exact("rss_bytes", row3["process_tree/rss_bytes"], float((1000 + 2000 + 3000) * PAGE))
    exact("num_threads", row3["process_tree/num_threads"], 9.0)
    # the total is over the live members, so it drops by 103's 480 ticks ...
    exact("cpu_seconds_total", row3["process_tree/cpu_seconds_total"], (160 + 245 + 360) / CLK_TCK)
    # ... but the rate sums per-member deltas: 101's +5 ticks, never negative
    check_rate("process_tree/cpu_percent", row3["process_tree/cpu_percent"], 100 * 5 / CLK_TCK, now, now3)


def test_process_tree_scans_stat_without_children_files(tmp_path):
    tree = Tree("process_tree", tmp_path)
    for f in list(Path(tree.proc).rglob("children")):
        f.unlink()
    s, built = open_sampler(tree, process_tree=True, pid=100)
    check_error(s, "process_tree")
    assert "CONFIG_PROC_CHILDREN" in s.errors["process_tree"]
    _tree_v1_checks(s)


def test_process_tree_root_is_self_by_default(tmp_path):
    tree = Tree("process_tree", tmp_path)
    (Path(tree.proc) / "self").symlink_to("101")
    s, _ = open_sampler(tree, process_tree=True)
    row = s.sample()
    exact("num_processes", row["process_tree/num_processes"], 2.0)  # 101 and 103
    exact("num_threads", row["process_tree/num_threads"], 8.0)


def test_process_tree_member_cap(tmp_path):
    proc = tmp_path / "proc"
    line = "{pid} (w) S {ppid} 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 9 4096 1 0\n"
    (proc / "1000" / "task" / "1000").mkdir(parents=True)
    (proc / "1000" / "stat").write_text(line.format(pid=1000, ppid=1))
    (proc / "1000" / "task" / "1000" / "children").write_text(" ".join(str(2000 + i) for i in range(300)) + "\n")
    for i in range(300):
        (proc / str(2000 + i) / "task" / str(2000 + i)).mkdir(parents=True)
        (proc / str(2000 + i) / "stat").write_text(line.format(pid=2000 + i, ppid=1000))
        (proc / str(2000 + i) / "task" / str(2000 + i) / "children").write_text("")
    s = sysprof.Sampler(backend="native", proc_root=str(proc), pid=1000, **dict(OFF, process_tree=True))
    check_error(s, "process_tree")
    assert "256" in s.errors["process_tree"]
    row = s.sample()
    exact("num_processes", row["process_tree/num_processes"], 256.0)
    exact("num_threads", row["process_tree/num_threads"], 256.0)


def test_process_tree_root_gone_reads_nan(tmp_path):
    tree = Tree("process_tree", tmp_path)
    s, _ = open_sampler(tree, process_tree=True, pid=100)
    tree.write("100/stat", (FIXTURES / "process_tree" / "v1" / "proc" / "100" / "stat").read_text()
               .replace(" S 1 ", " Z 1 "))
    row = s.sample()
    for c in TREE_CHANNELS:
        nan(c, row[c])


# --------------------------------------------------------------------------------------------------
# out-of-range file contents: every value finite and in its physical range, or NaN
# --------------------------------------------------------------------------------------------------
U64 = 2**64 - 1


def test_cpu_tick_deltas_past_uint64_do_not_wrap(tmp_path):
    # "cpu 0 0 0 0" then "cpu 2^64-1 2 0 0": deltas user 2^64-1, nice 2 sum to 2^64+1, which wraps a
    # uint64 to 0 (then user read 1.8e21 %, nice 200 %). Summed without wrapping: busy = total.
    tree = Tree("cpu_overflow", tmp_path)
    s, _ = open_sampler(tree, cpu=True, per_cpu=True)
    tree.apply("v2")
    row, _ = take(s)
    for n in ("cpu/percent", "cpu/0/percent"):
        assert row[n] == 100.0, (n, row[n])
    # double(2^64-1) == double(2^64+1) == 2^64: user reads exactly 100, nice 200 / 2^64
    assert row["cpu/user_percent"] == 100.0
    exact("cpu/nice_percent", row["cpu/nice_percent"], 100 * 2 / (2**64 + 1))
    for n in ("cpu/system_percent", "cpu/idle_percent", "cpu/iowait_percent", "cpu/irq_percent",
              "cpu/softirq_percent", "cpu/steal_percent"):
        assert row[n] == 0.0, (n, row[n])


def test_meminfo_wrapped_and_overlong_values(tmp_path):
    # MemFree and SwapFree of 2^64-1 kB (wrapped negatives), MemAvailable above MemTotal, a 400-digit
    # Dirty (inf as a double) and a Writeback of 10^307 kB (inf once multiplied by 1024).
    tree = Tree("meminfo_wrapped", tmp_path)
    s, _ = open_sampler(tree, memory=True)
    assert s.channels == MEM_CHANNELS
    row, _ = take(s)
    want = {
        "memory/total_bytes": 1000000 * 1024,
        "memory/free_bytes": 1000000 * 1024,  # at most the total
        "memory/available_bytes": 1000000 * 1024,  # at most the total
        "memory/used_bytes": 0,  # total - available, never negative
        "memory/used_percent": 0.0,
        "memory/buffers_bytes": 1000 * 1024,
        "memory/cached_bytes": 20000 * 1024,
        "swap/total_bytes": 2000 * 1024,
        "swap/free_bytes": 2000 * 1024,  # at most the total
        "swap/used_bytes": 0,
    }
    for n, w in want.items():
        exact(n, row[n], w)
    nan("memory/dirty_bytes", row["memory/dirty_bytes"])  # malformed, reported, never inf
    nan("memory/writeback_bytes", row["memory/writeback_bytes"])
    check_error(s, "memory")
    assert "meminfo: malformed line skipped" in s.errors["memory"]
    # v2, before 3.14 (no MemAvailable): free + buffers + cached = 1020000 kB > MemTotal -> the total
    tree.apply("v2")
    row, _ = take(s)
    exact("memory/available_bytes", row["memory/available_bytes"], 1000000 * 1024)
    exact("memory/used_bytes", row["memory/used_bytes"], 0)
    exact("memory/free_bytes", row["memory/free_bytes"], 999000 * 1024)
    exact("swap/used_bytes", row["swap/used_bytes"], 500 * 1024)
    exact("memory/dirty_bytes", row["memory/dirty_bytes"], 12 * 1024)


def test_meminfo_overlong_total_disables_source(tmp_path):
    # MemTotal of 400 digits: no usable total, so the source is disabled, naming the line
    tree = Tree("meminfo_modern", tmp_path)
    tree.write("meminfo", "MemTotal: " + "9" * 400 + " kB\nMemFree: 100 kB\n")
    s, _ = open_sampler(tree, memory=True)
    assert not [c for c in s.channels if c.startswith(("memory/", "swap/"))]
    check_error(s, "memory")
    assert "MemTotal" in s.errors["memory"]


def test_loadavg_overlong_number_is_malformed(tmp_path):
    tree = Tree("loadavg", tmp_path)
    s, _ = open_sampler(tree, load=True)
    tree.write("loadavg", "0.52 " + "9" * 400 + ".00 11.07 3/1234 56789\n")
    row, _ = take(s)
    for c in LOAD_CHANNELS:
        nan(c, row[c])
    check_error(s, "load")
    tree.write("loadavg", "0.52 " + "9" * 320 + " 11.07 3/1234 56789\n")  # 1e320 without a fraction
    row, _ = take(s)
    nan("load/1m", row["load/1m"])
    tree.write("loadavg", "0.52 2.72 11.07 3/" + "9" * 400 + " 56789\n")
    row, _ = take(s)
    nan("load/procs_total", row["load/procs_total"])
    tree.write("loadavg", "0.52 2.72 11.07 3/1234 56789\n")
    row, _ = take(s)
    assert row["load/5m"] == 2.72 and row["load/procs_total"] == 1234.0


def test_disk_unknown_field_counts_keep_documented_positions(tmp_path):
    # sda has 19 statistics, sdb 12, sdc 13: none is a count iostats.rst lists (11, 15, 17), but all
    # have at least 11, whose positions it fixes. sdd has 8: too few, skipped and reported.
    tree = Tree("disk_fields", tmp_path)
    s, built = open_sampler(tree, disk=True)
    assert devices(s.channels, "disk/") == {"sda", "sdb", "sdc"}
    check_error(s, "disk")
    assert "sdd" in s.errors["disk"]
    row, _ = take(s)
    for dev, (rc, rs, rt, wc, ws, wt, io) in {"sda": (100, 2000, 30, 200, 4000, 50, 60),
                                              "sdb": (110, 2200, 30, 210, 4200, 50, 70),
                                              "sdc": (120, 2400, 30, 220, 4400, 50, 80)}.items():
        p = f"disk/{dev}/"
        exact(p + "read_count", row[p + "read_count"], rc)
        exact(p + "read_bytes", row[p + "read_bytes"], rs * 512)
        exact(p + "read_time_seconds", row[p + "read_time_seconds"], rt / 1000)
        exact(p + "write_count", row[p + "write_count"], wc)
        exact(p + "write_bytes", row[p + "write_bytes"], ws * 512)
        exact(p + "write_time_seconds", row[p + "write_time_seconds"], wt / 1000)
        exact(p + "busy_time_seconds", row[p + "busy_time_seconds"], io / 1000)
    prev = _last_window[id(s)]
    tree.apply("v2")  # sda: reads +50, sectors +1000, writes +60, sectors +1000, io +30 ms
    row, now = take(s)
    exact("disk/sda/read_count", row["disk/sda/read_count"], 150)
    exact("disk/sda/write_bytes", row["disk/sda/write_bytes"], 5000 * 512)
    exact("disk/sda/busy_time_seconds", row["disk/sda/busy_time_seconds"], 90 / 1000)
    check_rate("disk/sda/read_count_per_second", row["disk/sda/read_count_per_second"], 50, prev, now)
    check_rate("disk/sdb/read_count_per_second", row["disk/sdb/read_count_per_second"], 0, prev, now)


def test_net_extra_columns_keep_the_first_16(tmp_path):
    # eth0 has 18 columns: the 16 that net-procfs.c prints keep their places, the 2 extra are not read
    tree = Tree("net_wide", tmp_path)
    s, _ = open_sampler(tree, net=True)
    assert "net" not in s.errors, s.errors
    assert devices(s.channels, "net/") == {"lo", "eth0"}
    row, _ = take(s)
    want = dict(bytes_recv=5000, packets_recv=50, errors_in=1, drops_in=2,
                bytes_sent=7000, packets_sent=70, errors_out=7, drops_out=8)
    for k, w in want.items():
        exact("net/eth0/" + k, row["net/eth0/" + k], w)
    tree.apply("v2")
    row, _ = take(s)
    exact("net/eth0/bytes_recv", row["net/eth0/bytes_recv"], 6000)
    exact("net/eth0/bytes_sent", row["net/eth0/bytes_sent"], 9000)
    exact("net/eth0/drops_out", row["net/eth0/drops_out"], 8)  # not the extra 999


def test_process_ticks_past_int64_and_negative_counts(tmp_path):
    # v1: utime 10^11 ticks (10^18 ns at USER_HZ 100: a double product past 2^63 was undefined when
    # cast), num_threads -5 and rss -3 (corrupt: NaN, never passed on). The tree has no
    # sys/devices/system/cpu/online, so the CPUs are proc/stat's cpu0..cpu2: 3.
    tree = Tree("process_ranges", tmp_path)
    s, _ = open_sampler(tree, process=True)
    assert "process" not in s.errors, s.errors
    row, _ = take(s)
    exact("process/cpu_seconds_total", row["process/cpu_seconds_total"], 10**11 / CLK_TCK)
    exact("process/cpu_percent", row["process/cpu_percent"], 0.0)
    nan("process/num_threads", row["process/num_threads"])
    nan("process/rss_bytes", row["process/rss_bytes"])
    exact("process/vms_bytes", row["process/vms_bytes"], 1048576)
    # v2: utime = stime = 2^64-1: the sum saturates at 2^64-1 ticks (no wrap to a small value), the
    # CPU time in ns saturates too, and a rate of ~10^20 % is bounded by the 3 CPUs: exactly 300
    tree.apply("v2")
    row, _ = take(s)
    exact("process/cpu_seconds_total", row["process/cpu_seconds_total"], float(U64) / CLK_TCK)
    assert row["process/cpu_percent"] == 300.0, row["process/cpu_percent"]
    exact("process/num_threads", row["process/num_threads"], 4)
    exact("process/rss_bytes", row["process/rss_bytes"], 256 * PAGE)
    # v3: utime back to 5 ticks: a decrease is a reset, rate 0, never negative
    tree.apply("v3")
    row, _ = take(s)
    assert row["process/cpu_percent"] == 0.0, row["process/cpu_percent"]
    exact("process/cpu_seconds_total", row["process/cpu_seconds_total"], 5 / CLK_TCK)


def test_process_cpu_percent_bounded_by_online_cpus(tmp_path):
    # the process tree's 64 online CPUs are narrowed to 2: 4000 % of one core reads exactly 200
    tree = Tree("process", tmp_path)
    (tree.root / "sys" / "devices" / "system" / "cpu" / "online").write_text("0,7\n")
    s, _ = open_sampler(tree, process=True)
    tree.apply("v2")  # +80 ticks in ~20 ms
    row, _ = take(s)
    assert row["process/cpu_percent"] == 200.0, row["process/cpu_percent"]


def test_process_tree_sums_saturate_and_negative_counts(tmp_path):
    # 100 -> 101, 102. v1 thread counts 1 + (2^63-1) + (2^63-1) = 2^64-1 (a signed sum overflows),
    # RSS pages 10 + 2 (2^63-1) (past 2^64-1: saturates), utime 10^11 ticks each; 8 online CPUs.
    tree = Tree("process_tree_ranges", tmp_path)
    s, _ = open_sampler(tree, process_tree=True, pid=100)
    assert "process_tree" not in s.errors, s.errors
    row, _ = take(s)
    exact("num_processes", row["process_tree/num_processes"], 3.0)
    exact("num_threads", row["process_tree/num_threads"], float(U64))
    exact("rss_bytes", row["process_tree/rss_bytes"], float(U64) * PAGE)
    exact("cpu_seconds_total", row["process_tree/cpu_seconds_total"], 3 * 10**11 / CLK_TCK)
    exact("cpu_percent", row["process_tree/cpu_percent"], 0.0)
    # v2: every utime 2^64-1 (ns saturate, and so does their sum); 102 has num_threads -5, rss -1
    tree.apply("v2")
    row, _ = take(s)
    exact("cpu_seconds_total", row["process_tree/cpu_seconds_total"], float(U64) / 1e9)
    assert row["process_tree/cpu_percent"] == 800.0, row["process_tree/cpu_percent"]  # 8 CPUs
    nan("num_threads", row["process_tree/num_threads"])
    nan("rss_bytes", row["process_tree/rss_bytes"])
    exact("num_processes", row["process_tree/num_processes"], 3.0)


# --------------------------------------------------------------------------------------------------
# files that never end, or are not files: refused at open, or NaN at a later tick
# --------------------------------------------------------------------------------------------------
MIB4 = 4 << 20


def test_meminfo_symlinked_to_dev_zero_is_refused(tmp_path):
    tree = Tree("full", tmp_path)
    tree.remove("meminfo")
    (Path(tree.proc) / "meminfo").symlink_to("/dev/zero")
    s, _ = open_sampler(tree, **ALL)
    assert not [c for c in s.channels if c.startswith(("memory/", "swap/"))]
    assert s.errors["memory"] == tree.proc + "/meminfo: not a regular file", s.errors
    tree.apply("v2", skip={"meminfo"})
    row, _ = take(s)
    check_others(s, row, ("memory/", "swap/"))


def test_fifo_is_refused_without_blocking(tmp_path):
    # a FIFO with no writer would block a plain open() forever
    tree = Tree("full", tmp_path)
    tree.remove("loadavg")
    os.mkfifo(Path(tree.proc) / "loadavg")
    s, _ = open_sampler(tree, **ALL)
    assert not [c for c in s.channels if c.startswith("load/")]
    assert s.errors["load"] == tree.proc + "/loadavg: not a regular file", s.errors


def test_oversized_file_is_refused_at_open(tmp_path):
    tree = Tree("full", tmp_path)
    line = (FIXTURES / "full" / "v1" / "proc" / "diskstats").read_bytes()
    tree.write("diskstats", line * (MIB4 // len(line) + 1))
    s, _ = open_sampler(tree, **ALL)
    assert not [c for c in s.channels if c.startswith("disk/")]
    assert s.errors["disk"] == tree.proc + "/diskstats: 4 MiB or more, not a /proc or /sys file", s.errors


def test_file_growing_past_the_cap_reads_nan_then_recovers(tmp_path):
    tree = Tree("full", tmp_path)
    s, _ = open_sampler(tree, **ALL)
    assert s.errors == {}
    good = (FIXTURES / "full" / "v1" / "proc" / "net" / "dev").read_bytes()
    tree.write("net/dev", good + b" " * MIB4)
    row, _ = take(s)
    for c in s.channels:
        if c.startswith("net/"):
            nan(c, row[c])
    assert s.errors["net"] == tree.proc + "/net/dev: 4 MiB or more, not a /proc or /sys file", s.errors
    exact("memory/total_bytes", row["memory/total_bytes"], 8000000 * 1024)  # others unaffected
    tree.write("net/dev", good)
    row, _ = take(s)
    exact("net/lo/bytes_recv", row["net/lo/bytes_recv"], 10000)


def test_process_tree_children_file_symlinked_to_dev_zero(tmp_path):
    # discovery reads each children file whole: /dev/zero is refused, so 101 (and 103 below it) are
    # not found; 102 still is, through thread 105
    tree = Tree("process_tree", tmp_path)
    children = Path(tree.proc) / "100" / "task" / "100" / "children"
    children.unlink()
    children.symlink_to("/dev/zero")
    s, _ = open_sampler(tree, process_tree=True, pid=100)
    row = s.sample()
    exact("num_processes", row["process_tree/num_processes"], 2.0)  # 100 and 102
    exact("num_threads", row["process_tree/num_threads"], 6.0)  # 2 + 4


# --------------------------------------------------------------------------------------------------
# the psutil backend applies the same clamps
# --------------------------------------------------------------------------------------------------
def test_psutil_meminfo_clamps(monkeypatch):
    import psutil
    from collections import namedtuple

    vm = namedtuple("svmem", "total available percent used free buffers cached")
    sw = namedtuple("sswap", "total used free percent sin sout")
    monkeypatch.setattr(psutil, "virtual_memory", lambda: vm(1000, 5000, 0.0, 0, 2**64 - 1, 10, 20))
    monkeypatch.setattr(psutil, "swap_memory", lambda: sw(100, 0, 300, 0.0, 0, 0))
    s = sysprof.Sampler(backend="psutil", **dict(OFF, memory=True))
    row = s.sample()
    want = {"memory/total_bytes": 1000, "memory/available_bytes": 1000, "memory/used_bytes": 0,
            "memory/free_bytes": 1000, "memory/used_percent": 0.0, "swap/total_bytes": 100,
            "swap/free_bytes": 100, "swap/used_bytes": 0}
    for n, w in want.items():
        exact(n, row[n], w)
