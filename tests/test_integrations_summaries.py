"""sysprof.integrations.summaries (the one summary module of the trainer integrations), the in-process Recorder
the callbacks share, and SystemProfiler(log_summaries=...) with a fake Composer logger. No trainer needed."""

import math
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from sysprof.integrations.recorder import PHASE_CATEGORY, Recorder, free_path
from sysprof.integrations.summaries import (DEFAULT_SUMMARIES, QUANTILE_ROWS, Summary, SummaryWindow,
                                            parse_summaries)
from sysprof.profiler import Profiler
from sysprof.profiler.system_profiler import SystemProfiler
from sysprof.report import TraceData
from sysprof.sampling.sampler import Batch
from sysprof.trace.chrome import read_trace

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
NAN = float("nan")
CHANNELS = ("cpu/percent", "memory/used_bytes", "pressure/io/some_seconds_per_second", "gpu/0/utilization_percent",
            "gpu/0/energy_joules", "gpu/1/utilization_percent", "gpu/1/energy_joules")


def _batch(rows, t0=T0, channels=CHANNELS):
    ts = np.array([t0 + 10 * MS * i for i in range(len(rows))], dtype=np.int64)
    return Batch(ts, np.array(rows, dtype=np.float64).reshape(len(rows), len(channels)), channels)


def test_default_names_and_values_over_two_windows():
    w = SummaryWindow()
    w.bind(CHANNELS)
    assert w.names == ["sysprof/cpu_percent_mean", "sysprof/cpu_percent_max", "sysprof/memory_used_bytes_max",
                       "sysprof/io_stall_share", "sysprof/dataloader_wait_share",
                       "sysprof/gpu0_utilization_percent_mean", "sysprof/gpu1_utilization_percent_mean",
                       "sysprof/gpu0_energy_joules", "sysprof/gpu1_energy_joules"]
    w.take(T0)  # the window starts at T0
    w.add(_batch([[10, 1e9, 0.0, 50, 1000, NAN, NAN], [30, 3e9, 0.5, 70, 1010, NAN, NAN]]))
    w.add(_batch([[20, 2e9, 0.25, NAN, 1030, NAN, NAN]], t0=T0 + 20 * MS))
    w.add_span("dataloader", T0 - 10 * MS, T0 + 20 * MS)  # clipped at the window's start: 20 ms
    w.add_span("backward", T0, T0 + 40 * MS)  # no summary asks for it
    got = w.take(T0 + 100 * MS)
    assert got["sysprof/cpu_percent_mean"] == 20.0 and got["sysprof/cpu_percent_max"] == 30.0
    assert got["sysprof/memory_used_bytes_max"] == 3e9
    assert got["sysprof/io_stall_share"] == 0.25
    assert got["sysprof/dataloader_wait_share"] == pytest.approx(0.2)
    assert got["sysprof/gpu0_utilization_percent_mean"] == 60.0  # NaN left out
    assert math.isnan(got["sysprof/gpu1_utilization_percent_mean"])  # no finite sample: NaN
    assert got["sysprof/gpu0_energy_joules"] == 30.0  # first window: last - first
    assert math.isnan(got["sysprof/gpu1_energy_joules"])
    # the next window: delta from the previous window's last value; an empty window is NaN, share 0
    w.add(_batch([[40, 1e9, 0.0, 10, 1100, 5, 7]], t0=T0 + 110 * MS))
    got = w.take(T0 + 200 * MS)
    assert got["sysprof/gpu0_energy_joules"] == 70.0
    assert got["sysprof/gpu1_energy_joules"] == 0.0  # its first value ever: last - first
    assert got["sysprof/cpu_percent_mean"] == 40.0 and got["sysprof/dataloader_wait_share"] == 0.0
    got = w.take(T0 + 300 * MS)
    assert math.isnan(got["sysprof/cpu_percent_mean"]) and math.isnan(got["sysprof/gpu0_energy_joules"])
    w.add(_batch([[NAN, NAN, NAN, NAN, 900, NAN, NAN]], t0=T0 + 310 * MS))  # a counter reset
    assert math.isnan(w.take(T0 + 400 * MS)["sysprof/gpu0_energy_joules"])


def test_channels_the_sampler_lacks_are_left_out():
    w = SummaryWindow()
    w.bind(("cpu/percent", "memory/used_bytes"))
    assert w.names == ["sysprof/cpu_percent_mean", "sysprof/cpu_percent_max", "sysprof/memory_used_bytes_max",
                       "sysprof/dataloader_wait_share"]


