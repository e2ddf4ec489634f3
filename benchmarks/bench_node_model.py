#!/usr/bin/env python3
"""Benchmark section: what the default sources cost the kernel here, and on a large node (issue 28).

    python benchmarks/bench_node_model.py [--quick] [--cpus 224 --irqs 2000 --disks 16 --nics 16]

sysprof's own parsing does not grow with the node (it stops after the aggregate `cpu` line, skips unchanged and
left-out device lines), but the kernel renders every file whole on every read: /proc/stat ten numbers per CPU and
an `intr` line over every IRQ (bench_kstat.py, docs/kernel-proc-stat.md), /proc/diskstats a line per block device
(partitions and loop devices too), each a sum of that device's per-CPU counters, /proc/net/dev a line per
interface, each the driver's sum over its queues. This section measures here, with one C loop reading the files
alternately (bench_kstat's probe), the fixed cost of a read (a trivial /proc and a trivial sysfs file) and the cost
per line of each file, both ways of reading the kept disks (/proc/diskstats or each disk's /sys/block/<disk>/stat:
csrc/sources/diskstats.cpp picks the cheaper at open), the root cgroup's cpu.stat beside /proc/stat, and the disk
source through sysprof itself both ways. From those it models a node (default: 224 CPUs, 2,000 IRQs, 16 NVMe disks
with a partition each and 8 loop devices, 16 NICs) at the defaults, old (every source at the interval) and new
(cpu at max(interval, 1/USER_HZ)), with and without a CPU budget of 0.05 core (BUDGET_MODEL below).

What is modelled, not measured (this machine has 2 CPUs): the per-CPU work of each device line, as cache lines
per CPU (LINES_PER_DISK_CPU, LINES_PER_QUEUE) at LINE_NS each, and /proc/stat's model from bench_kstat.
"""
from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
if os.path.dirname(HERE) not in sys.path:  # sysprof.sampling.devices (pure Python) from the checkout
    sys.path.append(os.path.dirname(HERE))

from bench_kstat import Probe, bench_kstat, machine_shape  # noqa: E402
from bench_util import NO_SOURCES, _raw_sample, _time_calls, dist, fmt, table  # noqa: E402

# struct disk_stats (include/linux/part_stat.h: nsecs, sectors, ios, merges per group, io_ticks, in_flight[2]) is
# ~152 B per CPU: part_stat_read_all and the in-flight count loop over the possible CPUs and read 3 cache lines each
LINES_PER_DISK_CPU = 3
# a NIC's stats fold (mlx5e_fold_sw_stats64 and the like) reads each channel's rx and tx counters: 2 lines per
# queue, min(CPUs, MAX_QUEUES) queues (drivers with per-CPU counters loop over the possible CPUs instead)
LINES_PER_QUEUE, MAX_QUEUES = 2, 64
# meminfo sums vm_committed_as (a percpu_counter) over the online CPUs: one line each
LINES_PER_MEMINFO_CPU = 1
# effective ns per per-CPU line on the node: 2 = found in the reader's caches, read at the loop's pace; 20 = fetched
# from another core or socket, several in flight at once (the loops' loads are independent). /proc/stat's counters,
# written every tick by every CPU, use bench_kstat's own 20-100 ns instead.
LINE_NS = (2.0, 20.0)
SHORT_READ = 4096 - 512  # a record-based seq file hands out about a page per read (csrc/io/proc_file.hpp)
DISK_LINE_BYTES = 110.0  # a busy disk's diskstats line (17 statistics, 6-12 digits each); modelled
USER_HZ_S = 0.01  # cpu and per_cpu read at max(interval, 1/USER_HZ) in the new defaults
BUDGET = 0.05  # of one core
NODE = {"cpus": 224, "irqs": 2000, "disks": 16, "partitions": 16, "loops": 8, "nics": 16}
DEFAULT_SOURCES = ("cpu", "memory", "disk", "net")
BUDGET_MODEL = ("the budget stretches the costliest sources first (water-filling): each source's cost per second "
                "is capped at the level c where the capped costs sum to the budget, a capped source's interval "
                "becomes its cost per read / c rounded up to whole base intervals, the others keep theirs")


# ------------------------------------------------------------------------------------------------
# the machine here
# ------------------------------------------------------------------------------------------------

