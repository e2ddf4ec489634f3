"""A real 2-rank torchrun job (gloo, CPU) with rank 1 slowed (slow: ~1 min, plus the torch venv on first use).

Each rank trains a tiny model under ``sysprof.profile()`` with cpu, memory and process sampling; rank 1 burns
~60 ms of CPU inside each of its ``step`` spans, then both all-reduce their gradients outside the spans. Checked:
``sysprof report --ranks`` names rank 1 the straggler with evidence from its own process; only local rank 0's
trace has host channels (one host sampler for the node); every trace has its rank metadata and a measured clock
offset whose bound holds the true offset (0: one machine, one clock), and the merged trace is shifted by it.
The torch venv is ``tests/test_composer_integration.py``'s (tests/recipe_venv.py: built or reused, this session's
sysprof on the ranks' ``PYTHONPATH``; skipped only when the recipe is absent).
"""
import json
import os
import platform
import subprocess
import sys
import textwrap

import pytest

from cli_support import run_cli
from sysprof.report.model import TraceData
from sysprof.report.names import sampler_series
from sysprof.trace.chrome import read_trace
from sysprof.trace.merge import merge_traces

pytestmark = pytest.mark.composer

STEPS = 30
SLOW_RANK = 1

JOB = textwrap.dedent('''
    import sys, time
    import torch
    import torch.distributed as dist
    import sysprof

    out = sys.argv[1]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with sysprof.profile(out, overwrite=True, sys_prof_cpu=True, sys_prof_memory=True, sys_prof_process=True,
                         sys_prof_stats_thread_interval_seconds=0.01) as prof:
        for step in range(%(steps)d):
            with prof.marker("step"):
                opt.zero_grad()
                model(torch.randn(32, 64)).sum().backward()
                if rank == %(slow)d:  # the straggler: ~60 ms of pure CPU in its own step
                    end = time.perf_counter() + 0.06
                    while time.perf_counter() < end:
                        sum(range(500))
            for p in model.parameters():  # the collective, outside the step span
                dist.all_reduce(p.grad)
            opt.step()
            prof.step()
    dist.destroy_process_group()
''') % {"steps": STEPS, "slow": SLOW_RANK}


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    sys.path.insert(0, os.path.dirname(__file__))
    import recipe_venv
    import test_composer_integration

    python = str(test_composer_integration.venv() / "bin" / "python")
    folder = tmp_path_factory.mktemp("ranks")
    script = folder / "job.py"
    script.write_text(JOB)
    env = {k: v for k, v in recipe_venv.sysprof_env(folder).items()
           if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")}
    r = subprocess.run([python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        str(script), str(folder / "traces")], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    files = {}
    for name in os.listdir(folder / "traces"):
        if name.endswith(".json") and not name.startswith("merged"):
            rank = next(e["args"]["value"] for e in read_trace(folder / "traces" / name) if e["name"] == "global_rank")
            files[rank] = folder / "traces" / name
    assert sorted(files) == [0, 1], os.listdir(folder / "traces")
    return folder, files


def test_report_names_the_slowed_rank(job):
    folder, files = job
    r = run_cli("report", "--ranks", *files.values(), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [(x["rank"], x["node"], x["steps"]) for x in out["ranks"]] == [(0, platform.node(), STEPS),
                                                                            (1, platform.node(), STEPS)]
    (s,) = out["stragglers"]
    assert s["rank"] == SLOW_RANK and s["slowdown"] > 2  # 60 ms of work against a few ms
    assert any(e.startswith("process CPU higher") for e in s["evidence"]), s["evidence"]


def test_one_host_sampler_for_the_node(job):
    _, files = job
    channels = {r: set(sampler_series(TraceData(read_trace(f)))[0]) for r, f in files.items()}
    host = ("cpu/", "memory/", "swap/")
    assert any(c.startswith(host) for c in channels[0])
    assert not any(c.startswith(host) for c in channels[1]), sorted(channels[1])
    assert "process/cpu_percent" in channels[0] and "process/cpu_percent" in channels[1]


def test_rank_metadata_and_aligned_merge(job):
    folder, files = job
    metas = {}
    for r, f in files.items():
        events = read_trace(f)
        (meta,) = {json.dumps(e["args"], sort_keys=True) for e in events if e["name"] == "sysprof_rank"}
        metas[r] = json.loads(meta)
        assert (metas[r]["rank"], metas[r]["local_rank"], metas[r]["node"], metas[r]["world_size"]) == \
            (r, r, platform.node(), 2)
    assert metas[0]["clock_offset_us"] == 0.0
    off, unc = metas[1]["clock_offset_us"], metas[1]["clock_uncertainty_us"]
    assert abs(off) <= unc + 1  # one clock: the true offset is 0, inside the bound
    # sysprof clock counter in rank 1's file; Composer's clock sync written from the same estimate
    events1 = read_trace(files[1])
    assert any(e["name"] == "sysprof clock" and e["ph"] == "C" for e in events1)
    merge_traces(folder / "merged.json", files[0], files[1])
    shift = round(off)
    step1 = [e["ts"] for e in events1 if e["name"] == "step" and e["ph"] == "B"]
    merged1 = [e["ts"] for e in read_trace(folder / "merged.json") if e["name"] == "step" and e["ph"] == "B"
               and e["pid"] == 1]
    assert merged1 == [t + shift for t in step1]
