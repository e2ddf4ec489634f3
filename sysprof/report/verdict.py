"""The verdict ``sysprof report`` opens with: first the job, then the phases.

**The job** is the process tree ``sysprof record`` follows with a command or ``--pid`` (the ``process_tree/``
channels; ``process/`` where only the process was recorded). Over the whole recording (:func:`judge_job`): the
CPU it used (in percent of one core: CPU-seconds per second of wall time), the time its threads waited for a CPU
(run delay, seconds per second of wall time, summed over the threads), its time in disk I/O and asleep, its major
page faults per second and what the other processes used (the CPUs' busy time less the job's and the steal;
sysprof's own recorder among them). The time its main thread was neither on a CPU nor waiting for one is at least
1 minus the CPU and the run delay, both summed over the tree's threads (exact for a single thread): for a job of
one process that time is split between disk I/O and sleep as the samples of its main thread's state split (D:
disk sleep, S: asleep), a ratio that holds where the share of samples alone can alias with a periodic job; for a
tree of processes, disk I/O is the average count of its processes in state D, and sleep what is left. Then the
cause: the largest of the time it lost, of these three, where above its floor --

* it waited for a CPU at least :data:`JOB_WAITING_SHARE` of the wall time: its cgroup's CPU limit throttled it
  (at least :data:`THROTTLED_SHARE` of the limit's periods, ``cgroup/`` channels), or its own threads kept at
  least :data:`OWN_CPUS` of the CPUs busy, or the larger taker of the CPUs: other processes (at least
  :data:`OTHERS_CORES` of a CPU) or the hypervisor (steal at least :data:`CPU_STEAL_PERCENT`), else its threads
  may be pinned to fewer CPUs than it has;
* it was in disk I/O at least :data:`JOB_BLOCKED_SHARE` of the wall time: with at least
  :data:`MAJOR_FAULTS_PER_SECOND` major faults a second its memory was read back from disk (paging; with the
  ``cgroup/`` channels, and its cgroup's memory at :data:`AT_LIMIT` of its limit: that limit), else it waited
  for the disk;
* its main thread slept at least :data:`JOB_ASLEEP_SHARE` of the wall time: it waited on something else,
  another process, a pipe or socket, a lock, a timer, a GPU --

and with none of them, a job that ran on a CPU at least 90 % of the wall time is CPU-bound.

**The phases**: the ``--by`` phases, else every span name of the trace (Composer's ``event/batch``,
``dataloader``, ``sysprof.mark()`` markers; among several names, a name of one span covering at least
:data:`ALL_OF_IT` of the trace's sampled time, like Composer's ``event/fit``, is the run rather than a phase and
left out), else the whole trace as one phase. The :data:`TOP_PHASES` with the largest sampled wall time are
judged. A phase with at least :data:`NESTED` of its time inside another judged phase's spans is part of it (the
smallest such one): it is shown under its parent with its share of the parent, never summed with it as a
sibling. The sampled time outside every phase's spans is judged as one more phase ("outside every span"). Each
phase says its share of the trace's sampled time, the job's CPU in it (its disk I/O where at least
:data:`JOB_BLOCKED_SHARE`, its sleep where that is its cause there), and the rules below that fire, most severe
first: a rule compares a channel's time-weighted mean inside the phase (:mod:`sysprof.report.phases`; shares from
their counters) with its threshold; a rule whose channel the trace lacks is skipped; severity is ``mean /
threshold`` for a "too high" rule, ``threshold / mean`` (at most :data:`MAX_SEVERITY`) for a "too low" one. A
phase with no finding reads "no clear bottleneck".

Rules (the thresholds are the constants below), in the words the verdict uses:

* the job waited for a CPU: ``process_tree/run_delay_seconds_per_second`` >= 0.10;
* the job's major page faults: ``process_tree/majflt_per_second`` >= 100 /s;
* the CPUs were busy: ``cpu/percent`` >= 90 %;
* the CPUs idled waiting for I/O: ``cpu/iowait_percent`` >= 10 %;
* the hypervisor took the CPUs' time (steal): ``cpu/steal_percent`` >= 5 %;
* some task waited for a CPU / memory / I/O (PSI): ``pressure/<resource>/some_seconds_per_second`` >= 0.10;
* a disk was busy: the busiest ``disk/<dev>/busy_time_seconds_per_second`` >= 0.80 (loop, ram and zram devices are
  no disks);
* memory used: ``memory/used_percent`` >= 90 %;
* major page faults of all processes: ``vmstat/pgmajfault_per_second`` >= 100 /s;
* the GPUs busy only: the mean over GPUs of ``gpu/<i>/utilization_percent`` <= 30 % (the GPUs wait);
* the GPUs busy: that mean >= 90 % (GPU-bound).

A disk or I/O finding also says the disks' read and write throughput during the phase.
"""
from __future__ import annotations

