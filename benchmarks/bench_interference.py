"""Benchmark sections 2 and 3: interference with a busy pure-Python main thread (sysprof's native sampler and the
seed's design, on a quiet machine and with every core busy) and sampling-period timing at 1 kHz."""
from __future__ import annotations

import gc
import math
import os
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from bench_busy import (A, Spinners, against_neighbours, machine_cpu_seconds, other_cores, read_schedstat, schedule,
                        self_cpu_seconds, task_schedstat, tids_named)
from bench_util import NO_SOURCES, dist, fmt, fd, table, metric_sets, Floor


# ------------------------------------------------------------------------------------------------
# section 2: interference with a busy Python main thread
# ------------------------------------------------------------------------------------------------

PROTOCOL_LOOP_S, PROTOCOL_PAIRS = 2.0, 9  # issue 11: a loop of >= 2 s, >= 9 interleaved pairs
SAMPLER_SET = "host set"  # the native sampler's sources (bench_util.metric_sets)
QUIET_PRIMARY = ("none", "sysprof@1000", "seed@1000")  # every round ("none": the loop alone in a B slot)
QUIET_SECONDARY = ("sysprof@100", "sysprof@10000", "seed@100", "seed@10000")  # every SECONDARY_EVERY-th round
BUSY_PRIMARY = ("none", "sysprof@1000")
BUSY_SECONDARY = ("empty@1000",)  # a control: the native thread's 1 kHz wake-ups with no source
SECONDARY_EVERY = 5
SETTLE_S = 0.02
QUIET_OTHER_CORES = 0.25  # other processes' load above which the quiet phase is marked "not quiet"


def _work(n: int) -> int:
    """Pure-Python arithmetic: holds the GIL, allocates no containers (no gc), touches no memory to speak of."""
    acc = 0
    for i in range(n):
        acc = (acc + i * i) % 1000003
    return acc


def _calibrate(seconds: float, tries: int = 5) -> int:
    """Iterations of _work that take ``seconds`` (5 % over) at the fastest of ``tries`` short runs: on this
    shared machine a thread's speed (wall and CPU time alike) varies by tens of % with what else runs, so a loop
    sized at the fastest rate seen lasts at least ``seconds`` whenever it runs slower than that."""
    n = 50_000
    while True:
        t0 = time.perf_counter()
        _work(n)
        if time.perf_counter() - t0 > 0.1:
            break
        n *= 2
    best = math.inf
    for _ in range(tries):
        t0 = time.perf_counter()
        _work(n)
        best = min(best, time.perf_counter() - t0)
    return max(1000, int(1.05 * n * seconds / best))


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


class _Running:
    """One sampler for one B slot: started (and its first sample taken) before the loop, stopped after it.
    ``tid`` is its thread (the native thread is named "sysprof"), ``count()`` the samples taken so far."""

    def __init__(self, sysprof, config: str, slot_s: float) -> None:
        kind, rate = config.split("@")
        self.kind, self.rate, self.interval = kind, int(rate), 1.0 / int(rate)
        self.tid: Optional[int] = None
        self.rows: Optional[np.ndarray] = None
        self.t_start = time.perf_counter()
        if kind in ("sysprof", "empty"):
            # "empty": the same native thread and wake-ups with no source (a control: the wake-ups alone)
            flags = {name: f for name, _, f, _, _ in metric_sets()}[SAMPLER_SET] if kind == "sysprof" else NO_SOURCES
            before = set(tids_named("sysprof"))
            # rows for the whole slot (slot_s: how long it is expected to last), so that nothing is dropped
            # (first-touch page faults included, as in a user's first seconds); not drained during the loop
            cap = int(1.5 * (slot_s + 1.0) * self.rate) + 256
            self.s = sysprof.Sampler(interval=self.interval, capacity=cap, **flags)
            self.s.start()
            self._wait(lambda: self.s.stats["taken"] >= 1)
            new = sorted(set(tids_named("sysprof")) - before)
            self.tid = new[0] if new else None
        else:
            self.s = SeedBaseline(self.interval)
            self.s.start()
            self._wait(lambda: self.s.count >= 1)
            self.tid = self.s.thread.native_id

    @staticmethod
    def _wait(cond: Callable[[], bool]) -> None:
        end = time.perf_counter() + 1.0
        while not cond() and time.perf_counter() < end:
            time.sleep(0.001)

    def count(self) -> int:
        return self.s.count if self.kind == "seed" else int(self.s.stats["taken"])

    def stop(self) -> Tuple[int, int, int]:
        """Stops it; (samples taken, deadlines from start() to stop(), rows dropped for want of room)."""
        self.s.stop()
        elapsed = time.perf_counter() - self.t_start
        if self.kind == "seed":
            return self.s.count, math.floor(elapsed / self.interval), 0
        st = self.s.stats
        self.rows = self.s.drain().timestamps_ns
        return int(st["taken"]), math.floor(elapsed / self.interval), int(st.get("dropped") or 0)