def disk_shape(diskstats: str, block: str = "/sys/block") -> Dict[str, Any]:
    """The lines of a /proc/diskstats text: whole disks (entries of `block`) kept by the default device filter,
    whole disks left out, and the other lines (partitions)."""
    from sysprof.sampling.devices import DeviceFilter

    f = DeviceFilter(None)
    whole = set(os.listdir(block)) if os.path.isdir(block) else set()
    kept, left_out, parts = [], [], []
    for ln in diskstats.splitlines():
        w = ln.split()
        if len(w) < 4:
            continue
        name = w[2]
        if name.replace("/", "!") not in whole:
            parts.append(name)
        elif f.keeps("disk", name):
            kept.append(name)
        else:
            left_out.append(name)
    return {"lines": len(kept) + len(left_out) + len(parts), "kept": kept, "left_out": left_out,
            "partitions": parts, "bytes": len(diskstats.encode())}


def cgroup2_root() -> Optional[str]:
    """The cgroup v2 hierarchy's root directory if it is mounted here (the whole hierarchy, not a namespace's)."""
    try:
        with open("/proc/self/mountinfo") as f:
            for ln in f:
                left, _, right = ln.partition(" - ")
                w = left.split()
                if right.split()[:1] == ["cgroup2"] and len(w) > 4 and w[3] == "/":
                    return w[4]
    except OSError:
        pass
    return None


def _sys(name: str) -> str:
    return name.replace("/", "!")


def measure(probe: Probe, iters: int) -> Dict[str, Any]:
    """One interleaved run of every file (up to 16), per-read ns; paired differences give the per-line costs."""
    text = open("/proc/diskstats").read()
    ds = disk_shape(text)
    with open("/proc/net/dev") as f:
        nics = max(0, len(f.read().splitlines()) - 2)
    specs: List[Tuple[str, str, int]] = [("proc fixed (/proc/version)", "/proc/version", 1)]
    any_block = (ds["kept"] + ds["left_out"])[:1]
    if any_block:
        specs.append(("sysfs fixed (/sys/block/X/ro)", f"/sys/block/{_sys(any_block[0])}/ro", 0))
    specs.append(("/proc/diskstats", "/proc/diskstats", 0))
    kept = [d for d in ds["kept"] if os.path.exists(f"/sys/block/{_sys(d)}/stat")][:6]
    specs += [(f"/sys/block/{_sys(d)}/stat", f"/sys/block/{_sys(d)}/stat", 0) for d in kept]
    idle = [d for d in ds["left_out"] if os.path.exists(f"/sys/block/{_sys(d)}/stat")][:1]
    specs += [(f"/sys/block/{_sys(d)}/stat (left out)", f"/sys/block/{_sys(d)}/stat", 0) for d in idle]
    specs += [("/proc/net/dev", "/proc/net/dev", 0), ("/proc/meminfo", "/proc/meminfo", 0),
              ("/proc/stat", "/proc/stat", 0)]
    cg = cgroup2_root()
    if cg and os.path.exists(os.path.join(cg, "cpu.stat")):
        specs.append(("root cgroup cpu.stat", os.path.join(cg, "cpu.stat"), 0))
    a, sizes = probe.run([(p, c) for _, p, c in specs], iters)
    col = {label: a[:, i] for i, (label, _, _) in enumerate(specs)}
    reads = {label: dist(col[label] / 1e3, "us") for label in col}
    fixed = col["proc fixed (/proc/version)"]
    sys_fixed = col.get("sysfs fixed (/sys/block/X/ro)")
    per = {"proc_fixed_ns": float(np.median(fixed))}
    per["disk_line_ns"] = float(np.median((col["/proc/diskstats"] - fixed) / max(1, ds["lines"])))
    if sys_fixed is not None:
        per["sys_fixed_ns"] = float(np.median(sys_fixed))
        if kept:
            per["sys_stat_ns"] = float(np.median(np.concatenate(
                [col[f"/sys/block/{_sys(d)}/stat"] - sys_fixed for d in kept])))
        if idle:
            per["sys_stat_idle_ns"] = float(np.median(col[f"/sys/block/{_sys(idle[0])}/stat (left out)"] - sys_fixed))
    per["nic_line_ns"] = float(np.median((col["/proc/net/dev"] - fixed) / max(1, nics)))
    per["meminfo_ns"] = float(np.median(col["/proc/meminfo"]))
    # the kept disks here, both ways, paired per iteration
    both = None
    if kept and len(kept) == len(ds["kept"]):
        sysfs_sum = sum(col[f"/sys/block/{_sys(d)}/stat"] for d in kept)
        both = {"diskstats_us": dist(col["/proc/diskstats"] / 1e3, "us"), "sysfs_us": dist(sysfs_sum / 1e3, "us"),
                "sysfs_over_diskstats": dist(sysfs_sum / col["/proc/diskstats"], "x")}
    if "root cgroup cpu.stat" in col:
        both_cpu = dist(col["root cgroup cpu.stat"] / col["/proc/stat"], "x")
    else:
        both_cpu = None
    return {"specs": [(label, path, sizes[i]) for i, (label, path, _) in enumerate(specs)], "reads": reads,
            "coefficients": per, "disks": ds, "kept_measured": kept, "nics": nics, "disk_both_ways": both,
            "cgroup_cpu_stat_over_proc_stat": both_cpu, "cgroup_root": cg, "iters": iters}