import fnmatch
import math
import shlex
from typing import List, Optional, Sequence

from .model import TraceData
from .phases import PhaseStats, by_phase, outside, overlap_seconds, whole_trace
from .table import format_si

__all__ = ["verdict", "judgement", "judge_job", "findings", "judge", "is_key_channel", "KEY_CHANNELS", "RULES",
           "TOP_PHASES", "ALL_OF_IT", "MAX_SEVERITY", "NESTED", "OUTSIDE"]

CPU_BUSY_PERCENT = 90.0
CPU_IOWAIT_PERCENT = 10.0
CPU_STEAL_PERCENT = 5.0
PSI_STALL_SHARE = 0.10
DISK_BUSY_SHARE = 0.80
MEMORY_USED_PERCENT = 90.0
MAJOR_FAULTS_PER_SECOND = 100.0
GPU_STARVED_PERCENT = 30.0
GPU_BUSY_PERCENT = 90.0
#: the job waited for a CPU: run delay (summed over its threads) per second of wall time
JOB_WAITING_SHARE = 0.10
#: the job was in disk I/O: the average count of its processes in state D
JOB_BLOCKED_SHARE = 0.10
#: the job slept: its main thread neither ran, nor waited for a CPU, nor was in disk I/O this share of the time
JOB_ASLEEP_SHARE = 0.5
#: the job is CPU-bound: it ran on a CPU this share of the wall time (one core)
JOB_CPU_BOUND = 0.9
#: a cgroup CPU limit held the job back: the share of the limit's periods it was throttled in
THROTTLED_SHARE = 0.10
#: the job's own threads kept this share of the CPUs busy
OWN_CPUS = 0.75
#: other processes used at least this much of a CPU (cores)
OTHERS_CORES = 0.1
#: a cgroup's memory at this share of its limit is at the limit
AT_LIMIT = 0.9
#: phases judged (the largest by wall time)
TOP_PHASES = 6
#: without --by, a name of one span covering this share of the trace's sampled time is the run, no phase
#: (Composer's event/fit, event/epoch of a one-epoch run; a lone marked span of half the run is a phase)
ALL_OF_IT = 0.9
#: a phase with this share of its time inside another phase's spans is part of that phase
NESTED = 0.95
#: the severity of a "too low" rule at most (a mean of 0 is not infinitely worse than one of 1)
MAX_SEVERITY = 10.0
#: the name of the time outside every phase
OUTSIDE = "outside every span"
#: disks left out (not storage): loop, ram and zram devices
_NOT_DISKS = ("loop*", "ram*", "zram*")

