#!/usr/bin/env python3
"""Benchmark section 8: the kernel's side of /proc/stat (issue 11, goal 6).

    python benchmarks/bench_kstat.py [--hotplug] [--quick] [--cpus 224 --irqs 2000]

Reading /proc/stat makes the kernel run fs/proc/stat.c show_stat() on every read: loops over possible CPUs,
online CPUs and interrupt descriptors (docs/kernel-proc-stat.md has the walk through the code). This section
measures what can be measured on this machine without changing it: one pread of /proc/stat (whole file and a
1-byte read, which renders the whole file but copies one byte out), a trivial single_open file (/proc/version)
as the fixed cost of a read, the file's shape (online/possible CPUs, numbers on the "intr" line, allocated
IRQ descriptors) and, where `perf` works, a profile of the kernel's time by loop. From these it fits the model

    T(P, A, N) = T_fixed + c_cpu * P + c_active * A + c_gap * (N - A) + c_byte * bytes(P, A, N)

(P CPUs with P = online = possible, A allocated IRQs, N numbers on the intr line) and prints the estimate for
a large node. --hotplug (opt-in, root only) also measures 2-vs-1 online CPUs by taking the highest-numbered
hot-pluggable CPU offline for a few seconds; it is always put back online (finally, and on SIGTERM).
"""
from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from bench_util import compile_c, dist, fmt, table  # noqa: E402

SYS_CPU = "/sys/devices/system/cpu"
FULL = 1 << 16  # the whole file in one pread, as sysprof's reader does
# Per-CPU cache lines show_stat() and the scheduler's sums read (x86-64, from the code): kernel_cpustat (2),
# kernel_stat irqs_sum+softirqs (1), irq_stat (1-2), tick_sched (1-2), runqueue nr_switches / nr_iowait /
# nr_running (1-2). Each is written by its own CPU every tick or context switch, so on a busy node most are
# a cache-coherence miss for the reader. Modelled, not measured: this VM cannot show cross-socket misses.
LINES_PER_CPU = 8
MISS_NS = (20.0, 100.0)  # effective ns per dirty remote line: with memory-level parallelism .. fully serial
TARGETS = [(64, 500), (128, 1000), (224, 2000), (224, 5000), (448, 4000)]
ACTIVE_BYTES = 8.0  # " " + 7 digits: an active IRQ's count on a long-running node (modelled)

