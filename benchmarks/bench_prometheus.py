"""Benchmark section: the Prometheus endpoint (sysprof/prometheus/) with ~200 channels.

A native sampler at 1 kHz reads a synthetic tree (benchmarks/synthetic_proc.py: 64 CPUs with per_cpu, 4 disks,
5 NICs, memory, load: 198 channels) and an endpoint serves it on loopback. Figures:

* scrape latency: wall time of one GET /metrics over loopback (urllib, a new connection each, as Prometheus
  makes one per scrape at most), and of the Collector alone (``generate_latest`` of its registry, no HTTP);
* the fold (``refresh``: drain + fold into the window and histograms) per call, every 0.5 s of rows;
* the process's CPU with the endpoint (its session's drain thread every 0.5 s, a scrape every second) and without it
  (a plain ``drain()`` every 0.5 s, what any consumer of the sampler does), in interleaved trials, as % of one
  core; and the sampling thread's own cost per row (``stats["sample_ns_mean"]``) in both, which the endpoint
  should not change (it never touches the thread).
"""
from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
import urllib.request
from typing import Any, Dict

from bench_util import NO_SOURCES, dist, fd, fmt, table

DEFAULT = (200, 3, 3.0)  # scrapes, trials per state, seconds per trial
_pc = time.perf_counter_ns


def _tree(root: str):
    from synthetic_proc import make_tree

    return make_tree(root, cpus=64, disks=4, nics=5)


def _sampler(sysprof, proc, sys_):
    flags = dict(NO_SOURCES, cpu=True, per_cpu=True, memory=True, disk=True, net=True, load=True)
    return sysprof.Sampler(interval=1e-3, backend="native", proc_root=proc, sys_root=sys_, devices=["*"], **flags)


def _get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=30) as r:
        return len(r.read())


def _trial(sysprof, proc, sys_, endpoint: bool, seconds: float) -> Dict[str, float]:
    """CPU of this process (% of one core) and the thread's ns per row over ``seconds``, with or without it."""
    from sysprof.prometheus import PrometheusEndpoint

    s = _sampler(sysprof, proc, sys_)
    s.start()
    stop = threading.Event()
    ep = None
    try:
        if endpoint:
            ep = PrometheusEndpoint(s, listen="127.0.0.1:0")
            worker = threading.Thread(target=lambda: [_get(ep.url) for _ in iter(lambda: stop.wait(1.0), True)])
        else:
            worker = threading.Thread(target=lambda: [s.drain() for _ in iter(lambda: stop.wait(0.5), True)])
        worker.start()
        time.sleep(0.5)  # settle
        st0, c0, t0 = s.stats, time.process_time_ns(), _pc()
        time.sleep(seconds)
        st1, c1, t1 = s.stats, time.process_time_ns(), _pc()
        stop.set()
        worker.join()
    finally:
        if ep is not None:
            ep.stop()
        s.stop()
    rows = max(1, st1["taken"] - st0["taken"])
    return {"cpu_percent": 100.0 * (c1 - c0) / (t1 - t0), "rows": rows, "sample_ns_mean": st1["sample_ns_mean"],
            "dropped": st1["dropped"]}


def bench_prometheus(cfg, sysprof) -> Dict[str, Any]:
    from prometheus_client import generate_latest

    from sysprof.prometheus import PrometheusEndpoint

    n_scrapes, trials, seconds = cfg.get("prometheus", DEFAULT)
    with tempfile.TemporaryDirectory() as root:
        proc, sys_ = _tree(root)
        s = _sampler(sysprof, proc, sys_)
        s.start()
        try:
            with PrometheusEndpoint(s, listen="127.0.0.1:0", drain=False) as ep:
                time.sleep(0.3)
                folds = []
                for _ in range(20):  # a fold of ~0.5 s of rows, as the session's drain thread does
                    time.sleep(0.5 if len(folds) < 3 else 0.05)
                    t0 = _pc()
                    ep.feed(s.drain())
                    folds.append((_pc() - t0, ep.window.rows))
                body = _get(ep.url)
                for _ in range(5):
                    _get(ep.url)
                http, collect = [], []
                for _ in range(n_scrapes):
                    t0 = _pc()
                    _get(ep.url)
                    http.append(_pc() - t0)
                    t0 = _pc()
                    generate_latest(ep.registry)
                    collect.append(_pc() - t0)
                text = generate_latest(ep.registry).decode()
                channels, fams = len(s.channels), len(ep.families)
        finally:
            s.stop()
        series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
        runs = {"with": [], "without": []}
        for _ in range(trials):
            for state in ("without", "with"):
                runs[state].append(_trial(sysprof, proc, sys_, state == "with", seconds))
    fold_500 = [ns for ns, _ in folds[:3]]  # the first folds hold ~0.5 s (500 rows) each
    return {
        "channels": channels, "families": fams, "series": series, "body_bytes": body,
        "scrape_http_ms": dist([x / 1e6 for x in http], "ms"), "collect_ms": dist([x / 1e6 for x in collect], "ms"),
        "fold_500_rows_ms": dist([x / 1e6 for x in fold_500], "ms"),
        "fold_small_ms": dist([ns / 1e6 for ns, _ in folds[3:]], "ms"),
        "cpu_percent": {k: dist([r["cpu_percent"] for r in v], "%") for k, v in runs.items()},
        "sample_ns_mean": {k: dist([r["sample_ns_mean"] for r in v], "ns") for k, v in runs.items()},
        "dropped": {k: sum(r["dropped"] for r in v) for k, v in runs.items()},
        "trials": trials, "seconds": seconds, "cpus": os.cpu_count(),
    }


def print_prometheus(res) -> str:
    rows = [["GET /metrics over loopback (HTTP, new connection)", fd(res["scrape_http_ms"])],
            ["Collector alone (generate_latest)", fd(res["collect_ms"])],
            ["fold of ~0.5 s of rows (drain + window + histograms)", fd(res["fold_500_rows_ms"])],
            ["fold of ~50 ms of rows", fd(res["fold_small_ms"])]]
    cost = [[state, fd(res["cpu_percent"][state]), fd(res["sample_ns_mean"][state]), res["dropped"][state]]
            for state in ("without", "with")]
    return ("## Prometheus endpoint: scrape latency and cost\n\n"
            f"{res['channels']} channels at 1 kHz (synthetic tree: 64 CPUs per_cpu, 4 disks, 5 NICs), "
            f"{res['families']} families, {res['series']:,} series, {res['body_bytes']:,} bytes per scrape.\n\n"
            + table(["what (ms)", "median (p99, IQR, n)"], rows)
            + "\n\n"
            + table(["endpoint", "process CPU, % of one core", "sampling thread ns per row", "rows dropped"], cost)
            + f"\n\nCPU: {res['trials']} interleaved trials of {fmt(res['seconds'])} s per state; without: the "
              "sampler drained every 0.5 s; with: the endpoint's session draining every 0.5 s and a scrape every "
              "second. The sampling thread's ns per row is its own cost (stats), which the endpoint does not "
              f"touch. {res['cpus']} CPUs (shared).\n")


if __name__ == "__main__":  # python benchmarks/bench_prometheus.py [--quick]
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sysprof

    quick = "--quick" in sys.argv
    print(print_prometheus(bench_prometheus({"prometheus": (50, 1, 1.0)} if quick else {}, sysprof)))
