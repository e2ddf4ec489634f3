"""The driver's own buffered GPU samples (issue 13, item 4: nvmlDeviceGetSamples): read on the GPU reader thread
(csrc/gpu/nvml_samples.cpp; pynvml's twin sysprof/sampling/portable/nvml_samples.py) with lastSeenTimeStamp, kept
in a side buffer, drained by Sampler.drain_gpu_samples() and written by record at the driver's timestamps; against
the fake NVML's exact samples (tests/fake_nvml/fake_nvml.c: sample k at W + 20000 k us)."""
import sys
import time

import numpy as np
import pytest

from cli_support import run_cli
from sysprof.sampling.gpu_samples import SERIES, SampleEvents, DriverSamples, unit_of

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
    se = SampleEvents(lambda t: t // 1000, 7)
    ev = se.events(d)
    assert ev == [
        {"name": "sysprof units", "ph": "M", "pid": 7, "tid": 0,
         "args": {"units": {"gpu/0/power_samples_watts": "W", "gpu/0/sm_clock_samples_hz": "Hz"}}},
        {"name": "gpu/0/power_samples_watts", "ph": "C", "ts": 3, "pid": 7, "tid": 0,
         "args": {"power_samples_watts": 251.0}},
        {"name": "gpu/0/sm_clock_samples_hz", "ph": "C", "ts": 4, "pid": 7, "tid": 0,
         "args": {"sm_clock_samples_hz": 1.5e9}}]  # the NaN sample is left out
    assert se.events(DriverSamples({"gpu/0/power_samples_watts": (np.array([6000]), np.array([252.0]))})) == [
        {"name": "gpu/0/power_samples_watts", "ph": "C", "ts": 6, "pid": 7, "tid": 0,
         "args": {"power_samples_watts": 252.0}}]  # declared once
    assert se.summary() == {"samples": 4, "dropped": 2, "absent": {"gpu/1/power_samples_watts": "why"}}
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
