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
CPU_MODES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
#: the cpu source's channels, with per_cpu those of the CPU ids given (csrc/sources/cpu.cpp's layout)
def cpu_channels(ids=()):
    return (CPU_AGG + tuple(f"cpu/{m}_seconds_total" for m in CPU_MODES) + tuple(f"cpu/{i}/percent" for i in ids)
            + tuple(f"cpu/{i}/{m}_seconds_total" for i in ids for m in CPU_MODES))


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
    kw = dict(OFF, capacity=64, devices=["*"])  # a small ring: construction stays short, so the rate windows stay
    # tight; every device (lo and loop ones too): these tests pin the parsers, tests/test_devices.py the filter
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
    assert s.channels == cpu_channels(sorted(per_cpu))
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
    assert s.channels == cpu_channels()
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
    names = cpu_channels([0])
    assert s.channels == names
    # nothing changed since construction: no tick elapsed -> NaN (not 0); the counters are the ticks read
    hz = os.sysconf("SC_CLK_TCK")
    row, _ = take(s)
    for n in names:
        if n.endswith("percent"):
            nan(n, row[n])
    exact("cpu/idle_seconds_total", row["cpu/idle_seconds_total"], 5000 / hz)
    # v2: user 1000->1100 (+100), idle 5000->4000 went backwards -> 0; total 100, busy 100
    tree.apply("v2")
    row, _ = take(s)
    exact("cpu/idle_seconds_total", row["cpu/idle_seconds_total"], 4000 / hz)  # a counter reset: its new value
    exact("cpu/0/user_seconds_total", row["cpu/0/user_seconds_total"], 1100 / hz)
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
# vmstat: /proc/vmstat, by key (csrc/parse/vmstat.hpp)
# --------------------------------------------------------------------------------------------------
VMSTAT_CHANNELS = tuple("vmstat/" + n for n in (
    "pgfault_total", "pgmajfault_total", "pgfault_per_second", "pgmajfault_per_second", "pswpin_total",
    "pswpout_total", "pgscan_kswapd_total", "pgscan_direct_total", "pgsteal_kswapd_total", "pgsteal_direct_total",
    "oom_kill_total", "workingset_refault_anon_total", "workingset_refault_file_total"))


def test_native_and_python_registries_name_the_same_sources():
    from sysprof import _native
    from sysprof.sampling.registry import SOURCES

    assert sorted(_native.source_names()) == sorted(SOURCES)


def test_vmstat_modern_kernel(tmp_path):
    # 6.1-style keys: one pgscan/pgsteal key per reclaimer, khugepaged's own (not read), pgscan_direct_throttle
    # (another counter, not summed), workingset refaults split into anon and file
    tree = Tree("vmstat", tmp_path)
    s, built = open_sampler(tree, vmstat=True)
    assert s.channels == VMSTAT_CHANNELS
    assert "vmstat" not in s.errors, s.errors
    tree.apply("v2")
    row, now = take(s)
    want = {"pgfault_total": 5012000, "pgmajfault_total": 1230, "pswpin_total": 100, "pswpout_total": 262,
            "pgscan_kswapd_total": 81500, "pgscan_direct_total": 3200, "pgsteal_kswapd_total": 71000,
            "pgsteal_direct_total": 2600, "oom_kill_total": 2, "workingset_refault_anon_total": 45,
            "workingset_refault_file_total": 9100}
    for n, w in want.items():
        exact(n, row["vmstat/" + n], w)
    check_rate("pgfault_per_second", row["vmstat/pgfault_per_second"], 5012000 - 5000000, built, now)
    check_rate("pgmajfault_per_second", row["vmstat/pgmajfault_per_second"], 1230 - 1200, built, now)
    # v3: pgfault went down to 4000 (a reset: rate 0); pgmajfault is gone (NaN, and no rate)
    tree.apply("v3")
    row, _ = take(s)
    exact("pgfault_total", row["vmstat/pgfault_total"], 4000)
    exact("pgfault_per_second", row["vmstat/pgfault_per_second"], 0.0)
    nan("pgmajfault_total", row["vmstat/pgmajfault_total"])
    nan("pgmajfault_per_second", row["vmstat/pgmajfault_per_second"])
    for n, w in want.items():
        if n not in ("pgfault_total", "pgmajfault_total"):
            exact(n, row["vmstat/" + n], w)
    assert "vmstat" not in s.errors, s.errors


def test_vmstat_old_kernel(tmp_path):
    # 4.4-style keys: per-zone pgscan/pgsteal (dma, dma32, normal, movable) summed, pgscan_direct_throttle
    # not; one workingset_refault (file pages only before 5.9); no oom_kill (4.13+): NaN, never 0
    tree = Tree("vmstat_old", tmp_path)
    s, _ = open_sampler(tree, vmstat=True)
    assert s.channels == VMSTAT_CHANNELS
    row, prev = take(s)
    want = {"pgfault_total": 1000, "pgmajfault_total": 10, "pswpin_total": 7, "pswpout_total": 9,
            "pgscan_kswapd_total": 0 + 200 + 3000 + 0, "pgscan_direct_total": 0 + 10 + 90 + 0,
            "pgsteal_kswapd_total": 0 + 100 + 2000 + 0, "pgsteal_direct_total": 0 + 5 + 50 + 0,
            "workingset_refault_file_total": 321}
    for n, w in want.items():
        exact(n, row["vmstat/" + n], w)
    nan("oom_kill_total", row["vmstat/oom_kill_total"])
    nan("workingset_refault_anon_total", row["vmstat/workingset_refault_anon_total"])
    tree.apply("v2")
    row, now = take(s)
    exact("pgscan_kswapd_total", row["vmstat/pgscan_kswapd_total"], 200 + 3500)
    exact("workingset_refault_file_total", row["vmstat/workingset_refault_file_total"], 330)
    check_rate("pgfault_per_second", row["vmstat/pgfault_per_second"], 600, prev, now)
    check_rate("pgmajfault_per_second", row["vmstat/pgmajfault_per_second"], 3, prev, now)
    nan("oom_kill_total", row["vmstat/oom_kill_total"])


def test_vmstat_psutil_backend_says_native_only():
    s = sysprof.Sampler(backend="psutil", **dict(OFF, vmstat=True))
    assert s.channels == ()
    assert s.errors["vmstat"] == "only on the native backend"
