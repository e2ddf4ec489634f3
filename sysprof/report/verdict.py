"""The verdict ``sysprof report`` opens with: the phases that take the most wall time and, for each, what was
saturated or starved during it.

Phases: the ``--by`` phases, else every span name of the trace (Composer's ``event/batch``, ``dataloader``,
``sysprof.mark()`` markers; a name of one span covering at least :data:`ALL_OF_IT` of the time any span covers,
like Composer's ``event/fit``, is the run rather than a phase and left out), else the whole trace as one phase;
the :data:`TOP_PHASES` with the largest sampled wall time (the union of their spans inside the sampling windows)
are judged, largest first, each with its share of the trace's sampled time. Each rule below compares a channel's
time-weighted mean inside the phase (:mod:`sysprof.report.phases`) with its threshold; a rule whose channel the
trace lacks is skipped. Findings are ranked by severity: ``mean / threshold`` for a "too high" rule, ``threshold / mean`` (at
most :data:`MAX_SEVERITY`) for a "too low" one. A phase with no finding reads "no clear bottleneck".

Rules (the thresholds are the constants below):

* CPU busy: ``cpu/percent`` >= 90 % (CPU saturated);
* CPU iowait: ``cpu/iowait_percent`` >= 10 % (CPUs idle waiting for I/O);
* CPU steal: ``cpu/steal_percent`` >= 5 % (the hypervisor took the CPUs);
* cpu / memory / io stall share: ``pressure/<resource>/some_seconds_per_second`` >= 0.10 (some task stalled on
  that resource, PSI);
* disk utilisation: the busiest ``disk/<dev>/busy_time_seconds_per_second`` >= 0.80 (loop, ram and zram devices
  are no disks);
* memory in use: ``memory/used_percent`` >= 90 %;
* major faults: ``vmstat/pgmajfault_per_second`` >= 100 /s (pages read back from disk);
* GPU starved: the mean over GPUs of ``gpu/<i>/utilization_percent`` <= 30 % (the GPUs wait);
* GPU busy: that mean >= 90 % (GPU-bound).

A disk or io-stall finding also says the disks' read and write throughput during the phase.
"""
from __future__ import annotations

import fnmatch
from typing import List, Optional, Sequence

from .model import TraceData
from .phases import PhaseStats, by_phase, spans_sampled_seconds, whole_trace
from .table import format_si

__all__ = ["verdict", "findings", "judge", "is_key_channel", "KEY_CHANNELS", "RULES", "TOP_PHASES", "ALL_OF_IT",
           "MAX_SEVERITY"]

CPU_BUSY_PERCENT = 90.0
CPU_IOWAIT_PERCENT = 10.0
CPU_STEAL_PERCENT = 5.0
PSI_STALL_SHARE = 0.10
DISK_BUSY_SHARE = 0.80
MEMORY_USED_PERCENT = 90.0
MAJOR_FAULTS_PER_SECOND = 100.0
GPU_STARVED_PERCENT = 30.0
GPU_BUSY_PERCENT = 90.0
#: phases judged (the largest by wall time)
TOP_PHASES = 4
#: without --by, a name of one span covering this share of the time all spans cover is the run, no phase
#: (Composer's event/fit, event/epoch of a one-epoch run)
ALL_OF_IT = 0.9
#: the severity of a "too low" rule at most (a mean of 0 is not infinitely worse than one of 1)
MAX_SEVERITY = 10.0
#: disks left out (not storage): loop, ram and zram devices
_NOT_DISKS = ("loop*", "ram*", "zram*")

#: (rule, label, channel glob, how devices combine: "one" | "max" | "mean", "high" | "low", threshold, format)
RULES = (
    ("cpu_busy", "CPU busy", "cpu/percent", "one", "high", CPU_BUSY_PERCENT, "percent"),
    ("cpu_iowait", "CPU iowait", "cpu/iowait_percent", "one", "high", CPU_IOWAIT_PERCENT, "percent"),
    ("cpu_steal", "CPU steal", "cpu/steal_percent", "one", "high", CPU_STEAL_PERCENT, "percent"),
    ("cpu_stall", "cpu stall share", "pressure/cpu/some_seconds_per_second", "one", "high", PSI_STALL_SHARE, "share"),
    ("memory_stall", "memory stall share", "pressure/memory/some_seconds_per_second", "one", "high",
     PSI_STALL_SHARE, "share"),
    ("io_stall", "io stall share", "pressure/io/some_seconds_per_second", "one", "high", PSI_STALL_SHARE, "share"),
    ("disk_busy", "disk {dev} util", "disk/*/busy_time_seconds_per_second", "max", "high", DISK_BUSY_SHARE,
     "share_percent"),
    ("memory_used", "memory used", "memory/used_percent", "one", "high", MEMORY_USED_PERCENT, "percent"),
    ("major_faults", "major faults", "vmstat/pgmajfault_per_second", "one", "high", MAJOR_FAULTS_PER_SECOND, "rate"),
    ("gpu_starved", "GPU util", "gpu/*/utilization_percent", "mean", "low", GPU_STARVED_PERCENT, "percent"),
    ("gpu_busy", "GPU util", "gpu/*/utilization_percent", "mean", "high", GPU_BUSY_PERCENT, "percent"),
)

#: the channels that matter: the per-phase summary of ``report --by`` shows these (``-k`` chooses others)
KEY_CHANNELS = ("cpu/percent", "cpu/iowait_percent", "cpu/steal_percent", "pressure/*/some_seconds_per_second",
                "memory/used_bytes", "vmstat/pgmajfault_per_second", "disk/*/read_bytes_per_second",
                "disk/*/write_bytes_per_second", "disk/*/busy_time_seconds_per_second",
                "net/*/bytes_recv_per_second", "net/*/bytes_sent_per_second", "process/cpu_percent",
                "process_tree/cpu_percent", "process_tree/rss_bytes", "gpu/*/utilization_percent",
                "gpu/*/power_watts", "gpu/*/energy_joules")  # joules per phase: the counter's increase