def sysprof_disk_both_ways(rounds: int, n: int) -> Dict[str, Any]:
    """The disk source through sysprof (native sample(), minus an empty sampler's call), each way forced with
    SYSPROF_DISK_FILES, interleaved rounds; and the cost of reading the files alone from sysprof's user side."""
    try:
        import sysprof
    except ImportError as e:
        return {"available": False, "reason": f"sysprof not importable: {e}"}
    old = os.environ.get("SYSPROF_DISK_FILES")
    samplers = {}
    try:
        for mode in ("diskstats", "sysfs"):
            os.environ["SYSPROF_DISK_FILES"] = mode
            s = sysprof.Sampler(interval=1e-3, **dict(NO_SOURCES, disk=True))
            if s.backend != "native":
                return {"available": False, "reason": "the native backend is not available"}
            samplers[mode] = s
    finally:
        if old is None:
            os.environ.pop("SYSPROF_DISK_FILES", None)
        else:
            os.environ["SYSPROF_DISK_FILES"] = old
    empty = sysprof.Sampler(interval=1e-3, **NO_SOURCES)
    raw: Dict[str, List[int]] = {"empty": [], "diskstats": [], "sysfs": []}
    fns = {"empty": _raw_sample(empty), **{m: _raw_sample(s) for m, s in samplers.items()}}
    for fn in fns.values():
        _time_calls(fn, 20)
    for _ in range(rounds):
        for k, fn in fns.items():
            raw[k] += _time_calls(fn, n)
    e = float(np.median(raw["empty"]))
    out = {m: dist((np.asarray(raw[m], dtype=np.float64) - e) / 1e3, "us") for m in ("diskstats", "sysfs")}
    return {"available": True, "channels": len(samplers["sysfs"].channels), "empty_call_us": e / 1e3, **out,
            "method": "native sample() of a disk-only Sampler minus the median of an empty one, "
                      f"{rounds} interleaved rounds of {n} calls"}


def sysprof_user_side(cfg_node: Dict[str, int], n: int) -> Dict[str, Any]:
    """sysprof's own cost per read of each default source on a synthetic tree of the node's shape (regular files:
    the parse and a page-cache read, not the kernel's rendering of /proc)."""
    try:
        import sysprof
        from synthetic_proc import make_tree
    except ImportError as e:
        return {"available": False, "reason": f"sysprof not importable: {e}"}
    tmp = tempfile.mkdtemp(prefix="sysprof-node-")
    try:
        proc, sys_ = make_tree(tmp, cpus=cfg_node["cpus"], disks=cfg_node["disks"], nics=cfg_node["nics"])
        mk = lambda **on: sysprof.Sampler(interval=1e-3, proc_root=proc, sys_root=sys_, devices=["*"],  # noqa: E731
                                          **dict(NO_SOURCES, **on))
        fns = {"empty": _raw_sample(mk()), **{src: _raw_sample(mk(**{src: True})) for src in DEFAULT_SOURCES}}
        raw: Dict[str, List[int]] = {k: [] for k in fns}
        for _ in range(3):
            for k, fn in fns.items():
                raw[k] += _time_calls(fn, n)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    e = float(np.median(raw["empty"]))
    return {"available": True, "us": {k: max(0.0, (float(np.median(raw[k])) - e) / 1e3) for k in DEFAULT_SOURCES}}


# ------------------------------------------------------------------------------------------------
# the model
# ------------------------------------------------------------------------------------------------

