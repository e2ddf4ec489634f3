"""Two installed builds of sysprof side by side, in one run: the sampling thread's CPU per sample at 1 kHz (its
schedstat, wake-ups included) and its in-tick time, the
latency of ``Sampler.sample()`` and the cost of ``drain()`` per row, each as after/before ratios over
interleaved pairs (so machine load shifts both alike).

    python benchmarks/compare_builds.py BEFORE_PYTHON AFTER_PYTHON [--pairs 7] [--seconds 1.5]
    python benchmarks/compare_builds.py BEFORE_PYTHON AFTER_PYTHON --same-core [--pairs 16] [--sources LIST]

Each python must import an installed sysprof (a venv's bin/python). Only the public API is used, so any
two versions can be compared. Prints a table and, with --json, the raw figures.

--same-core: the two builds' sampling threads run at once, pinned to one CPU (the first two in turn), their
deadlines half a period apart, so each tick follows the other build's by half a period and the machine's moment
is common to both: the thread CPU per sample after/before per window, with the median's 95 % bootstrap interval.
It resolves differences of a few percent where windows taken one after the other (above) vary by ±15 %; the same
python given twice measures the design's own resolution.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# What both probes begin with, run inside each interpreter: the sources asked (argv[2]) and the sampling thread's
# id and CPU time.
_PROBE_HEAD = r"""
import json, os, sys, time
import sysprof
sources = sys.argv[2].split(",")
kw = {s: True for s in sources}
for s in ("cpu", "memory", "disk", "net"):
    kw.setdefault(s, False)
def threads():
    out = set()
    for t in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{t}/comm") as f:
            if f.read().strip() == "sysprof":
                out.add(t)
    return out
def cpu(tid):
    with open(f"/proc/self/task/{tid}/schedstat") as f:
        return int(f.read().split()[0])
"""

# One measurement (argv[1]: seconds), printed as JSON.
_PROBE = _PROBE_HEAD + r"""
seconds = float(sys.argv[1])
s = sysprof.Sampler(0.001, **kw)  # the default capacity: what a user gets from each build
known = threads()
s.start(); time.sleep(0.2)
tid = (threads() - known).pop()
n0, c0 = s.stats["taken"], cpu(tid)
time.sleep(seconds)
n1, c1 = s.stats["taken"], cpu(tid)
s.stop()
st = s.stats
t0 = time.perf_counter_ns(); b = s.drain(); drain_ns = time.perf_counter_ns() - t0
n = 300
s.sample()
t0 = time.perf_counter_ns()
for _ in range(n):
    s.sample()
sample_ns = (time.perf_counter_ns() - t0) / n
print(json.dumps({"thread_cpu_ns": (c1 - c0) / max(1, n1 - n0), "thread_ns": st["sample_ns_mean"],
                  "taken": st["taken"], "rows": len(b),
                  "channels": len(b.channels), "drain_ns_per_row": drain_ns / max(1, len(b)),
                  "sample_call_ns": sample_ns}))
"""

# --same-core: one build's sampler, pinned to a CPU; prints where in the period its deadlines fall, then its thread's
# CPU per sample between the parent's two lines on stdin.
_SAME_CORE = _PROBE_HEAD + r"""
cpu_index = int(sys.argv[1])
s = sysprof.Sampler(0.001, **kw)
known = threads()
s.start(); time.sleep(0.1)
tid = (threads() - known).pop()
os.sched_setaffinity(int(tid), {cpu_index}); time.sleep(0.05)
b = s.drain()
print(int((int(b.timestamps_ns[-1]) - (time.time_ns() - time.monotonic_ns())) % 1000000), flush=True)
sys.stdin.readline()
n0, c0 = s.stats["taken"], cpu(tid)
sys.stdin.readline()
n1, c1 = s.stats["taken"], cpu(tid)
s.stop()
print((c1 - c0) / max(1, n1 - n0), flush=True)
"""


def _same_core_window(before: str, after: str, cpu: int, seconds: float, sources: str, first_after: bool):
    """One window: both builds' threads on ``cpu``, the second started again until its deadlines fall 0.35-0.65 of a
    period after the first's. Returns (before, after) CPU ns per sample and the offset found (ns)."""
    def start(py):
        p = subprocess.Popen([py, "-c", _SAME_CORE, str(cpu), sources], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd="/")
        line = p.stdout.readline()
        if not line:
            raise SystemExit(f"{py}: the same-core probe failed (run it alone to see why)")
        return p, int(line)
    first, second = (after, before) if first_after else (before, after)
    p1, ph1 = start(first)
    for _ in range(100):
        p2, ph2 = start(second)
        offset = (ph2 - ph1) % 1000000
        if 350000 <= offset <= 650000:
            break
        p2.kill()
        p2.wait()
    for p in (p1, p2):
        p.stdin.write("go\n")
        p.stdin.flush()
    time.sleep(seconds)
    for p in (p1, p2):
        p.stdin.write("stop\n")
        p.stdin.flush()
    r1, r2 = (float(p.communicate(timeout=60)[0].split()[0]) for p in (p1, p2))
    return ((r2, r1) if first_after else (r1, r2)), offset


