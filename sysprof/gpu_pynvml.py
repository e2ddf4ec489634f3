"""GPU channels through pynvml (``pip install sysprof[gpu]``) for the psutil backend.

Mirrors the native NVML source (csrc/source_nvml.cpp): same channels, units and rules. One
``nvmlDeviceGetFieldValues`` call per device for instant power, energy, PCIe and NVLink counters
(each entry's return code checked); NOT_SUPPORTED / NO_PERMISSION / FUNCTION_NOT_FOUND answers are
remembered per (device, metric) and never asked again, falling back where NVML has another way;
GPU_IS_LOST retires the device (NaN) while the others go on. Like the native source, it honours
``SYSPROF_NVML_LIBRARY`` (a path to the NVML library to load instead of ``libnvidia-ml.so.1``).
"""
from __future__ import annotations

import ctypes
import math
import os
import weakref
from typing import Callable, Dict, List, Optional, Sequence, Tuple

NAN = math.nan

CHANNELS = ("utilization_percent", "memory_utilization_percent", "memory_used_bytes",
            "memory_total_bytes", "memory_free_bytes", "memory_reserved_bytes", "power_watts",
            "energy_joules", "energy_power_watts", "temperature_celsius", "sm_clock_hz",
            "memory_clock_hz", "pcie_tx_bytes_per_second", "pcie_rx_bytes_per_second",
            "nvlink_tx_bytes_per_second", "nvlink_rx_bytes_per_second")
_IDX = {c: i for i, c in enumerate(CHANNELS)}

