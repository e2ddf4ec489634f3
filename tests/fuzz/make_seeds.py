#!/usr/bin/env python3
"""Writes the seed corpora tests/fuzz/corpus/<target>/ and dictionaries tests/fuzz/dict/<target>.dict.

Seeds come from three places: the fixture trees under tests/fixtures/ (reading 1 = v1, reading 2 = v2,
and v1+v2 then v3), this machine's own /proc and cgroup files (two reads 50 ms apart; --no-live to
skip), and hand-written files in the formats of other kernels (proc.rst, iostats.rst, psi.rst,
cgroup-v2.rst). Each is then varied into the edge shapes: empty, no trailing newline, NUL bytes, a
5000-byte line, numbers of 2^64-1, 2^64 and 400 digits, 2^63-1 in the second reading, negative numbers,
a field missing, extra fields, and a second reading that goes backwards, shrinks or grows.

Input format (see harness.cpp): sections ">1 PATH" / ">2 PATH", content up to the newline before the
next header. The corpus is committed; rerun this only to refresh it (it rewrites the directories).
"""
import argparse
import re
import shutil
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures"
CG = "sys/fs/cgroup/fuzz/"
ONLINE = "sys/devices/system/cpu/online"

# target -> (main file, path patterns of the files it takes; '#' digits, '*' a name)
TARGETS = {
    "cpu": ("proc/stat", ["proc/stat"]),
    "per_cpu": ("proc/stat", ["proc/stat", "sys/devices/system/cpu/possible", ONLINE]),
    "meminfo": ("proc/meminfo", ["proc/meminfo"]),
    "diskstats": ("proc/diskstats", ["proc/diskstats", "sys/block/*"]),
    "netdev": ("proc/net/dev", ["proc/net/dev"]),
    "loadavg": ("proc/loadavg", ["proc/loadavg"]),
    "process": ("proc/self/stat", ["proc/self/stat", ONLINE]),
    "process_tree": ("proc/self/stat", ["proc/self/stat", "proc/#/stat", "proc/#/task/#/children", "proc/#/smaps_rollup",
                                        ONLINE]),
    "pressure": ("proc/pressure/cpu", ["proc/pressure/cpu", "proc/pressure/memory", "proc/pressure/io"]),
    "cgroup_memory": (CG + "memory.current", [CG + "memory.current", CG + "memory.max", CG + "memory.stat"]),
    "cgroup_cpu": (CG + "cpu.stat", [CG + "cpu.stat", CG + "cpu.max", ONLINE]),
    "cgroup_io": (CG + "io.stat", [CG + "io.stat"]),
    "vmstat": ("proc/vmstat", ["proc/vmstat"]),
}


def allowed(target, path):
    for pat in TARGETS[target][1]:
        rx = re.escape(pat).replace("\\#", "[0-9]{1,7}").replace("\\*", "[A-Za-z0-9!._:-]{1,32}")
        if re.fullmatch(rx, path):
            return True
    return False


def encode(r1, r2):
    """r1, r2: {path: bytes}. Returns the input bytes."""
    out = []
    for n, files in ((1, r1), (2, r2)):
        for path, data in files.items():
            out.append(b">%d %s\n" % (n, path.encode()) + data)
    return b"\n".join(out)


# ---------------------------------------------------------------------------------------------------
# sources of readings

def fixture_tree(d):
    """{path relative to the scenario version: bytes} (cgroup dirs mapped onto the harness's)."""
    files = {}
    for p in sorted(d.rglob("*")):
        if p.is_dir():
            continue
        rel = p.relative_to(d).as_posix()
        if rel.startswith("sys/block/"):
            files[rel] = b""  # a symlink in the fixture: only its existence matters
            continue
        m = re.match(r"sys/fs/cgroup/(?:unified/)?(?:[^/]+/)*([^/]+\.(?:current|max|stat))$", rel)
        if m:
            rel = CG + m.group(1)
        files[rel] = p.read_bytes()
    if "proc/self/stat" not in files and "proc/100/stat" in files:  # process_tree: root pid 100
        files["proc/self/stat"] = files["proc/100/stat"]
    return files


