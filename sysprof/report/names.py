"""Sampler channel names of a trace's series: a Composer-named trace (``sysprof.profile()``, ``SystemProfiler``,
``JSONTraceHandler``: ``memory/virtual/used_gb``, ``disk/sda/read_time`` in ms, ``network/eth0/kb_recv``) mapped
back to the sampler's channels (``memory/used_bytes``, ``disk/sda/read_time_seconds``, ``net/eth0/bytes_recv``)
with the values unscaled to the sampler's units, through the one inverse of
Composer's names, :mod:`sysprof.trace.composer` (the forward table's templates filled the other way).

Only traces without ``sysprof record``'s metadata are mapped (a recorded trace is named by the sampler already).
A trace channel no rule gives (Composer's ``memory/cuda/*`` allocator statistics, another program's counters) keeps
its name and values; channels of sources Composer never had are written under sysprof's names and stay as they are.
"""
from __future__ import annotations

from ..trace.columns import HeldSeries
from ..trace.composer import sampler_channels
from .model import TraceData

__all__ = ["sampler_series"]


def sampler_series(data: TraceData):
    """``(series, units)`` of ``data`` under the sampler's channel names: ``series[channel] = (ts_us, values)``,
    ``units[channel]`` the declared unit (the registry's for a mapped channel). A recorded trace's own series."""
    from sysprof.sampling.registry import unit_of as registry_unit

    if data.recorded:
        return data.series, data.units
    renamed = sampler_channels(data.series)
    held = isinstance(data.series, HeldSeries)  # renamed as their changes: no channel's values made whole
    series, units = {}, dict(data.units)
    for ch in data.series:
        t, index, v = data.series.changes(ch) if held else (*data.series[ch], None)
        hit = renamed.get(ch)
        if hit is None:
            if ch in series:
                continue
            name = ch
        else:
            name, mul, div = hit
            v = v * (mul / div) if mul != div else v
            unit = registry_unit(name)
            if unit is not None:
                units[name] = unit
        series[name] = (t, index, v) if held else (t, v)
    return (HeldSeries(series) if held else series), units