def test_configured_statistics_quantiles_and_derived_names():
    w = SummaryWindow(["cpu/percent:p50", "cpu/percent:p95", "cpu/percent:min", "cpu/percent:last",
                       "gpu/*/utilization_percent:max", "phase/backward:share",
                       Summary("memory/used_bytes", "mean", "ram")], prefix="sys/")
    w.bind(CHANNELS)
    assert w.names == ["sys/cpu_percent_p50", "sys/cpu_percent_p95", "sys/cpu_percent_min", "sys/cpu_percent_last",
                       "sys/gpu0_utilization_percent_max", "sys/gpu1_utilization_percent_max",
                       "sys/phase_backward_share", "sys/ram"]
    w.take(T0)
    values = [float(v) for v in range(1, 101)]  # 1..100
    w.add(_batch([[v, 2.0, 0, v, 0, 1, 0] for v in values[::-1]]))
    w.add_span("backward", T0 + 10 * MS, T0 + 60 * MS)
    got = w.take(T0 + 100 * MS)
    assert got == {"sys/cpu_percent_p50": 50.0, "sys/cpu_percent_p95": 95.0, "sys/cpu_percent_min": 1.0,
                   "sys/cpu_percent_last": 1.0, "sys/gpu0_utilization_percent_max": 100.0,
                   "sys/gpu1_utilization_percent_max": 1.0, "sys/phase_backward_share": 0.5, "sys/ram": 2.0}


def test_quantiles_keep_the_latest_rows_only():
    w = SummaryWindow(["cpu/percent:p50"])
    w.bind(("cpu/percent",))
    w.add(_batch([[0.0]] * QUANTILE_ROWS, channels=("cpu/percent",)))
    w.add(_batch([[5.0]] * QUANTILE_ROWS, channels=("cpu/percent",)))
    assert w.take() == {"sysprof/cpu_percent_p50": 5.0}


@pytest.mark.parametrize("spec, message", [
    (["cpu/percent:median"], "unknown summary statistic 'median'"),
    (["cpu/percent:share"], "'share' is the statistic of phases"),
    (["phase/x:mean"], "'share' is the statistic of phases"),
    (["gpu/*/x/*:mean"], "a glob with one '*'"),
    (["cpu/percent"], "neither a sysprof Summary nor a 'channel:stat' string"),
    ([3], "neither a sysprof Summary"),
])
def test_bad_specs_say_what_is_wrong(spec, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("*", r"\*")):
        parse_summaries(spec)


def test_spec_forms():
    assert parse_summaries(None) == DEFAULT_SUMMARIES == parse_summaries(True)
    assert parse_summaries(False) == () == parse_summaries([])
    assert parse_summaries("cpu/percent:max") == (Summary("cpu/percent", "max"),)


def test_free_path_never_replaces(tmp_path):
    p = tmp_path / "t.json.gz"
    assert free_path(p) == p
    p.write_text("x")
    (tmp_path / "t-1.json.gz").write_text("x")
    assert free_path(p) == tmp_path / "t-2.json.gz"
    q = tmp_path / "trace"
    q.write_text("x")
    assert free_path(q) == tmp_path / "trace-1"


def test_recorder_writes_a_recorded_trace_with_phases(tmp_path):
    (tmp_path / "run.json").write_text("mine")
    rec = Recorder(tmp_path / "run.json", interval=0.005, sources=["cpu", "memory"], summaries=SummaryWindow())
    rec.start()
    assert rec.path == tmp_path / "run-1.json" and (tmp_path / "run.json").read_text() == "mine"
    t = time.time_ns()
    rec.phase_begin("train_batch", t)
    rec.phase_begin("backward", t + 1 * MS)
    rec.phase_end("backward", t + 3 * MS)
    rec.phase_end("never_opened")
    rec.phase_end("train_batch", t + 4 * MS, batch=7)
    rec.phase_begin("dataloader", t + 4 * MS)
    rec.phase_cancel("dataloader")
    rec.phase_begin("validation", t + 5 * MS)  # still open at the stop: closed then
    rec.phase_begin("dataloader", t + 6 * MS, tentative=True)  # still open at the stop: dropped
    time.sleep(0.05)
    got = rec.summaries()
    assert set(got) == {"sysprof/cpu_percent_mean", "sysprof/cpu_percent_max", "sysprof/memory_used_bytes_max",
                        "sysprof/dataloader_wait_share"}
    assert 0 <= got["sysprof/cpu_percent_mean"] <= got["sysprof/cpu_percent_max"] <= 100
    assert got["sysprof/memory_used_bytes_max"] > 0 and got["sysprof/dataloader_wait_share"] == 0.0
    rec.stop("end")
    rec.stop("again")  # idempotent
    assert rec.summaries() == {}
    data = TraceData(read_trace(rec.path))
    assert data.recorded and not data.truncated and data.stop["reason"] == "end"
    assert data.units["cpu/percent"] == "%" and data.units["memory/used_bytes"] == "B"
    assert data.meta["interval_s"] == 0.005 and data.meta["channels"][0] == "cpu/percent"
    spans = {(s.name, s.end_us - s.start_us): s for s in data.spans}
    assert set(n for n, _ in spans) == {"train_batch", "backward", "validation"}
    assert spans[("train_batch", 4000)].args == {"batch": 7} and ("backward", 2000) in spans
    validation = [s for s in data.spans if s.name == "validation"][0]
    assert validation.args == {"closed": "end"} and validation.tid != 0
    assert all(s.pid == os.getpid() for s in data.spans)
    events = read_trace(rec.path)
    assert {e["cat"] for e in events if e.get("ph") == "X"} == {PHASE_CATEGORY}
    assert data.series["cpu/percent"][0].size >= 1


