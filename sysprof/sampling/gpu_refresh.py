"""How often each GPU metric really changes: its refresh period, measured by reading fast for a moment.

NVML answers from values the driver refreshes at its own pace (utilisation over its last 1/6-1 s, power as a 1 s
average or the instant field, the energy counter in steps of about 10 ms). :func:`measure_refresh` reads every
GPU channel every millisecond for a bounded moment (``seconds``, 0.5 s by default) and reports, per channel, the
median time between two changes of its value: the period the driver refreshes it at, as far as the moment can
tell. A channel that changed fewer than twice in the moment gets ``None`` and ``at_least_s`` (its period is
longer than the moment allows to see, or it did not move: a constant such as ``memory_total_bytes``). Used by
``sysprof info`` and ``benchmarks/gpu_check.py``; the same rule (:func:`change_period`) applies to any rows.
"""
from __future__ import annotations

import math
import time
from typing import Dict, Optional

HOST_OFF = dict(cpu=False, memory=False, disk=False, net=False)


def change_period(timestamps_ns, values) -> Dict[str, Optional[float]]:
    """``{"period_s", "changes", "at_least_s"}`` for one channel's rows: the median gap between the times its
    finite value changed (None with fewer than two changes), how many changes, and the span looked at."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    t = np.asarray(timestamps_ns, dtype=np.int64)
    ok = np.isfinite(v)
    v, t = v[ok], t[ok]
    span = float(t[-1] - t[0]) / 1e9 if len(t) > 1 else 0.0
    if len(v) < 2:
        return {"period_s": None, "changes": 0, "at_least_s": None}  # no value to look at
    at = t[1:][np.diff(v) != 0]
    if len(at) < 2:
        return {"period_s": None, "changes": int(len(at)), "at_least_s": span}
    return {"period_s": float(np.median(np.diff(at))) / 1e9, "changes": int(len(at)), "at_least_s": None}


def measure_refresh(seconds: float = 0.5, backend: str = "auto") -> Dict[str, object]:
    """Reads the GPUs every 1 ms for ``seconds`` (a separate sampler) and returns ``{"window_s", "backend",
    "channels": {channel: change_period(...)}}``, or ``{"error": why}`` when no GPU channel is there."""
    from .sampler import Sampler

    try:
        s = Sampler(interval=0.001, gpu_interval=0.001, gpu=True, backend=backend, **HOST_OFF)
    except Exception as e:  # noqa: BLE001 - a diagnostic: the reason is the answer
        return {"error": f"{type(e).__name__}: {e}"}
    gpu = [c for c in s.channels if c.startswith("gpu/") and "/xid_" not in c]  # XIDs are events, not polled
    if not gpu:
        return {"error": s.errors.get("gpu", "no GPU channels")}
    s.start()
    time.sleep(max(0.0, min(float(seconds), 10.0)))
    s.stop()
    b = s.drain()
    return {"window_s": float(seconds), "backend": s.backend,
            "channels": {c: change_period(b.timestamps_ns, b.column(c)) for c in gpu}}


def describe_period(p: Dict[str, Optional[float]]) -> str:
    """``12 ms``, ``>= 500 ms`` (fewer than two changes seen) or ``no value`` (NaN throughout)."""
    if p.get("period_s") is not None:
        return f"{p['period_s'] * 1e3:.3g} ms"
    at_least = p.get("at_least_s")
    return f">= {at_least * 1e3:.0f} ms" if isinstance(at_least, float) and math.isfinite(at_least) else "no value"


class ChangeTracker:
    """The same rule over a recording's drained rows (``sysprof record`` stores the result in its stop event as
    ``gpu_refresh_s``): per GPU channel, the median time between changes seen at the recording's GPU interval (so
    never below it). At most ``MAX_GAPS`` gaps are kept per channel (the latest); allocation is per batch."""

    MAX_GAPS = 4096

    def __init__(self, channels) -> None:
        self.cols = [(c, i) for i, c in enumerate(channels) if c.startswith("gpu/") and "/xid_" not in c]
        self.last_v = [math.nan] * len(self.cols)
        self.last_change = [None] * len(self.cols)
        self.gaps = [[] for _ in self.cols]

    def update(self, batch) -> None:
        import numpy as np

        if not self.cols or len(batch) == 0:
            return
        t_all = np.asarray(batch.timestamps_ns, dtype=np.int64)
        for k, (_, i) in enumerate(self.cols):
            v = np.asarray(batch.values[:, i], dtype=float)
            ok = np.isfinite(v)
            v, t = v[ok], t_all[ok]
            if not len(v):
                continue
            prev = np.concatenate(([self.last_v[k]], v[:-1]))
            changed = v != prev
            if math.isnan(self.last_v[k]):
                changed[0] = False  # the first value is where it starts, not a change
            at = t[changed].tolist()
            if self.last_change[k] is not None:
                at.insert(0, self.last_change[k])
            if len(at) > 1:
                self.gaps[k].extend(int(b - a) for a, b in zip(at, at[1:]))
                del self.gaps[k][:-self.MAX_GAPS]
            if at:
                self.last_change[k] = at[-1]
            self.last_v[k] = float(v[-1])

    def periods(self) -> Dict[str, Optional[float]]:
        """channel -> median seconds between changes, None with fewer than two changes seen."""
        return {c: (float(sorted(g)[len(g) // 2]) / 1e9 if g else None) for (c, _), g in zip(self.cols, self.gaps)}