def is_key_channel(channel: str) -> bool:
    return any(fnmatch.fnmatchcase(channel, p) for p in KEY_CHANNELS) and not _excluded_disk(channel)


def _excluded_disk(channel: str) -> bool:
    parts = channel.split("/")
    return parts[0] == "disk" and len(parts) == 3 and any(fnmatch.fnmatchcase(parts[1], p) for p in _NOT_DISKS)


def _format(value: float, how: str) -> str:
    if how == "percent":
        return f"{value:.0f} %"
    if how == "share_percent":
        return f"{100 * value:.0f} %"
    if how == "share":
        return f"{value:.2f}"
    return f"{value:.0f} /s"


def _rule_value(phase: PhaseStats, glob: str, combine: str):
    """``(value, channel)`` of a rule in a phase, or None where the phase has no such channel."""
    found = [(c.mean, ch) for ch, c in phase.channels.items()
             if fnmatch.fnmatchcase(ch, glob) and not _excluded_disk(ch) and c.mean == c.mean]
    if not found:
        return None
    if combine == "max":
        return max(found)
    if combine == "mean":
        return sum(v for v, _ in found) / len(found), glob if len(found) > 1 else found[0][1]
    return found[0]


def _disk_throughput(phase: PhaseStats) -> str:
    total = {}
    for what in ("read", "write"):
        vals = [c.mean for ch, c in phase.channels.items()
                if fnmatch.fnmatchcase(ch, f"disk/*/{what}_bytes_per_second") and not _excluded_disk(ch)]
        if vals and sum(vals) > 0:
            total[what] = sum(vals)
    return ", ".join(f"disk {w} {format_si(v, 'B/s')}" for w, v in total.items())


def findings(phase: PhaseStats) -> List[dict]:
    """The rules that fire in ``phase``, most severe first (plain dicts: ``rule``, ``channel``, ``value``,
    ``threshold``, ``state`` ("saturated" | "starved"), ``severity``, ``text``)."""
    out = []
    for rule, label, glob, combine, side, threshold, how in RULES:
        got = _rule_value(phase, glob, combine)
        if got is None:
            continue
        value, channel = got
        if side == "high" and value >= threshold:
            severity = value / threshold
        elif side == "low" and value <= threshold:
            severity = min(MAX_SEVERITY, threshold / value) if value > 0 else MAX_SEVERITY
        else:
            continue
        dev = channel.split("/")[1] if rule == "disk_busy" else ""
        text = f"{label.format(dev=dev)} {_format(value, how)}"
        if rule.startswith("gpu"):
            text += " during it"
        out.append({"rule": rule, "channel": channel, "value": value, "threshold": threshold,
                    "state": "starved" if side == "low" else "saturated", "severity": severity, "text": text})
    out.sort(key=lambda f: -f["severity"])
    return out


def judge(phase: PhaseStats, total_seconds: float) -> dict:
    """One phase's verdict: ``phase``, ``wall_seconds``, ``share`` (of the trace's sampled time, at most 1),
    ``findings`` (:func:`findings`) and ``text``, e.g. ``"dataloader: 31 % of wall time; GPU util 4 % during it;
    disk read 180 MB/s, io stall share 0.42"``."""
    share = min(1.0, phase.sampled_seconds / total_seconds) if total_seconds > 0 else None
    found = findings(phase)
    parts = [f"{phase.name}: " + (f"{100 * share:.0f} % of wall time" if share is not None else
                                  f"{phase.sampled_seconds:.3g} s")]
    texts = [f["text"] for f in found]
    if any(f["rule"] in ("disk_busy", "io_stall") for f in found):
        throughput = _disk_throughput(phase)
        if throughput:
            at = next(i for i, f in enumerate(found) if f["rule"] in ("disk_busy", "io_stall"))
            texts[at] = f"{throughput}, {texts[at]}"
    parts += texts or ["no clear bottleneck"]
    return {"phase": phase.name, "wall_seconds": phase.wall_seconds, "sampled_seconds": phase.sampled_seconds,
            "share": share, "findings": found,
            "text": "; ".join(parts)}


def verdict(data: TraceData, patterns: Optional[Sequence[str]] = None, total_seconds: Optional[float] = None,
            phases: Optional[Sequence[PhaseStats]] = None) -> List[dict]:
    """The verdict of a trace (module docstring): one dict per judged phase, largest wall time first.
    ``phases``: already attributed phases (``report --by``); else those of ``patterns``, else every span name,
    else the whole trace. ``total_seconds``: the trace's sampled time (the share's denominator; by default the
    sum of :func:`~sysprof.report.stats.sampled_windows`)."""
    from .stats import sampled_windows

    if total_seconds is None:
        total_seconds = sum(b - a for a, b in sampled_windows(data)) / 1e6
    if phases is None and patterns:
        phases = by_phase(data, list(patterns))
    elif phases is None:  # every span name, but those that are the run
        phases = by_phase(data, ["*"]) if data.spans else []
        covered = spans_sampled_seconds(data)
        phases = [p for p in phases if p.count > 1 or p.sampled_seconds < ALL_OF_IT * covered]
    phases = list(phases) or [whole_trace(data)]
    ranked = sorted(phases, key=lambda p: -p.sampled_seconds)[:TOP_PHASES]
    return [judge(p, total_seconds) for p in ranked]
