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
busy the wall figure is mostly the scheduler's; the CPU figures are the work done.

The goal (``added`` <= 1 %) is decided in one fit (blocks mode; whole runs differ by more than 1 % on their own):
the recording started and stopped by a timing callback at block boundaries, blocks of ~0.3 s (+- 10 %, seeded) in
A B B A quads (the recording runs through both B blocks: 0.6 s, one of the recorder's drains), each block's first
step (the start or stop) left out. Per step the wall time, the training thread's CPU (``time.thread_time_ns``) and
run delay (schedstat), the callback's step hooks' wall and CPU and the cyclic GC's wall (on the training thread,
elsewhere) are recorded; per quad the contrast (B1 + B2 - A0 - A3) / 2 in % of the A step (a linear drift cancels),
for the wall time and for each part (wall = CPU + run delay + waiting; "own" = wall - run delay). Reported: the
10 % trimmed mean and the median over quads, each with a 95 % bootstrap interval (numpy, seeded), beside the same
contrast of A blocks only (A vs A: the resolution), and a verdict: ok when the trimmed mean's upper bound is within
1 %, missed when its lower bound is above it, not resolvable when the interval is wider than 1 %.
``SYSPROF_BENCH_A_ONLY=1`` makes the B blocks record nothing (an A/A check of the whole method).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Dict

from bench_util import REPO, TRIM, boot_ci, dist, fmt, table, verdict

DEFAULT = (6, 100)  # triples, steps per run
QUICK = (2, 30)
# blocks mode: one fit in blocks, the recording on in blocks A B B A (repeated); (blocks, steps per block: int, or
# seconds per block: float, +- 10 %). Short blocks cancel the machine's drift best (an A/A pilot on the 2-vCPU VM:
# the contrast's noise per step measured fell 1.5x from 35 to 10 steps per block); a recording (B B) of 2 x 0.3 s
# still holds one of the recorder's drains (every 0.5 s): 5/6 of a steady recording's.
BLOCKS = (560, 0.3)
QUICK_BLOCKS = (16, 10)
TRAINERS = "lightning,transformers"
GOAL_PERCENT = 1.0
SKIP = 1  # a block's first steps left out (the recording's start or stop is in its first)
WARM_BLOCKS = 4  # the fit's first blocks (one A B B A) left out
MIN_QUADS = 10  # fewer quads: no verdict

