"""Benchmark section: multi-rank jobs (sysprof/distributed.py).

* ``host reads per node``: 8 ranks of one node simulated in this process (their RankInfo set by hand), each with
  the sampler its SystemProfiler would build for cpu + memory + net + pressure + process at 50 ms, for
  ``host_sampling="every_rank"`` (before) and ``"per_node"`` (after), run side by side for a few seconds: reads
  of host sources per second summed over the node (the samplers' ``stats["reads"]``), and the samplers running.
* ``training path per step``: a child process runs ``sysprof.profile()`` around an empty step
  (``with prof.marker("step"): pass; prof.step()``) as a single process, as local rank 1 of 2 (per node: its
  process only) and as local rank 1 with ``every_rank``; steps timed in chunks of 100 (µs per step, the drain
  included; the clock sync runs on its own thread and writes at the drain only once per round).
* ``clock offset to rank 0``: two ClockSync threads (rank 0 and rank 1) in this process over a real
  ``torch.distributed.TCPStore`` on loopback (a client connection each) when torch is importable, else over an
  in-memory store; rounds of 8 exchanges back to back: the measured offset (the true one is 0: one clock) and its
  uncertainty (half the least round trip), in µs.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from typing import Any, Dict

from bench_util import dist, fd, table

DEFAULT = {"seconds": 3.0, "steps": 3000, "rounds": 50}
ASKED = {"cpu": True, "memory": True, "net": True, "pressure": True, "process": True}

_CHILD = r"""
import json, os, sys, time, tempfile
import sysprof
n = int(sys.argv[1])
with tempfile.TemporaryDirectory() as d:
    with sysprof.profile(d, sys_prof_cpu=True, sys_prof_memory=True, sys_prof_net=True, sys_prof_process=True,
                         sys_prof_stats_thread_interval_seconds=0.01,
                         sys_prof_host_sampling=sys.argv[2]) as prof:
        per = []
        for c in range(n // 100):
            t0 = time.perf_counter_ns()
            for _ in range(100):
                with prof.marker("step"):
                    pass
                prof.step()
            per.append((time.perf_counter_ns() - t0) / 100 / 1000)
print(json.dumps(per))
"""


def _host_reads(seconds: float, mode: str) -> Dict[str, Any]:
    from sysprof import Sampler
    from sysprof.distributed import RankInfo, plan_sources
    from sysprof.sampling.registry import SOURCES

    host = [n for n, s in SOURCES.items() if not s.follows_pid and n != "gpu"]
    samplers = []
    for i in range(8):
        asked = {n: ASKED.get(n, False) for n in SOURCES}  # every source named: the Sampler's defaults are on
        sources = plan_sources(asked, RankInfo(rank=i, local_rank=i, world_size=8, local_world_size=8), mode)
        samplers.append((Sampler(interval=0.05, **sources), sources))
    for s, _ in samplers:
        s.start()
    time.sleep(seconds)
    reads = 0
    for s, sources in samplers:
        s.stop()
        r = s.stats.get("reads") or {}
        reads += sum(v for k, v in r.items() if k in host)
    running = sum(1 for _, src in samplers if any(src.get(h) for h in host))
    return {"host_reads_per_s": reads / seconds, "host_samplers": running}


def _step_cost(steps: int, env_extra: Dict[str, str], mode: str) -> Dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")}
    env.update(env_extra)
    r = subprocess.run([sys.executable, "-c", _CHILD, str(steps), mode], capture_output=True, text=True, env=env,
                       cwd=tempfile.gettempdir())
    if r.returncode != 0:
        raise RuntimeError(f"bench_ranks' child failed: {r.stderr.strip()[-2000:]}")
    return dist(json.loads(r.stdout), "us")


class _MemStore:
    """set/get/wait over a dict (the store's calls ClockSync makes), for a machine without torch."""

    def __init__(self):
        self.d, self.c = {}, threading.Condition()

    def set(self, k, v):
        with self.c:
            self.d[k] = str(v).encode() if not isinstance(v, bytes) else v
            self.c.notify_all()

    def get(self, k):
        with self.c:
            return self.d[k]

    def wait(self, keys, timeout):
        with self.c:
            if not self.c.wait_for(lambda: all(k in self.d for k in keys), timeout.total_seconds()):
                raise RuntimeError("timeout")


def _clock(rounds: int) -> Dict[str, Any]:
    from sysprof.distributed import ClockSync

    try:
        import torch.distributed as td

        server = td.TCPStore("127.0.0.1", 0, 2, True, timedelta(seconds=30), wait_for_workers=False)
        stores = [td.TCPStore("127.0.0.1", server.port, 2, False, timedelta(seconds=30)) for _ in range(2)]
        kind = "torch TCPStore, loopback"
    except Exception:  # noqa: BLE001 - no torch here
        server, stores, kind = None, [_MemStore()] * 2, "in-memory store (torch not importable)"
    got = []
    r0 = ClockSync(stores[0], rank=0, world_size=2, period_s=0.02).start()
    r1 = ClockSync(stores[1], rank=1, world_size=2, period_s=0.02, on_estimate=got.append).start()
    end = time.monotonic() + 60
    while len(got) < rounds and time.monotonic() < end:
        time.sleep(0.05)
    r1.stop()
    r0.stop()
    del server
    return {"store": kind, "offset_us": dist([e.offset_us for e in got], "us"),
            "abs_offset_us": dist([abs(e.offset_us) for e in got], "us"),
            "uncertainty_us": dist([e.uncertainty_us for e in got], "us")}


def bench_ranks(cfg, sysprof) -> Dict[str, Any]:
    c = {**DEFAULT, **cfg.get("ranks", {})}
    out: Dict[str, Any] = {"reads": {m: _host_reads(c["seconds"], m) for m in ("every_rank", "per_node")}}
    rank1 = {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}
    out["steps"] = {"single process": _step_cost(c["steps"], {}, "per_node"),
                    "local rank 1 of 2, per_node": _step_cost(c["steps"], rank1, "per_node"),
                    "local rank 1 of 2, every_rank": _step_cost(c["steps"], rank1, "every_rank")}
    out["clock"] = _clock(c["rounds"])
    return out


def print_ranks(res) -> str:
    rd = res["reads"]
    rows = [[m, rd[m]["host_samplers"], f"{rd[m]['host_reads_per_s']:.0f}",
             f"{rd[m]['host_reads_per_s'] / max(1, rd[m]['host_samplers']):.0f}"] for m in ("every_rank", "per_node")]
    out = ["## Multi-rank: host reads per node (8 ranks, cpu+memory+net+pressure+process at 50 ms)", "",
           table(["host_sampling", "host samplers", "host-source reads / s, node", "per sampler"], rows), "",
           "## Multi-rank: the training path per step (empty step under sysprof.profile, µs)", "",
           table(["rank", "per step: median (p99, IQR, n chunks of 100)"],
                 [[k, fd(v)] for k, v in res["steps"].items()]), "",
           f"## Multi-rank: clock offset to rank 0 ({res['clock']['store']}; true offset 0)", "",
           table(["figure", "µs: median (p99, IQR, n rounds)"],
                 [["offset", fd(res["clock"]["offset_us"])], ["|offset|", fd(res["clock"]["abs_offset_us"])],
                  ["uncertainty (half the least RTT of 8)", fd(res["clock"]["uncertainty_us"])]])]
    return "\n".join(out)


if __name__ == "__main__":  # python benchmarks/bench_ranks.py [--quick]
    import sysprof

    quick = "--quick" in sys.argv
    print(print_ranks(bench_ranks({"ranks": {"seconds": 1.0, "steps": 500, "rounds": 10}} if quick else {}, sysprof)))
