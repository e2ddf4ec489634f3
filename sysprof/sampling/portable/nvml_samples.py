"""pynvml's twin of csrc/gpu/nvml_samples.hpp: the driver's buffered samples (``nvmlDeviceGetSamples``), read on the
poller thread every ``PERIOD_S`` with ``lastSeenTimeStamp``, kept in a bounded buffer (oldest dropped, counted)
and taken by :func:`sysprof.sampling.gpu_samples.drain`. See that module for the series and their units."""
from __future__ import annotations

import collections
import math
import threading
import time
from typing import Dict, List

from . import nvml_library as lib
from .nvml_table import field_value
from ..gpu_samples import KEPT, PERIOD_S, SERIES

NOT_FOUND = 6


class _Value:  # field_value() reads an nvmlFieldValue_t; a sample's union and value type fit the same shape
    __slots__ = ("valueType", "value")

    def __init__(self, t, v) -> None:
        self.valueType, self.value = t, v


class DriverSampleReader:
    """Made on the poller thread after discovery; :meth:`read` on that thread, :meth:`take` from any."""

    def __init__(self, state) -> None:
        self.s = state
        self.series = [f"gpu/{i}/{k.name}" for i in state.indices for k in SERIES]
        now_us = time.time_ns() // 1000  # only samples taken from here on
        self.last_seen = [now_us] * len(self.series)
        self.refused = [False] * len(self.series)
        self.absent: Dict[str, str] = {}
        self.buf: collections.deque = collections.deque()
        self.dropped = 0
        self.read_cpu_ns = self.device_reads = 0  # the cost figures of benchmarks/bench_gpu.py
        self.lock = threading.Lock()
        self.at = -math.inf
        if not hasattr(state.pynvml, "nvmlDeviceGetSamples"):
            self._absent_all()

    def _absent_all(self) -> None:
        self.refused = [True] * len(self.series)
        with self.lock:
            self.absent = {s: "nvmlDeviceGetSamples: NVML_ERROR_FUNCTION_NOT_FOUND (an older driver)"
                           for s in self.series}

    def read(self, t: float) -> None:
        if t - self.at < PERIOD_S:
            return
        self.at = t
        cpu0 = time.thread_time_ns()
        for d in range(len(self.s.handles)):
            if not self.s.lost[d] and not all(self.refused[d * len(SERIES):(d + 1) * len(SERIES)]):
                self._device(d)
                self.device_reads += 1
        with self.lock:
            self.read_cpu_ns += time.thread_time_ns() - cpu0

    def _device(self, d: int) -> None:
        s, pynvml, h = self.s, self.s.pynvml, self.s.handles[d]
        for j, kind in enumerate(SERIES):
            k = d * len(SERIES) + j
            if self.refused[k]:
                continue
            try:
                vtype, samples = s.timed("nvmlDeviceGetSamples", s.indices[d], pynvml.nvmlDeviceGetSamples, h,
                                         kind.type, self.last_seen[k])
            except pynvml.NVMLError as exc:
                if exc.value == lib.FUNCTION_NOT_FOUND:  # a driver without the call: as the native reader says
                    self._absent_all()
                    return
                if exc.value != NOT_FOUND and exc.value in lib.PERMANENT:
                    self.refused[k] = True
                    with self.lock:
                        self.absent[self.series[k]] = (f"nvmlDeviceGetSamples({kind.type_name}): "
                                                       f"{lib.code_name(pynvml, exc.value)}")
                continue
            self._keep(k, vtype, samples, kind.scale)

    def _keep(self, k: int, vtype: int, samples, scale: float) -> None:
        seen = self.last_seen[k]
        got = []
        for x in samples:
            ts = int(x.timeStamp)
            if ts <= seen:  # each sample once, whatever the driver returns
                continue
            v = field_value(_Value(vtype, x.sampleValue))
            got.append((k, ts * 1000, math.nan if v is None else float(v) * scale))
            self.last_seen[k] = max(self.last_seen[k], ts)
        with self.lock:
            over = len(self.buf) + len(got) - KEPT
            if over > 0:
                for _ in range(min(over, len(self.buf))):
                    self.buf.popleft()
                self.dropped += over
                got = got[-KEPT:]
            self.buf.extend(got)

    def take(self):
        """``(series, index, t_ns, values, dropped, absent)`` of everything buffered, as the native drain gives."""
        with self.lock:
            items: List[tuple] = list(self.buf)
            self.buf.clear()
            dropped, self.dropped = self.dropped, 0
            absent = dict(self.absent)
            cost = (self.read_cpu_ns, self.device_reads)
        return (self.series, [i for i, _, _ in items], [t for _, t, _ in items], [v for _, _, v in items], dropped,
                absent, *cost)
