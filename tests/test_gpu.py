"""GPU channels against a fake libnvidia-ml.so.1 (tests/fake_nvml/fake_nvml.c), built here with cc.

Each test gets its own copy of the fake (a separate file is a separate library instance in the
process, with fresh call counters). Level values follow the fake's formulas exactly; counters grow
linearly with CLOCK_MONOTONIC, so rates are compared with the measured interval's jitter in mind.
The fixtures and the fake's formulas: tests/fake_nvml/support.py.
"""
from __future__ import annotations

import gc
import math
import os
import re
import signal
import time

import numpy as np
import pytest

import sysprof
from sysprof.sampling.sampler import native_available

from fake_nvml.support import (  # noqa: F401 - fake_builds, fake and fresh_pynvml are fixtures
    ALL_CHANNELS, DEVICES, EVENT_CHANNELS, GPU_CHANNELS, METRIC_CHANNELS, GiB, NVLINK_NOTE, RATE_REL, assert_levels, expected_levels, fake, fake_builds,
    fresh_pynvml, gpu_sampler, needs_native, quiet, wait_for)


@needs_native
def test_native_exact_values(fake):
    f = fake()
    s = gpu_sampler("native")
    assert s.channels == tuple(f"gpu/{d}/{c}" for d in (0, 1) for c in ALL_CHANNELS)
    assert s.devices == DEVICES
    assert s.errors == {"gpu": NVLINK_NOTE}
    rows = []
    for _ in range(3):
        time.sleep(0.05)
        rows.append(s.sample())
    # Getter calls so far: 1 when opened (the reader's priming reading), then one per sample(): the
    # reader reads only when asked (sample() shares it; nothing else runs).
    for k, row in enumerate(rows):
        n = 2 + k
        assert_levels(row, 0, expected_levels(0, n))
        # Device 1 refuses the instant-power field: nvmlDeviceGetPowerUsage answers instead.
        assert_levels(row, 1, expected_levels(1, n, field_power=False))
    for k, row in enumerate(rows):
        for d, (tx, rx) in enumerate(((1e9, 2e9), (3e9, 4e9))):
            assert row[f"gpu/{d}/pcie_tx_bytes_per_second"] == pytest.approx(tx, rel=RATE_REL)
            assert row[f"gpu/{d}/pcie_rx_bytes_per_second"] == pytest.approx(rx, rel=RATE_REL)
        # All 18 links (scopeId UINT_MAX), KiB counters turned into bytes.
        assert row["gpu/0/nvlink_tx_bytes_per_second"] == pytest.approx(25 * GiB, rel=RATE_REL)
        assert row["gpu/0/nvlink_rx_bytes_per_second"] == pytest.approx(50 * GiB, rel=RATE_REL)
        assert math.isnan(row["gpu/1/nvlink_tx_bytes_per_second"])
        assert math.isnan(row["gpu/1/nvlink_rx_bytes_per_second"])
        for d, watts in ((0, 250.0), (1, 150.0)):
            e = row[f"gpu/{d}/energy_joules"]
            assert e > 1000.0 and e == round(e, 3)  # 1e6 mJ at the fake's start, in mJ steps
            # The first counter movement has no start; from the second on, power between movements.
            if k == 0:
                assert math.isnan(row[f"gpu/{d}/energy_power_watts"])
            else:
                assert row[f"gpu/{d}/energy_power_watts"] == pytest.approx(watts, rel=RATE_REL)
    assert rows[2]["gpu/0/energy_joules"] > rows[1]["gpu/0/energy_joules"]