# metric -> (what, fallback metric, channels left NaN when it and its fallback are refused)
METRICS = {
    "util": ("nvmlDeviceGetUtilizationRates", None, "utilization_percent, memory_utilization_percent"),
    "mem_v2": ("nvmlDeviceGetMemoryInfo_v2", "mem_v1", "memory_*_bytes"),
    "mem_v1": ("nvmlDeviceGetMemoryInfo", None, "memory_*_bytes"),
    "power_field": ("NVML_FI_DEV_POWER_INSTANT", "power_usage", "power_watts"),
    "power_usage": ("nvmlDeviceGetPowerUsage", None, "power_watts"),
    "energy_field": ("NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "energy_fn", "energy_joules, energy_power_watts"),
    "energy_fn": ("nvmlDeviceGetTotalEnergyConsumption", None, "energy_joules, energy_power_watts"),
    "temp_v": ("nvmlDeviceGetTemperatureV", "temp", "temperature_celsius"),
    "temp": ("nvmlDeviceGetTemperature", None, "temperature_celsius"),
    "sm_clock": ("nvmlDeviceGetClockInfo(NVML_CLOCK_SM)", None, "sm_clock_hz"),
    "mem_clock": ("nvmlDeviceGetClockInfo(NVML_CLOCK_MEM)", None, "memory_clock_hz"),
    "pcie_tx": ("NVML_FI_DEV_PCIE_COUNT_TX_BYTES", None, "pcie_tx_bytes_per_second"),
    "pcie_rx": ("NVML_FI_DEV_PCIE_COUNT_RX_BYTES", None, "pcie_rx_bytes_per_second"),
    "nvlink_tx": ("NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", None, "nvlink_tx_bytes_per_second"),
    "nvlink_rx": ("NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", None, "nvlink_rx_bytes_per_second"),
}
# (metric, field id, scopeId); ids from pynvml.py; UINT_MAX sums all NVLink links (0 is link 0 alone).
FIELDS = (("power_field", 186, 0), ("energy_field", 83, 0), ("pcie_tx", 197, 0), ("pcie_rx", 198, 0),
          ("nvlink_tx", 138, 0xFFFFFFFF), ("nvlink_rx", 139, 0xFFFFFFFF))
_FIELD_METRICS = {m for m, _, _ in FIELDS}

_NOT_SUPPORTED, _NO_PERMISSION, _INVALID_ARGUMENT, _FUNCTION_NOT_FOUND = 3, 4, 2, 13
_GPU_IS_LOST, _RESET_REQUIRED, _ARGUMENT_VERSION_MISMATCH = 15, 16, 25
_PERMANENT = {_NOT_SUPPORTED, _NO_PERMISSION, _FUNCTION_NOT_FOUND, _ARGUMENT_VERSION_MISMATCH}
_LOST = {_GPU_IS_LOST, _RESET_REQUIRED}
_INIT_HINTS = {9: " (the NVIDIA kernel driver is not loaded)",
               18: " (libnvidia-ml and the kernel driver are different versions; e.g. the driver was "
                   "upgraded without a reboot)",
               4: " (no permission to open the /dev/nvidia* device files)"}


def _import_pynvml():
    try:
        import pynvml  # noqa: PLC0415 - optional dependency
    except ImportError as exc:
        raise RuntimeError("pynvml is not installed (pip install 'sysprof[gpu]')") from exc
    return pynvml


def _code_name(pynvml, code: int) -> str:
    for name in dir(pynvml):
        if (name.startswith("NVML_ERROR_") or name == "NVML_SUCCESS") and getattr(pynvml, name) == code:
            return name
    return f"NVML error {code}"


class _Counter:
    """A byte counter: delta since the previous read, unwrapping 32-bit wrap-around (as native)."""

    def __init__(self) -> None:
        self.prev: Optional[int] = None
        self.t = 0.0

    def rate(self, raw: int, t: float) -> float:
        prev, prev_t = self.prev, self.t
        self.prev, self.t = raw, t
        if prev is None:
            return NAN
        if raw >= prev:
            d = raw - prev
        elif prev < 2 ** 32:
            d = raw + 2 ** 32 - prev
        else:
            d = 0
        return d / (t - prev_t) if t > prev_t else NAN


class _EnergyPower:
    """Power between the two latest reads at which the energy counter moved (see the native source)."""

    def __init__(self) -> None:
        self.ref: Optional[int] = None
        self.t_ref = 0.0
        self.moved = False
        self.watts = NAN

    def update(self, mj: int, t: float) -> float:
        if self.ref is None or mj < self.ref:
            self.ref, self.t_ref, self.moved, self.watts = mj, t, False, NAN
        elif mj != self.ref:
            if self.moved and t > self.t_ref:
                self.watts = (mj - self.ref) / 1000.0 / (t - self.t_ref)
            self.ref, self.t_ref, self.moved = mj, t, True
        return self.watts


class NvmlState:
    """The initialised library and what all readers learnt: refused metrics, lost devices, notes."""

    def __init__(self) -> None:
        pynvml = self.pynvml = _import_pynvml()
        path = os.environ.get("SYSPROF_NVML_LIBRARY")
        if path and pynvml.nvmlLib is None:  # pynvml itself only ever loads libnvidia-ml.so.1
            with pynvml.libLoadLock:
                try:
                    pynvml.nvmlLib = ctypes.CDLL(path)
                except OSError as exc:
                    raise RuntimeError(f"NVML library not loadable ({path}): {exc}") from None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            code = exc.value
            if code == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND:
                raise RuntimeError("NVML library not loadable (libnvidia-ml.so.1); no NVIDIA driver "
                                   "installed? SYSPROF_NVML_LIBRARY names another path") from None
            raise RuntimeError(f"nvmlInit failed: {_code_name(pynvml, code)}{_INIT_HINTS.get(code, '')}") from None
        # Bound now: pynvml's function cache is global and may point at another library by then.
        self._finalizer = weakref.finalize(self, _shutdown, pynvml._nvmlGetFunctionPointer("nvmlShutdown"))
        self.notes: List[str] = []
        self.report: Optional[Callable[[str], None]] = None
        try:
            count = pynvml.nvmlDeviceGetCount()
        except pynvml.NVMLError as exc:
            self._finalizer()
            raise RuntimeError(f"nvmlDeviceGetCount_v2 failed: {_code_name(pynvml, exc.value)}") from None
        self.indices: List[int] = []
        self.handles = []
        self.devices: List[Dict[str, object]] = []
        skipped = []
        for i in range(count):
            try:
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
            except pynvml.NVMLError as exc:
                skipped.append(f"gpu/{i}: nvmlDeviceGetHandleByIndex_v2 {_code_name(pynvml, exc.value)}; left out")
                continue
            self.indices.append(i)
            self.handles.append(h)
            self.devices.append({"index": i, "name": self._text(pynvml.nvmlDeviceGetName, h),
                                 "uuid": self._text(pynvml.nvmlDeviceGetUUID, h),
                                 "pci_bus_id": self._pci(h)})
        if not self.handles:
            self._finalizer()
            raise RuntimeError("; ".join(skipped) or "NVML found no GPU")
        self.refused: List[set] = [set() for _ in self.handles]
        self.lost = [False] * len(self.handles)
        if not hasattr(pynvml, "nvmlDeviceGetTemperatureV"):
            for r in self.refused:
                r.add("temp_v")
        if skipped:
            self.note("; ".join(skipped))

    def _text(self, fn, h) -> str:
        try:
            v = fn(h)
        except self.pynvml.NVMLError:
            return ""
        return v.decode() if isinstance(v, bytes) else str(v)

    def _pci(self, h) -> str:
        try:
            v = self.pynvml.nvmlDeviceGetPciInfo_v3(h).busId
        except (self.pynvml.NVMLError, AttributeError):
            return ""
        return v.decode() if isinstance(v, bytes) else str(v)

    def note(self, msg: str) -> None:
        self.notes.append(msg)
        self.flush()

    def flush(self) -> None:
        if self.report is not None and self.notes:
            self.report("; ".join(self.notes))

    def refuse(self, dev: int, metric: str, code: int) -> None:
        if metric in self.refused[dev]:
            return
        self.refused[dev].add(metric)
        what, fallback, channels = METRICS[metric]
        if fallback is not None and fallback not in self.refused[dev]:
            return
        self.note(f"gpu/{self.indices[dev]}: {channels} read NaN ({what}: {_code_name(self.pynvml, code)})")

    def mark_lost(self, dev: int, what: str) -> None:
        if not self.lost[dev]:
            self.lost[dev] = True
            self.note(f"gpu/{self.indices[dev]}: lost ({what}: NVML_ERROR_GPU_IS_LOST or RESET_REQUIRED); "
                      "its channels read NaN")

    def channels(self) -> List[str]:
        return [f"gpu/{i}/{c}" for i in self.indices for c in CHANNELS]


def _shutdown(fn) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001 - best effort at exit
        pass


def _field_value(f) -> Optional[float]:
    """The value of a field entry as a number, whatever type the driver chose; None if unusable."""
    t, v = f.valueType, f.value
    if t == 0:
        return v.dVal
    if t == 1:
        return None if v.uiVal == 0xFFFFFFFF else v.uiVal
    if t == 2:
        return v.ulVal
    if t == 3:
        return None if v.ullVal == 0xFFFFFFFFFFFFFFFF else v.ullVal
    if t == 4:
        return v.sllVal
    if t == 5:
        return v.siVal
    if t == 6:
        return v.usVal
    return None


class GpuReader:
    """One reader (own baselines) over a shared NvmlState; ``read(t)`` returns one row slice."""

    def __init__(self, state: NvmlState) -> None:
        self.s = state
        n = len(state.handles)
        self.rates = [{k: _Counter() for k in ("pcie_tx", "pcie_rx", "nvlink_tx", "nvlink_rx")} for _ in range(n)]
        self.energy = [_EnergyPower() for _ in range(n)]

    def read(self, t: float) -> List[float]:
        out: List[float] = []
        for dev in range(len(self.s.handles)):
            out += self._device(dev, t)
        return out

    def _call(self, dev: int, metric: str, fn, *args):
        """(ok, value): records refusals and loss; other errors give NaN for this read only."""
        pynvml = self.s.pynvml
        try:
            return True, fn(*args)
        except pynvml.NVMLError as exc:
            code = exc.value
        except (AttributeError, TypeError):  # an older pynvml without this function or argument
            code = _FUNCTION_NOT_FOUND
        self._answer(dev, metric, code)
        return False, None

    def _answer(self, dev: int, metric: str, code: int) -> None:
        if code in _LOST:
            self.s.mark_lost(dev, METRICS[metric][0])
        elif code in _PERMANENT or (code == _INVALID_ARGUMENT and metric in _FIELD_METRICS):
            self.s.refuse(dev, metric, code)
        elif self.s.report is not None:
            self.s.report(f"gpu/{self.s.indices[dev]}: {METRICS[metric][0]}: {_code_name(self.s.pynvml, code)}")

    def _device(self, dev: int, t: float) -> List[float]:
        o = [NAN] * len(CHANNELS)
        s, pynvml, h = self.s, self.s.pynvml, self.s.handles[dev]
        if s.lost[dev]:
            return o
        refused = s.refused[dev]
        fields = [(m, fid, scope) for m, fid, scope in FIELDS if m not in refused]
        if fields:
            try:
                vals = pynvml.nvmlDeviceGetFieldValues(h, [(fid, scope) for _, fid, scope in fields])
                code = 0
            except pynvml.NVMLError as exc:
                vals, code = None, exc.value
            if code in _LOST:
                s.mark_lost(dev, "nvmlDeviceGetFieldValues")
                return [NAN] * len(CHANNELS)
            if code in _PERMANENT:
                for m, _, _ in fields:
                    s.refuse(dev, m, code)
            elif code and s.report is not None:
                s.report(f"gpu/{s.indices[dev]}: nvmlDeviceGetFieldValues: {_code_name(pynvml, code)}")
            elif vals is not None:
                for (m, _, _), f in zip(fields, vals):
                    if f.nvmlReturn != 0:
                        self._answer(dev, m, f.nvmlReturn)
                        continue
                    v = _field_value(f)
                    if v is None:
                        continue
                    if m == "power_field":
                        o[_IDX["power_watts"]] = v / 1000.0
                    elif m == "energy_field":
                        if v >= 0:
                            o[_IDX["energy_joules"]] = v / 1000.0
                            o[_IDX["energy_power_watts"]] = self.energy[dev].update(int(v), t)
                    elif v >= 0:  # byte counters; NVLink counts KiB
                        raw = int(v) * (1024 if m.startswith("nvlink") else 1)
                        o[_IDX[f"{m}_bytes_per_second"]] = self.rates[dev][m].rate(raw, t)
                if s.lost[dev]:
                    return [NAN] * len(CHANNELS)

        def lost():
            return s.lost[dev]

        if "util" not in refused:
            ok, u = self._call(dev, "util", pynvml.nvmlDeviceGetUtilizationRates, h)
            if ok:
                o[_IDX["utilization_percent"]], o[_IDX["memory_utilization_percent"]] = float(u.gpu), float(u.memory)
            if lost():
                return [NAN] * len(CHANNELS)
        mem = False
        if "mem_v2" not in refused:
            ok, m = self._call(dev, "mem_v2", pynvml.nvmlDeviceGetMemoryInfo, h,
                                  getattr(pynvml, "nvmlMemory_v2", 0x02000028))
            if ok:
                mem = True
                o[_IDX["memory_used_bytes"]], o[_IDX["memory_total_bytes"]] = float(m.used), float(m.total)
                o[_IDX["memory_free_bytes"]], o[_IDX["memory_reserved_bytes"]] = float(m.free), float(m.reserved)
            if lost():
                return [NAN] * len(CHANNELS)
        if not mem and "mem_v2" in refused and "mem_v1" not in refused:
            ok, m = self._call(dev, "mem_v1", pynvml.nvmlDeviceGetMemoryInfo, h)
            if ok:
                o[_IDX["memory_used_bytes"]], o[_IDX["memory_total_bytes"]] = float(m.used), float(m.total)
                o[_IDX["memory_free_bytes"]] = float(m.free)
            if lost():
                return [NAN] * len(CHANNELS)
        if "power_field" in refused and "power_usage" not in refused:
            ok, mw = self._call(dev, "power_usage", pynvml.nvmlDeviceGetPowerUsage, h)
            if ok:
                o[_IDX["power_watts"]] = mw / 1000.0
            if lost():
                return [NAN] * len(CHANNELS)
        if "energy_field" in refused and "energy_fn" not in refused:
            ok, mj = self._call(dev, "energy_fn", pynvml.nvmlDeviceGetTotalEnergyConsumption, h)
            if ok:
                o[_IDX["energy_joules"]] = mj / 1000.0
                o[_IDX["energy_power_watts"]] = self.energy[dev].update(int(mj), t)
            if lost():
                return [NAN] * len(CHANNELS)
        temp = False
        if "temp_v" not in refused:
            ok, c = self._call(dev, "temp_v", getattr(pynvml, "nvmlDeviceGetTemperatureV", None), h,
                               pynvml.NVML_TEMPERATURE_GPU)
            if ok:
                o[_IDX["temperature_celsius"]], temp = float(c), True
            if lost():
                return [NAN] * len(CHANNELS)
        if not temp and "temp_v" in refused and "temp" not in refused:
            ok, c = self._call(dev, "temp", pynvml.nvmlDeviceGetTemperature, h, pynvml.NVML_TEMPERATURE_GPU)
            if ok:
                o[_IDX["temperature_celsius"]] = float(c)
            if lost():
                return [NAN] * len(CHANNELS)
        for metric, clock, name in (("sm_clock", pynvml.NVML_CLOCK_SM, "sm_clock_hz"),
                                    ("mem_clock", pynvml.NVML_CLOCK_MEM, "memory_clock_hz")):
            if metric not in refused:
                ok, mhz = self._call(dev, metric, pynvml.nvmlDeviceGetClockInfo, h, clock)
                if ok:
                    o[_IDX[name]] = mhz * 1e6
                if lost():
                    return [NAN] * len(CHANNELS)
        return o


def open_gpu(state: Optional[NvmlState]) -> Tuple[NvmlState, Sequence[str], Callable[[float], List[float]]]:
    """(state, channel names, read function) for the psutil backend; raises RuntimeError with the
    reason when NVML is unusable here. Pass the state from a previous call to share what it learnt."""
    if state is None:
        state = NvmlState()
    reader = GpuReader(state)
    return state, state.channels(), reader.read
