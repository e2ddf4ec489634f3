"""Benchmark section: what the GPU source costs per device per reading, on the fake NVML library
(tests/fake_nvml/fake_nvml.c, built here with cc; on a machine with a GPU, SYSPROF_BENCH_REAL_NVML=1 uses the
real libnvidia-ml instead).

The native source's NVML calls run on its reader thread ("sysprof-nvml"); the sampling thread only copies the
reader's latest reading. Both are measured on one sampler running at 1 kHz with only the gpu source: the
reader's CPU time (its /proc schedstat) per reading per device, which includes the clock event reasons (asked
at every reading), the health rows read once a second (amortised) and the two GPM calls per reading; the sampling thread's
``sample_ns_mean`` per tick (the copy); and what one driver-samples read of a device (nvmlDeviceGetSamples for
its five types, every 0.5 s; four served on the fake) costs the reader thread, native and pynvml (the reader's
own thread CPU clock around the reads). Running this file with another build's Python (e.g. main's venv)
gives the "before" figures on the same fake.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any, Dict, List

from bench_util import REPO, dist, fd, fmt, table

FAKE_SRC = os.path.join(REPO, "tests", "fake_nvml", "fake_nvml.c")
DEFAULT = (5, 1.0)  # trials, seconds each


def _threads(name: str) -> Dict[str, int]:
    """tid -> CPU ns (schedstat) of this process's threads called ``name``."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip() != name:
                    continue
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                out[tid] = int(f.read().split()[0])
        except OSError:
            continue
    return out


def _fake_library(workdir: str) -> str:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("no C compiler to build the fake NVML library")
    path = os.path.join(workdir, "libnvidia-ml.so.1")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", path, FAKE_SRC], check=True)
    return path


def bench_gpu(cfg, sysprof) -> Dict[str, Any]:
    trials, seconds = cfg.get("gpu", DEFAULT)
    real = os.environ.get("SYSPROF_BENCH_REAL_NVML") == "1"
    workdir = tempfile.mkdtemp(prefix="sysprof-bench-gpu-")
    saved = os.environ.get("SYSPROF_NVML_LIBRARY")
    try:
        lib = None
        if not real:
            os.environ["SYSPROF_NVML_LIBRARY"] = path = _fake_library(workdir)
            lib = ctypes.CDLL(path)  # the sampler's dlopen of this path gets the same instance
            lib.fake_nvml_calls.argtypes = [ctypes.c_char_p, ctypes.c_int]
            lib.fake_nvml_calls.restype = ctypes.c_long
        flags = dict(cpu=False, memory=False, disk=False, net=False, gpu=True)
        s = sysprof.Sampler(interval=1e-3, backend="native", **flags)
        devices = len(s.devices)
        per_reading: List[float] = []
        per_tick: List[float] = []
        readings_total = 0
        for _ in range(trials):
            before = _threads("sysprof-nvml")
            calls0 = lib.fake_nvml_calls(b"nvmlDeviceGetUtilizationRates", 0) if lib else 0
            s.start()
            time.sleep(seconds)
            s.stop()
            s.drain()
            after = _threads("sysprof-nvml")
            cpu = sum(v - before.get(t, 0) for t, v in after.items())
            readings = (lib.fake_nvml_calls(b"nvmlDeviceGetUtilizationRates", 0) - calls0) if lib else \
                int(seconds * 1000)
            readings_total += readings
            if readings > 0 and devices:
                per_reading.append(cpu / readings / devices / 1e3)
            per_tick.append(s.stats["sample_ns_mean"] / 1e3)
        gpm = bool([c for c in s.channels if c.endswith("/sm_active_percent")])
        health = bool([c for c in s.channels if c.endswith("/clocks_event_reasons")])
        out = {"library": "real" if real else "fake", "devices": devices, "channels": len(s.channels),
               "gpm": gpm, "health": health, "version": getattr(sysprof, "__version__", "?"),
               "readings": readings_total, "trials": trials, "seconds": seconds,
               "reader_us_per_device_reading": dist(per_reading, "us"),
               "sampling_thread_us_per_tick": dist(per_tick, "us")}
        del s
        out["driver_samples_us_per_device_read"] = _driver_samples_cost(sysprof, trials, seconds)
        out["reading_age_ms"] = {load: _reading_age(sysprof, seconds, hogs)
                                 for load, hogs in (("idle", 0), ("loaded", 2 * (os.cpu_count() or 1)))}
        return out
    finally:
        if saved is None:
            os.environ.pop("SYSPROF_NVML_LIBRARY", None)
        else:
            os.environ["SYSPROF_NVML_LIBRARY"] = saved