@needs_native
def test_refused_metric_asked_once(fake):
    f = fake()
    s = gpu_sampler("native")
    for _ in range(3):
        s.sample()
    assert f.calls("nvmlDeviceGetFieldValues", 1) == 1 + 3  # open (priming), 3 sample() calls
    s.start()
    wait_for(lambda: f.calls("nvmlDeviceGetFieldValues", 1) >= 1 + 3 + 10)  # the reader, for the thread
    s.stop()
    wait_for(lambda: quiet(f, "nvmlDeviceGetFieldValues", 1))  # the reader goes idle
    ticks1 = f.calls("nvmlDeviceGetFieldValues", 1)
    # Device 1's NOT_SUPPORTED entries (in an otherwise successful call): asked exactly once.
    for field in (186, 83, 138, 139):
        assert f.calls(f"field:{field}", 1) == 1, field
    assert f.calls("field:197", 1) == ticks1
    # ... and their fallbacks every time instead; device 0 never needs them.
    assert f.calls("nvmlDeviceGetPowerUsage", 1) == ticks1
    assert f.calls("nvmlDeviceGetTotalEnergyConsumption", 1) == ticks1
    assert f.calls("field:186", 0) == f.calls("nvmlDeviceGetFieldValues", 0)
    assert f.calls("nvmlDeviceGetPowerUsage", 0) == 0
    assert f.calls("nvmlDeviceGetTotalEnergyConsumption", 0) == 0
    # The legacy getters stay unused where the versioned ones answer.
    assert f.calls("nvmlDeviceGetMemoryInfo", 0) == 0 and f.calls("nvmlDeviceGetTemperature", 0) == 0


@needs_native
def test_library_without_optional_symbols(fake):
    f = fake("minimal")
    s = gpu_sampler("native")
    time.sleep(0.02)
    row = s.sample()
    for d in (0, 1):  # the 2nd reading: priming at open, then this sample()
        assert_levels(row, d, expected_levels(d, 2, v2=False, field_power=False))
        for c in ("energy_joules", "energy_power_watts", "pcie_tx_bytes_per_second", "pcie_rx_bytes_per_second",
                  "nvlink_tx_bytes_per_second", "nvlink_rx_bytes_per_second"):
            assert math.isnan(row[f"gpu/{d}/{c}"]), c
    assert f.calls("nvmlDeviceGetTemperature", 0) == 2  # the legacy getter, since V is missing
    err = s.errors["gpu"]
    assert "gpu/0: energy_joules, energy_power_watts read NaN (nvmlDeviceGetTotalEnergyConsumption: " \
           "NVML_ERROR_FUNCTION_NOT_FOUND)" in err
    # PCIe: neither the count fields nor their fallback, the driver's throughput getter
    assert "gpu/1: pcie_tx_bytes_per_second read NaN (nvmlDeviceGetPcieThroughput(NVML_PCIE_UTIL_TX_BYTES): " \
           "NVML_ERROR_FUNCTION_NOT_FOUND)" in err
    # Power, memory and temperature: the fallbacks answered, so no note.
    assert not [n for n in err.split("; ") if n.split(": ")[1].startswith(("power_watts", "memory", "temperature"))]
    old = [n for n in err.split("; ") if n.split(": ")[1].startswith(("energy", "pcie_tx", "pcie_rx", "nvlink"))]
    assert len(old) == 10  # energy, pcie tx/rx, nvlink tx/rx on both devices
    # The library has no health or GPM calls either (tests/test_gpu_health.py): 10 health notes per device (the
    # clock reasons once, for both names), and the GPM channels absent.
    assert len(err.split("; ")) == 10 + 2 * 10 + 2
    assert s.channels == tuple(f"gpu/{d}/{c}" for d in (0, 1) for c in GPU_CHANNELS)