def _loop(n: int, run: Optional[_Running] = None) -> Dict[str, Any]:
    """One timed loop; the main thread's wall, CPU and run delay, and the sampler thread's CPU and run delay.
    Every reading is taken inside the timed window, so that a wait for a CPU while reading (which schedstat
    counts) is inside the wall time too. Every slot first sleeps SETTLE_S, the sampler (if any) already
    running, so that A and B slots start the loop alike (a thread that has just slept is favoured by the
    scheduler for a while)."""
    gc.collect()
    time.sleep(SETTLE_S)
    tid = run.tid if run else None
    t0_ns, t0 = time.time_ns(), time.perf_counter()
    m0 = read_schedstat()
    s0 = task_schedstat(tid) if tid else None
    c0 = run.count() if run else 0
    cpu0 = time.thread_time()
    _work(n)
    cpu1 = time.thread_time()
    c1 = run.count() if run else 0
    s1 = task_schedstat(tid) if tid else None
    m1 = read_schedstat()
    t1, t1_ns = time.perf_counter(), time.time_ns()
    wall = t1 - t0
    m: Dict[str, Any] = {"wall": wall, "cpu": cpu1 - cpu0, "t0_ns": t0_ns, "t1_ns": t1_ns, "samples": c1 - c0}
    if m0 and m1:
        rd = (m1[1] - m0[1]) / 1e9
        m["run_delay_pct"] = 100.0 * rd / wall
        m["waiting_pct"] = max(0.0, 100.0 * (wall - m["cpu"] - rd) / wall)
    if s0 and s1:
        m["sampler_cpu_s"] = (s1[0] - s0[0]) / 1e9
        m["sampler_cpu_s_per_s"] = m["sampler_cpu_s"] / wall
        m["sampler_run_delay_s_per_s"] = (s1[1] - s0[1]) / 1e9 / wall
    return m


