"""The driver's own buffered GPU samples (issue 13, item 4: nvmlDeviceGetSamples): read on the GPU reader thread
(csrc/gpu/nvml_samples.cpp; pynvml's twin sysprof/sampling/portable/nvml_samples.py) with lastSeenTimeStamp, kept
in a side buffer, drained by Sampler.drain_gpu_samples() and written by record at the driver's timestamps; against
the fake NVML's exact samples (tests/fake_nvml/fake_nvml.c: sample k at W + 20000 k us)."""
import sys
import time

import numpy as np
import pytest

from cli_support import run_cli
from sysprof.pipeline.producers import DriverSamples as DriverSamples_
from sysprof.sampling.gpu_samples import SERIES, DriverSamples, unit_of
from sysprof.trace.events import chrome_events

from fake_nvml.support import (  # noqa: F401 - fake_builds, fake and fresh_pynvml are fixtures
    expected_sample, fake, fake_builds, fresh_pynvml, gpu_sampler, needs_native, wait_for)

BACKENDS = [pytest.param("native", marks=needs_native), "psutil"]
SERVED = ["gpu/0/power_samples_watts", "gpu/0/utilization_samples_percent", "gpu/0/sm_clock_samples_hz",
          "gpu/0/memory_clock_samples_hz"]
NOT_SUPPORTED = {"gpu/0/memory_utilization_samples_percent":
                 "nvmlDeviceGetSamples(NVML_MEMORY_UTILIZATION_SAMPLES): NVML_ERROR_NOT_SUPPORTED",
                 **{f"gpu/1/{k.name}": f"nvmlDeviceGetSamples({k.type_name}): NVML_ERROR_NOT_SUPPORTED" for k in SERIES}}


