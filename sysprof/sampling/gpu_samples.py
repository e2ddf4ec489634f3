"""The driver's own buffered GPU samples (``nvmlDeviceGetSamples``), drained by :meth:`sysprof.Sampler.drain_gpu_samples`.

NVML keeps about a second of samples per device for power, GPU and memory utilisation and the SM and memory
clocks, each with the driver's own timestamp, so a trace can carry the driver's high-rate power without polling
at that rate. The GPU reader thread (csrc/gpu/nvml_samples.hpp; pynvml's twin: portable/nvml_samples.py), never
the sampling thread, asks every :data:`PERIOD_S` with ``lastSeenTimeStamp`` (so each sample comes once, and only
samples taken since the sampler opened), converts to base units and keeps them in a bounded side buffer
(:data:`KEPT` entries; the oldest dropped, counted). The driver's timestamps are CPU wall-clock microseconds
since the epoch, the clock of the rows' ``timestamps_ns``: they become ns by * 1000.

Series (:data:`SERIES`), per device ``gpu/<i>/<name>``, in base units (NVML gives mW, %, MHz):

=====================================  ======  ===================================
``power_samples_watts``                W       ``NVML_TOTAL_POWER_SAMPLES`` (mW / 1000)
``utilization_samples_percent``        %       ``NVML_GPU_UTILIZATION_SAMPLES``
``memory_utilization_samples_percent`` %       ``NVML_MEMORY_UTILIZATION_SAMPLES``
``sm_clock_samples_hz``                Hz      ``NVML_PROCESSOR_CLK_SAMPLES`` (MHz * 1e6)
``memory_clock_samples_hz``            Hz      ``NVML_MEMORY_CLK_SAMPLES`` (MHz * 1e6)
=====================================  ======  ===================================

A series the driver refuses for good (NOT_SUPPORTED for that type on that GPU, a driver without the call) is not
asked again and is named in :attr:`DriverSamples.absent`; ``NVML_ERROR_NOT_FOUND`` only means nothing new.
``sysprof record`` writes each series as counter events at the samples' own timestamps (Chrome JSON and
.pftrace), their units in a ``sysprof units`` event, and the totals in the stop event (``gpu_samples``); the
Composer path (:class:`sysprof.SystemProfiler`) hands the same counters to its trace handlers
(:mod:`sysprof.profiler.composer_sink`).
"""
from __future__ import annotations

from typing import Dict, NamedTuple, Tuple

import numpy as np

__all__ = ["SERIES", "PERIOD_S", "KEPT", "ARRIVAL_S", "DriverSamples", "drain", "unit_of"]

PERIOD_S = 0.5
KEPT = 1 << 16
#: a sample reaches a drain well within this of being taken (read every PERIOD_S; a slow NVML call or a late drain
#: adds seconds at most): how far back the Composer path keeps its recording log for them
ARRIVAL_S = 10.0


class Kind(NamedTuple):
    type: int  # nvmlSamplingType_t
    type_name: str
    name: str  # gpu/<i>/<name>
    scale: float  # NVML's value * scale: base units
    unit: str


#: the five types, in the native table's order (csrc/gpu/nvml_samples.cpp kSampleKindTable)
SERIES = (
    Kind(0, "NVML_TOTAL_POWER_SAMPLES", "power_samples_watts", 1e-3, "W"),
    Kind(1, "NVML_GPU_UTILIZATION_SAMPLES", "utilization_samples_percent", 1.0, "%"),
    Kind(2, "NVML_MEMORY_UTILIZATION_SAMPLES", "memory_utilization_samples_percent", 1.0, "%"),
    Kind(5, "NVML_PROCESSOR_CLK_SAMPLES", "sm_clock_samples_hz", 1e6, "Hz"),
    Kind(6, "NVML_MEMORY_CLK_SAMPLES", "memory_clock_samples_hz", 1e6, "Hz"),
)
_UNITS = {k.name: k.unit for k in SERIES}


def unit_of(series: str) -> str:
    """The unit of ``gpu/<i>/<name>``."""
    return _UNITS.get(series.rsplit("/", 1)[-1], "")