#: (rule, text with the value as {v}, channel glob, how devices combine: "one" | "max" | "mean", "high" | "low",
#: threshold, format of the value)
RULES = (
    ("job_waiting", "the job waited for a CPU {v}", "process_tree/run_delay_seconds_per_second", "one",
     "high", JOB_WAITING_SHARE, "threads"),
    ("job_faults", "the job had {v} major page faults a second (pages read back from disk)",
     "process_tree/majflt_per_second",
     "one", "high", MAJOR_FAULTS_PER_SECOND, "rate"),
    ("cpu_busy", "the CPUs were busy {v} of the time", "cpu/percent", "one", "high", CPU_BUSY_PERCENT, "percent"),
    ("cpu_iowait", "the CPUs idled waiting for I/O {v} of the time (iowait)", "cpu/iowait_percent", "one", "high",
     CPU_IOWAIT_PERCENT, "percent"),
    ("cpu_steal", "the hypervisor took {v} of the CPUs' time (steal)", "cpu/steal_percent", "one", "high",
     CPU_STEAL_PERCENT, "percent"),
    ("cpu_stall", "some task waited for a CPU {v} of the time (PSI)", "pressure/cpu/some_seconds_per_second", "one",
     "high", PSI_STALL_SHARE, "share"),
    ("memory_stall", "some task waited for memory {v} of the time (PSI)", "pressure/memory/some_seconds_per_second",
     "one", "high", PSI_STALL_SHARE, "share"),
    ("io_stall", "some task waited for I/O {v} of the time (PSI)", "pressure/io/some_seconds_per_second", "one",
     "high", PSI_STALL_SHARE, "share"),
    ("disk_busy", "disk {dev} busy {v} of the time", "disk/*/busy_time_seconds_per_second", "max", "high",
     DISK_BUSY_SHARE, "share"),
    ("memory_used", "memory {v} used", "memory/used_percent", "one", "high", MEMORY_USED_PERCENT, "percent"),
    ("major_faults", "{v} major page faults a second, all processes (pages read back from disk)",
     "vmstat/pgmajfault_per_second", "one", "high", MAJOR_FAULTS_PER_SECOND, "rate"),
    ("gpu_starved", "the GPUs were busy only {v} of the time", "gpu/*/utilization_percent", "mean", "low",
     GPU_STARVED_PERCENT, "percent"),
    ("gpu_busy", "the GPUs were busy {v} of the time", "gpu/*/utilization_percent", "mean", "high",
     GPU_BUSY_PERCENT, "percent"),
)
_IO_RULES = ("disk_busy", "io_stall")

#: the channels that matter: the per-phase summary of ``report --by`` shows these (``-k`` chooses others)
KEY_CHANNELS = ("cpu/percent", "cpu/iowait_percent", "cpu/steal_percent", "pressure/*/some_seconds_per_second",
                "memory/used_bytes", "vmstat/pgmajfault_per_second", "disk/*/read_bytes_per_second",
                "disk/*/write_bytes_per_second", "disk/*/busy_time_seconds_per_second",
                "net/*/bytes_recv_per_second", "net/*/bytes_sent_per_second", "process/cpu_percent",
                "process_tree/cpu_percent", "process_tree/rss_bytes", "process_tree/run_delay_seconds_per_second",
                "process_tree/procs_blocked", "process_tree/procs_sleeping", "process_tree/majflt_per_second",
                "gpu/*/utilization_percent", "gpu/*/power_watts", "gpu/*/energy_joules")  # joules per phase: the counter's increase


def is_key_channel(channel: str) -> bool:
    return any(fnmatch.fnmatchcase(channel, p) for p in KEY_CHANNELS) and not _excluded_disk(channel)


def _excluded_disk(channel: str) -> bool:
    parts = channel.split("/")
    return parts[0] == "disk" and len(parts) == 3 and any(fnmatch.fnmatchcase(parts[1], p) for p in _NOT_DISKS)


def _pct(share: float) -> str:
    """A share (0-1) in percent: ``60 %``."""
    return f"{100 * share:.0f} %"


def _of_the_time(value: float, what: str = "the time", over: str = "its threads") -> str:
    """Seconds per second of wall time summed ``over`` threads or processes: ``60 % of the time``; above 1,
    ``1.3 s per second of wall time, summed over its threads``."""
    return f"{_pct(value)} of {what}" if value <= 1 else f"{value:.1f} s per second of wall time, summed over {over}"


def _format(value: float, how: str) -> str:
    if how == "percent":
        return f"{value:.0f} %"
    if how == "share":
        return _pct(value)
    if how in ("threads", "processes"):
        return _of_the_time(value, over=f"its {how}")
    return f"{value:,.0f}"


def _cores(cores: float) -> str:
    """CPU-seconds per second: ``6 % of one core``, ``2.3 cores``."""
    return f"{100 * cores:.0f} % of one core" if cores < 1.5 else f"{cores:.1f} cores"


def _mean(phase: PhaseStats, channel: str) -> Optional[float]:
    c = phase.channels.get(channel)
    return c.mean if c is not None and math.isfinite(c.mean) else None


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
    for what, verb in (("read", "reading"), ("write", "writing")):
        vals = [c.mean for ch, c in phase.channels.items()
                if fnmatch.fnmatchcase(ch, f"disk/*/{what}_bytes_per_second") and not _excluded_disk(ch)]
        if vals and sum(vals) > 0:
            total[verb] = sum(vals)
    return ", ".join(f"the disks {w} {format_si(v, 'B/s')}" for w, v in total.items())