# A pread loop that times each read separately; one column per FILE:COUNT spec, reads interleaved so every
# column sees the same machine. COUNT 0 reads the whole file as sysprof's reader does (csrc/io/proc_file: preads
# at growing offsets until one returns 0 or fewer than 4096 - 512 bytes, the end of a record-based seq file's
# records). Prints the last read's byte count per spec on stderr.
PROBE_C = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static char buf[1 << 20];
static long long now_ns(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec; }
int main(int argc, char** argv) {
  if (argc < 3 || argc > 18) { fprintf(stderr, "usage: kstat_probe ITERS FILE:COUNT...\n"); return 2; }
  long iters = atol(argv[1]); int nf = argc - 2, fd[16]; size_t cnt[16]; ssize_t last[16];
  for (int i = 0; i < nf; ++i) {
    char* c = strrchr(argv[i + 2], ':'); if (!c) return 2; *c = 0; cnt[i] = strtoul(c + 1, 0, 10);  /* 0: all */
    if (cnt[i] > sizeof buf) cnt[i] = sizeof buf;
    fd[i] = open(argv[i + 2], O_RDONLY | O_CLOEXEC); if (fd[i] < 0) { perror(argv[i + 2]); return 1; }
  }
  long long* out = malloc(sizeof(long long) * (size_t)(iters > 0 ? iters : 1) * (size_t)nf);
  for (long k = -20; k < iters; ++k)
    for (int i = 0; i < nf; ++i) {
      long long t0 = now_ns();
      if (cnt[i]) { last[i] = pread(fd[i], buf, cnt[i], 0); }
      else { ssize_t n, off = 0;
        do { n = pread(fd[i], buf + off, sizeof buf - (size_t)off, off); if (n > 0) off += n; } while (n >= 3584);
        last[i] = off; }
      long long t1 = now_ns();
      if (k >= 0) out[k * nf + i] = t1 - t0;
    }
  for (int i = 0; i < nf; ++i) fprintf(stderr, "%zd\n", last[i]);
  for (long k = 0; k < iters; ++k) { for (int i = 0; i < nf; ++i) printf(i ? " %lld" : "%lld", out[k * nf + i]);
    printf("\n"); }
  return 0;
}
"""

# perf symbols grouped by the part of show_stat() they serve (kernel 6.x names; unknown kernel symbols count
# as "syscall + seq_file", user-space ones as "probe (user)").
GROUPS = {
    "irq walk": ("mt_find", "mtree_load", "irq_get_next_irq", "kstat_irqs_usr", "kstat_irqs", "__rcu_read_lock",
                 "__rcu_read_unlock", "_find_next_bit", "irq_to_desc", "irq_find_desc_at_or_after",
                 "irq_find_at_or_after", "mas_"),
    "number formatting": ("seq_put_decimal_ull", "num_to_str", "put_dec", "vsnprintf", "number", "format_decode",
                          "seq_printf", "seq_vprintf", "seq_putc", "nsec_to_clock_t", "div_u64"),
    "per-CPU counters": ("get_cpu_sleep_time_us", "get_cpu_idle_time_us", "get_cpu_iowait_time_us", "ktime_get",
                         "read_tsc", "kvm_clock", "pvclock", "arch_irq_stat_cpu", "arch_irq_stat",
                         "kcpustat_cpu_fetch", "nr_context_switches", "nr_iowait", "nr_running", "nr_iowait_cpu"),
    "show_stat (own loops)": ("show_stat",),
    "zeros + copies": ("seq_write", "memcpy", "__pi_memcpy", "_copy_to_iter", "copy_user", "rep_movs",
                       "__memcpy"),
}


# ------------------------------------------------------------------------------------------------
# the machine's shape
# ------------------------------------------------------------------------------------------------

def cpu_count(text: str) -> int:
    """Number of CPUs in a sysfs cpu list ("0-3,8,10-11")."""
    n = 0
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        n += int(hi or lo) - int(lo) + 1
    return n


def _read(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def stat_shape(text: str, active: Optional[int]) -> Dict[str, Any]:
    """Lines and numbers of one /proc/stat text: per-CPU line bytes, intr numbers, numbers formatted."""
    lines = text.splitlines()
    cpu_lines = [ln for ln in lines if re.match(r"cpu\d+ ", ln)]
    intr = next((ln.split()[1:] for ln in lines if ln.startswith("intr ")), [])
    n_irq = max(0, len(intr) - 1)  # the first number is the total
    nonzero = sum(1 for v in intr[1:] if v != "0")
    a = active if active is not None else nonzero
    numbers = sum(len(ln.split()) - 1 for ln in lines) + len(cpu_lines)  # + the N of each "cpuN"
    return {"bytes": len(text.encode()), "cpu_lines": len(cpu_lines),
            "cpu_line_bytes": float(np.mean([len(ln) + 1 for ln in cpu_lines])) if cpu_lines else math.nan,
            "intr_numbers": n_irq, "intr_nonzero": nonzero, "active_irqs": a,
            "gap_zeros": max(0, n_irq - a), "numbers_formatted": max(1, numbers - max(0, n_irq - a)),
            "active_bytes": (float(np.mean([len(v) + 1 for v in intr[1:] if v != "0"])) if nonzero else 2.0),
            "fixed_bytes": len(text.encode()) - sum(len(ln) + 1 for ln in cpu_lines)
            - (sum(len(v) + 1 for v in intr[1:]))}


def machine_shape() -> Dict[str, Any]:
    online, possible = _read(f"{SYS_CPU}/online"), _read(f"{SYS_CPU}/possible")
    try:
        active = sum(1 for d in os.listdir("/sys/kernel/irq") if d.isdigit())
    except OSError:
        active = None  # no sysfs: the nonzero entries of the intr line stand in
    return {"online_cpus": cpu_count(online) if online else os.cpu_count(),
            "possible_cpus": cpu_count(possible) if possible else None, "online_list": (online or "").strip(),
            "allocated_irq_descs": active, "kernel": os.uname().release}


# ------------------------------------------------------------------------------------------------
# measurements
# ------------------------------------------------------------------------------------------------

class Probe:
    def __init__(self, workdir: str) -> None:
        self.exe = os.path.join(workdir, "kstat_probe")
        src = os.path.join(workdir, "kstat_probe.c")
        with open(src, "w") as f:
            f.write(PROBE_C)
        self.error: Optional[str] = compile_c(src, self.exe)

    def argv(self, specs: Sequence[Tuple[str, int]], iters: int) -> List[str]:
        return [self.exe, str(iters), *(f"{p}:{c}" for p, c in specs)]

    def run(self, specs: Sequence[Tuple[str, int]], iters: int) -> Tuple[np.ndarray, List[int]]:
        """(iters x len(specs)) ns per read, and the byte count of each spec's last read."""
        r = subprocess.run(self.argv(specs, iters), capture_output=True, text=True, check=True)
        a = np.array(r.stdout.split(), dtype=np.float64).reshape(-1, len(specs))
        return a, [int(x) for x in r.stderr.split()[:len(specs)]]


