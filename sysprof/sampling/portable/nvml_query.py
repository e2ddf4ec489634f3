"""The pynvml path's NVML state and readings, as csrc/gpu/nvml_query.cpp has them natively.

:class:`NvmlState` is the initialised library and what the reader learnt (refused metrics, lost
devices, notes); :class:`GpuReader` reads every device through it, on the poller thread
(sysprof/sampling/portable/nvml.py). A reading of a device is one ``nvmlDeviceGetFieldValues`` call for
the field metrics still asked (each entry's return code checked), then a loop over the getter rows of
the GPU metric table (sysprof/sampling/gpu_metrics.py, looked up through nvml_table.py). Every answer goes
through one "call, classify, remember" path: permanent answers are remembered per (device, metric) and never asked again, falling back where the
table has another way; GPU_IS_LOST retires the device (NaN) while the others go on.
"""
from __future__ import annotations

import math
import time
import weakref
from typing import Callable, Dict, List, Optional

from ...text import text
from . import nvml_library as lib
from ..gpu_metrics import GPM_METRICS, LEVEL_RULES, SLOW_S, Metric
from .nvml_gpm import GpmDevice
from .nvml_table import BY_KEY, CHANNELS, FIELDS, GETTERS, GPM_CHANNELS, INDEX, SLOW_CHANNELS, field_value, wanted
from .rules import EnergyPower, RateCounter

NAN = math.nan
_SLOTS = {m.metric: tuple(INDEX[c] for c in m.channels) for m in BY_KEY.values()}
_SLOW = tuple(INDEX[c] for c in SLOW_CHANNELS)
_READ_AT = INDEX["reading_time_seconds"]  # the last channel: when the device was read (wall-clock seconds)
#: the fallbacks of the fields GPM stands in for (nvmlDeviceGetPcieThroughput): not asked on a GPM device
GPM_REPLACES = tuple(f for f in (BY_KEY[m.stands_in_for].fallback for m in GPM_METRICS if m.stands_in_for)
                     if f is not None)
_RATES = tuple(m.metric for m in BY_KEY.values() if m.rule in ("byte_rate", "kib_rate", "ns_total"))


class Abandoned(Exception):
    """Raised instead of a pynvml call once nobody wants the poller any more."""


def _getters(pynvml) -> Dict[str, tuple]:
    """metric -> (pynvml function, arguments after the handle, answer -> raw: a tuple of levels or a counter)."""
    gpu = pynvml.NVML_TEMPERATURE_GPU
    one = lambda v: (v,)  # noqa: E731
    ecc = getattr(pynvml, "NVML_VOLATILE_ECC", 0)
    return {
        "util": ("nvmlDeviceGetUtilizationRates", (), lambda u: (u.gpu, u.memory)),
        "mem_v2": ("nvmlDeviceGetMemoryInfo", (getattr(pynvml, "nvmlMemory_v2", 0x02000028),),
                   lambda m: (m.used, m.total, m.free, m.reserved)),
        "mem_v1": ("nvmlDeviceGetMemoryInfo", (), lambda m: (m.used, m.total, m.free)),
        "power_usage": ("nvmlDeviceGetPowerUsage", (), one),
        "energy_fn": ("nvmlDeviceGetTotalEnergyConsumption", (), lambda mj: mj),
        "temp_v": ("nvmlDeviceGetTemperatureV", (gpu,), one),
        "temp": ("nvmlDeviceGetTemperature", (gpu,), one),
        "sm_clock": ("nvmlDeviceGetClockInfo", (pynvml.NVML_CLOCK_SM,), one),
        "mem_clock": ("nvmlDeviceGetClockInfo", (pynvml.NVML_CLOCK_MEM,), one),
        "pcie_tx_tput": ("nvmlDeviceGetPcieThroughput", (getattr(pynvml, "NVML_PCIE_UTIL_TX_BYTES", 0),), one),
        "pcie_rx_tput": ("nvmlDeviceGetPcieThroughput", (getattr(pynvml, "NVML_PCIE_UTIL_RX_BYTES", 1),), one),
        # throttling and health
        "clk_events": ("nvmlDeviceGetCurrentClocksEventReasons", (), one),
        "clk_throttle": ("nvmlDeviceGetCurrentClocksThrottleReasons", (), one),
        "viol_power": ("nvmlDeviceGetViolationStatus", (getattr(pynvml, "NVML_PERF_POLICY_POWER", 0),),
                       lambda v: v.violationTime),
        "viol_thermal": ("nvmlDeviceGetViolationStatus", (getattr(pynvml, "NVML_PERF_POLICY_THERMAL", 1),),
                         lambda v: v.violationTime),
        "ecc_corrected": ("nvmlDeviceGetTotalEccErrors", (getattr(pynvml, "NVML_MEMORY_ERROR_TYPE_CORRECTED", 0), ecc),
                          one),
        "ecc_uncorrected": ("nvmlDeviceGetTotalEccErrors",
                            (getattr(pynvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1), ecc), one),
        "remapped_rows": ("nvmlDeviceGetRemappedRows", (), lambda r: tuple(r[:3])),
        "pcie_replay": ("nvmlDeviceGetPcieReplayCounter", (), one),
        "power_limit": ("nvmlDeviceGetEnforcedPowerLimit", (), one),
        "pcie_gen": ("nvmlDeviceGetCurrPcieLinkGeneration", (), one),
        "pcie_width": ("nvmlDeviceGetCurrPcieLinkWidth", (), one),
    }