def findings(phase: PhaseStats) -> List[dict]:
    """The rules that fire in ``phase``, most severe first (plain dicts: ``rule``, ``channel``, ``value``,
    ``threshold``, ``state`` ("saturated" | "starved"), ``severity``, ``text``)."""
    out = []
    for rule, words, glob, combine, side, threshold, how in RULES:
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
        out.append({"rule": rule, "channel": channel, "value": value, "threshold": threshold,
                    "state": "starved" if side == "low" else "saturated", "severity": severity,
                    "text": words.format(v=_format(value, how), dev=dev)})
    out.sort(key=lambda f: -f["severity"])
    return out


# ---- the job ------------------------------------------------------------------------------------------------
def _job_facts(phase: PhaseStats, cpu_count) -> Optional[dict]:
    """The job's numbers inside ``phase`` (None where the trace follows no process): ``cores`` (CPU-seconds per
    second), ``waiting`` (run delay per second, summed over threads; None: not recorded), ``disk`` (the share of the
    wall time in disk I/O; for a tree of processes the average count in state D), ``asleep`` (the share of the wall
    time its main thread at least slept; None without the run delay), ``faults`` (major faults per second),
    ``processes``, ``threads``, ``others`` (other processes' CPU, cores), ``cpus``, ``steal`` (percent of all CPUs'
    time), ``throttled`` (share of the cgroup's CPU-limit periods), ``limit_cores``, ``memory_bytes`` and
    ``memory_max_bytes`` (its cgroup's)."""
    tree = next((t for t in ("process_tree", "process") if _mean(phase, f"{t}/cpu_percent") is not None), None)
    if tree is None:
        return None
    cores = _mean(phase, f"{tree}/cpu_percent") / 100
    waiting = _mean(phase, "process_tree/run_delay_seconds_per_second")
    blocked, sleeping = _mean(phase, "process_tree/procs_blocked"), _mean(phase, "process_tree/procs_sleeping")
    processes = _mean(phase, "process_tree/num_processes")
    busy, steal = _mean(phase, "cpu/percent"), _mean(phase, "cpu/steal_percent")
    cpus = cpu_count if isinstance(cpu_count, int) and cpu_count > 0 else None
    others = None
    if busy is not None and cpus:
        others = max(0.0, (busy - (steal or 0.0)) / 100 * cpus - cores)
    throttled = None
    periods = phase.channels.get("cgroup/cpu_periods_total")
    hit = phase.channels.get("cgroup/cpu_throttled_periods_total")
    if periods is not None and hit is not None and periods.amount and hit.amount is not None:
        throttled = min(1.0, max(0.0, hit.amount / periods.amount))
    limit = _mean(phase, "cgroup/cpu_limit_cores")
    disk, asleep = blocked, None
    if waiting is not None:
        off = max(0.0, 1.0 - cores - waiting)  # the main thread's time off the CPU, not waiting: at least this
        if processes is not None and processes < 1.5 and blocked is not None and sleeping is not None:
            disk = off * blocked / (blocked + sleeping) if blocked + sleeping > 0 else 0.0
        asleep = max(0.0, off - (disk or 0.0))
    return {"channels": tree, "cores": cores, "waiting": waiting, "disk": disk, "asleep": asleep,
            "processes": processes,
            "faults": _mean(phase, "process_tree/majflt_per_second"), "threads": _mean(phase, f"{tree}/num_threads"),
            "others": others, "cpus": cpus, "steal": steal, "throttled": throttled,
            "limit_cores": limit if limit is not None and math.isfinite(limit) else None,
            "memory_bytes": _mean(phase, "cgroup/memory_current_bytes"),
            "memory_max_bytes": _mean(phase, "cgroup/memory_max_bytes")}


