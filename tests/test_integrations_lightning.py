"""sysprof.integrations.lightning.SysprofCallback inside the real PyTorch Lightning trainer (the frameworks venv:
tests/integrations_support.py; slow on its first use, which builds it).

A tiny MLP on synthetic tensors trains on the CPU for 2 epochs of 8 batches (a collate that sleeps 5 ms, so the
dataloader phase has time) with two loggers: Lightning's CSVLogger and one that keeps every ``log_metrics``
call. The same child then runs fits that raise (RuntimeError, KeyboardInterrupt) and one whose trace cannot be
written; a second child SIGKILLs itself mid-fit.
"""
import csv
import os
import textwrap

import pytest

from integrations_support import expected_summaries, result, run_child
from sysprof.report import TraceData
from sysprof.trace.chrome import read_trace

pytestmark = pytest.mark.frameworks

TRAIN = textwrap.dedent('''
    import json, os, signal, sys, time, warnings
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    import lightning.pytorch as pl
    from lightning.pytorch.loggers import CSVLogger, Logger
    from sysprof.integrations.lightning import SysprofCallback

    out, mode = sys.argv[1], sys.argv[2]
    warnings.simplefilter("ignore")
    torch.manual_seed(0)

    class Kept(Logger):
        """Keeps every log_metrics call: (step, metrics)."""
        def __init__(self):
            super().__init__()
            self.calls = []
        name, version = "kept", 0
        def log_metrics(self, metrics, step=None):
            self.calls.append((step, {k: float(v) for k, v in metrics.items()}))
        def log_hyperparams(self, *a, **k):
            pass

    class Model(pl.LightningModule):
        def __init__(self, fail_at=None, fail_with=RuntimeError, kill_at=None):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
            self.fail_at, self.fail_with, self.kill_at = fail_at, fail_with, kill_at
        def training_step(self, batch, i):
            if self.global_step == self.fail_at:
                raise self.fail_with("stop here")
            if self.global_step == self.kill_at:
                time.sleep(2.5)  # past the trace's next flush (every second)
                os.kill(os.getpid(), signal.SIGKILL)
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self.net(x), y)
            self.log("loss", loss, on_step=True, on_epoch=False)
            return loss
        def validation_step(self, batch, i):
            x, y = batch
            self.log("val_loss", torch.nn.functional.cross_entropy(self.net(x), y))
        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    def slow_collate(items):
        time.sleep(0.005)
        return torch.utils.data.default_collate(items)

    def loader(n):
        return DataLoader(TensorDataset(torch.randn(n, 16), torch.randint(0, 4, (n,))), batch_size=8,
                          collate_fn=slow_collate)

    def fit(root, model, cb, loggers, epochs=2):
        trainer = pl.Trainer(max_epochs=epochs, accelerator="cpu", devices=1, logger=loggers, log_every_n_steps=3,
                             enable_progress_bar=False, enable_checkpointing=False, enable_model_summary=False,
                             num_sanity_val_steps=1, default_root_dir=root, callbacks=[cb])
        error = None
        try:
            trainer.fit(model, loader(64), loader(16))
        except BaseException as e:  # KeyboardInterrupt: Lightning may re-raise or exit
            error = type(e).__name__
        return trainer, error

    res = {}
    if mode == "kill":
        cb = SysprofCallback(interval=0.005)
        fit(out + "/kill", Model(kill_at=5), cb, [CSVLogger(out + "/kill")])
    else:
        kept = Kept()
        cb = SysprofCallback()
        trainer, error = fit(out + "/ok", Model(), cb, [CSVLogger(out + "/ok"), kept])
        res["ok"] = {"trace": str(cb.trace_path), "log_dir": trainer.log_dir, "error": error,
                     "calls": kept.calls, "recording_after": cb.session.recorder is not None,
                     "failures": cb.session.failures}
        for name, exc in (("raise", RuntimeError), ("interrupt", KeyboardInterrupt)):
            cb2 = SysprofCallback(summaries=["cpu/percent:max"])
            _, error = fit(out + "/" + name, Model(fail_at=3, fail_with=exc), cb2, [CSVLogger(out + "/" + name)])
            res[name] = {"trace": str(cb2.trace_path), "error": error, "failures": cb2.session.failures}
        fl = SysprofCallback(flight={"window_s": 5, "min_gap_s": 0})
        _, error = fit(out + "/flight", Model(fail_at=3), fl, [CSVLogger(out + "/flight")])
        res["flight"] = {"folder": str(fl.trace_path), "error": error, "failures": fl.session.failures}
        bad = SysprofCallback(path="/proc/sysprof-cannot-write/t.json")
        trainer, error = fit(out + "/bad", Model(), bad, [CSVLogger(out + "/bad")], epochs=1)
        res["bad"] = {"error": error, "trace": bad.trace_path, "steps": trainer.global_step}
        json.dump(res, open(out + "/result.json", "w"))
''')


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("lightning")
    proc = run_child(TRAIN, out, "ok")
    return out, result(proc, out), proc.stderr


