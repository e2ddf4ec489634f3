"""Benchmark section: what the trainer callbacks (sysprof/integrations/) add to a training step, sampling every 10 ms.

A child in the frameworks venv (tests/recipes/frameworks-venv.sh, built on first use; the sysprof this process
imports goes first on its path) trains an MLP (256-1024-1024-10, batch 128, one torch thread, tensors made
up front) on the CPU, with Lightning and with the Hugging Face Trainer, in interleaved triples of runs after one
warm-up run of each kind: the baseline ``A`` twice and ``SysprofCallback(interval=0.01)`` (default sources and
summaries, logging every 10 steps) once, in the orders A B A, B A A, A A B pair by pair. The baseline carries a
callback with the same hooks, empty, so both pay the trainer's dispatch and the timing below alike. A step's time
is the time between two consecutive step-start hooks (Lightning's ``on_train_batch_start``, HF's ``on_step_begin``)
of a timing callback; each run gives its median, each triple ``added = (B - A) / A`` in percent against the
neighbouring A, and ``A vs A`` (the two baselines' difference) is the machine's own noise at that size.

Also measured per run, over the middle half of its steps: the time inside the callback's step hooks per step
(each hook wrapped by a perf_counter_ns pair, wall and thread CPU; the baseline's empty hooks subtracted), the
training thread's run delay per step (``/proc/self/task/<tid>/schedstat``, time runnable but kept off a CPU: the
direct interference of sysprof's threads), and the CPU of sysprof's threads (the native sampler's and the
recorder's) as a share of one core; and the start and stop hooks' time per run. On a machine whose cores are all
busy the wall figure is mostly the scheduler's; the CPU figures are the work done. The goal is ``added`` <= 1 %;
the IQRs and ``A vs A`` say how far the medians can be trusted.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Dict

from bench_util import REPO, dist, fmt, table

DEFAULT = (9, 100)  # triples, steps per run
QUICK = (2, 30)
BLOCKS = (32, 40)  # blocks mode: blocks of steps in one fit, the recording on in every other pair (A B B A ...)

_CHILD = r'''
import json, os, sys, tempfile, threading, time, warnings
import torch
warnings.simplefilter("ignore")
torch.set_num_threads(1)
pairs, steps, which = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(",")
BLOCKS = tuple(int(x) for x in sys.argv[4].split("x")) if len(sys.argv) > 4 else (0, 0)
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

def run_delay_ns():
    with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as f:
        return int(f.read().split()[1])

def mark_step(starts, probes):
    starts.append(pc())
    if len(starts) in (steps // 4, 3 * steps // 4):  # the steady middle of the run
        probes.append((pc(), sysprof_threads_cpu_s(), run_delay_ns(), list(hook_ns)))
RUN_HOOKS = ("on_fit_start", "on_fit_end", "teardown", "on_exception", "on_train_begin", "on_train_end")

def hook_names(cls):
    return [n for n in vars(cls) if n.startswith("on_") or n == "teardown"]

def noop_like(base, cls):
    """A callback class with the hooks of ``cls``, empty: the baseline's."""
    return type("Noop", (base,), {n: (lambda self, *a, **k: None) for n in hook_names(cls)})

def timed_hooks(cls):
    """Wrap every hook of a callback class: the time inside them goes to hook_ns."""
    for name in hook_names(cls):
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

N_BLOCKS, PER_BLOCK = BLOCKS
X, Y = torch.randn(128 * max(steps, N_BLOCKS * PER_BLOCK), 256), torch.randint(0, 10, (128 * max(steps, N_BLOCKS * PER_BLOCK),))
BLOCK_KINDS = ("A", "B", "B", "A")  # block k's kind: BLOCK_KINDS[k % 4]; blocks 2j and 2j+1 are one A and one B

def toggler(cb, folder, fw, starts):
    """At each block's first step: the recording stops (A) or starts (B), in the same fit (blocks mode)."""
    def toggle():
        i = len(starts) - 1
        if i % PER_BLOCK == 0:
            if BLOCK_KINDS[(i // PER_BLOCK) % 4] == "B":
                cb.session.start(folder, fw)
            else:
                cb.session.stop("block")
    return toggle

def lightning_run(with_cb, blocks=False):
    import lightning.pytorch as pl
    from sysprof.integrations.lightning import SysprofCallback
    starts, probes = [], []
    tmp = tempfile.mkdtemp()
    cb = SysprofCallback(interval=0.01) if with_cb or blocks else LNoop()
    toggle = toggler(cb, tmp, "lightning", starts) if blocks else None
    class Timing(pl.Callback):
        def on_train_batch_start(self, *a):
            mark_step(starts, probes)
            if toggle is not None:  # after the mark: its cost is the block's first step, left out
                toggle()
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
    cbs = [Timing(), cb]
    n = N_BLOCKS * PER_BLOCK if blocks else steps
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X[:128 * n], Y[:128 * n]), batch_size=128)
    trainer = pl.Trainer(max_epochs=1, accelerator="cpu", devices=1, log_every_n_steps=10, enable_progress_bar=False,
                         enable_checkpointing=False, enable_model_summary=False, default_root_dir=tmp,
                         logger=pl.loggers.CSVLogger(tmp), callbacks=cbs)
    trainer.fit(M(), loader)
    return starts, probes

