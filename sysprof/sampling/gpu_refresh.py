"""How often each GPU metric really changes: its refresh period, measured by reading fast for a moment.

NVML answers from values the driver refreshes at its own pace (utilisation over its last 1/6-1 s, power as a 1 s
average or the instant field, the energy counter in steps of about 10 ms). :func:`measure_refresh` reads every
GPU channel every millisecond for a bounded moment (``seconds``, 0.5 s by default) and reports, per channel, the
median time between two changes of its value: the period the driver refreshes it at, as far as the moment can
tell. A channel that changed fewer than twice in the moment gets ``None`` and ``at_least_s`` (its period is
longer than the moment allows to see, or it did not move: a constant such as ``memory_total_bytes``). Used by
``sysprof info`` and ``benchmarks/gpu_check.py``; the same rule (:func:`change_period`) applies to any rows.

At start (:class:`StartRefresh`): ``sysprof record``, :class:`sysprof.SystemProfiler` and :class:`sysprof.Profiler`
measure the same way for :data:`START_SECONDS` (0.25 s at 1 ms) on a one-shot thread of their own, with a sampler
of its own (GPU only), while the recording's sampler already runs: the start is not delayed, the caller never
waits, and the recording's GPU interval stays as asked. (The GPU reader thread's first moments were the other
choice: it would have needed a second copy of the change rule in C++ and in the pynvml poller, and would have
read the recording's own GPU slice at 1 ms.) The result goes into the trace once known, as the instant
:data:`REFRESH_EVENT` ``{"window_s", "read_interval_s", "backend", "periods_s": {channel: seconds or null}}`` (or
``{"error": why, "periods_s": {}}``), and ``report`` prints it in one line (:func:`refresh_line`).
"""
from __future__ import annotations

import math
import threading
import time
from typing import Dict, Optional

HOST_OFF = dict(cpu=False, memory=False, disk=False, net=False)
#: how long the start's measurement reads, and the name of its trace event
START_SECONDS = 0.25
REFRESH_EVENT = "sysprof gpu_refresh"


def polled(channel: str) -> bool:
    """A GPU channel that is read (not an XID counter, which events drive)."""
    return channel.startswith("gpu/") and "/xid_" not in channel


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


def measure_refresh(seconds: float = 0.5, backend: str = "auto", gpus=None) -> Dict[str, object]:
    """Reads the GPUs (``gpus``: as :class:`sysprof.Sampler`'s) every 1 ms for ``seconds`` (a separate sampler)
    and returns ``{"window_s", "backend", "channels": {channel: change_period(...)}}``, or ``{"error": why}`` when
    no GPU channel is there."""
    from .sampler import Sampler

    try:
        s = Sampler(interval=0.001, gpu_interval=0.001, gpu=True, backend=backend, gpus=gpus, **HOST_OFF)
    except Exception as e:  # noqa: BLE001 - a diagnostic: the reason is the answer
        return {"error": f"{type(e).__name__}: {e}"}
    gpu = [c for c in s.channels if polled(c)]  # XIDs are events, not polled
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
        self.cols = [(c, i) for i, c in enumerate(channels) if polled(c)]
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


class StartRefresh:
    """The refresh periods of ``sampler``'s GPU channels, measured at start on a one-shot daemon thread (see the
    module's docstring); :meth:`take` gives the :data:`REFRESH_EVENT`'s args once, when known (else None)."""

    def __init__(self, sampler, seconds: float = START_SECONDS) -> None:
        self.channels = [c for c in getattr(sampler, "channels", ()) if polled(c)]
        self.args: Optional[dict] = None
        self.taken = False
        if not self.channels:
            self.taken = True  # nothing to measure, nothing to write
            return
        backend = getattr(sampler, "backend", "auto")
        gpus = [str(d["index"]) for d in getattr(sampler, "devices", []) if "index" in d] or None
        threading.Thread(target=self._run, args=(float(seconds), backend, gpus), name="sysprof-gpu-refresh",
                         daemon=True).start()

    def _run(self, seconds: float, backend: str, gpus) -> None:
        try:
            r = measure_refresh(seconds, backend=backend, gpus=gpus)
        except Exception as e:  # noqa: BLE001 - never raises into anyone
            r = {"error": f"{type(e).__name__}: {e}"}
        self.args = refresh_args(r, self.channels)

    def take(self) -> Optional[dict]:
        """The event's args the first time they are known, else None."""
        args = self.args
        if args is None or self.taken:
            return None
        self.taken = True
        return args


def refresh_args(measured: Dict[str, object], channels) -> dict:
    """:data:`REFRESH_EVENT`'s args for ``channels`` from :func:`measure_refresh`'s answer: ``periods_s`` holds
    every channel, None where fewer than two changes were seen (or the measuring sampler lacks it)."""
    if "error" in measured:
        return {"error": str(measured["error"]), "periods_s": {}}
    seen = measured.get("channels", {})
    return {"window_s": measured.get("window_s"), "read_interval_s": 0.001, "backend": measured.get("backend"),
            "periods_s": {c: seen[c]["period_s"] if c in seen else None for c in channels}}


def refresh_line(instants) -> Optional[str]:
    """``report``'s one line for a trace's :data:`REFRESH_EVENT` (``TraceData.instants``), or None without one:
    the fastest channels first, then how many changed too rarely to tell."""
    for i in instants:
        if i.name != REFRESH_EVENT or not isinstance(i.args, dict):
            continue
        a = i.args
        if "error" in a:
            return f"GPU refresh periods at start: not measured ({a['error']})"
        periods = a.get("periods_s") or {}
        known = sorted((p, c) for c, p in periods.items() if isinstance(p, (int, float)))
        slow = len(periods) - len(known)
        shown = ", ".join(f"{c} {p * 1e3:.3g} ms" for p, c in known[:6]) + (", ..." if len(known) > 6 else "")
        window = a.get("window_s")
        w = f"{window:g} s at 1 ms" if isinstance(window, (int, float)) else "at start"
        return (f"GPU refresh periods at start ({w}): {shown or 'none seen'}"
                f"{f'; {slow} changed too rarely to tell' if slow else ''}")
    return None