@needs_native
def test_lost_device_others_and_host_continue(fake):
    # Device 1 makes 5 calls at discovery (GPM support, name, UUID, PCI, MIG mode), 19 in the priming reading (8, a GPM
    # sample and the 10 slow health rows), then 10 per reading (8 and 2 GPM): lost during the reader's 4th reading.
    f = fake(lost_after=46)
    s = sysprof.Sampler(gpu=True, interval=0.001, cpu=False, memory=True, disk=False, net=False,
                        backend="native")
    s.start()
    wait_for(lambda: "gpu/1: lost (" in s.errors.get("gpu", ""))
    time.sleep(0.15)
    calls_at_loss = f.calls("nvmlDeviceGetFieldValues", 1) + f.calls("nvmlDeviceGetUtilizationRates", 1)
    taken = s.stats["taken"]
    wait_for(lambda: s.stats["taken"] > taken + 50)  # rows after the loss, however busy the machine
    s.stop()
    b = s.drain()
    assert len(b) > 50
    lost_col = b.column("gpu/1/utilization_percent")
    # The rows copy the reader's readings: device 1 reads finite until the reading that lost it.
    first_nan = int(np.argmax(np.isnan(lost_col)))
    assert np.isfinite(lost_col[0]) and np.isnan(lost_col[first_nan:]).all()
    for c in ALL_CHANNELS:
        assert np.isnan(b.column(f"gpu/1/{c}")[first_nan:]).all(), c
    assert np.isfinite(b.column("gpu/0/utilization_percent")).all()
    assert np.isfinite(b.column("gpu/0/power_watts")).all()
    assert np.isfinite(b.column("memory/total_bytes")).all()
    assert "gpu/1: lost (" in s.errors["gpu"]
    # A lost device is not asked again, by the thread or by sample().
    row = s.sample()
    assert math.isnan(row["gpu/1/power_watts"]) and row["gpu/0/power_watts"] > 0
    assert f.calls("nvmlDeviceGetFieldValues", 1) + f.calls("nvmlDeviceGetUtilizationRates", 1) == calls_at_loss


INIT_FAILURES = [(9, "NVML_ERROR_DRIVER_NOT_LOADED"), (18, "NVML_ERROR_LIB_RM_VERSION_MISMATCH"),
                 (4, "NVML_ERROR_NO_PERMISSION")]


@needs_native
@pytest.mark.parametrize("code,name", INIT_FAILURES)
def test_init_failure_native(fake, code, name):
    fake(init_error=code)
    s = sysprof.Sampler(gpu=True, interval=0.001, cpu=False, memory=True, disk=False, net=False,
                        backend="native")
    assert not [c for c in s.channels if c.startswith("gpu/")]
    assert s.errors["gpu"].startswith(f"nvmlInit_v2 failed: {name} (")
    assert s.devices == []
    s.start()
    assert s.wait_next(timeout=60, after=1) is not None  # host sampling unaffected: two rows (however busy)
    s.stop()
    b = s.drain()
    assert len(b) >= 2 and np.isfinite(b.column("memory/total_bytes")).all()


@pytest.mark.parametrize("backend", ["native", "psutil"])
def test_no_library(tmp_path, monkeypatch, backend, fresh_pynvml):
    if backend == "native" and not native_available()[0]:
        pytest.skip("native extension unavailable")
    missing = tmp_path / "nowhere" / "libnvidia-ml.so.1"
    monkeypatch.setenv("SYSPROF_NVML_LIBRARY", str(missing))
    s = sysprof.Sampler(gpu=True, interval=0.001, cpu=False, memory=True, disk=False, net=False, backend=backend)
    assert "memory/total_bytes" in s.channels and not [c for c in s.channels if c.startswith("gpu/")]
    assert f"NVML library not loadable ({missing})" in s.errors["gpu"]


@pytest.mark.parametrize("code,name", INIT_FAILURES)
def test_init_failure_pynvml(fake, fresh_pynvml, code, name):
    fake(init_error=code)
    s = sysprof.Sampler(gpu=True, interval=0.001, cpu=False, memory=True, disk=False, net=False,
                        backend="psutil")
    assert not [c for c in s.channels if c.startswith("gpu/")]
    assert f"nvmlInit failed: {name} (" in s.errors["gpu"]


