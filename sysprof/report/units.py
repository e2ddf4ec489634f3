"""A channel's unit: the one the trace declares (its ``sysprof units`` metadata event, from the registry), else
one inferred from the channel's name, for traces without the declaration (foreign ones, older sysprof)."""
from __future__ import annotations

from typing import Mapping, Optional

__all__ = ["infer_unit", "unit_of"]


def unit_of(channel: str, meta: Optional[Mapping[str, str]] = None) -> str:
    """The unit ``meta`` (the trace's declared units: channel -> symbol) gives ``channel``, else
    :func:`infer_unit`'s."""
    if meta:
        unit = meta.get(channel)
        if isinstance(unit, str):
            return unit
    return infer_unit(channel)


_UNIT_RULES = (  # (suffix or marker on the base name, unit)
    ("_bytes", "B"), ("bytes_", "B"), ("_percent", "%"), ("_seconds_total", "s"), ("_seconds", "s"),
    ("_watts", "W"), ("_joules", "J"), ("_celsius", "\u00b0C"), ("_hz", "Hz"),
    # the Composer layout of sysprof.profile() / SystemProfiler: GB = 1e9 bytes, kB = 1e3 bytes
    ("_gb", "GB"), ("kb_", "kB"),
)
#: Composer-layout keys with a unit the name does not say: diskstats times in cumulative ms
_UNIT_NAMES = {"read_time": "ms", "write_time": "ms", "busy_time": "ms"}


def infer_unit(channel: str) -> str:
    """Unit of a channel from its name: ``_bytes`` -> B, ``_percent`` -> %, ``_per_second`` -> /s, ``_gb`` -> GB, ..."""
    key = channel.rsplit("/", 1)[-1]
    rate = key.endswith("_per_second")
    base = key[: -len("_per_second")] if rate else key
    unit = _UNIT_NAMES.get(base, "")
    if channel.startswith("memory/cuda/") and base.endswith("_mem"):
        unit = "GB"  # torch allocator statistics, in GB
    for marker, u in _UNIT_RULES:
        if unit:
            break
        if base.endswith(marker) or (marker.endswith("_") and base.startswith(marker)) or base == marker.strip("_"):
            unit = u
    if rate:
        return f"{unit}/s" if unit else "/s"
    return unit
