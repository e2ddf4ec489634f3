"""Benchmark section: what the trainer callbacks (sysprof/integrations/) add to a training step, sampling every 10 ms.

A child in the frameworks venv (tests/recipes/frameworks-venv.sh, built on first use; the sysprof this process
imports goes first on its path) trains an MLP (256-1024-1024-10, batch 128, one torch thread, tensors made
up front) on the CPU, once with Lightning and once with the Hugging Face Trainer, in interleaved pairs of runs:
without the callback and with ``SysprofCallback(interval=0.01)`` (default sources and summaries, logging every 10
steps), the order alternating pair by pair, after one warm-up run of each. A step's time is the time between two
consecutive step-start hooks (Lightning's ``on_train_batch_start``, HF's ``on_step_begin``) of a timing callback;
each run gives its median, each pair ``added = (with - without) / without`` in percent. Also timed: the time spent
inside the callback's step hooks per step (each hook wrapped by a perf_counter_ns pair, wall and thread CPU: the
wall includes waits for the GIL the recorder's thread holds), in its start and stop hooks per run, and the CPU of
sysprof's threads (the native sampler's and the recorder's, /proc/self/task/<tid>/stat, over the middle half of
each run) as a share of one core. On a machine whose cores are all busy the wall figure is mostly the scheduler's
(each extra thread's wake-up can cost the training thread its slice); the CPU figures are the work done. The goal is ``added`` <= 1 %; on a shared machine
the pairs' spread (IQR) says how far the median can be trusted.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Dict

from bench_util import REPO, dist, fmt, table

DEFAULT = (7, 80)  # pairs, steps per run
QUICK = (2, 30)

_CHILD = r'''
import json, os, sys, tempfile, threading, time, warnings
import torch
warnings.simplefilter("ignore")
torch.set_num_threads(1)
pairs, steps, which = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(",")
pc, tt = time.perf_counter_ns, time.thread_time_ns
hook_ns = [0, 0, 0]  # wall in the step hooks, in the run's start and end hooks; CPU in the step hooks
TICK = os.sysconf("SC_CLK_TCK")

def sysprof_threads_cpu_s():
    """CPU seconds of sysprof's threads in this process: the native sampler's ("sysprof*") and the recorder's."""
    ids = {str(t.native_id) for t in threading.enumerate() if t.name == "sysprof-recorder"}
    total = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            comm = open(f"/proc/self/task/{tid}/comm").read().strip()
            if tid in ids or comm.startswith("sysprof"):
                f = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
                total += int(f[11]) + int(f[12])
        except OSError:
            pass
    return total / TICK

def mark_step(starts, probes):
    starts.append(pc())
    if len(starts) in (steps // 4, steps - 1):  # the threads' CPU over the steady middle of the run
        probes.append((pc(), sysprof_threads_cpu_s()))
RUN_HOOKS = ("on_fit_start", "on_fit_end", "teardown", "on_exception", "on_train_begin", "on_train_end")

def timed_hooks(cls):
    """Wrap every hook of a SysprofCallback class: the time inside them goes to hook_ns."""
    for name in [n for n in vars(cls) if n.startswith("on_") or n == "teardown"]:
        f, slot = getattr(cls, name), int(name in RUN_HOOKS)
        def wrap(f=f, slot=slot):
            def w(*a, **k):
                t, c = pc(), tt()
                try:
                    return f(*a, **k)
                finally:
                    hook_ns[slot] += pc() - t
                    if not slot:
                        hook_ns[2] += tt() - c
            return w
        setattr(cls, name, wrap())

def mlp():
    return torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                               torch.nn.ReLU(), torch.nn.Linear(1024, 10))

X, Y = torch.randn(128 * steps, 256), torch.randint(0, 10, (128 * steps,))

def lightning_run(with_cb):
    import lightning.pytorch as pl
    from sysprof.integrations.lightning import SysprofCallback
    starts, probes = [], []
    class Timing(pl.Callback):
        def on_train_batch_start(self, *a):
            mark_step(starts, probes)
    class M(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = mlp()
        def training_step(self, batch, i):
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self.net(x), y)
            self.log("loss", loss)
            return loss
        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)
    cbs = [Timing()] + ([SysprofCallback(interval=0.01)] if with_cb else [])
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=128)
    tmp = tempfile.mkdtemp()
    trainer = pl.Trainer(max_epochs=1, accelerator="cpu", devices=1, log_every_n_steps=10, enable_progress_bar=False,
                         enable_checkpointing=False, enable_model_summary=False, default_root_dir=tmp,
                         logger=pl.loggers.CSVLogger(tmp), callbacks=cbs)
    trainer.fit(M(), loader)
    return starts, probes

def transformers_run(with_cb):
    from transformers import Trainer, TrainerCallback, TrainingArguments
    from sysprof.integrations.transformers import SysprofCallback
    starts, probes = [], []
    class Timing(TrainerCallback):
        def on_step_begin(self, *a, **k):
            mark_step(starts, probes)
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = mlp()
        def forward(self, x, labels):
            return {"loss": torch.nn.functional.cross_entropy(self.net(x), labels)}
    class D(torch.utils.data.Dataset):
        def __len__(self):
            return len(Y)
        def __getitem__(self, i):
            return {"x": X[i], "labels": Y[i]}
    args = TrainingArguments(output_dir=tempfile.mkdtemp(), max_steps=steps, per_device_train_batch_size=128,
                             logging_steps=10, save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True,
                             dataloader_num_workers=0)
    cbs = [Timing()] + ([SysprofCallback(interval=0.01)] if with_cb else [])
    Trainer(model=M(), args=args, train_dataset=D(), callbacks=cbs).train()
    return starts, probes

