#!/usr/bin/env python3
"""Long traces in bounded memory (issue 28 item 5): ``read_trace``, ``report``, ``report --by`` and ``export`` of
generated long traces, against their length.

    python benchmarks/bench_longtrace.py [--samples 1e4 1e5 1e6] [--before DIR] [--formats json every-row pftrace]
                                         [--ops report by export-parquet export-csv read_trace] [--json PATH]

A trace is generated as ``sysprof record`` writes it at 1 ms from the host set (cpu, per-CPU, memory, disk, net,
load): rows recorded from this machine's sampler for a few seconds, repeated (their times advanced) to the length
asked, written through the recorder's own pieces (``EventBuilder``, ``samples_event``, the start, units and stop
events, a ``sysprof`` statistics counter every second) with ``step`` spans of 100 ms (``sysprof.mark()``'s B/E
events) holding a ``dataloader`` span of 10 ms. Formats: ``json`` (changes only, ``record``'s default),
``every-row`` (``record --every-row``) and ``pftrace`` (changes only, when the perfetto package is installed).

Each operation runs in a fresh process (``python -c``) against the source tree under test (this checkout, and
``--before DIR``, e.g. ``git archive main`` unpacked with the built ``_native*.so`` copied in, in the same run,
the two alternated), which imports sysprof, numpy and pandas, resets its peak RSS (``/proc/self/clear_refs``) and
reports the peak RSS (``VmHWM``) above that and the wall time of the operation. Bytes per sample = that peak over
the trace's samples. ``read_trace`` returns a DataFrame of samples x channels x 8 B, which it must hold: its
figure is reported beside the frame's own bytes.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if HERE not in sys.path:  # run as a script: its siblings
    sys.path.insert(0, HERE)
INTERVAL_NS = 1_000_000
STEP_NS, LOADER_NS = 100_000_000, 10_000_000
OPS = ("report", "by", "export-parquet", "export-csv", "read_trace")
DEFAULT_OPS = ("report", "by", "export-parquet", "read_trace")  # export-csv: pandas' float formatting, slow
FORMATS = ("json", "every-row", "pftrace")


def record_rows(seconds: float):
    """``(values, channels)``: ``seconds`` of host-set rows at 1 kHz from this machine (bench_frames' recording)."""
    import sysprof
    from bench_frames import _record

    batch, _ = _record(sysprof, seconds)
    return batch.values, tuple(batch.channels)


def _spans(t0_ns: int, t1_ns: int, pid: int) -> list:
    """``(ns, event)`` of the B/E markers between t0 and t1: a step every 100 ms, a dataloader in its first 10 ms."""
    from sysprof.markers.receiver import CATEGORY

    out = []
    for s in range(t0_ns + STEP_NS // 2, t1_ns - STEP_NS, STEP_NS):
        for name, a, b in (("step", s, s + STEP_NS - 1000), ("dataloader", s + 1000, s + LOADER_NS)):
            out.append((a, {"name": name, "cat": CATEGORY, "ph": "B", "pid": pid, "tid": 1}))
            out.append((b, {"name": name, "cat": CATEGORY, "ph": "E", "pid": pid, "tid": 1}))
    out.sort(key=lambda e: e[0])
    return out


def generate(path: str, n: int, values, channels, fmt: str) -> Dict[str, Any]:
    """Write a trace of ``n`` samples at 1 ms (``values`` repeated) as ``sysprof record`` does; its size."""
    import heapq
    import itertools

    from sysprof.trace.chrome import ChromeTraceWriter
    from sysprof.trace.schema import START_EVENT, STATS_COUNTER, STOP_EVENT, samples_event
    from sysprof.trace.tracks import EventBuilder, counter_event

    pid = 4242
    if fmt == "pftrace":
        from sysprof.trace.perfetto import PerfettoTraceWriter as Writer
    else:
        Writer = ChromeTraceWriter
    t0 = 1_780_000_000_000_000_000
    builder = EventBuilder(channels, system_pid=pid, changes_only=fmt != "every-row")
    exact = getattr(Writer, "timestamp", None)
    if exact is not None:
        builder.ts = exact
    ts = exact if exact is not None else (lambda t_ns: t_ns // 1000)
    marks = _spans(t0, t0 + n * INTERVAL_NS, pid)
    m = 0
    with Writer(path, overwrite=True) as w:
        w.write({"name": START_EVENT, "ph": "i", "s": "g", "ts": ts(t0), "pid": pid, "tid": 0,
                 "args": {"interval_s": 1e-3, "channels": list(channels), "cpu_count": os.cpu_count(),
                          "command_line": "bench_longtrace"}})
        w.write(builder.units_event())
        import sysprof

        rows = len(values)
        for i in range(0, n, 200):  # a drain every 200 ms, as record's
            k = min(200, n - i)
            times = t0 + (np.arange(i, i + k, dtype=np.int64) * INTERVAL_NS)
            idx = np.arange(i, i + k) % rows
            batch = sysprof.Batch(times, values[idx], channels, 1e-3)
            events = builder.events(batch)
            if builder.changes_only:
                events = itertools.chain([samples_event(times.tolist(), pid, ts(int(times[0])),
                                                        1 if exact is not None else 1000)], events)
            j = m
            while j < len(marks) and marks[j][0] <= int(times[-1]):
                j += 1
            spans = [dict(e, ts=ts(t)) for t, e in marks[m:j]]
            m = j
            w.write_many(heapq.merge(events, spans, key=lambda e: float(e["ts"])))
            if (i // 200) % 5 == 4:  # the statistics counter, once a second
                w.write(counter_event(STATS_COUNTER, ts(int(times[-1])), pid, 0,
                                      {"taken": i + k, "dropped": 0, "missed_deadlines": 0}))
                w.flush()
        w.write_many(builder.finish())
        t1 = t0 + (n - 1) * INTERVAL_NS
        w.write({"name": STOP_EVENT, "ph": "i", "s": "g", "ts": ts(t1 + INTERVAL_NS), "pid": pid, "tid": 0,
                 "args": {"samples_written": n, "stats": {"taken": n, "dropped": 0, "missed_deadlines": 0}}})
    return {"bytes": os.path.getsize(path), "samples": n}


_CHILD = r"""
import os, sys, time, json, io, contextlib
sys.path.insert(0, sys.argv[1])
import numpy, pandas, pyarrow, pyarrow.parquet
import sysprof, sysprof.cli, sysprof.frames, sysprof.report
try:
    import sysprof.trace.perfetto_read
except ImportError:
    pass
op, trace, out, warm = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]

def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024

def run(trace):
    frame = None
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        if op == "read_trace":
            df = sysprof.read_trace(trace)
            frame = int(df.shape[0]) * int(df.shape[1]) * 8 + int(df.shape[0]) * 8
            del df
        elif op == "report":
            sysprof.cli.main(["report", trace])
        elif op == "by":
            sysprof.cli.main(["report", trace, "--by", "step", "--by", "dataloader"])
        elif op == "export-parquet":
            sysprof.cli.main(["export", trace, "-o", out + ".parquet", "--force", "-q"])
        elif op == "export-csv":
            sysprof.cli.main(["export", trace, "-o", out + ".csv", "--force", "-q"])
    return frame, sink.getvalue()

run(warm)  # the modules and caches the operation loads on first use: not the trace's cost
with open("/proc/self/clear_refs", "w") as f:  # VmHWM := VmRSS
    f.write("5")
base = status("VmRSS")
t, cpu = time.perf_counter(), time.process_time()
frame, said = run(trace)
wall, cpu = time.perf_counter() - t, time.process_time() - cpu
peak = status("VmHWM")
print(json.dumps({"peak_bytes": peak - base, "seconds": wall, "cpu_seconds": cpu, "frame_bytes": frame,
                  "base_rss": base, "out": said[-400:]}))
"""


def measure(tree: str, op: str, trace: str, warm: str, out: str, python: str = sys.executable) -> Dict[str, Any]:
    """Peak RSS above the import (bytes) and seconds of ``op`` on ``trace`` in a fresh process running the source
    tree ``tree``, after the same operation on the short trace ``warm``."""
    load = os.getloadavg()[0]
    r = subprocess.run([python, "-c", _CHILD, tree, op, trace, out, warm], capture_output=True, text=True)
    if r.returncode != 0:
        return {"error": (r.stderr or r.stdout)[-600:]}
    got = json.loads(r.stdout.strip().splitlines()[-1])
    got["load_before"] = load
    for suffix in (".parquet", ".csv"):
        if os.path.exists(out + suffix):
            got.setdefault("out_bytes", os.path.getsize(out + suffix))
            os.remove(out + suffix)
    return got


HOUR = 3_600_000  # samples in an hour at 1 kHz


def summarize(runs: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Per (format, op, tree): peak bytes per sample at the longest trace, the slope between the two longest
    (bytes per added sample: the fixed part left out), seconds per million samples, and an hour at 1 kHz
    extrapolated linearly from the longest."""
    out = []
    keys = dict.fromkeys((r["format"], r["op"], r["tree"]) for r in runs if "error" not in r)
    for fmt, op, tree in keys:
        rs = sorted((r for r in runs if (r["format"], r["op"], r["tree"]) == (fmt, op, tree) and "error" not in r),
                    key=lambda r: r["samples"])
        last = rs[-1]
        slope = None
        if len(rs) >= 2 and rs[-1]["samples"] > rs[-2]["samples"]:
            slope = (rs[-1]["peak_bytes"] - rs[-2]["peak_bytes"]) / (rs[-1]["samples"] - rs[-2]["samples"])
        n = last["samples"]
        per_sample = slope if slope is not None else last["peak_bytes"] / n
        out.append({"format": fmt, "op": op, "tree": tree, "samples": n,
                    "bytes_per_sample": last["peak_bytes"] / n, "slope_bytes_per_sample": slope,
                    "seconds": last["seconds"], "seconds_per_million": last["seconds"] / n * 1e6,
                    "cpu_seconds": last["cpu_seconds"], "cpu_seconds_per_million": last["cpu_seconds"] / n * 1e6,
                    "hour_cpu_seconds": last["cpu_seconds"] * HOUR / n if n < HOUR else last["cpu_seconds"],
                    "hour_seconds": last["seconds"] * HOUR / n if n < HOUR else last["seconds"],
                    "hour_peak_bytes": last["peak_bytes"] + per_sample * (HOUR - n) if n < HOUR else last["peak_bytes"],
                    "frame_bytes_per_sample": (last["frame_bytes"] / n) if last.get("frame_bytes") else None,
                    "load": last.get("load_before")})
    return out


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", nargs="+", type=float, default=[1e4, 1e5, 1e6])
    ap.add_argument("--formats", nargs="+", choices=FORMATS, default=list(FORMATS))
    ap.add_argument("--ops", nargs="+", choices=OPS, default=list(DEFAULT_OPS))
    ap.add_argument("--before", help="a source tree to measure as the baseline in the same run (with its .so)")
    ap.add_argument("--every-row-max", type=float, default=1e5,
                    help="longest every-row trace (default 1e5: its JSON is ~3 kB a sample, written at ~10 k/s)")
    ap.add_argument("--record-seconds", type=float, default=3.0)
    ap.add_argument("--dir", help="where the traces go (kept; default: a temporary directory, removed after)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)

    sys.path.insert(0, REPO)
    values, channels = record_rows(args.record_seconds)
    trees = {"after": REPO}
    if args.before:
        trees = {"before": os.path.abspath(args.before), "after": REPO}
    folder = args.dir or tempfile.mkdtemp(prefix="sysprof-longtrace-")
    os.makedirs(folder, exist_ok=True)
    results: Dict[str, Any] = {"channels": len(channels), "recorded_rows": len(values), "runs": [],
                               "cpus": os.cpu_count()}
    try:
        import perfetto  # noqa: F401
        has_pf = True
    except ImportError:
        has_pf = False
    print(f"host set: {len(channels)} channels; {len(values)} rows recorded, repeated; load {os.getloadavg()}",
          flush=True)
    for fmt in args.formats:
        if fmt == "pftrace" and not has_pf:
            print("pftrace: the perfetto package is not installed (pip install '.[perfetto]'); left out")
            continue
        suffix = ".pftrace" if fmt == "pftrace" else ".json"
        warm = os.path.join(folder, f"warm-{fmt}{suffix}")
        generate(warm, 2000, values, channels, fmt)
        for n in (int(x) for x in args.samples):
            if fmt == "every-row" and n > args.every_row_max:
                continue
            path = os.path.join(folder, f"t{n}-{fmt}{suffix}")
            t = time.perf_counter()
            info = generate(path, n, values, channels, fmt)
            print(f"{fmt} {n:,} samples: {info['bytes'] / 1e6:.1f} MB ({info['bytes'] / n:.1f} B/sample), "
                  f"written in {time.perf_counter() - t:.1f} s", flush=True)
            for op in args.ops:
                for name, tree in trees.items():
                    got = measure(tree, op, path, warm, os.path.join(folder, "out"))
                    row = dict(format=fmt, samples=n, trace_bytes=info["bytes"], op=op, tree=name, **got)
                    results["runs"].append(row)
                    if "error" in got:
                        print(f"  {op:15s} {name:6s} ERROR {got['error'][-300:]}", flush=True)
                        continue
                    extra = f"  (frame {got['frame_bytes'] / n:,.0f} B/sample)" if got.get("frame_bytes") else ""
                    print(f"  {op:15s} {name:6s} {got['seconds']:8.2f} s ({got['cpu_seconds']:7.2f} s CPU)  peak "
                          f"+{got['peak_bytes'] / 1e6:9.1f} MB "
                          f"= {got['peak_bytes'] / n:9.1f} B/sample  (load {got['load_before']:.1f}){extra}",
                          flush=True)
            if not args.dir:
                os.remove(path)
        if not args.dir:
            os.remove(warm)
    results["summary"] = summarize(results["runs"])
    print("\nper (format, operation, tree): bytes per sample at the longest trace, the slope between the two longest "
          "(per added sample), wall (and CPU) seconds per 10^6 samples, an hour at 1 kHz extrapolated linearly "
          "(its peak: the longest's plus the slope per sample more)")
    for r in results["summary"]:
        slope = "-" if r["slope_bytes_per_sample"] is None else f"{r['slope_bytes_per_sample']:.1f}"
        print(f"  {r['format']:9s} {r['op']:15s} {r['tree']:6s} n={r['samples']:>9,}  {r['bytes_per_sample']:8.1f} B/s"
              f"ample  slope {slope:>7s}  {r['seconds_per_million']:7.1f} s/1e6 ({r['cpu_seconds_per_million']:6.1f} "
              f"CPU)  hour: {r['hour_seconds']:6.0f} s ({r['hour_cpu_seconds']:5.0f} CPU), "
              f"{r['hour_peak_bytes'] / 1e9:5.2f} GB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