SPECS = [("/proc/stat", FULL), ("/proc/stat", 1), ("/proc/version", 1), ("/proc/version", FULL)]


def _reads(probe: Probe, iters: int) -> Dict[str, Any]:
    a, sizes = probe.run(SPECS, iters)
    full, one, fixed, vfull = a[:, 0], a[:, 1], a[:, 2], a[:, 3]
    copy_pairs = (full - one) / max(1, sizes[0] - 1)
    return {"stat_full_us": dist(full / 1e3, "us"), "stat_1byte_us": dist(one / 1e3, "us"),
            "fixed_us": dist(fixed / 1e3, "us"), "version_full_us": dist(vfull / 1e3, "us"),
            "render_us": dist((one - fixed) / 1e3, "us"), "copy_ns_per_byte": dist(copy_pairs, "ns/B"),
            "stat_bytes": sizes[0], "version_bytes": sizes[3]}


def perf_breakdown(probe: Probe, iters: int, workdir: str) -> Dict[str, Any]:
    """Shares of a 1-byte /proc/stat read's time by part of show_stat(), from `perf record -e cpu-clock`."""
    perf = shutil.which("perf")
    if perf is None:
        return {"available": False, "reason": "perf not on PATH"}
    data = os.path.join(workdir, "kstat.perf")
    try:
        subprocess.run([perf, "record", "-q", "-e", "cpu-clock", "-F", "10000", "-o", data, "--",
                        *probe.argv([("/proc/stat", 1)], iters)], capture_output=True, check=True, timeout=120)
        rep = subprocess.run([perf, "report", "-i", data, "--stdio", "--no-children", "--sort", "sym", "-q"],
                             capture_output=True, text=True, check=True, timeout=120).stdout
    except (subprocess.SubprocessError, OSError) as e:
        return {"available": False, "reason": f"perf failed: {str(e)[:200]}"}
    shares: Dict[str, float] = {g: 0.0 for g in GROUPS}
    shares.update({"syscall + seq_file": 0.0, "probe (user)": 0.0})
    top: List[Tuple[str, float]] = []
    for ln in rep.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+\[([k.])\]\s+(\S+)", ln)
        if not m:
            continue
        pct, where, sym = float(m.group(1)), m.group(2), m.group(3)
        top.append((sym, pct))
        if where == ".":
            shares["probe (user)"] += pct
            continue
        group = next((g for g, names in GROUPS.items() if any(sym == n or sym.startswith(n) for n in names)),
                     "syscall + seq_file")
        shares[group] += pct
    total = sum(shares.values())
    if total <= 0:
        return {"available": False, "reason": "perf recorded no samples"}
    if sum(shares[g] for g in GROUPS) < 0.3 * total:  # kptr_restrict, or a kernel with other names
        return {"available": False, "reason": "perf did not resolve show_stat's kernel symbols", "top": top[:12]}
    return {"available": True, "shares": {k: v / total for k, v in shares.items()}, "top": top[:12],
            "method": "perf record -e cpu-clock -F 10000 of the probe reading /proc/stat 1 byte at a time; "
                      "self time per symbol, grouped (bench_kstat.GROUPS)"}


