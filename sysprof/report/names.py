"""Sampler channel names of a trace's series: a Composer-named trace (``sysprof.profile()``, ``SystemProfiler``,
``JSONTraceHandler``: ``memory/virtual/used_gb``, ``disk/sda/read_time`` in ms, ``network/eth0/kb_recv``) mapped
back to the sampler's channels (``memory/used_bytes``, ``disk/sda/read_time_seconds``, ``net/eth0/bytes_recv``)
with the values unscaled to the sampler's units, by inverting the rules of
:mod:`sysprof.profiler.composer_names` (the one statement of those names).

Only traces without ``sysprof record``'s metadata are mapped (a recorded trace is named by the sampler already).
A trace channel no rule gives (Composer's ``memory/cuda/*`` allocator statistics, another program's counters) keeps
its name and values; channels of sources Composer never had are written under sysprof's names and stay as they are.
"""
from __future__ import annotations

import re
from functools import lru_cache

from .model import TraceData

__all__ = ["sampler_channel", "sampler_series"]


def _fill_groups(regex: str, groups: dict) -> str:
    """``regex`` (one of COUNTER_RULES' channel patterns) with each named group replaced by its value: the one
    string it matches with those groups (the patterns have no other metacharacters outside groups)."""
    out, i = [], 0
    while i < len(regex):
        if regex.startswith("(?P<", i):
            name = regex[i + 4: regex.index(">", i)]
            depth, j = 0, i
            while True:  # the group's closing parenthesis (groups nest: (?P<f>(read|write)_count))
                if regex[j] == "(":
                    depth += 1
                elif regex[j] == ")":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            out.append(groups[name])
            i = j + 1
        elif regex[i] == "\\":
            out.append(regex[i + 1])
            i += 2
        else:
            out.append(regex[i])
            i += 1
    return "".join(out)


@lru_cache(maxsize=1)
def _inverse_rules():
    """Per rule: (regex over the trace's channel name, the rule's channel regex source, divisor / multiplier)."""
    from sysprof.profiler.composer_names import COUNTER_RULES
    from sysprof.trace.schema import join_channel

    out = []
    for pattern, name_fmt, key_fmt, mul, div, *_ in COUNTER_RULES:
        template = join_channel(name_fmt, key_fmt)
        parts = re.split(r"\{(\w+)\}", template)
        seen, rx = set(), []
        for k, part in enumerate(parts):
            if k % 2 == 0:
                rx.append(re.escape(part))
            elif part in seen:
                rx.append(f"(?P={part})")
            else:
                seen.add(part)
                rx.append(f"(?P<{part}>.+)")
        out.append((re.compile("".join(rx)), pattern, float(div) / float(mul)))
    return tuple(out)


@lru_cache(maxsize=4096)
def sampler_channel(trace_channel: str):
    """``(sampler channel, factor)`` for a channel of Composer's layout (the sampler's value is the traced one
    times ``factor``), or None where no rule of :data:`~sysprof.profiler.composer_names.COUNTER_RULES` gives it."""
    for rx, pattern, factor in _inverse_rules():
        m = rx.fullmatch(trace_channel)
        if m is None:
            continue
        channel = _fill_groups(pattern, m.groupdict())
        if re.fullmatch(pattern, channel):
            return channel, factor
    return None


def sampler_series(data: TraceData):
    """``(series, units)`` of ``data`` under the sampler's channel names: ``series[channel] = (ts_us, values)``,
    ``units[channel]`` the declared unit (the registry's for a mapped channel). A recorded trace's own series."""
    from sysprof.sampling.registry import unit_of as registry_unit

    if data.recorded:
        return data.series, data.units
    series, units = {}, dict(data.units)
    for ch, (t, v) in data.series.items():
        mapped = sampler_channel(ch)
        if mapped is None or mapped[0] in series:
            series.setdefault(ch, (t, v))
            continue
        name, factor = mapped
        series[name] = (t, v * factor if factor != 1.0 else v)
        unit = registry_unit(name)
        if unit is not None:
            units[name] = unit
    return series, units
