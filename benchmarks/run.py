#!/usr/bin/env python3
"""sysprof benchmark suite: sysprof against psutil, the seed's design and the kernel's own floor, in one run.

    python benchmarks/run.py [--quick] [--json PATH] [--only SECTION ...]
    sysprof bench [-- ARGS]

Sections (issue 6):
  1 cost         per-sample cost per source and for the host set: native Sampler.sample() from Python (minus
                 the measured cost of an empty native call), the sampling thread's own cost, psutil reading the
                 same metrics, and the floor (a C loop that only preads the same /proc files)
    latest       Sampler.latest() per call beside sample(), and wait_next()'s latency (issue 11)
    paced        the sampling thread's CPU per sample at 1 kHz against a paced C floor of the same files (issue 11),
                 interleaved pairs, with the breakdown (in/out of ticks; perf where available)
  2 interference a pure-Python loop (>= 2 s, >= 9 interleaved pairs A B A ..., each B against its neighbouring
                 A's, the machine's noise from A-vs-A pairs) alone vs while sampling (sysprof at 100 Hz, 1 kHz,
                 10 kHz; the seed's design: psutil in a Python thread with time.sleep): the main thread's run delay
                 (schedstat), wall slowdown, deadlines hit; then with every core busy (one spinner per core): the
                 same, and the sampler thread's CPU per second (the price)
  3 timing       |period - interval| at 1 kHz from drained timestamps (idle main thread, and busy from 2)
  4 marker       benchmarks/marker_bench.py when present
  5 memory       RSS after 10^6 samples drained in batches vs after 10^3; bytes per sample in ring and trace;
                 a default Sampler() with the host set at 1 kHz over 60 s
  6 scaling      cost per sample on synthetic /proc trees with 2..1024 CPUs, 1..256 disks, 1..256 NICs
  7 writer       drained batches -> trace events -> file: samples/s and bytes/s
  8 kstat        the kernel's side of /proc/stat: one read's cost, where show_stat() spends it, and the
                 O(CPUs) + O(IRQs) model with estimates for large nodes (bench_kstat.py; never hotplugs)
    node         the default sources' kernel cost per file, per CPU and per device line here (both ways of reading
                 the disks, the root cgroup's cpu.stat beside /proc/stat), and the model of a 224-CPU, 16-disk,
                 16-NIC node at the old and new defaults, with and without a CPU budget (bench_node_model.py)
    cold         the cache lines one tick touches, counted under cachegrind, not timed (bench_cold.py; builds
                 csrc/ with g++, so it is left out of --quick unless named with --only)
  9 density      bytes per sample of every output path at 1 kHz (host set), samples per deadline (issue 12)
    mark         sysprof.mark()/mark_instant() per call: no recorder, the Python and the native writer
    phases       by_phase() and the verdict on a synthetic trace
    frames       Batch.to_pandas(), read_trace() per row; Parquet/CSV/JSON bytes per sample
    pftrace      the Perfetto protobuf trace against the Chrome JSON of the same recording: size, write, read
    smaps        /proc/<pid>/smaps_rollup per read against /proc/<pid>/stat, small and large processes
    prometheus   /metrics scrape latency with ~200 channels, the endpoint's fold, the sampler's cost with it
    gpu          the GPU source per device per reading on the fake NVML (the reader thread's CPU, the tick's copy)
    integrations the Lightning and Hugging Face callbacks' added step time at 10 ms (the frameworks venv; built on
                 first use, so it is left out of --quick unless named with --only)

Every figure carries its n and spread (median, p99, IQR, min/max). Ratios are taken within one run, with the
compared measurements interleaved, because these machines are noisy: absolute times are only a guide.
Goals are checked at the end; a missed goal is printed as MISSED with the measured figure.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # run as a script (``sysprof bench`` runs this file): the sections are its siblings
    sys.path.insert(0, HERE)

from bench_util import NO_SOURCES, Floor  # noqa: E402
from bench_busy import machine_cpu_seconds  # noqa: E402
from bench_cost import bench_cost, print_cost  # noqa: E402
from bench_paced import bench_paced, print_paced  # noqa: E402
from bench_interference import bench_interference, bench_timing, print_interference, print_timing  # noqa: E402
from bench_markers import bench_marker, print_marker  # noqa: E402
from bench_memory import bench_memory, bench_scaling, print_memory, print_scaling  # noqa: E402
from bench_writer import bench_writer, print_writer  # noqa: E402
from bench_kstat import bench_kstat, print_kstat  # noqa: E402
from bench_node_model import bench_node, print_node  # noqa: E402
from bench_latest import bench_latest, print_latest  # noqa: E402
from bench_cold import bench_cold, print_cold  # noqa: E402
from bench_density import bench_density, print_density  # noqa: E402
from bench_mark import bench_mark, print_mark  # noqa: E402
from bench_phases import bench_phases, print_phases  # noqa: E402
from bench_frames import bench_frames, print_frames  # noqa: E402
from bench_pftrace import bench_pftrace, print_pftrace  # noqa: E402
from bench_smaps import bench_smaps, print_smaps  # noqa: E402
from bench_prometheus import bench_prometheus, print_prometheus  # noqa: E402
from bench_gpu import bench_gpu, print_gpu  # noqa: E402
from bench_integrations import DEFAULT as INTEGRATIONS_DEFAULT, QUICK_BLOCKS, bench_integrations, print_integrations  # noqa: E402
from bench_goals import goals, print_goals  # noqa: E402

DEFAULT_JSON = os.path.join(HERE, "results", "latest.json")
SECTIONS = ("cost", "paced", "latest", "interference", "timing", "marker", "memory", "scaling", "writer", "kstat",
            "node", "cold", "density", "mark", "phases", "frames", "pftrace", "smaps",
            "prometheus", "gpu", "integrations")
# cold compiles csrc/ and runs under valgrind; integrations trains in the frameworks venv (built on first use):
# minutes each; run them with --only
QUICK_LEAVES_OUT = ("cold", "integrations")


# ------------------------------------------------------------------------------------------------
# main
# ------------------------------------------------------------------------------------------------

def config(quick: bool) -> Dict[str, Any]:
    if quick:
        return {"cost": (2, 300, 60, 300, 0.2), "interference": (3, 0.3), "timing": 1.0,
                "memory": (100_000, 8.0, 10.0), "paced": (3, 1.0, 2.0, 3, 2),
                "scaling": ([2, 64, 1024], [1, 16, 256], [1, 16, 256], 40), "writer": 1,
                "marker": (20_000, 1), "kstat": (3000, 2), "node": 3000, "node_quick": True,
                "latest": (20_000, 300, 100), "cold": 100, "density": (1, 1.0), "mark": (20_000, 1000),
                "phases": (5_000, 10, 2), "frames": {"seconds": 1.0, "trials": 2}, "pftrace": (1.0, 1, 2),
                "smaps": {"reads": 100, "big_mib": 64}, "prometheus": (20, 1, 1.0), "gpu": (2, 0.5), "integrations": (2, 30),
                "integrations_blocks": QUICK_BLOCKS}
    return {"cost": (5, 2000, 300, 2000, 1.0), "interference": (9, 2.0), "timing": 5.0,
            "memory": (1_000_000, 45.0, 60.0), "paced": (15, 1.5, 5.0, 30, 6),
            "scaling": ([2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], [1, 2, 4, 8, 16, 32, 64, 128, 256],
                        [1, 2, 4, 8, 16, 32, 64, 128, 256], 300), "writer": 3,
            "marker": (100_000, 3), "kstat": (20_000, 4), "node": 20_000,
            "latest": (100_000, 2_000, 500), "cold": 300, "density": (3, 8.0), "mark": (200_000, 1000),
            "phases": (30_000, 20, 5), "frames": {"seconds": 3.0, "trials": 9}, "pftrace": (10.0, 3, 3),
            "smaps": {"reads": 2000, "big_mib": 1024}, "prometheus": (200, 3, 3.0), "gpu": (5, 1.0), "integrations": INTEGRATIONS_DEFAULT}


def _busy_ticks() -> Optional[tuple]:
    """(busy seconds of the whole machine, this process's CPU seconds, monotonic time)."""
    busy = machine_cpu_seconds()
    if busy is None:
        return None
    t = os.times()
    return busy, t.user + t.system, time.monotonic()


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
    wanted = args.only or [s for s in SECTIONS if not (args.quick and s in QUICK_LEAVES_OUT)]
    t_start = time.perf_counter()
    results: Dict[str, Any] = {}
    ctx: Dict[str, Any] = {}
    printers = {"cost": print_cost, "paced": print_paced, "interference": print_interference,
                "timing": print_timing, "marker": print_marker, "memory": print_memory, "scaling": print_scaling,
                "writer": print_writer, "kstat": print_kstat, "node": print_node, "latest": print_latest, "cold": print_cold,
                "density": print_density, "mark": print_mark, "phases": print_phases, "frames": print_frames,
                "pftrace": print_pftrace, "smaps": print_smaps, "prometheus": print_prometheus, "gpu": print_gpu, "integrations": print_integrations}
    probe = sysprof.Sampler(interval=1e-3, **NO_SOURCES)
    backend = probe.backend
    del probe
    tmp = tempfile.mkdtemp(prefix="sysprof-bench-")
    text: List[str] = []
    try:
        floor = Floor(tmp)
        # Order matters: interference fills ctx for timing (busy periods); timing fills the batch for memory and writer.
        runners = {"cost": lambda: bench_cost(cfg, sysprof, floor, ctx),
                   "paced": lambda: bench_paced(cfg, sysprof, floor, ctx),
                   "interference": lambda: bench_interference(cfg, sysprof, floor, ctx),
                   "timing": lambda: bench_timing(cfg, sysprof, floor, ctx),
                   "marker": lambda: bench_marker(cfg, args.quick),
                   "memory": lambda: bench_memory(cfg, sysprof, ctx),
                   "scaling": lambda: bench_scaling(cfg, sysprof, ctx),
                   "writer": lambda: bench_writer(cfg, sysprof, ctx),
                   "kstat": lambda: bench_kstat(cfg),
                   "node": lambda: bench_node(cfg),
                   "latest": lambda: bench_latest(cfg, sysprof),
                   "cold": lambda: bench_cold(cfg["cold"]),
                   "density": lambda: bench_density(cfg, sysprof),
                   "mark": lambda: bench_mark(cfg, sysprof),
                   "phases": lambda: bench_phases(cfg, sysprof),
                   "frames": lambda: bench_frames(cfg, sysprof),
                   "pftrace": lambda: bench_pftrace(cfg, sysprof),
                   "smaps": lambda: bench_smaps(cfg["smaps"]),
                   "prometheus": lambda: bench_prometheus(cfg, sysprof),
                   "gpu": lambda: bench_gpu(cfg, sysprof),
                   "integrations": lambda: bench_integrations(cfg, sysprof)}
        native_only = ("cost", "paced", "scaling")
        order = [s for s in SECTIONS if s in wanted]
        if ("memory" in order or "writer" in order) and "timing" not in order:
            order.insert(0, "timing")  # they need its batch
        for name in order:
            t0 = time.perf_counter()
            b0 = _busy_ticks()
            print(f"[bench] {name} ...", file=sys.stderr, flush=True)
            if backend != "native" and name in native_only:
                results[name] = {"available": False, "reason": f"needs the native backend (have {backend})"}
            else:
                results[name] = runners[name]()
            results[name]["seconds"] = time.perf_counter() - t0
            results[name]["background_load"] = background_load(b0, _busy_ticks())
            if results[name].get("available") is False and name in native_only:
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