def node_reads(co: Dict[str, float], here_cpus: int, node: Dict[str, int], stat_us: Tuple[float, float],
               line_ns: Tuple[float, float] = LINE_NS) -> Dict[str, Tuple[float, float]]:
    """µs per read of each file on the node, (low, high): this machine's per-line costs plus the per-CPU cache
    lines the node adds (its CPUs beyond this machine's) at line_ns."""
    p, extra = node["cpus"], max(0, node["cpus"] - here_cpus)
    lines = node["disks"] + node["partitions"] + node["loops"]
    reads = max(1, math.ceil(lines * DISK_LINE_BYTES / SHORT_READ))
    q = min(p, MAX_QUEUES) - min(here_cpus, MAX_QUEUES)
    out: Dict[str, Tuple[float, float]] = {"/proc/stat": stat_us}
    pick = lambda f: tuple(f(t) / 1e3 for t in line_ns)  # noqa: E731
    out["/proc/diskstats"] = pick(lambda t: reads * co["proc_fixed_ns"] + lines * (co["disk_line_ns"]
                                                                                   + extra * LINES_PER_DISK_CPU * t))
    if "sys_stat_ns" in co:
        out["/sys/block/*/stat"] = pick(lambda t: node["disks"] * (co["sys_fixed_ns"] + co["sys_stat_ns"]
                                                                   + extra * LINES_PER_DISK_CPU * t))
    out["/proc/net/dev"] = pick(lambda t: co["proc_fixed_ns"] + node["nics"] * (co["nic_line_ns"]
                                                                                + q * LINES_PER_QUEUE * t))
    out["/proc/meminfo"] = pick(lambda t: co["meminfo_ns"] + extra * LINES_PER_MEMINFO_CPU * t)
    return out


def stretch(cost_us: Dict[str, float], period_s: Dict[str, float], base_s: float,
            budget: float = BUDGET) -> Dict[str, float]:
    """Periods under a CPU budget (a share of one core), as BUDGET_MODEL says: unchanged if the sources fit."""
    rate = {k: cost_us[k] * 1e-6 / period_s[k] for k in cost_us}  # core-seconds per second
    if sum(rate.values()) <= budget:
        return dict(period_s)
    order = sorted(rate.values())
    below, c = 0.0, order[-1]
    for i, r in enumerate(order):  # the cap: below + (n - i) * c = budget, with c between order[i-1] and order[i]
        c = (budget - below) / (len(order) - i)
        if c <= r:
            break
        below += r
    out = {}
    for k in cost_us:
        if rate[k] <= c:
            out[k] = period_s[k]
        else:
            want = cost_us[k] * 1e-6 / c
            out[k] = max(period_s[k], math.ceil(want / base_s - 1e-9) * base_s)
    return out


def tick_cost(cost_us: Dict[str, float], period_s: Dict[str, float], base_s: float) -> Dict[str, float]:
    """Mean ms per tick and % of one core of sources read every period_s, the sampler ticking every base_s."""
    per_s = sum(cost_us[k] * 1e-6 / period_s[k] for k in cost_us)
    return {"ms_per_tick": per_s * base_s * 1e3, "core_percent": 100 * per_s}


def scenarios(node_us: Dict[str, Tuple[float, float]], user_us: Dict[str, float]) -> List[Dict[str, Any]]:
    """Old and new defaults at 1 kHz and 100 Hz, low and high ends, without and with the budget."""
    rows = []
    for base in (1e-3, 1e-2):
        for defaults in ("old", "new"):
            row: Dict[str, Any] = {"interval_s": base, "defaults": defaults}
            for end in (0, 1):
                disk_files = "/proc/diskstats"
                if defaults == "new" and "/sys/block/*/stat" in node_us and \
                        node_us["/sys/block/*/stat"][end] < node_us["/proc/diskstats"][end]:
                    disk_files = "/sys/block/*/stat"
                files = {"cpu": "/proc/stat", "memory": "/proc/meminfo", "disk": disk_files, "net": "/proc/net/dev"}
                cost = {k: node_us[f][end] + user_us.get(k, 0.0) for k, f in files.items()}
                period = {k: base for k in cost}
                if defaults == "new":
                    period["cpu"] = max(base, USER_HZ_S)
                budgeted = stretch(cost, period, base)
                row[("low", "high")[end]] = {"disk_files": disk_files, "cost_us": cost, "periods_s": period,
                                             "plain": tick_cost(cost, period, base),
                                             "budget_periods_s": budgeted,
                                             "budget": tick_cost(cost, budgeted, base)}
            rows.append(row)
    return rows


