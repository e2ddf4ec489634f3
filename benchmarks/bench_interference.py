"""Benchmark sections 2 and 3: interference with a pure-Python compute loop (sysprof, the seed's design, the C
floor) and sampling-period timing at 1 kHz."""
from __future__ import annotations

import gc
import math
import os
import subprocess
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from bench_util import dist, fmt, fd, table, metric_sets, Floor


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
