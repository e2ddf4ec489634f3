"""SystemProfiler: channel mapping, per-sample timestamps, recording windows, errors, and a live-sampler check."""

import json
import os
import sys
import threading
import time
import warnings

import numpy as np
import psutil
import pytest

import sysprof.profiler.system_profiler as sp_mod
from sysprof.profiler.json_trace_handler import JSONTraceHandler
from sysprof.profiler import Profiler, State
from sysprof.sampling.sampler import Batch
from sysprof.profiler.system_profiler import SystemProfiler, counter_plan

T0 = 1_700_000_000_000_000_000  # ns
MS = 1_000_000

CHANNELS = ("cpu/percent", "cpu/user_percent", "memory/available_bytes", "memory/used_bytes", "swap/used_bytes",
            "swap/free_bytes", "disk/sda/read_bytes", "disk/sda/busy_time_seconds", "disk/sda/read_bytes_per_second",
            "net/eth0/bytes_sent", "net/eth0/bytes_recv", "net/eth0/bytes_sent_per_second")
ROW = [12.5, 3.0, 3.5e9, 1.25e9, 0.0, 2e9, 4096.0, 1.5, 512.0, 2500.0, float("nan"), 1000.0]


def _expected(ts_ns, rates=False):
    """Counter events (name, categories, values) the fake row produces, at ``ts_ns``."""
    ev = [("cpu", ("cpu",), {"cpu_percent": 12.5}),
          ("memory/virtual", ("memory",), {"used_gb": 1.25, "available_gb": 3.5}),
          ("memory/swap", ("memory",), {"used_gb": 0.0, "free_gb": 2.0}),
          ("disk/sda/read_bytes", ("disk",), {"read_bytes": 4096.0}),
          ("disk/sda/busy_time", ("disk",), {"busy_time": 1500.0})]
    if rates:
        ev.append(("disk/sda/read_bytes_per_second", ("disk",), {"read_bytes_per_second": 512.0}))
    ev.append(("network/eth0/kb_sent", ("net",), {"kb_sent": 2.5}))  # kb_recv is NaN: no event
    if rates:
        ev.append(("network/eth0/kb_sent_per_second", ("net",), {"kb_sent_per_second": 1.0}))
    return [(n, c, ts_ns, v) for n, c, v in ev]


class FakeSampler:
    """Stands in for sysprof.Sampler: ``rows`` (list of (ts_ns, values)) are handed out by the next drain()."""

    def __init__(self, channels=CHANNELS):
        self.channels = channels
        self.errors = {}
        self.rows = []
        self.running = False
        self.stats = {"taken": 0}

    def start(self):
        self.running = True

    def stop(self):
        self.running = False

    def drain(self):
        rows, self.rows = self.rows, []
        ts = np.array([r[0] for r in rows], dtype=np.int64)
        vals = np.array([r[1] for r in rows], dtype=np.float64).reshape(len(rows), len(self.channels))
        return Batch(ts, vals, self.channels)


@pytest.fixture
def fake(monkeypatch):
    """Fake sampler + fake observation clock (``clock["t"]``, ns) for SystemProfiler."""
    sampler = FakeSampler()
    clock = {"t": T0}
    monkeypatch.setattr(SystemProfiler, "_make_sampler", lambda self: sampler)
    monkeypatch.setattr(sp_mod, "_now_ns", lambda: clock["t"])
    return sampler, clock


def _calls(handler):
    return [(kw["name"], tuple(kw["categories"]), kw["wall_clock_time_ns"], kw["values"])
            for kind, kw in handler.calls if kind == "counter"]


