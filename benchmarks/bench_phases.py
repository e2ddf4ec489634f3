"""Benchmark: the cost of phase attribution and the verdict (`sysprof report --by`, the lines `report` opens with)
on a synthetic trace shaped like a training run: ROWS samples at 1 ms of CHANNELS channels (every row written),
a 100 ms ``event/batch`` span per batch holding a 20 ms ``dataloader`` span. Times are of the calls on an already
read trace (TraceData), median and IQR over repeats; reading the trace is timed too, for scale.

Runnable alone: ``python benchmarks/bench_phases.py`` prints its table."""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Dict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_util import dist, fmt, table  # noqa: E402

DEFAULT = (30_000, 20, 5)  # rows (1 ms apart), channels, repeats


def _events(rows: int, channels: int):
    groups = [("cpu", "percent"), ("disk/sda", "read_bytes_per_second"), ("pressure/io", "some_seconds_per_second"),
              ("gpu/0", "utilization_percent"), ("net/eth0", "bytes_recv_per_second")]
    keys = [(groups[i % len(groups)][0], groups[i][1] if i < len(groups) else f"k{i}") for i in range(channels)]
    ev = [{"name": "sysprof start", "ph": "i", "ts": 0, "pid": 1, "tid": 0, "args": {"interval_s": 0.001}}]
    by_group: Dict[str, list] = {}
    for g, k in keys:
        by_group.setdefault(g, []).append(k)
    for i in range(rows):
        for g, ks in by_group.items():
            ev.append({"name": g, "ph": "C", "ts": i * 1000, "pid": 1, "tid": 0,
                       "args": {k: float((i * 7 + j) % 101) for j, k in enumerate(ks)}})
    for b in range(rows // 100):
        ev.append({"name": "event/batch", "ph": "X", "ts": b * 100_000, "dur": 100_000, "pid": 1, "tid": 1})
        ev.append({"name": "dataloader", "ph": "X", "ts": b * 100_000, "dur": 20_000, "pid": 1, "tid": 1})
    ev.append({"name": "sysprof stop", "ph": "i", "ts": rows * 1000, "pid": 1, "tid": 0, "args": {}})
    return ev


def _times(fn, repeats: int):
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def bench_phases(cfg, sysprof) -> Dict[str, Any]:
    from sysprof.report import TraceData, by_phase, verdict

    rows, channels, repeats = (cfg or {}).get("phases", DEFAULT)
    events = _events(rows, channels)
    data = TraceData(events)
    spans = len(data.spans)
    return {"rows": rows, "channels": len(data.series), "spans": spans,
            "read_ms": dist(_times(lambda: TraceData(events), repeats), "ms"),
            "by_phase_ms": dist(_times(lambda: by_phase(data, ["event/batch", "dataloader"]), repeats), "ms"),
            "verdict_ms": dist(_times(lambda: verdict(data), repeats), "ms")}


def print_phases(res) -> str:
    rows = [[what, res[key]["n"], fmt(res[key]["median"]), f"{fmt(res[key]['p25'])} - {fmt(res[key]['p75'])}"]
            for what, key in (("TraceData(events) (reading, for scale)", "read_ms"),
                              ("by_phase(batch, dataloader)", "by_phase_ms"), ("verdict (every span name)", "verdict_ms"))]
    return (f"## Phase attribution ({res['rows']:,} rows x {res['channels']} channels, {res['spans']:,} spans)\n\n"
            + table(["call", "n", "median ms", "IQR ms"], rows))


if __name__ == "__main__":
    import sysprof as _sysprof

    print(print_phases(bench_phases({}, _sysprof)))