def _driver_samples_cost(sysprof, trials: int, seconds: float) -> Dict[str, Any]:
    """backend -> the reader thread's CPU per nvmlDeviceGetSamples read of a device (its thread CPU clock around
    the reads, kept by the reader: DriverSamples.read_cpu_ns / device_reads), one figure per trial of ``seconds``
    (at least 1.2 s: a read every 0.5 s). On the fake, device 0 serves four types (25 new samples each per read)."""
    out = {}
    for backend in ("native", "psutil"):
        costs = []
        for _ in range(trials):
            try:
                s = sysprof.Sampler(interval=1e-2, backend=backend, cpu=False, memory=False, disk=False, net=False,
                                    gpu=True)
            except (ValueError, ImportError):
                break  # no extension, or no pynvml
            s.start()
            time.sleep(max(seconds, 1.2))
            got = s.drain_gpu_samples()
            s.stop()
            del s
            if got.device_reads:
                costs.append(got.read_cpu_ns / got.device_reads / 1e3)
        out[backend] = dist(costs, "us")
    return out


def _hog() -> None:
    while True:
        pass


def _reading_age(sysprof, seconds: float, hogs: int) -> Dict[str, Any]:
    """How old each row's GPU reading is when the row takes it (row time - ``gpu/0/reading_time_seconds``, ms): what
    a trace stamped with the rows' times (before issue 27.6) shifted the GPU values by; ``hogs`` busy processes
    beside it. The sampler at 1 ms, the GPU at its 10 ms default."""
    import multiprocessing as mp

    import numpy as np

    procs = [mp.get_context("fork").Process(target=_hog, daemon=True) for _ in range(hogs)]
    for p in procs:
        p.start()
    try:
        s = sysprof.Sampler(interval=1e-3, backend="native", cpu=False, memory=False, disk=False, net=False, gpu=True)
        s.start()
        time.sleep(max(seconds, 1.0) * 2)
        s.stop()
        b = s.drain()
        del s
    finally:
        for p in procs:
            p.kill()
            p.join()
    t = b.column("gpu/0/reading_time_seconds")
    ok = np.isfinite(t)
    age = (b.timestamps_ns[ok] / 1e9 - t[ok]) * 1e3
    nan = int((~ok).sum())
    if not age.size:
        return {"rows": len(b), "nan_rows": nan}
    return {"rows": len(b), "nan_rows": nan, "mean": float(age.mean()), "p50": float(np.percentile(age, 50)),
            "p99": float(np.percentile(age, 99)), "max": float(age.max())}


def print_gpu(res) -> str:
    rows = [["reader thread, CPU per device per reading", fd(res["reader_us_per_device_reading"])],
            ["sampling thread, per tick (the copy)", fd(res["sampling_thread_us_per_tick"])]]
    for backend, d in res.get("driver_samples_us_per_device_read", {}).items():  # every 0.5 s, reader thread
        if d["n"]:
            rows.append([f"reader thread, driver samples per device per read ({'pynvml' if backend == 'psutil' else backend})", fd(d)])
    ages = [[load, f"{a['mean']:.2f}", f"{a['p50']:.2f}", f"{a['p99']:.2f}", f"{a['max']:.2f}",
             f"{a['nan_rows']} of {a['rows']}"] for load, a in res.get("reading_age_ms", {}).items() if "mean" in a]
    what = ", ".join(w for w, on in (("health rows", res["health"]), ("GPM", res["gpm"])) if on) or "basics only"
    after = ""
    if ages:
        after = ("\nAge of the GPU reading a row holds (ms; row time - reading_time_seconds; rows at 1 ms, GPU at "
                 "10 ms; traces now stamp GPU values at the reading):\n\n"
                 + table(["load", "mean", "p50", "p99", "max", "NaN rows (late)"], ages))
    return ("## GPU source cost (µs)\n\n" + table(["what", "median (p99, IQR, n trials)"], rows)
            + f"\n\n{res['library']} NVML, {res['devices']} devices, {res['channels']} channels ({what}); "
              f"1 kHz for {res['trials']} × {fmt(res['seconds'])} s, {res['readings']} readings\n" + after)


if __name__ == "__main__":  # python benchmarks/bench_gpu.py [--quick]
    import sys

    import sysprof

    quick = "--quick" in sys.argv
    print(print_gpu(bench_gpu({"gpu": (2, 0.5)} if quick else {}, sysprof)))
