"""Two installed builds of sysprof side by side, in one run: the sampling thread's CPU per sample at 1 kHz (its
schedstat, wake-ups included) and its in-tick time, the
latency of ``Sampler.sample()`` and the cost of ``drain()`` per row, each as after/before ratios over
interleaved pairs (so machine load shifts both alike).

    python benchmarks/compare_builds.py BEFORE_PYTHON AFTER_PYTHON [--pairs 7] [--seconds 1.5]

Each python must import an installed sysprof (a venv's bin/python). Only the public API is used, so any
two versions can be compared. Prints a table and, with --json, the raw figures.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

# Run inside each interpreter: one measurement, printed as JSON.
_PROBE = r"""
import json, os, sys, time
import sysprof
seconds, sources = float(sys.argv[1]), sys.argv[2].split(",")
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
    args = ap.parse_args(argv)
    results = {}
    for name, sources in SETS.items():
        pairs = []
        for i in range(args.pairs):
            order = (args.before, args.after) if i % 2 == 0 else (args.after, args.before)
            got = {py: _probe(py, args.seconds, sources) for py in order}
            pairs.append((got[args.before], got[args.after]))
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