def _shutdown(fn) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001 - best effort at exit
        pass


class NvmlState:
    """The initialised library and what the reader learnt: refused metrics, lost devices, notes.
    Built on the poller thread; ``timed(what, device, fn, *args)`` makes each call visible to others."""

    def __init__(self, timed: Callable, gpus=None) -> None:
        self.timed = timed
        self.gpus = gpus  # sampling.gpus.selection(): (entries, from CUDA_VISIBLE_DEVICES), or None
        pynvml = self.pynvml = lib.import_pynvml()
        lib.load_into(pynvml)
        try:
            timed("nvmlInit_v2", -1, pynvml.nvmlInit)
        except pynvml.NVMLError as exc:
            raise RuntimeError(lib.init_failure(pynvml, exc.value)) from None
        # Bound now: pynvml's function cache is global and may point at another library by then. Called
        # by the poller thread only (not at exit, when a call of that thread may be in flight).
        self._finalizer = weakref.finalize(self, _shutdown, pynvml._nvmlGetFunctionPointer("nvmlShutdown"))
        self._finalizer.atexit = False
        self.notes: List[str] = []
        self.events = None  # the XidWaiter (nvml_events.py), opened by the poller after discovery
        self.samples = None  # the DriverSampleReader (nvml_samples.py), made by the poller after discovery
        self.report: Optional[Callable[[str], None]] = None
        self.getters = _getters(pynvml)
        try:
            self._discover()
        except Abandoned:
            self._finalizer()
            raise

    def _discover(self) -> None:
        pynvml, timed = self.pynvml, self.timed
        try:
            count = timed("nvmlDeviceGetCount_v2", -1, pynvml.nvmlDeviceGetCount)
        except pynvml.NVMLError as exc:
            self._finalizer()
            raise RuntimeError(f"nvmlDeviceGetCount_v2 failed: {lib.code_name(pynvml, exc.value)}") from None
        self.indices: List[int] = []
        self.handles = []
        self.devices: List[Dict[str, object]] = []
        skipped = []
        for i in range(count):
            try:
                h = timed("nvmlDeviceGetHandleByIndex_v2", i, pynvml.nvmlDeviceGetHandleByIndex, i)
            except pynvml.NVMLError as exc:
                skipped.append(f"gpu/{i}: nvmlDeviceGetHandleByIndex_v2 {lib.code_name(pynvml, exc.value)}; left out")
                continue
            self.indices.append(i)
            self.handles.append(h)
            self.devices.append({"index": i, "name": "", "uuid": "", "pci_bus_id": ""})
        if not self.handles:
            self._finalizer()
            raise RuntimeError("; ".join(skipped) or "NVML found no GPU")
        self.cuda = False
        if self.gpus is not None and self.gpus[0] is not None:
            self._select(*self.gpus)
        self.refused: List[set] = [set() for _ in self.handles]
        self.lost = [False] * len(self.handles)
        self.gpm: List[Optional[GpmDevice]] = [None] * len(self.handles)
        for dev in range(len(self.handles)):  # an older pynvml without a getter: as FUNCTION_NOT_FOUND
            for metric, (fn, _, _) in self.getters.items():
                if not hasattr(pynvml, fn):
                    self.refuse(dev, metric, lib.FUNCTION_NOT_FOUND)
            self.gpm[dev], why = GpmDevice.open(pynvml, timed, self.indices[dev], self.handles[dev])
            if why is not None:
                self.note(f"gpu/{self.indices[dev]}: GPM metrics absent ({why})")
            else:  # where GPM stands in for a field, the field's older fallback is never asked
                self.refused[dev].update(GPM_REPLACES)
        #: per device, the channels laid out (indices into CHANNELS): all but GPM's where it has none
        self.layout = [tuple(i for i, c in enumerate(CHANNELS) if g is not None or c not in GPM_CHANNELS)
                       for g in self.gpm]
        if skipped:
            self.note("; ".join(skipped))

    def _select(self, entries, cuda: bool) -> None:
        """Keeps the devices ``entries`` select, in their order (csrc/gpu/nvml_select.cpp natively)."""
        from ..gpus import match

        kinds = {k for k, _ in entries}
        found = []
        for i, h in zip(self.indices, self.handles):
            d = {"index": i}
            if "uuid" in kinds:
                d["uuid"] = self._text("nvmlDeviceGetUUID", i, self.pynvml.nvmlDeviceGetUUID, h)
            if "pci" in kinds:
                d["pci_bus_id"] = self._pci(i, h)
            if "mig" in kinds:
                d["mig_instances"] = self._mig(i, h) or []
            found.append(d)
        keep, unmatched = match(entries, found)
        if unmatched:
            self.note("gpu selection: no GPU matches " + ", ".join(unmatched))
        if not keep:
            self._finalizer()
            why = "no GPU is visible under CUDA_VISIBLE_DEVICES" if cuda else "no GPU matches the gpus selection"
            raise RuntimeError(f"{why} ({'; '.join(self.notes)})" if self.notes else why)
        self.indices = [self.indices[k] for k in keep]
        self.handles = [self.handles[k] for k in keep]
        self.devices = [self.devices[k] for k in keep]
        self.cuda = cuda

    def _mig(self, i: int, h) -> Optional[List[str]]:
        """The UUIDs of a MIG-enabled device's instances; None: MIG is off or not supported."""
        p = self.pynvml
        try:
            current, _ = self.timed("nvmlDeviceGetMigMode", i, p.nvmlDeviceGetMigMode, h)
            if current != getattr(p, "NVML_DEVICE_MIG_ENABLE", 1):
                return None
            count = self.timed("nvmlDeviceGetMaxMigDeviceCount", i, p.nvmlDeviceGetMaxMigDeviceCount, h)
        except (p.NVMLError, AttributeError):
            return None
        out = []
        for k in range(count):
            try:
                mig = self.timed("nvmlDeviceGetMigDeviceHandleByIndex", i, p.nvmlDeviceGetMigDeviceHandleByIndex, h, k)
            except p.NVMLError:
                continue
            u = self._text("nvmlDeviceGetUUID", i, p.nvmlDeviceGetUUID, mig)
            if u:
                out.append(u)
        return out

    def describe(self) -> None:
        """Names, UUIDs and PCI bus ids (MIG instances, the CUDA index): after the layout, which is all that
        opening needs."""
        for d, (i, h) in enumerate(zip(self.indices, self.handles)):
            self.devices[d] = {"index": i,
                               "name": self._text("nvmlDeviceGetName", i, self.pynvml.nvmlDeviceGetName, h),
                               "uuid": self._text("nvmlDeviceGetUUID", i, self.pynvml.nvmlDeviceGetUUID, h),
                               "pci_bus_id": self._pci(i, h)}
            migs = self._mig(i, h)
            if migs is not None:
                self.devices[d]["mig_instances"] = migs
            if self.cuda:
                self.devices[d]["cuda_index"] = d

    def _text(self, what: str, i: int, fn, h) -> str:
        try:
            v = self.timed(what, i, fn, h)
        except self.pynvml.NVMLError:
            return ""
        return text(v)

    def _pci(self, i: int, h) -> str:
        try:
            v = self.timed("nvmlDeviceGetPciInfo_v3", i, self.pynvml.nvmlDeviceGetPciInfo_v3, h).busId
        except (self.pynvml.NVMLError, AttributeError):
            return ""
        return text(v)

    def note(self, msg: str) -> None:
        self.notes.append(msg)
        self.flush()

    def flush(self) -> None:
        if self.report is not None and self.notes:
            self.report("; ".join(self.notes))

    def refuse(self, dev: int, metric: str, code: int) -> None:
        """Remembers a permanent refusal; notes it when a channel is left without a source."""
        if metric in self.refused[dev]:
            return
        self.refused[dev].add(metric)
        m = BY_KEY[metric]
        if m.fallback is not None and m.fallback not in self.refused[dev]:
            return
        self.note(f"gpu/{self.indices[dev]}: {m.nan_note} read NaN ({m.call}: {lib.code_name(self.pynvml, code)})")

    def mark_lost(self, dev: int, what: str) -> None:
        if not self.lost[dev]:
            self.lost[dev] = True
            self.note(f"gpu/{self.indices[dev]}: lost ({what}: NVML_ERROR_GPU_IS_LOST or RESET_REQUIRED); "
                      "its channels read NaN")

    def classify(self, dev: int, metric: str, code: int) -> None:
        """What a failed answer means: a lost device and a permanent refusal are remembered; anything
        else (a timeout, ...) is NaN for this reading only, and reported."""
        m = BY_KEY[metric]
        if code in lib.LOST:
            self.mark_lost(dev, m.call)
        elif code in lib.PERMANENT or (code == lib.INVALID_ARGUMENT and m.field_id is not None):
            self.refuse(dev, metric, code)  # an unknown field id (older driver) is refused as INVALID_ARGUMENT
        elif self.report is not None:
            self.report(f"gpu/{self.indices[dev]}: {m.call}: {lib.code_name(self.pynvml, code)}")

    def channels(self) -> List[str]:
        return [f"gpu/{i}/{CHANNELS[k]}" for i, lay in zip(self.indices, self.layout) for k in lay]

    def close_gpm(self) -> None:
        """Frees the GPM buffers (on the poller thread, before nvmlShutdown)."""
        for dev, g in enumerate(getattr(self, "gpm", ())):
            if g is not None:
                g.close()
                self.gpm[dev] = None


