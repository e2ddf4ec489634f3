"""Drop-in check inside the real Composer 0.32.1 trainer (slow: builds a venv on first use, ~2 min + ~30 s).

Builds (or reuses) a virtual environment with ``../shared/recipes/composer-venv.sh`` (relative to the repository
root) through tests/recipe_venv.py (``$SYSPROF_COMPOSER_VENV`` or ``<tmpdir>/sysprof-composer-venv-<key>``; safe
for two runs at once), and trains a tiny torch model on the CPU for two epochs in a subprocess with Composer's
``Profiler`` + ``JSONTraceHandler`` and ``sysprof.SystemProfiler`` (plus a short run with ``sysprof.Profiler`` as the
trainer's profiler). The child runs this session's sysprof (``recipe_venv.sysprof_env``): nothing is installed into
the venv. Skipped only when the recipe does not exist.
"""

import json
import pathlib
import subprocess
import textwrap

import pytest

import recipe_venv

RECIPE = recipe_venv.RECIPES["composer"]
INTERVAL = 0.005  # s, sampling interval used in the training run (Composer's handler encodes ~10 us/event)

pytestmark = pytest.mark.composer

TRAIN = textwrap.dedent('''
    import json, sys, time, warnings
    import psutil, torch
    from torch.utils.data import DataLoader, TensorDataset
    import composer
    from composer import Callback, Trainer
    from composer.models import ComposerClassifier
    from composer.profiler import JSONTraceHandler, Profiler, cyclic_schedule
    from composer.profiler.json_trace_merger import merge_traces as composer_merge
    import sysprof
    from sysprof.profiler.system_profiler import SystemProfiler
    from sysprof.profiler import Profiler as SysprofProfiler
    from sysprof.profiler.json_trace_handler import JSONTraceHandler as SysprofJSON, merge_traces as sysprof_merge

    out = sys.argv[1]
    warnings.simplefilter("ignore")
    torch.manual_seed(0)

    class Before(Callback):
        """The time of every event before the SystemProfiler's callback sees it (it comes first)."""
        def __init__(self):
            self.t = None
        def run_event(self, event, state, logger):
            self.t = time.time_ns()

    class Recorder(Callback):
        """(time_ns before the SystemProfiler, time_ns after it, action) at every event, and psutil's used memory at
        every batch end. The SystemProfiler observes the action between the two, however long it takes."""
        def __init__(self, before):
            self.before, self.actions, self.used = before, [], []
        def run_event(self, event, state, logger):
            if state.profiler is not None:
                self.actions.append((self.before.t, time.time_ns(), state.profiler.schedule(state).value))
            if event.value == "batch_end":
                self.used.append((time.time_ns(), psutil.virtual_memory().used))

    class Busy(Callback):
        """~20 ms of pure-Python work per batch: the main thread holds the GIL most of the time."""
        def after_train_batch(self, state, logger):
            end = time.perf_counter() + 0.02
            while time.perf_counter() < end:
                sum(range(200))

    def loader():
        x, y = torch.randn(256, 16), torch.randint(0, 4, (256,))
        return DataLoader(TensorDataset(x, y), batch_size=16)

    def model():
        return ComposerClassifier(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                                      torch.nn.Linear(32, 4)), num_classes=4)

    no_torch_prof = dict(torch_prof_memory_filename=None, torch_prof_profile_memory=False,
                         torch_prof_with_flops=False, torch_prof_remote_file_name=None,
                         torch_prof_memory_remote_file_name=None)
    sysp = SystemProfiler(profile_cpu=True, profile_memory=True, profile_disk=True, profile_net=True,
                          stats_thread_interval_seconds=%(interval)r, devices=["*"],  # lo too
                          changes_only=False)  # every sample an event: the density test counts them
    before = Before()
    recorder = Recorder(before)
    profiler = Profiler(schedule=cyclic_schedule(skip_first=1, wait=1, warmup=1, active=3, repeat=2),
                        trace_handlers=[JSONTraceHandler(folder=out + "/composer", remote_file_name=None,
                                                         merged_trace_remote_file_name=None, overwrite=True)],
                        sys_prof_cpu=False, **no_torch_prof)
    trainer = Trainer(model=model(), train_dataloader=loader(), max_duration="2ep", device="cpu",
                      callbacks=[before, sysp, recorder, Busy()], profiler=profiler, progress_bar=False,
                      log_to_console=False, loggers=[])
    trainer.fit()
    sampler = sysp.sampler
    backend = sampler.backend if sampler is not None else None
    trainer.close()
    thread = sysp.session._thread if sysp.session is not None else None
    thread_alive = thread is not None and thread.is_alive()
    sysp_stats = sysp.stats
    sampler_stats = dict(sampler.stats) if sampler is not None else None  # stopped by close(): final counts

    # sysprof's own Profiler as the trainer's profiler
    own = SysprofProfiler(schedule=sysprof.profiler.schedule.cyclic_schedule(warmup=1, active=2),
                          trace_handlers=[SysprofJSON(folder=out + "/own", remote_file_name=None,
                                                      merged_trace_remote_file_name=None)],
                          sys_prof_cpu=True, sys_prof_memory=True, sys_prof_stats_thread_interval_seconds=0.005)
    trainer2 = Trainer(model=model(), train_dataloader=loader(), max_duration="1ep", device="cpu",
                       callbacks=[Busy()], profiler=own, progress_bar=False, log_to_console=False, loggers=[])
    trainer2.fit()
    trainer2.close()

    # SystemProfiler(log_summaries=True): summaries at every batch end into Composer's own logger
    from composer.loggers import InMemoryLogger
    memory_logger = InMemoryLogger()
    sysp3 = SystemProfiler(profile_memory=True, log_summaries=True, stats_thread_interval_seconds=0.01)
    prof3 = Profiler(schedule=cyclic_schedule(wait=0, warmup=1, active=20, repeat=1),
                     trace_handlers=[JSONTraceHandler(folder=out + "/summaries", remote_file_name=None,
                                                      merged_trace_remote_file_name=None, overwrite=True)],
                     sys_prof_cpu=False, **no_torch_prof)
    trainer3 = Trainer(model=model(), train_dataloader=loader(), max_duration="1ep", device="cpu",
                       callbacks=[sysp3, Busy()], profiler=prof3, progress_bar=False, log_to_console=False,
                       loggers=[memory_logger])
    trainer3.fit()
    trainer3.close()
    summaries = {k: [float(v) for _, v in values] for k, values in memory_logger.data.items()
                 if k.startswith("sysprof/")}
    losses = len(memory_logger.data.get("loss/train/total", []))

    # cross merges: Composer merges sysprof's files, sysprof merges Composer's
    own_files = [str(p) for _, files in own.trace_handlers[0].saved_traces for p in files]
    composer_files = [str(p) for _, files in profiler.trace_handlers[0].saved_traces for p in files]
    composer_merge(out + "/composer_merged_sysprof.json", *own_files)
    sysprof_merge(out + "/sysprof_merged_composer.json", *composer_files)

    json.dump({"composer": composer.__version__, "actions": recorder.actions, "used": recorder.used,
               "isinstance": isinstance(sysp, composer.core.Callback), "thread_alive": thread_alive,
               "backend": backend,
               "sampler_closed": sysp.sampler is None, "stats": sysp_stats, "sampler_stats": sampler_stats, "composer_files": composer_files, "own_files": own_files,
               "summaries": summaries, "losses": losses},
              open(out + "/result.json", "w"))
''') % {"interval": INTERVAL}


