"""Shared pieces of the benchmark suite (benchmarks/run.py): statistics and tables, the metric sets, the C floor
and call timing."""
from __future__ import annotations

import math
import os
import shutil
import subprocess
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
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


BOOT = 4000  # bootstrap resamples (seeded)
TRIM = 0.1  # the trimmed mean drops this share at each end


def boot_ci(values: Sequence[float], seed: int = 15) -> Dict[str, Any]:
    """Median and trimmed mean (TRIM at each end) of ``values`` (one per pair, quad, ...) with 95 % bootstrap
    percentile intervals (BOOT resamples, seeded: the same data give the same interval)."""
    d = np.asarray(values, dtype=np.float64)
    d = d[np.isfinite(d)]
    n = d.size
    if n < 2:
        return {"n": int(n), "median": None, "median_ci": [None, None], "trimmed": None, "trimmed_ci": [None, None],
                "mean": None}
    k = int(TRIM * n)

    def trimmed(x):
        return np.sort(x, axis=-1)[..., k:n - k].mean(axis=-1)

    rs = d[np.random.default_rng(seed).integers(0, n, (BOOT, n))]
    med, trm = np.median(rs, axis=1), trimmed(rs)
    return {"n": int(n), "median": float(np.median(d)), "median_ci": [float(x) for x in np.percentile(med, [2.5, 97.5])],
            "trimmed": float(trimmed(d)), "trimmed_ci": [float(x) for x in np.percentile(trm, [2.5, 97.5])],
            "mean": float(d.mean())}


def verdict(ci: Sequence[Optional[float]], goal: float, n: int, min_n: int = 10, width: Optional[float] = None) -> str:
    """A goal "at most ``goal``" against a 95 % interval: ok if its upper bound is within the goal; missed if its
    lower bound is above it; else not resolvable when the interval is wider than ``width`` (default: the goal
    itself, for a goal on a difference near 0), borderline when narrower. Fewer than ``min_n`` values: too few."""
    lo, hi = ci
    if lo is None or hi is None or n < min_n:
        return f"too few ({n})"
    if hi <= goal:
        return "ok"
    if lo > goal:
        return "missed"
    return "not resolvable" if hi - lo > (goal if width is None else width) else "borderline"


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

def compile_c(src: str, exe: str) -> Optional[str]:
    """Compiles one C file with the first of cc, gcc, clang on PATH (-O2); None, or why it could not."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        return "no C compiler (cc/gcc/clang) on PATH"
    r = subprocess.run([cc, "-O2", "-o", exe, src], capture_output=True, text=True)
    return f"cc failed: {r.stderr.strip()[:500]}" if r.returncode != 0 else None


class Floor:
    def __init__(self, workdir: str) -> None:
        self.exe = os.path.join(workdir, "floor")
        self.error: Optional[str] = compile_c(os.path.join(HERE, "floor.c"), self.exe)

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
