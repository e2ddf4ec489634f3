"""Shares over a span from counter increases, not from the mean of per-row shares.

A share channel's rows are each right for their own interval, but the kernel accounts CPU time in ticks and some
modes in bursts (on a VM, steal arrives 10 ticks at once), so the time-weighted mean of the rows weights each
burst by the length of the row it landed in, not by its ticks: over a span the true share is the counters'
increase over it. Where a trace holds a share channel's counters, every aggregate over a span (``report``'s mean,
``--by``, the verdict) takes the share from them:

* ``cpu/<mode>_percent`` = 100 x increase of ``cpu/<mode>_seconds_total`` / increase of all eight modes;
  ``cpu/percent`` = 100 x (all - idle - iowait) / all; per CPU the same with ``cpu/<id>/<mode>_seconds_total``
  (node_exporter's ``node_cpu_seconds_total`` semantics: ``rate()`` of them in PromQL gives the same shares);
* a CPU time in percent of one core (``process/``, ``process_tree/``, ``process_tree/<slot>/`` and ``cgroup/``
  ``cpu_percent``) = 100 x increase of its ``cpu_seconds_total`` (``cgroup/cpu_usage_seconds_total``) / the
  seconds the counter had a value in the span;
* a PSI stall share (``pressure/<resource>/<some|full>_seconds_per_second``) and a process tree's run delay
  per second (``process_tree/run_delay_seconds_per_second``) = increase of its ``_seconds_total`` / those
  seconds; a process tree's major faults per second (``process_tree/majflt_per_second``) the same of
  ``majflt_total``.

A trace without the counters (Composer's layout, older sysprof traces) keeps the time-weighted mean.
"""
from __future__ import annotations

import re
from typing import Dict, List, Mapping, Optional

__all__ = ["MODES", "counters_of", "counter_means", "is_share_counter"]

#: /proc/stat's modes, in its order (csrc/parse/stat.hpp)
MODES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
_NOT_BUSY = ("idle", "iowait")
_CPU_SHARE = re.compile(r"cpu/(?:(\d+)/)?(percent|(\w+)_percent)")
_PER_TIME = ((re.compile(r"(process|process_tree(?:/\d+)?)/cpu_percent"), r"\1/cpu_seconds_total", 100.0),
             (re.compile(r"cgroup/cpu_percent"), "cgroup/cpu_usage_seconds_total", 100.0),
             (re.compile(r"(pressure/\w+/(?:some|full)|process_tree/run_delay)_seconds_per_second"),
              r"\1_seconds_total", 1.0),
             (re.compile(r"process_tree/majflt_per_second"), "process_tree/majflt_total", 1.0))


def _cpu_rule(channel: str):
    """(counters, the modes on top) of a CPU share channel, else None."""
    m = _CPU_SHARE.fullmatch(channel)
    if m is None or (m.group(3) is not None and m.group(3) not in MODES) or (m.group(1) and m.group(3)):
        return None
    prefix = f"cpu/{m.group(1)}/" if m.group(1) else "cpu/"
    top = (m.group(3),) if m.group(3) else tuple(x for x in MODES if x not in _NOT_BUSY)
    return [f"{prefix}{x}_seconds_total" for x in MODES], [f"{prefix}{x}_seconds_total" for x in top]


def counters_of(channel: str) -> List[str]:
    """The counter channels whose increases give ``channel``'s share over a span ([] for any other channel)."""
    rule = _cpu_rule(channel)
    if rule is not None:
        return rule[0]
    for pattern, counter, _ in _PER_TIME:
        if pattern.fullmatch(channel):
            return [pattern.sub(counter, channel)]
    return []


def is_share_counter(channel: str) -> bool:
    """Whether ``channel`` is a counter some share channel is computed from."""
    if channel == "process_tree/majflt_total":
        return True
    return channel.endswith("_seconds_total") and (
        channel.startswith(("cpu/", "pressure/")) or channel.endswith("/cpu_seconds_total")
        or channel in ("cgroup/cpu_usage_seconds_total", "process_tree/run_delay_seconds_total"))


def counter_means(channels, increase: Mapping[str, Optional[float]],
                  seconds: Mapping[str, float]) -> Dict[str, tuple]:
    """``{share channel: (its value over a span, the increase of the counters it counts)}`` for each of
    ``channels`` whose counters all have an ``increase`` over the span (and, for a per-time share, ``seconds``
    with a value there > 0); a CPU share with no tick in the span is left out. The increase is the share's amount:
    CPU-seconds (a mode's, the busy ones', a process's), stall-seconds."""
    out = {}
    for ch in channels:
        rule = _cpu_rule(ch)
        if rule is not None:
            every, top = rule
            got = [increase.get(c) for c in every]
            if any(v is None or v != v for v in got):
                continue
            total, part = sum(got), sum(increase[c] for c in top)
            if total > 0:
                out[ch] = (min(100.0, max(0.0, 100.0 * part / total)), part)
            continue
        for pattern, counter, scale in _PER_TIME:
            if pattern.fullmatch(ch):
                name = pattern.sub(counter, ch)
                inc, secs = increase.get(name), seconds.get(name, 0.0)
                if inc is not None and inc == inc and secs > 0:
                    out[ch] = (max(0.0, scale * inc / secs), inc)
                break
    return out
