"""Helpers of the interference section (bench_interference.py): per-thread schedstat, the interleaved-pair
protocol (A B A B ... A, each B against the mean of its neighbouring A's), and processes that keep every core
busy."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import List, Optional, Sequence, Tuple

A = "A"  # the label of a reference slot (the loop alone)


# ------------------------------------------------------------------------------------------------
# schedstat: a task's time on a CPU and its run delay (runnable, waiting for a CPU)
# ------------------------------------------------------------------------------------------------

def parse_schedstat(text: str) -> Tuple[int, int, int]:
    """(ns on a CPU, ns runnable but waiting for a CPU, timeslices) from a /proc/.../schedstat line
    (Documentation/scheduler/sched-stats.rst: the three fields of /proc/<pid>/schedstat)."""
    f = text.split()
    return int(f[0]), int(f[1]), int(f[2])


def read_schedstat(path: str = "/proc/thread-self/schedstat") -> Optional[Tuple[int, int, int]]:
    """parse_schedstat of ``path`` (the calling thread by default); None where the kernel has no schedstat."""
    try:
        with open(path) as f:
            return parse_schedstat(f.read())
    except (OSError, ValueError, IndexError):
        return None


def task_schedstat(tid: int) -> Optional[Tuple[int, int, int]]:
    return read_schedstat(f"/proc/self/task/{tid}/schedstat")


def tids_named(comm: str) -> List[int]:
    """This process's threads whose comm (pthread_setname_np) is exactly ``comm``."""
    out = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return out
    for t in tasks:
        try:
            with open(f"/proc/self/task/{t}/comm") as f:
                if f.read().rstrip("\n") == comm:
                    out.append(int(t))
        except (OSError, ValueError):
            pass  # the thread ended
    return sorted(out)


# ------------------------------------------------------------------------------------------------
# the interleaved-pair protocol
# ------------------------------------------------------------------------------------------------

def schedule(primary: Sequence[str], secondary: Sequence[str], pairs: int, secondary_every: int) -> List[str]:
    """The B slots in run order: ``pairs`` rounds; each round holds every primary label and, in rounds
    0, secondary_every, 2*secondary_every, ..., every secondary label; the round's order is rotated by one each
    round so that no label keeps a position. An A slot goes before, between and after them."""
    out: List[str] = []
    for r in range(pairs):
        labels = list(primary) + (list(secondary) if r % max(1, secondary_every) == 0 else [])
        k = r % len(labels) if labels else 0
        out += labels[k:] + labels[:k]
    return out


def against_neighbours(slots: Sequence[Tuple[str, Optional[float]]], label: str,
                       relative: bool = True) -> List[float]:
    """For each slot labelled ``label``: its value against the mean of the A slots on either side of it, as
    100 * (value / mean - 1) (relative) or value - mean. Slots whose value (or both neighbours') is None are
    left out."""
    out = []
    for i, (lab, v) in enumerate(slots):
        if lab != label or v is None:
            continue
        nb = [slots[j][1] for j in (i - 1, i + 1) if 0 <= j < len(slots) and slots[j][0] == A
              and slots[j][1] is not None]
        if not nb:
            continue
        m = sum(nb) / len(nb)
        if relative:
            if m != 0:
                out.append(100.0 * (v / m - 1.0))
        else:
            out.append(v - m)
    return out


# ------------------------------------------------------------------------------------------------
# every core busy: one spinning process per core
# ------------------------------------------------------------------------------------------------

# Spins in pure Python; leaves when its parent is gone (killed without a chance to clean up) or after argv[1] s.
_SPIN = ("import os, sys, time\n"
         "ppid, end = os.getppid(), time.monotonic() + float(sys.argv[1])\n"
         "while os.getppid() == ppid and time.monotonic() < end:\n"
         "    for _ in range(100000):\n"
         "        pass\n")


def proc_cpu_seconds(pid: int) -> Optional[float]:
    """utime + stime of process ``pid`` (/proc/PID/stat fields 14 and 15), in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def machine_cpu_seconds() -> Optional[float]:
    """CPU seconds the whole machine spent busy (/proc/stat's cpu line less idle and iowait)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


class Spinners:
    """``n`` processes that each spin one core in pure Python, for a ``with`` block. They are killed on leaving
    it, whatever ends the block (an exception, KeyboardInterrupt); each also leaves by itself when this process
    is gone or after ``max_seconds``."""

    def __init__(self, n: int, max_seconds: float = 900.0) -> None:
        self.n = n
        self.max_seconds = max_seconds
        self.procs: List[subprocess.Popen] = []

    def __enter__(self) -> "Spinners":
        try:
            for _ in range(self.n):
                self.procs.append(subprocess.Popen(
                    [sys.executable, "-c", _SPIN, str(self.max_seconds)], stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            time.sleep(0.3)  # interpreter start-up: let every one reach its loop
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def running(self) -> int:
        return sum(1 for p in self.procs if p.poll() is None)

    def cpu_seconds(self) -> float:
        return sum(proc_cpu_seconds(p.pid) or 0.0 for p in self.procs)

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL not delivered in 5 s
                pass


def other_cores(machine0: Optional[float], machine1: Optional[float], ours_s: float, seconds: float
                ) -> Optional[float]:
    """Cores kept busy by other processes: the machine's busy CPU seconds less ours, per second."""
    if machine0 is None or machine1 is None or seconds <= 0:
        return None
    return max(0.0, (machine1 - machine0 - ours_s) / seconds)


def self_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system