def fixture_pairs():
    for scen in sorted(FIXTURES.iterdir()):
        vs = sorted(v for v in scen.iterdir() if v.is_dir()) if scen.is_dir() else []
        if not vs:
            continue
        trees = [fixture_tree(v) for v in vs]
        base = dict(trees[0])
        yield f"fx_{scen.name}", base, trees[1] if len(trees) > 1 else {}
        for k in range(2, len(trees)):
            base = {**base, **trees[k - 1]}
            yield f"fx_{scen.name}_v{k + 1}", base, trees[k]


def live_pairs():
    cg = Path("/sys/fs/cgroup")
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            p = line[3:].lstrip("/")
            cg = cg / p if (cg / "cgroup.controllers").exists() else cg / "unified" / p
    paths = {"proc/stat": "/proc/stat", "proc/meminfo": "/proc/meminfo", "proc/diskstats": "/proc/diskstats",
             "proc/net/dev": "/proc/net/dev", "proc/loadavg": "/proc/loadavg", "proc/vmstat": "/proc/vmstat",
             "proc/self/stat": "/proc/self/stat",
             "sys/devices/system/cpu/possible": "/sys/devices/system/cpu/possible", ONLINE: "/sys/" + ONLINE[4:]}
    for r in ("cpu", "memory", "io"):
        paths[f"proc/pressure/{r}"] = f"/proc/pressure/{r}"
    for f in ("memory.current", "memory.max", "memory.stat", "cpu.stat", "cpu.max", "io.stat"):
        paths[CG + f] = str(cg / f)

    def read():
        out = {}
        for rel, real in paths.items():
            try:
                out[rel] = Path(real).read_bytes()
            except OSError:
                pass
        if "proc/stat" in out:  # the intr and softirq lines hold hundreds of numbers no parser reads
            out["proc/stat"] = b"".join(l if l.startswith(b"cpu") else b" ".join(l.split(b" ")[:6]) + b"\n"
                                        for l in out["proc/stat"].splitlines(True))
        for b in sorted(Path("/sys/block").iterdir()) if Path("/sys/block").is_dir() else []:
            out["sys/block/" + b.name] = b""
        return out

    a = read()
    sum(i * i for i in range(300000))  # some CPU time between the reads
    time.sleep(0.05)
    b = read()
    yield "live", a, {k: v for k, v in b.items() if not k.startswith("sys/")}


