"""The events a session adds to the sampler's rows, each from one producer (:class:`~sysprof.pipeline.Producer`):

- :class:`Xids`: a ``gpu xid`` instant at each step of a ``gpu/<i>/xid_total`` (at the reading that counted it);
- :class:`IntervalChanges`: a ``sysprof intervals`` instant when the CPU budget changed the intervals, and the
  stop event's ``interval_changes``;
- :class:`GpuRefresh`: the ``sysprof gpu_refresh`` instant (the GPU channels' refresh periods measured at start,
  on their own thread) and the stop event's ``gpu_refresh_s`` (the periods as recorded);
- :class:`DriverSamples`: the GPU driver's buffered samples as counters at their own times (a units event for each
  new series), and the stop event's ``gpu_samples``.

The markers' receiver (``sysprof.markers.receiver``) and the trainer phases (``sysprof.integrations``) are
producers of their own modules. Every event is a typed :class:`~sysprof.trace.events.Event` at wall ns; the sinks
choose how to write it.
"""
from __future__ import annotations

import time
from typing import Any, Optional

from ..trace import events as ev
from .session import Producer

__all__ = ["Xids", "IntervalChanges", "GpuRefresh", "DriverSamples", "standard"]


class Xids(Producer):
    name = "gpu xids"

    def __init__(self, channels, pid: Any) -> None:
        from ..trace.gpu_events import XidInstants

        self.found = XidInstants(channels).found
        self.pid = pid

    def take(self, batch: Any, stop_ns: Optional[int]) -> list:
        from ..trace.gpu_events import XID_EVENT

        if not len(batch):
            return []
        return [ev.instant(XID_EVENT, t, self.pid, args) for t, args in self.found(batch)]


class IntervalChanges(Producer):
    name = "interval changes"

    def __init__(self, sampler: Any, pid: Any, on_change=None) -> None:
        from ..sampling.budget import ChangeEvents

        self.changes = ChangeEvents(sampler)
        self.pid = pid
        self.on_change = on_change  # told once per drain that changed an interval (``record``'s warning line)

    def take(self, batch: Any, stop_ns: Optional[int]) -> list:
        from ..sampling.budget import INTERVALS_EVENT

        new = self.changes.new()
        if new and self.on_change is not None:
            self.on_change()
        return [ev.instant(INTERVALS_EVENT, t, self.pid, args) for t, args in new]

    def stop_args(self) -> dict:
        return {"interval_changes": self.changes.all()}


class GpuRefresh(Producer):
    name = "gpu refresh"

    def __init__(self, sampler: Any, pid: Any) -> None:
        from ..sampling.gpu_refresh import ChangeTracker, StartRefresh

        channels = tuple(sampler.channels)
        self.tracker = ChangeTracker(channels)
        self.measured = StartRefresh(sampler)  # 0.25 s at 1 ms on a thread of its own
        self.pid = pid

    def take(self, batch: Any, stop_ns: Optional[int]) -> list:
        from ..sampling.gpu_refresh import REFRESH_EVENT

        self.tracker.update(batch)
        args = self.measured.take()
        if args is None:
            return []
        at = int(batch.timestamps_ns[-1]) if len(batch) else time.time_ns()  # in order with the rows
        return [ev.instant(REFRESH_EVENT, at, self.pid, args)]

    def stop_args(self) -> dict:
        return {"gpu_refresh_s": self.tracker.periods()} if self.tracker.cols else {}


class DriverSamples(Producer):
    name = "gpu driver samples"

    def __init__(self, sampler: Any, pid: Any) -> None:
        from ..sampling.gpu_samples import SampleEvents

        self.sampler = sampler
        self.samples = SampleEvents()
        self.pid = pid

    def take(self, batch: Any, stop_ns: Optional[int]) -> list:
        from ..sampling.gpu_samples import unit_of
        from ..trace.schema import UNITS_EVENT

        drained = self.sampler.drain_gpu_samples()
        declared = self.samples.declared
        new = {s: unit_of(s) for s in drained if s not in declared}
        out = [ev.counter(series, t, self.pid, {key: value}) for t, series, key, value in self.samples.take(drained)]
        declared.update(new)
        if new:
            out.insert(0, ev.metadata(UNITS_EVENT, self.pid, {"units": new}))
        return out

    def stop_args(self) -> dict:
        return {"gpu_samples": self.samples.summary()}


def standard(sampler: Any, pid: Any, on_interval_change=None) -> list:
    """The producers every recording of ``sampler`` has: XIDs, interval changes, and with GPU channels the
    refresh periods and the driver's samples."""
    channels = tuple(sampler.channels)
    out = [Xids(channels, pid), IntervalChanges(sampler, pid, on_interval_change)]
    if any(c.startswith("gpu/") for c in channels):
        out.append(GpuRefresh(sampler, pid))
        if hasattr(sampler, "drain_gpu_samples"):
            out.append(DriverSamples(sampler, pid))
    return out
