"""Composer's trace names for sysprof's channels, as data, and the two ways through them.

One table, :data:`COUNTER_RULES`: per rule a sampler channel template (``disk/{dev}/{f}_seconds``), the trace
counter's name and args key templates (``disk/{dev}/{f}``, ``{f}``), the scale (the traced value is
``channel value * mul / div``, rounded to ``decimals`` where given), category, whether it needs ``rates=True``, the
traced unit, and what each template field may hold (:data:`DIGITS`, :data:`SEGMENT`, :data:`ANY` or a tuple of the words it may be). Both directions are
template substitution over the same fields:

* writing (:func:`counter_of`, read by :class:`~sysprof.trace.tracks.TrackLayout`'s ``"composer"`` preset): the
  first rule whose channel template matches the sampler channel gives its fields; the name and key are its
  templates filled with them: ``memory/used_bytes`` -> ``{"name": "memory/virtual", "args": {"used_gb": v / 1e9}}``;
* reading (:func:`sampler_channel`, :func:`sampler_channels`: the report, ``--by``, frames): a trace channel
  (``join_channel(name, key)``: ``memory/virtual/used_gb``) matched against a rule's joined name/key template gives
  the fields; the sampler channel is the rule's channel template filled with them, with the multiplier and divisor
  that undo the scale. A name maps back only where the rule that writes the candidate is the rule that matched,
  so the round trip is exact in names.

Composer's names are fixed: GB = 1e9 bytes, kB = 1e3 bytes, the disk key is the field name, ``*_time`` are
cumulative milliseconds (as psutil reported them). Channels with no inverse (Composer's torch CUDA allocator
statistics ``memory/cuda/*``, a foreign trace's counters) keep their names; channels of sources Composer never had
(not in :data:`NAMED_SOURCES`) are written under sysprof's names and map to themselves.
"""
from __future__ import annotations

import re
import string
from functools import lru_cache
from typing import Dict, Iterable, NamedTuple, Optional, Tuple

from .schema import join_channel

__all__ = ["Rule", "COUNTER_RULES", "NAMED_SOURCES", "CUDA_MEMORY_KEYS", "CUDA_MEMORY_UNITS", "counter_of",
           "sampler_channel", "sampler_channels", "DIGITS", "SEGMENT", "ANY"]

#: what a template field may hold: one or more decimal digits; one path segment (no ``/``); any non-empty text
DIGITS, SEGMENT, ANY = "digits", "segment", "any"

_DOMAIN = {DIGITS: r"\d+", SEGMENT: r"[^/]+", ANY: r".+"}


class Rule(NamedTuple):
    """One sampler channel template -> one Composer counter (see the module docstring)."""

    channel: str
    name: str
    key: str
    mul: float
    div: float
    category: str
    rates: bool
    unit: Optional[str]  # None: the channel's own (``registry.unit_of``; the value is not scaled)
    fields: Tuple[Tuple[str, object], ...] = ()  # (field, DIGITS | SEGMENT | ANY | tuple of words)
    decimals: Optional[int] = None  # the traced value rounded to these decimals (None: as scaled)


#: the sources whose channels Composer's layout names (only through :data:`COUNTER_RULES`); a channel of one of
#: them matching no rule is not traced (the seed's layout leaves it out)
NAMED_SOURCES = ("cpu", "memory", "disk", "net", "process", "gpu")

_TIMES = ("read_time", "write_time", "busy_time")

#: Sampler channel -> trace counter, first match wins. Channels sharing a trace name become one counter event with
#: several keys, in rule order.
COUNTER_RULES = (
    Rule("cpu/percent", "cpu", "cpu_percent", 1, 1, "cpu", False, "%"),
    Rule("cpu/{id}/percent", "cpu/{id}", "cpu_percent", 1, 1, "cpu", False, "%", (("id", DIGITS),)),
    Rule("memory/used_bytes", "memory/virtual", "used_gb", 1, 1e9, "memory", False, "GB"),
    Rule("memory/available_bytes", "memory/virtual", "available_gb", 1, 1e9, "memory", False, "GB"),
    Rule("swap/used_bytes", "memory/swap", "used_gb", 1, 1e9, "memory", False, "GB"),
    Rule("swap/free_bytes", "memory/swap", "free_gb", 1, 1e9, "memory", False, "GB"),
    Rule("disk/{dev}/{f}", "disk/{dev}/{f}", "{f}", 1, 1, "disk", False, "",
         (("dev", ANY), ("f", ("read_count", "write_count")))),
    Rule("disk/{dev}/{f}", "disk/{dev}/{f}", "{f}", 1, 1, "disk", False, "B",
         (("dev", ANY), ("f", ("read_bytes", "write_bytes")))),
    # the kernel's whole ms are the sampler's seconds (ms / 1000, its base unit); times 1000 they come back within
    # an ulp (1001 ms as 1000.9999999999999): the ns of the sampler's seconds (6 decimals of a ms) give them exactly
    Rule("disk/{dev}/{f}_seconds", "disk/{dev}/{f}", "{f}", 1000, 1, "disk", False, "ms",
         (("dev", ANY), ("f", _TIMES)), 6),
    Rule("disk/{dev}/{f}", "disk/{dev}/{f}", "{f}", 1, 1, "disk", True, "/s",
         (("dev", ANY), ("f", ("read_count_per_second", "write_count_per_second")))),
    Rule("disk/{dev}/{f}", "disk/{dev}/{f}", "{f}", 1, 1, "disk", True, "B/s",
         (("dev", ANY), ("f", ("read_bytes_per_second", "write_bytes_per_second")))),
    Rule("disk/{dev}/busy_time_seconds_per_second", "disk/{dev}/busy_percent", "busy_percent", 100, 1, "disk", True,
         "%", (("dev", ANY),)),
    Rule("net/{nic}/bytes_{d}", "network/{nic}/kb_{d}", "kb_{d}", 1, 1e3, "net", False, "kB",
         (("nic", ANY), ("d", ("sent", "recv")))),
    Rule("net/{nic}/bytes_{d}_per_second", "network/{nic}/kb_{d}_per_second", "kb_{d}_per_second", 1, 1e3, "net",
         True, "kB/s", (("nic", ANY), ("d", ("sent", "recv")))),
    Rule("process/cpu_percent", "process/cpu", "cpu_percent", 1, 1, "process", False, "%"),
    Rule("process/rss_bytes", "process/memory", "rss_gb", 1, 1e9, "process", False, "GB"),
    Rule("process/vms_bytes", "process/memory", "vms_gb", 1, 1e9, "process", False, "GB"),
    Rule("process/num_threads", "process/threads", "num_threads", 1, 1, "process", False, ""),
    Rule("gpu/{index}/{f}", "gpu/{index}/{f}", "{f}", 1, 1, "gpu", False, None, (("index", DIGITS), ("f", SEGMENT))),
    # load is sysprof's own (the seed has none): unscaled, in Composer's one-counter-per-field style for the
    # fast-moving task counts (procs_running moves at nearly every ms sample; the averages every 5 s), so a
    # change rewrites one small event, not the whole group
    Rule("load/{f}", "load", "{f}", 1, 1, "load", False, None, (("f", ("1m", "5m", "15m")),)),
    Rule("load/{f}", "load/{f}", "{f}", 1, 1, "load", False, None, (("f", ("procs_running", "procs_total")),)),
)