def _phase(sysprof, n: int, labels: Sequence[str], min_s: float, ctx_rows: Optional[List[float]] = None,
           ours: Callable[[], float] = self_cpu_seconds
           ) -> Tuple[int, List[Tuple[str, Dict[str, Any]]], Dict[str, Dict[str, List[float]]]]:
    """A B A B ... A over ``labels`` (the B slots in order); the loop's iterations, the slots, and per config
    the samplers' counts. A first A shorter than ``min_s`` is run again with n scaled to 1.1 min_s (at most 3
    times) before the pairs start. Each slot also records the cores the other processes kept busy meanwhile
    (``ours``: our CPU seconds)."""

    def loop(run: Optional[_Running] = None) -> Dict[str, Any]:
        mach0, self0, t0 = machine_cpu_seconds(), ours(), time.monotonic()
        m = _loop(n, run)
        m["other_cores"] = other_cores(mach0, machine_cpu_seconds(), ours() - self0, time.monotonic() - t0)
        return m

    first = loop()
    for _ in range(3):
        if first["wall"] >= min_s:
            break
        n = int(n * 1.1 * min_s / first["wall"]) + 1
        first = loop()
    slots = [(A, first)]
    counts: Dict[str, Dict[str, List[float]]] = {}
    for lab in labels:
        if lab == "none":
            slots.append((lab, loop()))
        else:
            run = _Running(sysprof, lab, 2.0 * slots[-1][1]["wall"])  # twice the last loop alone
            try:
                m = loop(run)
            finally:
                taken, asked, dropped = run.stop()
            c = counts.setdefault(lab, {"taken": [], "asked": [], "window_taken": [], "window_asked": [],
                                        "dropped": []})
            c["taken"].append(taken)
            c["asked"].append(asked)
            c["dropped"].append(dropped)
            if run.rows is not None:  # rows timestamped within the loop
                ts = run.rows
                m["samples"] = int(np.count_nonzero((ts >= m["t0_ns"]) & (ts <= m["t1_ns"])))
                if ctx_rows is not None and run.rate == 1000 and ts.size > 2:
                    ctx_rows += (np.abs(np.diff(ts) - 1e6) / 1e3).tolist()
            c["window_taken"].append(m["samples"])
            if m.get("sampler_cpu_s") is not None and m["samples"] > 0:
                m["sampler_cpu_us_per_sample"] = 1e6 * m["sampler_cpu_s"] / m["samples"]
            # deadlines in the loop's window: at most floor(window / interval) + 1
            c["window_asked"].append(math.floor((m["t1_ns"] - m["t0_ns"]) / (run.interval * 1e9)) + 1)
            slots.append((lab, m))
        slots.append((A, loop()))
    return n, slots, counts


def _figures(slots, label: str) -> Dict[str, Any]:
    """One config's figures from the slots: per pair against its neighbouring A's, and per loop."""
    own = [m for lab, m in slots if lab == label]
    col = lambda key: [(lab, m.get(key)) for lab, m in slots]  # noqa: E731
    per_loop = lambda key: [m[key] for m in own if m.get(key) is not None]  # noqa: E731
    out = {"pairs": len(own),
           "loop_seconds": dist([m["wall"] for m in own], "s"),
           "slowdown_percent": dist(against_neighbours(col("wall"), label), "%"),
           "cpu_time_slowdown_percent": dist(against_neighbours(col("cpu"), label), "%"),
           "run_delay_percent": dist(per_loop("run_delay_pct"), "% of loop wall time"),
           "run_delay_added_pp": dist(against_neighbours(col("run_delay_pct"), label, relative=False),
                                      "percentage points of loop wall time"),
           "waiting_percent": dist(per_loop("waiting_pct"), "% of loop wall time")}
    if any(m.get("sampler_cpu_s_per_s") is not None for m in own):
        out["sampler_cpu_s_per_s"] = dist(per_loop("sampler_cpu_s_per_s"), "CPU s per s")
        out["sampler_run_delay_s_per_s"] = dist(per_loop("sampler_run_delay_s_per_s"), "s per s")
        out["sampler_cpu_us_per_sample"] = dist(per_loop("sampler_cpu_us_per_sample"), "us")
    return out


def _config_figures(slots, counts, label: str) -> Dict[str, Any]:
    r = _figures(slots, label)
    c = counts.get(label) or {"taken": [], "asked": [], "window_taken": [], "window_asked": [], "dropped": []}
    wt, wa = sum(c["window_taken"]), sum(c["window_asked"])
    r.update({"taken": dist(c["taken"], "samples"), "asked": dist(c["asked"], "samples"),
              "taken_percent_of_asked": dist([100.0 * t / a for t, a in zip(c["taken"], c["asked"]) if a > 0], "%"),
              "taken_percent_pooled": 100.0 * sum(c["taken"]) / sum(c["asked"]) if sum(c["asked"]) else None,
              "samples_in_window": int(wt), "deadlines_in_window": int(wa), "rows_dropped": int(sum(c["dropped"])),
              "deadlines_hit_percent_pooled": 100.0 * wt / wa if wa else None,
              "deadlines_hit_percent_per_trial": dist(
                  [100.0 * t / a for t, a in zip(c["window_taken"], c["window_asked"]) if a > 0], "%")})
    return r