def test_recorder_stops_when_the_watched_call_returns(tmp_path):
    rec = Recorder(tmp_path / "w.json", interval=0.01, sources=["cpu"])

    def train():
        import sys as _sys
        rec.start()
        rec.watch(_sys._getframe())

    train()
    assert rec.wait_closed(30) and not rec.running and rec.reason == "training call ended"
    assert TraceData(read_trace(rec.path)).stop["reason"] == "training call ended"


def test_recorder_stopped_by_a_handler_that_interrupted_a_summary(tmp_path):
    """A stop from a signal handler that interrupted the training thread's summaries (the window's lock held):
    the final drain folds into the same window on the same thread; a plain lock deadlocked there."""
    import threading

    window = SummaryWindow()
    rec = Recorder(tmp_path / "s.json", interval=0.005, sources=["cpu", "memory"], summaries=window)
    rec.start()
    values = window._values

    def interrupted(*args):  # the handler runs inside take(), the lock held
        rec.stop("signal")
        return values(*args)

    window._values = interrupted
    got = []
    training = threading.Thread(target=lambda: got.append(window.take()), daemon=True)
    training.start()
    training.join(60)  # a bound on a deadlock, not a timing
    assert not training.is_alive() and rec.wait_closed(0)
    assert set(got[0]) == {"sysprof/cpu_percent_mean", "sysprof/cpu_percent_max", "sysprof/memory_used_bytes_max",
                           "sysprof/dataloader_wait_share"}
    data = TraceData(read_trace(rec.path))
    assert not data.truncated and data.stop["reason"] == "signal"


def test_recorder_killed_mid_way_leaves_a_readable_trace(tmp_path):
    out = tmp_path / "k.json"
    script = textwrap.dedent(f"""
        import sys, time
        from sysprof.integrations.recorder import Recorder
        rec = Recorder({str(out)!r}, interval=0.005, sources=["cpu"])
        rec.start()
        for i in range(1000):
            t = time.time_ns()
            rec.add_span("step", t, t + 1000)
            time.sleep(0.01)
            if i == 150:
                print("ready", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(1.2)  # past a flush
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    data = TraceData(read_trace(out))
    assert data.recorded and data.truncated
    assert data.last_counter_stats["taken"] >= 1 and data.series["cpu/percent"][0].size >= 1  # flushed samples
    assert sum(s.name == "step" for s in data.spans) > 100


# ---- Composer: SystemProfiler(log_summaries=...) ----
class _Logger:
    def __init__(self):
        self.metrics = []

    def log_metrics(self, metrics, step=None):
        self.metrics.append(dict(metrics))


class _FakeSampler:
    channels = ("cpu/percent", "memory/used_bytes")
    errors = {}
    stats = {}

    def __init__(self):
        self.rows = []

    def start(self):
        pass

    def stop(self):
        pass

    def drain(self):
        rows, self.rows = self.rows, []
        return _batch(rows, channels=self.channels) if rows else Batch(np.zeros(0, np.int64), np.zeros((0, 2)),
                                                                        self.channels)


def test_system_profiler_logs_summaries_at_batch_end(monkeypatch, recording_handler):
    sampler = _FakeSampler()
    monkeypatch.setattr(SystemProfiler, "_make_sampler", lambda self: sampler)
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[recording_handler])
    sysp = SystemProfiler(profile_memory=True, log_summaries=["cpu/percent:max", "phase/dataloader:share"])
    prof._callbacks = [sysp]
    state = prof.start()
    logger = _Logger()
    sampler.rows = [[10.0, 1e9], [40.0, 2e9]]
    for event in ("before_dataloader", "after_dataloader", "batch_end"):
        sysp.run_event(event, state, logger)
    sampler.rows = [[5.0, 1e9]]
    sysp.run_event("batch_end", state, None)  # no logger (standalone): nothing logged
    sysp.run_event("batch_end", state, logger)
    prof.stop()
    assert [sorted(m) for m in logger.metrics] == [["sysprof/cpu_percent_max", "sysprof/phase_dataloader_share"]] * 2
    assert logger.metrics[0]["sysprof/cpu_percent_max"] == 40.0
    assert 0 < logger.metrics[0]["sysprof/phase_dataloader_share"] <= 1
    assert logger.metrics[1]["sysprof/cpu_percent_max"] == 5.0  # the window since the previous log
    assert logger.metrics[1]["sysprof/phase_dataloader_share"] == 0.0


def test_system_profiler_bad_summaries_fail_in_the_constructor():
    with pytest.raises(ValueError, match="unknown summary statistic"):
        SystemProfiler(log_summaries=["cpu/percent:avg"])
    assert SystemProfiler().log_summaries is False
