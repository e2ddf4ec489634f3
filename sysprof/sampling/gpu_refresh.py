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
