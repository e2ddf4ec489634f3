"""A small numpy-only training loop with a data-loading stall every few steps.

It trains a 2-layer MLP (softmax cross-entropy, SGD with momentum) on synthetic data labelled by a
fixed random "teacher" network. Every ``--stall-every`` steps the "data loader" stalls: it sleeps
(``--stall-seconds``, a slow storage read), writes a fresh shard of ``--shard-mb`` MB to a temporary file
with fsync and reads it back (disk I/O), and holds the decoded shard in memory while the next steps
train (a memory spike that is freed at the next stall). Profiled with

    sysprof record --all -o trace.json -- python examples/train.py
    sysprof report trace.json --plot trace.png

the trace shows compute (CPU busy, the process near 100% per thread) alternating with stalls (CPU idle,
a disk write burst, the process RSS stepping up and down). Each batch fetch is marked "dataloader" and each
training step "step" with ``sysprof.mark`` (a no-op when not run under ``sysprof record``, or without sysprof), so
``sysprof report`` attributes the samples to them (``--by dataloader --by step``). Needs only numpy; runs ~5-10 s
by default.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

try:
    from sysprof import mark
except ImportError:  # the example runs without sysprof too
    from contextlib import nullcontext as _null

    def mark(name):
        return _null()


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=240, help="training steps (default 240)")
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--features", type=int, default=256)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--stall-every", type=int, default=30, help="steps between data-loading stalls (0: none)")
    p.add_argument("--stall-seconds", type=float, default=0.25, help="sleep of each stall")
    p.add_argument("--shard-mb", type=float, default=64.0, help="MB written, fsynced and read back per stall")
    p.add_argument("--tmpdir", default=None, help="where shards are written (default: the system temp dir)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=40)
    return p.parse_args(argv)


class MLP:
    def __init__(self, rng, n_in, n_hidden, n_out):
        self.w1 = (rng.standard_normal((n_in, n_hidden)) * np.sqrt(2.0 / n_in)).astype(np.float32)
        self.b1 = np.zeros(n_hidden, np.float32)
        self.w2 = (rng.standard_normal((n_hidden, n_out)) * np.sqrt(1.0 / n_hidden)).astype(np.float32)
        self.b2 = np.zeros(n_out, np.float32)
        self.params = [self.w1, self.b1, self.w2, self.b2]
        self.velocity = [np.zeros_like(p) for p in self.params]

    def step(self, x, y, lr, momentum=0.9):
        """One SGD step on a batch; returns (loss, accuracy)."""
        h_pre = x @ self.w1 + self.b1
        h = np.maximum(h_pre, 0.0)
        logits = h @ self.w2 + self.b2
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        n = x.shape[0]
        loss = float(-np.log(p[np.arange(n), y] + 1e-9).mean())
        acc = float((p.argmax(axis=1) == y).mean())
        g_logits = p
        g_logits[np.arange(n), y] -= 1.0
        g_logits /= n
        g_w2 = h.T @ g_logits
        g_b2 = g_logits.sum(axis=0)
        g_h = g_logits @ self.w2.T
        g_h[h_pre <= 0] = 0.0
        g_w1 = x.T @ g_h
        g_b1 = g_h.sum(axis=0)
        for param, vel, grad in zip(self.params, self.velocity, (g_w1, g_b1, g_w2, g_b2)):
            vel *= momentum
            vel -= lr * grad
            param += vel
        return loss, acc


class SyntheticLoader:
    """Batches labelled by a fixed random teacher; a slow "shard load" every ``stall_every`` batches."""

    def __init__(self, rng, args, tmpdir):
        self.rng = rng
        self.args = args
        self.tmpdir = tmpdir
        self.teacher = rng.standard_normal((args.features, args.classes)).astype(np.float32)
        self.shard = None  # the decoded shard, held in memory until the next stall
        self.stalls = 0

    def stall(self):
        a = self.args
        self.shard = None  # free the previous shard (RSS steps down)
        time.sleep(a.stall_seconds)  # waiting on slow storage / the network
        n = int(a.shard_mb * 1e6) // 4
        data = self.rng.standard_normal(n, dtype=np.float32)
        path = os.path.join(self.tmpdir, f"shard-{self.stalls}.bin")
        with open(path, "wb") as f:  # "download" the shard: a disk write burst
            f.write(data.tobytes())
            f.flush()
            os.fsync(f.fileno())
        del data
        with open(path, "rb") as f:  # "decode" it: read back and keep it in memory (RSS steps up)
            self.shard = np.frombuffer(f.read(), dtype=np.float32).copy()
        os.unlink(path)
        self.stalls += 1

    def batch(self, step):
        a = self.args
        if a.stall_every and step % a.stall_every == 0:
            self.stall()
        x = self.rng.standard_normal((a.batch_size, a.features), dtype=np.float32)
        y = (x @ self.teacher).argmax(axis=1)
        return x, y


def main(argv=None) -> int:
    args = parse_args(argv)
    rng = np.random.default_rng(args.seed)
    model = MLP(rng, args.features, args.hidden, args.classes)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sysprof-example-", dir=args.tmpdir) as tmpdir:
        loader = SyntheticLoader(rng, args, tmpdir)
        loss = acc = float("nan")
        for step in range(args.steps):
            with mark("dataloader"):
                x, y = loader.batch(step)
            with mark("step"):
                loss, acc = model.step(x, y, args.lr)
            if args.log_every and (step + 1) % args.log_every == 0:
                print(f"step {step + 1:5d}/{args.steps}  loss {loss:.4f}  acc {acc:.3f}  "
                      f"{time.perf_counter() - t0:6.2f} s", flush=True)
    print(f"done: {args.steps} steps, {loader.stalls} stalls, final loss {loss:.4f}, acc {acc:.3f}, "
          f"{time.perf_counter() - t0:.2f} s", flush=True)
    return 0 if np.isfinite(loss) else 1


if __name__ == "__main__":
    sys.exit(main())