def _cpu_state_writer(cpu: int):
    path = f"{SYS_CPU}/cpu{cpu}/online"

    def set_online(on: bool) -> None:
        with open(path, "w") as f:
            f.write("1" if on else "0")
        for _ in range(200):  # the kernel has finished when the online list says so
            if (str(cpu) in _expand(_read(f"{SYS_CPU}/online") or "")) == on:
                return
            time.sleep(0.005)
    return path, set_online


def _expand(text: str) -> List[str]:
    out: List[str] = []
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            out += [str(i) for i in range(int(lo), int(hi or lo) + 1)]
    return out


def hotplug_points(probe: Probe, iters: int, rounds: int) -> Dict[str, Any]:
    """/proc/stat with all CPUs online vs one CPU fewer, interleaved rounds; the CPU is always put back."""
    online = _expand(_read(f"{SYS_CPU}/online") or "")
    cand = [int(c) for c in reversed(online) if os.access(f"{SYS_CPU}/cpu{c}/online", os.W_OK)]
    if os.geteuid() != 0 or not cand or len(online) < 2:
        return {"available": False, "reason": "needs root and a second online CPU with a writable "
                                              "/sys/devices/system/cpu/cpuN/online"}
    cpu = cand[0]
    path, set_online = _cpu_state_writer(cpu)
    pts: Dict[str, List[Dict[str, Any]]] = {"all": [], "one_fewer": []}
    old = signal.getsignal(signal.SIGTERM)

    def _term(signum, frame):  # noqa: ARG001
        raise SystemExit(143)
    signal.signal(signal.SIGTERM, _term)
    err = None
    try:
        for k in range(rounds):  # A B B A ..., so a drift of the machine does not favour one state
            for state in (("all", "one_fewer") if k % 2 == 0 else ("one_fewer", "all")):
                set_online(state == "all")
                r = _reads(probe, iters)
                r["online"] = cpu_count(_read(f"{SYS_CPU}/online") or "")
                r["shape"] = stat_shape(_read("/proc/stat") or "", None)
                pts[state].append(r)
    except OSError as e:
        err = f"{type(e).__name__}: {e}"
    finally:
        try:
            set_online(True)
        finally:
            signal.signal(signal.SIGTERM, old)
    back = str(cpu) in _expand(_read(f"{SYS_CPU}/online") or "")
    if err or not pts["one_fewer"]:
        return {"available": False, "reason": err or "no points", "cpu": cpu, "restored": back}
    pairs = list(zip(pts["all"], pts["one_fewer"]))
    med = lambda r, k: r[k]["median"]  # noqa: E731
    raw = [med(a, "stat_1byte_us") - med(b, "stat_1byte_us") for a, b in pairs]
    # Offlining a CPU also changes how fast the remaining one runs (an SMT sibling or a shared host core freed,
    # the other tenants' load moved onto it): the fixed read (/proc/version) measures that, and the 1-CPU time
    # is scaled by it before taking the difference.
    norm = [med(a, "stat_1byte_us") - med(b, "stat_1byte_us") * med(a, "fixed_us") / med(b, "fixed_us")
            for a, b in pairs]
    speed = [med(a, "fixed_us") / med(b, "fixed_us") for a, b in pairs]
    bytes_d = [a["stat_bytes"] - b["stat_bytes"] for a, b in pairs]
    return {"available": True, "cpu": cpu, "rounds": rounds, "reads_per_point": iters, "restored": back,
            "online_list_after": (_read(f"{SYS_CPU}/online") or "").strip(), "points": pts,
            "per_online_cpu_us": dist(norm, "us"), "per_online_cpu_raw_us": dist(raw, "us"),
            "fixed_ratio": dist(speed, "x"), "bytes_per_online_cpu": float(np.median(bytes_d))}


# ------------------------------------------------------------------------------------------------
# the model
# ------------------------------------------------------------------------------------------------

