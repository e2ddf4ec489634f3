"""The system profiler's own instants on the Composer path (:class:`sysprof.SystemProfiler`, hence
:class:`sysprof.Profiler`): the GPU XIDs and the GPU refresh periods measured at start, with the args
``sysprof record`` gives them (one place builds each: :class:`sysprof.trace.gpu_events.XidInstants`,
:class:`sysprof.sampling.gpu_refresh.StartRefresh`).

* ``gpu xid`` ``{"gpu", "xid", "meaning", "count"}`` at the row where ``gpu/<i>/xid_total`` rose;
* ``sysprof gpu_refresh`` ``{"window_s", "read_interval_s", "backend", "periods_s": {channel: seconds or null}}``
  once the measurement (0.25 s at 1 ms, on a thread of its own, started with the sampler) is known;
* ``sysprof intervals`` ``{"changes": [...], "intervals_s": {...}}`` at each change the CPU budget made to the
  sources' intervals (:class:`sysprof.sampling.budget.ChangeEvents`).

Like the counters, an XID is emitted only when its row was sampled while the profiler recorded, and the refresh
event at the first drain while recording after it is known (so it lands in one cycle's file). Each handler gets
them through ``process_system_instant`` (sysprof's handlers write the args; the base class's default, and a
handler without the method such as Composer's, gets ``process_instant_event``, which carries no args).
"""
from __future__ import annotations

from typing import Any, List

import numpy as np

from sysprof.profiler.trace_handler import send_system_events
from sysprof.sampling.budget import INTERVALS_EVENT, ChangeEvents
from sysprof.sampling.gpu_refresh import REFRESH_EVENT, StartRefresh
from sysprof.trace.gpu_events import XID_EVENT, XidInstants

__all__ = ["SystemInstants"]

_CATEGORIES = ("gpu",)


class SystemInstants:
    """The instants of one sampler's run: made (and the start's measurement begun) once the sampler runs."""

    def __init__(self, sampler: Any) -> None:
        channels = tuple(getattr(sampler, "channels", ()))
        self.xids = XidInstants(channels)
        self.refresh = StartRefresh(sampler)
        self.intervals = ChangeEvents(sampler, None, 0)

    def take(self, batch: Any, log: Any, now_ns: int) -> List[tuple]:
        """``(name, wall ns, training timestamp, args)`` of the instants due at this drain; ``log`` is the
        profiler's recording log (``classify``, ``recording``, ``stamps``), read before it is pruned."""
        out = []
        found = self.xids.found(batch) if len(batch) else []
        changed = self.intervals.new()
        if changed:  # the budget's interval changes made while recording
            mask, step = log.classify(np.array([t for t, _ in changed], dtype=np.int64))
            out += [(INTERVALS_EVENT, t, log.stamps[i], args)
                    for (t, args), m, i in zip(changed, mask.tolist(), step.tolist()) if m]
        if found:
            mask, step = log.classify(np.array([t for t, _ in found], dtype=np.int64))
            out += [(XID_EVENT, t, log.stamps[i], args)
                    for (t, args), m, i in zip(found, mask.tolist(), step.tolist()) if m]
        if log.recording and log.recording[-1]:
            measured = self.refresh.take()
            if measured is not None:
                out.append((REFRESH_EVENT, now_ns, log.stamps[-1], measured))
        return out

    @staticmethod
    def send(handlers: list, instants: List[tuple]) -> None:
        """Each instant to each handler; one handler's failure is reported once and skips it only."""
        send_system_events(handlers, "process_system_instant", "process_instant_event", "args",
                           [dict(name=name, categories=_CATEGORIES, timestamp=timestamp, wall_clock_time_ns=t_ns,
                                 args=args) for name, t_ns, timestamp, args in instants])
