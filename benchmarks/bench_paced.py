"""Benchmark section "paced": what the sampling thread costs at 1 kHz, against a paced C floor, and where it goes.

The price a user pays is the sampling thread's CPU time per sample while it runs paced at 1 kHz: a wake-up per
deadline, cold caches, then the reads. It is measured as the thread's ``sum_exec_runtime`` (the first field of
``/proc/self/task/TID/schedstat``) over a window, divided by the rows it took, and compared with a C loop that
only preads the same files at the same deadlines (benchmarks/floor.c -p -s: its own CLOCK_THREAD_CPUTIME_ID, the
same quantity). Floor and sampler windows alternate (A B A B ...) so that machine load shifts both alike; the
ratio is taken per pair.

The files of the floor are the ones the sampler holds open (read from /proc/self/fd before and after it is made),
each read as the sampler reads it (to EOF for the record-based diskstats, net/dev and vmstat). Sources that open
files per tick (the process tree's children) are not in the floor: their ratio says so.

The goal (host set, <= 1.1 x) is judged on the median ratio's 95 % bootstrap interval over the pairs: ok when its
upper bound is within 1.1, missed when its lower bound is above, else not resolvable at this n on this machine.

Same core, the second design (same_core_window): the thread and two floors pinned to one CPU, the floors' deadlines a
third and two thirds of a period after the thread's, so that they take turns and every tick follows another by a
third of a period. The machine's moment, which moves the windows above by ±10-20 % and which the pairs only partly
cancel, is then common to the three loops of a window; the thread is divided by the floor that ran just before it
(both follow a floor), and the floor that follows the thread, over that one, checks that the thread's footprint does
not make its neighbour dearer. Its ticks find warmer caches than ticks alone on an idle machine: both loops cost
less per sample there, so its ratio is the overhead beside other periodic work, the idle windows' the overhead alone.

The host's phase (phase_structure): two copies of the floor on one CPU, half a period apart, at phases x and x + 1/2
of the period: the CPU per tick of one loop over the other's, which is 1 on a machine without periodic work of its
own. On the 2-vCPU KVM guest this was written on, loops in the first half of each millisecond cost 2-5 % less than
loops in the second: noise in every paced ratio, whose loops start at arbitrary phases.

The wake-up itself: floor.c -w alternates, tick by tick (A B B A ...), the two ways the sampling thread can sleep
(clock_nanosleep, a futex wait) and reports the CPU each costs inside the sleep call, so the choice in
csrc/engine/sampler.cpp (Sampler::sleep_until) is measured, not assumed.

Breakdown, always: the thread's time outside its ticks (wake-up and sleep: scheduler, timer, futex) against the
floor's, and its time inside them (reads, parse, derive, ring) against the floor's preads. With ``perf`` on PATH
(and permission), also a sampled profile (cpu-clock) of the thread and of the floor: the difference per symbol in
µs per sample, so each optimisation can be aimed.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from bench_busy import task_schedstat, tids_named
from bench_util import boot_ci, dist, fmt, table, verdict, _flags, Floor

INTERVAL_NS = 1_000_000
GOAL = 1.1  # the host set's thread CPU per sample, at most this times the paced floor's
RECORD_BASED = ("/diskstats", "/net/dev", "/vmstat")  # seq files that hand out a page per read: read to EOF

SETS = (
    ("default set", "Sampler() defaults: cpu, memory, disk, net", _flags(cpu=True, memory=True, disk=True, net=True)),
    ("host set", "cpu + per-cpu, memory, disk, net, load",
     _flags(cpu=True, per_cpu=True, memory=True, disk=True, net=True, load=True)),
    ("--all", "every /proc source: + process, process_tree, pressure, cgroup, vmstat",
     _flags(cpu=True, per_cpu=True, memory=True, disk=True, net=True, load=True, process=True, process_tree=True,
            pressure=True, cgroup=True, vmstat=True)),
)


def _open_files() -> Dict[str, str]:
    out = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            out[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return out


def _threads() -> set:
    return set(tids_named("sysprof"))


def _cpu_ns(tid: int) -> int:
    """sum_exec_runtime of this process's thread ``tid`` (schedstat's first field), ns."""
    st = task_schedstat(tid)
    if st is None:
        raise RuntimeError(f"no /proc/self/task/{tid}/schedstat (a kernel without schedstats)")
    return st[0]


def held_files(sysprof, flags) -> List[Tuple[str, str]]:
    """(path, floor mode) of the /proc and /sys files a sampler with ``flags`` holds open."""
    before = _open_files()
    s = sysprof.Sampler(interval=1e-3, **flags)
    after = _open_files()
    del s
    mine = f"/proc/{os.getpid()}/"
    # Each file is held twice (the thread's sources and sample()'s); this process's own files are read by the
    # floor as its own (/proc/self: the same kernel work). process_tree's per-thread schedstat files (one per thread
    # of this process) are read by the floor as its own thread's, as many times.
    held = [p.removesuffix(" (deleted)") for fd, p in after.items() if fd not in before]
    threads = [p for p in held if p.startswith(mine + "task/") and p.endswith("/schedstat")]
    paths = sorted({p.replace(mine, "/proc/self/", 1) for p in held
                    if p.startswith(("/proc/", "/sys/")) and p not in threads})
    paths += ["/proc/thread-self/schedstat"] * (len(threads) // 2)
    return [(p, "e" if p.endswith(RECORD_BASED) else "1") for p in paths]


def start_sampler(sysprof, flags, settle: float, intervals=None):
    """A 1 kHz Sampler with ``flags`` (and per-source ``intervals``), started, and its sampling thread's id after
    ``settle`` seconds (its first rows and start-up out of any window), or None unless exactly one new sysprof
    thread appeared. The caller stops it."""
    s = sysprof.Sampler(interval=1e-3, **flags, **({"intervals": intervals} if intervals else {}))
    known = _threads()
    s.start()
    try:
        time.sleep(settle)
    except BaseException:
        s.stop()
        raise
    new = _threads() - known
    return s, (new.pop() if len(new) == 1 else None)


def sampler_window(sysprof, flags, seconds: float, intervals=None) -> Optional[Dict[str, Any]]:
    """The thread's CPU and in-tick time per sample over ``seconds`` at 1 kHz, with the default capacity, and the
    reads of each source in the window (``stats["reads"]``)."""
    s, tid = start_sampler(sysprof, flags, 0.2, intervals)
    try:
        if tid is None:
            return None
        st0, c0 = s.stats, _cpu_ns(tid)
        time.sleep(seconds)
        c1, st1 = _cpu_ns(tid), s.stats
    finally:
        s.stop()
        s.drain()
    n = st1["taken"] - st0["taken"]
    if n <= 0:
        return None
    in_tick = st1["sample_ns_mean"] * st1["taken"] - st0["sample_ns_mean"] * st0["taken"]
    reads = {k: v - st0.get("reads", {}).get(k, 0) for k, v in st1.get("reads", {}).items()}
    return {"cpu_ns": (c1 - c0) / n, "in_tick_ns": in_tick / n, "samples": n, "reads": reads,
            "missed": st1["missed_deadlines"] - st0["missed_deadlines"]}


def wake_costs(floor: Floor, files, iters: int, runs: int) -> Dict[str, Any]:
    """CPU per wake-up inside the sleep call (µs), clock_nanosleep against a futex wait, alternated tick by tick in
    one paced loop (floor.c -w), ``runs`` times: per way the medians and means of the runs."""
    if floor.error or not files:
        return {"error": floor.error or "no files"}
    got: Dict[str, Dict[str, List[float]]] = {}
    for _ in range(runs):
        r = subprocess.run([floor.exe, "-p", str(INTERVAL_NS), "-w", str(iters), *(f"{p}:{m}" for p, m in files)],
                           capture_output=True, text=True, check=True)
        for line in r.stdout.splitlines():
            way, _n, med, mean = line.split()
            d = got.setdefault(way, {"median": [], "mean": []})
            d["median"].append(int(med) / 1e3)
            d["mean"].append(float(mean) / 1e3)
    return {way: {"median_us": dist(d["median"], "us"), "mean_us": dist(d["mean"], "us")} for way, d in got.items()}


def floor_window(floor: Floor, files, seconds: float) -> Optional[Dict[str, float]]:
    if floor.error or not files:
        return None
    iters = max(10, int(seconds * 1e9 / INTERVAL_NS))
    r = subprocess.run([floor.exe, "-p", str(INTERVAL_NS), "-s", str(iters), *(f"{p}:{m}" for p, m in files)],
                       capture_output=True, text=True, check=True)
    n, cpu, in_tick = (int(x) for x in r.stdout.split())
    return {"cpu_ns": cpu / n, "in_tick_ns": in_tick / n, "samples": n}


# ------------------------------------------------------------------------------------------------
# same core: the thread and two floors taking turns on one CPU, a third of a period apart
# ------------------------------------------------------------------------------------------------

def sampler_phase_ns(s, interval_ns: int = INTERVAL_NS) -> Optional[int]:
    """Where in the period a running sampler's deadlines fall (CLOCK_MONOTONIC ns modulo ``interval_ns``), from the
    newest row's wall-clock time (taken right after the wake-up; the rows are drained); None before its first row."""
    b = s.drain()
    if not len(b):
        return None
    offset = time.time_ns() - time.monotonic_ns()
    return int((int(b.timestamps_ns[-1]) - offset) % interval_ns)


