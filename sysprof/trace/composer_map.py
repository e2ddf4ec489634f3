"""Composer's trace names read back as the sampler's: the inverse of the ``"composer"`` track preset.

``SystemProfiler`` / ``JSONTraceHandler`` / ``sysprof.profile()`` write a sampler channel under Composer's counter
name, args key and scale (:data:`sysprof.profiler.composer_names.COUNTER_RULES`): ``memory/used_bytes`` becomes
``{"name": "memory/virtual", "args": {"used_gb": bytes / 1e9}}``, which a trace reader joins to the channel
``memory/virtual/used_gb``. :func:`sampler_channel` turns such a channel back into
``("memory/used_bytes", 1e9, 1.0)``: the sampler's name and the multiplier and divisor that undo the scale. It is
built from the same rules (no second table), and a name maps back only where the rule that would write the
candidate sampler channel is the rule that matched, so the round trip is exact in names. Channels with no inverse (Composer's torch CUDA allocator statistics
``memory/cuda/*``, a foreign trace's counters) keep their names; channels of sources Composer never had are
written under sysprof's names already and map to themselves.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Dict, Iterable, Optional, Tuple

from .schema import join_channel

__all__ = ["sampler_channel", "sampler_channels"]

_META = set(".^$*+?{}[]|()\\")


def _named_groups(pattern: str):
    """``[(start, end, name, subpattern)]`` of the top-level ``(?P<name>...)`` groups of a regex (balanced
    parentheses, escapes skipped)."""
    out = []
    i = 0
    while True:
        i = pattern.find("(?P<", i)
        if i < 0:
            return out
        name_end = pattern.index(">", i)
        depth, j = 0, i
        while j < len(pattern):
            c = pattern[j]
            if c == "\\":
                j += 2
                continue
            depth += (c == "(") - (c == ")")
            if depth == 0:
                break
            j += 1
        out.append((i, j + 1, pattern[i + 4:name_end], pattern[name_end + 1:j]))
        i = j + 1


def _template(pattern: str):
    """A channel regex as a ``str.format`` template (``disk/{dev}/{f}_seconds``) and its groups' subpatterns;
    None where the text outside the groups is not literal."""
    groups = _named_groups(pattern)
    parts, subs, pos = [], {}, 0
    for start, end, name, sub in groups:
        parts += [pattern[pos:start], "{" + name + "}"]
        subs[name] = sub
        pos = end
    parts.append(pattern[pos:])
    literal = "".join(p for k, p in enumerate(parts) if k % 2 == 0)
    if _META & set(literal):
        return None
    return "".join(parts), subs


def _inverse_regex(fmt: str, subs: Dict[str, str]) -> "re.Pattern[str]":
    """The regex of the trace channels a name template (``disk/{dev}/{f}``) writes, groups constrained as in the
    channel regex (a group used twice must be equal)."""
    out, seen, pos = [], set(), 0
    for m in re.finditer(r"\{(\w+)\}", fmt):
        out.append(re.escape(fmt[pos:m.start()]))
        name = m.group(1)
        out.append(f"(?P={name})" if name in seen else f"(?P<{name}>{subs.get(name, '.+')})")
        seen.add(name)
        pos = m.end()
    out.append(re.escape(fmt[pos:]))
    return re.compile("".join(out))


@lru_cache(maxsize=1)
def _rules():
    """``[(channel regex, inverse regex, sampler template, multiplier, divisor)]``, in rule order."""
    from sysprof.profiler.composer_names import COUNTER_RULES

    out = []
    for pattern, name_fmt, key_fmt, mul, div, *_ in COUNTER_RULES:
        tpl = _template(pattern)
        if tpl is None:
            continue
        sampler_fmt, subs = tpl
        out.append((re.compile(pattern), _inverse_regex(join_channel(name_fmt, key_fmt), subs), sampler_fmt,
                    float(div), float(mul)))
    return tuple(out)


def sampler_channel(channel: str) -> Optional[Tuple[str, float, float]]:
    """``(sampler channel, multiplier, divisor)`` of a channel of Composer's layout (the sampler's value, in its
    unit, is the trace's ``value * multiplier / divisor``), or None where ``channel`` is no Composer name of a
    sampler channel.

    >>> sampler_channel("memory/virtual/used_gb")
    ('memory/used_bytes', 1000000000.0, 1.0)
    >>> sampler_channel("disk/sda/busy_time")
    ('disk/sda/busy_time_seconds', 1.0, 1000.0)
    """
    rules = _rules()
    for k, (_, inverse, sampler_fmt, mul, div) in enumerate(rules):
        m = inverse.fullmatch(channel)
        if m is None:
            continue
        candidate = sampler_fmt.format(**m.groupdict())
        first = next((j for j, r in enumerate(rules) if r[0].fullmatch(candidate)), None)
        if first == k:  # the rule that writes the candidate is the one that matched: an exact inverse
            return candidate, mul, div
    return None


def sampler_channels(channels: Iterable[str]) -> Dict[str, Tuple[str, float, float]]:
    """``{trace channel: (sampler channel, multiplier, divisor)}`` for the channels that are Composer names of a sampler
    channel other than themselves (or scaled), each sampler name taken once (the first trace channel) and never
    one that is already a channel of the set."""
    channels = list(channels)
    taken = set(channels)
    out: Dict[str, Tuple[str, float, float]] = {}
    for ch in channels:
        hit = sampler_channel(ch)
        if hit is None or hit == (ch, 1.0, 1.0):
            continue
        if hit[0] in taken:
            continue
        taken.add(hit[0])
        out[ch] = hit
    return out
