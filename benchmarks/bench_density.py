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

Formats (issue 28), :func:`bench_formats`: ``sysprof record`` at 1 ms, the host set and ``--all`` (following a
command: ``sleep`` idle, the load busy), written as ``.json``, ``.json.gz`` and ``.pftrace``, on the idle machine
and beside a busy load (a spinning process per core, a disk writer with an fsync every 8 MiB, TCP traffic over
the loopback, which the default sets leave out: the ``+lo`` sets record it too, ``--devices 'net/*'``); bytes per
sample (file / samples written) and the recorder's drain thread's CPU per second (its main thread's schedstat over
the recording's steady part). :func:`bench_replay`: the drain thread's work alone, the same rows (sampled beside
the busy load) written by each format, gzip level and build, timed as process time. With ``--before PYTHON`` (an
interpreter with the baseline build installed, e.g. main's venv) every recording and replay is made by both
builds, interleaved. Goal: the default output at 1 ms on a busy machine <= 30 B/sample for the host set, <= 150
for ``--all``.

    python benchmarks/bench_density.py [--quick] [--json PATH] [--formats-only] [--before PYTHON]
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

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
#: the busy-machine goal of the default output (issue 28): bytes per sample, host set and --all
GOAL_BUSY = {"host": 30.0, "--all": 150.0}
FORMATS = (".json", ".json.gz", ".pftrace")
LOADS = ("idle", "busy")
#: record's flags per set; "+lo": the loopback recorded too (`lo` is off by default), where the busy load's
#: traffic shows (recorded on the busy machine only)
FORMAT_SETS = {"host": HOST_FLAGS, "--all": ["--all"], "host+lo": HOST_FLAGS + ["--devices", "net/*"],
               "--all+lo": ["--all", "--devices", "net/*"]}


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


# ------------------------------------------------------------------------------------------------
# formats on an idle and a busy machine (issue 28)
# ------------------------------------------------------------------------------------------------

def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(100000):
            pass


def _write_disk(seconds: float, folder: str) -> None:
    """1 MiB writes, an fsync every 8 MiB, the file cut back to 0 every 256 MiB."""
    block, end = os.urandom(1 << 20), time.monotonic() + seconds
    path = os.path.join(folder, f"load-{os.getpid()}.bin")
    with open(path, "wb") as f:
        n = 0
        while time.monotonic() < end:
            f.write(block)
            n += 1
            if n % 8 == 0:
                f.flush()
                os.fsync(f.fileno())
            if n % 256 == 0:
                f.seek(0)
                f.truncate()
    os.remove(path)


def _net(seconds: float) -> None:
    """TCP over the loopback: 64 KiB sends, received by a thread, for ``seconds``."""
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    out = socket.create_connection(srv.getsockname())
    inp, _ = srv.accept()

    def drain():
        while inp.recv(1 << 16):
            pass

    t = threading.Thread(target=drain, daemon=True)
    t.start()
    data, end = b"x" * (1 << 16), time.monotonic() + seconds
    while time.monotonic() < end:
        out.sendall(data)
        time.sleep(0.0005)  # ~100 MB/s: traffic, not a second CPU hog
    out.close()
    t.join(5)


def busy_load(seconds: float, folder: str) -> None:
    """The busy machine: a spinning process per core, a disk writer and loopback TCP traffic, for ``seconds``
    (this process waits for them: a command ``record`` can follow)."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_spin, args=(seconds,)) for _ in range(os.cpu_count() or 1)]
    procs += [ctx.Process(target=_write_disk, args=(seconds, folder)), ctx.Process(target=_net, args=(seconds,))]
    for p in procs:
        p.start()
    try:
        for p in procs:
            p.join(seconds + 30)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()


def _load_command(seconds: float, folder: str) -> List[str]:
    return [sys.executable, os.path.abspath(__file__), "--load", f"{seconds:g}", folder]


def _main_thread_cpu_ns(pid: int):
    """ns on a CPU of process ``pid``'s main thread (the recorder's drain loop), or None."""
    from bench_busy import read_schedstat

    got = read_schedstat(f"/proc/{pid}/task/{pid}/schedstat")
    return None if got is None else got[0]


def _stop_args(path: str) -> Dict[str, Any]:
    from sysprof.trace.load import load_events

    for e in load_events(path):
        if e.get("name") == "sysprof stop":
            return e.get("args") or {}
    return {}


def _has_perfetto() -> bool:
    try:
        from sysprof.trace.perfetto import protos

        protos()
    except ImportError:
        return False
    return True


def _env(build: str) -> Dict[str, str]:
    """The environment of a build's processes: the baseline's interpreter runs its own sysprof (no PYTHONPATH
    pointing at this checkout)."""
    env = dict(os.environ)
    if build == "before":
        env.pop("PYTHONPATH", None)
    return env


def _format_trial(python: str, fmt_: str, set_: str, load: str, seconds: float, tmp: str,
                  env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """One recording: bytes per sample and the drain thread's CPU per second (from 1 s in to the last reading)."""
    out = os.path.join(tmp, f"trace{fmt_}")
    if os.path.exists(out):
        os.remove(out)
    cmd = [python, "-m", "sysprof", "record", "-q", "-i", "1ms", "-o", out] + FORMAT_SETS[set_]
    background = None
    if set_.startswith("--all"):  # a followed command: its process tree is recorded
        cmd += ["--"] + (_load_command(seconds, tmp) if load == "busy" else ["sleep", f"{seconds:g}"])
    else:
        cmd += ["-d", f"{seconds:g}s"]
        if load == "busy":
            background = subprocess.Popen(_load_command(seconds + 3, tmp), stdin=subprocess.DEVNULL)
            time.sleep(0.5)  # the load running before the recording starts
    try:
        proc = subprocess.Popen(cmd, cwd="/", stdin=subprocess.DEVNULL, env=env)
        first = last = None
        start = time.monotonic()
        while proc.poll() is None:
            time.sleep(0.1)
            ns = _main_thread_cpu_ns(proc.pid)
            if ns is None or time.monotonic() - start < 1.0:  # start-up (imports, the head) apart
                continue
            reading = (time.monotonic(), ns)
            first, last = first or reading, reading
        if proc.wait(timeout=seconds + 120) != 0:
            raise RuntimeError(f"record failed: {' '.join(cmd)}")
    finally:
        if background is not None:
            background.kill()
            background.wait()
    stop = _stop_args(out)
    samples = int(stop.get("samples_written") or 0)
    cpu = None if first is None or last is None or last[0] <= first[0] else (last[1] - first[1]) / 1e9 / (
        last[0] - first[0])
    return {"bytes": os.path.getsize(out), "samples": samples, "drain_cpu": cpu}


def bench_formats(cfg, before: Optional[str] = None) -> Dict[str, Any]:
    """Bytes per sample and the drain thread's CPU of every format, set and load (see the module docstring);
    ``cfg["formats"]``: ``(trials, seconds[, loads, sets, formats])``, else ``cfg["density"]``'s trials and
    seconds for all of them."""
    spec = cfg["formats"] if "formats" in cfg else cfg["density"]
    trials, seconds = spec[0], spec[1]
    loads = spec[2] if len(spec) > 2 else LOADS
    sets = spec[3] if len(spec) > 3 else tuple(FORMAT_SETS)
    if len(spec) <= 2:
        loads_of = {s: (("busy",) if s.endswith("+lo") else loads) for s in sets}  # an idle loopback: nothing new
    else:
        loads_of = {s: loads for s in sets}
    formats = [f for f in (spec[4] if len(spec) > 4 else FORMATS) if f != ".pftrace" or _has_perfetto()]
    builds = {"after": sys.executable}
    if before:
        builds = {"before": before, "after": sys.executable}
    runs: Dict[tuple, List[Dict[str, Any]]] = {}
    busy0, t0 = machine_cpu_seconds(), time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sysprof-formats-") as tmp:
        for trial in range(trials):
            for load in loads:
                for set_ in [s for s in sets if load in loads_of[s]]:
                    for fmt_ in formats:
                        order = list(builds.items())
                        if trial % 2:
                            order.reverse()  # alternated: neither build always runs first
                        for build, python in order:
                            runs.setdefault((build, load, set_, fmt_), []).append(
                                _format_trial(python, fmt_, set_, load, seconds, tmp, _env(build)))
    busy1, t1 = machine_cpu_seconds(), time.monotonic()
    cells = []
    for (build, load, set_, fmt_), rs in runs.items():
        cells.append({"build": build, "load": load, "set": set_, "format": fmt_,
                      "bytes_per_sample": dist([r["bytes"] / r["samples"] for r in rs if r["samples"]], "B"),
                      "samples": [r["samples"] for r in rs],
                      "drain_cpu_percent": dist([100 * r["drain_cpu"] for r in rs if r["drain_cpu"] is not None],
                                                "%")})
    res = {"trials": trials, "trial_seconds": seconds, "builds": builds, "cells": cells, "cpus": os.cpu_count(),
           "machine_busy_cores": None if busy0 is None or busy1 is None else (busy1 - busy0) / (t1 - t0)}
    default = [c for c in cells if c["build"] == "after" and c["load"] == "busy" and c["format"] == ".json.gz"
               and c["set"] in GOAL_BUSY]
    res["goal_met"] = bool(default) and all(c["bytes_per_sample"]["median"] is not None and
                                            c["bytes_per_sample"]["median"] <= GOAL_BUSY[c["set"]] for c in default)
    return res


def print_formats(res) -> str:
    head = (f"## formats: `record` at 1 ms, idle and busy\n\n{res['trials']} recordings of {res['trial_seconds']:g} s "
            "per cell (interleaved" + (", before and after alternated" if "before" in res["builds"] else "") + "); "
            "B/sample = file / samples written; drain CPU = the recorder's main thread (drain, render, encode, "
            "compress, write), % of a core, from 1 s in"
            + (f"; the machine kept {res['machine_busy_cores']:.2f} of {res['cpus']} cores busy overall"
               if res.get("machine_busy_cores") is not None else "") + "\n\n")
    rows = []
    order = list(FORMAT_SETS)
    for c in sorted(res["cells"], key=lambda c: (c["load"], order.index(c["set"]), FORMATS.index(c["format"]),
                                                  c["build"] != "before")):
        b, d = c["bytes_per_sample"], c["drain_cpu_percent"]
        rows.append([c["load"], c["set"], c["format"], c["build"], fmt(b["median"]),
                     f"{fmt(b['min'])}-{fmt(b['max'])}", fmt(d["median"]), f"{fmt(d['min'])}-{fmt(d['max'])}",
                     f"{sum(c['samples']):,}"])
    goals = ", ".join(f"{k} <= {v:g}" for k, v in GOAL_BUSY.items())
    verdict_ = (f"\n\ngoal: the default output (.json.gz) at 1 ms, busy: {goals} B/sample: "
                f"{'met' if res['goal_met'] else 'MISSED'}\n")
    return head + table(["load", "set", "format", "build", "B/sample (median)", "range", "drain CPU % (median)",
                         "range", "samples"], rows) + verdict_


# ------------------------------------------------------------------------------------------------
# the drain thread's work, replayed: the same sampled rows written by each format and build
# ------------------------------------------------------------------------------------------------

#: the sets captured for the replay: Sampler keywords (the busy load's loopback traffic recorded)
CAPTURE_SETS = {"host+lo": dict(cpu=True, per_cpu=True, memory=True, disk=True, net=True, load=True,
                                devices=["net/*"]),
                "--all+lo": dict(cpu=True, per_cpu=True, memory=True, disk=True, net=True, load=True,
                                 process_tree=True, pressure=True, cgroup=True, vmstat=True, devices=["net/*"])}
#: the writer variants replayed: (label, suffix, gzip level or None: the build's own)
REPLAY_VARIANTS = (("json", ".json", None), ("gzip 1", ".json.gz", 1), ("gzip 6", ".json.gz", 6),
                   ("gzip 9", ".json.gz", 9), ("pftrace", ".pftrace", None))


def capture(set_: str, seconds: float, path: str, tmp: str) -> int:
    """Sample ``set_`` at 1 ms beside the busy load for ``seconds`` (the followed process: the load) and save the
    rows drained every 0.2 s (as ``record`` drains) to ``path`` (.npz); the rows saved."""
    import numpy as np

    import sysprof

    load = subprocess.Popen(_load_command(seconds + 2, tmp), stdin=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        kw = dict(CAPTURE_SETS[set_], interval=0.001, capacity=8192)
        if kw.get("process_tree"):
            kw["pid"] = load.pid
        sampler = sysprof.Sampler(**{k: v for k, v in kw.items()})
        times, values, ends = [], [], []
        sampler.start()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(0.2)
            b = sampler.drain()
            if len(b):
                times.append(b.timestamps_ns)
                values.append(b.values)
                ends.append(sum(len(t) for t in times))
        sampler.stop()
        channels = list(sampler.channels)
        intervals = dict(getattr(sampler, "intervals", {}) or {})
    finally:
        load.kill()
        load.wait()
    np.savez(path, times=np.concatenate(times), values=np.concatenate(values), ends=np.asarray(ends),
             channels=np.asarray(channels), intervals=json.dumps(intervals))
    return int(ends[-1]) if ends else 0


class _Rows:
    def __init__(self, t, v):
        self.timestamps_ns, self.values = t, v

    def __len__(self):
        return len(self.timestamps_ns)


class _SamplerInfo:
    def __init__(self, interval, intervals):
        self.interval, self.intervals = interval, intervals


def replay(npz: str, variant: str, out: str) -> Dict[str, Any]:
    """Write the rows of ``npz`` as ``record`` does (the samples event and the counter events of each drain, a flush
    every second of rows) with this interpreter's sysprof; the CPU seconds it took and the bytes written."""
    import inspect

    import numpy as np

    from sysprof.trace import tracks
    from sysprof.trace.chrome import ChromeTraceWriter
    from sysprof.trace.schema import samples_event

    label, suffix, level = next(v for v in REPLAY_VARIANTS if v[0] == variant)
    d = np.load(npz)
    channels, ends = [str(c) for c in d["channels"]], [0] + d["ends"].tolist()
    times, values = d["times"], d["values"]
    kw: Dict[str, Any] = {}
    if "decimals" in inspect.signature(tracks.EventBuilder).parameters:  # the build quantises
        from sysprof.cli.record import _decimals

        kw["decimals"] = _decimals(channels, _SamplerInfo(0.001, json.loads(str(d["intervals"]))))
    path = out + suffix
    if os.path.exists(path):
        os.remove(path)
    t0 = time.process_time()
    builder = tracks.EventBuilder(channels, system_pid=1, **kw)
    if suffix == ".pftrace":
        from sysprof.trace.perfetto_write import PerfettoTraceWriter

        writer = PerfettoTraceWriter(path)
        builder.ts = writer.timestamp
        unit = 1
    else:
        gz = {} if level is None else {"compresslevel": level}
        if gz and "compresslevel" not in inspect.signature(ChromeTraceWriter).parameters:
            if level != 9:
                return {"skipped": True}
            gz = {}  # a build without the choice: gzip's own level, 9
        writer = ChromeTraceWriter(path, **gz)
        unit = 1000
    writer.write(builder.units_event())
    last_flush = None
    for lo, hi in zip(ends, ends[1:]):
        batch = _Rows(times[lo:hi], values[lo:hi])
        writer.write(samples_event(batch.timestamps_ns, 1, builder.ts(int(batch.timestamps_ns[0])), unit))
        writer.write_many(builder.events(batch))
        t_last = int(batch.timestamps_ns[-1])
        if last_flush is None or t_last - last_flush >= 1e9:
            writer.flush()
            last_flush = t_last
    writer.write_many(builder.finish())
    writer.close()
    cpu = time.process_time() - t0
    seconds = (int(times[-1]) - int(times[0])) / 1e9
    return {"cpu_s": cpu, "bytes": os.path.getsize(path), "rows": int(ends[-1]), "seconds": seconds}


def bench_replay(cfg, before: Optional[str] = None) -> Dict[str, Any]:
    """The drain thread's work per second of rows, by format, gzip level and build, on the same rows (captured
    beside the busy load): ``cfg["replay"]``: ``(capture seconds, repeats[, sets])``."""
    seconds, repeats = cfg.get("replay", (5.0, 5))[:2]
    sets = cfg["replay"][2] if len(cfg.get("replay", ())) > 2 else tuple(CAPTURE_SETS)
    builds = {"after": sys.executable}
    if before:
        builds = {"before": before, "after": sys.executable}
    res: Dict[str, Any] = {"capture_seconds": seconds, "repeats": repeats, "builds": builds, "sets": {}}
    with tempfile.TemporaryDirectory(prefix="sysprof-replay-") as tmp:
        for set_ in sets:
            npz = os.path.join(tmp, f"rows-{len(res['sets'])}.npz")
            rows = capture(set_, seconds, npz, tmp)
            got: Dict[str, Dict[str, List[Dict[str, Any]]]] = {}
            for r in range(repeats):
                for variant, suffix, _ in REPLAY_VARIANTS:
                    if suffix == ".pftrace" and not _has_perfetto():
                        continue
                    order = list(builds.items())
                    if r % 2:
                        order.reverse()
                    for build, python in order:
                        proc = subprocess.run([python, os.path.abspath(__file__), "--replay", npz, variant,
                                               os.path.join(tmp, "replay")], capture_output=True, text=True,
                                              timeout=600, env=_env(build))
                        if proc.returncode != 0:
                            raise RuntimeError(f"replay failed ({build}, {variant}): {proc.stderr[-500:]}")
                        one = json.loads(proc.stdout.strip().splitlines()[-1])
                        if not one.get("skipped"):
                            got.setdefault(variant, {}).setdefault(build, []).append(one)
            cells = {}
            for variant, by_build in got.items():
                for build, rs in by_build.items():
                    cells[f"{variant}|{build}"] = {
                        "variant": variant, "build": build,
                        "bytes_per_sample": rs[0]["bytes"] / max(1, rs[0]["rows"]),
                        "cpu_percent": dist([100 * x["cpu_s"] / x["seconds"] for x in rs], "%")}
            res["sets"][set_] = {"rows": rows, "cells": cells}
    return res


def print_replay(res) -> str:
    head = (f"## the drain thread's work, replayed\n\nthe rows of {res['capture_seconds']:g} s at 1 ms sampled beside "
            f"the busy load, written as `record` writes them by each build and format, {res['repeats']} times "
            "(alternated); CPU = the writer's process time per second of rows, % of a core\n\n")
    rows = []
    for set_, s in res["sets"].items():
        base = s["cells"].get("json|before") or s["cells"].get("json|after")
        for key, c in s["cells"].items():
            med = c["cpu_percent"]["median"]
            rows.append([set_, c["variant"], c["build"], fmt(c["bytes_per_sample"]), fmt(med),
                         f"{fmt(c['cpu_percent']['min'])}-{fmt(c['cpu_percent']['max'])}",
                         fmt(med / base["cpu_percent"]["median"]) if med and base["cpu_percent"]["median"] else "-"])
    return head + table(["set", "writer", "build", "B/sample", "CPU % (median)", "range",
                         "x the first json row"], rows) + "\n"


if __name__ == "__main__":
    import argparse

    if sys.argv[1:2] == ["--load"]:  # the busy machine's load (a command record follows): --load SECONDS DIR
        busy_load(float(sys.argv[2]), sys.argv[3])
        sys.exit(0)
    if sys.argv[1:2] == ["--replay"]:  # one replay with this interpreter's sysprof: --replay NPZ VARIANT OUT
        print(json.dumps(replay(sys.argv[2], sys.argv[3], sys.argv[4])))
        sys.exit(0)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 trials of 2 s (default 3 of 8 s)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--formats-only", action="store_true", help="only the formats on an idle and a busy machine, "
                    "and the replay")
    ap.add_argument("--before", metavar="PYTHON", help="also record with this interpreter's sysprof (the baseline)")
    a = ap.parse_args()
    import sysprof as _sysprof

    cfg = {"density": (2, 2.0) if a.quick else (3, 8.0)}
    r: Dict[str, Any] = {}
    if not a.formats_only:
        r = bench_density(cfg, _sysprof)
        print(print_density(r))
    r["replay"] = bench_replay({"replay": (2.0, 3) if a.quick else (5.0, 7)}, a.before)
    print(print_replay(r["replay"]))
    r["formats"] = bench_formats(cfg, a.before)
    print(print_formats(r["formats"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)
