"""sysprof.integrations.transformers.SysprofCallback inside the real Hugging Face Trainer (the frameworks venv:
tests/integrations_support.py; slow on its first use, which builds it).

A one-layer BERT built from a BertConfig (nothing downloaded; HF_HUB_OFFLINE=1) trains on synthetic token ids on
the CPU for 12 steps, logging every 4, evaluating and saving every 6 (a collate that sleeps 5 ms, so the
dataloader phase has time). A callback listed before sysprof's keeps every ``on_log``'s logs. The same child then
runs a train that a callback interrupts (KeyboardInterrupt: the Trainer has no exception hook) and a second child
SIGKILLs itself mid-train.
"""
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
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainerCallback, TrainingArguments
    from sysprof.integrations.transformers import SysprofCallback

    out, mode = sys.argv[1], sys.argv[2]
    warnings.simplefilter("ignore")
    torch.manual_seed(0)

    class Data(torch.utils.data.Dataset):
        def __init__(self, n):
            g = torch.Generator().manual_seed(n)
            self.ids = torch.randint(1, 100, (n, 16), generator=g)
            self.labels = torch.randint(0, 2, (n,), generator=g)
        def __len__(self):
            return len(self.labels)
        def __getitem__(self, i):
            return {"input_ids": self.ids[i], "attention_mask": torch.ones(16, dtype=torch.long),
                    "labels": self.labels[i]}

    def slow_collate(items):
        time.sleep(0.005)
        return {k: torch.stack([it[k] for it in items]) for k in items[0]}

    class Kept(TrainerCallback):
        def __init__(self, stop_at=None, kill_at=None):
            self.logs, self.stop_at, self.kill_at = [], stop_at, kill_at
        def on_log(self, args, state, control, logs=None, **kw):
            self.logs.append((state.global_step, dict(logs)))
        def on_step_end(self, args, state, control, **kw):
            if state.global_step == self.stop_at:
                raise KeyboardInterrupt
            if state.global_step == self.kill_at:
                time.sleep(2.5)  # past the trace's next flush (every second)
                os.kill(os.getpid(), signal.SIGKILL)

    def train(folder, kept, cb, steps=12):
        config = BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=32, max_position_embeddings=32, num_labels=2)
        args = TrainingArguments(output_dir=folder, max_steps=steps, per_device_train_batch_size=4,
                                 per_device_eval_batch_size=8, logging_steps=4, eval_strategy="steps", eval_steps=6,
                                 save_strategy="steps", save_steps=6, report_to=[], use_cpu=True,
                                 disable_tqdm=True, dataloader_num_workers=0)
        trainer = Trainer(model=BertForSequenceClassification(config), args=args, train_dataset=Data(64),
                          eval_dataset=Data(16), data_collator=slow_collate, callbacks=[kept, cb])
        error = None
        try:
            trainer.train()
        except BaseException as e:
            error = type(e).__name__
        return trainer, error

    res = {}
    if mode == "kill":
        train(out + "/kill", Kept(kill_at=5), SysprofCallback(interval=0.005))
    else:
        kept, cb = Kept(), SysprofCallback()
        trainer, error = train(out + "/ok", kept, cb)
        res["ok"] = {"trace": str(cb.trace_path), "error": error, "logs": kept.logs,
                     "first": type(trainer.callback_handler.callbacks[0]).__name__,
                     "recording_after": cb.session.recorder is not None, "failures": cb.session.failures}
        kept2, cb2 = Kept(stop_at=3), SysprofCallback(summaries=False)
        _, error = train(out + "/interrupt", kept2, cb2)
        closed = cb2.session.recorder.wait_closed(20)  # the recorder's thread saw Trainer.train leave the stack
        res["interrupt"] = {"trace": str(cb2.trace_path), "error": error, "logs": kept2.logs, "closed": closed}
        kept3, cb3 = Kept(stop_at=3), SysprofCallback(summaries=False, flight=5)
        _, error = train(out + "/flight", kept3, cb3)
        closed = cb3.session.recorder.wait_closed(20)
        res["flight"] = {"folder": str(cb3.trace_path), "error": error, "closed": closed}
        json.dump(res, open(out + "/result.json", "w"))