def transformers_run(with_cb, blocks=False):
    from transformers import Trainer, TrainerCallback, TrainingArguments
    from sysprof.integrations.transformers import SysprofCallback
    starts, probes = [], []
    tmp = tempfile.mkdtemp()
    cb = SysprofCallback(interval=0.01) if with_cb or blocks else HNoop()
    toggle = toggler(cb, tmp, "transformers", starts) if blocks else None
    class Timing(TrainerCallback):
        def on_step_begin(self, *a, **k):
            mark_step(starts, probes)
            if toggle is not None:  # after the mark: its cost is the block's first step, left out
                toggle()
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
    args = TrainingArguments(output_dir=tmp, max_steps=N_BLOCKS * PER_BLOCK if blocks else steps,
                             per_device_train_batch_size=128,
                             logging_steps=10, save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True,
                             dataloader_num_workers=0)
    cbs = [Timing(), cb]
    Trainer(model=M(), args=args, train_dataset=D(), callbacks=cbs).train()
    return starts, probes

out = {}
ORDERS = (("A", "B", "A"), ("B", "A", "A"), ("A", "A", "B"))
for fw in which:
    run = lightning_run if fw == "lightning" else transformers_run
    if fw == "lightning":
        import lightning.pytorch as pl
        from sysprof.integrations import lightning as mod
        LNoop = noop_like(pl.Callback, mod.SysprofCallback)
        timed_hooks(LNoop)
    else:
        from transformers import TrainerCallback
        from sysprof.integrations import transformers as mod
        HNoop = noop_like(TrainerCallback, mod.SysprofCallback)
        timed_hooks(HNoop)
    timed_hooks(mod.SysprofCallback)
    run(False), run(True)  # warm-up
    res = {"triples": []}
    for p in range(pairs):
        triple = []
        for kind in ORDERS[p % 3]:
            hook_ns[:] = [0, 0, 0]
            starts, probes = run(kind == "B")
            d = sorted(b - a for a, b in zip(starts[2:], starts[3:]))  # the first steps warm up
            (t0, c0, r0, h0), (t1, c1, r1, h1) = probes
            n_mid = 3 * steps // 4 - steps // 4
            triple.append({"kind": kind, "step_ns": d[len(d) // 2], "hook_ns_per_step": (h1[0] - h0[0]) / n_mid,
                           "hook_cpu_ns_per_step": (h1[2] - h0[2]) / n_mid, "run_delay_ns_per_step": (r1 - r0) / n_mid,
                           "threads_cpu_share": (c1 - c0) / ((t1 - t0) / 1e9), "run_hooks_ns": hook_ns[1]})
        res["triples"].append(triple)
    if N_BLOCKS:  # one long fit, the recording switched on and off block by block
        starts, _ = run(False, blocks=True)
        d = [b - a for a, b in zip(starts, starts[1:])]
        res["blocks"] = [sorted(d[k * PER_BLOCK + 3:(k + 1) * PER_BLOCK])[(PER_BLOCK - 3) // 2]
                         for k in range(len(d) // PER_BLOCK)]  # per block: the median step, its first 3 left out
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
    n_blocks, per_block = cfg.get("integrations_blocks", BLOCKS)
    r = subprocess.run([str(python), "-c", _CHILD, str(pairs), str(steps), "lightning,transformers",
                        f"{n_blocks}x{per_block}"],
                       capture_output=True, text=True, env=env, cwd=tempfile.gettempdir(), timeout=3600)
    if r.returncode != 0:
        raise RuntimeError(f"bench_integrations' child failed: {r.stderr.strip()[-3000:]}")
    raw = json.loads(r.stdout.strip().splitlines()[-1])
    out: Dict[str, Any] = {"triples": pairs, "steps": steps, "interval_s": 0.01, "blocks": [n_blocks, per_block]}
    for fw, res in raw.items():
        added, noise, on, off, hooks, cpu, delay, threads, run_hooks = [], [], [], [], [], [], [], [], []
        for triple in res["triples"]:
            b = next(i for i, r in enumerate(triple) if r["kind"] == "B")
            a_runs = [r for r in triple if r["kind"] == "A"]
            neighbour = triple[1] if b != 1 else triple[0]  # the A next to B
            rb = triple[b]
            added.append(100.0 * (rb["step_ns"] - neighbour["step_ns"]) / neighbour["step_ns"])
            noise.append(100.0 * (a_runs[1]["step_ns"] - a_runs[0]["step_ns"]) / a_runs[0]["step_ns"])
            base_hooks = sum(r["hook_ns_per_step"] for r in a_runs) / 2
            base_cpu = sum(r["hook_cpu_ns_per_step"] for r in a_runs) / 2
            base_delay = sum(r["run_delay_ns_per_step"] for r in a_runs) / 2
            on.append(rb["step_ns"] / 1e6)
            off.extend(r["step_ns"] / 1e6 for r in a_runs)
            hooks.append((rb["hook_ns_per_step"] - base_hooks) / 1e3)
            cpu.append((rb["hook_cpu_ns_per_step"] - base_cpu) / 1e3)
            delay.append((rb["run_delay_ns_per_step"] - base_delay) / 1e3)
            threads.append(100 * rb["threads_cpu_share"])
            run_hooks.append(rb["run_hooks_ns"] / 1e6)
        blocks, block_added, block_noise = res.get("blocks", []), [], []
        for j in range(0, len(blocks) - 1, 2):  # blocks 2j, 2j+1: one A, one B
            a, b = (blocks[j], blocks[j + 1]) if BLOCK_KINDS[j % 4] == "A" else (blocks[j + 1], blocks[j])
            block_added.append(100.0 * (b - a) / a)
        for j in range(3, len(blocks) - 1, 4):  # blocks 4k+3, 4k+4: both A
            block_noise.append(100.0 * (blocks[j + 1] - blocks[j]) / blocks[j])
        out[fw] = {"step_ms_without": dist(off, "ms"), "step_ms_with": dist(on, "ms"),
                   "blocks_added_percent": dist(block_added, "%"), "blocks_a_vs_a_percent": dist(block_noise, "%"),
                   "added_percent": dist(added, "%"), "a_vs_a_percent": dist(noise, "%"),
                   "hooks_us_per_step": dist(hooks, "us"), "hooks_cpu_us_per_step": dist(cpu, "us"),
                   "run_delay_us_per_step": dist(delay, "us"),
                   "threads_cpu_percent": dist(threads, "% of a core"), "start_stop_ms": dist(run_hooks, "ms")}
    return out


BLOCK_KINDS = ("A", "B", "B", "A")  # the child's


def print_integrations(res: Dict[str, Any]) -> str:
    if "skipped" in res:
        return f"integrations: skipped ({res['skipped']})"
    rows = []
    for fw in ("lightning", "transformers"):
        d = res.get(fw)
        if not d:
            continue
        a, z, h, c, r = (d[k] for k in ("added_percent", "a_vs_a_percent", "hooks_us_per_step",
                                         "hooks_cpu_us_per_step", "run_delay_us_per_step"))
        step_us = 1e3 * (d["step_ms_without"]["median"] or float("nan"))
        ba, bz = d.get("blocks_added_percent", {}), d.get("blocks_a_vs_a_percent", {})
        rows.append([fw, a["n"], fmt(d["step_ms_without"]["median"]), fmt(d["step_ms_with"]["median"]),
                     f"{fmt(a['median'])} % [{fmt(a['p25'])} .. {fmt(a['p75'])}]",
                     f"{fmt(z['median'])} % [{fmt(z['p25'])} .. {fmt(z['p75'])}]",
                     f"{fmt(ba.get('median'))} % [{fmt(ba.get('p25'))} .. {fmt(ba.get('p75'))}] (n={ba.get('n', 0)})",
                     f"{fmt(bz.get('median'))} % [{fmt(bz.get('p25'))} .. {fmt(bz.get('p75'))}] (n={bz.get('n', 0)})",
                     f"{fmt(h['median'])} ({fmt(100 * h['median'] / step_us)} %)", fmt(c["median"]),
                     f"{fmt(r['median'])} ({fmt(100 * r['median'] / step_us)} %)",
                     f"{fmt(d['threads_cpu_percent']['median'])} %", fmt(d["start_stop_ms"]["median"])])
    head = (f"SysprofCallback's added step time, sampling every {res['interval_s'] * 1e3:g} ms "
            f"({res['steps']} steps per run, {res['triples']} interleaved A/B/A triples; goal <= 1 %)\n\n")
    return head + table(["trainer", "n", "step ms A", "step ms B", "added wall, median [IQR]", "A vs A [IQR]",
                         "in one fit: added [IQR]", "in one fit: A vs A [IQR]",
                         "step hooks us/step (share)", "hooks CPU us/step", "run delay added us/step (share)",
                         "sysprof threads CPU", "start + stop ms"], rows) + (
        "\n\nB: with SysprofCallback; A: an empty callback with the same hooks. Hooks and run delay: B's minus "
        "A's, over the middle half of each run. In one fit: one training run of "
        f"{res.get('blocks', [0, 0])[0]} blocks of {res.get('blocks', [0, 0])[1]} steps, the callback recording in "
        "every other pair (A B B A ...); per block its median step (the first 3 left out), each B against the A "
        "beside it, A vs A the two A blocks side by side: no run-to-run noise. sysprof's threads run beside the training thread (one torch "
        "thread): their CPU is paid by whatever shares their core.")


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    import sysprof as _sysprof

    cfg = {"integrations": QUICK, "integrations_blocks": (8, 20)} if a.quick else {"integrations": DEFAULT}
    print(print_integrations(bench_integrations(cfg, _sysprof)))
