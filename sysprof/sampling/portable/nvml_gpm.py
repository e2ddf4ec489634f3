"""GPM (GPU Performance Monitoring, Hopper and newer) on the pynvml path, as csrc/gpu/nvml_gpm.cpp reads it
natively: the per-device state; the table is ``GPM_METRICS`` of the GPU metric table (sysprof/sampling/gpu_metrics.py),
the one the native build generates its rows from.

At discovery ``nvmlGpmQueryDeviceSupport`` says whether a device has GPM; if so two sample buffers are
allocated (``nvmlGpmSampleAlloc``) for the device's life, with one ``nvmlGpmMetricsGet_t`` request. Each
reading takes a sample into the buffer not holding the previous one and asks for the metrics between the
two, so each value covers the interval between two readings. A device without GPM, an older driver, or a
pynvml without the GPM API (nvidia-ml-py before 12.535): no GPM channels, and a note says why.
"""
from __future__ import annotations

import math
from typing import List, Optional

from ..gpu_metrics import GPM_METRICS
from . import nvml_library as lib

_API = ("nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc", "nvmlGpmSampleFree", "nvmlGpmSampleGet",
        "nvmlGpmMetricsGet", "c_nvmlGpmMetricsGet_t")


class GpmDevice:
    """One device's GPM buffers and request. ``open`` returns None and the reason when GPM is absent."""

    def __init__(self, pynvml, samples, request) -> None:
        self.pynvml, self.samples, self.req = pynvml, samples, request
        self.next = 0
        self.primed = False
        self.refused: set = set()
        self.served: set = set()

    @staticmethod
    def open(pynvml, timed, index: int, handle):
        """(GpmDevice, None) or (None, why the GPM channels are absent)."""
        if not all(hasattr(pynvml, n) for n in _API):
            return None, "nvmlGpmQueryDeviceSupport: NVML_ERROR_FUNCTION_NOT_FOUND"
        try:
            sup = timed("nvmlGpmQueryDeviceSupport", index, pynvml.nvmlGpmQueryDeviceSupport, handle)
        except pynvml.NVMLError as exc:
            return None, f"nvmlGpmQueryDeviceSupport: {lib.code_name(pynvml, exc.value)}"
        if not sup.isSupportedDevice:
            return None, "nvmlGpmQueryDeviceSupport: not supported on this device"
        samples = []
        try:
            for _ in range(2):
                samples.append(timed("nvmlGpmSampleAlloc", index, pynvml.nvmlGpmSampleAlloc))
        except pynvml.NVMLError as exc:
            GpmDevice(pynvml, samples, None).close()
            return None, f"nvmlGpmSampleAlloc: {lib.code_name(pynvml, exc.value)}"
        return GpmDevice(pynvml, samples, pynvml.c_nvmlGpmMetricsGet_t()), None

    def close(self) -> None:
        """Frees both buffers (on the poller thread, also while it ends: not through ``timed``)."""
        for s in self.samples:
            try:
                self.pynvml.nvmlGpmSampleFree(s)
            except Exception:  # noqa: BLE001 - best effort, before nvmlShutdown
                pass
        self.samples = []

    def read(self, timed, index: int, handle, refused_rows, o: List[float], slots, note, report) -> Optional[str]:
        """One GPM reading into o (slots: channel -> index). The call that found the device lost, or None."""
        pynvml = self.pynvml
        try:
            timed("nvmlGpmSampleGet", index, pynvml.nvmlGpmSampleGet, handle, self.samples[self.next])
        except pynvml.NVMLError as exc:
            self.primed = False
            code = exc.value
            if code in lib.LOST:
                return "nvmlGpmSampleGet"
            if code in lib.PERMANENT:
                note(f"gpu/{index}: GPM metrics read NaN (nvmlGpmSampleGet: {lib.code_name(pynvml, code)})")
                self.close()
            else:
                report(f"gpu/{index}: nvmlGpmSampleGet: {lib.code_name(pynvml, code)}")
            return None
        ask, self.primed = self.primed, True
        if ask:
            rows = tuple(m for m in GPM_METRICS if m.name not in self.refused
                         and (m.stands_in_for is None or m.stands_in_for in refused_rows))
            if rows:
                if not self._get(timed, index, rows, o, slots, note, report):
                    return "nvmlGpmMetricsGet"
        self.next ^= 1
        return None

    def _get(self, timed, index, rows, o, slots, note, report) -> bool:
        """False: the device is lost."""
        pynvml, q = self.pynvml, self.req
        q.version = pynvml.NVML_GPM_METRICS_GET_VERSION
        q.numMetrics = len(rows)
        q.sample1, q.sample2 = self.samples[self.next ^ 1], self.samples[self.next]
        for i, m in enumerate(rows):
            q.metrics[i].metricId = m.id
            q.metrics[i].nvmlReturn = 0
            q.metrics[i].value = math.nan
        try:
            timed("nvmlGpmMetricsGet", index, pynvml.nvmlGpmMetricsGet, q)
        except pynvml.NVMLError as exc:
            if exc.value in lib.LOST:
                return False
            report(f"gpu/{index}: nvmlGpmMetricsGet: {lib.code_name(pynvml, exc.value)}")
            return True
        for i, m in enumerate(rows):
            got = q.metrics[i]
            if got.nvmlReturn == 0:
                o[slots[m.channel]] = got.value * m.scale
                if m.stands_in_for is not None and m.name not in self.served:  # the field's note said NaN
                    self.served.add(m.name)
                    note(f"gpu/{index}: {m.channel} from GPM ({m.name})")
            elif got.nvmlReturn in lib.PERMANENT and m.name not in self.refused:
                self.refused.add(m.name)
                if m.stands_in_for is None:  # a stand-in's channel was noted as NaN with its field already
                    note(f"gpu/{index}: {m.channel} read NaN (nvmlGpmMetricsGet {m.name}: "
                         f"{lib.code_name(pynvml, got.nvmlReturn)})")
        return True