def test_counter_plan_mapping():
    plan = counter_plan(CHANNELS, rates=True)
    assert [(name, cats, keys) for name, cats, keys, *_ in plan] == [
        ("cpu", ("cpu",), ("cpu_percent",)),
        ("memory/virtual", ("memory",), ("used_gb", "available_gb")),
        ("memory/swap", ("memory",), ("used_gb", "free_gb")),
        ("disk/sda/read_bytes", ("disk",), ("read_bytes",)),
        ("disk/sda/busy_time", ("disk",), ("busy_time",)),
        ("disk/sda/read_bytes_per_second", ("disk",), ("read_bytes_per_second",)),
        ("network/eth0/kb_sent", ("net",), ("kb_sent",)),
        ("network/eth0/kb_recv", ("net",), ("kb_recv",)),
        ("network/eth0/kb_sent_per_second", ("net",), ("kb_sent_per_second",)),
    ]
    assert "disk/sda/read_bytes_per_second" not in [p[0] for p in counter_plan(CHANNELS, rates=False)]
    per_cpu = counter_plan(("cpu/0/percent", "cpu/12/percent", "gpu/0/utilization_percent"), rates=False)
    assert [(p[0], p[2]) for p in per_cpu] == [("cpu/0", ("cpu_percent",)), ("cpu/12", ("cpu_percent",)),
                                               ("gpu/0/utilization_percent", ("utilization_percent",))]


def test_samples_emitted_with_their_own_time_only_inside_windows(fake, recording_handler):
    sampler, clock = fake
    actions = {0: "skip", 1: "active", 2: "active_and_save", 3: "skip"}
    prof = Profiler(schedule=lambda s: actions[int(s.timestamp.batch)], trace_handlers=[recording_handler],
                    sys_prof_cpu=True, sys_prof_memory=True, sys_prof_disk=True, sys_prof_net=True)
    prof.start()  # observed at T0: skip
    for step in (1, 2, 3):  # batch b starts at T0 + 10 ms * b
        clock["t"] = T0 + 10 * MS * step
        prof.step()
    sampler.rows = [(T0 + k * MS, ROW) for k in (5, 10, 15, 25, 30, 35)]
    prof.stop()
    assert not sampler.running
    expected = []
    for k in (10, 15, 25):  # [10 ms, 30 ms) is the recording window
        expected += _expected(T0 + k * MS)
    assert _calls(recording_handler) == expected
    assert prof.system_profiler is not None


