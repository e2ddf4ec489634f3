"""Which series a plot draws, in which panels and in which order, and what it leaves out.

The default plot shows, in this order: CPU (the modes stacked, busy as a line over them; per-CPU not stacked),
memory (the system's, then the process's and the process tree's totals), disk throughput and utilisation,
network throughput, pressure (the share of wall time stalled), the process tree (CPU, then one line per member
of ``process_tree/<slot>/...``), GPU (utilisation, memory, power), then every other varying series, one panel
per (source, unit), while there is room (:data:`MAX_PANELS`; at most :data:`MAX_LINES` lines a panel).

Nothing is dropped silently. A channel is either drawn, or *constant* (its panel's every series is flat: folded
into the figure's footnote with its value, unless nothing else would be drawn), or *redundant* (its information is
drawn in another form: a running total whose rate is drawn, ``idle`` = 100 - the stacked modes,
``available``/``free``/``total`` beside ``used``, the kernel's PSI averages of the stall time drawn as a rate, a
member's pid, used in its label), or *hidden* (always 0 or never valid, as the table hides them), or *left out* (no room, or a count kept off the
default plot: IOPS, packets, threads, virtual size); the plot and ``sysprof report`` name what was left out,
and ``-k PATTERN`` draws exactly the channels it matches (only the caps then apply).
"""
from __future__ import annotations

import fnmatch
import re
from typing import List, NamedTuple

from .units import unit_of

__all__ = ["Panel", "Selection", "choose_panels", "MAX_PANELS", "MAX_LINES", "MAX_MEMBER_LINES", "BOUNDED_UNITS"]

MAX_PANELS = 14
MAX_LINES = 8
MAX_MEMBER_LINES = 16  # per-member panels of process_tree (its slots: 8 by default, up to 64)
#: shares with a natural range, by unit: their full scale. Their axis is fixed (0 to it, or to the next multiple
#: of it above the maximum: a process on 3.4 cores is on a 0-400 % axis) and never clipped (a spike is a real 100 %)
BOUNDED_UNITS = {"%": 100.0, "s/s": 1.0}

#: (panel, regular expression): a channel goes to the first panel whose expression matches it whole; the
#: default plot shows these panels first, in this order. ``{field}``: one panel per member field. The ``_gb``,
#: ``kb_`` and ``busy_percent`` names are Composer's layout (``sysprof.profile()``, ``JSONTraceHandler``).
_RULES = (
    ("cpu", r"cpu/(cpu_)?percent|cpu/(user|nice|system|iowait|irq|softirq|steal|guest|guest_nice)_percent"),
    ("per-cpu", r"cpu/\d+/\w*percent"),
    ("memory", r"memory/\w+_bytes|swap/used_bytes|cgroup/memory_(current|anon|file)_bytes"
               r"|memory/(virtual|swap)/\w+_gb"),
    ("process memory", r"process(_tree)?/(rss|pss|uss)_bytes|process/memory/rss_gb"),
    ("disk", r"disk/[^/]+/(read|write)_bytes_per_second|cgroup/io_(read|write)_bytes_per_second"),
    ("disk busy", r"disk/[^/]+/(busy_time_seconds_per_second|busy_percent)"),
    ("network", r"net/[^/]+/bytes_(recv|sent)_per_second|network/[^/]+/kb_(recv|sent)_per_second"),
    ("pressure", r"pressure/\w+/(some|full)_seconds_per_second"),
    ("process CPU", r"process(_tree)?/cpu_percent|process/cpu/cpu_percent"),
    ("member {field}", r"process_tree/[^/]+/(?P<field>\w+)"),
    ("GPU utilisation", r"gpu/[^/]+/(memory_)?utilization_percent"),
    ("GPU memory", r"gpu/[^/]+/memory_used_bytes"),
    ("GPU power", r"gpu/[^/]+/(energy_)?power_watts"),
)
_COMPILED = tuple((title, re.compile(rx)) for title, rx in _RULES)
_RULE_ORDER = {title: i for i, (title, _) in enumerate(_RULES)}
#: order of the other panels (one per source and unit) after the rule panels
_SOURCE_ORDER = ("cpu", "per-cpu", "process", "process_tree", "memory", "swap", "cgroup", "gpu", "disk", "net",
                 "network", "load", "load/procs", "vmstat")

