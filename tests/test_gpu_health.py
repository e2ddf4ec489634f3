"""GPU throttling, health and GPM channels (issue 13, items 1 and 2) against the fake NVML library.

The fake's formulas (tests/fake_nvml/fake_nvml.c): the health levels are constants per device
(``expected_health``), the violation counters grow with the fake's clock, and a GPM percentage between two
samples is ``id + 10 d + k % 10``, k the later sample's call count on the device (``expected_gpm``). Both
backends are checked: the native reader (csrc/gpu/) and the pynvml one (sysprof/sampling/portable/).
"""
from __future__ import annotations

import gc
import math
import time

import numpy as np
import pytest

from sysprof.sampling.sampler import native_available

from fake_nvml.support import (  # noqa: F401 - fake_builds, fake and fresh_pynvml are fixtures
    ALL_CHANNELS, GPM_CHANNELS, GPU_CHANNELS, METRIC_CHANNELS, NVLINK_NOTE, GiB, assert_levels, expected_gpm,
    expected_health, fake, fake_builds, fresh_pynvml, gpu_sampler, wait_for)

BACKENDS = ["native", "psutil"]
MiB = 1024.0 ** 2


def _sampler(backend: str, **kw):
    if backend == "native" and not native_available()[0]:
        pytest.skip("native extension unavailable")
    s = gpu_sampler(backend, **kw)
    assert s.backend == backend
    return s


@pytest.mark.parametrize("backend", BACKENDS)
def test_health_levels_and_violation_rates(fake, fresh_pynvml, backend):
    f = fake()
    t0 = time.monotonic()
    s = _sampler(backend)
    assert s.channels == tuple(f"gpu/{d}/{c}" for d in (0, 1) for c in ALL_CHANNELS)
    assert s.errors == {"gpu": NVLINK_NOTE}  # every health and GPM call answers on both devices
    rows = [s.sample() for _ in range(3)]
    quick = time.monotonic() - t0 < 0.9  # all of that within the slow rows' second
    for row in rows:
        for d in (0, 1):
            assert_levels(row, d, expected_health(d))
            # The first read of a counter has no rate yet.
            assert math.isnan(row[f"gpu/{d}/violation_power_seconds_per_second"])
    if quick:  # the slow rows were read once (the priming reading), then held
        assert f.calls("nvmlDeviceGetRemappedRows", 0) == 1
        assert f.calls("nvmlDeviceGetViolationStatus", 1) == 2  # power and thermal
        assert rows[0]["gpu/0/violation_power_seconds_total"] == rows[2]["gpu/0/violation_power_seconds_total"]
    # The fake's violation time: a quarter of its clock on device 0 (power), an eighth (thermal); half on 1.
    assert rows[0]["gpu/0/violation_power_seconds_total"] > 0
    assert rows[0]["gpu/1/violation_thermal_seconds_total"] == 0.0
    # A second later the slow rows are read again: rates from the violation counters' ns.
    time.sleep(1.05)
    reads = f.calls("nvmlDeviceGetRemappedRows", 0)
    row = s.sample()
    assert f.calls("nvmlDeviceGetRemappedRows", 0) == reads + 1
    for d, (power, thermal) in enumerate(((0.25, 0.125), (0.5, 0.0))):
        # Over a second: a preemption between the fake's clock and the reading's is a small share of it.
        assert row[f"gpu/{d}/violation_power_seconds_per_second"] == pytest.approx(power, rel=0.1)
        assert row[f"gpu/{d}/violation_thermal_seconds_per_second"] == pytest.approx(thermal, abs=1e-12, rel=0.1)
        assert_levels(row, d, expected_health(d))
    # Over a second of the fake's clock, the two policies' totals (read moments apart) keep their ratio.
    assert row["gpu/0/violation_power_seconds_total"] == pytest.approx(
        2 * row["gpu/0/violation_thermal_seconds_total"], rel=0.05)