def _cpu_cause(j: dict):
    """``(cause, words)`` of a job that waited for a CPU: who had the CPUs."""
    cpus = j["cpus"]
    if j["throttled"] is not None and j["throttled"] >= THROTTLED_SHARE:
        limit = f" ({j['limit_cores']:.2g} cores)" if j["limit_cores"] is not None else ""
        return "cpu_throttled", (f"held back by its cgroup's CPU limit{limit}: throttled in {_pct(j['throttled'])} "
                                 "of the limit's periods")
    if cpus and j["cores"] >= OWN_CPUS * cpus:
        return "own_threads", f"its own threads outnumbered the {cpus} CPUs"
    takers = []  # (cores taken, cause, words): the larger taker is the cause
    if j["others"] is not None and j["others"] >= OTHERS_CORES:
        takers.append((j["others"], "cpu_contention", "held back by other processes: they had the CPUs while it "
                                                      "waited"))
    if j["steal"] is not None and j["steal"] >= CPU_STEAL_PERCENT:
        takers.append((j["steal"] / 100 * (cpus or 1), "cpu_steal", f"held back by the hypervisor, which took "
                                                                     f"{j['steal']:.0f} % of the CPUs' time (steal)"))
    if takers:
        return max(takers)[1:]
    return "cpu_pinned", "the CPUs were not all busy: its threads may be pinned to fewer CPUs (taskset, cpuset)"


def _cause(j: dict, phase: PhaseStats):
    """``(cause, words)``: why the job did not run more, or ``(None, "")``. The largest of the time it lost --
    waiting for a CPU (at least :data:`JOB_WAITING_SHARE`), in disk I/O (:data:`JOB_BLOCKED_SHARE`), asleep
    (:data:`JOB_ASLEEP_SHARE`) -- is the cause; disk I/O with :data:`MAJOR_FAULTS_PER_SECOND` major faults is
    paging. Nothing lost and a busy core: CPU-bound."""
    lost = [(v, what) for v, what, floor in ((j["waiting"], "cpu", JOB_WAITING_SHARE),
                                             (j["disk"], "disk", JOB_BLOCKED_SHARE),
                                             (j["asleep"], "asleep", JOB_ASLEEP_SHARE)) if v is not None and v >= floor]
    paging = j["faults"] is not None and j["faults"] >= MAJOR_FAULTS_PER_SECOND
    top = max(lost)[1] if lost else ("disk" if paging else None)
    if top == "cpu":
        return _cpu_cause(j)
    if top == "disk" and paging:
        words = "its memory was read back from disk (major page faults)"
        mem, limit = j["memory_bytes"], j["memory_max_bytes"]
        if mem is not None and limit is not None and math.isfinite(limit) and limit > 0 and mem >= AT_LIMIT * limit:
            words += f": its cgroup is at its memory limit ({format_si(mem, 'B')} of {format_si(limit, 'B')})"
        return "memory_paging", words
    if top == "disk":
        disks = _disk_throughput(phase)
        return "disk_io", "waiting for the disk" + (f" ({disks})" if disks else "")
    if top == "asleep":
        return "asleep", (f"mostly asleep: its main thread was off the CPU, not waiting for one and not in disk I/O "
                          f"at least {_pct(j['asleep'])} of the time, waiting on something else (another process, "
                          "a pipe or socket, a lock, a timer, the GPU)")
    if j["cores"] >= JOB_CPU_BOUND:
        return "cpu_bound", "busy on the CPU (CPU-bound)"
    return None, ""


def _who(data: TraceData) -> str:
    meta = data.meta
    command = meta.get("command_line") if isinstance(meta.get("command_line"), str) else ""
    try:
        argv = shlex.split(command)
    except ValueError:
        argv = command.split()
    name = " ".join(a.rstrip("/").rsplit("/", 1)[-1] or a for a in argv[:3])  # paths by their last part
    if len(argv) > 3:
        name += " ..."
    parts = [name] if name else []
    if isinstance(meta.get("pid"), int):
        parts.append(f"pid {meta['pid']}")
    procs = _max_of(data, "process_tree/num_processes")
    if procs is not None and procs > 1:
        parts.append(f"up to {procs:.0f} processes")
    return ", ".join(parts)


