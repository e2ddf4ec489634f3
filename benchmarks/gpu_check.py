#!/usr/bin/env python3
"""GPU checks for sysprof's NVML source, to run on a machine with NVIDIA GPUs (issue 4).

    python benchmarks/gpu_check.py [--seconds 3] [--calls 2000] [--load] [--json PATH]

1 latency   per-call latency of each NVML function the native source uses, per device (ctypes straight
            into libnvidia-ml; the ctypes overhead, about 1 us, is measured and shown separately)
2 changes   how often each gpu channel actually changes when polled every 1 ms by the native sampler
3 agree     native sampler vs the pynvml path (psutil backend) read back to back
4 energy    energy counter delta vs the integral of power_watts, and energy_power_watts vs power_watts
5 cost      the sampling thread's cost per tick per device (goal <= 50 us): since NVML runs on the gpu
            source's reader thread, this is the copy of the latest reading; a reading's NVML time is
            the sum of the section 1 latencies, spent on the reader thread

--load runs a matmul loop on every GPU (needs torch with CUDA) so that utilization, power and clocks
move. Without a GPU (no library, no driver, no device) it prints "no GPU: <reason>" and exits 0.
SYSPROF_NVML_LIBRARY selects another NVML library (e.g. tests/fake_nvml for a dry run).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import statistics
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import sysprof  # noqa: E402
from sysprof.sampling.portable import nvml_table  # noqa: E402
from sysprof.sampling.portable.nvml import library_path  # noqa: E402

GOAL_NS_PER_DEVICE = 50_000


# -- the NVML ABI subset (as csrc/gpu/nvml_abi.hpp; values from pynvml.py) -----------------------------
class FieldValue(ctypes.Structure):
    _fields_ = [("fieldId", ctypes.c_uint), ("scopeId", ctypes.c_uint), ("timestamp", ctypes.c_longlong),
                ("latencyUsec", ctypes.c_longlong), ("valueType", ctypes.c_int), ("nvmlReturn", ctypes.c_int),
                ("value", ctypes.c_ulonglong)]


class MemoryV2(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong), ("reserved", ctypes.c_ulonglong),
                ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class MemoryV1(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class TemperatureV1(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("sensorType", ctypes.c_int), ("temperature", ctypes.c_int)]


class Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


# The field rows of the metric table (sysprof/sampling/portable/nvml_table.py), by field name.
FIELDS = {m.call.replace("NVML_FI_DEV_", ""): (m.field_id, m.scope) for m in nvml_table.FIELDS}


def open_nvml():
    """(library, device handles) or raises RuntimeError("no GPU: ...")."""
    path = library_path()
    try:
        lib = ctypes.CDLL(path)
    except OSError as exc:
        raise RuntimeError(f"no GPU: NVML library not loadable ({path}): {exc}") from None
    r = lib.nvmlInit_v2()
    if r != 0:
        raise RuntimeError(f"no GPU: nvmlInit_v2 returned {r}")
    n = ctypes.c_uint()
    if lib.nvmlDeviceGetCount_v2(ctypes.byref(n)) != 0 or n.value == 0:
        raise RuntimeError("no GPU: NVML found no device")
    handles = []
    for i in range(n.value):
        h = ctypes.c_void_p()
        if lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h)) == 0:
            handles.append((i, h))
    return path, lib, handles


def calls_for(lib, h):
    """name -> zero-argument callable returning the nvmlReturn of one call."""
    util, m2, m1, t = Utilization(), MemoryV2(), MemoryV1(), TemperatureV1()
    u, ull = ctypes.c_uint(), ctypes.c_ulonglong()

    def mem_v2():
        m2.version = ctypes.sizeof(MemoryV2) | (2 << 24)
        return lib.nvmlDeviceGetMemoryInfo_v2(h, ctypes.byref(m2))

    def temp_v():
        t.version, t.sensorType = ctypes.sizeof(TemperatureV1) | (1 << 24), 0
        return lib.nvmlDeviceGetTemperatureV(h, ctypes.byref(t))

    def fields(names):
        arr = (FieldValue * len(names))()
        for k, name in enumerate(names):
            arr[k].fieldId, arr[k].scopeId = FIELDS[name]

        def call():
            r = lib.nvmlDeviceGetFieldValues(h, len(names), arr)
            return r if r else max((arr[k].nvmlReturn for k in range(len(names))), default=0)
        return call

    out = {
        "nvmlDeviceGetUtilizationRates": lambda: lib.nvmlDeviceGetUtilizationRates(h, ctypes.byref(util)),
        "nvmlDeviceGetMemoryInfo_v2": mem_v2,
        "nvmlDeviceGetMemoryInfo": lambda: lib.nvmlDeviceGetMemoryInfo(h, ctypes.byref(m1)),
        "nvmlDeviceGetPowerUsage": lambda: lib.nvmlDeviceGetPowerUsage(h, ctypes.byref(u)),
        "nvmlDeviceGetTotalEnergyConsumption": lambda: lib.nvmlDeviceGetTotalEnergyConsumption(h, ctypes.byref(ull)),
        "nvmlDeviceGetTemperatureV": temp_v,
        "nvmlDeviceGetTemperature": lambda: lib.nvmlDeviceGetTemperature(h, 0, ctypes.byref(u)),
        "nvmlDeviceGetClockInfo(SM)": lambda: lib.nvmlDeviceGetClockInfo(h, 1, ctypes.byref(u)),
        "nvmlDeviceGetClockInfo(MEM)": lambda: lib.nvmlDeviceGetClockInfo(h, 2, ctypes.byref(u)),
        "nvmlDeviceGetFieldValues(all 6 fields)": fields(list(FIELDS)),
    }
    for name in FIELDS:
        out[f"nvmlDeviceGetFieldValues({name})"] = fields([name])
    return out


def latency(lib, handles, n):
    print("\n== 1 latency: per call, us (median / p99), ctypes overhead included ==")
    empty = ctypes.CDLL(None).getpid  # a trivial C call: the ctypes floor
    ts = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        empty()
        ts.append(time.perf_counter_ns() - t0)
    floor = statistics.median(ts) / 1e3
    print(f"  ctypes floor (getpid): {floor:.2f} us")
    res = {"ctypes_floor_us": floor, "devices": {}}
    for idx, h in handles:
        rows = {}
        for name, fn in calls_for(lib, h).items():
            try:
                r = fn()
            except AttributeError:
                rows[name] = {"error": "symbol missing"}
                continue
            if r != 0:
                rows[name] = {"error": f"nvmlReturn {r}"}
                continue
            ts = []
            for _ in range(n):
                t0 = time.perf_counter_ns()
                fn()
                ts.append(time.perf_counter_ns() - t0)
            ts.sort()
            rows[name] = {"median_us": ts[len(ts) // 2] / 1e3, "p99_us": ts[int(len(ts) * 0.99)] / 1e3, "n": n}
        res["devices"][idx] = rows
        print(f"  gpu/{idx}:")
        for name, v in rows.items():
            if "error" in v:
                print(f"    {name:48s} {v['error']}")
            else:
                print(f"    {name:48s} {v['median_us']:9.2f} {v['p99_us']:9.2f}")
    return res


def gpu_load(stop: threading.Event):
    """A matmul loop per GPU, if torch with CUDA is here; returns the started threads."""
    try:
        import torch
    except ImportError:
        print("  (--load: torch not installed; no load)")
        return []
    if not torch.cuda.is_available():
        print("  (--load: torch has no CUDA; no load)")
        return []

    def run(dev):
        a = torch.randn(8192, 8192, device=f"cuda:{dev}", dtype=torch.bfloat16)
        while not stop.is_set():
            for _ in range(10):
                a @ a
            torch.cuda.synchronize(dev)
    threads = [threading.Thread(target=run, args=(d,), daemon=True) for d in range(torch.cuda.device_count())]
    for t in threads:
        t.start()
    return threads


def changes(seconds):
    print(f"\n== 2 changes: native sampler at 1 ms for {seconds:g} s ==")
    s = sysprof.Sampler(interval=0.001, cpu=False, memory=False, disk=False, net=False, gpu=True,
                        backend="native", capacity=1 << 20)
    gpu = [c for c in s.channels if c.startswith("gpu/")]
    s.start()
    time.sleep(seconds)
    s.stop()
    b = s.drain()
    dur = (b.timestamps_ns[-1] - b.timestamps_ns[0]) / 1e9 if len(b) > 1 else float("nan")
    res = {"rows": len(b), "seconds": dur, "stats": s.stats, "channels": {}}
    print(f"  {len(b)} rows over {dur:.3f} s; errors: {s.errors}")
    print(f"  {'channel':48s} {'changes/s':>10s} {'median gap ms':>14s} {'NaN %':>7s}")
    for c in gpu:
        v = b.column(c)
        ok = ~np.isnan(v)
        vv = v[ok]
        idx = np.flatnonzero(np.diff(vv) != 0) if vv.size > 1 else np.array([], dtype=int)
        ts = b.timestamps_ns[ok]
        gaps = np.diff(ts[idx + 1]) / 1e6 if idx.size > 1 else np.array([])
        row = {"changes_per_s": idx.size / dur if dur else math.nan,
               "median_gap_ms": float(np.median(gaps)) if gaps.size else math.nan,
               "nan_fraction": float(1 - ok.mean()) if len(v) else math.nan}
        res["channels"][c] = row
        print(f"  {c:48s} {row['changes_per_s']:10.1f} {row['median_gap_ms']:14.2f} {100 * row['nan_fraction']:7.1f}")
    return res, b, s


def agree(n=20):
    print("\n== 3 agree: native vs pynvml, read back to back ==")
    try:
        py = sysprof.Sampler(cpu=False, memory=False, disk=False, net=False, gpu=True, backend="psutil")
    except Exception as exc:  # noqa: BLE001
        print(f"  pynvml path unavailable: {exc}")
        return {"error": str(exc)}
    nat = sysprof.Sampler(cpu=False, memory=False, disk=False, net=False, gpu=True, backend="native")
    if "gpu" in py.errors and not [c for c in py.channels if c.startswith("gpu/")]:
        print(f"  pynvml path unavailable: {py.errors['gpu']}")
        return {"error": py.errors["gpu"]}
    diffs = {}
    for _ in range(n):
        time.sleep(0.02)
        a, b = nat.sample(), py.sample()
        for c in nat.channels:
            x, y = a.get(c, math.nan), b.get(c, math.nan)
            d = diffs.setdefault(c, {"max_abs": 0.0, "max_rel": 0.0, "nan_mismatch": 0})
            if math.isnan(x) != math.isnan(y):
                d["nan_mismatch"] += 1
            elif not math.isnan(x):
                d["max_abs"] = max(d["max_abs"], abs(x - y))
                d["max_rel"] = max(d["max_rel"], abs(x - y) / max(abs(x), abs(y), 1e-12))
    print(f"  {'channel':48s} {'max |diff|':>14s} {'max rel':>9s} {'NaN mismatch':>13s}")
    for c, d in diffs.items():
        print(f"  {c:48s} {d['max_abs']:14.4g} {d['max_rel']:9.3%} {d['nan_mismatch']:13d}")
    return diffs


def energy(b, devices):
    print("\n== 4 energy: counter delta vs integrated power_watts (same 1 ms rows) ==")
    res = {}
    t = b.timestamps_ns / 1e9
    for d in devices:
        e, p, ep = (b.column(f"gpu/{d}/{k}") for k in ("energy_joules", "power_watts", "energy_power_watts"))
        ok = ~np.isnan(e) & ~np.isnan(p)
        if ok.sum() < 2:
            print(f"  gpu/{d}: energy or power unavailable")
            continue
        de = e[ok][-1] - e[ok][0]
        pp, tt = p[ok], t[ok]
        pint = float(np.sum((pp[1:] + pp[:-1]) / 2 * np.diff(tt)))  # trapezoid rule
        mep = float(np.nanmean(ep)) if np.isfinite(ep).any() else math.nan
        res[d] = {"energy_delta_j": de, "integrated_power_j": pint, "ratio": de / pint if pint else math.nan,
                  "mean_power_watts": float(np.mean(p[ok])), "mean_energy_power_watts": mep}
        print(f"  gpu/{d}: dE = {de:.3f} J, integral of power_watts = {pint:.3f} J, ratio {res[d]['ratio']:.4f}; "
              f"mean power_watts {res[d]['mean_power_watts']:.2f} W vs mean energy_power_watts {mep:.2f} W")
    return res


def cost(s, ndev):
    print("\n== 5 cost: sampling thread, gpu source only (the copy of the reader thread's latest reading) ==")
    st = s.stats
    per_dev = st["sample_ns_mean"] / max(1, ndev)
    p99 = st["sample_ns_p99"] / max(1, ndev)
    verdict = "MET" if per_dev <= GOAL_NS_PER_DEVICE else "MISSED"
    print(f"  per tick: mean {st['sample_ns_mean'] / 1e3:.1f} us, p99 {st['sample_ns_p99'] / 1e3:.1f} us, "
          f"max {st['sample_ns_max'] / 1e3:.1f} us; missed deadlines {st['missed_deadlines']} of {st['taken']}")
    print(f"  per device: mean {per_dev / 1e3:.1f} us, p99 {p99 / 1e3:.1f} us  "
          f"(goal <= {GOAL_NS_PER_DEVICE / 1e3:.0f} us): {verdict}")
    return {"per_device_mean_ns": per_dev, "per_device_p99_ns": p99, "goal_ns": GOAL_NS_PER_DEVICE,
            "verdict": verdict, "stats": st}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="1 ms sampling run length (sections 2, 4, 5)")
    ap.add_argument("--calls", type=int, default=2000, help="calls per function in section 1")
    ap.add_argument("--load", action="store_true", help="matmul loop on every GPU meanwhile (torch)")
    ap.add_argument("--json", help="write all figures here")
    args = ap.parse_args(argv)
    try:
        path, lib, handles = open_nvml()
    except RuntimeError as exc:
        print(str(exc))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"gpu": False, "reason": str(exc)}, f)
        return 0
    ok, why = sysprof.sampling.sampler.native_available()
    if not ok:
        print(f"native backend unavailable: {why}")
        return 1
    probe = sysprof.Sampler(cpu=False, memory=False, disk=False, net=False, gpu=True, backend="native")
    print(f"NVML: {path}; devices: {probe.devices}")
    if probe.errors:
        print(f"errors: {probe.errors}")
    devices = [d["index"] for d in probe.devices]
    out = {"gpu": True, "library": path, "devices": probe.devices, "errors": probe.errors}
    stop = threading.Event()
    if args.load:
        gpu_load(stop)
        time.sleep(1.0)
    try:
        out["latency"] = latency(lib, handles, args.calls)
        out["changes"], rows, sampler = changes(args.seconds)
        out["agree"] = agree()
        out["energy"] = energy(rows, devices)
        out["cost"] = cost(sampler, len(devices))
    finally:
        stop.set()
        lib.nvmlShutdown()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
        print(f"\nwritten: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
