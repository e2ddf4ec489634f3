"""GPU XID events in traces: each step of a ``gpu/<i>/xid_total`` channel becomes an instant event.

The native and the pynvml backends count the driver's critical XID errors on a waiter thread of their own
(csrc/gpu/nvml_events.hpp, sampling/portable/nvml_events.py) and carry two channels per device in every
row: ``xid_total`` (XIDs since the sampler opened) and ``xid_last`` (the latest XID's number). The data
flows one way, through the ring: :class:`XidInstants` looks at drained rows and writes, at the row where
``xid_total`` rose, one instant event named :data:`XID_EVENT`:
``{"gpu": 0, "xid": 79, "meaning": "GPU has fallen off the bus", "count": 1}`` (``count`` > 1 when several
XIDs fell within one GPU interval; ``xid`` is then the latest of them). The instant is as precise as the
GPU interval (NVML's event carries no time of its own). :func:`xid_lines` gives ``report``'s lines.
"""
from __future__ import annotations

import math
import re
from typing import List, Sequence, Tuple

from .schema import READING_TIME_KEY, reading_times_ns

XID_EVENT = "gpu xid"

#: The common XIDs and what they mean, after NVIDIA's XID catalogue (docs.nvidia.com/deploy/xid-errors).
XID_MEANINGS = {
    13: "graphics engine exception (often an out-of-range access in a kernel)",
    31: "GPU memory page fault (an illegal address in a kernel)",
    32: "invalid or corrupted push buffer stream",
    38: "driver firmware error",
    43: "GPU stopped processing (a user program's fault; the GPU stays usable)",
    45: "preemptive cleanup (a process ended or was killed)",
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint or warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failed",
    68: "video processor exception",
    69: "graphics engine class error",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error (the affected process must end)",
    95: "uncontained ECC error (the GPU needs a reset)",
    119: "GSP RPC timeout",
    120: "GSP error",
    999: "unknown XID",
}

_TOTAL = re.compile(r"^gpu/([^/]+)/xid_total$")


def xid_meaning(code: int) -> str:
    return XID_MEANINGS.get(code, "see NVIDIA's XID catalogue")


def xid_args(gpu, code: float, count: int) -> dict:
    c = int(code) if isinstance(code, (int, float)) and math.isfinite(code) else None
    return {"gpu": gpu, "xid": c, "meaning": xid_meaning(c) if c is not None else "unknown XID", "count": count}


class XidInstants:
    """Instant events for the steps of every ``gpu/<i>/xid_total`` among ``channels``; ``ts(t_ns)`` gives an
    event's ``ts`` (the trace writer's rule), ``pid`` its process (the system's)."""

    def __init__(self, channels: Sequence[str]) -> None:
        index = {c: i for i, c in enumerate(channels)}
        self.columns = []  # (gpu, xid_total column, xid_last column or None, reading time column or None)
        for c, i in index.items():
            m = _TOTAL.match(c)
            if m:
                gpu = int(m.group(1)) if m.group(1).isdigit() else m.group(1)
                self.columns.append((gpu, i, index.get(f"gpu/{m.group(1)}/xid_last"),
                                     index.get(f"gpu/{m.group(1)}/{READING_TIME_KEY}")))
        self.prev = [0.0] * len(self.columns)  # the counters start at 0 when the sampler opens

    def found(self, batch) -> List[Tuple[int, dict]]:
        """``(t_ns, args)`` of each XID step in ``batch`` (``timestamps_ns``, ``values``), in time order: the one
        place an XID instant's args are made (every sink's, through the session's producer in
        :mod:`sysprof.pipeline.producers`; the flight recorder's trigger)."""
        if not self.columns or len(batch) == 0:
            return []
        import numpy as np

        out = []
        for k, (gpu, it, il, ir) in enumerate(self.columns):
            col = np.asarray(batch.values[:, it], dtype=float)
            # at the time of the reading that counted it (the row that found it may be later)
            at = batch.timestamps_ns if ir is None else reading_times_ns(batch.timestamps_ns, batch.values[:, ir])
            prev = np.concatenate(([self.prev[k]], col[:-1]))
            # NaN (late or unsupported) rows carry the last finite count forward
            prev = _carry_forward(prev)
            rows = np.flatnonzero(np.isfinite(col) & (col > prev))
            for r in rows.tolist():
                code = float(batch.values[r, il]) if il is not None else math.nan
                out.append((int(at[r]), k, xid_args(gpu, code, int(col[r] - prev[r]))))
            finite = col[np.isfinite(col)]
            if len(finite):
                self.prev[k] = float(finite[-1])
        out.sort(key=lambda e: (e[0], e[1]))
        return [(t, args) for t, _, args in out]


def instant_event(name: str, ts, pid, args: dict, tid=0) -> dict:
    """A global instant event carrying ``args`` (XIDs, the start's GPU refresh periods), as every trace of sysprof
    writes it."""
    from .events import INSTANT, PHASE

    return {"name": name, "ph": PHASE[INSTANT], "s": "g", "ts": ts, "pid": pid, "tid": tid, "args": args}


def _carry_forward(a):
    """NaN entries replaced by the last finite one before them (the first entry is finite)."""
    import numpy as np

    ok = np.isfinite(a)
    idx = np.where(ok, np.arange(len(a)), 0)
    np.maximum.accumulate(idx, out=idx)
    return a[idx]


def xid_lines(instants, start_us=None) -> List[str]:
    """``report``'s lines for a trace's XID instants (``TraceData.instants``), timed from ``start_us``."""
    lines = []
    for i in instants:
        if i.name != XID_EVENT or not isinstance(i.args, dict):
            continue
        a = i.args
        times = f" x{a['count']}" if isinstance(a.get("count"), int) and a["count"] > 1 else ""
        at = f"+{(i.ts_us - start_us) / 1e6:.3f} s" if isinstance(start_us, (int, float)) else f"ts {i.ts_us} us"
        lines.append(f"gpu/{a.get('gpu')}: XID {a.get('xid')}{times} at {at}: {a.get('meaning', '')}")
    return lines