def _pinned(cpu: int):
    return lambda: os.sched_setaffinity(0, {cpu})


def start_floors(floor: Floor, files, phases: List[int], seconds: float, cpu: int) -> List[subprocess.Popen]:
    """Paced floors (floor.c -p -P -s) pinned to ``cpu``, one per phase (ns into the period), ``seconds`` long."""
    iters = max(10, int(seconds * 1e9 / INTERVAL_NS))
    return [subprocess.Popen([floor.exe, "-p", str(INTERVAL_NS), "-P", str(ph), "-s", str(iters),
                              *(f"{p}:{m}" for p, m in files)], stdout=subprocess.PIPE, text=True,
                             preexec_fn=_pinned(cpu)) for ph in phases]


def floor_cpu_per_tick(procs: List[subprocess.Popen], seconds: float) -> Optional[List[float]]:
    """Each started floor's thread CPU per iteration (ns) once it ends; None if any printed no summary. None is left
    running."""
    try:
        outs = [p.communicate(timeout=seconds + 60)[0].split() for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if any(len(o) != 3 or int(o[0]) <= 0 for o in outs):
        return None
    return [int(o[1]) / int(o[0]) for o in outs]


def same_core_window(sysprof, floor: Floor, flags, files, seconds: float, cpu: int) -> Optional[Dict[str, float]]:
    """One window of the same-core design: the sampling thread pinned to ``cpu``, and two floors (floor.c -P) pinned
    there too, their deadlines a third and two thirds of a period after the thread's. Each tick then follows another
    by a third of a period, and all three loops meet the machine's moment alike: drift, a neighbour's load, the
    host's scheduling of this vCPU cancel within the window instead of between windows. The thread follows the
    second floor; the first floor follows the thread: that floor against the second (a floor after a floor) is the
    design's own check that the thread's footprint does not make its neighbour dearer (its bias)."""
    s, tid = start_sampler(sysprof, flags, 0.1)
    procs = []
    try:
        if tid is None:
            return None
        os.sched_setaffinity(tid, {cpu})
        time.sleep(0.05)
        phase = sampler_phase_ns(s)
        if phase is None:
            return None
        procs = start_floors(floor, files, [(phase + third * INTERVAL_NS // 3) % INTERVAL_NS for third in (1, 2)],
                             seconds, cpu)
        time.sleep(0.01)  # the floors' first deadlines come after their start-up
        st0, c0 = s.stats, _cpu_ns(tid)
        floors = floor_cpu_per_tick(procs, seconds)
        c1, st1 = _cpu_ns(tid), s.stats
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        s.stop()
        s.drain()
    n = st1["taken"] - st0["taken"]
    if n <= 0 or floors is None:
        return None
    after_thread, after_floor = floors
    return {"cpu_ns": (c1 - c0) / n, "floor_after_floor_ns": after_floor, "floor_after_thread_ns": after_thread,
            "missed": st1["missed_deadlines"] - st0["missed_deadlines"]}


def same_core(sysprof, floor: Floor, flags, files, pairs: int, seconds: float) -> Dict[str, Any]:
    """``pairs`` same-core windows, alternating between the first two CPUs: the thread's CPU per sample over the
    floor's that ran just before it (a floor after a floor), and the bias check, each with the median's 95 %
    bootstrap interval."""
    if floor.error or not files or not hasattr(os, "sched_setaffinity"):
        return {"error": floor.error or ("no files" if not files else "no sched_setaffinity")}
    cpus = sorted(os.sched_getaffinity(0))[:2]
    got = [w for i in range(pairs) if (w := same_core_window(sysprof, floor, flags, files, seconds,
                                                              cpus[i % len(cpus)]))]
    ratio = [w["cpu_ns"] / w["floor_after_floor_ns"] for w in got]
    bias = [w["floor_after_thread_ns"] / w["floor_after_floor_ns"] for w in got]
    ci, bias_ci = boot_ci(ratio), boot_ci(bias)
    return {"thread_cpu_us": dist([w["cpu_ns"] / 1e3 for w in got], "us"),
            "floor_cpu_us": dist([w["floor_after_floor_ns"] / 1e3 for w in got], "us"),
            "ratio": dist(ratio, "x"), "ratio_median_ci": ci["median_ci"],
            "verdict": verdict(ci["median_ci"], GOAL, ci["n"], min_n=5, width=GOAL - 1),
            "bias": dist(bias, "x"), "bias_median_ci": bias_ci["median_ci"],
            "missed_deadlines": sum(w["missed"] for w in got), "cpus": cpus}


# ------------------------------------------------------------------------------------------------
# the host's phase: does a loop's CPU per tick depend on where in the period it runs?
# ------------------------------------------------------------------------------------------------

PHASE_POINTS = 4  # x = 0, 1/8, 2/8, 3/8 of the period: with x + 1/2 they cover the period at eighths


def phase_structure(floor: Floor, files, reps: int, seconds: float) -> Dict[str, Any]:
    """Two identical floors pinned to one CPU half a period apart, their deadlines at phase x and x + 1/2 of the
    period (CLOCK_MONOTONIC modulo the interval, floor.c -P), ``reps`` windows per x (the first two CPUs in turn):
    the first's CPU per tick over the second's. Both loops are the same program and each follows the other by half a
    period, so on a machine without periodic work of its own every ratio is 1 within the noise; a ratio away from 1
    is the cost of where in the millisecond a loop runs (the host's timer ticks, another guest's periodic work). The
    paced comparisons start their loops at arbitrary phases, so this is noise in their ratios, not bias."""
    if floor.error or not files or not hasattr(os, "sched_setaffinity"):
        return {"error": floor.error or ("no files" if not files else "no sched_setaffinity")}
    cpus = sorted(os.sched_getaffinity(0))[:2]
    points = []
    for k in range(PHASE_POINTS):
        x = k * INTERVAL_NS // (2 * PHASE_POINTS)
        first, second = [], []
        for rep in range(reps):
            got = floor_cpu_per_tick(start_floors(floor, files, [x, x + INTERVAL_NS // 2], seconds,
                                                  cpus[rep % len(cpus)]), seconds)
            if got:
                first.append(got[0] / 1e3)
                second.append(got[1] / 1e3)
        ratios = [a / b for a, b in zip(first, second)]
        points.append({"phase_ns": x, "first_cpu_us": first, "second_cpu_us": second, "ratio": dist(ratios, "x"),
                       "ratio_median_ci": boot_ci(ratios)["median_ci"]})
    meds = [pt["ratio"]["median"] for pt in points if pt["ratio"]["median"]]
    return {"points": points, "cpus": cpus, "window_seconds": seconds,
            "furthest_from_1": max(meds, key=lambda r: abs(np.log(r))) if meds else None}


# ------------------------------------------------------------------------------------------------
# perf: where the time goes, symbol by symbol
# ------------------------------------------------------------------------------------------------

PERF_PERIOD_NS = 40_000  # one cpu-clock sample per 40 µs of CPU: denser sampling inflates what it measures


def _perf_report(data: str) -> Dict[str, int]:
    r = subprocess.run(["perf", "report", "-i", data, "-n", "--sort", "dso,sym", "--stdio", "-q"],
                       capture_output=True, text=True, timeout=120)
    out: Dict[str, int] = {}
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) < 4 or not parts[0].endswith("%"):
            continue
        try:
            n = int(parts[1])
        except ValueError:
            continue
        dso, sym = parts[2], " ".join(parts[4:]) if parts[3] in ("[k]", "[.]") else " ".join(parts[3:])
        dso = "kernel" if "kernel" in dso else os.path.basename(dso).split(".cpython")[0].split(".so")[0]
        sym = "(stripped build: no symbols)" if sym.startswith("0x") else sym.split('<')[0].split('(')[0][:60]
        key = f"{dso}:{sym}"
        out[key] = out.get(key, 0) + n
    return out


def perf_breakdown(sysprof, floor: Floor, flags, files, seconds: float, thread_us: float, floor_us: float) -> Dict[str, Any]:
    """Sampled profiles of the sampling thread and of the floor over the same time: µs per sample per symbol, each
    profile's shares applied to the CPU per sample measured without perf (``thread_us``, ``floor_us``)."""
    if shutil.which("perf") is None:
        return {"error": "perf not on PATH (linux-perf / linux-tools)"}
    if floor.error:
        return {"error": f"floor unavailable: {floor.error}"}
    tmp = tempfile.mkdtemp(prefix="sysprof-perf-")
    try:
        s, tid = start_sampler(sysprof, flags, 0.2)
        try:
            if tid is None:
                return {"error": "the sampling thread was not found among this process's threads"}
            n0 = s.stats["taken"]
            r = subprocess.run(["perf", "record", "-q", "-o", f"{tmp}/thread.data", "-t", str(tid), "-e", "cpu-clock",
                                "-c", str(PERF_PERIOD_NS), "--", "sleep", str(seconds)],
                               capture_output=True, text=True, timeout=seconds + 60)
            n_thread = s.stats["taken"] - n0
        finally:
            s.stop()
            s.drain()
        if r.returncode != 0:
            return {"error": f"perf record failed: {r.stderr.strip()[-300:]}"}
        iters = int(seconds * 1e9 / INTERVAL_NS)
        subprocess.run(["perf", "record", "-q", "-o", f"{tmp}/floor.data", "-e", "cpu-clock", "-c",
                        str(PERF_PERIOD_NS), "--", floor.exe, "-p", str(INTERVAL_NS), "-s", str(iters),
                        *(f"{p}:{m}" for p, m in files)], capture_output=True, text=True, timeout=seconds + 60)
        th, fl = _perf_report(f"{tmp}/thread.data"), _perf_report(f"{tmp}/floor.data")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def per(counts: Dict[str, int], us_per_sample: float) -> Dict[str, float]:
        total = sum(counts.values()) or 1  # perf's samples are shares; the clean measurement gives the scale
        return {k: v / total * us_per_sample for k, v in counts.items()}

    th_us, fl_us = per(th, thread_us), per(fl, floor_us)
    by_dso: Dict[str, List[float]] = {}
    for k in set(th_us) | set(fl_us):
        d = k.split(":", 1)[0]
        d = d if d in ("kernel", "_native") else ("libc" if d.startswith("libc") else "other")
        acc = by_dso.setdefault(d, [0.0, 0.0])
        acc[0] += th_us.get(k, 0.0)
        acc[1] += fl_us.get(k, 0.0)
    diff = sorted(((th_us.get(k, 0.0) - fl_us.get(k, 0.0), k) for k in set(th_us) | set(fl_us)), reverse=True)
    return {"method": f"perf record -e cpu-clock -c {PERF_PERIOD_NS} of the thread (-t TID) and of the paced floor, "
                      f"{seconds:g} s each; each profile's shares applied to the median CPU per sample measured above "
                      "without perf",
            "thread_samples": n_thread, "floor_iterations": iters,
            "by_dso_us": {k: {"thread": v[0], "floor": v[1]} for k, v in sorted(by_dso.items())},
            "top_extra_us": [{"symbol": k, "extra_us": d, "thread_us": th_us.get(k, 0.0),
                              "floor_us": fl_us.get(k, 0.0)} for d, k in diff[:12]],
            "top_saved_us": [{"symbol": k, "extra_us": d} for d, k in diff[-4:]]}


# ------------------------------------------------------------------------------------------------
# the section
# ------------------------------------------------------------------------------------------------

def bench_paced(cfg, sysprof, floor: Floor, ctx) -> Dict[str, Any]:
    pairs, seconds, perf_seconds, same_core_pairs, phase_reps = cfg["paced"]
    out: Dict[str, Any] = {
        "method": ("thread CPU per sample at 1 kHz: sum_exec_runtime of the sampling thread (schedstat) over a "
                   f"{seconds:g} s window / rows taken, default capacity; floor: benchmarks/floor.c -p -s, a C "
                   "thread that only preads the same held files at the same 1 ms absolute deadlines, its "
                   "CLOCK_THREAD_CPUTIME_ID over the same number of iterations; windows interleaved (floor, "
                   "sampler, sampler, floor, ...), ratio per pair"),
        "pairs": pairs, "window_seconds": seconds, "floor_error": floor.error, "sets": {}}
    files_of = {name: held_files(sysprof, flags) for name, _desc, flags in SETS}  # each set's files, found once
    for name, desc, flags in SETS:
        files = files_of[name]
        rows = []
        for i in range(pairs):
            order = ("floor", "sampler") if i % 2 == 0 else ("sampler", "floor")
            got = {}
            for who in order:
                got[who] = (floor_window(floor, files, seconds) if who == "floor"
                            else sampler_window(sysprof, flags, seconds))
            rows.append(got)
        ok = [r for r in rows if r["floor"] and r["sampler"]]
        s_cpu = [r["sampler"]["cpu_ns"] / 1e3 for r in ok]
        f_cpu = [r["floor"]["cpu_ns"] / 1e3 for r in ok]
        s_in = [r["sampler"]["in_tick_ns"] / 1e3 for r in ok]
        f_in = [r["floor"]["in_tick_ns"] / 1e3 for r in ok]
        ratios = [a / b for a, b in zip(s_cpu, f_cpu)]
        ci = boot_ci(ratios)
        out["sets"][name] = {
            "description": desc, "files": [p for p, _ in files],
            "ratio_median_ci": ci["median_ci"],
            "verdict": verdict(ci["median_ci"], GOAL, ci["n"], min_n=5, width=GOAL - 1),
            "complete_floor": name != "--all",
            "thread_cpu_us": dist(s_cpu, "us"), "floor_cpu_us": dist(f_cpu, "us"),
            "ratio": dist(ratios, "x"),
            "thread_in_tick_us": dist(s_in, "us"), "floor_in_tick_us": dist(f_in, "us"),
            "thread_outside_tick_us": dist([a - b for a, b in zip(s_cpu, s_in)], "us"),
            "floor_outside_tick_us": dist([a - b for a, b in zip(f_cpu, f_in)], "us"),
            "thread_core_percent_at_1khz": dist([a / 10 for a in s_cpu], "%"),
            "missed_deadlines": sum(r["sampler"]["missed"] for r in ok),
        }
    # The same question, the three loops sharing one CPU a third of a period apart (same_core_window): the machine's
    # drift between windows, which the pairs above only partly cancel, cancels within each window.
    for name, _desc, flags in SETS[:2]:
        out["sets"][name]["same_core"] = same_core(sysprof, floor, flags, files_of[name], same_core_pairs,
                                                   min(seconds, 1.0))
    host_files = files_of[SETS[1][0]]
    out["phase"] = phase_structure(floor, host_files, phase_reps, min(seconds, 1.0))
    out["wake"] = wake_costs(floor, host_files, max(1000, int(seconds * 1000)), 3)
    # Per-source intervals: the same default set with the slow-changing files read every 10 ms, interleaved
    iv = {"cpu": 0.01, "disk": 0.01}
    got: Dict[str, List[Dict[str, Any]]] = {"every 1 ms": [], "cpu, disk every 10 ms": []}
    for i in range(max(3, pairs // 3)):
        for label in (("every 1 ms", "cpu, disk every 10 ms") if i % 2 == 0 else
                      ("cpu, disk every 10 ms", "every 1 ms")):
            w = sampler_window(sysprof, SETS[0][2], seconds, iv if label != "every 1 ms" else None)
            if w:
                got[label].append(w)
    out["intervals"] = {"intervals": iv, "runs": {
        label: {"thread_cpu_us": dist([w["cpu_ns"] / 1e3 for w in ws], "us"),
                "reads_per_second": {k: float(np.median([w["reads"].get(k, 0) / w["samples"] * 1000 for w in ws]))
                                     for k in (ws[0]["reads"] if ws else {})}}
        for label, ws in got.items()}}
    # What each file costs the kernel to render (hot loop of preads, nothing parsed): the per-source levers
    if not floor.error:
        out["per_file_us"] = {p: dist(np.asarray(floor.run([(p, m)], 1000)) / 1e3, "us")
                              for p, m in files_of[SETS[-1][0]]}
    if perf_seconds:
        flags = SETS[0][2]
        d = out["sets"][SETS[0][0]]
        out["perf"] = perf_breakdown(sysprof, floor, flags, files_of[SETS[0][0]], perf_seconds,
                                     d["thread_cpu_us"]["median"] or 0.0, d["floor_cpu_us"]["median"] or 0.0)
    ctx["paced_ratio_default_set"] = out["sets"]["default set"]["ratio"].get("median")
    return out


def _m(d: Dict[str, Any]) -> str:
    if not d or not d.get("n"):
        return "n/a"
    return f"{fmt(d['median'])} [{fmt(d['p25'])}–{fmt(d['p75'])}]"


def print_paced(res) -> str:
    rows = []
    for name, r in res["sets"].items():
        lo, hi = r.get("ratio_median_ci") or (None, None)
        rows.append([name, len(r["files"]), _m(r["thread_cpu_us"]), _m(r["floor_cpu_us"]),
                     _m(r["ratio"]) + ("" if r["complete_floor"] else " (floor: held files only)"),
                     f"{fmt(lo)}–{fmt(hi)}" + (f" ({r['verdict']})" if r["complete_floor"] else ""),
                     f"{_m(r['thread_outside_tick_us'])} / {_m(r['floor_outside_tick_us'])}",
                     f"{_m(r['thread_in_tick_us'])} / {_m(r['floor_in_tick_us'])}",
                     _m(r["thread_core_percent_at_1khz"]), r["missed_deadlines"]])
    text = ("## Paced cost at 1 kHz (thread CPU per sample, µs: median [IQR])\n\n"
            + table(["set", "files", "thread CPU", "paced floor CPU", "thread / floor", "median's 95 % CI",
                     "outside ticks: thread / floor", "inside ticks: thread / floor", "% of a core",
                     "missed"], rows)
            + f"\n\n{res['method']}; n = {res['pairs']} pairs per set; the goal (≤ {GOAL:g} ×) judged on the median's "
              "bootstrap interval (ok: its upper bound within; missed: its lower bound above; else not resolvable)."
            + (f"\nfloor: not available ({res['floor_error']})" if res["floor_error"] else "") + "\n")
    sc = {name: r["same_core"] for name, r in res["sets"].items() if r.get("same_core")}
    if sc:
        rows = []
        for name, r in sc.items():
            if "error" in r:
                rows.append([name, f"not run: {r['error']}", "", "", "", "", ""])
                continue
            lo, hi = r["ratio_median_ci"]
            blo, bhi = r["bias_median_ci"]
            rows.append([name, _m(r["thread_cpu_us"]), _m(r["floor_cpu_us"]), _m(r["ratio"]),
                         f"{fmt(lo)}–{fmt(hi)} ({r['verdict']})", f"{_m(r['bias'])}, CI {fmt(blo)}–{fmt(bhi)}",
                         r["missed_deadlines"]])
        text += ("\n### Same core: the thread and two floors taking turns on one CPU, a third of a period apart\n\n"
                 + table(["set", "thread CPU", "floor CPU (after a floor)", "thread / floor", "median's 95 % CI",
                          "bias check: floor after the thread / after a floor", "missed"], rows)
                 + "\n\nEach window pins the sampling thread and two paced floors (floor.c -P) to one CPU (the first two "
                   "CPUs in turn), the floors' deadlines a third and two thirds of a period after the thread's: every "
                   "tick follows another by a third of a period, so the machine's moment is common to all three and "
                   "cancels in the ratio. The thread follows a floor, and so does the floor it is divided by; the "
                   "floor that follows the thread, over that one, is the check that the thread's footprint does not "
                   "make its neighbour dearer (1 within its interval: no bias). Ticks a third of a period apart find "
                   "warmer caches than ticks alone on an idle machine (the pairs above): the CPU per sample is lower "
                   "in both loops here.\n")
    ph = res.get("phase")
    if ph and "error" in ph:
        text += f"\nthe host's phase: not run ({ph['error']})\n"
    elif ph:
        rows = []
        for pt in ph["points"]:
            lo, hi = pt["ratio_median_ci"]
            x = pt["phase_ns"] / INTERVAL_NS
            rows.append([f"{x:.3f} / {x + 0.5:.3f}", _m(dist(pt["first_cpu_us"], "us")),
                         _m(dist(pt["second_cpu_us"], "us")), _m(pt["ratio"]), f"{fmt(lo)}–{fmt(hi)}",
                         pt["ratio"]["n"]])
        text += ("\n### The host's phase: one floor against itself half a period later, on one CPU\n\n"
                 + table(["phases (of the period)", "first floor CPU µs", "second floor CPU µs", "first / second",
                          "median's 95 % CI", "windows"], rows)
                 + f"\n\nTwo copies of the floor (host set's files) pinned to one CPU, deadlines at phase x and x + 1/2 "
                   "of the 1 ms period of CLOCK_MONOTONIC (floor.c -P), " + f"{ph['window_seconds']:g} s windows. "
                   "Each follows the other by half a period, so without periodic work of the machine's own every "
                   f"ratio is 1; the one furthest from 1 here: {fmt(ph['furthest_from_1'])}. Where it is not 1, a "
                   "loop's CPU per tick depends on where in the millisecond it runs (the host's timer ticks, "
                   "another guest's periodic work): the paced comparisons above start their loops at arbitrary "
                   "phases, so this enters their ratios as noise, not bias.\n")
    wk = res.get("wake")
    if wk and "error" not in wk:
        text += ("\n### The wake-up: CPU inside the sleep call per tick, host set's files, 1 kHz (µs)\n\n"
                 + table(["way", "median of run medians [IQR]", "median of run means [IQR]", "runs"],
                         [[way, _m(d["median_us"]), _m(d["mean_us"]), d["median_us"]["n"]] for way, d in wk.items()])
                 + "\n\nOne paced loop alternating the two ways tick by tick (A B B A ...; benchmarks/floor.c -w): the "
                   "sampling thread sleeps in clock_nanosleep when its next deadline is at most 2 ms away "
                   "(Sampler::sleep_until), on a futex (woken at once by stop()) when farther.\n")
    iv = res.get("intervals")
    if iv:
        runs = iv["runs"]
        srcs = sorted({k for r in runs.values() for k in r["reads_per_second"]})
        text += ("\n### Per-source intervals (default set at 1 kHz; reads per second from stats['reads'])\n\n"
                 + table(["sources read", "thread CPU µs per sample", *srcs],
                         [[label, _m(r["thread_cpu_us"]), *(fmt(r["reads_per_second"].get(k)) for k in srcs)]
                          for label, r in runs.items()]) + "\n")
    pf = res.get("per_file_us")
    if pf:
        text += ("\n### What each file costs to read (hot loop of preads, nothing parsed; µs)\n\n"
                 + table(["file", "median [IQR]", "n"], [[k, _m(v), v["n"]] for k, v in
                                                        sorted(pf.items(), key=lambda kv: -(kv[1]["median"] or 0))])
                 + "\n\nA source read less often (per-source intervals) saves its files' share of the floor.\n")
    p = res.get("perf")
    if p and "error" in p:
        text += f"\nperf breakdown: {p['error']}\n"
    elif p:
        text += ("\n### Where the default set's time goes (perf, µs per sample)\n\n"
                 + table(["part", "thread", "floor", "extra"],
                         [[k, fmt(v["thread"]), fmt(v["floor"]), fmt(v["thread"] - v["floor"])]
                          for k, v in p["by_dso_us"].items()])
                 + "\n\n" + table(["symbol (thread − floor)", "extra µs", "thread µs", "floor µs"],
                                  [[x["symbol"], fmt(x["extra_us"]), fmt(x["thread_us"]), fmt(x["floor_us"])]
                                   for x in p["top_extra_us"]])
                 + f"\n\n{p['method']}\n")
    return text
