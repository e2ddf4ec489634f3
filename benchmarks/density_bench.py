"""Sample density of the SystemProfiler trace: samples present per active window vs expected.

Runs a standalone :func:`sysprof.profile` loop whose "batches" are pure-Python busy work (the main thread holds the
GIL), with all four ``profile_*`` sources on at ``--interval`` (default 1 ms) and a cyclic schedule, then reads the
trace back. For each recording window (from the first ``batch_start`` of a cycle to the ``batch_end`` that saves
it, taken from the ``step`` markers), expected = window duration / interval, got = ``cpu`` counter events in it.
Goal (issue 3): got/expected >= 95 % for every window.

Usage::

    python benchmarks/density_bench.py [--interval 0.001] [--batch-ms 20] [--epochs-batches 40] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import sysprof.profiler.profiler as sp  # noqa: E402
from sysprof.trace.chrome import read_trace  # noqa: E402
from sysprof.profiler.schedule import cyclic_schedule  # noqa: E402


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        sum(range(200))


def run(interval: float, batch_ms: float, batches: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        t0 = time.perf_counter()
        with sp.profile(folder, schedule=cyclic_schedule(wait=2, warmup=1, active=7, repeat=0),
                        sys_prof_cpu=True, sys_prof_memory=True, sys_prof_disk=True, sys_prof_net=True,
                        sys_prof_stats_thread_interval_seconds=interval) as prof:
            sysp = prof.system_profiler
            for _ in range(batches):
                with prof.marker("step"):
                    busy(batch_ms / 1e3)
                prof.step()
            sampler_stats = dict(sysp.sampler.stats)
        wall = time.perf_counter() - t0
        windows, cpu, n_events = [], [], 0
        for name in sorted(os.listdir(folder)):
            if not name.startswith("ep"):
                continue
            events = read_trace(os.path.join(folder, name))
            n_events += len(events)
            steps = sorted(e["ts"] for e in events if e["name"] == "step")
            if steps:
                windows.append((steps[0], steps[-1]))
            cpu += [e["ts"] for e in events if e["name"] == "cpu"]
    per_window = []
    for lo, hi in windows:
        expected = (hi - lo) / 1e6 / interval
        got = sum(lo <= t <= hi for t in cpu)
        per_window.append({"start_us": lo, "duration_ms": (hi - lo) / 1e3, "expected": expected, "got": got,
                           "density": got / expected if expected else float("nan")})
    return {"interval_s": interval, "batch_ms": batch_ms, "batches": batches, "wall_s": wall,
            "ideal_wall_s": batches * batch_ms / 1e3, "trace_events": n_events, "windows": per_window,
            "min_density": min(w["density"] for w in per_window), "sampler": sampler_stats}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--interval", type=float, default=0.001)
    ap.add_argument("--batch-ms", type=float, default=20.0)
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    r = run(args.interval, args.batch_ms, args.batches)
    if args.json:
        print(json.dumps(r, indent=2))
        return
    print(f"interval {r['interval_s'] * 1e3:g} ms, {r['batches']} batches of {r['batch_ms']:g} ms busy Python; "
          f"wall {r['wall_s']:.2f} s (ideal {r['ideal_wall_s']:.2f} s), {r['trace_events']} trace events")
    print(f"{'window':>6} {'ms':>8} {'expected':>9} {'got':>6} {'density':>8}")
    for i, w in enumerate(r["windows"]):
        print(f"{i:6d} {w['duration_ms']:8.1f} {w['expected']:9.1f} {w['got']:6d} {w['density']:8.1%}")
    print(f"min density {r['min_density']:.1%}; sampler: missed_deadlines={r['sampler'].get('missed_deadlines')} "
          f"dropped={r['sampler'].get('dropped')} sample_ns_mean={r['sampler'].get('sample_ns_mean', 0):.0f}")


if __name__ == "__main__":
    main()
