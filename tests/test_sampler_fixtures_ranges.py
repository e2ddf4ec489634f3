"""Exact-value tests of the native Sampler against hand-written /proc and /sys trees: out-of-range file
contents, files that never end or are not files, and the psutil backend's clamps.

The method and the helpers are those of tests/test_sampler_fixtures.py (see its docstring).
"""

import os
from pathlib import Path

import sysprof
from test_sampler_fixtures import (
    CLK_TCK,
    FIXTURES,
    LOAD_CHANNELS,
    MEM_CHANNELS,
    OFF,
    PAGE,
    Tree,
    _last_window,
    check_error,
    check_rate,
    devices,
    exact,
    nan,
    open_sampler,
    take,
)
from test_sampler_fixtures_process import ALL, check_others  # the "full" tree's


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