def same_core(before: str, after: str, pairs: int, seconds: float, sources: str) -> dict:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_util import boot_ci
    cpus = sorted(os.sched_getaffinity(0))[:2]
    rows = [_same_core_window(before, after, cpus[i % len(cpus)], seconds, sources, i % 2 == 1)
            for i in range(pairs)]
    ratios = [a / b for (b, a), _ in rows]
    ci = boot_ci(ratios)
    return {"sources": sources, "pairs": pairs, "seconds": seconds, "before_ns": [b for (b, _), _ in rows],
            "after_ns": [a for (_, a), _ in rows], "offsets_ns": [o for _, o in rows], "ratios": ratios,
            "median": ci["median"], "median_ci": ci["median_ci"]}


METRICS = (("thread_cpu_ns", "thread CPU per sample (ns)"), ("thread_ns", "in-tick time per sample (ns)"), ("sample_call_ns", "sample() call (ns)"),
           ("drain_ns_per_row", "drain() per row (ns)"))
SETS = {"host": "cpu,memory,disk,net",
        "all": "cpu,per_cpu,memory,disk,net,load,process,process_tree,pressure,cgroup"}


def _probe(python: str, seconds: float, sources: str) -> dict:
    out = subprocess.run([python, "-c", _PROBE, str(seconds), sources], capture_output=True, text=True,
                         timeout=120, cwd="/")
    if out.returncode != 0:
        raise SystemExit(f"{python}: {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _quartiles(xs):
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return q[0], statistics.median(xs), q[2]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--same-core", action="store_true", help="both builds at once on one CPU, half a period apart")
    ap.add_argument("--sources", default="cpu,per_cpu,memory,disk,net,load",
                    help="--same-core: the sources (default: the host set)")
    args = ap.parse_args(argv)
    if args.same_core:
        r = same_core(args.before, args.after, args.pairs, args.seconds, args.sources)
        if args.json:
            print(json.dumps(r, indent=1))
            return 0
        lo, med, hi = _quartiles(r["ratios"])
        print(f"same core, {r['sources']}: thread CPU per sample before {statistics.median(r['before_ns']):.0f} ns, "
              f"after {statistics.median(r['after_ns']):.0f} ns; after/before {r['median']:.4f} [IQR {lo:.4f} .. "
              f"{hi:.4f}], the median's 95 % interval {r['median_ci'][0]:.4f} .. {r['median_ci'][1]:.4f}, "
              f"n={len(r['ratios'])}")
        return 0
    results = {}
    for name, sources in SETS.items():
        pairs = []
        for i in range(args.pairs):
            roles = (("before", args.before), ("after", args.after))
            got = {role: _probe(py, args.seconds, sources) for role, py in (roles if i % 2 == 0 else roles[::-1])}
            pairs.append((got["before"], got["after"]))  # one python given twice: two probes, an A-vs-A
        results[name] = pairs
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    print(f"{'set':5} {'metric':28} {'before median':>14} {'after median':>13} {'after/before [IQR]':>26}  n")
    for name, pairs in results.items():
        for key, label in METRICS:
            b = [p[0][key] for p in pairs]
            a = [p[1][key] for p in pairs]
            r = [x / y for x, y in zip(a, b) if y > 0]
            lo, med, hi = _quartiles(r)
            print(f"{name:5} {label:28} {statistics.median(b):14.0f} {statistics.median(a):13.0f} "
                  f"{med:9.3f} [{lo:.3f} .. {hi:.3f}]  {len(r)}")
        ch = {p[1]['channels'] for p in pairs} | {p[0]['channels'] for p in pairs}
        print(f"{name:5} channels: {sorted(ch)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
