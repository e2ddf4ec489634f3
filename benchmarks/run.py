#!/usr/bin/env python3
"""sysprof benchmark suite: sysprof against psutil, the seed's design and the kernel's own floor, in one run.

    python benchmarks/run.py [--quick] [--json PATH] [--only SECTION ...]
    sysprof bench [-- ARGS]

Sections (issue 6):
  1 cost         per-sample cost per source and for the host set: native Sampler.sample() from Python (minus
                 the measured cost of an empty native call), the sampling thread's own cost, psutil reading the
                 same metrics, and the floor (a C loop that only preads the same /proc files)
  2 interference a fixed pure-Python compute loop alone vs while sampling at 100 Hz, 1 kHz, 10 kHz, sysprof
                 and the seed's design (psutil in a Python thread with time.sleep); samples taken vs asked
  3 timing       |period - interval| at 1 kHz from drained timestamps (idle main thread, and busy from 2)
  4 marker       benchmarks/marker_bench.py when present
  5 memory       RSS after 10^6 samples drained in batches vs after 10^3; bytes per sample in ring and trace
  6 scaling      cost per sample on synthetic /proc trees with 2..1024 CPUs, 1..256 disks, 1..256 NICs
  7 writer       drained batches -> trace events -> file: samples/s and bytes/s

Every figure carries its n and spread (median, p99, IQR, min/max). Ratios are taken within one run, with the
compared measurements interleaved, because these machines are noisy: absolute times are only a guide.
Goals are checked at the end; a missed goal is printed as MISSED with the measured figure.
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import synthetic_proc  # noqa: E402

DEFAULT_JSON = os.path.join(HERE, "results", "latest.json")
SECTIONS = ("cost", "interference", "timing", "marker", "memory", "scaling", "writer")
_pc = time.perf_counter_ns


# ------------------------------------------------------------------------------------------------
# statistics and formatting
# ------------------------------------------------------------------------------------------------

def dist(values: Sequence[float], unit: str) -> Dict[str, Any]:
    """n, median, p99, p25/p75 (IQR), min, max, mean of ``values``."""
    a = np.asarray(values, dtype=np.float64)
    a = a[np.isfinite(a)]
    if a.size == 0:
        return {"n": 0, "unit": unit, "median": None, "p99": None, "p25": None, "p75": None,
                "min": None, "max": None, "mean": None}
    p25, p50, p75, p99 = np.percentile(a, [25, 50, 75, 99])
    return {"n": int(a.size), "unit": unit, "median": float(p50), "p99": float(p99), "p25": float(p25),
            "p75": float(p75), "min": float(a.min()), "max": float(a.max()), "mean": float(a.mean())}


def fmt(x: Optional[float], digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    ax = abs(x)
    if ax >= 1e5:
        return f"{x:,.0f}"
    if ax >= 100:
        return f"{x:.0f}"
    if ax >= 10:
        return f"{x:.1f}"
    return f"{x:.{digits - 1}f}" if ax >= 1 else f"{x:.{digits}f}"


def fd(d: Dict[str, Any]) -> str:
    """'median (p99) [p25-p75] n=' of a dist."""
    if not d or not d.get("n"):
        return "n/a"
    return f"{fmt(d['median'])} (p99 {fmt(d['p99'])}, IQR {fmt(d['p25'])}-{fmt(d['p75'])}, n={d['n']})"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in rows)) if rows else len(str(h)) for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    out = [line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows]
    return "\n".join(out)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# ------------------------------------------------------------------------------------------------
# metric sets: native flags, psutil equivalent, floor files
# ------------------------------------------------------------------------------------------------

NO_SOURCES = dict(cpu=False, per_cpu=False, memory=False, disk=False, net=False, load=False, process=False)


def _flags(**on) -> Dict[str, bool]:
    d = dict(NO_SOURCES)
    d.update(on)
    return d


def _psutil_sets():
    import psutil

    cpu = lambda: psutil.cpu_times()  # noqa: E731
    percpu = lambda: (psutil.cpu_times(), psutil.cpu_times(percpu=True))  # noqa: E731
    mem = lambda: (psutil.virtual_memory(), psutil.swap_memory())  # noqa: E731
    disk = lambda: psutil.disk_io_counters(perdisk=True)  # noqa: E731
    net = lambda: psutil.net_io_counters(pernic=True)  # noqa: E731
    load = lambda: psutil.getloadavg()  # noqa: E731

    def host():
        percpu(), mem(), disk(), net(), load()

    def seed():  # the seed's calls, in its order
        psutil.cpu_percent(), psutil.swap_memory(), psutil.virtual_memory(), disk(), net()

    return cpu, percpu, mem, disk, net, load, host, seed


# name, description, native flags, psutil index, floor files [(path, mode)]
def metric_sets(proc: str = "/proc"):
    stat, meminfo = (f"{proc}/stat", "1"), (f"{proc}/meminfo", "1")
    diskstats, netdev, loadavg = (f"{proc}/diskstats", "e"), (f"{proc}/net/dev", "e"), (f"{proc}/loadavg", "1")
    return [
        ("cpu", "aggregate cpu line", _flags(cpu=True), 0, [stat]),
        ("cpu+per_cpu", "aggregate + every cpuN line", _flags(cpu=True, per_cpu=True), 1, [stat]),
        ("memory+swap", "meminfo (memory/* and swap/*)", _flags(memory=True), 2, [meminfo]),
        ("disk", "diskstats, per whole disk", _flags(disk=True), 3, [diskstats]),
        ("net", "net/dev, per NIC", _flags(net=True), 4, [netdev]),
        ("load", "loadavg", _flags(load=True), 5, [loadavg]),
        ("host set", "cpu+per-cpu+memory+swap+disk+net+load",
         _flags(cpu=True, per_cpu=True, memory=True, disk=True, net=True, load=True), 6,
         [stat, meminfo, diskstats, netdev, loadavg]),
        ("seed set", "the seed's cpu+memory+swap+disk+net (Sampler defaults)",
         _flags(cpu=True, memory=True, disk=True, net=True), 7, [stat, meminfo, diskstats, netdev]),
    ]


# ------------------------------------------------------------------------------------------------
# the floor: a C program compiled here
# ------------------------------------------------------------------------------------------------

class Floor:
    def __init__(self, workdir: str) -> None:
        self.error: Optional[str] = None
        self.exe = os.path.join(workdir, "floor")
        cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if cc is None:
            self.error = "no C compiler (cc/gcc/clang) on PATH"
            return
        r = subprocess.run([cc, "-O2", "-o", self.exe, os.path.join(HERE, "floor.c")], capture_output=True,
                           text=True)
        if r.returncode != 0:
            self.error = f"cc failed: {r.stderr.strip()[:500]}"

    def run(self, files: Sequence[tuple], iters: int) -> List[int]:
        """ns per iteration of a tight loop of preads."""
        if self.error:
            return []
        r = subprocess.run([self.exe, str(iters), *(f"{p}:{m}" for p, m in files)], capture_output=True,
                           text=True, check=True)
        return [int(x) for x in r.stdout.split()]

    def paced(self, files: Sequence[tuple], iters: int, interval_ns: int):
        """(cost ns, period ns) per iteration at absolute deadlines; the first period is dropped."""
        if self.error:
            return [], []
        r = subprocess.run([self.exe, "-p", str(interval_ns), str(iters), *(f"{p}:{m}" for p, m in files)],
                           capture_output=True, text=True, check=True)
        a = np.array(r.stdout.split(), dtype=np.int64).reshape(-1, 2)
        return a[:, 0].tolist(), a[1:, 1].tolist()


# ------------------------------------------------------------------------------------------------
# section 1: per-sample cost
# ------------------------------------------------------------------------------------------------

def _time_calls(fn: Callable[[], Any], n: int) -> List[int]:
    out = [0] * n
    for i in range(n):
        t0 = _pc()
        fn()
        out[i] = _pc() - t0
    return out


def _raw_sample(s) -> Callable[[], Any]:
    """The native call alone (returns (ts, ndarray)); Sampler.sample() also builds a dict per call."""
    impl = getattr(s, "_impl", None)
    return impl.sample if impl is not None and hasattr(impl, "sample") else s.sample


def bench_cost(cfg, sysprof, floor: Floor, ctx) -> Dict[str, Any]:
    rounds, n_native, n_psutil, n_floor, t_thread = cfg["cost"]
    sets = metric_sets()
    ps = _psutil_sets()
    samplers = {name: sysprof.Sampler(interval=1e-3, **flags) for name, _, flags, _, _ in sets}
    empty = sysprof.Sampler(interval=1e-3, **NO_SOURCES)
    backend = empty.backend
    raw = {"empty": [], **{name: {"native": [], "floor": [], "psutil": []} for name, *_ in sets}}
    per_round = {name: [] for name, *_ in sets}  # (native net median, floor median) per round
    public = []
    host = samplers["host set"]
    for fn in [_raw_sample(s) for s in samplers.values()] + [p for p in ps]:
        _time_calls(fn, 20)  # warm-up
    for r in range(rounds):
        e = _time_calls(_raw_sample(empty), n_native)
        raw["empty"] += e
        e_med = float(np.median(e))
        for name, _, flags, pi, files in sets:
            f = floor.run(files, n_floor)
            nat = _time_calls(_raw_sample(samplers[name]), n_native)
            psu = _time_calls(ps[pi], n_psutil)
            raw[name]["floor"] += f
            raw[name]["native"] += nat
            raw[name]["psutil"] += psu
            if f:
                per_round[name].append((float(np.median(nat)) - e_med, float(np.median(f))))
        public += _time_calls(host.sample, max(10, n_native // 4))
    e_med = float(np.median(raw["empty"]))
    rows = {}
    for name, desc, flags, pi, files in sets:
        s = samplers[name]
        # the thread's own cost: run at 1 kHz, read stats
        th = sysprof.Sampler(interval=1e-3, **flags)
        th.start()
        time.sleep(t_thread)
        th.stop()
        st = th.stats
        th.drain()
        paced_cost, _ = floor.paced(files, max(10, int(t_thread * 1000)), 1_000_000)
        fp = dist(np.asarray(paced_cost) / 1e3, "us")
        nat = np.asarray(raw[name]["native"], dtype=np.float64)
        native = dist(nat / 1e3, "us")
        native_net = dist((nat - e_med) / 1e3, "us")
        fl = dist(np.asarray(raw[name]["floor"]) / 1e3, "us")
        psu = dist(np.asarray(raw[name]["psutil"]) / 1e3, "us")
        ratios_floor = [a / b for a, b in per_round[name] if b > 0]
        row = {
            "description": desc, "channels": len(s.channels), "files": [p for p, _ in files],
            "native_sample": native, "native_sample_net": native_net,
            "thread": {"taken": st.get("taken"), "sample_ns_mean": st.get("sample_ns_mean"),
                       "sample_ns_p99": st.get("sample_ns_p99"), "sample_ns_max": st.get("sample_ns_max"),
                       "unit": "ns", "n": st.get("taken")},
            "psutil": psu, "floor": fl, "floor_paced_1khz": fp,
            "native_over_floor": (native_net["median"] / fl["median"]) if fl.get("median") else None,
            "native_over_floor_per_round": dist(ratios_floor, "x"),
            "thread_mean_over_paced_floor_mean": ((st.get("sample_ns_mean") or math.nan) / 1e3 / fp["mean"])
            if fp.get("mean") else None,
            "psutil_over_native": (psu["median"] / native["median"]) if native.get("median") else None,
        }
        rows[name] = row
    ctx["host_channels"] = len(host.channels)
    return {
        "backend": backend,
        "method": ("interleaved rounds; each call timed alone with perf_counter_ns; native = the extension's "
                   "sample() (no dict), native_net = native minus the median cost of the same call on a "
                   "sampler with no sources (call + array overhead); floor = C loop of preads (benchmarks/"
                   "floor.c), no parsing; thread = the sampling thread's own stats at 1 kHz, compared with the "
                   "floor paced at 1 kHz (caches cool between ticks in both)"),
        "rounds": rounds, "empty_native_call": dist(np.asarray(raw["empty"]) / 1e3, "us"),
        "public_sample_host_set": dist(np.asarray(public) / 1e3, "us"),
        "floor_error": floor.error, "sets": rows,
    }


def print_cost(res) -> str:
    rows = []
    for name, r in res["sets"].items():
        th = r["thread"]
        rows.append([name, r["channels"], fd(r["native_sample_net"]), fmt(r["native_sample"]["median"]),
                     f"{fmt((th['sample_ns_mean'] or math.nan) / 1e3)} / {fmt((th['sample_ns_p99'] or math.nan) / 1e3)}"
                     f" (n={th['n']})",
                     f"{fmt(r['floor_paced_1khz']['mean'])} / {fmt(r['floor_paced_1khz']['p99'])} "
                     f"(n={r['floor_paced_1khz']['n']})",
                     fd(r["floor"]), fd(r["psutil"]), fmt(r["native_over_floor"]),
                     fmt(r["psutil_over_native"])])
    e = res["empty_native_call"]
    return ("## 1. Per-sample cost (µs)\n\n"
            + table(["set", "ch", "native sample() − call overhead", "native raw median",
                     "thread mean / p99", "floor paced 1 kHz mean / p99", "floor (preads only)", "psutil same metrics", "native/floor",
                     "psutil/native"], rows)
            + f"\n\nempty native call (subtracted): {fd(e)} µs; public Sampler.sample() on the host set "
              f"(builds a dict): {fd(res['public_sample_host_set'])} µs; backend {res['backend']}"
            + (f"\nfloor: not available ({res['floor_error']})" if res["floor_error"] else "") + "\n")


# ------------------------------------------------------------------------------------------------
# section 2: interference with a busy Python main thread
# ------------------------------------------------------------------------------------------------

def _timed_work(n: int):
    """Runs the fixed Python work; returns (start, end) perf_counter seconds and the main thread's CPU seconds."""
    c0 = time.thread_time()
    t0 = time.perf_counter()
    _work(n)
    t1 = time.perf_counter()
    return t0, t1, time.thread_time() - c0