@pytest.mark.parametrize("backend", BACKENDS)
def test_clock_reasons_older_name_and_refused_health(fake, fresh_pynvml, backend):
    # An older driver without ClocksEventReasons: its older name answers, with no note. Device 1 has no row
    # remapper, and no device reports ECC.
    f = fake(refuse="nvmlDeviceGetCurrentClocksEventReasons=13,nvmlDeviceGetRemappedRows@1=3,"
                    "nvmlDeviceGetTotalEccErrors=3")
    s = _sampler(backend)
    row = s.sample()
    for d in (0, 1):
        assert row[f"gpu/{d}/clocks_event_reasons"] == expected_health(d)["clocks_event_reasons"]
        assert math.isnan(row[f"gpu/{d}/ecc_corrected_total"]) and math.isnan(row[f"gpu/{d}/ecc_uncorrected_total"])
        assert f.calls("nvmlDeviceGetCurrentClocksEventReasons", d) == 1  # refused once, never asked again
    assert row["gpu/0/remapped_rows_correctable"] == 2 and row["gpu/0/remap_pending"] == 0
    for c in ("remapped_rows_correctable", "remapped_rows_uncorrectable", "remap_pending"):
        assert math.isnan(row[f"gpu/1/{c}"]), c
    notes = set(s.errors["gpu"].split("; "))
    assert notes == set(NVLINK_NOTE.split("; ")) | {
        f"gpu/{d}: ecc_{k}_total read NaN (nvmlDeviceGetTotalEccErrors({k.upper()}, VOLATILE): "
        "NVML_ERROR_NOT_SUPPORTED)" for d in (0, 1) for k in ("corrected", "uncorrected")} | {
        "gpu/1: remapped_rows_*, remap_pending read NaN (nvmlDeviceGetRemappedRows: NVML_ERROR_NOT_SUPPORTED)"}
    time.sleep(1.05)
    s.sample()
    assert f.calls("nvmlDeviceGetRemappedRows", 1) == 1 and f.calls("nvmlDeviceGetRemappedRows", 0) == 2
    assert f.calls("nvmlDeviceGetTotalEccErrors", 0) == 2  # corrected and uncorrected, once each


@pytest.mark.parametrize("backend", BACKENDS)
def test_gpm_values_between_two_samples(fake, fresh_pynvml, backend):
    f = fake()
    s = _sampler(backend)
    assert f.gpm_live() == 4  # two buffers per device, allocated once
    for _ in range(4):
        row = s.sample()
        for d in (0, 1):
            k = f.calls("nvmlGpmSampleGet", d)  # the reading's sample; the previous one was k - 1
            assert k >= 2
            assert_levels(row, d, expected_gpm(d, k))
    assert f.calls("nvmlGpmSampleAlloc") == 4 and f.gpm_live() == 4  # nothing allocated per reading
    assert f.calls("nvmlGpmMetricsGet", 0) == f.calls("nvmlGpmSampleGet", 0) - 1  # the first sample only primes
    # Where the field counters answer, GPM is not asked for PCIe or NVLink: the rates stay the fields'.
    assert math.isfinite(row["gpu/0/pcie_tx_bytes_per_second"]) and row["gpu/0/pcie_tx_bytes_per_second"] != 200 * MiB
    assert math.isnan(row["gpu/1/nvlink_tx_bytes_per_second"])  # no NVLink on device 1, in GPM either
    if backend == "native":  # the native reader shuts NVML down once its sampler is gone
        del s, row
        gc.collect()
        wait_for(lambda: f.refcount() == 0)
        assert f.gpm_live() == 0 and f.unsafe_shutdowns() == 0  # freed before nvmlShutdown