#: mirrors of drawn series: the stacked modes' complement, meminfo's totals beside used, a device's capacity
_MIRRORS = ("cpu/idle_percent", "cpu/*/idle_percent", "memory/available_bytes", "memory/free_bytes",
            "memory/total_bytes", "memory/used_percent", "swap/total_bytes", "swap/free_bytes",
            "gpu/*/memory_free_bytes", "gpu/*/memory_total_bytes", "process_tree/*/pid",
            "memory/virtual/available_gb", "memory/swap/free_gb")  # the last two: Composer's layout
#: kept off the default plot (named as left out; -k draws them): counts beside the byte rates, threads, virtual
#: size, running totals without a rate (a rising line; the members' memory figures other than the proportional
#: one are left out by :func:`_member_memory`)
_SKIP = ("*_count_per_second", "net/*/packets_*", "disk/*/read_time_seconds", "disk/*/write_time_seconds",
         "process*/num_threads", "process/vms_bytes", "process/memory/vms_gb", "*_seconds_total", "*_periods_total",
         "vmstat/*_total")
_MEMBER_MEMORY = ("pss_bytes", "rss_bytes", "uss_bytes")  # the first a member has is drawn


class Panel(NamedTuple):
    """One axes of the plot: its title, the unit of its channels, the channels (in trace order), whether the
    channels are stacked (CPU modes; ``line`` then names the one drawn as a line over the stack)."""

    title: str
    unit: str
    channels: tuple
    stacked: bool = False
    line: str = ""


class Selection(NamedTuple):
    panels: List[Panel]
    left_out: List[str]    # channels with something to show that are not drawn (no room, or kept off by default)
    hidden: List[str]      # always 0 or never valid
    redundant: List[str]   # drawn in another form
    constant: List[tuple] = []  # (channel, unit, value) of the panels folded away: every series constant


def _matches(ch: str, patterns) -> bool:
    return any(fnmatch.fnmatchcase(ch, p) for p in patterns)


def _redundant(ch: str, series) -> bool:
    if _matches(ch, _MIRRORS) or ch + "_per_second" in series:
        return True
    if ch.endswith("_total") and ch[: -len("_total")] + "_per_second" in series:
        return True  # vmstat/pgfault_total beside vmstat/pgfault_per_second
    m = re.fullmatch(r"(pressure/\w+/(?:some|full))_(?:seconds_total|avg\d+_percent)", ch)
    if m and m.group(1) + "_seconds_per_second" in series:
        return True  # the kernel's averages and total of the stall time drawn as its rate
    m = re.fullmatch(r"(.+)/cpu(?:_usage)?_seconds_total", ch)
    return bool(m and m.group(1) + "/cpu_percent" in series)


def _panel_of(ch: str):
    """(title, rule rank) of the panel a channel goes to: a rule's, else its source and unit's."""
    for title, rx in _COMPILED:
        m = rx.fullmatch(ch)
        if m:
            field = m.groupdict().get("field")
            return (title.format(field=field) if field else title), _RULE_ORDER[title]
    parts = ch.split("/")
    source = parts[0]
    if source == "load" and parts[-1].startswith("procs_"):
        source = "load/procs"  # task counts, not load averages: a panel of their own
    return source, None


