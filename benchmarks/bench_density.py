"""Trace density (issue 12): bytes per sample of every output path, and samples per deadline in the profiler's trace.

Every path samples the host set (cpu, per-CPU, memory, disk, net, load) at ``interval`` (1 ms) for ``seconds``,
``trials`` times, on whatever the machine is doing (the goal's figure wants an idle one):

* ``record``: ``sysprof record`` (a subprocess; changes only), the trace's bytes / samples written;
* ``profile()``: :func:`sysprof.profile` (always ACTIVE: one cycle file), the files' bytes / rows recorded;
* ``Profiler, cyclic``: :class:`sysprof.Profiler` with a cyclic schedule (``SystemProfiler`` -> ``JSONTraceHandler``,
  one file per cycle, each standing alone);
* ``Profiler, cyclic, every row``: the same with ``JSONTraceHandler(changes_only=False)``, the layout before issue
  12; its ``cpu`` events (one per sample) give the samples per deadline of each recording window (from the
  window's first ``step`` marker to its last);
* ``Composer trainer``: Composer's ``Trainer`` + ``Profiler`` + ``JSONTraceHandler`` with ``sysprof.SystemProfiler``
  (only where ``composer`` imports: ``.venv/bin/python tests/recipe_venv.py composer benchmarks/bench_density.py``
  runs it in the tests' Composer venv with this sysprof), changes only (the default) and every row
  (``SystemProfiler(changes_only=False)``), whose windows give the density inside the real trainer (the old
  ``composer_density_bench.py``).

Bytes per sample are whole files (heads, metadata and units included) less the training loop's own markers (its
``step`` spans, Composer's ``event/*``: the user's events, one pair per batch however fast sysprof samples) over
samples; ``with markers`` keeps them; ``counter B/sample`` counts the counter events' text alone. Goal: <= 20 bytes per sample for the host set at 1 ms on an idle machine, every
changes-only path; samples per deadline >= 95 % in every window on a free core.

    python benchmarks/bench_density.py [--quick] [--json PATH]
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from bench_busy import machine_cpu_seconds  # noqa: E402
from bench_util import dist, fmt, table  # noqa: E402

HOST_SET = dict(sys_prof_cpu=True, sys_prof_per_cpu=True, sys_prof_memory=True, sys_prof_disk=True,
                sys_prof_net=True, sys_prof_load=True)
HOST_FLAGS = ["--cpu", "--per-cpu", "--memory", "--disk", "--net", "--load"]
BATCH_S = 0.02  # one "batch" of the profiler loops (sleeping: an idle machine)
CYCLE_ACTIVE_BATCHES = 100  # the cyclic paths' active batches per cycle: windows of ~2 s
GOAL_BYTES = 20.0


def _event_bytes(paths) -> Dict[str, int]:
    """The files' event text (each file read once), in bytes: ``counter_bytes`` (every counter event),
    ``marker_bytes`` (the training loop's own spans and instants: ``step`` here, Composer's ``event/*`` in its
    trainer, one pair per batch or event whatever the sampling; sysprof's own instants count as the trace's) and
    ``fixed_bytes`` (what each file pays whatever its length: its metadata events and the counter events of its
    first and last timestamps, as a file starts with every value and ends repeating the tracks its last row did
    not write)."""
    from sysprof.trace.chrome import encode_event, read_trace

    out = {"counter_bytes": 0, "marker_bytes": 0, "fixed_bytes": 0}
    for p in paths:
        events = read_trace(p)
        ts = [e["ts"] for e in events if e.get("ph") == "C"]
        ends = (min(ts), max(ts)) if ts else ()
        for e in events:
            ph, n = e.get("ph"), len(encode_event(e)) + 2
            if ph == "C":
                out["counter_bytes"] += n
            elif ph in ("B", "E", "X", "i", "I") and not str(e.get("name", "")).startswith("sysprof"):
                out["marker_bytes"] += n
            if ph == "M" or (ph == "C" and e["ts"] in ends):
                out["fixed_bytes"] += n
    return out


def _record_trial(interval: float, seconds: float, tmp: str) -> Dict[str, Any]:
    out = os.path.join(tmp, "record.json")
    cmd = [sys.executable, "-m", "sysprof", "record", "-q", "-f", "-i", f"{interval * 1e3:g}ms", "-d",
           f"{seconds:g}s", "-o", out] + HOST_FLAGS
    subprocess.run(cmd, check=True, cwd="/", timeout=seconds + 120)
    from sysprof.trace.chrome import read_trace

    stop = [e for e in read_trace(out) if e.get("name") == "sysprof stop"]
    samples = int(stop[0]["args"]["samples_written"]) if stop else 0
    return {"bytes": os.path.getsize(out), "samples": samples, "counter_bytes": _event_bytes([out])["counter_bytes"],
            "files": 1}


def _profile_trial(sysprof, interval: float, seconds: float, tmp: str, cyclic: bool, changes_only: bool):
    from sysprof.profiler.json_trace_handler import JSONTraceHandler
    from sysprof.profiler.schedule import cyclic_schedule

    folder = tempfile.mkdtemp(dir=tmp)
    kw: Dict[str, Any] = dict(HOST_SET, sys_prof_stats_thread_interval_seconds=interval)
    if cyclic or not changes_only:
        kw["trace_handlers"] = [JSONTraceHandler(folder=folder, remote_file_name=None, merged_trace_filename=None,
                                                 merged_trace_remote_file_name=None, changes_only=changes_only)]
    if cyclic:
        # windows of ~2 s (100 batches of 20 ms), as a profiling window of a training run: each cycle file
        # stands alone, so each pays a fixed cost (its first row, its closing row, its metadata: ``fixed_bytes``)
        kw["schedule"] = cyclic_schedule(wait=1, warmup=1, active=CYCLE_ACTIVE_BATCHES, repeat=0)
    with sysprof.profile(folder, **kw) as prof:
        sysp = prof.system_profiler
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            with prof.marker("step"):
                time.sleep(BATCH_S)
            prof.step()
        stats = dict(sysp.stats)
    paths = [os.path.join(folder, n) for n in sorted(os.listdir(folder)) if n.startswith("ep")]
    res = {"bytes": sum(os.path.getsize(p) for p in paths), "samples": int(stats["rows_recorded"]),
           "files": len(paths), **_event_bytes(paths)}
    if not changes_only:
        res["density_percent"] = _window_density(paths, interval)
    return res


def _window_density(paths, interval: float) -> List[float]:
    """Per cycle file: 100 x cpu events / deadlines between its first and last ``step`` marker (every-row traces)."""
    from sysprof.trace.chrome import read_trace

    out = []
    for p in paths:
        events = read_trace(p)
        steps = sorted(e["ts"] for e in events if e.get("name") == "step")
        if len(steps) < 2:
            continue
        lo, hi = steps[0], steps[-1]
        got = sum(lo <= e["ts"] <= hi for e in events if e.get("name") == "cpu" and e.get("ph") == "C")
        out.append(100.0 * got / ((hi - lo) / 1e6 / interval))
    return out


def _composer_trial(interval: float, tmp: str, changes_only: bool) -> Dict[str, Any]:
    """Composer's Trainer, Profiler and JSONTraceHandler with sysprof.SystemProfiler: 2 epochs of a tiny model on the
    CPU, 4 recording windows; density from Composer's every-row trace (windows from the schedule's actions)."""
    import torch
    from composer import Callback, Trainer
    from composer.models import ComposerClassifier
    from composer.profiler import JSONTraceHandler, Profiler, cyclic_schedule
    from torch.utils.data import DataLoader, TensorDataset

    from sysprof.profiler.system_profiler import SystemProfiler

    class Windows(Callback):
        def __init__(self):
            self.actions = []

        def run_event(self, event, state, logger):
            if state.profiler is not None:
                self.actions.append((time.time_ns(), state.profiler.schedule(state).value))

    folder = tempfile.mkdtemp(dir=tmp)
    torch.manual_seed(0)
    x, y = torch.randn(256, 16), torch.randint(0, 4, (256,))
    model = ComposerClassifier(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)),
                               num_classes=4)
    sysp = SystemProfiler(profile_cpu=True, profile_memory=True, profile_disk=True, profile_net=True,
                          profile_load=True, per_cpu=True, stats_thread_interval_seconds=interval,
                          changes_only=changes_only)
    windows = Windows()
    profiler = Profiler(schedule=cyclic_schedule(skip_first=1, wait=1, warmup=1, active=3, repeat=2),
                        trace_handlers=[JSONTraceHandler(folder=folder, remote_file_name=None,
                                                         merged_trace_remote_file_name=None, overwrite=True)],
                        sys_prof_cpu=False, torch_prof_memory_filename=None, torch_prof_profile_memory=False,
                        torch_prof_with_flops=False, torch_prof_remote_file_name=None,
                        torch_prof_memory_remote_file_name=None)
    trainer = Trainer(model=model, train_dataloader=DataLoader(TensorDataset(x, y), batch_size=16),
                      max_duration="2ep", device="cpu", callbacks=[sysp, windows], profiler=profiler,
                      progress_bar=False, log_to_console=False, loggers=[])
    trainer.fit()
    stats = dict(sysp.stats)
    trainer.close()
    paths = [os.path.join(folder, n) for n in sorted(os.listdir(folder)) if n.startswith("ep")]
    with open(os.path.join(folder, "merged_trace.json")) as f:
        cpu = sorted(e["ts"] for e in json.load(f) if e.get("ph") == "C" and e["name"] == "cpu")
    spans, acts = [], windows.actions
    for (t, a), (t_next, _) in zip(acts, acts[1:] + [(acts[-1][0], None)]):
        if a in ("warmup", "active", "active_and_save"):
            if spans and spans[-1][1] == t // 1000:
                spans[-1][1] = t_next // 1000
            else:
                spans.append([t // 1000, t_next // 1000])
    density = [100.0 * sum(lo <= t < hi for t in cpu) / ((hi - lo) / 1e6 / interval) for lo, hi in spans if hi > lo]
    return {"bytes": sum(os.path.getsize(p) for p in paths), "samples": int(stats["rows_recorded"]),
            "files": len(paths), **{k: v for k, v in _event_bytes(paths).items() if k != "fixed_bytes"},
            "density_percent": [] if changes_only else density}


def _has_composer() -> bool:
    try:
        import composer  # noqa: F401
    except Exception:  # noqa: BLE001 - any failure: not available
        return False
    return True


def bench_density(cfg, sysprof) -> Dict[str, Any]:
    trials, seconds = cfg["density"]
    interval = 1e-3
    paths = {"record": lambda tmp: _record_trial(interval, seconds, tmp),
             "profile()": lambda tmp: _profile_trial(sysprof, interval, seconds, tmp, False, True),
             "Profiler, cyclic": lambda tmp: _profile_trial(sysprof, interval, seconds, tmp, True, True),
             "Profiler, cyclic, every row": lambda tmp: _profile_trial(sysprof, interval, seconds, tmp, True, False)}
    if _has_composer():
        paths["Composer trainer"] = lambda tmp: _composer_trial(interval, tmp, True)
        paths["Composer trainer, every row"] = lambda tmp: _composer_trial(interval, tmp, False)
    runs: Dict[str, List[Dict[str, Any]]] = {name: [] for name in paths}
    busy0, t0 = machine_cpu_seconds(), time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sysprof-density-") as tmp:
        for _ in range(trials):
            for name, run in paths.items():  # interleaved: the machine's state drifts alike for every path
                runs[name].append(run(tmp))
    busy1, t1 = machine_cpu_seconds(), time.monotonic()
    res: Dict[str, Any] = {"interval_s": interval, "trial_seconds": seconds, "trials": trials, "paths": {},
                           "composer": "Composer trainer" in paths, "cpus": os.cpu_count(),
                           "loadavg_after": os.getloadavg()[0],
                           "machine_busy_cores": None if busy0 is None or busy1 is None else (busy1 - busy0) / (t1 - t0)}
    for name, rs in runs.items():
        entry = {"bytes_per_sample": dist([r["bytes"] / r["samples"] for r in rs if r["samples"]], "B"),
                 "sample_bytes_per_sample": dist([(r["bytes"] - r.get("marker_bytes", 0)) / r["samples"]
                                                  for r in rs if r["samples"]], "B"),
                 "counter_bytes_per_sample": dist([r["counter_bytes"] / r["samples"] for r in rs if r["samples"]],
                                                  "B"),
                 "samples": [r["samples"] for r in rs], "files": [r["files"] for r in rs],
                 "fixed_bytes_per_file": dist([r["fixed_bytes"] / r["files"] for r in rs
                                               if r.get("fixed_bytes") is not None and r["files"]], "B"),
                 "bytes_per_second": dist([r["bytes"] / seconds for r in rs], "B/s")}
        dens = [d for r in rs for d in r.get("density_percent", [])]
        if dens:
            entry["density_percent"] = dist(dens, "%")
        res["paths"][name] = entry
    compact = [e["sample_bytes_per_sample"]["median"] for n, e in res["paths"].items() if "every row" not in n]
    res["goal_met"] = all(m is not None and m <= GOAL_BYTES for m in compact)
    return res


def print_density(res) -> str:
    rows = []
    for name, e in res["paths"].items():
        b, c, d = e["sample_bytes_per_sample"], e["counter_bytes_per_sample"], e.get("density_percent")
        rows.append([name, b["n"], fmt(b["median"]), f"{fmt(b['p25'])}-{fmt(b['p75'])}",
                     fmt(e["bytes_per_sample"]["median"]), fmt(c["median"]),
                     "-" if not e["fixed_bytes_per_file"]["n"] else
                     f"{fmt(e['fixed_bytes_per_file']['median'] / 1e3)} x {sum(e['files']) / len(e['files']):g}",
                     fmt(e["bytes_per_second"]["median"] / 1e3), f"{sum(e['samples']):,}",
                     "-" if not d else f"{fmt(d['median'])} (min {fmt(d['min'])}, n={d['n']})"])
    head = (f"## density\n\nhost set at {res['interval_s'] * 1e3:g} ms, {res['trials']} trials of {res['trial_seconds']:g} s "
            f"per path (interleaved); B/sample = whole files less the loop's own markers (a `step` pair per 20 ms "
            "batch: the user's events, not samples), over samples; with markers: whole files"
            + ("" if res["composer"] else "; Composer trainer: not run (composer not importable)")
            + (f"; the machine kept {res['machine_busy_cores']:.2f} of {res['cpus']} cores busy meanwhile (an idle "
               "machine is the goal's condition)" if res.get("machine_busy_cores") is not None else "") + "\n\n")
    verdict = (f"\n\ngoal <= {GOAL_BYTES:g} B/sample on every changes-only path: "
               f"{'met' if res['goal_met'] else 'MISSED'}\n")
    return head + table(["path", "n", "B/sample (median)", "IQR", "with markers", "counter B/sample",
                         "fixed kB per file x files", "kB/s",
                         "samples",
                         "samples per deadline %"], rows) + verdict


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 trials of 2 s (default 3 of 8 s)")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    import sysprof as _sysprof

    r = bench_density({"density": (2, 2.0) if a.quick else (3, 8.0)}, _sysprof)
    print(print_density(r))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)