class GpuReader:
    """Reads every device through an NvmlState (on the poller thread); ``read(t)`` returns one row slice."""

    def __init__(self, state: NvmlState) -> None:
        self.s = state
        n = len(state.handles)
        self.rates = [{m: RateCounter() for m in _RATES} for _ in range(n)]
        self.energy = [EnergyPower() for _ in range(n)]
        self.slow_at = [-math.inf] * n
        self.held = [[NAN] * len(CHANNELS) for _ in range(n)]

    def read(self, t: float) -> List[float]:
        out: List[float] = []
        for dev in range(len(self.s.handles)):
            w0 = time.time_ns()
            o = self._device(dev, t)
            if not self.s.lost[dev]:  # the middle of the device's calls: the trace stamps its values with it
                o[_READ_AT] = (w0 + (time.time_ns() - w0) // 2) * 1e-9
            out += [o[k] for k in self.s.layout[dev]]
        return out

    def _device(self, dev: int, t: float) -> List[float]:
        o = [NAN] * len(CHANNELS)
        if self.s.lost[dev]:
            return o
        slow = t - self.slow_at[dev] >= SLOW_S
        if slow:
            self.slow_at[dev] = t
        if not self._fields(dev, t, o) or not self._getters(dev, t, slow, o) or not self._gpm(dev, o):
            return [NAN] * len(CHANNELS)
        held = self.held[dev]
        for k in _SLOW:  # slow channels: as read now, else as last read
            if slow:
                held[k] = o[k]
            else:
                o[k] = held[k]
        if self.s.events is not None:
            self.s.events.values(dev, o)
        return o

    def _gpm(self, dev: int, o: List[float]) -> bool:
        """The GPM metrics, where the device has GPM. False: the device is lost."""
        s, g = self.s, self.s.gpm[dev]
        if g is None:
            return True
        report = s.report if s.report is not None else (lambda msg: None)
        lost = g.read(s.timed, s.indices[dev], s.handles[dev], s.refused[dev], o, INDEX, s.note, report)
        if not g.samples:
            s.gpm[dev] = None  # refused for good: NaN from now on
        if lost is not None:
            s.mark_lost(dev, lost)
            return False
        return True

    def ask(self, dev: int, metric: str, fn, *args):
        """Call, classify, remember: (True, answer), or (False, None) with what the failure means recorded."""
        s = self.s
        try:
            return True, s.timed(BY_KEY[metric].call, s.indices[dev], fn, *args)
        except s.pynvml.NVMLError as exc:
            code = exc.value
        except (AttributeError, TypeError):  # an older pynvml without this function or argument
            code = lib.FUNCTION_NOT_FOUND
        s.classify(dev, metric, code)
        return False, None

    def _getters(self, dev: int, t: float, slow: bool, o: List[float]) -> bool:
        """The getter rows, each asked once its turn comes (a slow row only when slow). False: the device is lost."""
        s, h = self.s, self.s.handles[dev]
        for m in GETTERS:
            if (m.slow and not slow) or not wanted(m.metric, s.refused[dev]):
                continue
            fn, args, raw = s.getters[m.metric]
            ok, answer = self.ask(dev, m.metric, getattr(s.pynvml, fn, None), h, *args)
            if ok:
                self._store(dev, m, raw(answer), t, o)
            if s.lost[dev]:
                return False
        return True

    def _fields(self, dev: int, t: float, o: List[float]) -> bool:
        """Every field metric still asked, in one call. False: the device is lost."""
        s = self.s
        fields = [m for m in FIELDS if wanted(m.metric, s.refused[dev])]
        if not fields:
            return True
        pynvml = s.pynvml
        try:
            vals = s.timed("nvmlDeviceGetFieldValues", s.indices[dev], pynvml.nvmlDeviceGetFieldValues,
                           s.handles[dev], [(m.field_id, m.scope) for m in fields])
        except pynvml.NVMLError as exc:
            return self._fields_refused(dev, fields, exc.value)
        for m, f in zip(fields, vals):
            if f.nvmlReturn != 0:
                s.classify(dev, m.metric, f.nvmlReturn)
                continue
            v = field_value(f)
            if v is not None:
                self._store(dev, m, (v,) if m.rule in LEVEL_RULES else (v if v >= 0 else None), t, o)
        return not s.lost[dev]

    def _fields_refused(self, dev: int, fields: List[Metric], code: int) -> bool:
        """The field call itself failed: lost, refused (each field falls back or reads NaN), or NaN this once."""
        s = self.s
        if code in lib.LOST:
            s.mark_lost(dev, "nvmlDeviceGetFieldValues")
            return False
        if code in lib.PERMANENT:
            for m in fields:
                s.refuse(dev, m.metric, code)
        elif s.report is not None:
            s.report(f"gpu/{s.indices[dev]}: nvmlDeviceGetFieldValues: {lib.code_name(s.pynvml, code)}")
        return True

    def _store(self, dev: int, m: Metric, raw, t: float, o: List[float]) -> None:
        """Writes a metric's channels from its raw answer, by the row's rule."""
        slots = _SLOTS[m.metric]
        if m.rule == "level":
            for i, v in zip(slots, raw):
                o[i] = float(v)
        elif m.rule == "milli":
            o[slots[0]] = raw[0] / 1000.0
        elif m.rule == "mega":
            o[slots[0]] = raw[0] * 1e6
        elif m.rule == "kilo":
            o[slots[0]] = raw[0] * 1000.0
        elif raw is None:
            return
        elif m.rule == "energy_mj":
            o[slots[0]] = raw / 1000.0
            o[slots[1]] = self.energy[dev].update(int(raw), t)
        elif m.rule == "ns_total":
            o[slots[0]] = raw * 1e-9
            o[slots[1]] = self.rates[dev][m.metric].rate(int(raw), t) * 1e-9
        else:  # byte_rate, kib_rate
            o[slots[0]] = self.rates[dev][m.metric].rate(int(raw) * (1024 if m.rule == "kib_rate" else 1), t)