''')


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("transformers")
    proc = run_child(TRAIN, out, "ok")
    return out, result(proc, out), proc.stderr


def test_trace_in_output_dir_and_said_once(run):
    out, res, stderr = run
    ok = res["ok"]
    assert ok["error"] is None and ok["failures"] == 0 and not ok["recording_after"]
    assert ok["trace"] == os.path.join(str(out), "ok", "sysprof-rank0.json")
    assert stderr.count(f"sysprof: recording system metrics every 10 ms to {ok['trace']}") == 1
    assert ok["first"] == "SysprofCallback"


def test_phases(run):
    _, res, _ = run
    data = TraceData(read_trace(res["ok"]["trace"]))
    assert data.recorded and not data.truncated and data.stop["reason"] == "end"
    by = {}
    for s in data.spans:
        by.setdefault(s.name, []).append(s)
    # dataloader: the fetch before each step (the epoch's first, then after a step, its log, evaluate or save)
    assert {n: len(v) for n, v in by.items()} == \
        {"step": 12, "optimizer_step": 12, "evaluate": 2, "save": 2, "dataloader": 12}
    for o in by["optimizer_step"]:
        assert any(s.start_us <= o.start_us and o.end_us <= s.end_us for s in by["step"])
    assert all(d.duration_us >= 5000 for d in by["dataloader"])  # the collate's sleep
    steps = by["step"]
    for span in by["dataloader"] + by["evaluate"] + by["save"]:  # between steps, never inside one
        assert not any(s.start_us < span.start_us < s.end_us for s in steps), span
    assert all(e.duration_us >= 5000 for e in by["evaluate"])  # two eval batches, each collated with a sleep
    assert data.units["cpu/percent"] == "%" and data.meta["framework"] == "transformers"


def test_summaries_in_every_log(run):
    _, res, _ = run
    data = TraceData(read_trace(res["ok"]["trace"]))
    names = expected_summaries(data.meta["channels"])
    logs = res["ok"]["logs"]
    train_logs = [(step, m) for step, m in logs if "loss" in m]
    assert [step for step, _ in train_logs] == [4, 8, 12]
    assert sum("eval_loss" in m for _, m in logs) == 2
    for _, m in logs:  # training, evaluation and the final train_runtime log: each has them
        assert {k for k in m if k.startswith("sysprof/")} == names
    for _, m in train_logs:
        assert 0 <= m["sysprof/cpu_percent_mean"] <= m["sysprof/cpu_percent_max"] <= 100
        assert m["sysprof/memory_used_bytes_max"] > 0
        assert 0 < m["sysprof/dataloader_wait_share"] < 1


def test_interrupt_stops_the_recording(run):
    _, res, _ = run
    r = res["interrupt"]
    assert r["error"] == "KeyboardInterrupt" and r["closed"]
    data = TraceData(read_trace(r["trace"]))
    assert not data.truncated and data.stop["reason"] == "training call ended"
    assert [s.name for s in data.spans if s.name in ("step", "dataloader")] == ["dataloader", "step"] * 3
    assert not any(s.args for s in data.spans)  # the next fetch was tentative: dropped at the stop
    assert not any(k.startswith("sysprof/") for _, m in r["logs"] for k in m)  # summaries=False


def test_killed_run_leaves_a_readable_trace(tmp_path):
    proc = run_child(TRAIN, tmp_path, "kill")
    assert proc.returncode == -9, proc.stderr[-4000:]
    data = TraceData(read_trace(tmp_path / "kill" / "sysprof-rank0.json"))
    assert data.recorded and data.truncated
    assert sum(s.name == "step" for s in data.spans) == 5
    assert data.last_counter_stats["taken"] >= 1 and data.series["cpu/percent"][0].size >= 1  # flushed samples


def test_flight_recorder_dumps_when_train_ends_without_its_hook(run):
    _, res, _ = run
    r = res["flight"]
    assert r["error"] == "KeyboardInterrupt" and r["closed"]
    dumps = sorted(os.listdir(r["folder"]))
    assert len(dumps) == 1 and dumps[0].endswith("-exception-rank0.json")
    data = TraceData(read_trace(os.path.join(r["folder"], dumps[0])))
    assert data.meta["flight"]["reason"] == "the training call ended without its end hook"
    assert [s.name for s in data.spans if s.name == "step"] == ["step"] * 3