@needs_native
def test_stop_returns_while_a_call_hangs(fake):
    # The 5th utilization call on device 0 (the 1st primes at open) blocks for 3 s, on the reader thread.
    f = fake(hang_at=5, hang_ms=3000)
    s = gpu_sampler("native", memory=True)
    s.start()
    wait_for(lambda: f.hanging() == 1)
    s.stop()  # the sampling thread never calls NVML: nothing to wait for, nothing abandoned
    assert f.hanging() == 1  # returned while the call is still blocked
    assert not s.running and "blocked in this source" not in s.errors.get("gpu", "")
    s.start()  # no stuck thread: a restart is allowed
    s.stop()
    # sample() does not wait for the blocked call either: NaN, and errors names the call.
    wait_for(lambda: time.time_ns() - f.hang_window()[0] > 400_000_000)
    row = s.sample()
    assert f.hanging() == 1
    assert all(math.isnan(row[c]) for c in s.channels if c.startswith("gpu/"))
    assert row["memory/total_bytes"] > 0
    assert re.fullmatch(r"gpu/0: nvmlDeviceGetUtilizationRates blocked for \d+\.\d s; "
                        r"gpu readings older than 251 ms read NaN", s.errors["gpu"])
    del s, row
    gc.collect()
    # The reader is abandoned, not waited for: the stuck call still holds the library ...
    assert f.hanging() == 1 and f.refcount() == 1 and f.calls("nvmlShutdown") == 0
    wait_for(lambda: f.refcount() == 0)
    # ... and NVML is shut down exactly once, by the reader, after the call returned.
    assert f.calls("nvmlShutdown") == 1 == f.calls("nvmlInit_v2")
    assert f.unsafe_shutdowns() == 0 and f.uninitialized_calls() == 0


@needs_native
def test_no_new_call_once_dropped(fake):
    # A slow driver: every call about a device takes 100 ms, so one reading (some 25 calls) takes seconds.
    f = fake(hang_call="*", hang_at=-1, hang_ms=100, devices=1)
    s = gpu_sampler("native")
    wait_for(lambda: f.calls("nvmlDeviceGetUtilizationRates", 0) >= 1)  # a reading has begun
    del s
    gc.collect()  # the reader is stopped in the middle of that reading
    made = f.all_calls() - f.releases()  # the call in flight now included
    wait_for(lambda: f.refcount() == 0)  # the reader has ended: NVML is shut down
    # Nothing asked after the stop but what gives resources back; the GPM samples are freed.
    assert f.all_calls() - f.releases() == made
    assert f.gpm_live() == 0 and f.calls("nvmlShutdown") == 1
    assert f.unsafe_shutdowns() == 0 and f.uninitialized_calls() == 0


def _collect(s, f, batches: list, seen: list) -> None:
    """Drains s while the fake's hang lasts, noting (wall ns, errors["gpu"]) as it goes."""
    wait_for(lambda: f.hanging() == 1)
    while f.hanging():
        seen.append((time.time_ns(), s.errors.get("gpu", "")))
        batches.append(s.drain())
        time.sleep(0.01)


def _columns(batches: list, names) -> tuple:
    ts = np.concatenate([b.timestamps_ns for b in batches])
    cols = {n: np.concatenate([b.column(n) for b in batches]) for n in names}
    return ts, cols


def _check_hang(s, f, batches, seen, *, host: str, margin_ns: int, late_ms: str) -> None:
    begin, end = f.hang_window()
    assert 0 < begin < end
    # errors named the call while it was blocked, with no more time than had passed.
    blocked = [(t, m) for t, m in seen if "blocked" in m]
    assert blocked
    for t, m in blocked:
        got = re.fullmatch(r"gpu/0: nvmlDeviceGetUtilizationRates blocked for (\d+\.\d) s; "
                           rf"gpu readings older than {late_ms} ms read NaN", m)
        assert got, m
        assert 0.2 <= float(got.group(1)) <= (t - begin) / 1e9 + 0.01, (m, t - begin)
    # ... and says that it returned once it did.
    wait_for(lambda: "gpu/0: nvmlDeviceGetUtilizationRates returned after" in s.errors.get("gpu", ""))
    assert re.match(r"gpu/0: nvmlDeviceGetUtilizationRates returned after 3\.\d s", s.errors["gpu"])
    # Readings resume: a row after the hang with GPU values.
    def resumed():
        batches.append(s.drain())
        ts, cols = _columns(batches, ["gpu/0/utilization_percent"])
        return bool(np.isfinite(cols["gpu/0/utilization_percent"][ts > end]).any())
    wait_for(resumed)
    s.stop()
    batches.append(s.drain())
    gpu = [c for c in s.channels if c.startswith("gpu/")]
    ts, cols = _columns(batches, gpu + [host])
    # Host rows throughout the hang, with values; the GPU ones are late by then and read NaN.
    inside = (ts >= begin + margin_ns) & (ts < end)
    assert inside.any()
    assert np.isfinite(cols[host][inside]).all()
    for c in gpu:
        assert np.isnan(cols[c][inside]).all(), c