def bench_node(cfg) -> Dict[str, Any]:
    quick = isinstance(cfg, dict) and cfg.get("node_quick", False)
    iters = cfg.get("node", 3000 if quick else 20_000) if isinstance(cfg, dict) else 20_000
    node = dict(NODE, **(cfg.get("node_shape", {}) if isinstance(cfg, dict) else {}))
    if not os.path.exists("/proc/diskstats"):
        return {"available": False, "reason": "no /proc/diskstats"}
    tmp = tempfile.mkdtemp(prefix="sysprof-node-")
    try:
        probe = Probe(tmp)
        if probe.error:
            return {"available": False, "reason": probe.error}
        here = measure(probe, iters)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    kstat = bench_kstat({"kstat": (min(iters, 3000) if quick else iters, 0), "kstat_target": (node["cpus"],
                                                                                         node["irqs"])})
    if not kstat.get("available"):
        return {"available": False, "reason": f"/proc/stat model: {kstat.get('reason')}"}
    est = next(e for e in kstat["estimates"] if (e["cpus"], e["active_irqs"]) == (node["cpus"], node["irqs"]))
    mach = machine_shape()
    here_cpus = mach["possible_cpus"] or mach["online_cpus"]
    node_us = node_reads(here["coefficients"], here_cpus, node, (est["us"], est["us_with_misses"][1]))
    user = sysprof_user_side(node, 200 if quick else 2000)
    both = sysprof_disk_both_ways(2 if quick else 5, 200 if quick else 2000)
    return {"available": True, "machine": mach, "here": here, "node": node, "node_us": node_us,
            "kstat_coefficients": kstat["coefficients"], "kstat_perf": kstat["perf"].get("available"),
            "sysprof_user_us": user, "sysprof_disk_both_ways": both,
            "scenarios": scenarios(node_us, user.get("us", {}) if user.get("available") else {}),
            "model": {"lines_per_disk_cpu": LINES_PER_DISK_CPU, "lines_per_queue": LINES_PER_QUEUE,
                      "max_queues": MAX_QUEUES, "lines_per_meminfo_cpu": LINES_PER_MEMINFO_CPU,
                      "line_ns": list(LINE_NS), "disk_line_bytes": DISK_LINE_BYTES, "budget": BUDGET,
                      "budget_model": BUDGET_MODEL, "user_hz_s": USER_HZ_S}}


# ------------------------------------------------------------------------------------------------
# printing
# ------------------------------------------------------------------------------------------------

def _rng(lo: float, hi: float, digits: int = 3) -> str:
    return fmt(lo, digits) if fmt(lo, digits) == fmt(hi, digits) else f"{fmt(lo, digits)}–{fmt(hi, digits)}"


def _periods(p: Dict[str, float]) -> str:
    return ", ".join(f"{k} {fmt(v * 1e3)} ms" for k, v in p.items())