def _work(n: int) -> int:
    acc = 0
    for i in range(n):
        acc = (acc + i * i) % 1000003
    return acc


def _calibrate(seconds: float) -> int:
    n = 50_000
    while True:
        t0 = time.perf_counter()
        _work(n)
        dt = time.perf_counter() - t0
        if dt > 0.05:
            return max(1000, int(n * seconds / dt))
        n *= 4


class SeedBaseline:
    """The seed's design (Composer's SystemProfiler._stats_thread): psutil calls in a Python thread with
    time.sleep(interval). Counter events are built as dicts and kept in a list (the seed hands them to
    ``profiler.marker(...).counter(...)``, which costs more; this baseline is the cheaper side of it)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.stop_event = threading.Event()
        self.count = 0
        self.first_ns: Optional[int] = None  # wall time of the first sample
        self.events: List[tuple] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil

        psutil.disk_io_counters.cache_clear()
        psutil.net_io_counters.cache_clear()
        psutil.cpu_percent()
        ev = self.events
        while not self.stop_event.is_set():
            if self.first_ns is None:
                self.first_ns = time.time_ns()
            ev.append(("cpu", {"cpu_percent": psutil.cpu_percent()}))
            swap = psutil.swap_memory()
            ev.append(("memory/swap", {"used_gb": swap.used / 1e9, "free_gb": swap.free / 1e9}))
            vm = psutil.virtual_memory()
            ev.append(("memory/virtual", {"used_gb": vm.used / 1e9, "available_gb": vm.available / 1e9}))
            for disk, d in psutil.disk_io_counters(perdisk=True).items():
                for field in ("read_count", "write_count", "read_bytes", "write_bytes", "read_time", "write_time",
                              "busy_time"):
                    ev.append((f"disk/{disk}/{field}", {field: getattr(d, field)}))
            for nic, s in psutil.net_io_counters(pernic=True).items():
                ev.append((f"network/{nic}/kb_sent", {"kb_sent": s.bytes_sent / 1e3}))
                ev.append((f"network/{nic}/kb_recv", {"kb_recv": s.bytes_recv / 1e3}))
            self.count += 1
            if len(ev) > 100_000:
                ev.clear()
            time.sleep(self.interval)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join()


def bench_interference(cfg, sysprof, floor: Floor, ctx) -> Dict[str, Any]:
    rounds, trial_s = cfg["interference"]
    n = _calibrate(trial_s)
    rates = (100, 1000, 10_000)
    configs = ["alone"] + [f"sysprof@{r}" for r in rates] + [f"seed@{r}" for r in rates]
    seed_files = metric_sets()[7][4]
    if not floor.error:
        configs.append("floor@1000")  # control: the C floor paced at 1 kHz in another process
    times: Dict[str, List[float]] = {c: [] for c in configs}
    ratios: Dict[str, List[float]] = {c: [] for c in configs[1:]}
    cpu_ratios: Dict[str, List[float]] = {c: [] for c in configs[1:]}
    taken: Dict[str, List[float]] = {c: [] for c in configs[1:]}
    asked: Dict[str, List[float]] = {c: [] for c in configs[1:]}
    w_taken: Dict[str, List[float]] = {c: [] for c in configs[1:]}
    w_asked: Dict[str, List[float]] = {c: [] for c in configs[1:]}
    busy_dev: List[float] = []
    _work(n // 10)  # warm
    for r in range(rounds):
        k = r % len(configs)
        order = configs[k:] + configs[:k]  # rotate ("alone" included) so that no position bias favours one
        t_round: Dict[str, float] = {}
        cpu_round: Dict[str, float] = {}
        for c in order:
            gc.collect()
            if c == "alone":
                t0, t1, cpu_round[c] = _timed_work(n)
                t_round[c] = t1 - t0
                continue
            kind, rate = c.split("@")
            interval = 1.0 / int(rate)
            if kind == "sysprof":
                # the seed's metrics; a ring of 4x the rows expected (a large ring costs page faults at construction)
                s = sysprof.Sampler(interval=interval, capacity=max(1024, int(4 * trial_s / interval)))
                s0 = time.perf_counter()
                s.start()
                t0, t1, cpu_round[c] = _timed_work(n)
                end_ns = time.time_ns()
                s.stop()
                elapsed = time.perf_counter() - s0
                got = s.stats["taken"]
                b = s.drain()
                first_ns = int(b.timestamps_ns[0]) if len(b) else None
                got_window = int(np.count_nonzero(b.timestamps_ns <= end_ns))
                if int(rate) == 1000 and len(b) > 2:
                    busy_dev += (np.abs(np.diff(b.timestamps_ns) - 1e6) / 1e3).tolist()
            elif kind == "floor":
                iters = int(20 * trial_s / interval) + 100  # outlives the loop; terminated below
                s0 = time.perf_counter()
                proc = subprocess.Popen([floor.exe, "-p", str(int(interval * 1e9)), str(iters),
                                         *(f"{p}:{m}" for p, m in seed_files)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(0.005)  # let it start ticking
                t0, t1, cpu_round[c] = _timed_work(n)
                proc.terminate()
                proc.wait()
                t_round[c] = t1 - t0
                continue
            else:
                sb = SeedBaseline(interval)
                s0 = time.perf_counter()
                sb.start()
                t0, t1, cpu_round[c] = _timed_work(n)
                end_ns = time.time_ns()
                got_window = sb.count
                sb.stop()
                elapsed = time.perf_counter() - s0
                got = sb.count
                first_ns = sb.first_ns
            t_round[c] = t1 - t0
            taken[c].append(got)
            asked[c].append(math.floor(elapsed / interval))
            if first_ns is not None and end_ns >= first_ns:
                w_taken[c].append(got_window)
                # Deadlines from the first sample's to the loop's end. The first sample may wake later
                # after its deadline than the others (cold start), so allow half an interval of jitter;
                # otherwise one extra sample per trial reads as more than 100 %.
                w_asked[c].append(math.floor((end_ns - first_ns) / (interval * 1e9) + 0.5) + 1)
        for c, t in t_round.items():
            times[c].append(t)
            if c != "alone":
                ratios[c].append(t / t_round["alone"])
                cpu_ratios[c].append(cpu_round[c] / cpu_round["alone"])
    out = {"work_iterations": n, "rounds": rounds, "trial_seconds": trial_s,
           "method": ("a fixed pure-Python loop (same n every trial) alone and with each sampler running; "
                      "each round runs 'alone' and every config, in an order rotated by one each round; slowdown = median over rounds "
                      "of t(config)/t(alone in the same round) - 1 (wall clock; also given in the main thread's CPU time, which "
                      "leaves out time the loop was descheduled or waited for the GIL); asked = floor(sampler's running time, start() to stop() / interval); deadlines hit = samples taken from the first sample to the end of the loop / the deadlines in that window (leaves out the thread's start-up, a one-off); "
                      "sysprof samples the seed's metrics (cpu, memory+swap, disk, net) and is not drained "
                      "during the loop; floor@1000 is a control: the C floor program reading the same files at 1 kHz "
                      "in another process, i.e. the least any 1 kHz sampler can cost the loop on this machine"),
           "alone_seconds": dist(times["alone"], "s"), "configs": {}}
    for c in configs[1:]:
        if c.startswith("floor"):
            sl = [100.0 * (x - 1) for x in ratios[c]]
            out["configs"][c] = {"loop_seconds": dist(times[c], "s"), "slowdown_percent": dist(sl, "%"),
                                 "cpu_time_slowdown_percent": dist([100.0 * (x - 1) for x in cpu_ratios[c]], "%"),
                                 "control": True}
            continue
        pct = [100.0 * t / a for t, a in zip(taken[c], asked[c]) if a > 0]
        sl = [100.0 * (x - 1) for x in ratios[c]]
        pooled = 100.0 * sum(taken[c]) / sum(asked[c]) if sum(asked[c]) > 0 else None
        w_pooled = 100.0 * sum(w_taken[c]) / sum(w_asked[c]) if sum(w_asked[c]) > 0 else None
        w_pct = [100.0 * t / a for t, a in zip(w_taken[c], w_asked[c]) if a > 0]
        out["configs"][c] = {"loop_seconds": dist(times[c], "s"), "slowdown_percent": dist(sl, "%"),
                             "taken_percent_pooled": pooled,
                             "deadlines_hit_percent_pooled": w_pooled,
                             "deadlines_hit_percent_per_trial": dist(w_pct, "%"),
                             "deadlines_in_window": int(sum(w_asked[c])), "samples_in_window": int(sum(w_taken[c])),
                             "cpu_time_slowdown_percent": dist([100.0 * (x - 1) for x in cpu_ratios[c]], "%"),
                             "taken_percent_of_asked": dist(pct, "%"), "taken": dist(taken[c], "samples"),
                             "asked": dist(asked[c], "samples")}
    ctx["busy_period_dev_us"] = busy_dev
    return out


def print_interference(res) -> str:
    rows = []
    for c, r in res["configs"].items():
        if r.get("control"):
            rows.append([c + " (control)", "-", "-", "-", "-", fd(r["slowdown_percent"]),
                         fd(r["cpu_time_slowdown_percent"])])
            continue
        rows.append([c, f"{fmt(r['deadlines_hit_percent_pooled'])} ({r['samples_in_window']}/{r['deadlines_in_window']})",
                     f"{fmt(r['taken_percent_pooled'])}", fd(r["taken_percent_of_asked"]), f"{fmt(r['taken']['median'])} / {fmt(r['asked']['median'])}",
                     fd(r["slowdown_percent"]), fd(r["cpu_time_slowdown_percent"])])
    return ("## 2. Interference with a busy Python main thread\n\n"
            + f"loop alone: {fd(res['alone_seconds'])} s ({res['work_iterations']:,} iterations, "
              f"{res['rounds']} rounds); other processes kept "
              f"{fmt((res.get('background_load') or {}).get('other_processes_cores'))} of {os.cpu_count()} cores busy "
              f"during this section\n\n"
            + table(["sampler@Hz", "deadlines hit % (all trials)", "taken % of asked incl. start-up", "taken % of asked per trial", "taken / asked (median)", "loop slowdown % (wall)",
                   "slowdown % (main thread CPU time)"], rows) + "\n")


# ------------------------------------------------------------------------------------------------
# section 3: timing quality
# ------------------------------------------------------------------------------------------------

def bench_timing(cfg, sysprof, floor: Floor, ctx) -> Dict[str, Any]:
    seconds = cfg["timing"]
    _, _, flags, _, files = metric_sets()[6]  # host set
    rounds = max(1, int(round(seconds)))
    per_round = seconds / rounds
    parts, floor_periods, floor_costs = [], [], []
    missed = taken = 0
    costs_mean = []
    channels: Sequence[str] = ()
    for r in range(rounds):  # alternate sysprof and the paced floor, so both see the same machine
        s = sysprof.Sampler(interval=1e-3, capacity=1 << 17, **flags)
        channels = s.channels
        s.start()
        t_end = time.monotonic() + per_round
        got = []
        while time.monotonic() < t_end:
            time.sleep(min(0.25, max(0.0, t_end - time.monotonic())))
            got.append(s.drain())
        s.stop()
        got.append(s.drain())
        st = s.stats
        missed += st.get("missed_deadlines") or 0
        taken += st.get("taken") or 0
        costs_mean.append(st.get("sample_ns_mean"))
        parts.append((np.concatenate([g.timestamps_ns for g in got]), np.concatenate([g.values for g in got])))
        fc, fpd = floor.paced(files, max(10, int(per_round * 1000)), 1_000_000)
        floor_costs += fc
        floor_periods += fpd
    ts = np.concatenate([p[0] for p in parts])
    values = np.concatenate([p[1] for p in parts])
    ctx["timing_batch"] = (ts, values, tuple(channels))
    dev = np.concatenate([np.abs(np.diff(p[0]).astype(np.float64) - 1e6) / 1e3 for p in parts if p[0].size > 1])
    fdev = np.abs(np.asarray(floor_periods, dtype=np.float64) - 1e6) / 1e3
    busy = ctx.get("busy_period_dev_us") or []
    return {"interval_us": 1000.0, "seconds": seconds, "rounds": rounds, "set": "host set",
            "channels": len(channels), "rows": int(ts.size), "missed_deadlines": missed, "taken": taken,
            "abs_period_error_us": dist(dev, "us"),
            "floor_abs_period_error_us": dist(fdev, "us") if floor_periods else None,
            "floor_error": floor.error,
            "abs_period_error_us_busy_main_thread": dist(busy, "us") if busy else None,
            "thread_sample_ns_mean": float(np.mean([c for c in costs_mean if c is not None])) if costs_mean else None,
            "method": "rows drained from a 1 kHz host-set sampler while the main thread sleeps; period = "
                      "difference of consecutive wall-clock timestamps; rounds of 1 s alternate with the floor "
                      "program paced at 1 kHz (clock_nanosleep to absolute deadlines + the same preads), which "
                      "shows what this machine's scheduler allows; 'busy' pools the 1 kHz trials of section 2 "
                      "(main thread running Python)"}


def print_timing(res) -> str:
    rows = [["sysprof, idle main thread", fd(res["abs_period_error_us"]), fmt(res["abs_period_error_us"]["max"]),
             res["missed_deadlines"], res["taken"]]]
    if res.get("floor_abs_period_error_us"):
        f = res["floor_abs_period_error_us"]
        rows.append(["floor: C clock_nanosleep loop + preads", fd(f), fmt(f["max"]), "-", "-"])
    if res.get("abs_period_error_us_busy_main_thread"):
        b = res["abs_period_error_us_busy_main_thread"]
        rows.append(["sysprof, busy main thread (sec. 2)", fd(b), fmt(b["max"]), "-", "-"])
    return ("## 3. Timing quality at 1 kHz: |period − interval| (µs)\n\n"
            + table(["sampler", "|period − 1000 µs| median (p99, IQR, n)", "max", "missed deadlines", "taken"], rows)
            + "\n")


# ------------------------------------------------------------------------------------------------
# section 4: marker API (benchmarks/marker_bench.py, written alongside)
# ------------------------------------------------------------------------------------------------

def _load_marker_bench():
    path = os.path.join(HERE, "marker_bench.py")
    if not os.path.exists(path):
        return None, "not available: benchmarks/marker_bench.py does not exist"
    spec = importlib.util.spec_from_file_location("sysprof_marker_bench", path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as exc:  # noqa: BLE001 - a broken helper must not take the suite down
        return None, f"not available: marker_bench.py failed to import: {type(exc).__name__}: {exc}"
    return mod, ""


def _composer_python() -> Optional[str]:
    """An interpreter with Composer: $SYSPROF_COMPOSER_PYTHON, else ../composer-venv (shared/recipes/composer-venv.sh)."""
    for cand in (os.environ.get("SYSPROF_COMPOSER_PYTHON"),
                 os.path.join(os.path.dirname(REPO), "composer-venv", "bin", "python")):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def _composer_elsewhere(calls: int, repeats: int, why_not_here: str):
    """Runs marker_bench.bench_composer in an interpreter that has Composer (list of results, or a reason)."""
    py = _composer_python()
    if py is None:
        return why_not_here
    code = ("import json, sys, tempfile; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
            "import marker_bench\nout = []\n"
            "for _ in range(int(sys.argv[4])):\n"
            "    with tempfile.TemporaryDirectory() as d:\n"
            "        r = marker_bench.bench_composer(int(sys.argv[3]), d)\n"
            "    out.append(r)\n    if isinstance(r, str): break\n"
            "print('@@' + json.dumps(out))\n")
    try:
        r = subprocess.run([py, "-c", code, HERE, REPO, str(calls), str(repeats)], capture_output=True, text=True,
                           timeout=600, cwd=REPO)
        line = [x for x in r.stdout.splitlines() if x.startswith("@@")]
        if r.returncode != 0 or not line:
            return f"{why_not_here}; {py} failed: {(r.stderr or r.stdout).strip()[-300:]}"
        out = json.loads(line[-1][2:])
    except Exception as exc:  # noqa: BLE001
        return f"{why_not_here}; {py}: {type(exc).__name__}: {exc}"
    if out and isinstance(out[-1], str):
        return f"{why_not_here}; {py}: {out[-1]}"
    return out


def bench_marker(cfg, quick: bool) -> Dict[str, Any]:
    """Runs marker_bench.bench_sysprof (and bench_composer when Composer imports) ``repeats`` times."""
    calls, repeats = cfg["marker"]
    mod, why = _load_marker_bench()
    if mod is None:
        return {"available": False, "reason": why}
    if not callable(getattr(mod, "bench_sysprof", None)):
        return {"available": False, "reason": "not available: marker_bench.py has no bench_sysprof(calls, folder)"}
    out: Dict[str, Any] = {"available": True, "calls_per_repeat": calls, "repeats": repeats,
                           "method": "benchmarks/marker_bench.py: per-call µs = median over chunks of 4096 calls "
                                     "(call_us), mean over chunks (call_mean_us), and mean including the deferred "
                                     "JSON encoding and write (with_encode_us); here repeated, spread over repeats",
                           "profilers": {}}
    for label in ("sysprof", "composer"):
        fn = getattr(mod, f"bench_{label}", None)
        if not callable(fn):
            continue
        runs = []
        try:
            for _ in range(repeats):
                with tempfile.TemporaryDirectory() as d:
                    r = fn(calls, d)
                if isinstance(r, str):
                    runs = r
                    break
                runs.append(r)
        except Exception as exc:  # noqa: BLE001
            runs = f"failed: {type(exc).__name__}: {exc}"
        if label == "composer" and isinstance(runs, str) and not quick:
            runs = _composer_elsewhere(calls, repeats, runs)
        if isinstance(runs, str):
            out["profilers"][label] = {"available": False, "reason": runs}
            continue
        ops: Dict[str, Any] = {}
        for op in runs[0]:
            ops[op] = {fig: dist([r[op][fig] for r in runs], "us") for fig in runs[0][op]}
        out["profilers"][label] = {"available": True, "ops": ops}
    return out


def print_marker(res) -> str:
    if not res.get("available"):
        return f"## 4. Marker API\n\n{res['reason']}\n"
    rows = []
    for label, p in res["profilers"].items():
        if not p.get("available"):
            rows.append([label, p["reason"][:100], "-", "-", "-"])
            continue
        for op, figs in p["ops"].items():
            rows.append([label, op, fd(figs.get("call_us", {})), fmt(figs.get("call_mean_us", {}).get("median")),
                         fmt(figs.get("with_encode_us", {}).get("median"))])
    return (f"## 4. Marker API (benchmarks/marker_bench.py, {res['calls_per_repeat']:,} calls × {res['repeats']} "
            f"repeats, µs per call)\n\n"
            + table(["profiler", "operation", "call (median of repeats)", "mean", "+encode"], rows) + "\n")


# ------------------------------------------------------------------------------------------------
# section 5: memory
# ------------------------------------------------------------------------------------------------

def _trace_bytes(rows_ts, values, channels, tmp: str) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    n = int(rows_ts.size)
    if n == 0:
        return {"available": False, "reason": "no rows"}
    for label, writer_path, conv in _converters(channels):
        p = os.path.join(tmp, f"bytes_{label}{writer_path}")
        w = _open_writer(p)
        if w is None:
            return {"available": False, "reason": "sysprof.trace.chrome.ChromeTraceWriter not available"}
        for ev in conv(rows_ts, values):
            w.write(ev)
        w.close()
        out[label + writer_path] = {"bytes_per_sample": os.path.getsize(p) / n, "samples": n}
    return {"available": True, "channels": len(channels), "files": out}


def bench_memory(cfg, sysprof, ctx) -> Dict[str, Any]:
    target, time_limit = cfg["memory"]
    capacity = 16384
    flags = _flags(load=True)
    s = sysprof.Sampler(interval=5e-6, capacity=capacity, **flags)
    width = len(s.channels)
    ring_bytes = capacity * 8 * (1 + width)
    gc.collect()
    rss_constructed = rss_bytes()
    checkpoints = [10 ** k for k in range(3, 7) if 10 ** k <= target] or [target]
    at: Dict[str, Dict[str, Any]] = {}
    total, max_batch = 0, 0
    s.start()
    t0 = time.monotonic()
    while total < target and time.monotonic() - t0 < time_limit:
        time.sleep(0.01)
        b = s.drain()
        total += len(b)
        max_batch = max(max_batch, b.timestamps_ns.nbytes + b.values.nbytes)
        del b
        while checkpoints and total >= checkpoints[0]:
            at[str(checkpoints.pop(0))] = {"samples": total, "rss_bytes": rss_bytes(),
                                           "seconds": time.monotonic() - t0}
    s.stop()
    s.drain()
    st = s.stats
    keys = sorted(at, key=int)
    first, last = (at[keys[0]], at[keys[-1]]) if keys else (None, None)
    growth = (last["rss_bytes"] - first["rss_bytes"]) if keys else None
    allowed = ring_bytes + max_batch
    res = {"interval_us": 5.0, "channels": width, "capacity": capacity, "target_samples": target,
           "samples_drained": total, "seconds": time.monotonic() - t0, "rss_after_construction": rss_constructed,
           "checkpoints": at, "rss_growth_bytes": growth, "ring_bytes": ring_bytes, "largest_batch_bytes": max_batch,
           "allowed_growth_bytes": allowed, "dropped": st.get("dropped"),
           "ring_bytes_per_sample": 8 * (1 + width),
           "ring_bytes_per_sample_host_set": 8 * (1 + ctx.get("host_channels", 0)) if ctx.get("host_channels") else None,
           "method": f"sampler of load/* ({width} channels) at 5 µs, drained every 10 ms and the batches dropped; "
                     "RSS from /proc/self/statm when the drained count first reaches each checkpoint; growth = "
                     "RSS at the last checkpoint - RSS at 10^3; allowed = ring bytes + largest batch"}
    tb = ctx.get("timing_batch")
    if tb is not None:
        tmp = tempfile.mkdtemp(prefix="sysprof-bench-")
        try:
            res["trace"] = _trace_bytes(tb[0], tb[1], tb[2], tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return res


def print_memory(res) -> str:
    rows = [[f"{int(k):,}", f"{v['samples']:,}", f"{v['rss_bytes'] / 2**20:.2f}", f"{v['seconds']:.1f}"]
            for k, v in sorted(res["checkpoints"].items(), key=lambda kv: int(kv[0]))]
    out = ("## 5. Memory\n\n"
           + table(["checkpoint", "samples drained", "RSS MiB", "s"], rows)
           + f"\n\nRSS growth {res['checkpoints'] and list(res['checkpoints'])[0]} -> last: "
             f"{(res['rss_growth_bytes'] or 0) / 1024:.0f} KiB (allowed: ring {res['ring_bytes'] / 1024:.0f} KiB + "
             f"largest batch {res['largest_batch_bytes'] / 1024:.0f} KiB); dropped {res['dropped']}\n"
             f"ring bytes/sample: {res['ring_bytes_per_sample']} ({res['channels']} channels); host set: "
             f"{res['ring_bytes_per_sample_host_set']}\n")
    tr = res.get("trace")
    if tr and tr.get("available"):
        out += "\n" + table(["trace file (host set, " + str(tr["channels"]) + " channels)", "bytes/sample", "n"],
                            [[k, fmt(v["bytes_per_sample"]), v["samples"]] for k, v in tr["files"].items()]) + "\n"
    elif tr:
        out += f"trace bytes: {tr.get('reason')}\n"
    return out


# ------------------------------------------------------------------------------------------------
# section 6: scaling on synthetic trees
# ------------------------------------------------------------------------------------------------

def bench_scaling(cfg, sysprof, ctx) -> Dict[str, Any]:
    cpu_pts, disk_pts, nic_pts, calls = cfg["scaling"]
    tmp = tempfile.mkdtemp(prefix="sysprof-scale-")
    out: Dict[str, Any] = {"method": ("synthetic /proc trees (benchmarks/synthetic_proc.py, static files on "
                                      "the file system: parse cost, not the kernel's rendering cost); one source "
                                      "per sampler; median of the native sample() call; slope = least squares "
                                      "of the medians"), "calls_per_point": calls}
    try:
        for dim, pts, flags in (("cpus", cpu_pts, _flags(cpu=True, per_cpu=True)),
                                ("disks", disk_pts, _flags(disk=True)), ("nics", nic_pts, _flags(net=True))):
            points = []
            for k in pts:
                root = os.path.join(tmp, f"{dim}{k}")
                kw = {"cpus": 2, "disks": 1, "nics": 1}
                kw[dim] = k
                proc, sys_ = synthetic_proc.make_tree(root, **kw)
                s = sysprof.Sampler(interval=1e-3, proc_root=proc, sys_root=sys_, **flags)
                fn = _raw_sample(s)
                _time_calls(fn, 10)
                d = dist(np.asarray(_time_calls(fn, calls)) / 1e3, "us")
                points.append({"count": k, "channels": len(s.channels), "errors": s.errors, "cost_us": d})
                del s
            x = np.array([p["count"] for p in points], dtype=np.float64)
            y = np.array([p["cost_us"]["median"] for p in points], dtype=np.float64)
            slope, icpt = np.polyfit(x, y, 1) if len(x) >= 2 else (math.nan, math.nan)
            pred = slope * x + icpt
            ss = float(np.sum((y - y.mean()) ** 2))
            r2 = 1 - float(np.sum((y - pred) ** 2)) / ss if ss > 0 else None
            out[dim] = {"points": points, "slope_us_per_unit": float(slope), "intercept_us": float(icpt),
                        "r2": r2, "n_points": len(points)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def print_scaling(res) -> str:
    out = "## 6. Scaling on synthetic /proc trees (native sample(), µs)\n\n"
    rows = []
    for dim in ("cpus", "disks", "nics"):
        r = res[dim]
        pts = ", ".join(f"{p['count']}: {fmt(p['cost_us']['median'])}" for p in r["points"])
        rows.append([dim, f"{r['slope_us_per_unit']:.4f}", fmt(r["intercept_us"]), fmt(r["r2"]), pts])
    return out + table(["dimension", "slope µs/unit", "intercept µs", "r²", "count: median µs"], rows) + \
        f"\n\n(n = {res['calls_per_point']} calls per point)\n"


# ------------------------------------------------------------------------------------------------
# section 7: writer throughput
# ------------------------------------------------------------------------------------------------

class _Batch:
    def __init__(self, ts, values, channels):
        self.timestamps_ns, self.values, self.channels = ts, values, tuple(channels)

    def __len__(self):
        return int(self.timestamps_ns.shape[0])


def _minimal_events(channels):
    """Own conversion (used when sysprof.cli has no EventBuilder): one counter event per group and row."""
    groups: Dict[str, List[tuple]] = {}
    for i, ch in enumerate(channels):
        g, _, k = ch.rpartition("/")
        groups.setdefault(g or ch, []).append((i, k))

    def conv(ts, values):
        vals = values.tolist()
        for t, row in zip((ts // 1000).tolist(), vals):
            for g, items in groups.items():
                yield {"name": g, "ph": "C", "ts": t, "pid": 0, "tid": 0, "args": {k: row[i] for i, k in items}}
    return conv


def _converters(channels):
    """[(label, file suffix, conv(ts, values) -> iterable of events)]."""
    out = []
    try:
        from sysprof.trace.tracks import EventBuilder
    except Exception:  # noqa: BLE001
        EventBuilder = None
    if EventBuilder is not None:
        for changes_only in (True, False):
            def conv(ts, values, _c=changes_only):
                eb = EventBuilder(channels, system_pid=0, changes_only=_c)
                step = 1000
                for i in range(0, ts.size, step):
                    yield from eb.events(_Batch(ts[i:i + step], values[i:i + step], channels))
                yield from eb.finish()
            out.append((f"cli.EventBuilder(changes_only={changes_only})", ".json", conv))
    else:
        out.append(("minimal (own)", ".json", _minimal_events(channels)))
    return out


def _open_writer(path):
    try:
        from sysprof.trace.chrome import ChromeTraceWriter
    except Exception:  # noqa: BLE001
        return None
    return ChromeTraceWriter(path, overwrite=True)


def bench_writer(cfg, sysprof, ctx) -> Dict[str, Any]:
    trials = cfg["writer"]
    tb = ctx.get("timing_batch")
    if tb is None or tb[0].size == 0:
        return {"available": False, "reason": "no drained batch (section 3 did not run)"}
    ts, values, channels = tb
    tmp = tempfile.mkdtemp(prefix="sysprof-writer-")
    res: Dict[str, Any] = {"samples": int(ts.size), "channels": len(channels), "trials": trials,
                           "method": "rows drained at 1 kHz (host set, section 3) converted in batches of 1000 "
                                     "rows and written through sysprof.trace.chrome.ChromeTraceWriter; each trial "
                                     "times conversion + writing + close", "modes": {}}
    try:
        if _open_writer(os.path.join(tmp, "probe.json")) is None:
            res.update(available=False, reason="sysprof.trace.chrome.ChromeTraceWriter not available")
            return res
        res["available"] = True
        for label, suffix, conv in _converters(channels):
            sps, bps, eps = [], [], []
            for t in range(trials):
                p = os.path.join(tmp, f"w{t}{suffix}")
                gc.collect()
                t0 = time.perf_counter()
                w = _open_writer(p)
                nev = 0
                for ev in conv(ts, values):
                    w.write(ev)
                    nev += 1
                w.close()
                dt = time.perf_counter() - t0
                size = os.path.getsize(p)
                sps.append(ts.size / dt)
                bps.append(size / dt)
                eps.append(nev / dt)
                os.unlink(p)
            share = 100.0 * 1000.0 / float(np.median(sps))
            res["modes"][label] = {"samples_per_s": dist(sps, "samples/s"), "bytes_per_s": dist(bps, "B/s"),
                                   "events_per_s": dist(eps, "events/s"),
                                   "cpu_percent_of_one_core_at_1kHz": share}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return res


def print_writer(res) -> str:
    if not res.get("available"):
        return f"## 7. Writer throughput\n\nnot available: {res.get('reason')}\n"
    rows = [[k, fd(v["samples_per_s"]), fmt(v["bytes_per_s"]["median"] / 1e6), fmt(v["events_per_s"]["median"]),
             f"{v['cpu_percent_of_one_core_at_1kHz']:.1f} %"] for k, v in res["modes"].items()]
    return (f"## 7. Writer throughput ({res['samples']:,} samples × {res['channels']} channels, "
            f"{res['trials']} trials)\n\n"
            + table(["conversion", "samples/s", "MB/s", "events/s", "one core's share at 1 kHz"], rows) + "\n")


# ------------------------------------------------------------------------------------------------
# goals
# ------------------------------------------------------------------------------------------------

def goals(results) -> List[Dict[str, Any]]:
    g: List[Dict[str, Any]] = []

    def add(name, target, measured, ok, detail):
        g.append({"goal": name, "target": target, "measured": measured, "ok": ok, "detail": detail})

    c = results.get("cost")
    if c and "sets" in c:
        for set_name in ("host set", "seed set"):
            r = c["sets"][set_name]
            ratio = r["native_over_floor"]
            pr = r["native_over_floor_per_round"]
            add(f"native ≤ 1.25 × floor ({set_name})", "≤ 1.25", ratio,
                None if ratio is None else ratio <= 1.25,
                f"native−overhead {fmt(r['native_sample_net']['median'])} µs vs floor "
                f"{fmt(r['floor']['median'])} µs (medians, n={r['native_sample_net']['n']}/{r['floor']['n']}); "
                f"per round {fmt(pr['min'])}–{fmt(pr['max'])} (n={pr['n']})")
            x = r["psutil_over_native"]
            pf = (r["psutil"]["median"] / r["floor"]["median"]) if r["floor"].get("median") else None
            add(f"≥ 15 × cheaper than psutil ({set_name})", "≥ 15", x, x is not None and x >= 15,
                f"psutil {fmt(r['psutil']['median'])} µs (p99 {fmt(r['psutil']['p99'])}, n={r['psutil']['n']}) vs "
                f"native {fmt(r['native_sample']['median'])} µs (p99 {fmt(r['native_sample']['p99'])}, "
                f"n={r['native_sample']['n']}); psutil is {fmt(pf)} × the floor here, the most any reader of "
                f"these files can gain")
    i = results.get("interference")
    if i and "configs" in i:
        r = i["configs"]["sysprof@1000"]
        tp = r["taken_percent_of_asked"]
        pooled = r["deadlines_hit_percent_pooled"]
        wt = r["deadlines_hit_percent_per_trial"]
        add("≥ 99 % of asked samples at 1 kHz (busy main thread)", "≥ 99 %", pooled,
            pooled is not None and pooled >= 99,
            f"{r['samples_in_window']} of {r['deadlines_in_window']} deadlines from first sample to loop end, "
            f"{i['rounds']} trials; per trial median {fmt(wt['median'])} %, min {fmt(wt['min'])} %; counting the "
            f"thread's start-up too: {fmt(r['taken_percent_pooled'])} % (per trial median {fmt(tp['median'])} %); "
            f"seed baseline {fmt(i['configs']['seed@1000']['deadlines_hit_percent_pooled'])} %")
        sl = r["slowdown_percent"]
        add("loop slowdown ≤ 1 % at 1 kHz", "≤ 1 %", sl["median"], sl["median"] is not None and sl["median"] <= 1,
            f"median {fmt(sl['median'])} %, IQR {fmt(sl['p25'])}–{fmt(sl['p75'])} % (n={sl['n']}); in main-thread CPU "
            f"time {fmt(r['cpu_time_slowdown_percent']['median'])} %; control (C floor at 1 kHz in another process) "
            f"{fmt(((i['configs'].get('floor@1000') or {}).get('slowdown_percent') or {}).get('median'))} %; "
            f"other processes kept "
            f"{fmt((i.get('background_load') or {}).get('other_processes_cores'))} cores busy; seed baseline: "
            f"{fmt(i['configs']['seed@1000']['taken_percent_of_asked']['median'])} % taken, "
            f"{fmt(i['configs']['seed@1000']['slowdown_percent']['median'])} % slowdown")
    t = results.get("timing")
    if t and "abs_period_error_us" in t:
        d = t["abs_period_error_us"]
        add("timing p99 |period − interval| ≤ 10 % of interval (1 kHz, free core)", "≤ 100 µs", d["p99"],
            d["p99"] is not None and d["p99"] <= 100,
            f"p50 {fmt(d['median'])} µs, p99 {fmt(d['p99'])} µs, max {fmt(d['max'])} µs (n={d['n']}); the C floor "
            f"loop on this machine: p99 {fmt((t.get('floor_abs_period_error_us') or {}).get('p99'))} µs; other "
            f"processes kept {fmt((t.get('background_load') or {}).get('other_processes_cores'))} of {os.cpu_count()} cores "
            f"busy (the goal's condition, a free core, holds only when that is below {max(0, (os.cpu_count() or 1) - 1)})")
    m = results.get("marker")
    if m is not None:
        sp = m.get("profilers", {}).get("sysprof") if m.get("available") else None
        if not sp or not sp.get("available"):
            add("marker call ≤ 1 µs", "≤ 1 µs", None, None,
                (sp or {}).get("reason") or m.get("reason", "not available"))
        else:
            comp = m["profilers"].get("composer") or {}
            for op, figs in sp["ops"].items():
                d = figs.get("call_us", {})
                cd = comp.get("ops", {}).get(op, {}).get("call_us", {}) if comp.get("available") else {}
                add(f"marker {op} ≤ 1 µs", "≤ 1 µs", d.get("median"),
                    d.get("median") is not None and d["median"] <= 1.0,
                    f"median of {d.get('n')} repeats {fmt(d.get('median'))} µs (min {fmt(d.get('min'))}, max "
                    f"{fmt(d.get('max'))}); +encode {fmt(figs.get('with_encode_us', {}).get('median'))} µs"
                    + (f"; Composer {fmt(cd.get('median'))} µs" if cd else "; Composer not importable"))
    mem = results.get("memory")
    if mem and "rss_growth_bytes" in mem:
        gb = mem["rss_growth_bytes"]
        add("memory: no RSS growth beyond ring + output", f"≤ {mem['allowed_growth_bytes']} B", gb,
            gb is not None and gb <= mem["allowed_growth_bytes"],
            f"{mem['samples_drained']:,} samples (target {mem['target_samples']:,}); growth {gb} B from 10^3")
    w = results.get("writer")
    if w and w.get("available"):
        for label, r in w["modes"].items():
            sps = r["samples_per_s"]
            add(f"writer keeps up with 1 kHz ({label})", "≥ 1000 samples/s", sps["median"],
                sps["min"] is not None and sps["min"] >= 1000,
                f"median {fmt(sps['median'])} samples/s (min {fmt(sps['min'])}, n={sps['n']}), "
                f"{r['cpu_percent_of_one_core_at_1kHz']:.1f} % of a core at 1 kHz")
    return g


def print_goals(g) -> str:
    rows = []
    for x in g:
        status = "n/a" if x["ok"] is None else ("ok" if x["ok"] else "MISSED")
        rows.append([x["goal"], x["target"], fmt(x["measured"]) if isinstance(x["measured"], (int, float)) else "-",
                     status, x["detail"]])
    out = "## Goals\n\n" + table(["goal", "target", "measured", "status", "detail"], rows) + "\n"
    for x in g:
        if x["ok"] is False:
            out += f"MISSED: {x['goal']}: measured {fmt(x['measured'])} (target {x['target']}); {x['detail']}\n"
    return out


# ------------------------------------------------------------------------------------------------
# main
# ------------------------------------------------------------------------------------------------

def config(quick: bool) -> Dict[str, Any]:
    if quick:
        return {"cost": (2, 300, 60, 300, 0.2), "interference": (7, 0.1), "timing": 1.0,
                "memory": (100_000, 8.0),
                "scaling": ([2, 64, 1024], [1, 16, 256], [1, 16, 256], 40), "writer": 1,
                "marker": (20_000, 1)}
    return {"cost": (5, 2000, 300, 2000, 1.0), "interference": (15, 0.25), "timing": 5.0,
            "memory": (1_000_000, 45.0),
            "scaling": ([2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], [1, 2, 4, 8, 16, 32, 64, 128, 256],
                        [1, 2, 4, 8, 16, 32, 64, 128, 256], 300), "writer": 3,
            "marker": (100_000, 3)}


def _busy_ticks() -> Optional[tuple]:
    """(busy seconds of the whole machine, this process's CPU seconds, monotonic time)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    hz = os.sysconf("SC_CLK_TCK")
    t = os.times()
    return (sum(v) - v[3] - v[4]) / hz, t.user + t.system, time.monotonic()


def background_load(a, b) -> Optional[Dict[str, float]]:
    """CPU cores kept busy by other processes between two _busy_ticks() readings (ours subtracted)."""
    if not a or not b or b[2] <= a[2]:
        return None
    dt = b[2] - a[2]
    return {"other_processes_cores": max(0.0, ((b[0] - a[0]) - (b[1] - a[1])) / dt),
            "this_process_cores": (b[1] - a[1]) / dt, "seconds": dt}


def machine_info() -> Dict[str, Any]:
    info = {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
            "machine": platform.machine()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        import psutil
        info["psutil"] = psutil.__version__
    except Exception:  # noqa: BLE001
        pass
    return info


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/run.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="short run (~30 s) with fewer samples (scaled counts)")
    ap.add_argument("--json", default=DEFAULT_JSON,
                    help=f"where to write the results (default {DEFAULT_JSON}); the table goes beside it as .md")
    ap.add_argument("--only", nargs="+", choices=SECTIONS, help="run only these sections")
    ap.add_argument("--no-table", action="store_true", help="do not print the tables")
    args = ap.parse_args(argv)

    import sysprof

    cfg = config(args.quick)
    busy0 = _busy_ticks()
    load0 = os.getloadavg()
    wanted = args.only or list(SECTIONS)
    t_start = time.perf_counter()
    results: Dict[str, Any] = {}
    ctx: Dict[str, Any] = {}
    printers = {"cost": print_cost, "interference": print_interference, "timing": print_timing,
                "marker": print_marker, "memory": print_memory, "scaling": print_scaling, "writer": print_writer}
    probe = sysprof.Sampler(interval=1e-3, **NO_SOURCES)
    backend = probe.backend
    del probe
    tmp = tempfile.mkdtemp(prefix="sysprof-bench-")
    text: List[str] = []
    try:
        floor = Floor(tmp)
        # Order matters: interference fills ctx for timing (busy periods); timing fills the batch for memory and writer.
        order = [s for s in ("cost", "interference", "timing", "marker", "memory", "scaling", "writer") if s in wanted]
        if ("memory" in order or "writer" in order) and "timing" not in order:
            order.insert(0, "timing")  # they need its batch
        for name in order:
            t0 = time.perf_counter()
            b0 = _busy_ticks()
            print(f"[bench] {name} ...", file=sys.stderr, flush=True)
            if backend != "native" and name in ("cost", "scaling"):
                results[name] = {"available": False, "reason": f"needs the native backend (have {backend})"}
            elif name == "cost":
                results[name] = bench_cost(cfg, sysprof, floor, ctx)
            elif name == "interference":
                results[name] = bench_interference(cfg, sysprof, floor, ctx)
            elif name == "timing":
                results[name] = bench_timing(cfg, sysprof, floor, ctx)
            elif name == "marker":
                results[name] = bench_marker(cfg, args.quick)
            elif name == "memory":
                results[name] = bench_memory(cfg, sysprof, ctx)
            elif name == "scaling":
                results[name] = bench_scaling(cfg, sysprof, ctx)
            elif name == "writer":
                results[name] = bench_writer(cfg, sysprof, ctx)
            results[name]["seconds"] = time.perf_counter() - t0
            results[name]["background_load"] = background_load(b0, _busy_ticks())
            if results[name].get("available") is False and name in ("cost", "scaling"):
                text.append(f"## {name}\n\nnot available: {results[name]['reason']}\n")
            else:
                text.append(printers[name](results[name]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    g = goals(results)
    text.append(print_goals(g))
    total = time.perf_counter() - t_start
    bg = background_load(busy0, _busy_ticks())
    header = (f"# sysprof benchmarks ({'quick' if args.quick else 'default'} run, {total:.0f} s)\n\n"
              f"{machine_info().get('cpu_model', '?')}, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
              f"backend {backend}; load average at start {load0[0]:.2f}; other processes kept "
              f"{(bg or {}).get('other_processes_cores', math.nan):.2f} of {os.cpu_count()} cores busy on average "
              f"during the run (per section in the JSON)\n")
    if not args.no_table:
        print(header + "\n" + "\n".join(text))
    doc = {"schema": 1, "quick": args.quick, "seconds": total, "backend": backend,
           "sysprof_version": getattr(sysprof, "__version__", None), "machine": machine_info(),
           "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "loadavg_at_start": list(load0),
           "background_load": bg, "sections": results, "goals": g}
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))
    md = os.path.splitext(os.path.abspath(args.json))[0] + ".md"
    with open(md, "w") as f:
        f.write(header + "\n" + "\n".join(text))
    print(f"[bench] wrote {args.json} and {md} ({total:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
