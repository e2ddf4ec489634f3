"""The Python side of the fake NVML library (fake_nvml.c): fixtures that build it with cc and point
sysprof at a private copy, its introspection calls, and the values its formulas give. Used by
tests/test_gpu.py (imported as ``fake_nvml.support``; tests/ is on sys.path under pytest).
"""
from __future__ import annotations

import ctypes
import gc
import math
import os
import shutil
import subprocess
import threading
import time

import pytest

import sysprof
from sysprof.sampling.sampler import native_available

FAKE_SRC = os.path.join(os.path.dirname(__file__), "fake_nvml.c")
GiB, MiB = 1024 ** 3, 1024 ** 2
METRIC_CHANNELS = ("utilization_percent", "memory_utilization_percent", "memory_used_bytes",
                   "memory_total_bytes", "memory_free_bytes", "memory_reserved_bytes", "power_watts",
                   "energy_joules", "energy_power_watts", "temperature_celsius", "sm_clock_hz",
                   "memory_clock_hz", "pcie_tx_bytes_per_second", "pcie_rx_bytes_per_second",
                   "nvlink_tx_bytes_per_second", "nvlink_rx_bytes_per_second",
                   # throttling (every reading) and health (read once a second)
                   "clocks_event_reasons", "violation_power_seconds_total", "violation_power_seconds_per_second",
                   "violation_thermal_seconds_total", "violation_thermal_seconds_per_second", "ecc_corrected_total",
                   "ecc_uncorrected_total", "remapped_rows_correctable", "remapped_rows_uncorrectable",
                   "remap_pending", "pcie_replay_total", "power_limit_watts", "pcie_link_generation",
                   "pcie_link_width")
#: laid out only where the device has GPM (the full fake: both devices; the minimal one: neither)
GPM_CHANNELS = ("sm_active_percent", "sm_occupancy_percent", "tensor_active_percent", "dram_active_percent",
                "fp16_active_percent", "fp32_active_percent", "fp64_active_percent")
EVENT_CHANNELS = ("xid_total", "xid_last")  # per device, after the metric table's (csrc/gpu/nvml_events.hpp)
#: a device's last channel: when its values were read (wall-clock seconds)
TIME_CHANNELS = ("reading_time_seconds",)
#: a device's channels in order: without GPM, and with it
GPU_CHANNELS = METRIC_CHANNELS + EVENT_CHANNELS + TIME_CHANNELS
ALL_CHANNELS = METRIC_CHANNELS + GPM_CHANNELS + EVENT_CHANNELS + TIME_CHANNELS
NO_HOST = dict(cpu=False, memory=False, disk=False, net=False)
RATE_REL = 0.02  # fake counters follow the fake's clock, rates use the sampler's tick times
needs_native = pytest.mark.skipif(not native_available()[0], reason="native extension unavailable")


@pytest.fixture(scope="session")
def fake_builds(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the fake NVML library")
    out = tmp_path_factory.mktemp("fake_nvml")
    libs = {}
    for kind, flags in (("full", []), ("minimal", ["-DFAKE_NVML_MINIMAL"]), ("noevents", ["-DFAKE_NVML_NO_EVENTS"])):
        path = out / f"{kind}.so"
        subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", *flags, "-o", str(path), FAKE_SRC],
                       check=True)
        libs[kind] = path
    return libs