# Hand-written files in the formats of other kernels (Documentation/filesystems/proc.rst,
# admin-guide/iostats.rst, accounting/psi.rst, admin-guide/cgroup-v2.rst).
HAND = {
    "cpu": {
        "k2.6.24_fields9": ({"proc/stat": b"cpu  100 2 30 400 5 6 7 8 9\ncpu0 100 2 30 400 5 6 7 8 9\nintr 1 2\nctxt 5\n"},
                            {"proc/stat": b"cpu  150 2 40 450 5 6 7 8 19\ncpu0 150 2 40 450 5 6 7 8 19\nintr 1 2\nctxt 9\n"}),
        "guest_only_moves": ({"proc/stat": b"cpu  10 0 0 10 0 0 0 0 0 0\n"},
                             {"proc/stat": b"cpu  10 0 0 10 0 0 0 0 500 500\n"}),
        "u64_wrap_issue9": ({"proc/stat": b"cpu 0 0 0 0\n"}, {"proc/stat": b"cpu 18446744073709551615 2 0 0\n"}),
        "no_aggregate": ({"proc/stat": b"cpu0 1 2 3 4\nintr 5\n"}, {}),
        "aggregate_twice": ({"proc/stat": b"cpu 1 2 3 4\ncpu 9 9 9 9\n"}, {"proc/stat": b"cpu 2 2 3 4\ncpu 1 1 1 1\n"}),
    },
    "per_cpu": {
        "offline_cpu1": ({"proc/stat": b"cpu 10 0 10 100\ncpu0 5 0 5 50\ncpu1 5 0 5 50\n",
                          "sys/devices/system/cpu/possible": b"0-3\n", ONLINE: b"0-1\n"},
                         {"proc/stat": b"cpu 20 0 20 200\ncpu0 15 0 15 100\n", ONLINE: b"0\n"}),
        "huge_id": ({"proc/stat": b"cpu 1 1 1 1\ncpu1048576 1 1 1 1\ncpu99999999999 1 1 1 1\n",
                     "sys/devices/system/cpu/possible": b"0,1048575-1048576,7-3\n"}, {}),
        "possible_list_odd": ({"proc/stat": b"cpu 1 1 1 1\ncpu0 1 1 1 1\n",
                               "sys/devices/system/cpu/possible": b"0-,3,,-5,18446744073709551615-1"}, {}),
    },
    "meminfo": {
        "k2.4_header_lines": ({"proc/meminfo": b"        total:    used:    free:  shared: buffers:  cached:\n"
                                               b"Mem:  1055760384 1041887232 13873152        0 100417536 711233536\n"
                                               b"Swap: 2146787328 164392960 1982394368\n"
                                               b"MemTotal:      1031016 kB\nMemFree:         13548 kB\nMemShared:           0 kB\n"
                                               b"Buffers:         98064 kB\nCached:         692320 kB\nSwapTotal:     2096472 kB\n"
                                               b"SwapFree:      1935932 kB\n"}, {}),
        "free_above_total": ({"proc/meminfo": b"MemTotal: 1000 kB\nMemFree: 5000 kB\nMemAvailable: 18446744073709551615 kB\n"
                                              b"SwapTotal: 10 kB\nSwapFree: 20 kB\n"}, {}),
        "no_unit_and_mB": ({"proc/meminfo": b"MemTotal: 1000\nMemFree: 500 mB\nHugePages_Total: 0\n"}, {}),
    },
    "diskstats": {
        "k2.6_partition7_and_disk14": (
            {"proc/diskstats": b"   3    0 hda 446216 784926 9550688 4382310 424847 312726 5922052 19310380 0 3376340 23705160\n"
                               b"   3    1 hda1 35486 38030 38030 38030\n", "sys/block/hda": b""},
            {"proc/diskstats": b"   3    0 hda 446316 784926 9551688 4382410 424947 312726 5923052 19310480 0 3376440 23705260\n"
                               b"   3    1 hda1 35586 38130 38130 38130\n"}),
        "k5.5_fields20_discard_flush": (
            {"proc/diskstats": b" 259 0 nvme0n1 100 0 800 10 200 0 1600 20 0 30 40 5 0 80 1 7 2\n", "sys/block/nvme0n1": b""},
            {"proc/diskstats": b" 259 0 nvme0n1 4294967295 0 4294967295 10 200 0 1600 20 0 18446744073709551615 40 5 0 80 1 7 2\n"}),
        "io_ticks_burst": (
            {"proc/diskstats": b" 8 0 sda 1 0 8 1 1 0 8 1 0 0 2\n", "sys/block/sda": b""},
            {"proc/diskstats": b" 8 0 sda 1 0 8 1 1 0 8 1 0 4000000000 2\n"}),
        "slash_name": ({"proc/diskstats": b" 104 0 cciss/c0d0 1 0 8 1 1 0 8 1 0 1 2\n", "sys/block/cciss!c0d0": b""}, {}),
    },
    "netdev": {
        "old_no_blank": ({"proc/net/dev": b"Inter-|   Receive                                                |  Transmit\n"
                                           b" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"
                                           b"  eth0:4294967295 3000 0 0 0 0 0 0 12345678901 2000 0 0 0 0 0 0\n"
                                           b"verylongname0:1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"},
                         {"proc/net/dev": b"  eth0:5 3001 0 0 0 0 0 0 12345678902 2001 0 0 0 0 0 0\n"
                                           b"verylongname0:0 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"}),
        "alias_colon": ({"proc/net/dev": b"eth0:1: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"}, {}),
    },
    "loadavg": {
        "plain": ({"proc/loadavg": b"0.52 2.72 11.07 3/1234 5678\n"}, {"proc/loadavg": b"1024.00 99999.99 0.00 100000/1 1\n"}),
        "no_slash": ({"proc/loadavg": b"0.1 0.2 0.3 4 5\n"}, {}),
        "exp_and_sign": ({"proc/loadavg": b"1e308 -0.5 +1.0 1/1 1\n"}, {}),
    },
    "process": {
        "zombie": ({"proc/self/stat": b"77 (z) Z 1 77 77 0 -1 0 0 0 0 0 5 5 0 0 20 0 1 0 100 0 0 18446744073709551615 0\n"}, {}),
        "neg_threads_issue9": ({"proc/self/stat": b"77 (p) R 1 77 77 0 -1 0 0 0 0 0 5 5 0 0 20 0 -5 0 100 4096 10 1 0\n"}, {}),
        "ticks_huge_issue9": ({"proc/self/stat": b"77 (p) R 1 77 77 0 -1 0 0 0 0 0 5 5 0 0 20 0 1 0 100 4096 10 1 0\n"},
                              {"proc/self/stat": b"77 (p) R 1 77 77 0 -1 0 0 0 0 0 92233720368 5 0 0 20 0 1 0 100 4096 10 1 0\n"}),
        "comm_with_parens_newline": ({"proc/self/stat": b"77 (a)\n(b) ) S 1 77 77 0 -1 0 0 0 0 0 5 5 0 0 20 0 1 0 100 4096 10 1 0\n"}, {}),
        "rss_negative": ({"proc/self/stat": b"77 (p) R 1 77 77 0 -1 0 0 0 0 0 5 5 0 0 20 0 1 0 100 4096 -10 1 0\n"}, {}),
    },
    "process_tree": {
        "threads_sum_overflow": (
            {"proc/self/stat": b"10 (r) S 1 10 10 0 -1 0 0 0 0 0 1 1 0 0 20 0 9223372036854775807 0 1 4096 1 1\n",
             "proc/10/stat": b"10 (r) S 1 10 10 0 -1 0 0 0 0 0 1 1 0 0 20 0 9223372036854775807 0 1 4096 1 1\n",
             "proc/10/task/10/children": b"11 ",
             "proc/11/stat": b"11 (c) S 10 10 10 0 -1 0 0 0 0 0 1 1 0 0 20 0 9223372036854775807 0 1 4096 1 1\n",
             "proc/11/task/11/children": b""},
            {"proc/11/stat": b"11 (c) S 10 10 10 0 -1 0 0 0 0 0 184467440737 1 0 0 20 0 -9 0 1 4096 18446744073709551615 1\n"}),
        "cycle_and_self_child": (
            {"proc/self/stat": b"10 (r) S 1 10 10 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 1 4096 1 1\n",
             "proc/10/stat": b"10 (r) S 1 10 10 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 1 4096 1 1\n",
             "proc/10/task/10/children": b"10 11 11 -3 0 ", "proc/11/stat": b"11 (c) S 10 10 10 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 1 4096 1 1\n",
             "proc/11/task/11/children": b"10 "}, {}),
        "scan_mode_no_children_files": (
            {"proc/self/stat": b"10 (r) S 1 10 10 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 1 4096 1 1\n",
             "proc/10/stat": b"10 (r) S 1 10 10 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 1 4096 1 1\n",
             "proc/12/stat": b"12 (c) S 10 10 10 0 -1 0 0 0 0 0 1 1 0 0 20 0 2 0 1 4096 3 1\n"},
            {"proc/12/stat": b"12 (c) S 10 10 10 0 -1 0 0 0 0 0 100 1 0 0 20 0 2 0 1 4096 3 1\n"}),
    },
    "pressure": {
        "avg_250_issue9": ({"proc/pressure/cpu": b"some avg10=250.00 avg60=0.00 avg300=0.00 total=0\n"}, {}),
        "total_near_2p63_issue9": (
            {"proc/pressure/io": b"some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"},
            {"proc/pressure/io": b"some avg10=0.00 avg60=0.00 avg300=0.00 total=9223372036854775807\n"
                                 b"full avg10=0.00 avg60=0.00 avg300=0.00 total=18446744073709551615\n"}),
        "extra_key_and_order": ({"proc/pressure/memory": b"some total=5 avg300=1.00 avg60=2.00 avg10=3.00 new=7\n"
                                                         b"full avg10=0.00 avg60=0.00 avg300=0.00 total=2\n"}, {}),
        "cpu_pre5.13_no_full": ({"proc/pressure/cpu": b"some avg10=1.00 avg60=2.00 avg300=3.00 total=100\n"},
                                {"proc/pressure/cpu": b"some avg10=1.00 avg60=2.00 avg300=3.00 total=20100\n"}),
    },
    "cgroup_memory": {
        "max_and_stat": ({CG + "memory.current": b"123456789\n", CG + "memory.max": b"max\n",
                          CG + "memory.stat": b"anon 1000\nfile 2000\nkernel 5\nsock 0\n"},
                         {CG + "memory.current": b"1" + b"0" * 400 + b"\n", CG + "memory.max": b"-1\n"}),
        "stat_keys_reordered": ({CG + "memory.stat": b"file_mapped 3\nfile 7\nanon_thp 0\nanon 9\n"}, {}),
    },
    "cgroup_cpu": {
        "k5.14_burst_keys": ({CG + "cpu.stat": b"usage_usec 100\nuser_usec 60\nsystem_usec 40\nnr_periods 3\nnr_throttled 1\n"
                                               b"throttled_usec 7\nnr_bursts 0\nburst_usec 0\n",
                              CG + "cpu.max": b"150000 100000\n"},
                             {CG + "cpu.stat": b"usage_usec 9223372036854775807\nuser_usec 60\nsystem_usec 40\nnr_periods 3\n"
                                               b"nr_throttled 1\nthrottled_usec 7\n", CG + "cpu.max": b"max 100000\n"}),
        "usage_burst_348pct": ({CG + "cpu.stat": b"usage_usec 0\nuser_usec 0\nsystem_usec 0\n", ONLINE: b"0-1\n"},
                               {CG + "cpu.stat": b"usage_usec 87000\nuser_usec 87000\nsystem_usec 0\n"}),
        "max_zero_period": ({CG + "cpu.max": b"100 0\n", CG + "cpu.stat": b"usage_usec 1\n"}, {}),
    },
    "cgroup_io": {
        "iocost_keys": ({CG + "io.stat": b"8:0 rbytes=1000 wbytes=2000 rios=1 wios=2 dbytes=0 dios=0 cost.vrate=135.00 "
                                         b"cost.usage=1 cost.wait=0 cost.indebt=0 cost.indelay=0\n"
                                         b"253:0 rbytes=10 wbytes=20 rios=1 wios=1 dbytes=0 dios=0\n"},
                        {CG + "io.stat": b"8:0 rbytes=1500 wbytes=2500 rios=1 wios=2 dbytes=0 dios=0\n"}),
        "sum_overflow": ({CG + "io.stat": b"8:0 rbytes=18446744073709551615 wbytes=1\n8:16 rbytes=18446744073709551615 wbytes=1\n"}, {}),
        "empty_then_io": ({CG + "io.stat": b""}, {CG + "io.stat": b"8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n"}),
    },
    "vmstat": {  # mm/vmstat.c: per-zone reclaim keys before 4.8, one workingset_refault before 5.9
        "k4.4_zoned": ({"proc/vmstat": b"pgfault 10\npgmajfault 1\npgscan_kswapd_dma32 5\npgscan_kswapd_normal 7\n"
                                       b"pgscan_direct_throttle 3\npgsteal_direct_normal 2\nworkingset_refault 9\n"},
                       {"proc/vmstat": b"pgfault 20\npgmajfault 1\npgscan_kswapd_dma32 4\npgscan_kswapd_normal 9\n"
                                       b"pgsteal_direct_normal 2\nworkingset_refault 11\n"}),
        "zone_sum_overflow": ({"proc/vmstat": b"pgscan_kswapd_normal 18446744073709551615\npgscan_kswapd_movable 1\n"
                                              b"pgfault 18446744073709551615\n"},
                              {"proc/vmstat": b"pgscan_kswapd_normal 0\npgfault 0\n"}),
        "keys_come_and_go": ({"proc/vmstat": b"pgfault 100\noom_kill 1\nworkingset_refault_anon 2\n"},
                             {"proc/vmstat": b"pgmajfault 3\noom_kill x\nworkingset_refault_file 4\npgfault\n"}),
    },
}


