"""GPU channels through pynvml (``pip install sysprof[gpu]``) for the psutil backend.

Mirrors the native NVML source (csrc/source_nvml.cpp): same channels, units and rules. One
``nvmlDeviceGetFieldValues`` call per device for instant power, energy, PCIe and NVLink counters
(each entry's return code checked); NOT_SUPPORTED / NO_PERMISSION / FUNCTION_NOT_FOUND answers are
remembered per (device, metric) and never asked again, falling back where NVML has another way;
GPU_IS_LOST retires the device (NaN) while the others go on. Like the native source, it honours
``SYSPROF_NVML_LIBRARY`` (a path to the NVML library to load instead of ``libnvidia-ml.so.1``).

Isolation, as the native source: every pynvml call (nvmlInit, discovery, the reads, nvmlShutdown) runs
on one daemon thread (``_Poller``); the psutil backend's thread only takes the latest reading and never
waits on NVML (ctypes releases the GIL during a call). Opening waits at most ``OPEN_WAIT_S`` for the
device layout; a reading older than the interval + ``LATE_S`` reads NaN; a call in flight longer than
``LATE_S`` is named in errors["gpu"], and its return once it comes back.
"""
from __future__ import annotations

import ctypes
import math
import os
import threading
import time
import weakref
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from sysprof import forks

from .rules import EnergyPower, RateCounter

NAN = math.nan
LATE_S = 0.25  # a call in flight longer is blocked; a reading older than the interval + this reads NaN
OPEN_WAIT_S = 1.5  # opening waits this long for the device layout
SYNC_WAIT_S = 2.0  # a synchronous read waits at most this long for a fresh reading

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


class _Abandoned(Exception):
    """Raised instead of a pynvml call once nobody wants the poller any more."""


class NvmlState:
    """The initialised library and what the reader learnt: refused metrics, lost devices, notes.
    Built on the poller thread; ``timed(what, device, fn, *args)`` makes each call visible to others."""

    def __init__(self, timed: Callable) -> None:
        self.timed = timed
        pynvml = self.pynvml = _import_pynvml()
        path = os.environ.get("SYSPROF_NVML_LIBRARY")
        if path and pynvml.nvmlLib is None:  # pynvml itself only ever loads libnvidia-ml.so.1
            with pynvml.libLoadLock:
                try:
                    pynvml.nvmlLib = ctypes.CDLL(path)
                except OSError as exc:
                    raise RuntimeError(f"NVML library not loadable ({path}): {exc}") from None
        try:
            timed("nvmlInit_v2", -1, pynvml.nvmlInit)
        except pynvml.NVMLError as exc:
            code = exc.value
            if code == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND:
                raise RuntimeError("NVML library not loadable (libnvidia-ml.so.1); no NVIDIA driver "
                                   "installed? SYSPROF_NVML_LIBRARY names another path") from None
            raise RuntimeError(f"nvmlInit failed: {_code_name(pynvml, code)}{_INIT_HINTS.get(code, '')}") from None
        # Bound now: pynvml's function cache is global and may point at another library by then. Called
        # by the poller thread only (not at exit, when a call of that thread may be in flight).
        self._finalizer = weakref.finalize(self, _shutdown, pynvml._nvmlGetFunctionPointer("nvmlShutdown"))
        self._finalizer.atexit = False
        self.notes: List[str] = []
        self.report: Optional[Callable[[str], None]] = None
        try:
            self._discover()
        except _Abandoned:
            self._finalizer()
            raise

    def _discover(self) -> None:
        pynvml, timed = self.pynvml, self.timed
        try:
            count = timed("nvmlDeviceGetCount_v2", -1, pynvml.nvmlDeviceGetCount)
        except pynvml.NVMLError as exc:
            self._finalizer()
            raise RuntimeError(f"nvmlDeviceGetCount_v2 failed: {_code_name(pynvml, exc.value)}") from None
        self.indices: List[int] = []
        self.handles = []
        self.devices: List[Dict[str, object]] = []
        skipped = []
        for i in range(count):
            try:
                h = timed("nvmlDeviceGetHandleByIndex_v2", i, pynvml.nvmlDeviceGetHandleByIndex, i)
            except pynvml.NVMLError as exc:
                skipped.append(f"gpu/{i}: nvmlDeviceGetHandleByIndex_v2 {_code_name(pynvml, exc.value)}; left out")
                continue
            self.indices.append(i)
            self.handles.append(h)
            self.devices.append({"index": i, "name": "", "uuid": "", "pci_bus_id": ""})
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

    def describe(self) -> None:
        """Names, UUIDs and PCI bus ids: after the layout, which is all that opening needs."""
        for d, (i, h) in enumerate(zip(self.indices, self.handles)):
            self.devices[d] = {"index": i,
                               "name": self._text("nvmlDeviceGetName", i, self.pynvml.nvmlDeviceGetName, h),
                               "uuid": self._text("nvmlDeviceGetUUID", i, self.pynvml.nvmlDeviceGetUUID, h),
                               "pci_bus_id": self._pci(i, h)}

    def _text(self, what: str, i: int, fn, h) -> str:
        try:
            v = self.timed(what, i, fn, h)
        except self.pynvml.NVMLError:
            return ""
        return v.decode() if isinstance(v, bytes) else str(v)

    def _pci(self, i: int, h) -> str:
        try:
            v = self.timed("nvmlDeviceGetPciInfo_v3", i, self.pynvml.nvmlDeviceGetPciInfo_v3, h).busId
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
    """Reads every device through an NvmlState (on the poller thread); ``read(t)`` returns one row slice."""

    def __init__(self, state: NvmlState) -> None:
        self.s = state
        n = len(state.handles)
        self.rates = [{k: RateCounter() for k in ("pcie_tx", "pcie_rx", "nvlink_tx", "nvlink_rx")} for _ in range(n)]
        self.energy = [EnergyPower() for _ in range(n)]

    def read(self, t: float) -> List[float]:
        out: List[float] = []
        for dev in range(len(self.s.handles)):
            out += self._device(dev, t)
        return out

    def _call(self, dev: int, metric: str, fn, *args):
        """(ok, value): records refusals and loss; other errors give NaN for this read only."""
        pynvml = self.s.pynvml
        try:
            return True, self.s.timed(METRICS[metric][0], self.s.indices[dev], fn, *args)
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
                vals = s.timed("nvmlDeviceGetFieldValues", s.indices[dev], pynvml.nvmlDeviceGetFieldValues, h,
                               [(fid, scope) for _, fid, scope in fields])
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


