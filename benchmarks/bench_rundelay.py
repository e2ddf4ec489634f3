#!/usr/bin/env python3
"""Benchmark: what process_tree's run delay costs (each thread's /proc/<pid>/task/<tid>/schedstat).

    python benchmarks/bench_rundelay.py [--quick]

The run delay of a tree is the sum over its threads, one schedstat file each (/proc/<pid>/schedstat is the main
thread's only), so its cost grows with the threads, where the rest of a tick grows with the processes. Measured on
three targets -- a process of 1 thread, one of 64 (a PyTorch main process on a large machine has one per core),
and a DataLoader-like tree (a root of 16 threads, 8 workers of 2: 32 threads) -- in interleaved rounds:

* the kernel's side: one pread of a thread's schedstat against one of its process's stat, both kept open and read
  at offset 0 as process_tree reads them (the stat of a many-threaded process sums its threads' times: it grows
  too);
* the sampling thread's tick with process_tree alone following the target at 10 ms (stats ``sample_ns_mean``; the
  source reads at most interval / 125 us threads a tick, 80 at 10 ms, so every thread of these targets each tick),
  and the run delay's estimated part of it: the target's threads x the schedstat read's median.

Reported: medians with p99 and IQR, the ratio schedstat/stat, and the run delay's share of one core at 10 ms (the
threads' reads per second). What follows: a read is a fraction of a stat read; the cost is per thread, bounded per
tick by the budget, so a 64-thread tree at 1 ms is read over 8 ticks (its total lags by as many intervals).
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

from bench_util import NO_SOURCES, dist, fd, fmt, table  # noqa: E402

INTERVAL_S = 0.01
#: a process of N idle threads (the main thread and N - 1 waiting on an event), then `ready`
_THREADS = ("import sys, threading\n"
            "e = threading.Event()\n"
            "for _ in range({n} - 1):\n"
            "    threading.Thread(target=e.wait, daemon=True).start()\n"
            "{spawn}"
            "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
            "e.wait()\n")
_WORKERS = ("import subprocess\n"
            "kids = [subprocess.Popen([sys.executable, '-c', 'import threading; e = threading.Event(); "
            "threading.Thread(target=e.wait, daemon=True).start(); e.wait()']) for _ in range({k})]\n")


def _start(n: int, workers: int = 0) -> subprocess.Popen:
    spawn = _WORKERS.format(k=workers) if workers else ""
    p = subprocess.Popen([sys.executable, "-c", _THREADS.format(n=n, spawn=spawn)], stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "ready":
        raise RuntimeError("target did not start")
    return p


def _members(pid: int) -> List[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for t in os.listdir(f"/proc/{p}/task"):
            try:
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo += [int(c) for c in f.read().split()]
            except OSError:
                pass
    return out


def _threads(pid: int) -> List[str]:
    return [f"/proc/{m}/task/{t}/schedstat" for m in _members(pid) for t in os.listdir(f"/proc/{m}/task")]


def _reads(path: str, n: int) -> List[int]:
    """ns per pread of the whole file at offset 0, the file kept open."""
    f = os.open(path, os.O_RDONLY)
    try:
        os.pread(f, 4096, 0)
        out = []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            os.pread(f, 4096, 0)
            out.append(time.perf_counter_ns() - t0)
        return out
    finally:
        os.close(f)


def _tick_ns(sysprof, pid: int, seconds: float) -> float:
    s = sysprof.Sampler(interval=INTERVAL_S, pid=pid, **dict(NO_SOURCES, process_tree=True))
    s.start()
    time.sleep(seconds)
    s.stop()
    s.drain()
    return float(s.stats.get("sample_ns_mean") or float("nan"))


def bench_rundelay(cfg: Dict[str, Any], sysprof=None) -> Dict[str, Any]:
    """cfg: ``reads`` (per file and round), ``rounds``, ``seconds`` (the sampling thread's run per round)."""
    if not os.path.exists(f"/proc/self/task/{os.getpid()}/schedstat"):
        return {"available": False, "reason": "no /proc/<pid>/task/<tid>/schedstat (a kernel without "
                                              "CONFIG_SCHED_INFO): the run delay reads NaN, at no cost"}
    if sysprof is None:
        import sysprof
    native = sysprof.Sampler(interval=INTERVAL_S, **NO_SOURCES).backend == "native"
    n, rounds, seconds = int(cfg.get("reads", 2000)), int(cfg.get("rounds", 3)), float(cfg.get("seconds", 1.0))
    targets = {"1 thread": (1, 0), "64 threads": (64, 0), "tree: 16 threads + 8 workers of 2": (16, 8)}
    procs = {k: _start(*v) for k, v in targets.items()}
    try:
        for k, (threads, workers) in targets.items():  # the workers and their threads started (bounded)
            deadline = time.monotonic() + 10
            while len(_threads(procs[k].pid)) < threads + 2 * workers and time.monotonic() < deadline:
                time.sleep(0.05)
        raw = {k: {"schedstat": [], "stat": [], "tick": []} for k in targets}
        files = {k: _threads(p.pid) for k, p in procs.items()}
        for _ in range(rounds):
            for k, p in procs.items():
                raw[k]["schedstat"] += _reads(files[k][0], n)
                raw[k]["stat"] += _reads(f"/proc/{p.pid}/stat", n)
                if native:
                    raw[k]["tick"].append(_tick_ns(sysprof, p.pid, seconds))
        rows = []
        for k in targets:
            sched, stat = dist(raw[k]["schedstat"], "ns"), dist(raw[k]["stat"], "ns")
            tick = dist(raw[k]["tick"], "ns")
            threads = len(files[k])
            part = threads * sched["median"]
            rows.append({"target": k, "threads": threads, "processes": len(_members(procs[k].pid)),
                         "schedstat": sched, "stat": stat, "ratio": sched["median"] / stat["median"],
                         "tick": tick, "run_delay_part_of_tick": part / tick["median"] if tick["n"] else None,
                         "core_share_at_10ms": part * 1e-9 / INTERVAL_S})
        return {"available": True, "interval_s": INTERVAL_S, "reads": n, "rounds": rounds, "native": native,
                "rows": rows}
    finally:
        for p in procs.values():
            for m in reversed(_members(p.pid)):
                if m != p.pid:
                    try:
                        os.kill(m, 9)
                    except OSError:
                        pass
            p.kill()
            p.wait()


def print_rundelay(res: Dict[str, Any]) -> str:
    if not res.get("available"):
        return f"## process_tree run delay cost\n\n{res['reason']}\n"

    def us(d):
        return fd({k: v / 1e3 if isinstance(v, float) else v for k, v in d.items()})

    rows = [[r["target"], r["threads"], us(r["schedstat"]), us(r["stat"]), fmt(r["ratio"]), us(r["tick"]),
             "-" if r["run_delay_part_of_tick"] is None else f"{100 * r['run_delay_part_of_tick']:.0f} %",
             f"{100 * r['core_share_at_10ms']:.2f} %"] for r in res["rows"]]
    head = ["target", "threads", "schedstat µs/read", "stat µs/read", "schedstat/stat",
            "tick µs (process_tree, 10 ms)", "run delay's part", "one core at 10 ms"]
    return ("## process_tree run delay cost\n\n" + table(head, rows) + "\n\nOne pread of the open file at offset 0; "
            "the tick: the sampling thread's mean per sample with process_tree alone; the run delay's part: the "
            "threads x the schedstat median, of that tick; the last column: those reads every 10 ms, as a share "
            "of one core.\n")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--quick", action="store_true", help="fewer reads and rounds")
    a = ap.parse_args()
    print(print_rundelay(bench_rundelay({"reads": 300, "rounds": 2, "seconds": 0.5} if a.quick else
                                        {"reads": 2000, "rounds": 5, "seconds": 2.0})))