def _run_phase(sysprof, n: int, primary: Sequence[str], secondary: Sequence[str], pairs: int, min_s: float,
               ctx_rows: Optional[List[float]] = None, ours: Callable[[], float] = self_cpu_seconds
               ) -> Dict[str, Any]:
    """Runs one phase; its figures: the loop alone, the noise (A vs A) and each config. ``ours``: the CPU
    seconds of what this benchmark runs (left out of the other processes' load)."""
    labels = schedule(primary, secondary, pairs, SECONDARY_EVERY)
    mach0, self0, t0 = machine_cpu_seconds(), ours(), time.monotonic()
    n, slots, counts = _phase(sysprof, n, labels, min_s, ctx_rows, ours)
    mach1, self1, t1 = machine_cpu_seconds(), ours(), time.monotonic()
    return {"work_iterations": n, "phase_seconds": t1 - t0, "order": labels,
            "other_processes_cores": other_cores(mach0, mach1, self1 - self0, t1 - t0),
            "alone_seconds": dist([m["wall"] for lab, m in slots if lab == A], "s"),
            "alone_run_delay_percent": dist([m["run_delay_pct"] for lab, m in slots
                                             if lab == A and "run_delay_pct" in m], "% of loop wall time"),
            "noise": _figures(slots, "none"),
            # every slot in run order: label, wall s, main CPU s, main run delay %, sampler CPU s/s, other cores
            "slots": [[lab, m["wall"], m["cpu"], m.get("run_delay_pct"), m.get("sampler_cpu_s_per_s"),
                       m.get("other_cores")] for lab, m in slots],
            "configs": {lab: _config_figures(slots, counts, lab) for lab in list(primary) + list(secondary)
                        if lab != "none"}}


METHOD = (
    "a fixed pure-Python loop (arithmetic holding the GIL), sized to last {loop_s:g} s at the fastest of 5 short "
    "runs (in the busy phase ncpu / (ncpu + 1) of it, the main thread's fair share beside the spinners) and "
    "grown if the phase's first A is shorter than {loop_s:g} s (this machine's speed varies by tens of % from "
    "one second to the next), in interleaved slots A B A B ... A: "
    "A is the loop alone, B the loop with one sampler running (started, and its first sample taken, before the "
    "loop; stopped after it) or, for 'none', the loop alone again; every slot sleeps {settle_ms:g} ms before "
    "its loop. Each B is compared with the mean of the two A's beside it (wall time: slowdown % = "
    "100 (B / mean A - 1); run delay: B - mean A, in percentage points); 'none' pairs measure the machine's own "
    "noise the same way in the same run. The B order is rotated each round; 100 Hz, 10 kHz and empty@1000 run "
    "every {every}th round only. Run delay = the main thread's time runnable but waiting for a CPU (field 2 of "
    "/proc/thread-self/schedstat) over the loop's wall time: the sampler's direct interference. Waiting = "
    "wall - CPU - run delay (off a CPU and not runnable: the GIL, for the seed's Python thread). Sampler CPU = "
    "its thread's field 1 of /proc/self/task/TID/schedstat over the loop (the native thread is named "
    "'sysprof'), per second and per sample taken. Quiet phase: no load added; busy phase: one pure-Python "
    "spinning process per core, so that the sampler's CPU is taken from someone; there empty@1000 is a "
    "control, the native thread's 1 kHz wake-ups with every source off. sysprof samples the {sampler_set} "
    "(bench_util.metric_sets); the seed is psutil in a Python thread with time.sleep(interval). Deadlines hit "
    "= samples timestamped within the loop / (floor(loop / interval) + 1)")