def fit(reads: Dict[str, Any], shape: Dict[str, Any], cpus: int, prof: Dict[str, Any],
        hp: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """Coefficients (ns) of T = T_fixed + c_cpu*P + c_active*A + c_gap*(N-A) + c_byte*bytes, and their source."""
    t1 = reads["stat_1byte_us"]["median"] * 1e3
    render = reads["render_us"]["median"] * 1e3
    a, gaps = max(1, shape["active_irqs"]), shape["gap_zeros"]
    co: Dict[str, Any] = {"fixed_ns": reads["fixed_us"]["median"] * 1e3,
                          "byte_ns": reads["copy_ns_per_byte"]["median"], "source": {}}
    co["source"]["byte_ns"] = "measured"
    if prof.get("available"):
        s = prof["shares"]
        c_num = s["number formatting"] * t1 / shape["numbers_formatted"]
        co["number_ns"] = c_num
        co["active_ns"] = s["irq walk"] * t1 / a + c_num
        co["gap_ns"] = s["zeros + copies"] * t1 / max(1, gaps)  # an upper bound: memcpy of the formatting too
        co["cpu_ns"] = (s["per-CPU counters"] + s["show_stat (own loops)"]) * t1 / cpus + 11 * c_num
        for k in ("number_ns", "active_ns", "gap_ns"):
            co["source"][k] = "measured (perf share x measured time)"
        co["source"]["cpu_ns"] = "measured (perf share x time; show_stat's own time counted as per-CPU)"
    else:  # no profile: the render time split evenly over the formatted numbers (a lower bound per CPU/IRQ)
        c_num = render / shape["numbers_formatted"]
        co.update(number_ns=c_num, active_ns=c_num, gap_ns=0.0, cpu_ns=11 * c_num)
        for k in ("number_ns", "active_ns", "gap_ns", "cpu_ns"):
            co["source"][k] = f"modelled (render time per formatted number; no perf: {prof.get('reason')})"
    # the numbers printed once per read (aggregate cpu line, intr total, ctxt .. procs_blocked, softirq line)
    once = max(0, shape["numbers_formatted"] - 11 * shape["cpu_lines"] - shape["active_irqs"])
    co["fixed_ns"] += once * co["number_ns"]
    co["source"]["fixed_ns"] = f"measured (/proc/version 1-byte read) + {once} numbers printed once"
    if hp and hp.get("available"):  # a cross-check: the online-only part of c_cpu (possible CPUs stay)
        co["online_cpu_measured_ns"] = hp["per_online_cpu_us"]["median"] * 1e3
    return co


def predict(co: Dict[str, Any], shape: Dict[str, Any], p: int, a: int, n: Optional[int] = None,
            active_bytes: float = ACTIVE_BYTES) -> Dict[str, Any]:
    """Estimated µs of one /proc/stat read on P CPUs (online = possible) with A allocated IRQs, N intr numbers."""
    n = max(a, n if n is not None else a)
    size = shape["fixed_bytes"] + p * shape["cpu_line_bytes"] + a * active_bytes + 2 * (n - a)
    parts = {"fixed": co["fixed_ns"], "cpus": co["cpu_ns"] * p, "active IRQs": co["active_ns"] * a,
             "gap zeros": co["gap_ns"] * (n - a), "copy-out": co["byte_ns"] * size}
    base = sum(parts.values())
    coh = [LINES_PER_CPU * p * t + a * t for t in MISS_NS]  # + one dirty desc line per busy IRQ
    return {"cpus": p, "active_irqs": a, "intr_numbers": n, "bytes": size, "parts_us": {k: v / 1e3 for k, v in
                                                                                         parts.items()},
            "us": base / 1e3, "us_with_misses": [(base + c) / 1e3 for c in coh]}


def bench_kstat(cfg, hotplug: bool = False) -> Dict[str, Any]:
    iters, rounds = cfg.get("kstat", (20_000, 4)) if isinstance(cfg, dict) else (20_000, 4)
    target = cfg.get("kstat_target", (224, 2000)) if isinstance(cfg, dict) else (224, 2000)
    if not os.path.exists("/proc/stat"):
        return {"available": False, "reason": "no /proc/stat"}
    tmp = tempfile.mkdtemp(prefix="sysprof-kstat-")
    try:
        probe = Probe(tmp)
        if probe.error:
            return {"available": False, "reason": probe.error}
        mach = machine_shape()
        text = _read("/proc/stat") or ""
        shape = stat_shape(text, mach["allocated_irq_descs"])
        reads = _reads(probe, iters)
        prof = perf_breakdown(probe, max(iters, 20_000), tmp)
        hp = hotplug_points(probe, max(2000, iters // 4), rounds) if hotplug else None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    co = fit(reads, shape, mach["online_cpus"], prof, hp)
    here = predict(co, shape, mach["online_cpus"], shape["active_irqs"], shape["intr_numbers"], shape["active_bytes"])
    pts = [(p, a) for p, a in TARGETS] if tuple(target) in TARGETS else TARGETS + [tuple(target)]
    return {"available": True, "machine": mach, "shape": shape, "reads": reads, "perf": prof, "hotplug": hp,
            "coefficients": co, "here_predicted": here, "target": list(target),
            "estimates": [predict(co, shape, p, a) for p, a in pts], "iters": iters,
            "model": "T = T_fixed + c_cpu*P + c_active*A + c_gap*(N-A) + c_byte*bytes; P = online = possible CPUs, "
                     "A allocated IRQ descriptors, N numbers on the intr line (nr_irqs)",
            "miss_model": {"lines_per_cpu": LINES_PER_CPU, "miss_ns": list(MISS_NS),
                           "active_irq_bytes": ACTIVE_BYTES}}


# ------------------------------------------------------------------------------------------------
# printing
# ------------------------------------------------------------------------------------------------

def _d(d: Dict[str, Any], digits: int = 3) -> str:
    return (f"{fmt(d['median'], digits)} [IQR {fmt(d['p25'], digits)}–{fmt(d['p75'], digits)}, n={d['n']}]"
            if d and d.get("n") else "n/a")


def print_kstat(res) -> str:
    out = "## 8. The kernel's side of /proc/stat (show_stat: O(CPUs) + O(IRQs))\n\n"
    if not res.get("available"):
        return out + f"not available: {res.get('reason')}\n"
    m, sh, r, co = res["machine"], res["shape"], res["reads"], res["coefficients"]
    out += (f"here: kernel {m['kernel']}, {m['online_cpus']} online / {m['possible_cpus']} possible CPUs, "
            f"intr line {sh['intr_numbers']} numbers ({sh['active_irqs']} allocated IRQs, {sh['gap_zeros']} "
            f"gap zeros), /proc/stat {r['stat_bytes']} B, {fmt(sh['cpu_line_bytes'])} B per cpuN line\n\n")
    out += table(["measured (one pread, µs)", "median [IQR, n]"], [
        ["/proc/stat, whole file", _d(r["stat_full_us"])],
        ["/proc/stat, 1 byte (renders all, copies 1 B)", _d(r["stat_1byte_us"])],
        [f"/proc/version, 1 byte (fixed cost of a read; {r['version_bytes']} B file)", _d(r["fixed_us"])],
        ["show_stat render = stat 1 B − version 1 B (paired)", _d(r["render_us"])],
        ["copy-out ns/byte = (whole − 1 B) / bytes (paired)", _d(r["copy_ns_per_byte"])]]) + "\n\n"
    p = res["perf"]
    if p.get("available"):
        out += ("where a 1-byte read's time goes (perf, self time): "
                + ", ".join(f"{k} {100 * v:.0f} %" for k, v in sorted(p["shares"].items(), key=lambda kv: -kv[1]))
                + "\n\n")
    else:
        out += f"perf breakdown: not available ({p.get('reason')})\n\n"
    hp = res.get("hotplug")
    if hp is not None:
        if hp.get("available"):
            rows = []
            for a, b in zip(hp["points"]["all"], hp["points"]["one_fewer"]):
                rows.append([f"{a['online']} / {b['online']}", f"{fmt(a['stat_1byte_us']['median'])} / "
                             f"{fmt(b['stat_1byte_us']['median'])}", f"{a['stat_bytes']} / {b['stat_bytes']}",
                             f"{fmt(a['fixed_us']['median'])} / {fmt(b['fixed_us']['median'])}"])
            out += (f"hotplug (cpu{hp['cpu']} offline and back, {hp['rounds']} interleaved rounds, "
                    f"n={hp['reads_per_point']} reads per point; online after: {hp['online_list_after']}, "
                    f"restored: {hp['restored']}):\n\n"
                    + table(["online CPUs", "stat 1 B median µs", "bytes", "version 1 B µs"], rows)
                    + f"\n\nper online CPU: {_d(hp['per_online_cpu_us'])} µs after scaling by the fixed read's "
                      f"ratio between states ({_d(hp['fixed_ratio'])}x); raw {_d(hp['per_online_cpu_raw_us'])} µs; "
                      f"{fmt(hp['bytes_per_online_cpu'])} B. It covers the cpuN line and the online-only lookups, "
                      f"not the per-possible-CPU sums (possible CPUs do not change): compare c_cpu "
                      f"{fmt(res['coefficients']['cpu_ns'] / 1e3)} µs\n\n")
        else:
            out += f"hotplug: not available ({hp.get('reason')})\n\n"
    out += (f"model: {res['model']}\n\n"
            + table(["coefficient", "ns", "source"],
                    [[k, fmt(co[k]), co["source"][k]] for k in ("fixed_ns", "cpu_ns", "active_ns", "gap_ns",
                                                                "byte_ns", "number_ns")])
            + "\n\n")
    here = res["here_predicted"]
    out += (f"consistency: the model gives {fmt(here['us'])} µs for this machine (measured "
            f"{fmt(r['stat_full_us']['median'])}) by construction; --hotplug gives an independent check of c_cpu\n\n")
    rows = [[e["cpus"], e["active_irqs"], f"{e['bytes'] / 1024:.1f}", fmt(e["us"]),
             f"{fmt(e['us_with_misses'][0])}–{fmt(e['us_with_misses'][1])}",
             f"{e['us'] * 1e3 / 1e4:.1f}–{e['us_with_misses'][1] * 1e3 / 1e4:.1f} %"]
            for e in res["estimates"]]
    mm = res["miss_model"]
    t = next((e for e in res["estimates"] if [e["cpus"], e["active_irqs"]] == list(res["target"])), None)
    if t:
        out += (f"{t['cpus']} CPUs, {t['active_irqs']} IRQs: " + ", ".join(f"{k} {fmt(v)} µs" for k, v in
                                                                         t["parts_us"].items())
                + f" = {fmt(t['us'])} µs per read; ≥ 100 % of a core means one read outlasts the 1 ms period\n\n")
    out += (table(["CPUs", "IRQs", "KiB", "µs (this machine's coefficients)",
                   f"µs + coherence misses ({mm['lines_per_cpu']} lines/CPU + 1/IRQ at "
                   f"{fmt(mm['miss_ns'][0])}–{fmt(mm['miss_ns'][1])} ns)", "of a core at 1 kHz"], rows)
            + "\n\nmeasured: the reads, copy-out per byte" + (", the perf shares" if p.get("available") else "")
            + (", the hotplug slope" if hp and hp.get("available") else "")
            + "; modelled: P = online = possible, the split of shares into coefficients, the coherence misses "
              "of a large node, " f"{fmt(mm['active_irq_bytes'])} B per active IRQ count (docs/kernel-proc-stat.md)\n")
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hotplug", action="store_true",
                    help="also measure with one CPU offline (root; the CPU is put back online at the end)")
    ap.add_argument("--quick", action="store_true", help="fewer reads")
    ap.add_argument("--cpus", type=int, default=224, help="CPUs of the node to estimate (default 224)")
    ap.add_argument("--irqs", type=int, default=2000, help="allocated IRQs of that node (default 2000)")
    args = ap.parse_args(argv)
    cfg = {"kstat": (3000, 2) if args.quick else (20_000, 4), "kstat_target": (args.cpus, args.irqs)}
    print(print_kstat(bench_kstat(cfg, hotplug=args.hotplug)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
