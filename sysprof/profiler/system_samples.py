"""The driver's buffered GPU samples (``nvmlDeviceGetSamples``) on the Composer path (:class:`sysprof.SystemProfiler`,
hence :class:`sysprof.Profiler` and :func:`sysprof.profile`): drained at each of the profiler's drains and handed to
the trace handlers as counter events at the driver's own timestamps, made by ``record``'s builder
(:meth:`sysprof.sampling.gpu_samples.SampleEvents.take`: one place for the series, keys, units and totals).

* ``gpu/<i>/<series>`` ``{<series>: value}`` [gpu], e.g. ``gpu/0/power_samples_watts`` ``{"power_samples_watts":
  251.0}``, in base units, each sample a counter event of its own at the time the driver took it.

Like the rows, a sample is emitted only when it was taken while the profiler recorded, with the training timestamp
current then. The reader asks the driver every 0.5 s, so a sample reaches a drain up to about half a second after it
was taken: one taken in a cycle whose file was already saved is left out (counted, ``late``) rather than written into
the next cycle's file. Each handler gets them through ``process_system_counter`` (sysprof's handlers declare the
series' units in the file's ``sysprof units`` event, as ``record`` does; the base class's default, and a handler
without the method such as Composer's, gets a plain ``process_counter_event``).
"""
from __future__ import annotations

import logging
from typing import Any, List

import numpy as np

from sysprof.profiler.trace_handler import send_system_events
from sysprof.sampling.gpu_samples import ARRIVAL_S, SampleEvents, unit_of

__all__ = ["SystemSamples"]

log = logging.getLogger(__name__)

_CATEGORIES = ("gpu",)


class SystemSamples:
    """The driver samples of one sampler's run (made once the sampler runs, only where it has GPU channels)."""

    #: how far back the profiler keeps its recording log for samples still to come (ns)
    arrival_ns = int(ARRIVAL_S * 1e9)

    def __init__(self, sampler: Any) -> None:
        self.sampler = sampler
        self.builder = SampleEvents()
        self.saved_ns: Any = None  # when the last cycle was saved: samples taken before it are late
        self.late = 0
        self._units: dict = {}  # series -> {series: unit}, shared by its events
        self._failed = False

    def take(self, recording_log: Any) -> List[tuple]:
        """``(name, wall ns, training timestamp, values, units)`` of the samples drained now that were taken while
        recording, in time order; ``recording_log`` is the profiler's (``classify``, ``stamps``), read before it is
        pruned. Never raises (a failed drain is logged once and gives nothing)."""
        try:
            got = self.builder.take(self.sampler.drain_gpu_samples())
        except Exception:  # noqa: BLE001 - the driver's samples never stop training
            if not self._failed:
                log.exception("sysprof SystemProfiler: draining the GPU driver samples failed")
            self._failed = True
            return []
        if not got:
            return []
        t = np.fromiter((e[0] for e in got), dtype=np.int64, count=len(got))
        mask, step = recording_log.classify(t)
        if self.saved_ns is not None:
            late = mask & (t < self.saved_ns)
            self.late += int(late.sum())
            mask &= ~late
        stamps = recording_log.stamps
        return [(series, t_ns, stamps[i], {key: value}, self._unit(series))
                for (t_ns, series, key, value), m, i in zip(got, mask.tolist(), step.tolist()) if m]

    def _unit(self, series: str) -> dict:
        units = self._units.get(series)
        if units is None:
            units = self._units[series] = {series: unit_of(series)}
        return units

    def saved(self, t_ns: int) -> None:
        """A cycle's file is saved now (``t_ns``): samples taken before it, still to come, are late."""
        self.saved_ns = t_ns

    def summary(self) -> dict:
        """``SystemProfiler.stats["gpu_samples"]``: record's totals (samples drained, dropped by the full side buffer,
        absent series) and ``late`` (taken in a cycle already saved)."""
        return dict(self.builder.summary(), late=self.late)

    @staticmethod
    def send(handlers: list, counters: List[tuple]) -> None:
        """Each counter to each handler; one handler's failure is reported once and skips it only."""
        send_system_events(handlers, "process_system_counter", "process_counter_event", "units",
                           [dict(name=name, categories=_CATEGORIES, timestamp=timestamp, wall_clock_time_ns=t_ns,
                                 values=values, units=units) for name, t_ns, timestamp, values, units in counters])