class _Poller:
    """Owns every pynvml call, on one daemon thread: discovery, a reading each time a reader asked
    for one since the previous reading began, and nvmlShutdown once no reader is left. Readers take
    the latest reading; only a synchronous one waits for a fresh reading, and never on a blocked call."""

    def __init__(self) -> None:
        self.cond = threading.Condition()  # never held during a pynvml call
        self.state: Optional[NvmlState] = None
        self.phase = "loading"  # loading, layout, ready, failed
        self.failure = ""
        self.call: Optional[Tuple[str, float]] = None  # (label, time.monotonic() at entry) of the call in flight
        self.latest: Tuple[float, List[float]] = (-math.inf, [])  # (time the reading began, values)
        self.wanted = -math.inf  # latest time a reader asked for a reading
        self.last_start = -math.inf
        self.quit = False
        self.clients = 0
        self.generation = forks.generation()  # in a fork()ed child the thread is not there, and cond may be held
        self._report: Optional[Callable[[str], None]] = None
        threading.Thread(target=self._main, name="sysprof-pynvml", daemon=True).start()

    # -- as the psutil backend sees it (the former NvmlState interface) ---------------------------
    @property
    def devices(self) -> List[Dict[str, object]]:
        return list(self.state.devices) if self.state is not None else []

    @property
    def report(self) -> Optional[Callable[[str], None]]:
        return self._report

    @report.setter
    def report(self, fn: Optional[Callable[[str], None]]) -> None:
        self._report = fn
        if self.state is not None:
            self.state.report = fn

    def flush(self) -> None:
        if self.state is not None:
            self.state.flush()

    # -- the poller thread -------------------------------------------------------------------------
    def timed(self, what: str, dev: int, fn, *args):
        if self.quit:
            raise _Abandoned()
        label = f"gpu/{dev}: {what}" if dev >= 0 else what
        t0 = time.monotonic()
        self.call = (label, t0)
        try:
            return fn(*args)
        finally:
            self.call = None
            took = time.monotonic() - t0
            if took > LATE_S and self._report is not None:
                notes = "; ".join(self.state.notes) if self.state is not None else ""
                self._report(f"{label} returned after {math.floor(took * 10) / 10:.1f} s" + (f"; {notes}" if notes else ""))

    def _set(self, phase: str, failure: str = "") -> None:
        with self.cond:
            if self.phase == "loading" or phase != "failed":
                self.phase, self.failure = phase, failure
            self.cond.notify_all()

    def _main(self) -> None:
        try:
            state = NvmlState(self.timed)
            state.report = self._report
            self.state = state
            self._set("layout")
            state.describe()
            reader = GpuReader(state)
            t = time.monotonic()
            self.latest = (t, reader.read(t))  # baselines for the rates
            self._set("ready")
        except _Abandoned:
            self._finish()
            return
        except Exception as exc:  # noqa: BLE001 - reported by open_gpu, or as a note once laid out
            if self.phase == "loading":
                self._set("failed", str(exc) if isinstance(exc, RuntimeError) else f"{type(exc).__name__}: {exc}")
            elif self.state is not None:
                self.state.note(f"gpu reader stopped: {type(exc).__name__}: {exc}")
            self._finish()
            return
        try:
            while True:
                with self.cond:
                    while not self.quit and self.wanted <= self.last_start:
                        self.cond.wait()
                    if self.quit:
                        break
                    t = self.last_start = time.monotonic()
                values = reader.read(t)
                with self.cond:
                    self.latest = (t, values)
                    self.cond.notify_all()
        except _Abandoned:
            pass
        except Exception as exc:  # noqa: BLE001 - the channels read NaN from now on
            state.note(f"gpu reader stopped: {type(exc).__name__}: {exc}")
        self._finish()

    def _finish(self) -> None:
        if self.state is not None:
            self.state._finalizer()  # nvmlShutdown here: no other pynvml call of ours can be in flight
        with self.cond:
            self.phase = "failed" if self.phase == "loading" else self.phase
            self.quit = True
            self.cond.notify_all()

    # -- any thread --------------------------------------------------------------------------------
    def blocked(self, now: float) -> Optional[str]:
        """'<call> blocked for <s> s' while a call has been in flight longer than LATE_S."""
        call = self.call
        if call is None or now - call[1] <= LATE_S:
            return None
        return f"{call[0]} blocked for {math.floor((now - call[1]) * 10) / 10:.1f} s"

    def ask(self, t: float) -> None:
        with self.cond:
            if t > self.wanted:
                self.wanted = t
            self.cond.notify_all()

    def wait_fresh(self, t: float) -> None:
        """Waits for a reading begun at or after t: at most SYNC_WAIT_S, and not while a call is blocked."""
        self.ask(t)
        with self.cond:
            while self.latest[0] < t and not self.quit and self.phase != "failed":
                now = time.monotonic()
                if now - t >= SYNC_WAIT_S or self.blocked(now) is not None:
                    break
                self.cond.wait(0.01)

    def release(self) -> None:
        if forks.generation() != self.generation:
            return
        with self.cond:
            self.clients -= 1
            if self.clients <= 0:
                self.quit = True
                self.cond.notify_all()