def judge_job(data: TraceData, phase: Optional[PhaseStats] = None) -> Optional[dict]:
    """The job's verdict over ``phase`` (default: the whole trace): the numbers of :func:`_job_facts`, ``cause``
    (``cpu_contention``, ``cpu_throttled``, ``cpu_steal``, ``own_threads``, ``cpu_pinned``, ``memory_paging``,
    ``disk_io``, ``asleep``, ``cpu_bound`` or None) and ``text``, e.g. ``"job (python train.py, pid 1234): used
    6 % of one core; waited for a CPU 60 % of the wall time (run delay); other processes used 1.9 of the 2 CPUs.
    Held back by other processes: they had the CPUs while it waited."``. None where the trace follows no process."""
    phase = phase if phase is not None else whole_trace(data)
    j = _job_facts(phase, data.meta.get("cpu_count"))
    if j is None:
        return None
    parts = [f"used {_cores(j['cores'])}"]
    many = j["threads"] is not None and j["threads"] > 1.5
    if j["waiting"] is not None:
        summed = ", summed over its threads" if many and j["waiting"] <= 1 else ""
        parts.append(f"waited for a CPU {_of_the_time(j['waiting'], 'the wall time')} (run delay{summed})")
    elif j["channels"] == "process_tree":
        parts.append("its wait for a CPU was not recorded (no run delay: the psutil backend, or a kernel without "
                     "schedstat)")
    if j["disk"] is not None and j["disk"] >= 0.05:
        parts.append(f"in disk I/O {_of_the_time(j['disk'], 'the wall time', 'its processes')}")
    if j["faults"] is not None and j["faults"] >= 10:
        parts.append(f"{j['faults']:,.0f} major page faults a second")
    if j["others"] is not None:
        parts.append(f"other processes used {j['others']:.1f} of the {j['cpus']} CPUs")
    cause, words = _cause(j, phase)
    who = _who(data)
    text = f"job ({who}): " if who else "job: "
    text += "; ".join(parts) + "." + (f" {words[0].upper()}{words[1:]}." if words else "")
    return dict(j, cause=cause, text=text)


def _max_of(data: TraceData, channel: str) -> Optional[float]:
    import numpy as np

    from .names import sampler_series

    got = sampler_series(data)[0].get(channel)
    if got is None:
        return None
    v = np.asarray(got[1], dtype=np.float64)
    v = v[np.isfinite(v)]
    return float(v.max()) if v.size else None


# ---- the phases ---------------------------------------------------------------------------------------------
def judge(phase: PhaseStats, total_seconds: float, parent: Optional[PhaseStats] = None, cpu_count=None) -> dict:
    """One phase's verdict: ``phase``, ``wall_seconds``, ``share`` (of the trace's sampled time, at most 1),
    ``parent`` and ``parent_share`` (of a nested phase: the share of its parent's time), ``findings``
    (:func:`findings`), ``job`` (the job's numbers in it, as :func:`judge_job`'s; None: no job), ``cause`` (the
    job's in it, as :func:`judge_job`'s) and ``text``, e.g. ``"dataloader: 31 % of wall time;
    the job used 80 % of one core; the GPUs were busy only 4 % of the time; the disks reading 180.00 MB/s, some
    task waited for I/O 42 % of the time (PSI)"``."""
    share = min(1.0, phase.sampled_seconds / total_seconds) if total_seconds > 0 else None
    found = findings(phase)
    head = f"{100 * share:.0f} % of wall time" if share is not None else f"{phase.sampled_seconds:.3g} s"
    parent_share = None
    if parent is not None and parent.sampled_seconds > 0:
        parent_share = min(1.0, overlap_seconds(phase, parent) / parent.sampled_seconds)
        head = f"{100 * parent_share:.0f} % of {parent.name}" + (f" ({head})" if share is not None else "")
    parts = [f"{phase.name}: {head}"]
    job = _job_facts(phase, cpu_count)
    cause = None
    if job is not None:
        cause = _cause(job, phase)[0]
        said = [f"the job used {_cores(job['cores'])}"]
        if job["disk"] is not None and job["disk"] >= JOB_BLOCKED_SHARE:
            said.append(f"was in disk I/O {_of_the_time(job['disk'], over='its processes')}")
        if cause == "asleep":
            said.append(f"slept at least {_pct(job['asleep'])} of the time")
        parts.append(", ".join(said[:-1]) + " and " + said[-1] if len(said) > 1 else said[0])
    texts = [f["text"] for f in found]
    if any(f["rule"] in _IO_RULES for f in found):
        throughput = _disk_throughput(phase)
        if throughput:
            at = next(i for i, f in enumerate(found) if f["rule"] in _IO_RULES)
            texts[at] = f"{throughput}, {texts[at]}"
    parts += texts or ["no clear bottleneck"]
    return {"phase": phase.name, "wall_seconds": phase.wall_seconds, "sampled_seconds": phase.sampled_seconds,
            "share": share, "parent": parent.name if parent is not None else None, "parent_share": parent_share,
            "job": job, "cause": cause, "findings": found, "text": "; ".join(parts)}