@pytest.mark.parametrize("backend", BACKENDS)
def test_gpm_stands_in_for_refused_pcie_fields(fake, fresh_pynvml, backend):
    f = fake(refuse="field:197@0=3,field:198@0=3")
    s = _sampler(backend)
    time.sleep(0.05)  # rates over a gap that a preemption is a small share of
    s.sample()
    time.sleep(0.05)
    row = s.sample()
    # NVML_GPM_METRIC_PCIE_TX_PER_SEC (20) and RX (21): 10 id + d MiB/s in the fake.
    assert row["gpu/0/pcie_tx_bytes_per_second"] == 200 * MiB
    assert row["gpu/0/pcie_rx_bytes_per_second"] == 210 * MiB
    tx1 = row["gpu/1/pcie_tx_bytes_per_second"]  # device 1's fields answer (a rate of its counter, not GPM's)
    assert math.isfinite(tx1) and tx1 != 201 * MiB
    notes = s.errors["gpu"].split("; ")
    assert "gpu/0: pcie_tx_bytes_per_second from GPM (NVML_GPM_METRIC_PCIE_TX_PER_SEC)" in notes
    assert "gpu/0: pcie_rx_bytes_per_second read NaN (NVML_FI_DEV_PCIE_COUNT_RX_BYTES: NVML_ERROR_NOT_SUPPORTED)" \
        in notes
    # GPM comes first: the fields' older fallback (nvmlDeviceGetPcieThroughput) is not asked where GPM answers.
    assert f.calls("nvmlDeviceGetPcieThroughput", 0) == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_gpm_unsupported_device_has_no_gpm_channels(fake, fresh_pynvml, backend):
    fake(gpm_devices=1)  # device 0 only
    s = _sampler(backend)
    assert s.channels == tuple(f"gpu/0/{c}" for c in ALL_CHANNELS) + tuple(f"gpu/1/{c}" for c in GPU_CHANNELS)
    assert s.errors["gpu"].split("; ")[0] == \
        "gpu/1: GPM metrics absent (nvmlGpmQueryDeviceSupport: not supported on this device)"
    s.sample()
    row = s.sample()
    assert row["gpu/0/sm_active_percent"] > 0 and "gpu/1/sm_active_percent" not in row
    assert row["gpu/1/power_limit_watts"] == 600.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_gpm_metric_refused(fake, fresh_pynvml, backend):
    f = fake(refuse="gpm:3@1=3")  # device 1 has no SM occupancy
    s = _sampler(backend)
    s.sample()
    row = s.sample()
    assert math.isnan(row["gpu/1/sm_occupancy_percent"]) and row["gpu/0/sm_occupancy_percent"] == \
        expected_gpm(0, f.calls("nvmlGpmSampleGet", 0))["sm_occupancy_percent"]
    assert "gpu/1: sm_occupancy_percent read NaN (nvmlGpmMetricsGet NVML_GPM_METRIC_SM_OCCUPANCY: " \
           "NVML_ERROR_NOT_SUPPORTED)" in s.errors["gpu"].split("; ")


@pytest.mark.parametrize("backend", BACKENDS)
def test_gpm_older_driver(fake, fresh_pynvml, backend):
    fake(refuse="nvmlGpmQueryDeviceSupport=13")  # the library says the call is not there
    s = _sampler(backend)
    assert not [c for c in s.channels if c.endswith(GPM_CHANNELS)]
    for d in (0, 1):
        assert f"gpu/{d}: GPM metrics absent (nvmlGpmQueryDeviceSupport: NVML_ERROR_FUNCTION_NOT_FOUND)" \
            in s.errors["gpu"].split("; ")


def test_minimal_library_has_no_health_or_gpm(fake, fresh_pynvml):
    fake("minimal")
    for backend in BACKENDS:
        if backend == "native" and not native_available()[0]:
            continue
        s = gpu_sampler(backend)
        assert s.channels == tuple(f"gpu/{d}/{c}" for d in (0, 1) for c in GPU_CHANNELS)
        notes = s.errors["gpu"].split("; ")
        assert "gpu/0: GPM metrics absent (nvmlGpmQueryDeviceSupport: NVML_ERROR_FUNCTION_NOT_FOUND)" in notes
        assert "gpu/1: clocks_event_reasons read NaN (nvmlDeviceGetCurrentClocksThrottleReasons: " \
               "NVML_ERROR_FUNCTION_NOT_FOUND)" in notes
        row = s.sample()
        assert math.isnan(row["gpu/0/power_limit_watts"]) and math.isnan(row["gpu/1/clocks_event_reasons"])
        del s
        gc.collect()