def _check_exact(f, series, t_ns, values):
    """Every sample is one of the fake's: at W + 20000 k us, with sample k's value; each once, in order."""
    w = f.samples_wall0_us()
    assert w > 0 and len(t_ns) == len(values) > 0
    assert all(t % 1000 == 0 for t in t_ns.tolist())  # the driver's us, as ns
    ks = [(t // 1000 - w) // 20000 for t in t_ns.tolist()]
    assert [w + 20000 * k for k in ks] == [t // 1000 for t in t_ns.tolist()]
    assert all(b > a for a, b in zip(ks, ks[1:]))  # each sample once, oldest first
    assert values.tolist() == [expected_sample(series, k) for k in ks]


@pytest.mark.parametrize("backend", BACKENDS)
def test_driver_samples_exact_values_and_timestamps(fake, fresh_pynvml, backend):  # noqa: F811
    f = fake()
    before_ns = time.time_ns()
    s = gpu_sampler(backend, interval=0.01)
    s.start()
    got = {}
    absent = {}

    def drained_enough():
        d = s.drain_gpu_samples()
        assert isinstance(d, DriverSamples) and d.dropped == 0
        absent.update(d.absent)
        for k, (t, v) in d.items():
            t0, v0 = got.get(k, (np.zeros(0, np.int64), np.zeros(0)))
            got[k] = (np.concatenate([t0, t]), np.concatenate([v0, v]))
        return len(got.get(SERVED[0], ((),))[0]) >= 40  # more than one read (25 new samples per 0.5 s)

    wait_for(drained_enough)
    s.stop()
    assert sorted(got) == sorted(SERVED) and absent == NOT_SUPPORTED
    for series in SERVED:
        t, v = got[series]
        _check_exact(f, series, t, v)
        assert t[0] > before_ns  # only samples taken since the sampler opened
    assert all("driver_samples" not in d for d in s.devices)  # the buffer's key is not a device fact


@pytest.mark.parametrize("backend", BACKENDS)
def test_older_driver_without_the_symbol(fake, fresh_pynvml, backend):  # noqa: F811
    f = fake("minimal")
    s = gpu_sampler(backend, interval=0.01)
    s.start()
    wait_for(lambda: f.calls("nvmlDeviceGetMemoryInfo", 0) > 3)
    d = s.drain_gpu_samples()
    s.stop()
    assert dict(d) == {} and d.absent == {
        f"gpu/{i}/{k.name}": "nvmlDeviceGetSamples: NVML_ERROR_FUNCTION_NOT_FOUND (an older driver)"
        for i in (0, 1) for k in SERIES}


def test_sample_events_layout():
    d = DriverSamples({"gpu/0/power_samples_watts": (np.array([3000, 5000]), np.array([251.0, np.nan])),
                       "gpu/0/sm_clock_samples_hz": (np.array([4000]), np.array([1.5e9]))}, dropped=2,
                      absent={"gpu/1/power_samples_watts": "why"})
    class Drains:  # the sampler's side buffer: the next of these at each drain
        def __init__(self, *drained):
            self.drained, self.channels = list(drained), ()

        def drain_gpu_samples(self):
            return self.drained.pop(0)

    d2 = DriverSamples({"gpu/0/power_samples_watts": (np.array([6000]), np.array([252.0]))})
    producer = DriverSamples_(Drains(d, d2), 7)
    us = lambda t: t // 1000  # noqa: E731
    ev = chrome_events(producer.take(None, None), us)
    assert ev == [
        {"name": "sysprof units", "ph": "M", "pid": 7, "tid": 0,
         "args": {"units": {"gpu/0/power_samples_watts": "W", "gpu/0/sm_clock_samples_hz": "Hz"}}},
        {"name": "gpu/0/power_samples_watts", "ph": "C", "ts": 3, "pid": 7, "tid": 0,
         "args": {"power_samples_watts": 251.0}},
        {"name": "gpu/0/sm_clock_samples_hz", "ph": "C", "ts": 4, "pid": 7, "tid": 0,
         "args": {"sm_clock_samples_hz": 1.5e9}}]  # the NaN sample is left out
    assert chrome_events(producer.take(None, None), us) == [
        {"name": "gpu/0/power_samples_watts", "ph": "C", "ts": 6, "pid": 7, "tid": 0,
         "args": {"power_samples_watts": 252.0}}]  # declared once
    assert producer.stop_args()["gpu_samples"] == {"samples": 4, "dropped": 2, "absent": {"gpu/1/power_samples_watts": "why"}}
    assert [unit_of(f"gpu/3/{k.name}") for k in SERIES] == ["W", "%", "%", "Hz", "Hz"]


def _check_steps(series, t_ns, values):
    """As _check_exact where W is another process's (record): 20 ms steps from the first sample, whose k (mod 10,
    mod 101: all the fake's values depend on) its value gives."""
    t = t_ns.tolist()
    assert len(t) > 10 and all((b - t[0]) % 20_000_000 == 0 and b > a for a, b in zip(t, t[1:]))
    v0 = values[0]
    k0 = {"power_samples_watts": v0 - 250, "utilization_samples_percent": v0, "sm_clock_samples_hz": v0 / 1e6 - 1500,
          "memory_clock_samples_hz": v0 / 1e6 - 2600}[series.rsplit("/", 1)[-1]]
    assert values.tolist() == [expected_sample(series, int(k0) + (x - t[0]) // 20_000_000) for x in t]


@needs_native
@pytest.mark.parametrize("suffix", [".json", ".pftrace"])
def test_record_writes_driver_samples_at_their_timestamps(fake, tmp_path, suffix):
    if suffix == ".pftrace":
        pytest.importorskip("perfetto")
    f = fake()
    out = tmp_path / f"t{suffix}"
    r = run_cli("record", "-o", out, "--gpu", "-q", "--", sys.executable, "-c", "import time; time.sleep(1.5)")
    assert r.returncode == 0, r.stderr
    from sysprof.report import TraceData
    from sysprof.trace.load import load_events
    data = TraceData(load_events(str(out)))
    for series in SERVED:
        ts_us, values = data.series[series]
        _check_steps(series, np.asarray(ts_us, dtype=np.int64) * 1000, np.asarray(values, dtype=float))
        assert data.units[series] == unit_of(series)
    assert "gpu/0/power_watts" in data.series and not np.isnan(data.series["gpu/0/power_watts"][1]).all()
    summary = data.stop["gpu_samples"]
    assert summary["dropped"] == 0 and summary["absent"] == NOT_SUPPORTED
    assert summary["samples"] >= len(data.series[SERVED[0]][0])


def test_side_buffer_drops_the_oldest_and_counts(monkeypatch):
    """The pynvml twin's bounded buffer (the native one has the same rule, csrc/gpu/nvml_samples.cpp): past KEPT
    entries the oldest go, counted once in the next drain; lastSeenTimeStamp advances to the newest taken."""
    import types

    import sysprof.sampling.portable.nvml_samples as ns

    monkeypatch.setattr(ns, "KEPT", 5)
    asked = []

    class Err(Exception):
        def __init__(self, value):
            self.value = value

    def get_samples(h, typ, last_seen):
        asked.append((typ, last_seen))
        if typ != 0:
            raise Err(3)  # NOT_SUPPORTED
        base = last_seen + 1
        return 1, [types.SimpleNamespace(timeStamp=base + i, sampleValue=types.SimpleNamespace(uiVal=1000 * (base + i)))
                   for i in range(4)]

    pynvml = types.SimpleNamespace(NVMLError=Err, nvmlDeviceGetSamples=get_samples,
                                   nvmlErrorString=lambda c: b"Not Supported")
    state = types.SimpleNamespace(pynvml=pynvml, indices=[0], handles=["h0"], lost=[False],
                                  timed=lambda what, dev, fn, *a: fn(*a))
    r = ns.DriverSampleReader(state)
    r.last_seen[0] = 100  # as if the sampler had opened at t = 100 us
    r.read(0.0)
    r.read(1.0)  # 8 samples in all: 101..108 us; the buffer keeps the newest 5
    series, index, t_ns, values, dropped, absent, cpu_ns, reads = r.take()
    assert series[0] == "gpu/0/power_samples_watts" and index == [0] * 5
    assert t_ns == [104_000, 105_000, 106_000, 107_000, 108_000] and values == [104.0, 105.0, 106.0, 107.0, 108.0]
    assert dropped == 3 and reads == 2
    assert [a for a in asked if a[0] == 0] == [(0, 100), (0, 104)]  # lastSeen: the newest taken
    assert [a[0] for a in asked] == [0, 1, 2, 5, 6, 0]  # refused types are not asked again
    assert set(absent) == {f"gpu/0/{k.name}" for k in SERIES[1:]}
    assert r.take()[4] == 0  # counted once


@needs_native
def test_native_side_buffer_drops_the_oldest_and_counts(fake):  # noqa: F811
    """The native buffer (csrc/gpu/nvml_samples.cpp, kSamplesKept = KEPT entries) past its capacity: the fake hands
    out 40000 samples per type and call (FAKE_NVML_SAMPLES_BURST), 160000 per read of the four served types; the
    buffer keeps the newest KEPT in the order they came, and counts the rest as dropped, exactly."""
    from sysprof.sampling.gpu_samples import KEPT
    from sysprof.sampling.sampler import _native

    n = 40000
    f = fake(devices=1, samples_burst=n)
    before_us = time.time_ns() // 1000
    s = gpu_sampler("native", interval=0.01)
    s.start()
    after_us = time.time_ns() // 1000
    wait_for(lambda: f.samples_returned() >= 4 * n)  # a whole read: more than the buffer holds
    s.stop()
    total = f.samples_returned()
    reads, rest = divmod(total, 4 * n)
    assert reads >= 1 and rest == 0 and 4 * n > KEPT
    (token,) = {d["driver_samples"] for d in s._impl.devices}
    got = _native.nvml_drain_samples(int(token))
    series = list(got["series"])
    sm, mem = series.index("gpu/0/sm_clock_samples_hz"), series.index("gpu/0/memory_clock_samples_hz")
    # pushed per read in the table's order (power, utilisation, SM clock, memory clock), each oldest first: the last
    # KEPT are the last read's memory clock samples, after the newest KEPT - n of its SM clock samples
    tail = KEPT - n
    assert got["dropped"] == total - KEPT
    assert list(got["index"]) == [sm] * tail + [mem] * n
    t_us = [t // 1000 for t in got["t_ns"]]
    assert all(t % 1000 == 0 for t in got["t_ns"])
    w = t_us[tail] - (reads - 1) * n - 1  # lastSeen at open: the wall clock then
    assert before_us <= w <= after_us
    newest = w + reads * n
    assert t_us == list(range(newest - tail + 1, newest + 1)) + list(range(newest - n + 1, newest + 1))
    assert list(got["values"]) == ([expected_sample("sm_clock_samples_hz", t) for t in t_us[:tail]] +
                                   [expected_sample("memory_clock_samples_hz", t) for t in t_us[tail:]])
    again = _native.nvml_drain_samples(int(token))
    assert list(again["index"]) == [] and again["dropped"] == 0  # counted once


def test_composer_path_counters_recording_windows_and_late():
    """The Composer path (the session's driver samples producer into Composer's sink): record's builder's samples,
    only those taken while recording, with the training timestamp then, in time order, NaN left out; those of a
    cycle already saved are late; totals exact."""
    from sysprof.pipeline import Chunk
    from sysprof.pipeline.producers import DriverSamples as Producer
    from sysprof.profiler.composer_sink import ComposerSink
    from sysprof.sampling.sampler import Batch

    drains = [DriverSamples({"gpu/0/power_samples_watts": (np.array([1000, 3000, 5000, 7000]),
                                                           np.array([250.0, np.nan, 252.0, 253.0])),
                             "gpu/0/sm_clock_samples_hz": (np.array([4000]), np.array([1.5e9]))},
                            dropped=2, absent={"gpu/1/power_samples_watts": "why"}),
              DriverSamples({"gpu/0/power_samples_watts": (np.array([5500, 9000]), np.array([254.0, 255.0]))})]

    class Stub:
        def drain_gpu_samples(self):
            return drains.pop(0)

    got = []

    class Handler:
        def process_system_counter(self, **kw):
            got.append((kw["name"], kw["wall_clock_time_ns"], kw["timestamp"], kw["values"], kw["units"]))

    sink = ComposerSink(lambda: [Handler()], None, now=lambda: 6000, arrival_ns=10**10)
    for t, rec, stamp in ((2000, True, "A"), (6000, False, "B"), (8000, True, "C")):
        sink.observe(t, rec, stamp)
    producer = Producer(Stub(), 0)
    empty = Batch(np.zeros(0, dtype=np.int64), np.zeros((0, 0)), ())

    def take(cycle_end=False):  # one drain (cycle_end: the cycle's file is saved then, at now = 6000)
        got.clear()
        sink.take(Chunk(empty, producer.take(empty, None), 0, cycle_end=cycle_end))
        return list(got)

    watts, hz = {"gpu/0/power_samples_watts": "W"}, {"gpu/0/sm_clock_samples_hz": "Hz"}
    assert take(cycle_end=True) == [("gpu/0/sm_clock_samples_hz", 4000, "A", {"sm_clock_samples_hz": 1.5e9}, hz),
                                    ("gpu/0/power_samples_watts", 5000, "A", {"power_samples_watts": 252.0}, watts)]
    assert take() == [("gpu/0/power_samples_watts", 9000, "C", {"power_samples_watts": 255.0}, watts)]
    summary = dict(producer.samples.summary(), late=sink.late)
    assert summary == {"samples": 7, "dropped": 2, "absent": {"gpu/1/power_samples_watts": "why"}, "late": 1}


def test_composer_path_never_raises_and_handlers_get_their_calls(caplog):
    """A failing drain gives nothing (logged once); Composer's handlers (no process_system_counter) and the base
    class's default get plain counters; a handler that raises is reported and skipped, the others still served."""
    from sysprof.pipeline import Session
    from sysprof.pipeline.producers import DriverSamples as Producer
    from sysprof.profiler.composer_sink import ComposerSink, send_counters
    from sysprof.profiler.trace_handler import TraceHandler
    from sysprof.sampling.sampler import Batch
    from sysprof.trace import events as ev

    class Failing:
        channels = ()

        def drain(self):
            return Batch(np.zeros(0, dtype=np.int64), np.zeros((0, 0)), ())

        def drain_gpu_samples(self):
            raise RuntimeError("gone")

    counted = []

    class Counting:
        def process_system_counter(self, **kw):
            counted.append(kw)

    sink = ComposerSink(lambda: [Counting()], None, now=lambda: 0, arrival_ns=1)
    sink.observe(0, True, "ts")
    session = Session(Failing(), [sink], [Producer(Failing(), 0)])
    session.pump()
    session.pump()
    assert counted == [] and not session.failures.keys() - {"gpu driver samples"}
    assert sum("driver samples failed" in r.getMessage() for r in caplog.records) == 1

    got = []

    class Composerish:
        def process_counter_event(self, **kw):
            got.append(("plain", kw))

    class Ours(TraceHandler):
        def process_counter_event(self, **kw):
            got.append(("base", kw))

    class Broken(TraceHandler):
        def process_system_counter(self, **kw):
            raise ValueError("broken")

    counter = (ev.counter("gpu/0/power_samples_watts", 5_000, 0, {"power_samples_watts": 251.0}), "ts",
               {"gpu/0/power_samples_watts": "W"})
    with pytest.warns(RuntimeWarning, match="Broken raised ValueError"):
        send_counters([Broken(), Composerish(), Ours()], [counter])
    kw = {"name": "gpu/0/power_samples_watts", "categories": ("gpu",), "timestamp": "ts",
          "wall_clock_time_ns": 5_000, "values": {"power_samples_watts": 251.0}}
    assert got == [("plain", kw), ("base", kw)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("suffix", [".json", ".pftrace"])
def test_composer_path_writes_driver_samples_at_their_timestamps(fake, fresh_pynvml, tmp_path, backend,  # noqa: F811
                                                                suffix, recording_handler, monkeypatch,
                                                                cycle_trace_handler):
    """sysprof.Profiler (its SystemProfiler) writes the driver samples as record does: one counter per series at
    the driver's own timestamps, exact values, units declared once in the file; a plain handler gets the same
    counters; the totals in SystemProfiler.stats."""
    from sysprof import Profiler
    from sysprof.profiler import system_profiler
    from sysprof.report import TraceData
    from sysprof.trace.load import load_events
    from sysprof.trace.schema import UNITS_EVENT

    out = tmp_path / "traces"
    h = cycle_trace_handler(suffix, out)
    plain = recording_handler  # the base class's process_system_counter: plain counters
    f = fake()
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[h, plain], sys_prof_cpu=False, sys_prof_gpu=True,
                    sys_prof_stats_thread_interval_seconds=0.01)
    sp = prof.system_profiler
    sp.backend = backend
    observed = []  # the profiler's observation times: the first one starts the recording
    monkeypatch.setattr(system_profiler, "_now_ns", lambda: observed.append(time.time_ns()) or observed[-1])
    prof.start()
    drained = []  # every sample drained (the reader opens with the sampler, before the first observation)
    real = sp.sampler.drain_gpu_samples
    sp.sampler.drain_gpu_samples = lambda: drained.append(real()) or drained[-1]

    def drained_enough():
        sp._drain()  # what the profiler's drains do, now (the session's pump)
        return sum(len(t) for d in drained for t, _ in d.values()) >= 4 * 40  # more than one read

    wait_for(drained_enough)
    prof.step()
    prof.stop()
    (path,) = sorted(out.glob(f"ep*{suffix}"))
    events = load_events(str(path))
    data = TraceData(events)
    n = 0
    for series in SERVED:
        ts_us, values = data.series[series]
        t_ns = np.asarray(ts_us, dtype=np.int64) * 1000
        _check_exact(f, series, t_ns, np.asarray(values, dtype=float))
        assert data.units[series] == unit_of(series)
        declared = [e for e in events if e.get("name") == UNITS_EVENT and series in e["args"]["units"]]
        assert len(declared) == 1  # once per file
        calls = [kw for kind, kw in plain.calls if kind == "counter" and kw["name"] == series]
        assert [c["wall_clock_time_ns"] for c in calls] == t_ns.tolist()
        assert [c["values"] for c in calls] == [{series.rsplit("/", 1)[-1]: v} for v in values]
        assert all(c["categories"] == ("gpu",) for c in calls)
        n += len(t_ns)
    assert not any(k.endswith("memory_utilization_samples_percent") for k in data.series)
    taken = np.concatenate([t for d in drained for t, _ in d.values()])
    assert n == int((taken >= observed[0]).sum()) > 0  # every one taken since recording began, none before
    assert sp.stats["gpu_samples"] == {"samples": len(taken), "dropped": 0, "absent": NOT_SUPPORTED, "late": 0}
