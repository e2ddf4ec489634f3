"""Each source's default interval: how often ``Sampler`` reads a source that ``intervals`` does not name.

A source is read at the sampler's ``interval`` unless its values cannot change that often, so that a 1 ms sampler
does not re-read a file a thousand times a second to find the same numbers (rows still come every ``interval``:
between two reads a source repeats its values, free in a changes-only trace):

- ``cpu`` (and ``per_cpu``): max(interval, 1/USER_HZ). /proc/stat's CPU times are printed in USER_HZ ticks (100 per
  second on nearly every distribution: 10 ms), so a 1 ms read of one CPU's line finds what the previous read found
  9 times in 10, and its percents over 1 ms are whole ticks or nothing.
- ``gpu``: max(interval, 10 ms): NVML's fastest metrics step every 10-20 ms (:mod:`sysprof.sampling.gpu_interval`).
- ``process``: the interval. On the live /proc its CPU time is the process's CPU-time clock (exact, in ns, not
  ticks): every read is news.
- every other source: the interval. Their values are not quantised to a tick: each change (a task stalling, a page
  charged to the cgroup, an I/O completing) shows at the first read after it, so a longer default would delay real
  changes, not only skip repeats; a read that finds nothing new costs its read and nothing in a changes-only trace.
  Measured at 1 ms on the benchmark VM (``benchmarks/bench_budget.py``, the share of rows in which a value changed):
  cgroup 96 % (``cpu.stat`` in µs), vmstat 99 %, process_tree 100 %, PSI 8 % (in bursts: its median run of
  unchanged rows is 1), memory 16 %, load 36 %, disk 1 % and net 0 % on an idle VM. process_tree's Pss/USS come
  from a helper thread every 100 ms of its own (an smaps_rollup read walks the page tables: 1-30 ms for a large
  process, ``benchmarks/bench_smaps.py``).

A library's own defaults (the trainer callbacks' ``DEFAULT_INTERVALS``) come in as ``Sampler(default_intervals=...)``.
The budget (:mod:`sysprof.sampling.budget`) stretches a default interval before one the user gave.
"""
from __future__ import annotations

import os

from .gpu_interval import DEFAULT_GPU_INTERVAL_S


def user_hz() -> int:
    """USER_HZ: the unit of /proc/stat's CPU times (sysconf(_SC_CLK_TCK); 100 where it cannot be read)."""
    try:
        hz = os.sysconf("SC_CLK_TCK")
    except (AttributeError, ValueError, OSError):
        hz = -1
    return hz if hz > 0 else 100


def default_interval(source: str, interval: float) -> float:
    """The interval (s) source ``source`` is read at by default under a sampler of ``interval``."""
    if source == "cpu":
        return max(interval, 1.0 / user_hz())
    if source == "gpu":
        return max(interval, DEFAULT_GPU_INTERVAL_S)
    return interval