_CHILD = r'''
import json, os, sys, tempfile, threading, time, warnings
import torch
warnings.simplefilter("ignore")
torch.set_num_threads(1)
pairs, steps, which = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(",")
BLOCK_SPEC = sys.argv[4] if len(sys.argv) > 4 else "0x0"  # "<blocks>x<steps>" or "<blocks>x<seconds>s"
pc, tt = time.perf_counter_ns, time.thread_time_ns
hook_ns = [0, 0, 0]  # wall in the step hooks, in the run's start and end hooks; CPU in the step hooks
gc_ns = [0, 0]  # wall of the cyclic GC's collections: on the training thread, on any other thread
TICK = os.sysconf("SC_CLK_TCK")
TRAIN_TID = threading.get_ident()
_gc_t0 = {}

def gc_timer(phase, info):
    if phase == "start":
        _gc_t0[threading.get_ident()] = pc()
    else:
        t0 = _gc_t0.pop(threading.get_ident(), None)
        if t0 is not None:
            gc_ns[threading.get_ident() != TRAIN_TID] += pc() - t0
import gc
gc.callbacks.append(gc_timer)

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

_SCHEDSTAT = os.open(f"/proc/self/task/{threading.get_native_id()}/schedstat", os.O_RDONLY)  # the training thread's

def run_delay_ns():
    return int(os.pread(_SCHEDSTAT, 128, 0).split()[1])

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

N_BLOCKS, _per = BLOCK_SPEC.split("x")
N_BLOCKS = int(N_BLOCKS)
PER_BLOCK, BLOCK_NS = (0, int(float(_per[:-1]) * 1e9)) if _per.endswith("s") else (int(_per), 0)
# the blocks fit's steps at most (time-based blocks: as if a step took 5 ms; the fit stops after the last block)
BLOCK_STEPS = N_BLOCKS * PER_BLOCK if PER_BLOCK else N_BLOCKS * BLOCK_NS // 5_000_000
NX = 128 * max(steps, 256)  # the samples made up front; the blocks fit goes round them
X, Y = torch.randn(NX, 256), torch.randint(0, 10, (NX,))
BLOCK_KINDS = ("A", "B", "B", "A")  # block k's kind: BLOCK_KINDS[k % 4]; blocks 2j and 2j+1 are one A and one B
A_ONLY = os.environ.get("SYSPROF_BENCH_A_ONLY", "")  # "1": the B blocks record nothing either (an A/A check); "2": no start or stop call at all

class Cyclic(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        return X[i % NX], Y[i % NX]

def toggler(cb, folder, fw, starts, rec, bounds, stop_fit):
    """At each block's first step: the recording starts (A to B) or stops (B to A), in the same fit (blocks mode);
    the recording runs through both B blocks of A B B A. A block ends after PER_BLOCK steps or its wall time (BLOCK_NS
    +- 10 %, seeded: no noise of a fixed period lines up with the blocks); after the last one the fit is asked to
    stop. Per step ``rec`` gets the running totals (wall, the training thread's CPU and run delay, the step hooks'
    wall and CPU, the GC's wall on the training and other threads)."""
    import random
    jitter = random.Random(15)
    length = [BLOCK_NS]
    def toggle():
        i = len(starts) - 1
        rec.append((starts[-1], tt(), run_delay_ns(), hook_ns[0], hook_ns[2], gc_ns[0], gc_ns[1]))
        if not bounds:
            bounds.append(i)
            return
        k = len(bounds) - 1
        if k >= N_BLOCKS:
            return
        if (PER_BLOCK and i - bounds[-1] >= PER_BLOCK) or (BLOCK_NS and starts[-1] - starts[bounds[-1]] >= length[0]):
            bounds.append(i)
            length[0] = int(BLOCK_NS * jitter.uniform(0.9, 1.1))
            if k + 1 == N_BLOCKS:
                cb.session.stop("block")
                stop_fit()
                return
            kind, before = BLOCK_KINDS[(k + 1) % 4], BLOCK_KINDS[k % 4]
            if kind != before and A_ONLY != "2":
                if kind == "B" and not A_ONLY:
                    cb.session.start(folder, fw)
                else:
                    cb.session.stop("block")
    return toggle

def lightning_run(with_cb, blocks=False):
    import lightning.pytorch as pl
    from sysprof.integrations.lightning import SysprofCallback
    starts, probes, rec, bounds, trainer = [], [], [], [], []
    tmp = tempfile.mkdtemp()
    cb = SysprofCallback(interval=0.01) if with_cb or blocks else LNoop()
    def stop_fit():
        trainer[0].should_stop = True
    toggle = toggler(cb, tmp, "lightning", starts, rec, bounds, stop_fit) if blocks else None
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
    data = Cyclic(128 * BLOCK_STEPS) if blocks else torch.utils.data.TensorDataset(X[:128 * steps], Y[:128 * steps])
    loader = torch.utils.data.DataLoader(data, batch_size=128)
    trainer.append(pl.Trainer(max_epochs=1, accelerator="cpu", devices=1, log_every_n_steps=10, enable_progress_bar=False,
                         enable_checkpointing=False, enable_model_summary=False, default_root_dir=tmp,
                         logger=pl.loggers.CSVLogger(tmp), callbacks=cbs))
    trainer[0].fit(M(), loader)
    return (rec, bounds) if blocks else (starts, probes)

def transformers_run(with_cb, blocks=False):
    from transformers import Trainer, TrainerCallback, TrainingArguments
    from sysprof.integrations.transformers import SysprofCallback
    starts, probes, rec, bounds, control = [], [], [], [], []
    tmp = tempfile.mkdtemp()
    cb = SysprofCallback(interval=0.01) if with_cb or blocks else HNoop()
    def stop_fit():
        control[0].should_training_stop = True
    toggle = toggler(cb, tmp, "transformers", starts, rec, bounds, stop_fit) if blocks else None
    class Timing(TrainerCallback):
        def on_step_begin(self, args, state, ctl, **k):
            mark_step(starts, probes)
            if toggle is not None:  # after the mark: its cost is the block's first step, left out
                control[:] = [ctl]
                toggle()
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = mlp()
        def forward(self, x, labels):
            return {"loss": torch.nn.functional.cross_entropy(self.net(x), labels)}
    class D(torch.utils.data.Dataset):
        def __len__(self):
            return 128 * (BLOCK_STEPS if blocks else steps)
        def __getitem__(self, i):
            return {"x": X[i % NX], "labels": Y[i % NX]}
    args = TrainingArguments(output_dir=tmp, max_steps=BLOCK_STEPS if blocks else steps,
                             per_device_train_batch_size=128,
                             logging_steps=10, save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True,
                             dataloader_num_workers=0)
    cbs = [Timing(), cb]
    Trainer(model=M(), args=args, train_dataset=D(), callbacks=cbs).train()
    return (rec, bounds) if blocks else (starts, probes)

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
    res = {"triples": [], "seconds": {}}
    t_fw = time.monotonic()
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
    res["seconds"]["triples"] = time.monotonic() - t_fw
    if N_BLOCKS:  # one long fit, the recording switched on and off block by block
        t_fw = time.monotonic()
        hook_ns[:] = [0, 0, 0]
        rec, bounds = run(False, blocks=True)
        res["blocks"] = {"bounds": bounds, "rec": rec}  # the parent sums each block's steps
        res["seconds"]["blocks"] = time.monotonic() - t_fw
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
    spec = f"{n_blocks}x{per_block:g}s" if isinstance(per_block, float) else f"{n_blocks}x{per_block}"
    r = subprocess.run([str(python), "-c", _CHILD, str(pairs), str(steps), cfg.get("integrations_trainers", TRAINERS),
                        spec],
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
        out[fw] = {"step_ms_without": dist(off, "ms"), "step_ms_with": dist(on, "ms"),
                   "added_percent": dist(added, "%"), "a_vs_a_percent": dist(noise, "%"),
                   "hooks_us_per_step": dist(hooks, "us"), "hooks_cpu_us_per_step": dist(cpu, "us"),
                   "run_delay_us_per_step": dist(delay, "us"),
                   "threads_cpu_percent": dist(threads, "% of a core"), "start_stop_ms": dist(run_hooks, "ms"),
                   "seconds": res.get("seconds", {})}
        if res.get("blocks"):
            out[fw]["in_one_fit"] = block_figures(res["blocks"]["rec"], res["blocks"]["bounds"])
            if cfg.get("integrations_raw"):
                out[fw]["raw_blocks"] = res["blocks"]
    return out


BLOCK_KINDS = ("A", "B", "B", "A")  # the child's
#: the per-step running totals the child records (its toggler's ``rec``), in order
REC = ("wall", "cpu", "run_delay", "hooks", "hooks_cpu", "gc_train", "gc_other")


def block_figures(rec, bounds, skip: int = SKIP, warm: int = WARM_BLOCKS) -> Dict[str, Any]:
    """The blocks fit's figures. Per block, from its step ``skip`` to the next block's first: per step the wall
    time, the training thread's CPU and run delay, the rest (waiting: the GIL, I/O), the step hooks' wall and CPU
    and the GC's wall. Per A B B A quad (blocks 4q .. 4q+3): the contrast (B1 + B2 - A0 - A3) / 2, in % of the
    quad's A step (a linear drift cancels); each component the same way, in % of the A step too, so they add up:
    wall = CPU + run delay + waiting, and "own" = wall - run delay (the thread's CPU and waiting). The A-vs-A
    control: the same contrast of A blocks only, (A 4q+4 + A 4q+7 - A 4q+3 - A 4q+8) / 2 (A blocks of two
    neighbouring quads): what the machine's noise alone gives. Each: trimmed mean and median over quads with 95 %
    bootstrap intervals (resampling quads)."""
    import numpy as np

    r = np.asarray(rec, dtype=np.float64)
    blocks = []  # per block: per-step means of REC
    for b in range(len(bounds) - 1):
        i, j = bounds[b] + skip, bounds[b + 1]
        blocks.append((r[j] - r[i]) / (j - i) if j > i else np.full(len(REC), np.nan))
    blocks = np.asarray(blocks).reshape(-1, len(REC))
    wall, cpu, delay = blocks[:, 0], blocks[:, 1], blocks[:, 2]
    comp = {"wall": wall, "own": wall - delay, "cpu": cpu, "run_delay": delay, "waiting": wall - cpu - delay,
            "hooks_cpu": blocks[:, 4], "gc_train": blocks[:, 5], "gc_other": blocks[:, 6]}
    q = np.arange(warm // 4 * 4, len(blocks) - 3, 4)  # each quad's first block (A B B A)
    c = np.arange(warm // 4 * 4 + 3, len(blocks) - 5, 4)  # A blocks c, c+1 | c+4, c+5
    a_ms = (wall[q] + wall[q + 3]) / 2
    ca_ms = (wall[c] + wall[c + 5]) / 2
    out: Dict[str, Any] = {"blocks": len(blocks), "quads": int(q.size), "skip": skip, "warm_blocks": warm,
                           "steps_per_block": float(np.median(np.diff(bounds))) if len(bounds) > 1 else 0,
                           "step_ms_a": float(np.median(a_ms)) / 1e6 if q.size else None,
                           "step_ms_b": float(np.median((wall[q + 1] + wall[q + 2]) / 2)) / 1e6 if q.size else None,
                           "hooks_us_a": float(np.median(blocks[q, 3])) / 1e3 if q.size else None,
                           "hooks_us_b": float(np.median(blocks[q + 1, 3])) / 1e3 if q.size else None}
    for name, x in comp.items():
        out[name] = boot_ci(100.0 * ((x[q + 1] + x[q + 2]) - (x[q] + x[q + 3])) / 2 / a_ms)
        out[name + "_a_vs_a"] = boot_ci(100.0 * ((x[c + 1] + x[c + 4]) - (x[c] + x[c + 5])) / 2 / ca_ms)
    out["verdict"] = verdict(out["wall"]["trimmed_ci"], GOAL_PERCENT, out["wall"]["n"], MIN_QUADS)
    out["verdict_median"] = verdict(out["wall"]["median_ci"], GOAL_PERCENT, out["wall"]["n"], MIN_QUADS)
    out["verdict_own"] = verdict(out["own"]["trimmed_ci"], GOAL_PERCENT, out["own"]["n"], MIN_QUADS)
    return out


def _ci(c, key: str = "trimmed", unit: str = " %") -> str:
    lo, hi = c.get(key + "_ci", [None, None])
    return f"{fmt(c.get(key))}{unit} [{fmt(lo)} .. {fmt(hi)}]"


def print_integrations(res: Dict[str, Any]) -> str:
    if "skipped" in res:
        return f"integrations: skipped ({res['skipped']})"
    rows, fit_rows, parts_rows, parts = [], [], [], []
    for fw in ("lightning", "transformers"):
        d = res.get(fw)
        if not d:
            continue
        a, z, h, c, r = (d[k] for k in ("added_percent", "a_vs_a_percent", "hooks_us_per_step",
                                         "hooks_cpu_us_per_step", "run_delay_us_per_step"))
        if a["n"]:
            step_us = 1e3 * d["step_ms_without"]["median"]
            rows.append([fw, a["n"], fmt(d["step_ms_without"]["median"]), fmt(d["step_ms_with"]["median"]),
                         f"{fmt(a['median'])} % [{fmt(a['p25'])} .. {fmt(a['p75'])}]",
                         f"{fmt(z['median'])} % [{fmt(z['p25'])} .. {fmt(z['p75'])}]",
                         f"{fmt(h['median'])} ({fmt(100 * h['median'] / step_us)} %)", fmt(c["median"]),
                         f"{fmt(r['median'])} ({fmt(100 * r['median'] / step_us)} %)",
                         f"{fmt(d['threads_cpu_percent']['median'])} %", fmt(d["start_stop_ms"]["median"])])
        f = d.get("in_one_fit")
        if f:
            w, o = f["wall"], f["own"]
            fit_rows.append([fw, w["n"], fmt(f["steps_per_block"]), fmt(f["step_ms_a"]), _ci(w), _ci(w, "median"),
                             _ci(f["wall_a_vs_a"]), _ci(f["wall_a_vs_a"], "median"), f["verdict"], _ci(o),
                             _ci(f["own_a_vs_a"]), f["verdict_own"]])
            parts_rows.append([fw, _ci(f["cpu"]), _ci(f["hooks_cpu"]), _ci(f["gc_train"]), _ci(f["run_delay"]),
                               _ci(f["waiting"]), _ci(f["gc_other"]),
                               f"{fmt(f['hooks_us_b'])} / {fmt(f['hooks_us_a'])}"])
    if rows:
        parts.append(
            f"SysprofCallback's added step time, sampling every {res['interval_s'] * 1e3:g} ms, whole runs "
            f"({res['steps']} steps per run, {res['triples']} interleaved A/B/A triples; goal <= 1 %)\n\n" + table(
                ["trainer", "n", "step ms A", "step ms B", "added wall, median [IQR]", "A vs A [IQR]",
                 "step hooks us/step (share)", "hooks CPU us/step", "run delay added us/step (share)",
                 "sysprof threads CPU", "start + stop ms"], rows) +
            "\n\nB: with SysprofCallback; A: an empty callback with the same hooks. Hooks and run delay: B's minus "
            "A's, over the middle half of each run. sysprof's threads run beside the training thread (one torch "
            "thread): their CPU is paid by whatever shares their core.")
    if fit_rows:
        n_blocks, per = res.get("blocks", [0, 0])
        per = f"{per:g} s (+- 10 %)" if isinstance(per, float) else f"{per} steps"
        parts.append(
            f"In one fit: {n_blocks} blocks of {per}, SysprofCallback recording in A B B A order (B: recording, "
            f"A: stopped); per quad (B1 + B2 - A0 - A3) / 2 in % of its A step; {100 * TRIM:g} % trimmed mean and "
            f"median over quads [95 % bootstrap interval]; goal <= {GOAL_PERCENT:g} %\n\n" + table(
                ["trainer", "quads", "steps/block", "step ms A", "added wall (trimmed)", "added wall (median)",
                 "A vs A (trimmed)", "A vs A (median)", "verdict (wall)", "added own time (trimmed)",
                 "A vs A own", "verdict (own)"], fit_rows) +
            "\n\nWhere it comes from (trimmed mean [95 %], in % of A's step; B's minus A's):\n\n" + table(
                ["trainer", "thread CPU", "of it: hooks' CPU", "of it: GC", "run delay", "waiting (GIL, I/O)",
                 "GC elsewhere", "hooks us/step B / A"], parts_rows) +
            f"\n\nPer block its steps' mean, its first {SKIP} left out (the recording's start or stop), the first "
            f"{WARM_BLOCKS} blocks left out. wall = thread CPU + run delay + waiting; own = wall - run delay (the "
            "training thread's CPU and waiting: the time the other load on the machine does not make). The GC "
            "(cyclic collections, wall) is part of the thread's CPU when on it, of its waiting (for the GIL) when "
            "elsewhere. A vs A: the same contrast of A blocks only (blocks 4q+3, 4q+4 against 4q+7, 4q+8): the "
            "resolution. Verdict on the trimmed mean's interval: ok when its upper bound is <= the goal, missed "
            "when its lower bound is above it, not resolvable when it is wider than the goal, else borderline.")
    return "\n\n".join(parts) if parts else "integrations: nothing measured"


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--trainers", default=TRAINERS, help="lightning,transformers (default both)")
    ap.add_argument("--triples", type=int, help=f"A/B/A triples of whole runs (default {DEFAULT[0]})")
    ap.add_argument("--steps", type=int, help=f"steps per whole run (default {DEFAULT[1]})")
    ap.add_argument("--blocks", type=int, help=f"blocks in the one fit (default {BLOCKS[0]}; 0: none)")
    ap.add_argument("--per-block", help=f"steps per block, or seconds with an s (default {BLOCKS[1]:g}s)")
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument("--raw", action="store_true", help="with --json: the blocks fit's per-step totals too")
    a = ap.parse_args()
    import sysprof as _sysprof

    cfg = {"integrations": QUICK, "integrations_blocks": QUICK_BLOCKS} if a.quick else \
        {"integrations": DEFAULT, "integrations_blocks": BLOCKS}
    cfg["integrations_trainers"], cfg["integrations_raw"] = a.trainers, a.raw
    tri, blk = list(cfg["integrations"]), list(cfg["integrations_blocks"])
    if a.triples is not None:
        tri[0] = a.triples
    if a.steps is not None:
        tri[1] = a.steps
    if a.blocks is not None:
        blk[0] = a.blocks
    if a.per_block is not None:
        blk[1] = float(a.per_block[:-1]) if a.per_block.endswith("s") else int(a.per_block)
    cfg["integrations"], cfg["integrations_blocks"] = tuple(tri), tuple(blk)
    result = bench_integrations(cfg, _sysprof)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    print(print_integrations(result))