#: torch CUDA allocator statistic -> counter name (Composer 0.32.1 memory monitor's names); ``*bytes*`` statistics
#: are reported in GB (1e9 bytes). Traced as ``memory/cuda/<name>`` with key ``<name>``, category ``memory``.
CUDA_MEMORY_KEYS = {
    "allocated_bytes.all.current": "current_allocated_mem",
    "active_bytes.all.current": "current_active_mem",
    "inactive_split_bytes.all.current": "current_inactive_mem",
    "reserved_bytes.all.current": "current_reserved_mem",
    "allocated_bytes.all.peak": "peak_allocated_mem",
    "active_bytes.all.peak": "peak_active_mem",
    "inactive_split_bytes.all.peak": "peak_inactive_mem",
    "reserved_bytes.all.peak": "peak_reserved_mem",
    "num_alloc_retries": "alloc_retries",
}

#: unit of each CUDA_MEMORY_KEYS counter, by torch statistic
CUDA_MEMORY_UNITS = {stat: ("GB" if "bytes" in stat else "") for stat in CUDA_MEMORY_KEYS}


def _matcher(template: str, fields) -> "re.Pattern[str]":
    """The full-match pattern of the names a template writes: its literal text as it is, each field what its domain
    allows (a field used twice holds the same text both times)."""
    domains = dict(fields)
    out, seen = [], set()
    for literal, field, _, _ in string.Formatter().parse(template):
        out.append(re.escape(literal))
        if field is None:
            continue
        if field in seen:
            out.append(f"(?P={field})")
            continue
        seen.add(field)
        domain = domains.get(field, ANY)
        sub = "|".join(map(re.escape, domain)) if isinstance(domain, tuple) else _DOMAIN[domain]
        out.append(f"(?P<{field}>{sub})")
    return re.compile("".join(out))


@lru_cache(maxsize=1)
def _compiled():
    """``[(rule, channel matcher, trace-channel matcher)]``, in rule order."""
    return tuple((r, _matcher(r.channel, r.fields), _matcher(join_channel(r.name, r.key), r.fields))
                 for r in COUNTER_RULES)


def _fields(matcher, text: str) -> Optional[dict]:
    m = matcher.fullmatch(text)
    return None if m is None else m.groupdict()


def counter_of(channel: str) -> Optional[Tuple[int, Rule, str, str]]:
    """``(rule index, rule, trace event name, args key)`` of the first rule whose channel template matches
    ``channel``, or None (no rule: the channel's source decides, see :data:`NAMED_SOURCES`).

    >>> counter_of("disk/sda/busy_time_seconds")[2:]
    ('disk/sda/busy_time', 'busy_time')
    """
    for k, (rule, forward, _) in enumerate(_compiled()):
        f = _fields(forward, channel)
        if f is not None:
            return k, rule, rule.name.format(**f), rule.key.format(**f)
    return None


def sampler_channel(channel: str) -> Optional[Tuple[str, float, float]]:
    """``(sampler channel, multiplier, divisor)`` of a channel of Composer's layout (the sampler's value, in its
    unit, is the trace's ``value * multiplier / divisor``), or None where ``channel`` is no Composer name of a
    sampler channel.

    >>> sampler_channel("memory/virtual/used_gb")
    ('memory/used_bytes', 1000000000.0, 1.0)
    >>> sampler_channel("disk/sda/busy_time")
    ('disk/sda/busy_time_seconds', 1.0, 1000.0)
    """
    for k, (rule, _, inverse) in enumerate(_compiled()):
        f = _fields(inverse, channel)
        if f is None:
            continue
        candidate = rule.channel.format(**f)
        hit = counter_of(candidate)
        if hit is not None and hit[0] == k:  # the rule that writes the candidate is the one that matched: exact
            return candidate, float(rule.div), float(rule.mul)
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
