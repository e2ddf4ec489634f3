"""Exact-value tests of the native Sampler against hand-written /proc and /sys trees: load (/proc/loadavg),
process (/proc/<pid>/stat), the "full" tree of every source together, and process_tree.

The method and the helpers are those of tests/test_sampler_fixtures.py (see its docstring).
"""

import math
import time
from pathlib import Path

import numpy as np
import pytest

import sysprof
from test_sampler_fixtures import (
    CLK_TCK,
    FIXTURES,
    LOAD_CHANNELS,
    MEM_CHANNELS,
    OFF,
    PAGE,
    PROCESS_CHANNELS,
    REL,
    Tree,
    check_error,
    check_rate,
    exact,
    nan,
    open_sampler,
    take,
)


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
TREE_TOTALS = (
    "process_tree/num_processes",
    "process_tree/rss_bytes",
    "process_tree/cpu_percent",
    "process_tree/cpu_seconds_total",
    "process_tree/num_threads",
    "process_tree/pss_bytes",
    "process_tree/uss_bytes",
    "process_tree/num_unslotted",
    "process_tree/run_delay_seconds_total",
    "process_tree/run_delay_seconds_per_second",
    "process_tree/procs_blocked",
    "process_tree/procs_sleeping",
    "process_tree/majflt_total",
    "process_tree/majflt_per_second",
)
SLOT_FIELDS = ("pid", "rss_bytes", "pss_bytes", "uss_bytes", "cpu_percent", "cpu_seconds_total", "num_threads")
# the totals, then 8 slots (process_tree_slots' default)
TREE_CHANNELS = TREE_TOTALS + tuple(f"process_tree/{k}/{f}" for k in range(8) for f in SLOT_FIELDS)


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
    # smaps_rollup: Pss 2000 + 3000 + 5000 + 9000 kB, Private_Clean + Private_Dirty 1000 + 2000 + 4000 + 8000 kB
    exact("pss_bytes", row["process_tree/pss_bytes"], (2000 + 3000 + 5000 + 9000) * 1024.0)
    exact("uss_bytes", row["process_tree/uss_bytes"], (1000 + 2000 + 4000 + 8000) * 1024.0)
    # run delay: each thread's first reading (construction) is its baseline; no member is in state D
    exact("run_delay_seconds_total", row["process_tree/run_delay_seconds_total"], 0.0)
    exact("procs_blocked", row["process_tree/procs_blocked"], 0.0)
    exact("procs_sleeping", row["process_tree/procs_sleeping"], 2.0)  # 100 and 103 (101, 102 run)
    exact("majflt_total", row["process_tree/majflt_total"], 0.0)
    # slot 0: the root; then the members in the order found (breadth first from children files; a /proc scan
    # goes in directory order)
    pids = [row[f"process_tree/{k}/pid"] for k in range(4)]
    assert pids[0] == 100.0 and sorted(pids[1:]) == [101.0, 102.0, 103.0], pids
    k = pids.index(103.0)
    exact("k/rss_bytes", row[f"process_tree/{k}/rss_bytes"], 4000.0 * PAGE)
    exact("k/pss_bytes", row[f"process_tree/{k}/pss_bytes"], 9000 * 1024.0)
    exact("k/cpu_seconds_total", row[f"process_tree/{k}/cpu_seconds_total"], 440 / CLK_TCK)
    exact("k/num_threads", row[f"process_tree/{k}/num_threads"], 5.0)
    for c in TREE_CHANNELS[len(TREE_TOTALS) + 4 * len(SLOT_FIELDS):]:
        nan(c, row[c])  # slots 4-7: no member
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
    # schedstat's run delay: 100's threads 100 and 105 +0.1 and +0.2 s, 101 +0.3, 102 +0.4, 103 +0.5: 1.5 s (200's
    # +5 s is outside); the rate at most the tree's 2 + 3 + 4 + 5 threads. 102 is in state D: one blocked.
    exact("run_delay_seconds_total", row["process_tree/run_delay_seconds_total"], 1.5)
    check_rate("process_tree/run_delay_seconds_per_second", row["process_tree/run_delay_seconds_per_second"], 1.5,
               v1, now, cap=14.0)
    exact("procs_blocked", row["process_tree/procs_blocked"], 1.0)
    exact("procs_sleeping", row["process_tree/procs_sleeping"], 2.0)
    # major faults: 101 +7, 103 +5 (each member's first reading its baseline)
    exact("majflt_total", row["process_tree/majflt_total"], 12.0)
    check_rate("process_tree/majflt_per_second", row["process_tree/majflt_per_second"], 12.0, v1, now)

    # v3: 103 has exited (101's children file no longer lists it) and 101 used 5 more ticks. The
    # stat file still reads (a fixture file does not vanish as /proc does): only discovery, at most
    # every 100 ms, drops it.
    tree.apply("v3")
    time.sleep(0.15)
    row3, now3 = take(s)
    # the rate sums per-member deltas: 101's +5 ticks (103, listed or not, did not move), never negative
    check_rate("process_tree/cpu_percent", row3["process_tree/cpu_percent"], 100 * 5 / CLK_TCK, now, now3)
    # A discovery reads a few files per tick; on a loaded machine the v2 read may have started one that
    # this read completes with v2's children files, and the next starts 100 ms after it. Read until a
    # discovery over v3 has completed (bounded), then check that row exactly.
    for _ in range(20):
        if row3["process_tree/num_processes"] != 4.0:
            break
        time.sleep(0.12)
        row3, _ = take(s)
    exact("num_processes", row3["process_tree/num_processes"], 3.0)
    exact("rss_bytes", row3["process_tree/rss_bytes"], float((1000 + 2000 + 3000) * PAGE))
    exact("num_threads", row3["process_tree/num_threads"], 9.0)
    # the total is over the live members, so it drops by 103's 480 ticks
    exact("cpu_seconds_total", row3["process_tree/cpu_seconds_total"], (160 + 245 + 360) / CLK_TCK)
    # the run delay only grows: 101's thread +0.05 s; 103's thread, gone with it, takes nothing away
    exact("run_delay_seconds_total", row3["process_tree/run_delay_seconds_total"], 1.55)
    exact("majflt_total", row3["process_tree/majflt_total"], 14.0)  # 101 +2; 103's 5 stay


