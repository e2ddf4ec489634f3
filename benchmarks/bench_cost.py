"""Benchmark section 1, per-sample cost: native Sampler.sample() per source and set, the sampling thread's own
cost, psutil reading the same metrics, and the C floor."""
from __future__ import annotations

import math
import time
from typing import Any, Dict

import numpy as np

from bench_util import dist, fmt, fd, table, NO_SOURCES, _psutil_sets, metric_sets, Floor, _time_calls, _raw_sample


def bench_cost(cfg, sysprof, floor: Floor, ctx) -> Dict[str, Any]:
    rounds, n_native, n_psutil, n_floor, t_thread = cfg["cost"]
    sets = metric_sets()
    ps = _psutil_sets()
    samplers = {name: sysprof.Sampler(interval=1e-3, **flags) for name, _, flags, _, _ in sets}
    empty = sysprof.Sampler(interval=1e-3, **NO_SOURCES)
    backend = empty.backend
    raw = {"empty": [], **{name: {"native": [], "floor": [], "psutil": []} for name, *_ in sets}}
    per_round = {name: [] for name, *_ in sets}  # (native net median, floor median) per round
    public = []
    host = samplers["host set"]
    for fn in [_raw_sample(s) for s in samplers.values()] + [p for p in ps]:
        _time_calls(fn, 20)  # warm-up
    for r in range(rounds):
        e = _time_calls(_raw_sample(empty), n_native)
        raw["empty"] += e
        e_med = float(np.median(e))
        for name, _, flags, pi, files in sets:
            f = floor.run(files, n_floor)
            nat = _time_calls(_raw_sample(samplers[name]), n_native)
            psu = _time_calls(ps[pi], n_psutil)
            raw[name]["floor"] += f
            raw[name]["native"] += nat
            raw[name]["psutil"] += psu
            if f:
                per_round[name].append((float(np.median(nat)) - e_med, float(np.median(f))))
        public += _time_calls(host.sample, max(10, n_native // 4))
    e_med = float(np.median(raw["empty"]))
    rows = {}
    for name, desc, flags, pi, files in sets:
        s = samplers[name]
        # the thread's own cost: run at 1 kHz, read stats
        th = sysprof.Sampler(interval=1e-3, **flags)
        th.start()
        time.sleep(t_thread)
        th.stop()
        st = th.stats
        th.drain()
        paced_cost, _ = floor.paced(files, max(10, int(t_thread * 1000)), 1_000_000)
        fp = dist(np.asarray(paced_cost) / 1e3, "us")
        nat = np.asarray(raw[name]["native"], dtype=np.float64)
        native = dist(nat / 1e3, "us")
        native_net = dist((nat - e_med) / 1e3, "us")
        fl = dist(np.asarray(raw[name]["floor"]) / 1e3, "us")
        psu = dist(np.asarray(raw[name]["psutil"]) / 1e3, "us")
        ratios_floor = [a / b for a, b in per_round[name] if b > 0]
        row = {
            "description": desc, "channels": len(s.channels), "files": [p for p, _ in files],
            "native_sample": native, "native_sample_net": native_net,
            "thread": {"taken": st.get("taken"), "sample_ns_mean": st.get("sample_ns_mean"),
                       "sample_ns_p99": st.get("sample_ns_p99"), "sample_ns_max": st.get("sample_ns_max"),
                       "unit": "ns", "n": st.get("taken")},
            "psutil": psu, "floor": fl, "floor_paced_1khz": fp,
            "native_over_floor": (native_net["median"] / fl["median"]) if fl.get("median") else None,
            "native_over_floor_per_round": dist(ratios_floor, "x"),
            "thread_mean_over_paced_floor_mean": ((st.get("sample_ns_mean") or math.nan) / 1e3 / fp["mean"])
            if fp.get("mean") else None,
            "psutil_over_native": (psu["median"] / native["median"]) if native.get("median") else None,
        }
        rows[name] = row
    ctx["host_channels"] = len(host.channels)
    return {
        "backend": backend,
        "method": ("interleaved rounds; each call timed alone with perf_counter_ns; native = the extension's "
                   "sample() (no dict), native_net = native minus the median cost of the same call on a "
                   "sampler with no sources (call + array overhead); floor = C loop of preads (benchmarks/"
                   "floor.c), no parsing; thread = the sampling thread's own stats at 1 kHz, compared with the "
                   "floor paced at 1 kHz (caches cool between ticks in both)"),
        "rounds": rounds, "empty_native_call": dist(np.asarray(raw["empty"]) / 1e3, "us"),
        "public_sample_host_set": dist(np.asarray(public) / 1e3, "us"),
        "floor_error": floor.error, "sets": rows,
    }


def print_cost(res) -> str:
    rows = []
    for name, r in res["sets"].items():
        th = r["thread"]
        rows.append([name, r["channels"], fd(r["native_sample_net"]), fmt(r["native_sample"]["median"]),
                     f"{fmt((th['sample_ns_mean'] or math.nan) / 1e3)} / {fmt((th['sample_ns_p99'] or math.nan) / 1e3)}"
                     f" (n={th['n']})",
                     f"{fmt(r['floor_paced_1khz']['mean'])} / {fmt(r['floor_paced_1khz']['p99'])} "
                     f"(n={r['floor_paced_1khz']['n']})",
                     fd(r["floor"]), fd(r["psutil"]), fmt(r["native_over_floor"]),
                     fmt(r["psutil_over_native"])])
    e = res["empty_native_call"]
    return ("## 1. Per-sample cost (µs)\n\n"
            + table(["set", "ch", "native sample() − call overhead", "native raw median",
                     "thread mean / p99", "floor paced 1 kHz mean / p99", "floor (preads only)", "psutil same metrics", "native/floor",
                     "psutil/native"], rows)
            + f"\n\nempty native call (subtracted): {fd(e)} µs; public Sampler.sample() on the host set "
              f"(builds a dict): {fd(res['public_sample_host_set'])} µs; backend {res['backend']}"
            + (f"\nfloor: not available ({res['floor_error']})" if res["floor_error"] else "") + "\n")