def choose_panels(data, channel_filter=None, filtered: bool = False) -> Selection:
    """The panels of a plot of ``data`` (a :class:`~sysprof.report.TraceData`). ``channel_filter``: a predicate
    on channel names; ``filtered``: it came from ``-k`` (draw what it matches: no redundant, hidden or skipped
    channel is set aside, only the caps apply)."""
    import numpy as np

    keep = channel_filter or (lambda ch: True)
    series = data.series
    left_out, hidden, redundant = [], [], []
    groups = {}  # (title, unit) -> [(rank, spread, channel)]
    ranks = {}
    for ch, (t, v) in series.items():
        if not keep(ch):
            continue
        finite = v[np.isfinite(v)]
        if not filtered:
            if finite.size == 0 or not finite.any():  # first: the table's rule, so both count the same channels
                hidden.append(ch)
                continue
            if _redundant(ch, series):
                redundant.append(ch)
                continue
            if _matches(ch, _SKIP):
                left_out.append(ch)
                continue
        elif finite.size == 0:
            hidden.append(ch)  # nothing to draw, even when asked for
            continue
        title, rank = _panel_of(ch)
        unit = unit_of(ch, data.units)
        key = (title, unit)
        ranks.setdefault(key, rank)
        groups.setdefault(key, []).append((float(np.ptp(finite)), ch))
    _member_memory(groups, left_out, filtered)
    constant = _fold_constant(groups, series)
    order = {s: i for i, s in enumerate(_SOURCE_ORDER)}

    def sort_key(key):
        rank = ranks[key]
        if rank is not None:
            return (0, rank, key[0], key[1])
        return (1, order.get(key[0], len(order)), key[0], key[1])

    index = {ch: i for i, ch in enumerate(series)}
    panels = []
    for n, key in enumerate(sorted(groups, key=sort_key)):
        members = groups[key]
        if n >= MAX_PANELS:
            left_out.extend(ch for _, ch in members)
            continue
        title, unit = key
        stacked = title == "cpu" and any(ch not in _BUSY for _, ch in members)
        cap = len(members) if stacked else MAX_MEMBER_LINES if title.startswith("member ") else MAX_LINES
        ranked = sorted(members, key=lambda m: (-m[0], index[m[1]]))  # widest spread first; ties in trace order
        left_out.extend(ch for _, ch in ranked[cap:])
        chs = tuple(sorted((ch for _, ch in ranked[:cap]), key=index.get))
        if stacked:
            busy = [ch for ch in chs if ch in _BUSY]
            modes = tuple(_cpu_mode_order(ch for ch in chs if ch not in _BUSY))
            panels.append(Panel(title, unit, modes, True, busy[0] if busy else ""))
        else:
            panels.append(Panel(title, unit, chs))
    left_out.sort(key=index.get)
    return Selection(panels, left_out, hidden, redundant, constant)


def _fold_constant(groups, series) -> list:
    """Take the panels whose every series is constant (a flat line says no more than its value) out of
    ``groups``: ``[(channel, unit, value)]``, in trace order. Kept when they are all there is to draw."""
    import numpy as np

    flat = [key for key, members in groups.items() if all(spread == 0 for spread, _ in members)]
    if len(flat) == len(groups):
        return []
    out = []
    for key in flat:
        for _, ch in groups.pop(key):
            v = series[ch][1]
            out.append((ch, key[1], float(v[np.isfinite(v)][0])))
    index = {ch: i for i, ch in enumerate(series)}
    return sorted(out, key=lambda c: index[c[0]])


#: the stacking order of /proc/stat's modes; iowait is not busy time, so
#: it sits on top of the busy modes and ``cpu/percent`` (busy) runs along its lower edge
_BUSY = ("cpu/percent", "cpu/cpu_percent")  # sysprof's name and Composer's
_MODE_ORDER = ("user", "nice", "system", "irq", "softirq", "steal", "guest", "guest_nice", "iowait")


def _cpu_mode_order(chs):
    def rank(ch):
        mode = ch[len("cpu/"):-len("_percent")] if ch.endswith("_percent") else ""
        return _MODE_ORDER.index(mode)
    return sorted(chs, key=rank)


def _member_memory(groups, left_out, filtered):
    """Per member, one memory figure: the proportional set size where the trace has it, else the resident one;
    the others are left out (named)."""
    if filtered:
        return
    present = [f for f in _MEMBER_MEMORY if (f"member {f}", "B") in groups]
    for field in present[1:]:
        left_out.extend(ch for _, ch in groups.pop((f"member {field}", "B")))


def compress(channels, limit: int = 8) -> str:
    """A short text naming ``channels``: a device or slot part shared by several becomes ``*``
    (``disk/*/read_count_per_second``); at most ``limit`` items, then ``and N more``."""
    pats = {}
    for ch in channels:
        parts = ch.split("/")
        key = "/".join(parts[:1] + ["*"] * (len(parts) - 2) + parts[-1:]) if len(parts) > 2 else ch
        pats.setdefault(key, []).append(ch)
    items = [key if len(chs) > 1 else chs[0] for key, chs in pats.items()]
    text = ", ".join(items[:limit])
    if len(items) > limit:
        text += f" and {len(items) - limit} more"
    return f"{len(channels)} channel{'s' if len(channels) != 1 else ''} ({text})"