def test_trace_in_log_dir_and_said_once(run):
    out, res, stderr = run
    ok = res["ok"]
    assert ok["error"] is None and ok["failures"] == 0 and not ok["recording_after"]
    assert ok["trace"] == os.path.join(ok["log_dir"], "sysprof-rank0.json")
    assert stderr.count(f"sysprof: recording system metrics every 10 ms to {ok['trace']}") == 1


def test_phases_nest_and_count(run):
    _, res, _ = run
    data = TraceData(read_trace(res["ok"]["trace"]))
    assert data.recorded and not data.truncated and data.stop["reason"] == "end"
    by = {}
    for s in data.spans:
        by.setdefault(s.name, []).append(s)
    # validation: the sanity check + 2 epochs; dataloader: each batch's fetch, none across a validation or after
    # the last batch
    assert {n: len(v) for n, v in by.items()} == \
        {"train_batch": 16, "backward": 16, "optimizer_step": 16, "validation": 3, "dataloader": 16}
    assert all(d.duration_us >= 5000 for d in by["dataloader"])  # the collate's sleep
    batches = by["train_batch"]
    for inner in by["backward"] + by["optimizer_step"]:
        assert any(b.start_us <= inner.start_us and inner.end_us <= b.end_us for b in batches), inner
    for d in by["dataloader"]:  # between batches, never inside one
        assert not any(b.start_us < d.start_us < b.end_us for b in batches)
    assert len({(s.pid, s.tid) for s in data.spans}) == 1
    assert data.units["cpu/percent"] == "%" and data.units["memory/used_bytes"] == "B"
    assert data.meta["framework"] == "lightning" and data.meta["interval_s"] == 0.01


def test_summaries_at_lightnings_logging_steps(run):
    out, res, _ = run
    calls = res["ok"]["calls"]
    data = TraceData(read_trace(res["ok"]["trace"]))
    names = expected_summaries(data.meta["channels"])
    assert {"sysprof/cpu_percent_mean", "sysprof/cpu_percent_max", "sysprof/memory_used_bytes_max",
            "sysprof/dataloader_wait_share"} <= names
    loss_steps = [step for step, m in calls if "loss" in m]
    with_sysprof = [(step, m) for step, m in calls if any(k.startswith("sysprof/") for k in m)]
    assert [step for step, _ in with_sysprof] == loss_steps and len(loss_steps) == 5  # 16 steps, every 3rd
    for _, m in with_sysprof:
        assert {k for k in m if k.startswith("sysprof/")} == names
        assert 0 <= m["sysprof/cpu_percent_mean"] <= m["sysprof/cpu_percent_max"] <= 100
        assert m["sysprof/memory_used_bytes_max"] > 0
        assert 0 < m["sysprof/dataloader_wait_share"] < 1
    with open(os.path.join(res["ok"]["log_dir"], "metrics.csv")) as f:  # and in Lightning's own CSV logger
        header = next(csv.reader(f))
    assert names <= set(header)


def test_exceptions_stop_the_recording(run):
    _, res, _ = run
    for name, exc in (("raise", "RuntimeError"), ("interrupt", "KeyboardInterrupt")):
        r = res[name]
        assert r["failures"] == 0
        data = TraceData(read_trace(r["trace"]))
        assert not data.truncated and data.stop["reason"] == exc, name
        batches = [s for s in data.spans if s.name == "train_batch"]
        assert len(batches) == 4 and batches[-1].args == {"closed": exc}  # the batch that raised ends there
        assert not any(b.args for b in batches[:3])
    assert res["raise"]["error"] == "RuntimeError"
    assert res["interrupt"]["error"] == "SystemExit"  # Lightning's graceful shutdown exits


def test_unwritable_trace_trains_without_sysprof(run):
    _, res, stderr = run
    assert res["bad"] == {"error": None, "trace": None, "steps": 8}
    assert "sysprof: not recording: " in stderr


def test_killed_run_leaves_a_readable_trace(tmp_path):
    proc = run_child(TRAIN, tmp_path, "kill")
    assert proc.returncode == -9, proc.stderr[-4000:]
    traces = list((tmp_path / "kill").rglob("sysprof-rank0.json"))
    assert len(traces) == 1
    data = TraceData(read_trace(traces[0]))
    assert data.recorded and data.truncated
    assert sum(s.name == "train_batch" for s in data.spans) == 5
    assert data.last_counter_stats["taken"] >= 1 and data.series["cpu/percent"][0].size >= 1  # flushed samples


def test_flight_recorder_dumps_at_on_exception(run):
    _, res, stderr = run
    r = res["flight"]
    assert r["error"] == "RuntimeError" and r["failures"] == 0
    dumps = sorted(os.listdir(r["folder"]))
    assert len(dumps) == 1 and dumps[0].startswith("flight-") and dumps[0].endswith("-exception-rank0.json")
    data = TraceData(read_trace(os.path.join(r["folder"], dumps[0])))
    assert (data.meta["flight"]["trigger"], data.meta["flight"]["reason"]) == ("exception", "RuntimeError: stop here")
    assert len([s for s in data.spans if s.name == "train_batch"]) == 4  # the window holds the whole short fit
    assert f"sysprof: flight dump {os.path.join(r['folder'], dumps[0])}: exception: RuntimeError: stop here; " in stderr