@needs_native
def test_hung_call_keeps_host_rows(fake):
    f = fake(hang_at=20, hang_ms=3000)  # the reader's 19th reading blocks for 3 s
    s = sysprof.Sampler(interval=0.005, cpu=True, memory=True, disk=False, net=False, gpu=True, backend="native",
                        gpu_interval=0.005)  # the reader at the sampler's interval (late: 5 + 250 ms)
    s.start()
    batches, seen = [], []
    _collect(s, f, batches, seen)
    # Readings older than interval + 250 ms read NaN: every row from 300 ms into the hang on.
    _check_hang(s, f, batches, seen, host="memory/used_bytes", margin_ns=300_000_000, late_ms="255")
    ts, cols = _columns(batches, ["cpu/percent"])
    begin, end = f.hang_window()
    assert np.isfinite(cols["cpu/percent"][(ts >= begin + 300_000_000) & (ts < end)]).all()
    assert f.unsafe_shutdowns() == 0


@pytest.mark.parametrize("backend", ["native", "psutil"])
def test_every_device_call_hangs(fake, fresh_pynvml, backend):
    if backend == "native" and not native_available()[0]:
        pytest.skip("native extension unavailable")
    f = fake(hang_call="*", hang_at=-1, hang_ms=3000)
    s = sysprof.Sampler(interval=0.005, cpu=False, memory=True, disk=False, net=False, gpu=True, backend=backend)
    # The constructor returned while the first handle lookup is still blocked, without the GPUs.
    assert f.hanging() == 1
    assert "memory/used_bytes" in s.channels and not [c for c in s.channels if c.startswith("gpu/")]
    assert re.search(r"gpu/0: nvmlDeviceGetHandleByIndex_v2 blocked for \d+\.\d s at open; gpu source left out",
                     s.errors["gpu"]), s.errors["gpu"]
    s.start()
    wait_for(lambda: s.stats["buffered"] > 0)
    s.stop()
    b = s.drain()
    assert len(b) and np.isfinite(b.column("memory/used_bytes")).all()
    del s, b
    gc.collect()
    # The reader gives up after the call returns, and shuts NVML down.
    wait_for(lambda: f.refcount() == 0 and f.hanging() == 0)
    assert f.calls("nvmlShutdown") == 1 and f.unsafe_shutdowns() == 0


@pytest.mark.parametrize("backend", ["native", "psutil"])
def test_describe_hang_lays_out_channels(fake, fresh_pynvml, backend):
    if backend == "native" and not native_available()[0]:
        pytest.skip("native extension unavailable")
    f = fake(hang_call="nvmlDeviceGetName", hang_at=-1, hang_ms=2000)
    s = gpu_sampler(backend)
    # The layout is known (count and handles): the channels are there, the descriptions are not yet.
    assert f.hanging() == 1
    assert s.channels == tuple(f"gpu/{d}/{c}" for d in (0, 1) for c in ALL_CHANNELS)
    assert s.devices == [{"index": d, "name": "", "uuid": "", "pci_bus_id": ""} for d in (0, 1)]
    if backend == "native":
        assert re.match(r"gpu/0: nvmlDeviceGetName blocked for \d+\.\d s at open; gpu channels read NaN until "
                        r"it returns", s.errors["gpu"]), s.errors["gpu"]
    row = s.sample()  # no reading yet, and no waiting for the blocked call
    assert f.hanging() == 1
    assert all(math.isnan(row[c]) for c in s.channels)
    assert re.match(r"gpu/[01]: nvmlDeviceGetName blocked for \d+\.\d s; gpu readings older than \d+ ms read NaN",
                    s.errors["gpu"]), s.errors["gpu"]
    wait_for(lambda: not math.isnan(s.sample()["gpu/0/memory_total_bytes"]))
    row = s.sample()
    assert row["gpu/0/memory_total_bytes"] == 80 * GiB and row["gpu/1/memory_total_bytes"] == 96 * GiB