def venv() -> pathlib.Path:
    """The Composer venv (also used by tests/test_lifecycle.py for its torch DataLoader case and by
    tests/test_ranks_torchrun.py); its children take ``recipe_venv.sysprof_env``."""
    if not RECIPE.exists():
        pytest.skip(f"{RECIPE} not found")
    return recipe_venv.build("composer", timeout=1800)


def _windows(actions):
    """Recording windows [start_us, end_us) from the recorder's (before_ns, after_ns, action) observations: from
    before the SystemProfiler saw a recording action to after it saw the next one (it keeps the rows sampled
    between its own two observations, which lie inside)."""
    windows = []
    for (t, _, a), (_, t_next, _) in zip(actions, actions[1:] + [(None, actions[-1][1], None)]):
        recording = a in ("warmup", "active", "active_and_save")
        if recording and windows and windows[-1][1] >= t // 1000:
            windows[-1][1] = -(-t_next // 1000)
        elif recording:
            windows.append([t // 1000, -(-t_next // 1000)])
    return windows


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    python = venv() / "bin" / "python"
    out = tmp_path_factory.mktemp("composer_run")
    script = out / "train.py"
    script.write_text(TRAIN)
    proc = subprocess.run([str(python), str(script), str(out)], capture_output=True, text=True,
                          timeout=900, cwd=out, env=recipe_venv.sysprof_env(out))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-8000:]
    result = json.loads((out / "result.json").read_text())
    return out, result


def test_runs_in_real_composer(run):
    _, result = run
    assert result["composer"] == "0.32.1"
    assert result["isinstance"] is True
    assert result["backend"] == "native"  # the installed extension, not the psutil fallback
    assert result["thread_alive"] is False and result["sampler_closed"] is True
    assert len(result["composer_files"]) == 4  # 2 cycles x 2 epochs


def _counters(out):
    events = json.loads((out / "composer" / "merged_trace.json").read_text())
    return [e for e in events if e.get("ph") == "C"]


def test_names_keys_and_units(run):
    out, result = run
    counters = _counters(out)
    by_name = {}
    for e in counters:
        by_name.setdefault(e["name"], set()).update(e["args"])
    assert by_name["cpu"] == {"cpu_percent"}
    assert by_name["memory/virtual"] == {"used_gb", "available_gb"}
    assert by_name["memory/swap"] == {"used_gb", "free_gb"}
    disks = {n.split("/")[1] for n in by_name if n.startswith("disk/")}
    assert disks
    for dev in disks:
        for field in ("read_count", "write_count", "read_bytes", "write_bytes", "read_time", "write_time",
                      "busy_time"):
            assert by_name[f"disk/{dev}/{field}"] == {field}
    nics = {n.split("/")[1] for n in by_name if n.startswith("network/")}
    assert "lo" in nics
    for nic in nics:
        assert by_name[f"network/{nic}/kb_sent"] == {"kb_sent"}
        assert by_name[f"network/{nic}/kb_recv"] == {"kb_recv"}
    cats = {e["name"].split("/")[0]: e["cat"] for e in counters}
    assert cats == {"cpu": "cpu", "memory": "memory", "disk": "disk", "network": "net"}
    assert all(e["pid"] == 0 and isinstance(e["ts"], int) for e in counters)
    # used_gb vs psutil's used bytes / 1e9, at the nearest sample to each psutil reading inside a window
    virt = sorted((e["ts"], e["args"]["used_gb"]) for e in counters if e["name"] == "memory/virtual")
    checked = 0
    for t_ns, used in result["used"]:
        t_us = t_ns // 1000
        ts, gb = min(virt, key=lambda v: abs(v[0] - t_us))
        if abs(ts - t_us) <= 20_000:
            assert gb == pytest.approx(used / 1e9, rel=0.02)
            checked += 1
    assert checked >= 1  # how many readings have a sample within 20 ms depends on how busy the machine is


def test_samples_inside_windows_and_dense(run):
    """Every deadline inside a recording window is in the trace or counted as missed by the sampler, on any
    machine: a busy one misses deadlines (counted), it does not lose rows. Catches rows lost between the sampler,
    the SystemProfiler and the trace, windows cut short, a sampler that drifts without counting (relative
    deadlines), bursts that make up missed deadlines. How dense a free core keeps the trace (>= 95 % of the
    deadlines) is measured by benchmarks/bench_density.py, not asserted here."""
    out, result = run
    windows = _windows([tuple(a) for a in result["actions"]])
    assert len(windows) == 4
    cpu = sorted(e["ts"] for e in _counters(out) if e["name"] == "cpu")
    st, sst = result["stats"], result["sampler_stats"]
    assert len(cpu) == st["rows_recorded"]  # every sample drained inside a window is in the trace
    assert sst["taken"] == sst["drained"] + sst["dropped"] + sst["buffered"], sst
    assert sst["dropped"] == 0 and sst["buffered"] == 0, sst
    assert st["rows_drained"] == sst["drained"], (st, sst)  # the SystemProfiler saw every row
    for ts in cpu:
        assert any(lo <= ts < hi for lo, hi in windows), ts
    interval_us = INTERVAL * 1e6
    for lo, hi in windows:
        expected = (hi - lo) / interval_us
        inside = [ts for ts in cpu if lo <= ts < hi]
        assert expected > 10 and len(inside) >= 2, (lo, hi, len(inside), expected)
        spans = [b - a for a, b in zip(inside, inside[2:])]  # two rows never share a deadline
        assert not spans or min(spans) > interval_us * (1 - 5e-4) - 1, (lo, hi, min(spans))
    # Every deadline from the first recorded row to the last is a row (recorded, or taken between windows) or a
    # deadline the sampler counted as missed (500 ppm wall-clock slew). Which rows a window keeps follows the
    # SystemProfiler's own observation of the schedule, which the test's recorder sees a little apart.
    span = (cpu[-1] - cpu[0]) / interval_us
    assert sst["taken"] + sst["missed_deadlines"] >= span * (1 - 5e-4) - 2, (span, sst)


def test_sysprof_profiler_in_trainer_and_cross_merges(run):
    out, result = run
    own = [json.loads(pathlib.Path(p).read_text()) for p in result["own_files"]]
    assert own
    names = {e["name"] for trace in own for e in trace}
    assert {"cpu", "memory/virtual", "event/batch"} <= names or {"cpu", "memory/virtual"} <= names
    assert any(e["ph"] == "B" for trace in own for e in trace)
    composer_merged = json.loads((out / "composer_merged_sysprof.json").read_text())
    assert sum(len(t) for t in own) <= len(composer_merged)
    sysprof_merged = json.loads((out / "sysprof_merged_composer.json").read_text())
    n_composer = sum(len(json.loads(pathlib.Path(p).read_text())) for p in result["composer_files"])
    assert len([e for e in sysprof_merged if e.get("args", {}).get("sort_index") != 99999]) == n_composer


def test_summaries_into_composers_logger(run):
    """SystemProfiler(log_summaries=True): the default set's host summaries at every batch end, beside the loss."""
    import math

    _, result = run
    got = result["summaries"]
    assert {"sysprof/cpu_percent_mean", "sysprof/cpu_percent_max", "sysprof/memory_used_bytes_max",
            "sysprof/dataloader_wait_share"} <= set(got)
    assert not any(k.startswith("sysprof/gpu") for k in got)  # no GPU on the CPU run: those are left out
    n = len(got["sysprof/cpu_percent_mean"])
    assert n >= 16 - 1 and result["losses"] >= n  # the batches the profiler recorded (16 a epoch), each beside a loss
    assert all(len(v) == n for v in got.values())
    finite = [(a, b) for a, b in zip(got["sysprof/cpu_percent_mean"], got["sysprof/cpu_percent_max"])
              if math.isfinite(a)]
    assert len(finite) >= n - 2 and all(0 <= a <= b <= 100 for a, b in finite)
    assert all(m > 0 for m in got["sysprof/memory_used_bytes_max"] if math.isfinite(m))
    assert all(0 <= s <= 1 for s in got["sysprof/dataloader_wait_share"])
