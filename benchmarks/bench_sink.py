#!/usr/bin/env python3
"""The trace sink's drain cost (sysprof issue 30 item 1): CPU per sample of
:class:`~sysprof.trace.sink.TraceSink` writing the rows of ``sysprof record`` (changes only, the host set at 1 ms)
into a ``.pftrace`` (and a Chrome ``.json`` without the text fast path, for comparison), this tree against
``--before DIR`` in the same run.

    python benchmarks/bench_sink.py [--before DIR] [--seconds 3] [--repeat 5] [--formats pftrace json]

Rows: ``--seconds`` of this machine's host rows at 1 kHz (bench_frames' recording), recorded once and saved, then
fed by every run in drains of 500 rows (one ``TraceSink.take`` each; a marker span in every drain). Each run is a
fresh process (``python -c``) importing the tree under test; the trees alternate, ``--repeat`` times each; the
figure is the median of the process CPU time (``time.process_time``) of the drains over the samples, and the
file's bytes. ``--before DIR``: a checkout of the baseline (``git worktree add DIR COMMIT``, the built
``_native*.so`` copied in).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
DRAIN = 500

_CHILD = r"""
import json, sys, time
import numpy as np
from sysprof.pipeline.session import Chunk, Start
from sysprof.sampling.rows import Batch
from sysprof.trace import events as ev
from sysprof.trace.perfetto import writer_class_for
from sysprof.trace.sink import TraceSink

rows, out, drain = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = np.load(rows)
ts, values, channels = data["ts"], data["values"], tuple(str(c) for c in data["channels"])
pid = 4242

class _Sampler:
    interval = 1e-3

def head(sink):
    return ev.head({"channels": list(channels)}, pid, int(ts[0]), sink.builder.layout.units,
                   ev.process_name(pid, "sysprof: system"))

writer = writer_class_for(out)(out, overwrite=True)
sink = TraceSink(writer, head, system_pid=pid)
sink.open(Start(_Sampler(), channels, int(ts[0])))
chunks = []
for lo in range(0, len(ts), drain):
    b = Batch(ts[lo:lo + drain], values[lo:lo + drain], channels, 1e-3)
    t = int(b.timestamps_ns[len(b) // 2])
    marks = [ev.span("step", t, t + 100_000, pid, 1, cat="sysprof.mark")]
    chunks.append(Chunk(b, marks, int(b.timestamps_ns[-1]), lo + drain >= len(ts)))
c0 = time.process_time()
for chunk in chunks:
    sink.take(chunk)
cpu = time.process_time() - c0
sink.close({})
import os
print(json.dumps({"cpu_s": cpu, "samples": len(ts), "bytes": os.path.getsize(out)}))
"""


def _rows(path: str, seconds: float) -> None:
    import numpy as np

    import sysprof
    from bench_frames import _record

    batch, _ = _record(sysprof, seconds)
    np.savez(path, ts=batch.timestamps_ns, values=batch.values, channels=np.array(batch.channels))


def _run(tree: str, rows: str, out: str) -> dict:
    env = dict(os.environ, PYTHONPATH=tree)
    res = subprocess.run([sys.executable, "-c", _CHILD, rows, out, str(DRAIN)], env=env, cwd=tree,
                         capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", help="a checkout of the baseline tree")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--formats", nargs="+", default=["pftrace", "json"], choices=["pftrace", "json"])
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    trees = [("after", REPO)] + ([("before", os.path.abspath(args.before))] if args.before else [])
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        rows = os.path.join(tmp, "rows.npz")
        _rows(rows, args.seconds)
        for fmt in args.formats:
            for _ in range(args.repeat):
                for label, tree in trees:
                    r = _run(tree, rows, os.path.join(tmp, f"{label}.{fmt}"))
                    results.setdefault((fmt, label), []).append(r)
    figures = {}
    for (fmt, label), runs in results.items():
        cpu = sorted(r["cpu_s"] / r["samples"] * 1e6 for r in runs)
        figures.setdefault(fmt, {})[label] = {"cpu_us_per_sample": cpu[len(cpu) // 2], "bytes": runs[0]["bytes"],
                                             "samples": runs[0]["samples"], "runs": len(runs)}
    for fmt, by in figures.items():
        line = "  ".join(f"{k}: {v['cpu_us_per_sample']:.1f} us/sample, {v['bytes']} B" for k, v in by.items())
        if "before" in by:
            line += f"  (after/before CPU {by['after']['cpu_us_per_sample'] / by['before']['cpu_us_per_sample']:.2f})"
        print(f"{fmt:8s} {line}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
