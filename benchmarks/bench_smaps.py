#!/usr/bin/env python3
"""Benchmark: what one read of /proc/<pid>/smaps_rollup costs, against /proc/<pid>/stat (process_tree's Pss).

    python benchmarks/bench_smaps.py [--quick] [--big-mib 1024]

smaps_rollup makes the kernel walk every page table entry of the process (fs/proc/task_mmu.c, show_smaps_rollup
-> walk_page_vma per mapping), so its cost grows with the resident set; stat is a fixed-size render. Both are read
as process_tree reads them: kept open, pread at offset 0, one read per call. Measured for a small process (a
fresh `sleep`), for one holding --big-mib MiB of touched anonymous memory, and for this Python process; the
table gives n, median, p99 and IQR per read, and the share of one core that reading each member every 100 ms
(csrc/sources/process_tree_smaps.hpp kPeriodNs) takes. What follows from it: the reads cannot share the sampling
thread (a 265 MiB member took ~26 ms here, 26 whole rows at 1 ms), so a helper thread makes them, every 100 ms
for small trees, and 20 passes' time apart where a pass takes over 5 ms (at most 5 % of a core).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from bench_util import dist, fd, fmt, table  # noqa: E402

SMAPS_PERIOD_S = 0.1  # csrc/sources/process_tree_smaps.hpp kPeriodNs
_HOLD = ("import sys, signal\n"
         "b = bytearray({n})\n"
         "b[::4096] = b'\\x01' * len(range(0, {n}, 4096))  # every page resident\n"
         "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
         "signal.pause()\n")


def _reads(path: str, n: int) -> List[int]:
    """ns per pread of the whole file at offset 0, the file kept open."""
    fd_ = os.open(path, os.O_RDONLY)
    try:
        os.pread(fd_, 1 << 16, 0)  # warm
        out = []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            os.pread(fd_, 1 << 16, 0)
            out.append(time.perf_counter_ns() - t0)
        return out
    finally:
        os.close(fd_)


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Rss:"):
                return int(line.split()[1])
    return 0


def bench_smaps(cfg: Dict[str, Any], sysprof=None) -> Dict[str, Any]:
    """cfg: ``reads`` (per file and process) and ``big_mib`` (the large process's resident MiB). sysprof unused:
    this measures the kernel's side, which is the same for both backends."""
    if not os.path.exists("/proc/self/smaps_rollup"):
        return {"available": False, "reason": "no /proc/<pid>/smaps_rollup (Linux < 4.14, or no /proc)"}
    n, big = int(cfg.get("reads", 2000)), int(cfg.get("big_mib", 1024))
    procs = {"small (sleep)": subprocess.Popen(["sleep", "600"])}
    hold = subprocess.Popen([sys.executable, "-c", _HOLD.format(n=big << 20)], stdout=subprocess.PIPE, text=True)
    try:
        if hold.stdout.readline().strip() == "ready":
            procs[f"large ({big} MiB touched)"] = hold
        rows = []
        for label, pid in [(k, p.pid) for k, p in procs.items()] + [("this Python", os.getpid())]:
            stat = dist(_reads(f"/proc/{pid}/stat", n), "ns")
            smaps = dist(_reads(f"/proc/{pid}/smaps_rollup", n), "ns")
            rows.append({"process": label, "rss_bytes": _rss_kb(pid) * 1024, "stat": stat, "smaps_rollup": smaps,
                         "ratio": smaps["median"] / stat["median"] if stat["median"] else None,
                         "core_share_at_period": smaps["median"] * 1e-9 / SMAPS_PERIOD_S})
        return {"available": True, "period_s": SMAPS_PERIOD_S, "reads": n, "rows": rows}
    finally:
        for p in list(procs.values()) + [hold]:
            p.kill()
            p.wait()


def print_smaps(res: Dict[str, Any]) -> str:
    if not res.get("available"):
        return f"## smaps_rollup read cost\n\n{res['reason']}\n"
    rows = [[r["process"], fmt(r["rss_bytes"] / 2**20), fd({k: v / 1e3 if isinstance(v, float) else v
                                                           for k, v in r["stat"].items()}),
             fd({k: v / 1e3 if isinstance(v, float) else v for k, v in r["smaps_rollup"].items()}),
             fmt(r["ratio"]), f"{100 * r['core_share_at_period']:.3f} %"] for r in res["rows"]]
    head = ["process", "RSS MiB", "stat µs: median (p99, IQR, n)", "smaps_rollup µs: median (p99, IQR, n)",
            "smaps/stat", f"one core, every {res['period_s'] * 1e3:.0f} ms"]
    return ("## smaps_rollup read cost (process_tree's Pss)\n\n" + table(head, rows) + "\n\nOne pread of the open "
            "file at offset 0, as process_tree reads it; the last column: one member's smaps_rollup at the default "
            "rate, as a share of one core.\n")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--quick", action="store_true", help="fewer reads, a 256 MiB large process")
    ap.add_argument("--big-mib", type=int, default=None)
    a = ap.parse_args()
    c = {"reads": 300 if a.quick else 2000, "big_mib": a.big_mib or (256 if a.quick else 1024)}
    print(print_smaps(bench_smaps(c)))