@needs_native
def test_reader_reads_only_when_asked(fake):
    f = fake()
    s = gpu_sampler("native")

    def util():
        return f.calls("nvmlDeviceGetUtilizationRates", 0)
    assert util() == 1  # the priming reading, at open
    time.sleep(0.2)
    assert util() == 1  # an idle sampler does not poll
    s.sample()
    s.sample()
    assert util() == 3  # one reading per synchronous sample()
    s.start()
    wait_for(lambda: util() > 13)  # the reader follows the sampling thread
    s.stop()
    wait_for(lambda: quiet(f, "nvmlDeviceGetUtilizationRates", 0))  # and stops once it stopped
    n = util()
    time.sleep(0.3)
    assert util() == n


@pytest.mark.parametrize("backend", ["native", "psutil"])
def test_fork_child_makes_its_own_gpu_sampler(fake, fresh_pynvml, backend):
    if backend == "native" and not native_available()[0]:
        pytest.skip("native extension unavailable")
    fake()
    s = gpu_sampler(backend)
    s.start()
    pid = os.fork()
    if pid == 0:  # the child: the parent's reader thread is not here; a new sampler has its own
        code = 1
        try:
            signal.alarm(30)
            c = gpu_sampler(backend)
            row = c.sample()
            code = 0 if row["gpu/0/memory_total_bytes"] == 80 * GiB and c.devices == DEVICES else 2
            del c
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    s.drain()
    wait_for(lambda: s.stats["buffered"] > 0)  # the parent's sampler goes on
    s.stop()
    assert np.isfinite(s.drain().column("gpu/0/memory_total_bytes")[-1])


@pytest.mark.skipif(not native_available()[0], reason="compares with the native source's rule")
def test_pynvml_hung_call_keeps_host_rows(fake, fresh_pynvml):
    f = fake(hang_at=10, hang_ms=3000)
    s = sysprof.Sampler(interval=0.005, cpu=False, memory=True, disk=False, net=False, gpu=True, backend="psutil",
                        gpu_interval=0.005)  # the reader at the sampler's interval (late: 5 + 250 ms)
    assert s.backend == "psutil"
    s.start()
    batches, seen = [], []
    _collect(s, f, batches, seen)
    # Readings older than the time since the previous row + 250 ms read NaN: every row 1 s into the hang.
    _check_hang(s, f, batches, seen, host="memory/used_bytes", margin_ns=1_000_000_000, late_ms=r"\d+")


@needs_native
def test_shutdown_after_normal_stop(fake):
    f = fake()
    s = gpu_sampler("native")
    s.start()
    time.sleep(0.02)
    s.stop()
    assert "abandoned" not in s.errors.get("sampler", "") + s.errors.get("gpu", "")  # joined, not given up on
    s.start()  # restart allowed
    time.sleep(0.02)
    s.stop()
    assert f.refcount() == 1
    del s
    gc.collect()
    assert f.refcount() == 0 and f.calls("nvmlShutdown") == 1 and f.unsafe_shutdowns() == 0


def _rows(s, n=2):
    rows = []
    for _ in range(n):
        time.sleep(0.05)
        rows.append(s.sample())
    return rows