def test_rates_option_and_batch_end_drain_before_save(fake, tmp_path):
    """Rows drained at the ACTIVE_AND_SAVE batch_end land in that cycle's file (the handler saves after)."""
    sampler, clock = fake
    handler = JSONTraceHandler(folder=str(tmp_path), remote_file_name=None, merged_trace_filename=None)
    actions = {0: "active_and_save", 1: "skip"}
    prof = Profiler(schedule=lambda s: actions[int(s.timestamp.batch)], trace_handlers=[handler],
                    sys_prof_memory=True, sys_prof_rates=True)
    prof.system_profiler.drain_interval_seconds = 3600  # only the batch_end rule drains
    prof.start()
    sampler.rows = [(T0 + 1000 + 7 * MS, ROW)]
    clock["t"] = T0 + 10 * MS
    prof.step()  # batch_end of the ACTIVE_AND_SAVE batch: drain, then the handler saves ep0-ba1
    sampler.rows = [(T0 + 12 * MS, ROW)]  # sampled in the SKIP batch: never traced
    prof.stop()
    assert os.listdir(tmp_path) == ["ep0-ba1-rank0.json"]
    events = [e for e in json.loads((tmp_path / "ep0-ba1-rank0.json").read_text()) if e["ph"] == "C"]
    want = [(n, ",".join(c), (T0 + 1000 + 7 * MS) // 1000, v) for n, c, _, v in _expected(0, rates=True)]
    assert [(e["name"], e["cat"], e["ts"], e["args"]) for e in events] == want
    assert all(e["pid"] == 0 and e["tid"] == os.getpid() for e in events)


def test_init_without_profiler_raises():
    state = State()
    with pytest.raises(RuntimeError, match=r"profiler is not enabled.*pass `profiler=Profiler\(\.\.\.\)`"):
        SystemProfiler().init(state, None)


@pytest.mark.parametrize("kw", [dict(stats_thread_interval_seconds=0), dict(stats_thread_interval_seconds=-1),
                                dict(stats_thread_interval_seconds=float("inf")),
                                dict(stats_thread_interval_seconds=float("nan")),
                                dict(stats_thread_interval_seconds=True), dict(stats_thread_interval_seconds="1"),
                                dict(drain_interval_seconds=0), dict(drain_interval_seconds=float("inf"))])
def test_bad_intervals_fail_in_the_constructor(kw):
    (name,) = kw
    with pytest.raises(ValueError, match=name):
        SystemProfiler(**kw)
    SystemProfiler(stats_thread_interval_seconds=np.float64(0.01), drain_interval_seconds=1)  # any real > 0


def test_source_problem_is_not_called_unavailable(monkeypatch, caplog):
    """An entry in sampler.errors for a source that has channels (one refused GPU metric) is a problem with it;
    "unavailable" is said only of a source without any channel."""
    sampler = FakeSampler(CHANNELS + ("gpu/0/utilization_percent",))
    sampler.errors = {"gpu": "gpu 0: power_watts: NOT_SUPPORTED", "pressure": "no /proc/pressure"}
    monkeypatch.setattr(SystemProfiler, "_make_sampler", lambda self: sampler)
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[], sys_prof_cpu=True)
    with caplog.at_level("WARNING", logger="sysprof.profiler.system_profiler"):
        prof.start()
        prof.stop()
    lines = [r.getMessage() for r in caplog.records]
    assert "sysprof SystemProfiler: source 'gpu': gpu 0: power_watts: NOT_SUPPORTED" in lines
    assert "sysprof SystemProfiler: source 'pressure' unavailable: no /proc/pressure" in lines


class _FakeCuda:
    """torch.cuda where the training (main) thread's current device is 3 and every other thread's is 0."""

    def __init__(self):
        self.devices_read = []

    def is_available(self):
        return True

    def is_initialized(self):
        return True

    def current_device(self):
        return 3 if threading.current_thread() is threading.main_thread() else 0

    def memory_stats(self, device=None):
        device = self.current_device() if device is None else device
        self.devices_read.append(device)
        return {"allocated_bytes.all.current": (device + 1) * 1e9, "num_alloc_retries": device}


def test_cuda_memory_stats_are_of_the_training_threads_device(fake, recording_handler, monkeypatch):
    """Allocator statistics are read on the drain thread (current device 0): they must name the training thread's
    device (rank k's GPU k), recorded at init."""
    import types

    cuda = _FakeCuda()
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    sampler, clock = fake
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[recording_handler], sys_prof_cpu=False,
                    sys_prof_memory=True)
    prof.start()
    drainer = threading.Thread(target=prof.system_profiler._drain, name="sysprof-drain")
    drainer.start()
    drainer.join()
    prof.stop()
    cuda_calls = [c for c in _calls(recording_handler) if c[0].startswith("memory/cuda/")]
    assert cuda_calls and set(cuda.devices_read) == {3}
    assert ("memory/cuda/current_allocated_mem", ("memory",), T0, {"current_allocated_mem": 4.0}) in cuda_calls
    assert ("memory/cuda/alloc_retries", ("memory",), T0, {"alloc_retries": 3}) in cuda_calls


def test_raising_handler_does_not_stop_sampling(fake, recording_handler):
    sampler, clock = fake

    class Broken(type(recording_handler)):
        def process_counter_event(self, **kw):
            raise ValueError("nope")

    prof = Profiler(schedule=lambda s: "active", trace_handlers=[Broken(), recording_handler])
    prof.start()
    sampler.rows = [(T0 + MS, ROW)]
    with pytest.warns(RuntimeWarning, match="Broken raised ValueError: nope"):
        prof.system_profiler._drain()
    sampler.rows = [(T0 + 2 * MS, ROW)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prof.stop()
    assert _calls(recording_handler) == _expected(T0 + MS) + _expected(T0 + 2 * MS)


def test_fallback_thread_drains_without_events(fake, recording_handler, monkeypatch):
    sampler, clock = fake
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[recording_handler], sys_prof_cpu=True)
    sysp = prof.system_profiler
    sysp.drain_interval_seconds = 0.01  # fallback period: max(1 s, 4 * 0.01 s) = 1 s
    prof.start()
    thread = sysp.session._thread
    assert thread is not None and thread.daemon and thread.is_alive()
    sampler.rows = [(T0 + MS, ROW)]
    deadline = time.monotonic() + 5
    while not recording_handler.calls and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _calls(recording_handler)[0] == ("cpu", ("cpu",), T0 + MS, {"cpu_percent": 12.5})
    prof.stop()
    assert not thread.is_alive()
    assert sysp.sampler is None


