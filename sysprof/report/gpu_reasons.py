"""Names of the bits of ``gpu/<i>/clocks_event_reasons`` (NVML's ``nvmlClocksEventReason*`` mask, as
``nvmlDeviceGetCurrentClocksEventReasons`` returns it; ``...ThrottleReasons`` before driver r535), and the
report's lines saying how long each held the clocks down.

The bit values are NVML's (its API reference; pynvml.py ``nvmlClocksEventReason*``). Bits not listed here
are shown as ``bit 0x...``.
"""
from __future__ import annotations

import math
from typing import List, Tuple

__all__ = ["CLOCK_EVENT_REASONS", "decode_reasons", "reason_lines"]

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


def reason_lines(data) -> List[str]:
    """One line per GPU whose clocks were held down by something other than idling: each reason with its
    share of the sampled time (time-weighted, as the report's statistics are), largest first.
    ``data``: a :class:`sysprof.report.TraceData`."""
    import numpy as np

    out = []
    for ch in sorted(c for c in data.series if c.endswith("/clocks_event_reasons")):
        t, v = data.series[ch]
        w = data.weights(t)
        ok = np.isfinite(v)
        total = float(w[ok].sum())
        if total <= 0:
            continue
        masks = v[ok].astype(np.int64)
        shares = []
        for bit, name, _ in CLOCK_EVENT_REASONS:
            if bit == 0x1:  # idle is no slowdown
                continue
            share = float(w[ok][(masks & bit) != 0].sum()) / total
            if share > 0:
                shares.append((share, name))
        if shares:
            shares.sort(key=lambda s: -s[0])
            text = ", ".join(f"{name} {share:.0%}" for share, name in shares)
            out.append(f"{ch.rsplit('/', 1)[0]} clocks held down by: {text} of the time")
    return out
