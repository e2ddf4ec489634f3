"""Names of the bits of ``gpu/<i>/clocks_event_reasons`` (NVML's ``nvmlClocksEventReason*`` mask, as
``nvmlDeviceGetCurrentClocksEventReasons`` returns it; ``...ThrottleReasons`` before driver r535), and the
report's lines saying how long each held the clocks down: from the reason samples (read at every GPU reading),
and independently from the driver's violation counters (``violation_*_seconds_total``, read once a second).

The bit values are NVML's (its API reference; pynvml.py ``nvmlClocksEventReason*``). Bits not listed here
are shown as ``bit 0x...``.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple

from ..sampling.gpu_metrics import SLOW_S

__all__ = ["CLOCK_EVENT_REASONS", "decode_reasons", "reason_lines", "reason_shares"]

#: (bit, name in sysprof's reports, NVML's name)
CLOCK_EVENT_REASONS: Tuple[Tuple[int, str, str], ...] = (
    (0x1, "GPU idle", "nvmlClocksEventReasonGpuIdle"),
    (0x2, "applications clocks setting", "nvmlClocksEventReasonApplicationsClocksSetting"),
    (0x4, "SW power cap", "nvmlClocksEventReasonSwPowerCap"),
    (0x8, "HW slowdown", "nvmlClocksEventReasonHwSlowdown"),
    (0x10, "sync boost", "nvmlClocksEventReasonSyncBoost"),
    (0x20, "SW thermal slowdown", "nvmlClocksEventReasonSwThermalSlowdown"),
    (0x40, "HW thermal slowdown", "nvmlClocksEventReasonHwThermalSlowdown"),
    (0x80, "HW power brake slowdown", "nvmlClocksEventReasonHwPowerBrakeSlowdown"),
    (0x100, "display clock setting", "nvmlClocksEventReasonDisplayClockSetting"),
)
_KNOWN = 0
for _bit, _, _ in CLOCK_EVENT_REASONS:
    _KNOWN |= _bit


def decode_reasons(mask) -> List[str]:
    """The names of the bits set in ``mask`` (NaN or negative: none), known ones in NVML's order, then any
    other bit as ``bit 0x...``."""
    if mask is None or not math.isfinite(mask) or mask < 0:
        return []
    m = int(mask)
    names = [name for bit, name, _ in CLOCK_EVENT_REASONS if m & bit]
    rest = m & ~_KNOWN
    b = 1
    while rest:
        if rest & b:
            names.append(f"bit {b:#x}")
            rest &= ~b
        b <<= 1
    return names


#: the violation counters (nvmlDeviceGetViolationStatus, in seconds): policy -> the channel's suffix
VIOLATION_CHANNELS = (("power", "violation_power_seconds_total"), ("thermal", "violation_thermal_seconds_total"))


def _sample_shares(data, t, v) -> Tuple[float, Dict[str, float]]:
    """Seconds with a known mask, and each reason's share of them (time-weighted; idle is no slowdown)."""
    import numpy as np

    w = data.weights(t)
    ok = np.isfinite(v)
    total = float(w[ok].sum())
    if total <= 0:
        return 0.0, {}
    masks = v[ok].astype(np.int64)
    shares = {name: float(w[ok][(masks & bit) != 0].sum()) / total
              for bit, name, _ in CLOCK_EVENT_REASONS if bit != 0x1}
    return total / 1e6, {name: share for name, share in shares.items() if share > 0}


def _counter_share(t, v) -> Optional[float]:
    """A violation counter's increase between its first and last readings, as a share of the time between them.
    The counter is read once every SLOW_S and held in between, so its last reading is where its value last
    changed, unless that is over 1.5 SLOW_S before the series ends (later readings found it unchanged: the
    series' end, within SLOW_S). None: fewer than two values, or the counter went back (a driver reload)."""
    import numpy as np

    ok = np.isfinite(v)
    t, v = t[ok], v[ok]
    if t.size < 2 or v[-1] < v[0]:
        return None
    moved = np.flatnonzero(np.diff(v) != 0)
    end = t[-1]
    if moved.size and t[-1] - t[moved[-1] + 1] <= 1.5 * SLOW_S * 1e6:
        end = t[moved[-1] + 1]
    if end <= t[0]:
        return None
    return min(float(v[-1] - v[0]) / ((end - t[0]) / 1e6), 1.0)


def reason_shares(data) -> Dict[str, dict]:
    """Per GPU (``gpu/<i>``), how long its clocks were held down, measured twice, independently: from the
    reason samples (``reasons``: each reason's share of the ``reason_samples_s`` seconds whose mask is known,
    time-weighted) and from the driver's violation counters (``violation_counters``: power and thermal, each the
    counter's increase over the time it covers; None where the trace lacks it)."""
    gpus = sorted({c.rsplit("/", 1)[0] for c in data.series
                   if c.endswith("/clocks_event_reasons") or c.endswith(tuple(ch for _, ch in VIOLATION_CHANNELS))})
    out = {}
    for gpu in gpus:
        seconds, shares = 0.0, {}
        if f"{gpu}/clocks_event_reasons" in data.series:
            t, v = data.series[f"{gpu}/clocks_event_reasons"]
            seconds, shares = _sample_shares(data, t, v)
        counters = {policy: (_counter_share(*data.series[f"{gpu}/{ch}"]) if f"{gpu}/{ch}" in data.series else None)
                    for policy, ch in VIOLATION_CHANNELS}
        out[gpu] = {"reason_samples_s": seconds,
                    "reasons": dict(sorted(shares.items(), key=lambda kv: -kv[1])),
                    "violation_counters": counters}
    return out


def reason_lines(data, shares: Optional[Dict[str, dict]] = None) -> List[str]:
    """One line per GPU whose clocks were held down by something other than idling: each reason with its
    share of the sampled time (time-weighted, as the report's statistics are), largest first, then the
    violation counters' shares where they moved. ``data``: a :class:`sysprof.report.TraceData`;
    ``shares``: :func:`reason_shares` of it, when already computed."""
    out = []
    for gpu, s in (reason_shares(data) if shares is None else shares).items():
        parts = []
        if s["reasons"]:
            parts.append(", ".join(f"{name} {share:.0%}" for name, share in s["reasons"].items()) + " of the time")
        viol = [f"{policy} {share:.0%}" for policy, share in s["violation_counters"].items() if share]
        if viol:
            parts.append("violation counters: " + ", ".join(viol) + " of the time")
        if parts:
            out.append(f"{gpu} clocks held down by: " + "; ".join(parts))
    return out