class Fake:
    """A private copy of the fake library, selected through SYSPROF_NVML_LIBRARY."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lib = ctypes.CDLL(path)  # same instance as the sampler's dlopen of this path
        self.lib.fake_nvml_calls.argtypes = [ctypes.c_char_p, ctypes.c_int]
        self.lib.fake_nvml_calls.restype = ctypes.c_long
        self.lib.fake_nvml_all_calls.restype = ctypes.c_long

    def calls(self, name: str, device: int = -1) -> int:
        return self.lib.fake_nvml_calls(name.encode(), device)

    def all_calls(self) -> int:
        """Calls of every function so far, each counted as it begins (a call blocked now included)."""
        return self.lib.fake_nvml_all_calls()

    def releases(self) -> int:
        """Calls that give something back: nvmlGpmSampleFree, nvmlEventSetFree, nvmlShutdown."""
        return self.calls("nvmlGpmSampleFree") + self.calls("nvmlEventSetFree") + self.calls("nvmlShutdown")

    def refcount(self) -> int:
        return self.lib.fake_nvml_refcount()

    def unsafe_shutdowns(self) -> int:
        return self.lib.fake_nvml_unsafe_shutdowns()

    def uninitialized_calls(self) -> int:
        return self.lib.fake_nvml_uninitialized_calls()

    def xids_sent(self) -> int:
        """Scripted XIDs (FAKE_NVML_XIDS) delivered to a wait so far."""
        return self.lib.fake_nvml_xids_sent()
    def gpm_live(self) -> int:
        """GPM samples allocated now."""
        return self.lib.fake_nvml_gpm_live()

    def samples_wall0_us(self) -> int:
        """W of the driver samples' timestamps (W + 20000 k us), -1 before the first nvmlDeviceGetSamples."""
        self.lib.fake_nvml_samples_wall0_us.restype = ctypes.c_longlong
        return self.lib.fake_nvml_samples_wall0_us()

    def samples_returned(self) -> int:
        """Driver samples nvmlDeviceGetSamples handed out so far (FAKE_NVML_SAMPLES_BURST: n per call)."""
        self.lib.fake_nvml_samples_returned.restype = ctypes.c_longlong
        return self.lib.fake_nvml_samples_returned()

    def hanging(self) -> int:
        return self.lib.fake_nvml_hanging()

    def hang_window(self) -> tuple:
        """CLOCK_REALTIME ns of the latest hang's start and end (-1: not yet)."""
        self.lib.fake_nvml_hang_begin_ns.restype = self.lib.fake_nvml_hang_end_ns.restype = ctypes.c_longlong
        return self.lib.fake_nvml_hang_begin_ns(), self.lib.fake_nvml_hang_end_ns()


@pytest.fixture
def fake(fake_builds, tmp_path, monkeypatch):
    made = []

    def make(kind: str = "full", **env) -> Fake:
        d = tmp_path / f"lib{len(made)}"
        d.mkdir()
        path = d / "libnvidia-ml.so.1"
        shutil.copy(fake_builds[kind], path)
        for k in ("INIT_ERROR", "DEVICES", "LOST_AFTER", "HANG_AT", "HANG_MS", "HANG_CALL", "STATIC", "REFUSE",
                  "GPM_DEVICES", "MIG", "XIDS", "EVENTS_UNSUPPORTED", "WAIT_ERROR", "SAMPLES_BURST",
                  "REASONS_DUTY"):
            monkeypatch.delenv(f"FAKE_NVML_{k}", raising=False)
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)  # every GPU, unless a test sets it
        for k, v in env.items():
            monkeypatch.setenv(f"FAKE_NVML_{k.upper()}", str(v))
        monkeypatch.setenv("SYSPROF_NVML_LIBRARY", str(path))
        made.append(Fake(str(path)))
        return made[-1]
    return make


#: threads that make pynvml calls (sysprof/sampling/portable/nvml.py, nvml_events.py; gpu_refresh.py)
PYNVML_THREADS = ("sysprof-pynvml", "sysprof-pynvml-xid", "sysprof-gpu-refresh")


def pynvml_threads() -> list:
    return [t for t in threading.enumerate() if t.name in PYNVML_THREADS and t.is_alive()]


@pytest.fixture
def fresh_pynvml():
    """pynvml keeps one library per process: point it at this test's fake, and restore it after.

    A closed psutil GPU source ends on its own threads: the poller, or the XID waiter it handed over to, frees
    the event set and calls nvmlShutdown after the Sampler is gone. Those calls go through pynvml's one library,
    so they are waited for, here and before the swap: run late (a loaded machine), they would land on the next
    test's fake (its nvmlEventSetFree and nvmlShutdown counts, its refcount)."""
    pynvml = pytest.importorskip("pynvml")
    gc.collect()
    wait_for(lambda: not pynvml_threads())  # an earlier test's (one without this fixture)
    saved = pynvml.nvmlLib
    pynvml.nvmlLib = None
    pynvml._nvmlGetFunctionPointer_cache.clear()
    yield pynvml
    gc.collect()
    wait_for(lambda: not pynvml_threads())  # bounded: a thread left running is a leak, and fails here
    pynvml.nvmlLib = saved
    pynvml._nvmlGetFunctionPointer_cache.clear()