def bench_interference(cfg, sysprof, floor: Floor, ctx) -> Dict[str, Any]:
    """cfg["interference"] = (pairs, loop seconds): the protocol wants >= 9 pairs of >= 2 s loops."""
    pairs, loop_s = cfg["interference"][:2]
    pairs = max(1, int(pairs))
    meets = loop_s >= PROTOCOL_LOOP_S and pairs >= PROTOCOL_PAIRS
    _work(100_000)  # warm
    busy_dev: List[float] = []
    n = _calibrate(loop_s)
    quiet = _run_phase(sysprof, n, QUIET_PRIMARY, QUIET_SECONDARY, pairs, loop_s, busy_dev)
    n = quiet["work_iterations"]
    ncpu = os.cpu_count() or 1
    with Spinners(ncpu) as sp:
        ours = lambda: self_cpu_seconds() + sp.cpu_seconds()  # noqa: E731
        # beside ncpu spinners the main thread's fair share is ncpu / (ncpu + 1) of a core: that much of the
        # quiet loop lasts about loop_s when nothing else runs (longer when something does)
        busy = _run_phase(sysprof, max(1000, n * ncpu // (ncpu + 1)), BUSY_PRIMARY, BUSY_SECONDARY, pairs, loop_s,
                          None, ours)
        busy["spinners"] = ncpu
        busy["spinners_running_at_end"] = sp.running()
    ctx["busy_period_dev_us"] = busy_dev
    q1, b1 = quiet["configs"]["sysprof@1000"], busy["configs"]["sysprof@1000"]
    # the quiet phase at the top level (alone_seconds, noise, configs, ...), the busy phase under "busy"
    out = {**quiet, "rounds": pairs, "busy": busy,
           "protocol": {"loop_seconds": loop_s, "pairs": pairs,
                        "secondary_pairs": len(range(0, pairs, SECONDARY_EVERY)), "meets_protocol": meets,
                        "protocol_loop_seconds": PROTOCOL_LOOP_S, "protocol_pairs": PROTOCOL_PAIRS,
                        "sampler_set": SAMPLER_SET},
           "summary": {
               "quiet_run_delay_percent_1khz": q1["run_delay_percent"],
               "quiet_run_delay_percent_alone": quiet["alone_run_delay_percent"],
               "quiet_run_delay_added_pp_1khz": q1["run_delay_added_pp"],
               "quiet_run_delay_added_pp_noise": quiet["noise"]["run_delay_added_pp"],
               "quiet_slowdown_percent_1khz": q1["slowdown_percent"],
               "quiet_noise_percent": quiet["noise"]["slowdown_percent"],
               "busy_slowdown_percent_1khz": b1["slowdown_percent"],
               "busy_noise_percent": busy["noise"]["slowdown_percent"],
               "busy_sampler_cpu_s_per_s_1khz": b1.get("sampler_cpu_s_per_s"),
               "quiet_sampler_cpu_s_per_s_1khz": q1.get("sampler_cpu_s_per_s"),
               "busy_deadlines_hit_percent_1khz": b1["deadlines_hit_percent_pooled"],
               "meets_protocol": meets},
           "method": METHOD.format(loop_s=loop_s, every=SECONDARY_EVERY, settle_ms=SETTLE_S * 1e3,
                                   sampler_set=SAMPLER_SET)}
    return out


def _iqr(d: Optional[Dict[str, Any]], scale: float = 1.0) -> str:
    """'median [p25 … p75]' of a dist."""
    if not d or not d.get("n"):
        return "n/a"
    return f"{fmt(d['median'] * scale)} [{fmt(d['p25'] * scale)} … {fmt(d['p75'] * scale)}]"


def _phase_table(ph) -> str:
    noise = ph["noise"]
    rows = []
    for name, r in [("none (A vs A: noise)", noise)] + list(ph["configs"].items()):
        dh = r.get("deadlines_hit_percent_pooled")
        rows.append([name, r["pairs"], _iqr(r["run_delay_percent"]), _iqr(r["run_delay_added_pp"]),
                     _iqr(noise["run_delay_added_pp"]), _iqr(r["slowdown_percent"]), _iqr(noise["slowdown_percent"]),
                     _iqr(r["cpu_time_slowdown_percent"]), _iqr(r["waiting_percent"]),
                     _iqr(r.get("sampler_cpu_s_per_s"), 100.0), _iqr(r.get("sampler_cpu_us_per_sample")),
                     "-" if dh is None else fmt(dh)])
    dropped = {name: r["rows_dropped"] for name, r in ph["configs"].items() if r.get("rows_dropped")}
    note = f"\n\nrows dropped for want of ring room (figures for those trials undercount): {dropped}" if dropped else ""
    return table(["sampler@Hz", "pairs", "main run delay % of loop", "run delay added (pp)", "noise (pp)",
                  "wall slowdown %", "noise: A vs A %", "main CPU-time change %", "main waiting (not runnable) %",
                  "sampler thread % of a core", "sampler CPU µs per sample", "deadlines hit %"], rows) + note


def print_interference(res) -> str:
    p, q, b = res["protocol"], res, res["busy"]
    head = ("## 2. Interference with a busy Python main thread\n\n"
            f"Loop: pure-Python arithmetic holding the GIL; {p['pairs']} interleaved pairs (A B A B … A; 100 Hz, "
            f"10 kHz and the empty control: {p['secondary_pairs']}), each B against the mean of its neighbouring "
            f"A's; noise = 'none' pairs (A vs A), measured the same way in the same run. Figures: median [IQR]. "
            f"sysprof samples the {p['sampler_set']}.\n")
    if not p["meets_protocol"]:
        head += (f"\n**Short run: loops of {fmt(p['loop_seconds'])} s and {p['pairs']} pairs, below the protocol's "
                 f"≥ {fmt(p['protocol_loop_seconds'])} s and ≥ {p['protocol_pairs']} pairs: indicative only.**\n")
    out = [head]
    for title, ph in (("Quiet: no load added by the benchmark", q),
                      (f"Every core busy ({b.get('spinners')} spinning processes, one per core)", b)):
        short = (p["meets_protocol"] and (ph["alone_seconds"].get("median") or 0) < p["protocol_loop_seconds"])
        out.append(f"### {title}\n\nloop alone: {_iqr(ph['alone_seconds'])} s"
                   + (f" (**shorter than the protocol's {fmt(p['protocol_loop_seconds'])} s**)" if short else "")
                   + f" ({ph['work_iterations']:,} "
                   f"iterations), main run delay alone {_iqr(ph['alone_run_delay_percent'])} % of loop; other "
                   f"processes kept {fmt(ph['other_processes_cores'])} of {os.cpu_count()} cores busy "
                   f"(this process{' and the spinners' if ph is b else ''} excluded)"
                   + (" — **not quiet**: the figures include their competition for the CPUs" if ph is q and
                      (ph["other_processes_cores"] or 0) > QUIET_OTHER_CORES else "")
                   + "\n\n" + _phase_table(ph) + "\n")
    s = res["summary"]
    bc = s.get("busy_sampler_cpu_s_per_s_1khz") or {}
    out.append(
        f"sysprof at 1 kHz, quiet: main run delay {_iqr(s['quiet_run_delay_percent_1khz'])} % of loop time, alone "
        f"{_iqr(s['quiet_run_delay_percent_alone'])} %: added {_iqr(s['quiet_run_delay_added_pp_1khz'])} pp "
        f"(goal ≤ 0.1 % of its time) vs noise {_iqr(s['quiet_run_delay_added_pp_noise'])} pp; wall slowdown "
        f"{_iqr(s['quiet_slowdown_percent_1khz'])} % vs noise {_iqr(s['quiet_noise_percent'])} %. Every core busy: "
        f"wall slowdown "
        f"{_iqr(s['busy_slowdown_percent_1khz'])} % vs noise {_iqr(s['busy_noise_percent'])} %; the price, the "
        f"sampler thread's CPU: {_iqr(bc, 1e3)} ms per s ({_iqr(bc, 100.0)} % of a core; "
        f"{_iqr(b['configs']['sysprof@1000'].get('sampler_cpu_us_per_sample'))} µs per sample taken).\n")
    return "\n".join(out)


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