def print_node(res) -> str:
    out = "## The default sources' kernel cost here and on a large node (issue 28)\n\n"
    if not res.get("available"):
        return out + f"not available: {res.get('reason')}\n"
    m, h, co, node = res["machine"], res["here"], res["here"]["coefficients"], res["node"]
    ds = h["disks"]
    out += (f"here: kernel {m['kernel']}, {m['online_cpus']} online / {m['possible_cpus']} possible CPUs; "
            f"/proc/diskstats {ds['lines']} lines ({len(ds['kept'])} kept whole disks {', '.join(ds['kept'])}; "
            f"{len(ds['left_out'])} left out by the default filter; {len(ds['partitions'])} partitions), "
            f"{h['nics']} NICs; n={h['iters']} reads of each file, interleaved\n\n")
    out += table(["one read, as sysprof reads it (µs)", "median [IQR]", "bytes"],
                 [[label, f"{fmt(h['reads'][label]['median'])} [{fmt(h['reads'][label]['p25'])}–"
                          f"{fmt(h['reads'][label]['p75'])}]", size] for label, _, size in h["specs"]]) + "\n\n"
    names = {"proc_fixed_ns": "a /proc read's fixed cost", "sys_fixed_ns": "a sysfs read's fixed cost",
             "disk_line_ns": "per /proc/diskstats line", "sys_stat_ns": "per /sys/block/<disk>/stat beyond the fixed",
             "sys_stat_idle_ns": "the same, an idle left-out device", "nic_line_ns": "per /proc/net/dev line",
             "meminfo_ns": "/proc/meminfo, whole"}
    out += table(["coefficient (paired medians)", "ns"], [[names.get(k, k), fmt(v)] for k, v in co.items()]) + "\n\n"
    b = h.get("disk_both_ways")
    if b:
        out += (f"the kept disks both ways here: /proc/diskstats {fmt(b['diskstats_us']['median'])} µs, their "
                f"/sys/block/*/stat files {fmt(b['sysfs_us']['median'])} µs: sysfs/diskstats "
                f"{fmt(b['sysfs_over_diskstats']['median'])}× [IQR {fmt(b['sysfs_over_diskstats']['p25'])}–"
                f"{fmt(b['sysfs_over_diskstats']['p75'])}]\n")
    sb = res.get("sysprof_disk_both_ways") or {}
    if sb.get("available"):
        out += (f"through sysprof (disk source alone, {sb['channels']} channels): diskstats "
                f"{fmt(sb['diskstats']['median'])} µs [IQR {fmt(sb['diskstats']['p25'])}–"
                f"{fmt(sb['diskstats']['p75'])}], sysfs {fmt(sb['sysfs']['median'])} µs "
                f"[IQR {fmt(sb['sysfs']['p25'])}–{fmt(sb['sysfs']['p75'])}] per sample ({sb['method']})\n")
    cg = h.get("cgroup_cpu_stat_over_proc_stat")
    if cg:
        out += (f"the root cgroup's cpu.stat ({h['cgroup_root']}) costs {fmt(cg['median'])}× /proc/stat here "
                f"[IQR {fmt(cg['p25'])}–{fmt(cg['p75'])}]; it has usage/user/system(/nice)_usec only, no idle, "
                "iowait or steal, so it cannot give cpu/percent or cpu/<mode>_seconds_total\n")
    out += "\n"
    u = res.get("sysprof_user_us") or {}
    mm = res["model"]
    out += (f"model node: {node['cpus']} CPUs, {node['irqs']} IRQs, {node['disks']} disks + {node['partitions']} "
            f"partitions + {node['loops']} loop devices in /proc/diskstats, {node['nics']} NICs. Per read, µs "
            f"(low–high: per-CPU lines at {fmt(mm['line_ns'][0])}–{fmt(mm['line_ns'][1])} ns; /proc/stat from "
            "bench_kstat, without – with its coherence misses):\n\n")
    rows = [[f, _rng(*v)] for f, v in res["node_us"].items()]
    if u.get("available"):
        rows.append(["sysprof's own parse per tick, all four (synthetic tree of the node's shape)",
                     fmt(sum(u["us"].values()))])
    out += table(["file", "µs per read"], rows) + "\n\n"
    rows = []
    for sc in res["scenarios"]:
        lo, hi = sc["low"], sc["high"]
        rows.append([f"{'1 kHz' if sc['interval_s'] == 1e-3 else '100 Hz'}", sc["defaults"],
                     _periods(lo["periods_s"]), lo["disk_files"] if lo["disk_files"] == hi["disk_files"]
                     else f"{lo['disk_files']} / {hi['disk_files']}",
                     _rng(lo["plain"]["ms_per_tick"], hi["plain"]["ms_per_tick"]),
                     _rng(lo["plain"]["core_percent"], hi["plain"]["core_percent"]) + " %",
                     _rng(lo["budget"]["core_percent"], hi["budget"]["core_percent"]) + " %",
                     f"{_periods(lo['budget_periods_s'])} / {_periods(hi['budget_periods_s'])}"])
    out += table(["sampler", "defaults", "intervals", "disk file", "ms per tick", "% of a core",
                  f"with a {mm['budget']} core budget", "budget's intervals (low / high)"], rows)
    out += (f"\n\nold defaults: every source at the interval, /proc/diskstats; new: cpu at max(interval, "
            f"{fmt(mm['user_hz_s'] * 1e3)} ms), the disk file the source picks at open (the cheaper). Budget: "
            f"{mm['budget_model']}. Measured: the per-read and per-line costs here; modelled: the node's per-CPU "
            "lines, its line bytes, /proc/stat's split (bench_kstat).\n")
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer reads")
    for k in ("cpus", "irqs", "disks", "nics"):
        ap.add_argument(f"--{k}", type=int, default=NODE[k], help=f"the node's {k} (default {NODE[k]})")
    args = ap.parse_args(argv)
    shape = {k: getattr(args, k) for k in ("cpus", "irqs", "disks", "nics")}
    shape["partitions"] = args.disks
    print(print_node(bench_node({"node_quick": args.quick, "node_shape": shape})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