def test_process_tree_scans_stat_without_children_files(tmp_path):
    tree = Tree("process_tree", tmp_path)
    for f in list(Path(tree.proc).rglob("children")):
        f.unlink()
    s, built = open_sampler(tree, process_tree=True, pid=100)
    check_error(s, "process_tree")
    assert "CONFIG_PROC_CHILDREN" in s.errors["process_tree"]
    v1 = _tree_v1_checks(s)
    tree.apply("v2")  # the scan lists the threads too: the same run delay as from the children files
    row, now = take(s)
    exact("run_delay_seconds_total", row["process_tree/run_delay_seconds_total"], 1.5)
    check_rate("process_tree/run_delay_seconds_per_second", row["process_tree/run_delay_seconds_per_second"], 1.5,
               v1, now, cap=14.0)


@pytest.mark.parametrize("content, why", [(None, "No such file"), ("0 0 0\n", "all zero")])
def test_process_tree_run_delay_without_schedstat_reads_nan(tmp_path, content, why):
    # no schedstat files (a kernel without CONFIG_SCHED_INFO), or "0 0 0" (one that counts nothing): the run
    # delay reads NaN, with one errors entry; the rest of the tree is read as before
    tree = Tree("process_tree", tmp_path)
    for f in list(Path(tree.proc).rglob("schedstat")):
        if content is None:
            f.unlink()
        else:
            f.write_text(content)
    s, _ = open_sampler(tree, process_tree=True, pid=100)
    check_error(s, "process_tree")
    assert why in s.errors["process_tree"] and "run delay" in s.errors["process_tree"], s.errors
    row, _ = take(s)
    nan("run_delay_seconds_total", row["process_tree/run_delay_seconds_total"])
    nan("run_delay_seconds_per_second", row["process_tree/run_delay_seconds_per_second"])
    exact("num_processes", row["process_tree/num_processes"], 4.0)
    exact("procs_blocked", row["process_tree/procs_blocked"], 0.0)


def test_process_tree_run_delay_is_bounded_by_the_time_followed(tmp_path):
    # a corrupt run delay (2^64-1 ns) adds no more than a thread could have waited: the time since its first
    # reading plus 1 s for a wait under way then; the rate at most the tree's 14 threads
    tree = Tree("process_tree", tmp_path)
    s, (t0, _) = open_sampler(tree, process_tree=True, pid=100)
    tree.write("101/task/101/schedstat", "1 18446744073709551615 1\n")
    row, (_, t1) = take(s)
    total = row["process_tree/run_delay_seconds_total"]
    assert 1.0 <= total <= (t1 - t0) + 1.0 + 1e-9, (total, t1 - t0)
    assert 0 < row["process_tree/run_delay_seconds_per_second"] <= 14.0


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