# ---------------------------------------------------------------------------------------------------
# edge shapes

NUM = re.compile(rb"(?<![A-Za-z0-9_.])\d+")


def sub_numbers(data, fn):
    return NUM.sub(lambda m: fn(m.group(0)), data)


def drop_last_field(data):
    return b"\n".join(l.rsplit(None, 1)[0] if len(l.split()) > 1 else l for l in data.split(b"\n"))


def variants(r1, r2):
    """(suffix, r1, r2) edge shapes of a seed, applied to every file that has content."""
    big = lambda _: b"18446744073709551616"
    def each(files, fn):
        return {p: (fn(d) if d else d) for p, d in files.items()}
    r2full = {**r1, **r2}
    yield "empty", {p: b"" for p in r1}, r2full
    yield "empty2", r1, {p: b"" for p in r1}
    yield "no_newline", each(r1, lambda d: d.rstrip(b"\n")), each(r2, lambda d: d.rstrip(b"\n"))
    yield "nul", each(r1, lambda d: d[: len(d) // 2] + b"\0" + d[len(d) // 2:]), each(r2full, lambda d: d.replace(b"1", b"\0", 3))
    main = next(iter(r1), None)
    yield "line5000", {**r1, main: r1[main] + b"x" * 2500 + b" 1" * 1250 + b"\n"}, {}
    yield "u64max", r1, each(r2full, lambda d: sub_numbers(d, lambda _: b"18446744073709551615"))
    yield "ge2p64", each(r1, lambda d: sub_numbers(d, big)), r2
    yield "i64max", r1, each(r2full, lambda d: sub_numbers(d, lambda _: b"9223372036854775807"))
    yield "digits400", r1, each(r2full, lambda d: NUM.sub(lambda _: b"9" * 400, d, count=2))
    yield "negative", each(r1, lambda d: sub_numbers(d, lambda n: b"-" + n)), r2
    yield "missing_field", each(r1, drop_last_field), each(r2full, drop_last_field)
    yield "extra_fields", each(r1, lambda d: d.replace(b"\n", b" 7 8 9 10 11 12 13\n")), r2
    yield "backwards", r1, each(r2full, lambda d: sub_numbers(d, lambda n: str(int(n) // 3).encode()))
    yield "shrink", r1, each(r2full, lambda d: b"\n".join(d.split(b"\n")[: max(1, d.count(b"\n") // 2)]) + b"\n")
    yield "grow", r1, each(r2full, lambda d: d + sub_numbers(d, lambda n: str(int(n) * 7 + 1).encode()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-live", action="store_true", help="leave out this machine's files")
    ap.add_argument("--only", nargs="+", choices=sorted(TARGETS), help="rewrite these targets' seeds only")
    args = ap.parse_args()
    pairs = list(fixture_pairs()) + ([] if args.no_live else list(live_pairs()))
    total = 0
    for target in args.only or TARGETS:
        out = HERE / "corpus" / target
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        main_file = TARGETS[target][0]
        seeds = []
        for name, a, b in pairs:
            r1 = {p: d for p, d in a.items() if allowed(target, p)}
            r2 = {p: d for p, d in b.items() if allowed(target, p) and not p.startswith("sys/block/")}
            if main_file in r1:  # the fixtures and files that are about this target
                seeds.append((name, r1, r2))
        for name, (r1, r2) in HAND.get(target, {}).items():
            seeds.append(("hand_" + name, r1, r2))
        # edge shapes of the live reading and of the smallest fixture (the rest add only size)
        fx = sorted((s for s in seeds if s[0].startswith("fx_")), key=lambda s: sum(map(len, s[1].values())))[:1]
        for name, r1, r2 in [s for s in seeds if s[0] == "live"] + fx:
                for suffix, v1, v2 in variants(r1, r2):
                    if suffix == "line5000" and name != "live" and len(fx) > 1 and name != fx[0][0]:
                        continue  # one long-line seed per target is enough
                    seeds.append((f"{name}__{suffix}", v1, v2))
        seeds.append(("raw_headerless", {}, {}))
        for name, r1, r2 in seeds:
            data = encode(r1, r2) if (r1 or r2) else b"cpu 1 2 3 4\n"
            (out / name).write_bytes(data)
            total += len(data)
        d = HERE / "dict"
        d.mkdir(exist_ok=True)
        words = [f">1 {p}\n" for p in TARGETS[target][1] if "#" not in p and "*" not in p]
        words += [f">2 {p}\n" for p in TARGETS[target][1] if "#" not in p and "*" not in p]
        words += ["\n>2 proc/", "18446744073709551615", "18446744073709551616", "9223372036854775807", "4294967295", "max", "-1"]
        esc = lambda w: "".join(c if " " <= c <= "~" and c not in '"\\' else "\\x%02x" % ord(c) for c in w)
        (d / f"{target}.dict").write_text("".join(f'"{esc(w)}"\n' for w in words))
    print(f"wrote {total} bytes of seeds under {HERE / 'corpus'}")


if __name__ == "__main__":
    main()