class DriverSamples(Dict[str, Tuple[np.ndarray, np.ndarray]]):
    """series -> ``(timestamps_ns int64, values float64)``, oldest first; ``dropped``: samples the full buffer
    dropped since the previous drain; ``absent``: series -> why it is not read (all drains so far);
    ``read_cpu_ns`` and ``device_reads``: the reader thread's CPU time in samples reads so far and the device reads
    it made (``benchmarks/bench_gpu.py``'s cost per device per read)."""

    def __init__(self, *a, dropped: int = 0, absent: Dict[str, str] = None, read_cpu_ns: int = 0,
                 device_reads: int = 0) -> None:
        super().__init__(*a)
        self.dropped = dropped
        self.absent = dict(absent or {})
        self.read_cpu_ns, self.device_reads = read_cpu_ns, device_reads


def _group(series, index, t_ns, values, dropped, absent, read_cpu_ns=0, device_reads=0) -> DriverSamples:
    out = DriverSamples(dropped=int(dropped), absent=absent, read_cpu_ns=int(read_cpu_ns),
                        device_reads=int(device_reads))
    if not len(index):
        return out
    idx = np.asarray(index, dtype=np.int64)
    t = np.asarray(t_ns, dtype=np.int64)
    v = np.asarray(values, dtype=np.float64)
    for k in np.unique(idx).tolist():
        m = idx == k
        order = np.argsort(t[m], kind="stable")
        out[series[k]] = (t[m][order], v[m][order])
    return out


def drain(sampler) -> DriverSamples:
    """The driver samples buffered since the last drain of ``sampler`` (a :class:`sysprof.Sampler`); empty
    without GPUs, in a forked child, or when the reader is gone."""
    if getattr(sampler, "inherited", False):
        return DriverSamples()
    impl = sampler._impl
    if sampler.backend == "native":
        from .sampler import _native

        out = DriverSamples()
        tokens = {d.get("driver_samples") for d in impl.devices if d.get("driver_samples")}
        for tok in sorted(tokens):
            got = _native.nvml_drain_samples(int(tok))
            if not got:
                continue
            part = _group(got["series"], got["index"], got["t_ns"], got["values"], got["dropped"], got["absent"],
                          got["read_cpu_ns"], got["device_reads"])
            out.update(part)
            out.dropped += part.dropped
            out.absent.update(part.absent)
            out.read_cpu_ns += part.read_cpu_ns
            out.device_reads += part.device_reads
        return out
    poller = getattr(impl, "_gpu_state", None)
    reader = getattr(getattr(poller, "state", None), "samples", None)
    if reader is None:
        return DriverSamples()
    return _group(*reader.take())


class SampleEvents:
    """Drained driver samples as counters at their own times (:meth:`take`; the session's producer,
    ``pipeline.producers.DriverSamples``, makes the events: a units event for each new series in :attr:`declared`,
    a counter per sample named by its series, keyed by its last part). Keeps the totals for the stop event."""

    def __init__(self) -> None:
        self.declared: set = set()
        self.dropped = 0
        self.absent: Dict[str, str] = {}
        self.samples = 0

    def take(self, drained: DriverSamples) -> list:
        """``(t_ns, series, key, value)`` of every finite sample of ``drained``, in time order (NaN left out; the key
        is the series' last part, a counter of its own as Composer's layout names one: join_channel); adds to the
        totals. The one place a sample becomes a counter (for every sink, through the session's producer in
        :mod:`sysprof.pipeline.producers`)."""
        self.dropped += drained.dropped
        self.absent.update(drained.absent)
        out = []
        for series, (t, v) in drained.items():
            key = series.rsplit("/", 1)[-1]
            out += [(int(ti), series, key, float(vi)) for ti, vi in zip(t.tolist(), v.tolist()) if vi == vi]
            self.samples += len(t)
        out.sort(key=lambda e: e[0])
        return out

    def summary(self) -> dict:
        """The stop event's ``gpu_samples``: samples written, dropped (the side buffer was full), absent series."""
        return {"samples": self.samples, "dropped": self.dropped, "absent": dict(self.absent)}