def test_live_sampler_values_against_psutil(tmp_path):
    """The real sampler (native where built): used_gb within 2 % of psutil's used/1e9; 10 ms samples, all in the
    trace, and every deadline either a sample or a missed deadline the sampler counted (how many a free core
    takes is a benchmark: benchmarks/bench_density.py). Catches rows lost on the way to the trace and a sampler
    that falls behind its deadlines without counting them. Every row is written (changes_only=False): a cpu
    event per sample."""
    handler = JSONTraceHandler(folder=str(tmp_path), remote_file_name=None, merged_trace_filename=None,
                               changes_only=False)
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[handler], sys_prof_cpu=True,
                    sys_prof_memory=True, sys_prof_disk=True, sys_prof_net=True,
                    sys_prof_stats_thread_interval_seconds=0.01)
    t_start = time.time_ns()
    prof.start()
    sampler = prof.system_profiler.sampler
    end = time.monotonic() + 0.5
    n = 0
    while time.monotonic() < end or sampler.stats["taken"] < 5:  # the main thread runs Python meanwhile
        n += sum(range(100))
    vm = psutil.virtual_memory()
    sysp_stats = prof.system_profiler.stats
    prof.stop()
    t_stop = time.time_ns()
    st = sampler.stats
    (trace,) = os.listdir(tmp_path)
    events = json.loads((tmp_path / trace).read_text())
    counters = [e for e in events if e["ph"] == "C"]
    names = {e["name"] for e in counters}
    assert {"cpu", "memory/virtual", "memory/swap"} <= names
    assert any(n.startswith("network/") and n.endswith("/kb_sent") for n in names)
    virt = [e for e in counters if e["name"] == "memory/virtual"]
    assert set(virt[-1]["args"]) == {"used_gb", "available_gb"}
    assert virt[-1]["args"]["used_gb"] == pytest.approx(vm.used / 1e9, rel=0.02)
    cpu = [e["ts"] for e in counters if e["name"] == "cpu"]
    assert all(t_start // 1000 <= t <= t_stop // 1000 for t in cpu)
    assert cpu == sorted(cpu)
    assert st["taken"] == st["drained"] and st["dropped"] == 0, st
    # every row is a cpu event, but the first when no USER_HZ tick passed between construction and start
    # (its percent is NaN, and NaN is left out of events)
    assert st["taken"] - 1 <= len(cpu) <= st["taken"] and len(cpu) >= 4, (len(cpu), st, sysp_stats)
    # rows + missed deadlines cover the deadlines from the first row to the last but one (tests/
    # test_sampler_live_thread.py, check_deadline_accounting; µs stamps, 500 ppm slew)
    assert st["taken"] + st["missed_deadlines"] >= (cpu[-2] - cpu[0]) / 10_000 - 2, (cpu[0], cpu[-2], st)
    for e in counters:
        assert all(isinstance(v, (int, float)) for v in e["args"].values())


def test_template_rows_match_per_event_encoding(fake, tmp_path):
    """All-finite rows take the JSON handler's template path; the text equals per-event json encoding."""
    sampler, clock = fake
    handler = JSONTraceHandler(folder=str(tmp_path), remote_file_name=None, merged_trace_filename=None,
                               changes_only=False)  # every row: the layout of each
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[handler], sys_prof_memory=True,
                    sys_prof_rates=True)
    prof.start()
    finite = ROW[:10] + [7000.0, 0.1]
    sampler.rows = [(T0 + 1234567, finite), (T0 + 2 * MS, ROW)]
    prof.stop()
    (trace,) = os.listdir(tmp_path)
    text = (tmp_path / trace).read_text()
    counters = [e for e in json.loads(text) if e["ph"] == "C"]
    got = [(e["name"], e["ts"], e["args"]) for e in counters]
    first = [(n, (T0 + 1234567) // 1000, v) for n, _, _, v in _expected(0, rates=True)]
    first.insert(7, ("network/eth0/kb_recv", (T0 + 1234567) // 1000, {"kb_recv": 7.0}))
    first[-1] = ("network/eth0/kb_sent_per_second", (T0 + 1234567) // 1000, {"kb_sent_per_second": 1e-4})
    second = [(n, (T0 + 2 * MS) // 1000, v) for n, _, _, v in _expected(0, rates=True)]
    assert got == first + second
    from sysprof.trace.chrome import encode_event
    for e in counters:
        assert encode_event(e) in text


def test_units_event_once_per_file_and_channel_set(fake, tmp_path):
    """Composer-layout files declare the unit of every traced channel after Composer's scaling, once per file,
    before its first counter event (the allocator statistics' too, with sys_prof_memory)."""
    sampler, clock = fake
    handler = JSONTraceHandler(folder=str(tmp_path), remote_file_name=None, merged_trace_filename=None)
    actions = {0: "active_and_save", 1: "active_and_save", 2: "skip"}
    prof = Profiler(schedule=lambda s: actions[int(s.timestamp.batch)], trace_handlers=[handler],
                    sys_prof_memory=True, sys_prof_rates=True)
    prof.system_profiler.drain_interval_seconds = 3600  # only the batch_end rule drains
    prof.start()
    sampler.rows = [(T0 + 1 * MS, ROW), (T0 + 2 * MS, ROW)]
    clock["t"] = T0 + 10 * MS
    prof.step()  # saves ep0-ba1
    sampler.rows = [(T0 + 11 * MS, ROW)]
    clock["t"] = T0 + 20 * MS
    prof.step()  # saves ep0-ba2
    prof.stop()
    want = {"cpu/cpu_percent": "%", "memory/virtual/used_gb": "GB", "memory/virtual/available_gb": "GB",
            "memory/swap/used_gb": "GB", "memory/swap/free_gb": "GB", "disk/sda/read_bytes": "B",
            "disk/sda/busy_time": "ms", "disk/sda/read_bytes_per_second": "B/s", "network/eth0/kb_sent": "kB",
            "network/eth0/kb_recv": "kB", "network/eth0/kb_sent_per_second": "kB/s",
            "memory/cuda/current_allocated_mem": "GB", "memory/cuda/current_active_mem": "GB",
            "memory/cuda/current_inactive_mem": "GB", "memory/cuda/current_reserved_mem": "GB",
            "memory/cuda/peak_allocated_mem": "GB", "memory/cuda/peak_active_mem": "GB",
            "memory/cuda/peak_inactive_mem": "GB", "memory/cuda/peak_reserved_mem": "GB",
            "memory/cuda/alloc_retries": ""}
    assert sorted(os.listdir(tmp_path)) == ["ep0-ba1-rank0.json", "ep0-ba2-rank0.json"]
    for name in ("ep0-ba1-rank0.json", "ep0-ba2-rank0.json"):
        events = json.loads((tmp_path / name).read_text())
        units = [i for i, e in enumerate(events) if e["name"] == "sysprof units"]
        assert len(units) == 1, name
        first_counter = min(i for i, e in enumerate(events) if e["ph"] == "C")
        assert units[0] < first_counter
        assert events[units[0]] == {"name": "sysprof units", "ph": "M", "pid": 0, "tid": os.getpid(),
                                    "args": {"units": want}}


def test_source_switches_come_from_the_registry():
    """Every registry source has a profile_<source> switch (sys_prof_<source> on Profiler), off by default."""
    from sysprof import Profiler, SystemProfiler
    from sysprof.sampling.registry import SOURCES

    sysp = SystemProfiler(profile_pressure=True, profile_vmstat=True)
    assert sysp._sources() == {n: n in ("cpu", "pressure", "vmstat") for n in SOURCES}
    assert SystemProfiler(profile_cpu=False, profile_gpu=True)._sources()["gpu"] is True
    with pytest.raises(TypeError, match="unexpected keyword argument 'profile_bogus'"):
        SystemProfiler(profile_bogus=True)
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[], sys_prof_cpu=False, sys_prof_cgroup=True)
    assert prof.system_profiler._sources() == {n: n == "cgroup" for n in SOURCES}
    with pytest.raises(TypeError, match="unexpected keyword argument 'sys_prof_bogus'"):
        Profiler(schedule=lambda s: "active", trace_handlers=[], sys_prof_bogus=True)
    assert Profiler(schedule=lambda s: "active", trace_handlers=[], sys_prof_cpu=False).system_profiler is None


def test_ring_sized_by_the_one_rule():
    """8 x the fallback drain period of rows (at least 4096): 8000 at 1 ms with the default drain interval."""
    from sysprof import SystemProfiler
    from sysprof.sampling.sampler import ring_capacity

    assert SystemProfiler(stats_thread_interval_seconds=0.001)._make_sampler().capacity == 8000
    assert SystemProfiler(stats_thread_interval_seconds=0.5)._make_sampler().capacity == 4096
    assert ring_capacity(1e-7, 8.0, 4096, 1 << 20) == 1 << 20


def test_one_session_feeds_every_sink(fake, recording_handler):
    """Composer's profiler, the Prometheus endpoint and the summary window are sinks of one session: one drain
    feeds each the same rows; once stopped, the session drains nothing more."""
    pytest.importorskip("prometheus_client")
    from prometheus_support import parsed, scrape

    sampler, clock = fake
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[recording_handler], sys_prof_cpu=True)
    sysp = prof.system_profiler
    sysp.log_summaries, sysp.prometheus_listen = ["cpu/percent:max"], "127.0.0.1:0"
    prof.start()
    session = sysp.session
    assert [s.name for s in session.sinks] == ["prometheus", "summaries", "composer profiler"]
    sampler.rows = [(T0 + MS, ROW), (T0 + 2 * MS, [14.5] + ROW[1:])]
    sysp._drain()
    assert [c[3] for c in _calls(recording_handler) if c[0] == "cpu"] == [{"cpu_percent": 12.5},
                                                                         {"cpu_percent": 14.5}]
    assert sysp._summaries.take() == {"sysprof/cpu_percent_max": 14.5}
    fams = parsed(scrape(sysp._endpoint.url)[1])
    assert fams["sysprof_cpu_busy_ratio_max"][1][("sysprof_cpu_busy_ratio_max", ())] == 0.145
    prof.stop()
    assert session.closed and session.pump() is None and sysp.stats["rows_drained"] == 2


def test_raising_handler_with_warnings_as_errors_does_not_stop_the_others(fake, recording_handler):
    """Warnings made errors (-W error, pytest's filterwarnings): the broken handler's RuntimeWarning must not
    raise out of the report, which took Composer's sink out of the session (no handler got a row again)."""
    sampler, clock = fake

    class Broken(type(recording_handler)):
        def process_counter_event(self, **kw):
            raise ValueError("nope")

    prof = Profiler(schedule=lambda s: "active", trace_handlers=[Broken(), recording_handler])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prof.start()
        sampler.rows = [(T0 + MS, ROW)]
        prof.system_profiler._drain()
        sampler.rows = [(T0 + 2 * MS, ROW)]
        prof.stop()
    assert prof.system_profiler.session.failures == {}
    assert _calls(recording_handler) == _expected(T0 + MS) + _expected(T0 + 2 * MS)


def test_stop_from_a_handler_that_interrupted_a_drain_on_the_training_thread(fake, recording_handler):
    """A stop (a signal handler's) while the training thread's drain calls the handlers (Composer's sink's lock
    held): the final drain re-enters the sink on the same thread; a plain lock deadlocked there."""
    sampler, clock = fake

    class Stopping(type(recording_handler)):
        def process_counter_event(self, **kw):
            super().process_counter_event(**kw)
            if len(self.calls) == 1:
                prof.system_profiler.close(None, None)

    stopping = Stopping()
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[stopping, recording_handler])
    prof.system_profiler.drain_interval_seconds = 3600  # only the drains asked here
    prof.start()
    sampler.rows = [(T0 + MS, ROW)]
    training = threading.Thread(target=prof.system_profiler._drain, daemon=True)
    training.start()
    training.join(60)  # a bound on a deadlock, not a timing
    assert not training.is_alive() and prof.system_profiler.session.closed and not sampler.running
    assert _calls(stopping)[0] == ("cpu", ("cpu",), T0 + MS, {"cpu_percent": 12.5})
