"""Hot-path cost of profiler markers: ``with marker:``, ``marker.counter()``, ``marker.instant()``.

Measures sysprof's :class:`sysprof.Profiler` with its built-in :class:`sysprof.JSONTraceHandler` (ACTIVE schedule,
so every call records), and Composer's ``composer.profiler.Profiler`` + ``JSONTraceHandler`` when Composer is
importable. Two figures per operation:

* ``call``: time per call as seen by the training loop, median over chunks of 4096 calls (sysprof buffers events
  and encodes them in batches at the next save, flush or when 8192 are pending; that encoding is excluded here);
  ``mean`` is the mean over chunks (includes garbage-collector pauses and scheduling noise);
* ``+encode``: mean per call including the deferred JSON encoding and file write of the events the calls produced
  (Composer encodes at call time, so for it this equals the call cost).

Usage::

    python benchmarks/marker_bench.py [--calls 100000] [--repeats 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import sysprof.profiler.profiler as sp  # noqa: E402
from sysprof.profiler.json_trace_handler import JSONTraceHandler  # noqa: E402


def _time_ops(marker, calls: int, flush=None) -> dict:
    """Per-call microseconds of each operation over chunks of 4096 calls (after one warm-up chunk).

    ``call_us``: median chunk; ``call_mean_us``: mean over chunks (includes garbage-collector pauses and noise);
    ``with_encode_us``: mean including ``flush()`` (the deferred encoding and write) after each chunk.
    """
    values = {"loss": 1.0}
    chunk = 4096  # 8192 events at most: never reaches the handler's buffer limit, so calls never encode inline

    def with_block():
        for _ in range(chunk):
            with marker:
                pass

    def counter():
        c = marker.counter
        for _ in range(chunk):
            c(values)

    def instant():
        i = marker.instant
        for _ in range(chunk):
            i()

    out = {}
    for name, fn in (("with marker", with_block), ("marker.counter()", counter), ("marker.instant()", instant)):
        fn()
        if flush is not None:
            flush()
        call_ts, enc_ts = [], []
        for _ in range(max(1, calls // chunk)):
            t0 = time.perf_counter()
            fn()
            t1 = time.perf_counter()
            if flush is not None:
                flush()
            t2 = time.perf_counter()
            call_ts.append((t1 - t0) / chunk * 1e6)
            enc_ts.append((t2 - t0) / chunk * 1e6)
        out[name] = {"call_us": statistics.median(call_ts), "call_mean_us": statistics.fmean(call_ts),
                     "with_encode_us": statistics.fmean(enc_ts)}
    return out


def bench_sysprof(calls: int, folder: str) -> dict:
    handler = JSONTraceHandler(folder=folder, remote_file_name=None, merged_trace_filename=None)
    prof = sp.Profiler(schedule=lambda s: sp.ProfilerAction.ACTIVE, trace_handlers=[handler], sys_prof_cpu=False)
    prof.start()
    try:
        return _time_ops(prof.marker("bench", categories=("bench",)), calls, flush=handler.flush)
    finally:
        prof.stop()


def bench_composer(calls: int, folder: str):
    try:
        from composer.core import State
        from composer.profiler import JSONTraceHandler as CJSON
        from composer.profiler import Profiler as CProfiler
        from composer.profiler import ProfilerAction as CAction
        import torch
    except Exception as e:  # noqa: BLE001
        return f"composer not importable: {type(e).__name__}: {e}"
    handler = CJSON(folder=folder, remote_file_name=None, merged_trace_filename=None)
    prof = CProfiler(schedule=lambda s: CAction.ACTIVE, trace_handlers=[handler], sys_prof_cpu=False,
                     torch_prof_memory_filename=None, torch_prof_profile_memory=False, torch_prof_with_flops=False)
    state = State(model=torch.nn.Linear(1, 1), rank_zero_seed=0, run_name="bench", device="cpu")
    state.profiler = prof
    prof.bind_to_state(state)

    def drop_queue():  # Composer encodes at call time and queues strings until the trace is saved
        q = handler._queue
        while not q.empty():
            q.get_nowait()

    return _time_ops(prof.marker("bench", categories=("bench",)), calls, flush=drop_queue)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=100_000, help="calls per operation and repeat")
    ap.add_argument("--repeats", type=int, default=3, help="repeats; the best of each figure is reported")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args()

    results = {}
    for label, fn in (("sysprof", bench_sysprof), ("composer", bench_composer)):
        best = None
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as d:
                r = fn(args.calls, d)
            if isinstance(r, str):
                best = r
                break
            best = r if best is None else {k: {m: min(best[k][m], r[k][m]) for m in r[k]} for k in r}
        results[label] = best
    if args.json:
        print(json.dumps({"python": sys.version.split()[0], "calls": args.calls, "results": results}, indent=2))
        return
    print(f"marker hot path, best of {args.repeats} x {args.calls} calls (python {sys.version.split()[0]})")
    print(f"{'profiler':10} {'operation':18} {'call us':>9} {'mean us':>9} {'+encode us':>11}")
    for label, r in results.items():
        if isinstance(r, str):
            print(f"{label:10} {r}")
            continue
        for op, v in r.items():
            print(f"{label:10} {op:18} {v['call_us']:9.3f} {v['call_mean_us']:9.3f} {v['with_encode_us']:11.3f}")


if __name__ == "__main__":
    main()