@pytest.mark.skipif(not native_available()[0], reason="checks the built extension")
def test_the_extension_carries_the_gpu_metric_table():
    """The native rows are generated from sysprof/sampling/gpu_metrics.py at build time: the extension built from
    this checkout carries them as the table is now (a stale build fails here)."""
    from sysprof import _native
    from sysprof.sampling import gpu_metrics
    from sysprof.sampling.portable import nvml_table
    from sysprof.sampling.registry import SOURCES
    native = _native.nvml_metrics()
    assert [m._asdict() for m in gpu_metrics.METRICS] == native
    # The rows as the native source asks them (csrc/gpu/nvml_query.cpp), field ids from pynvml.py.
    assert [(m["metric"], m["field_id"], m["scope"], m["fallback"]) for m in native] == [
        ("util", None, None, None), ("mem_v2", None, None, "mem_v1"), ("mem_v1", None, None, None),
        ("power_field", 186, 0, "power_usage"), ("power_usage", None, None, None),
        ("energy_field", 83, 0, "energy_fn"), ("energy_fn", None, None, None),
        ("temp_v", None, None, "temp"), ("temp", None, None, None),
        ("sm_clock", None, None, None), ("mem_clock", None, None, None),
        ("pcie_tx", 197, 0, "pcie_tx_tput"), ("pcie_rx", 198, 0, "pcie_rx_tput"),
        ("pcie_tx_tput", None, None, None), ("pcie_rx_tput", None, None, None),
        ("nvlink_tx", 138, 0xFFFFFFFF, None), ("nvlink_rx", 139, 0xFFFFFFFF, None),
        ("clk_events", None, None, "clk_throttle"), ("clk_throttle", None, None, None),
        ("viol_power", None, None, None), ("viol_thermal", None, None, None), ("ecc_corrected", None, None, None),
        ("ecc_uncorrected", None, None, None), ("remapped_rows", None, None, None), ("pcie_replay", None, None, None),
        ("power_limit", None, None, None), ("pcie_gen", None, None, None), ("pcie_width", None, None, None)]
    # The clock event reasons at every reading; the health rows (from the violation counters on) once a second.
    assert [m["metric"] for m in native if m["slow"]] == [
        "viol_power", "viol_thermal", "ecc_corrected", "ecc_uncorrected", "remapped_rows", "pcie_replay",
        "power_limit", "pcie_gen", "pcie_width"]
    # Every channel is written by some row; the channel list is the registry's.
    registry = tuple(c.pattern.split("/")[-1] for c in SOURCES["gpu"].channels)
    # (the XID channels come from the event waiter, csrc/gpu/nvml_events.hpp, not from a table row)
    assert {c for m in native for c in m["channels"]} == set(METRIC_CHANNELS) and nvml_table.CHANNELS == registry


@pytest.mark.skipif(not native_available()[0], reason="checks the built extension")
def test_the_extension_carries_the_gpm_table():
    from sysprof import _native
    from sysprof.sampling.gpu_metrics import GPM_METRICS
    assert [m._asdict() for m in GPM_METRICS] == _native.nvml_gpm_metrics()
    assert {m.channel for m in GPM_METRICS} >= set(GPM_CHANNELS)


