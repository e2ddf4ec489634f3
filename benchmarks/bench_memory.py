"""Benchmark sections 5 and 6: RSS over 10^6 drained samples, bytes per sample in the ring and in trace files,
and per-sample cost on synthetic /proc trees."""
from __future__ import annotations

import gc
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict

import numpy as np

import synthetic_proc
from bench_writer import converters, open_writer

from bench_util import dist, fmt, table, rss_bytes, _flags, _time_calls, _raw_sample


# ------------------------------------------------------------------------------------------------
# section 5: memory
# ------------------------------------------------------------------------------------------------

def _trace_bytes(rows_ts, values, channels, tmp: str) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    n = int(rows_ts.size)
    if n == 0:
        return {"available": False, "reason": "no rows"}
    for label, writer_path, write in converters(channels):
        p = os.path.join(tmp, f"bytes_{label}{writer_path}")
        w = open_writer(p)
        write(w, rows_ts, values)
        w.close()
        out[label + writer_path] = {"bytes_per_sample": os.path.getsize(p) / n, "samples": n}
    return {"available": True, "channels": len(channels), "files": out}


HOST_SET = _flags(cpu=True, per_cpu=True, memory=True, disk=True, net=True, load=True)


def default_sampler_memory(sysprof, seconds: float, drain_every: float = 0.5) -> Dict[str, Any]:
    """RSS of a default ``Sampler()`` (default capacity) with the host set at 1 kHz over ``seconds``, drained every
    ``drain_every`` s with the batches dropped: the memory a user's default sampler holds. Measured in a fresh
    process: in this one, memory the earlier sections freed would be reused and hide the growth."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import sysprof, bench_memory; "
            "print(json.dumps(bench_memory._default_sampler_memory_here(sysprof, float(sys.argv[2]), "
            "float(sys.argv[3]))))")
    r = subprocess.run([sys.executable, "-c", code, os.path.dirname(os.path.abspath(__file__)), str(seconds),
                        str(drain_every)], capture_output=True, text=True, timeout=seconds + 120, cwd="/")
    if r.returncode != 0:
        raise RuntimeError(f"default-sampler memory probe failed: {r.stderr.strip()[-500:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _default_sampler_memory_here(sysprof, seconds: float, drain_every: float) -> Dict[str, Any]:
    gc.collect()
    before = rss_bytes()
    s = sysprof.Sampler(interval=1e-3, **HOST_SET)
    constructed = rss_bytes()
    width, capacity = len(s.channels), s.capacity
    marks = [m for m in (1, 5, 10, 20, 30, 45, 60, 90, 120) if m <= seconds]
    at: Dict[str, int] = {}
    peak = constructed
    s.start()
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < seconds:
            time.sleep(drain_every)
            s.drain()  # the batch is dropped at once
            peak = max(peak, rss_bytes())
            while marks and time.monotonic() - t0 >= marks[0]:
                at[str(marks.pop(0))] = rss_bytes() - before
    finally:
        s.stop()
    st = s.stats
    s.drain()
    return {"seconds": seconds, "channels": width, "capacity_rows": capacity,
            "ring_bytes": capacity * 8 * (1 + width), "rss_before_bytes": before,
            "growth_at_construction_bytes": constructed - before, "growth_by_second_bytes": at,
            "peak_growth_bytes": peak - before, "taken": st["taken"], "dropped": st["dropped"],
            "method": f"Sampler(interval=1e-3) with the host set ({width} channels) and the default capacity "
                      f"({capacity} rows), drained every {drain_every:g} s (batches dropped) for {seconds:g} s; "
                      "growth = RSS (/proc/self/statm) minus RSS before construction, in a fresh process; peak over "
                      "the drains"}


def bench_memory(cfg, sysprof, ctx) -> Dict[str, Any]:
    target, time_limit, default_seconds = cfg["memory"]
    capacity = 16384
    flags = _flags(load=True)
    s = sysprof.Sampler(interval=5e-6, capacity=capacity, **flags)
    width = len(s.channels)
    ring_bytes = capacity * 8 * (1 + width)
    gc.collect()
    rss_constructed = rss_bytes()
    checkpoints = [10 ** k for k in range(3, 7) if 10 ** k <= target] or [target]
    at: Dict[str, Dict[str, Any]] = {}
    total, max_batch = 0, 0
    s.start()
    t0 = time.monotonic()
    while total < target and time.monotonic() - t0 < time_limit:
        time.sleep(0.01)
        b = s.drain()
        total += len(b)
        max_batch = max(max_batch, b.timestamps_ns.nbytes + b.values.nbytes)
        del b
        while checkpoints and total >= checkpoints[0]:
            at[str(checkpoints.pop(0))] = {"samples": total, "rss_bytes": rss_bytes(),
                                           "seconds": time.monotonic() - t0}
    s.stop()
    s.drain()
    st = s.stats
    keys = sorted(at, key=int)
    first, last = (at[keys[0]], at[keys[-1]]) if keys else (None, None)
    growth = (last["rss_bytes"] - first["rss_bytes"]) if keys else None
    allowed = ring_bytes + max_batch
    res = {"interval_us": 5.0, "channels": width, "capacity": capacity, "target_samples": target,
           "samples_drained": total, "seconds": time.monotonic() - t0, "rss_after_construction": rss_constructed,
           "checkpoints": at, "rss_growth_bytes": growth, "ring_bytes": ring_bytes, "largest_batch_bytes": max_batch,
           "allowed_growth_bytes": allowed, "dropped": st.get("dropped"),
           "ring_bytes_per_sample": 8 * (1 + width),
           "ring_bytes_per_sample_host_set": 8 * (1 + ctx.get("host_channels", 0)) if ctx.get("host_channels") else None,
           "method": f"sampler of load/* ({width} channels) at 5 µs, drained every 10 ms and the batches dropped; "
                     "RSS from /proc/self/statm when the drained count first reaches each checkpoint; growth = "
                     "RSS at the last checkpoint - RSS at 10^3; allowed = ring bytes + largest batch"}
    res["default_sampler"] = default_sampler_memory(sysprof, default_seconds)
    tb = ctx.get("timing_batch")
    if tb is not None:
        tmp = tempfile.mkdtemp(prefix="sysprof-bench-")
        try:
            res["trace"] = _trace_bytes(tb[0], tb[1], tb[2], tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return res


def print_memory(res) -> str:
    rows = [[f"{int(k):,}", f"{v['samples']:,}", f"{v['rss_bytes'] / 2**20:.2f}", f"{v['seconds']:.1f}"]
            for k, v in sorted(res["checkpoints"].items(), key=lambda kv: int(kv[0]))]
    out = ("## 5. Memory\n\n"
           + table(["checkpoint", "samples drained", "RSS MiB", "s"], rows)
           + f"\n\nRSS growth {res['checkpoints'] and list(res['checkpoints'])[0]} -> last: "
             f"{(res['rss_growth_bytes'] or 0) / 1024:.0f} KiB (allowed: ring {res['ring_bytes'] / 1024:.0f} KiB + "
             f"largest batch {res['largest_batch_bytes'] / 1024:.0f} KiB); dropped {res['dropped']}\n"
             f"ring bytes/sample: {res['ring_bytes_per_sample']} ({res['channels']} channels); host set: "
             f"{res['ring_bytes_per_sample_host_set']}\n")
    d = res.get("default_sampler")
    if d:
        out += ("\n" + table(["default Sampler(), host set, 1 kHz: s", *d["growth_by_second_bytes"]],
                              [["RSS growth MiB", *(f"{v / 2**20:.2f}" for v in d["growth_by_second_bytes"].values())]])
                + f"\n\npeak growth {d['peak_growth_bytes'] / 2**20:.2f} MiB (at construction "
                  f"{d['growth_at_construction_bytes'] / 2**20:.2f} MiB; ring {d['ring_bytes'] / 2**20:.2f} MiB = "
                  f"{d['capacity_rows']} rows x {d['channels']} channels); taken {d['taken']}, dropped {d['dropped']}. "
                  f"{d['method']}\n")
    tr = res.get("trace")
    if tr and tr.get("available"):
        out += "\n" + table(["trace file (host set, " + str(tr["channels"]) + " channels)", "bytes/sample", "n"],
                            [[k, fmt(v["bytes_per_sample"]), v["samples"]] for k, v in tr["files"].items()]) + "\n"
    elif tr:
        out += f"trace bytes: {tr.get('reason')}\n"
    return out


# ------------------------------------------------------------------------------------------------
# section 6: scaling on synthetic trees
# ------------------------------------------------------------------------------------------------

def bench_scaling(cfg, sysprof, ctx) -> Dict[str, Any]:
    cpu_pts, disk_pts, nic_pts, calls = cfg["scaling"]
    tmp = tempfile.mkdtemp(prefix="sysprof-scale-")
    out: Dict[str, Any] = {"method": ("synthetic /proc trees (benchmarks/synthetic_proc.py, static files on "
                                      "the file system: parse cost, not the kernel's rendering cost); one source "
                                      "per sampler; median of the native sample() call; slope = least squares "
                                      "of the medians"), "calls_per_point": calls}
    try:
        for dim, pts, flags in (("cpus", cpu_pts, _flags(cpu=True, per_cpu=True)),
                                ("disks", disk_pts, _flags(disk=True)), ("nics", nic_pts, _flags(net=True))):
            points = []
            for k in pts:
                root = os.path.join(tmp, f"{dim}{k}")
                kw = {"cpus": 2, "disks": 1, "nics": 1}
                kw[dim] = k
                proc, sys_ = synthetic_proc.make_tree(root, **kw)
                s = sysprof.Sampler(interval=1e-3, proc_root=proc, sys_root=sys_, **flags)
                fn = _raw_sample(s)
                _time_calls(fn, 10)
                d = dist(np.asarray(_time_calls(fn, calls)) / 1e3, "us")
                points.append({"count": k, "channels": len(s.channels), "errors": s.errors, "cost_us": d})
                del s
            x = np.array([p["count"] for p in points], dtype=np.float64)
            y = np.array([p["cost_us"]["median"] for p in points], dtype=np.float64)
            slope, icpt = np.polyfit(x, y, 1) if len(x) >= 2 else (math.nan, math.nan)
            pred = slope * x + icpt
            ss = float(np.sum((y - y.mean()) ** 2))
            r2 = 1 - float(np.sum((y - pred) ** 2)) / ss if ss > 0 else None
            out[dim] = {"points": points, "slope_us_per_unit": float(slope), "intercept_us": float(icpt),
                        "r2": r2, "n_points": len(points)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def print_scaling(res) -> str:
    out = "## 6. Scaling on synthetic /proc trees (native sample(), µs)\n\n"
    rows = []
    for dim in ("cpus", "disks", "nics"):
        r = res[dim]
        pts = ", ".join(f"{p['count']}: {fmt(p['cost_us']['median'])}" for p in r["points"])
        rows.append([dim, f"{r['slope_us_per_unit']:.4f}", fmt(r["intercept_us"]), fmt(r["r2"]), pts])
    return out + table(["dimension", "slope µs/unit", "intercept µs", "r²", "count: median µs"], rows) + \
        f"\n\n(n = {res['calls_per_point']} calls per point)\n"
