"""Benchmark section: DataFrames and files (sysprof.frames). Rows recorded at 1 kHz from the host set (cpu,
per-cpu, memory, disk, net, load) on this machine are written as ``sysprof record`` writes them (changes-only
Chrome JSON through the track model); then the cost per row of ``Batch.to_pandas()`` and of
``sysprof.read_trace()`` on that trace, and the bytes per sample of the trace (JSON, JSON.gz) and of what
``sysprof export`` writes from it (Parquet zstd, CSV)."""
from __future__ import annotations

import gc
import gzip
import os
import tempfile
import time
from typing import Any, Dict

import numpy as np

from bench_util import NO_SOURCES, dist, fd, fmt, table

DEFAULT = {"seconds": 3.0, "trials": 9}
HOST = dict(NO_SOURCES, cpu=True, per_cpu=True, memory=True, disk=True, net=True, load=True)


def _record(sysprof, seconds: float):
    """A batch of ``seconds`` of host rows at 1 kHz (drained every 0.2 s so the ring never fills)."""
    s = sysprof.Sampler(interval=1e-3, **HOST)
    parts = []
    s.start()
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(0.2)
            parts.append(s.drain())
    finally:
        s.stop()
        parts.append(s.drain())
    ts = np.concatenate([b.timestamps_ns for b in parts])
    values = np.concatenate([b.values for b in parts])
    return sysprof.Batch(ts, values, s.channels, s.interval), s.backend


def _write_trace(batch, path: str) -> None:
    """The trace ``sysprof record`` would write for these rows: start event, units, changes-only counters, stop."""
    from sysprof.trace.chrome import ChromeTraceWriter
    from sysprof.trace.schema import START_EVENT, STOP_EVENT
    from sysprof.trace.tracks import EventBuilder

    builder = EventBuilder(batch.channels, system_pid=os.getpid())
    with ChromeTraceWriter(path, overwrite=True) as w:
        t0, t1 = int(batch.timestamps_ns[0]) // 1000, int(batch.timestamps_ns[-1]) // 1000
        w.write({"name": START_EVENT, "ph": "i", "s": "g", "ts": t0, "pid": os.getpid(), "tid": 0,
                 "args": {"interval_s": batch.interval, "channels": list(batch.channels)}})
        w.write(builder.units_event())
        for i in range(0, len(batch), 1000):
            part = type(batch)(batch.timestamps_ns[i:i + 1000], batch.values[i:i + 1000], batch.channels)
            w.write_many(builder.events(part))
        w.write_many(builder.finish())
        w.write({"name": STOP_EVENT, "ph": "i", "s": "g", "ts": t1, "pid": os.getpid(), "tid": 0,
                 "args": {"samples_written": len(batch)}})


def _per_call_us(fn, trials: int):
    out = []
    for _ in range(trials):
        gc.collect()
        t0 = time.perf_counter_ns()
        fn()
        out.append((time.perf_counter_ns() - t0) / 1e3)
    return out


def _head(batch, n):
    return type(batch)(batch.timestamps_ns[:n], batch.values[:n], batch.channels, batch.interval)


def _files(sysprof, batch, folder):
    """Bytes of each file for ``batch``: the trace (JSON, JSON.gz) and the exports of its frame."""
    from sysprof.frames import csv_text, parquet_bytes

    trace = os.path.join(folder, f"t{len(batch)}.json")
    _write_trace(batch, trace)
    with open(trace, "rb") as f:
        raw = f.read()
    df = sysprof.read_trace(trace)
    sizes = {"json": len(raw), "json.gz": len(gzip.compress(raw, 6)), "parquet (zstd)": len(parquet_bytes(df)),
             "csv": len(csv_text(df).encode())}
    return trace, df, sizes


def bench_frames(cfg, sysprof) -> Dict[str, Any]:
    conf = dict(DEFAULT, **(cfg.get("frames") or {}))
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as e:
        return {"available": False, "reason": f"{e} (pip install 'sysprof[pandas]')"}

    batch, backend = _record(sysprof, conf["seconds"])
    n, trials = len(batch), conf["trials"]
    res: Dict[str, Any] = {
        "available": True, "backend": backend, "rows": n, "channels": len(batch.channels), "trials": trials,
        "method": (f"{conf['seconds']:g} s of host rows at 1 kHz on this machine, written as sysprof record does "
                   "(changes-only, EventBuilder); each call timed whole, per sample row; read_trace includes "
                   "reading and parsing the JSON file; bytes: whole file / samples, and marginal = (file of all "
                   "rows - file of the first half) / (samples in the second half), which leaves out fixed costs "
                   "(the Parquet footer: schema, per-column statistics, pandas and sysprof metadata)"),
        "to_pandas": {}, "read_trace": {}}
    for rows in sorted({min(n, 100), min(n, 1000), n}):
        part = _head(batch, rows)
        calls = _per_call_us(part.to_pandas, trials)
        res["to_pandas"][rows] = {"per_call": dist(calls, "us"), "per_row": dist([c / rows for c in calls], "us")}
    with tempfile.TemporaryDirectory(prefix="sysprof-frames-") as tmp:
        half = max(1, n // 2)
        _, _, half_sizes = _files(sysprof, _head(batch, half), tmp)
        trace, df, sizes = _files(sysprof, batch, tmp)
        calls = _per_call_us(lambda: sysprof.read_trace(trace), trials)
    res["read_trace"] = {"trace_rows": int(df.shape[0]), "per_call": dist(calls, "us"),
                         "per_row": dist([c / n for c in calls], "us")}
    res["bytes_per_sample"] = {k: v / n for k, v in sizes.items()}
    res["marginal_bytes_per_sample"] = {k: (v - half_sizes[k]) / max(1, n - half) for k, v in sizes.items()}
    return res


def print_frames(res) -> str:
    if not res.get("available"):
        return f"## DataFrames and files\n\nnot available: {res.get('reason')}\n"
    rows = [["Batch.to_pandas()", f"{k:,}", fd(v["per_call"]), fmt(v["per_row"]["median"])]
            for k, v in res["to_pandas"].items()]
    rt = res["read_trace"]
    rows.append(["sysprof.read_trace() of the JSON trace", f"{res['rows']:,} ({rt['trace_rows']:,} with an event)",
                 fd(rt["per_call"]), fmt(rt["per_row"]["median"])])
    sizes = [[k, fmt(v), fmt(res["marginal_bytes_per_sample"][k])] for k, v in res["bytes_per_sample"].items()]
    return (f"## DataFrames and files ({res['rows']:,} rows × {res['channels']} channels at 1 kHz, backend "
            f"{res['backend']})\n\n"
            + table(["call", "sample rows", "µs per call: median (p99, IQR, n)", "µs per row (median)"], rows)
            + "\n\n" + table(["file", "bytes per sample (whole file)", "marginal bytes per sample"], sizes)
            + f"\n\n{res['method']}.\n")


if __name__ == "__main__":  # python benchmarks/bench_frames.py [--quick]
    import sys

    import sysprof

    quick = "--quick" in sys.argv
    print(print_frames(bench_frames({"frames": {"seconds": 1.0, "trials": 5}} if quick else {}, sysprof)))