def test_report_names_the_clock_event_reasons():
    from sysprof.report import TraceData
    from sysprof.report.gpu_reasons import CLOCK_EVENT_REASONS, decode_reasons, reason_lines
    assert decode_reasons(0x48) == ["HW slowdown", "HW thermal slowdown"]  # the fake's device 1
    assert decode_reasons(0x1004) == ["SW power cap", "bit 0x1000"] and decode_reasons(math.nan) == []
    assert [b for b, _, _ in CLOCK_EVENT_REASONS] == [1 << i for i in range(9)]
    # Five 1 ms values: SW power cap in three of them, HW thermal in one; idle is not a slowdown.
    events = [{"ph": "C", "name": "gpu/0", "ts": t * 1000, "pid": 1, "args": {"clocks_event_reasons": v}}
              for t, v in enumerate((0x4, 0x4, 0x44, 0x1, 0x0))]
    events += [{"ph": "C", "name": "gpu/1", "ts": t * 1000, "pid": 1, "args": {"clocks_event_reasons": 0x1}}
               for t in range(3)]
    assert reason_lines(TraceData(events)) == [
        "gpu/0 clocks held down by: SW power cap 60%, HW thermal slowdown 20% of the time"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_clock_reasons_at_every_reading(fake, fresh_pynvml, backend):
    # Issue 27, item 4: a power cap held in 3 of every 10 readings (300 ms of each second at 10 ms readings) shows
    # in 3 of every 10 readings' rows, not as the once-a-second value held for a second. Each row names its reading:
    # memory_used is 1 GiB + d GiB + n MiB at the reading's n-th memory call, and that reading's reasons call is its
    # n-th too (both are asked once per reading), so the row's expected mask is the fake's duty cycle at n.
    f = fake(reasons_duty="3/10")
    t0 = time.monotonic()
    s = _sampler(backend)
    s.start()
    deadline = t0 + 30  # 40 readings, however slowly a busy machine runs them
    while f.calls("nvmlDeviceGetMemoryInfo_v2", 0) < 40 and time.monotonic() < deadline:
        time.sleep(0.01)
    s.stop()
    b = s.drain()
    for d, bits in ((0, 0x4), (1, 0x48)):
        n = (b.column(f"gpu/{d}/memory_used_bytes") - (1 + d) * GiB) / MiB
        assert (n == np.round(n)).all() and n.min() >= 1
        want = np.where((n.astype(int) - 1) % 10 < 3, bits, 0)
        got = b.column(f"gpu/{d}/clocks_event_reasons")
        assert got.tolist() == want.tolist()
        # Both phases of the cycle are in the rows, which span more than two cycles of readings.
        assert n.max() - n.min() >= 20 and {0, bits} == set(got.tolist())
    # The health rows stay slow: one read at the priming reading, then at most one per second since.
    assert f.calls("nvmlDeviceGetRemappedRows", 0) <= 2 + (time.monotonic() - t0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pcie_throughput_stands_in_for_refused_fields(fake, fresh_pynvml, backend):
    # Issue 27, item 5: an older driver without the PCIe count fields, on devices without GPM: the driver's 20 ms
    # throughput (KB/s) answers instead, exactly the fake's values in B/s. On device 1 that is refused too: NaN.
    f = fake(refuse="field:197=3,field:198=3,nvmlDeviceGetPcieThroughput@1=3", gpm_devices=0)
    s = _sampler(backend)
    rows = [s.sample() for _ in range(3)]
    for row in rows:
        assert row["gpu/0/pcie_tx_bytes_per_second"] == 300000 * 1000.0
        assert row["gpu/0/pcie_rx_bytes_per_second"] == 600000 * 1000.0
        assert math.isnan(row["gpu/1/pcie_tx_bytes_per_second"]) and math.isnan(row["gpu/1/pcie_rx_bytes_per_second"])
    assert f.calls("nvmlDeviceGetPcieThroughput", 0) == 2 * 4  # tx and rx, at the priming reading and 3 samples
    assert f.calls("nvmlDeviceGetPcieThroughput", 1) == 2  # refused once each, never asked again
    notes = s.errors["gpu"].split("; ")
    assert not [n for n in notes if n.startswith("gpu/0: pcie")]  # the fallback answered: no note
    assert [n for n in notes if n.startswith("gpu/1: pcie")] == [
        f"gpu/1: pcie_{k}_bytes_per_second read NaN (nvmlDeviceGetPcieThroughput(NVML_PCIE_UTIL_{k.upper()}_BYTES): "
        "NVML_ERROR_NOT_SUPPORTED)" for k in ("tx", "rx")]


def test_report_clock_reasons_from_samples_and_violation_counters():
    # Issue 27, item 4: per reason, the share of time from the reason samples; independently, from the violation
    # counters (their increase over the span). 10 ms rows over 1 s: SW power cap in the first 300 ms; the power
    # counter grows by 0.25 s over the second (read at 0 and 1 s, held in between), the thermal one by 0.
    from sysprof.report import TraceData
    from sysprof.report.gpu_reasons import reason_lines, reason_shares
    events = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}]
    for k in range(101):
        args = {"clocks_event_reasons": 0x4 if k < 30 else 0x0,
                "violation_power_seconds_total": 10.0 + (0.25 if k == 100 else 0.0),
                "violation_thermal_seconds_total": 3.0}
        events.append({"ph": "C", "name": "gpu/0", "ts": 1000 + k * 10000, "pid": 1, "args": args})
    # gpu/1, over 4 s: the power counter grew 0.25 s in the first second, then read unchanged at 2, 3 and 4 s.
    events += [{"ph": "C", "name": "gpu/1", "ts": 1000 + k * 10000, "pid": 1,
                "args": {"violation_power_seconds_total": 0.25 if k >= 100 else 0.0}} for k in range(401)]
    data = TraceData(events)
    # The last row holds for an interval (10 ms, the median spacing): 101 rows of 10 ms, 30 of them capped.
    got = reason_shares(data)
    assert list(got) == ["gpu/0", "gpu/1"]
    assert got["gpu/1"] == {"reason_samples_s": 0.0, "reasons": {},
                            "violation_counters": {"power": pytest.approx(0.25 / 4), "thermal": None}}
    assert got["gpu/0"]["reason_samples_s"] == pytest.approx(1.01)
    assert got["gpu/0"]["reasons"] == {"SW power cap": pytest.approx(30 / 101)}
    assert got["gpu/0"]["violation_counters"] == {"power": pytest.approx(0.25), "thermal": 0.0}
    assert reason_lines(data) == ["gpu/0 clocks held down by: SW power cap 30% of the time; "
                                  "violation counters: power 25% of the time",
                                  "gpu/1 clocks held down by: violation counters: power 6% of the time"]
    # A counter that went back (a driver reload), or a trace without the counters: no share.
    events[101]["args"]["violation_power_seconds_total"] = 1.0
    for e in events[1:]:
        e["args"].pop("violation_thermal_seconds_total", None)
    got = reason_shares(TraceData(events))["gpu/0"]["violation_counters"]
    assert got == {"power": None, "thermal": None}
