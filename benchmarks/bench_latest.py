"""Benchmark section: reading "now" in a tight loop. Sampler.latest() per call (the newest row the running
thread published, csrc/engine/latest.hpp) beside Sampler.sample() per call (a synchronous read of every
file), both through the public API on one sampler running at 1 kHz; and, for information, how long after a
row's timestamp wait_next() returns it."""
from __future__ import annotations

import time
from typing import Any, Dict

import numpy as np

from bench_util import NO_SOURCES, dist, fd, fmt, table, _time_calls

_pc = time.perf_counter_ns
DEFAULT = (100_000, 2_000, 500)  # latest() calls, sample() calls, wait_next() rows


def _loop_ns(fn, n: int) -> float:
    """Mean ns per call of ``n`` back-to-back calls (no timer inside the loop)."""
    t0 = _pc()
    for _ in range(n):
        fn()
    return (_pc() - t0) / n


def bench_latest(cfg, sysprof) -> Dict[str, Any]:
    n_latest, n_sample, n_wait = cfg.get("latest", DEFAULT)
    flags = dict(NO_SOURCES, cpu=True, memory=True, disk=True, net=True)
    s = sysprof.Sampler(interval=1e-3, **flags)
    out: Dict[str, Any] = {"backend": s.backend, "channels": len(s.channels), "interval_s": 1e-3,
                           "sources": [k for k, v in flags.items() if v]}
    s.start()
    try:
        while s.latest() is None:
            time.sleep(0.001)
        timer = _time_calls(lambda: None, n_latest)  # perf_counter_ns pair around a call of nothing
        _time_calls(s.latest, 1000)  # warm-up
        lat = _time_calls(s.latest, n_latest)
        loop = [_loop_ns(s.latest, max(1, n_latest // 10)) for _ in range(10)]
        reader = getattr(s, "_latest_reader", None)  # the call latest() makes, without the Python method
        raw = _time_calls(reader, n_latest) if reader is not None else []
        _time_calls(s.sample, 20)
        smp = _time_calls(s.sample, n_sample)
        waits, skipped = [], 0
        prev = s.latest().seq
        for _ in range(n_wait):
            r = s.wait_next(1.0)
            t = time.time_ns()
            if r is None:
                continue
            skipped += r.seq - prev - 1
            prev = r.seq
            waits.append(t - r.timestamp_ns)
    finally:
        s.stop()
        s.drain()
    lat_us = dist(np.asarray(lat) / 1e3, "us")
    smp_us = dist(np.asarray(smp) / 1e3, "us")
    out.update({
        "method": ("public API on one running sampler (1 kHz); each call timed alone with perf_counter_ns "
                   "(the timer pair itself is `timer`); loop_mean = 10 loops of back-to-back calls, no timer "
                   "inside (on a busy machine it includes preemption); latest_reader_call = the one call "
                   "latest() makes, without its Python method; wait_next = time.time_ns() at its return "
                   "minus the row's timestamp_ns (taken before the row's files are read, so it includes the "
                   "sample's own cost)"),
        "latest": lat_us, "latest_loop_mean": dist(np.asarray(loop) / 1e3, "us"),
        "latest_reader_call": dist(np.asarray(raw) / 1e3, "us"), "timer": dist(np.asarray(timer) / 1e3, "us"),
        "sample": smp_us,
        "sample_over_latest": (smp_us["median"] / lat_us["median"]) if lat_us.get("median") else None,
        "wait_next_latency": dist(np.asarray(waits) / 1e3, "us"), "wait_next_rows_skipped": skipped,
    })
    return out


def print_latest(res) -> str:
    rows = [["latest()", fd(res["latest"]), fmt(res["latest_loop_mean"]["median"])],
            ["latest()'s reader alone", fd(res["latest_reader_call"]), "-"],
            ["sample()", fd(res["sample"]), "-"],
            ["timer pair alone", fd(res["timer"]), "-"]]
    w = res["wait_next_latency"]
    return ("## Reading the present: latest() vs sample() (µs per call)\n\n"
            + table(["call", "per call: median (p99, IQR, n)", "loop mean (with preemption)"], rows)
            + f"\n\n{res['channels']} channels ({', '.join(res['sources'])}), sampler running at 1 kHz, "
              f"backend {res['backend']}; sample() / latest() = {fmt(res['sample_over_latest'])}×. wait_next(): "
              f"{fd(w)} µs from the row's timestamp to the return (informative; "
              f"{res['wait_next_rows_skipped']} rows skipped between calls)\n")


if __name__ == "__main__":  # python benchmarks/bench_latest.py [--quick]
    import sys

    import sysprof

    quick = "--quick" in sys.argv
    print(print_latest(bench_latest({"latest": (20_000, 300, 100)} if quick else {}, sysprof)))