class _Client:
    """Held by a read function; when the last is collected the poller shuts NVML down and ends."""

    def __init__(self, poller: _Poller) -> None:
        with poller.cond:
            poller.clients += 1
        weakref.finalize(self, poller.release)


def _reader(poller: _Poller, width: int, sync: bool) -> Callable[[float], List[float]]:
    client = _Client(poller)
    prev = [None]
    shown = [None]

    def read(t: float) -> List[float]:
        _ = client
        if forks.generation() != poller.generation:  # inherited through fork(): the poller is the parent's
            return [NAN] * width
        if prev[0] is None:
            pass  # the backend's priming call, right after opening: the poller has just primed
        elif sync:
            t = time.monotonic()
            poller.wait_fresh(t)
        else:
            poller.ask(t)
        late = LATE_S + (t - prev[0] if prev[0] is not None and not sync else 0.0)
        prev[0] = t
        begun, values = poller.latest
        msg = poller.blocked(time.monotonic())
        if msg is None:
            shown[0] = None
        elif msg != shown[0] and poller.report is not None:
            shown[0] = msg
            poller.report(f"{msg}; gpu readings older than {round(late * 1000)} ms read NaN")
        if t - begun > late or len(values) != width:
            return [NAN] * width
        return list(values)
    return read


def open_gpu(state: Optional[_Poller]) -> Tuple[_Poller, Sequence[str], Callable[[float], List[float]]]:
    """(poller, channel names, read function) for the psutil backend; raises RuntimeError with the
    reason when NVML is unusable here or its discovery is blocked. The first call (state None) gives
    the sampling thread's reader, which takes the latest reading; a call with the poller of a previous
    one gives a synchronous reader (sample()) that waits, bounded, for a fresh reading."""
    sync = state is not None
    poller = state if state is not None else _Poller()
    with poller.cond:  # the first opening waits (bounded) for the layout; a later one finds it
        if sync and poller.phase == "loading":
            raise RuntimeError("gpu source was not opened")
        deadline = time.monotonic() + (0.0 if sync else OPEN_WAIT_S)
        while poller.phase not in ("ready", "failed") and time.monotonic() < deadline:
            poller.cond.wait(max(0.0, deadline - time.monotonic()))
        phase = poller.phase
    if phase == "failed":
        raise RuntimeError(poller.failure)
    if phase == "loading":
        msg = poller.blocked(time.monotonic()) or "GPU discovery did not finish within 1.5 s"
        with poller.cond:
            poller.quit = True
            poller.cond.notify_all()
        raise RuntimeError(f"{msg} at open; gpu source left out (its thread ends when the call returns)")
    names = [f"gpu/{i}/{c}" for i in poller.state.indices for c in CHANNELS]
    return poller, names, _reader(poller, len(names), sync)