def expected_sample(series: str, k: int) -> float:
    """The fake's driver sample k of a gpu/0 series, in base units (fake_nvml.c, nvmlDeviceGetSamples)."""
    return {"power_samples_watts": 250.0 + k % 10, "utilization_samples_percent": float(k % 101),
            "sm_clock_samples_hz": (1500 + k % 10) * 1e6, "memory_clock_samples_hz": (2600 + k % 10) * 1e6}[
        series.rsplit("/", 1)[-1]]


def expected_levels(d: int, n: int, *, v2: bool = True, field_power: bool = True) -> dict:
    """The fake's level values for device d at the n-th call of each getter (tests/fake_nvml)."""
    total, reserved, used = (80 + 16 * d) * GiB, 512 * MiB, GiB + d * GiB + n * MiB
    return {
        "utilization_percent": (7 * n + 13 * d) % 101,
        "memory_utilization_percent": (3 * n + 5 * d) % 101,
        "memory_used_bytes": used,
        "memory_total_bytes": total,
        "memory_free_bytes": total - reserved - used if v2 else total - used,
        "memory_reserved_bytes": reserved if v2 else math.nan,
        "power_watts": (200000 if field_power else 100000) / 1000 + n + 0.5 * d,
        "temperature_celsius": 40 + n % 40 + d,
        "sm_clock_hz": (1000 + n + 100 * d) * 1e6,
        "memory_clock_hz": (2000 + n + 100 * d) * 1e6,
    }


def expected_health(d: int) -> dict:
    """The fake's throttling and health levels for device d (tests/fake_nvml/fake_nvml.c)."""
    return {
        "clocks_event_reasons": 0x4 if d == 0 else 0x48,
        "ecc_corrected_total": 5 + d, "ecc_uncorrected_total": d,
        "remapped_rows_correctable": 2 + d, "remapped_rows_uncorrectable": d, "remap_pending": d,
        "pcie_replay_total": 7 + 3 * d, "power_limit_watts": 700.0 - 100.0 * d,
        "pcie_link_generation": 5 - d, "pcie_link_width": 16 >> d,
    }


#: GPM metric ids of the percentage channels (the fake: id + 10d + k % 10 for consecutive samples k-1, k)
GPM_IDS = {"sm_active_percent": 2, "sm_occupancy_percent": 3, "tensor_active_percent": 5, "dram_active_percent": 10,
           "fp16_active_percent": 13, "fp32_active_percent": 12, "fp64_active_percent": 11}


def expected_gpm(d: int, k: int) -> dict:
    """The fake's GPM values of device d between its samples k-1 and k."""
    return {c: float(m + 10 * d + k % 10) for c, m in GPM_IDS.items()}


def assert_levels(row: dict, d: int, expected: dict) -> None:
    for name, want in expected.items():
        got = row[f"gpu/{d}/{name}"]
        if math.isnan(want):
            assert math.isnan(got), (d, name, got)
        else:
            assert got == want, (d, name, got, want)


def wait_for(cond, timeout: float = 20.0) -> None:
    """Polls cond until it holds; the timeout only bounds a failing test (never a rate)."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def quiet(f: Fake, name: str, device: int, still: float = 0.3) -> bool:
    """True when no call of name on device was made for `still` seconds."""
    before = f.calls(name, device)
    time.sleep(still)
    return f.calls(name, device) == before


def gpu_sampler(backend: str, **kw) -> sysprof.Sampler:
    args = dict(NO_HOST, gpu=True, interval=0.001, backend=backend)
    args.update(kw)
    args.setdefault("gpu_interval", args["interval"])  # the reader at the sampler's interval (default: 10 ms)
    return sysprof.Sampler(**args)


NVLINK_NOTE = ("gpu/1: nvlink_tx_bytes_per_second read NaN (NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: "
               "NVML_ERROR_NOT_SUPPORTED); gpu/1: nvlink_rx_bytes_per_second read NaN "
               "(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: NVML_ERROR_NOT_SUPPORTED)")
DEVICES = [{"index": d, "name": f"Fake GPU {d}", "uuid": f"GPU-fa4e0000-0000-0000-0000-00000000000{d}",
            "pci_bus_id": f"00000000:{0x17 + d:02X}:00.0"} for d in (0, 1)]