@needs_native
@pytest.mark.parametrize("kind", ["full", "minimal"])
def test_native_and_pynvml_agree(fake, fresh_pynvml, kind):
    f = fake(kind, static=1)  # levels independent of how often each reader calls
    native = gpu_sampler("native")
    py = gpu_sampler("psutil")
    assert py.backend == "psutil"
    assert py.channels == native.channels
    assert py.devices == native.devices == DEVICES
    assert set(py.errors["gpu"].split("; ")) == set(native.errors["gpu"].split("; "))
    # Rates: the fake's counters follow its clock, the readers' rates their own read times; a preemption
    # between the two is a smaller share of a 0.5 s gap. The readers alternate, so that the energy counters
    # (250 W on device 0) are read moments apart, not a whole series apart.
    pairs = []
    for _ in range(2):
        time.sleep(0.5)
        t0 = time.time()
        a = native.sample()
        t1 = time.time()
        b = py.sample()
        pairs.append((a, b, (t0, t1), (t1, time.time())))
    for a, b, *spans in pairs:
        for d in (0, 1):  # each reading's time: inside the sample() call that asked for it (a fresh reading)
            for row, (lo, hi) in zip((a, b), spans):
                assert lo - 1e-6 <= row[f"gpu/{d}/reading_time_seconds"] <= hi + 1e-6
        for c in native.channels:
            x, y = a[c], b[c]
            if c.endswith("reading_time_seconds"):
                continue  # checked above
            if c.endswith(("per_second", "energy_power_watts")):
                assert (math.isnan(x) and math.isnan(y)) or x == pytest.approx(y, rel=2 * RATE_REL), c
            elif c.endswith("energy_joules"):
                assert (math.isnan(x) and math.isnan(y)) or abs(x - y) < 200.0, c  # read at different times
            elif c.endswith("seconds_total"):  # violation time: at most half the fake's clock, read apart
                assert (math.isnan(x) and math.isnan(y)) or abs(x - y) < 1.0, c
            else:
                assert (math.isnan(x) and math.isnan(y)) or x == y, (c, x, y)
    if kind == "full":
        # The pynvml reader also asks a refused field once (two readers share what they learn).
        assert f.calls("field:186", 1) == 2  # once per path
    row = _rows(py, 1)[0]
    assert not math.isnan(row["gpu/0/power_watts"])
    del native, py
    gc.collect()
    assert f.unsafe_shutdowns() == 0


@needs_native
def test_thread_rows_and_cost(fake, capsys):
    fake()
    s = gpu_sampler("native")
    s.start()
    deadline = time.monotonic() + 30  # 0.1 s of 1 ms ticks, however slowly a busy machine runs them
    while s.stats["taken"] <= 100 and time.monotonic() < deadline:
        time.sleep(0.02)
    s.stop()
    b = s.drain()
    assert len(b) > 100
    assert np.isfinite(b.column("gpu/0/utilization_percent")).all()
    # The first rows may copy the priming reading, whose rates have no start yet (NaN); from the
    # reader's first reading on, every row has them.
    tx = b.column("gpu/1/pcie_tx_bytes_per_second")
    assert np.isfinite(tx[int(np.argmax(np.isfinite(tx))):]).all()
    # Rates over 1 ms ticks still follow the fake's constant rates on average.
    assert np.nanmean(b.column("gpu/0/pcie_tx_bytes_per_second")) == pytest.approx(1e9, rel=0.05)
    with capsys.disabled():
        print(f"\n[fake NVML] 2 devices: sample_ns_mean={s.stats['sample_ns_mean']:.0f} "
              f"p99={s.stats['sample_ns_p99']:.0f} per tick")


def test_library_path_rule(fake, tmp_path, monkeypatch):
    from sysprof.sampling.portable.nvml import library_path, probe_library
    for unset in (lambda k: monkeypatch.delenv(k, raising=False), lambda k: monkeypatch.setenv(k, "")):
        unset("SYSPROF_NVML_LIBRARY")
        assert library_path() == "libnvidia-ml.so.1"
    missing = tmp_path / "nowhere" / "libnvidia-ml.so.1"
    monkeypatch.setenv("SYSPROF_NVML_LIBRARY", str(missing))
    got = probe_library()
    assert library_path() == str(missing) and got["found"] is False and got["library"] is None
    assert got["source"] == "SYSPROF_NVML_LIBRARY" and got["reason"].startswith(f"NVML library not loadable ({missing}): ")
    f = fake()  # SYSPROF_NVML_LIBRARY names it
    assert probe_library() == {"found": True, "library": f.path, "source": "SYSPROF_NVML_LIBRARY", "reason": None}
    assert f.calls("nvmlInit_v2") == 0  # dlopen only