def _nest(ranked: Sequence[PhaseStats]):
    """``[(phase, parent or None, depth)]`` in display order: roots largest first, each followed by the phases
    nested in it (largest first)."""
    parent = {}
    for b in ranked:
        holders = [a for a in ranked if a is not b and a.sampled_seconds > b.sampled_seconds and b.sampled_seconds > 0
                   and overlap_seconds(b, a) >= NESTED * b.sampled_seconds]
        parent[id(b)] = min(holders, key=lambda a: a.sampled_seconds) if holders else None
    out = []

    def visit(p, depth):
        out.append((p, parent[id(p)], depth))
        for c in ranked:
            if parent[id(c)] is p:
                visit(c, depth + 1)

    for p in ranked:
        if parent[id(p)] is None:
            visit(p, 0)
    return out


def judgement(data: TraceData, patterns: Optional[Sequence[str]] = None, total_seconds: Optional[float] = None,
              phases: Optional[Sequence[PhaseStats]] = None) -> dict:
    """The verdict of a trace (module docstring): ``{"job": judge_job() or None, "phases": [judge() per phase, in
    display order, nested ones after their parent], "outside": judge() of the time outside every phase or None,
    "lines": the text, one line each, nested phases indented}``. ``phases``: already attributed phases
    (``report --by``); else those of ``patterns``, else every span name, else the whole trace. ``total_seconds``:
    the trace's sampled time (the shares' denominator; by default the sum of
    :func:`~sysprof.report.stats.sampled_windows`)."""
    from .stats import sampled_windows

    if total_seconds is None:
        total_seconds = sum(b - a for a, b in sampled_windows(data)) / 1e6
    chosen = bool(patterns) or phases is not None
    dropped = False
    if phases is None and patterns:
        phases = by_phase(data, list(patterns))
    elif phases is None:  # every span name, but those that are the run
        every = by_phase(data, ["*"]) if data.spans else []
        phases = [p for p in every if p.count > 1 or p.sampled_seconds < ALL_OF_IT * total_seconds or len(every) == 1]
        dropped = len(phases) < len(every)
    phases = list(phases)
    cpu_count = data.meta.get("cpu_count")
    job = judge_job(data)
    judged, out = [], None
    if phases:
        ranked = sorted(phases, key=lambda p: -p.sampled_seconds)[:TOP_PHASES]
        for p, parent, depth in _nest(ranked):
            judged.append(dict(judge(p, total_seconds, parent, cpu_count), depth=depth))
        rest = outside(data, phases, OUTSIDE if not (chosen or dropped) else "outside these phases")
        if rest is not None and rest.sampled_seconds > 0:
            out = dict(judge(rest, total_seconds, None, cpu_count), depth=0)
    else:
        judged.append(dict(judge(whole_trace(data), total_seconds, None, cpu_count), depth=0))
    lines = []
    if job is not None:
        lines.append(job["text"])
    elif data.recorded:
        lines.append("job: not followed (record a command, or --pid PID, to see the CPU it got and why)")
    lines += ["  " * v["depth"] + v["text"] for v in judged]
    if out is not None:
        lines.append(out["text"])
    return {"job": job, "phases": judged, "outside": out, "lines": lines}


def verdict(data: TraceData, patterns: Optional[Sequence[str]] = None, total_seconds: Optional[float] = None,
            phases: Optional[Sequence[PhaseStats]] = None) -> List[dict]:
    """The judged phases of :func:`judgement` (one dict per phase, in display order)."""
    return judgement(data, patterns, total_seconds, phases)["phases"]