out = {}
for fw in which:
    run = lightning_run if fw == "lightning" else transformers_run
    if fw == "lightning":
        from sysprof.integrations import lightning as mod
    else:
        from sysprof.integrations import transformers as mod
    timed_hooks(mod.SysprofCallback)
    run(False), run(True)  # warm-up
    res = {"off": [], "on": [], "hook_ns_per_step": [], "hook_cpu_ns_per_step": [], "run_hooks_ns": [],
           "threads_cpu_share": []}
    for p in range(pairs):
        for with_cb in ((False, True) if p % 2 == 0 else (True, False)):
            hook_ns[:] = [0, 0, 0]
            starts, probes = run(with_cb)
            d = sorted(b - a for a, b in zip(starts[2:], starts[3:]))  # the first steps warm up
            res["on" if with_cb else "off"].append(d[len(d) // 2])
            if with_cb:
                res["hook_ns_per_step"].append(hook_ns[0] / max(1, len(starts)))
                res["hook_cpu_ns_per_step"].append(hook_ns[2] / max(1, len(starts)))
                res["run_hooks_ns"].append(hook_ns[1])
                (t0, c0), (t1, c1) = probes
                res["threads_cpu_share"].append((c1 - c0) / ((t1 - t0) / 1e9))
    out[fw] = res
print(json.dumps(out))
'''


def _python():
    """The frameworks venv's python and the child's environment (tests/integrations_support.py builds both)."""
    sys.path.insert(0, os.path.join(REPO, "tests"))
    try:
        from integrations_support import RECIPE, _venv, child_env
    finally:
        sys.path.remove(os.path.join(REPO, "tests"))
    if not RECIPE.exists():
        return None, None
    import pathlib

    work = pathlib.Path(tempfile.mkdtemp(prefix="sysprof-bench-integrations-"))
    return _venv() / "bin" / "python", child_env(work)


def bench_integrations(cfg, sysprof) -> Dict[str, Any]:
    pairs, steps = cfg.get("integrations", DEFAULT)
    python, env = _python()
    if python is None:
        return {"skipped": "tests/recipes/frameworks-venv.sh not found"}
    r = subprocess.run([str(python), "-c", _CHILD, str(pairs), str(steps), "lightning,transformers"],
                       capture_output=True, text=True, env=env, cwd=tempfile.gettempdir(), timeout=3600)
    if r.returncode != 0:
        raise RuntimeError(f"bench_integrations' child failed: {r.stderr.strip()[-3000:]}")
    raw = json.loads(r.stdout.strip().splitlines()[-1])
    out: Dict[str, Any] = {"pairs": pairs, "steps": steps, "interval_s": 0.01}
    for fw, res in raw.items():
        added = [100.0 * (on - off) / off for on, off in zip(res["on"], res["off"])]
        out[fw] = {"step_ms_without": dist([v / 1e6 for v in res["off"]], "ms"),
                   "step_ms_with": dist([v / 1e6 for v in res["on"]], "ms"),
                   "added_percent": dist(added, "%"),
                   "hooks_us_per_step": dist([v / 1e3 for v in res["hook_ns_per_step"]], "us"),
                   "hooks_cpu_us_per_step": dist([v / 1e3 for v in res["hook_cpu_ns_per_step"]], "us"),
                   "threads_cpu_percent": dist([100 * v for v in res["threads_cpu_share"]], "% of a core"),
                   "start_stop_ms": dist([v / 1e6 for v in res["run_hooks_ns"]], "ms")}
    return out


def print_integrations(res: Dict[str, Any]) -> str:
    if "skipped" in res:
        return f"integrations: skipped ({res['skipped']})"
    rows = []
    for fw in ("lightning", "transformers"):
        d = res.get(fw)
        if not d:
            continue
        a, h, c = d["added_percent"], d["hooks_us_per_step"], d["hooks_cpu_us_per_step"]
        step_us = 1e3 * (d["step_ms_without"]["median"] or float("nan"))
        cpu = 100 * c["median"] / step_us + d["threads_cpu_percent"]["median"]
        rows.append([fw, a["n"], fmt(d["step_ms_without"]["median"]), fmt(d["step_ms_with"]["median"]),
                     f"{fmt(a['median'])} %", f"{fmt(a['p25'])} .. {fmt(a['p75'])} %", fmt(h["median"]),
                     fmt(c["median"]), f"{fmt(d['threads_cpu_percent']['median'])} %", f"{fmt(cpu)} %",
                     fmt(d["start_stop_ms"]["median"])])
    head = (f"SysprofCallback's added step time, sampling every {res['interval_s'] * 1e3:g} ms "
            f"({res['steps']} steps per run, interleaved pairs; goal <= 1 %)\n\n")
    return head + table(["trainer", "pairs", "step ms without", "step ms with", "added wall (median)", "IQR",
                         "step hooks us/step wall", "CPU", "sysprof threads CPU", "CPU added", "start + stop ms"],
                        rows) + ("\n\nCPU added: the hooks' CPU per step over the step time, plus sysprof's threads' "
                                 "CPU as a share of one core (the model trains on one torch thread).")


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    import sysprof as _sysprof

    print(print_integrations(bench_integrations({"integrations": QUICK if a.quick else DEFAULT}, _sysprof)))
