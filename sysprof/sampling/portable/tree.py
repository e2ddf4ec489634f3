"""psutil's process_tree: the followed process and its descendants, summed and per member in stable slots, as
csrc/sources/process_tree.cpp (its header comment has the rules, which this follows):

* members are re-found at most every 100 ms (``root.children(recursive=True)``), at most 256;
* CPU time is summed as per-member deltas (a member that exits takes nothing from the rate; its first reading
  is a baseline only);
* slot 0 is the root; a new member takes the lowest free slot and keeps it while it lives; a member that exits
  frees its slot, which reads NaN from the next row on and is handed out at the next discovery after that row;
  members without a slot are summed and counted in ``num_unslotted``;
* Pss and USS come from ``memory_full_info()`` (smaps_rollup on Linux), read for a new member at once and then
  every 100 ms, staggered; unreadable (AccessDenied; no pss on this platform): NaN and one errors entry;
* psutil has no run delay (the native source reads each thread's schedstat): ``run_delay_seconds_total`` and
  ``run_delay_seconds_per_second`` read NaN; ``procs_blocked`` and ``procs_sleeping`` count the members whose
  ``status()`` is ``disk-sleep`` (state D) and ``sleeping`` (S), as the native source counts the stat files' state; psutil has no major faults of a
  process on Linux either: ``majflt_total`` and ``majflt_per_second`` read NaN.

The member's command is psutil's ``name()`` (on Linux the kernel's comm, or the longer name from its cmdline
where comm was cut at 15 bytes).
"""
from __future__ import annotations

import math
import time
from typing import Dict, List, Optional

import psutil

from ...text import text
from ..registry import SOURCES
from .rules import TrailingRate

NAN = math.nan
MAX_MEMBERS = 256  # as the native kMaxMembers
DISCOVER_NS = 100_000_000
SMAPS_NS = 100_000_000
MAX_RECORDS = 4096  # tenures kept, as MemberLog::kMaxRecords
_PER_SLOT = tuple(c.pattern.split("/", 2)[2] for c in SOURCES["process_tree"].channels if "<slot>" in c.pattern)
_TOTALS = tuple(c.pattern for c in SOURCES["process_tree"].channels if "<slot>" not in c.pattern)


class _Member:
    __slots__ = ("proc", "last_cpu", "slot", "pss", "uss", "due", "comm", "smaps_ok")

    def __init__(self, proc: psutil.Process) -> None:
        self.proc = proc
        self.last_cpu: Optional[int] = None
        self.slot = -1
        self.pss = self.uss = NAN
        self.due = self.smaps_ok = True
        try:
            self.comm = text(proc.name())  # psutil keeps bytes that are not UTF-8 as surrogates
        except psutil.Error:
            self.comm = ""


class TreeReader:
    """One process_tree reader (the thread's, or sample()'s): ``channels``, ``read(t)`` and ``describe()``."""

    def __init__(self, pid: Optional[int], slots: int, interval_s: float, cap: float) -> None:
        self.root = psutil.Process(pid)
        self.slots = slots
        self.cap = cap  # percent of one core: at most the online CPUs
        # Problems go to report(message) once the backend has opened its readers (an errors entry during the
        # opening would keep sample()'s reader from opening); until then they wait in _notes.
        self.report = None
        self._notes: List[str] = []
        self.channels: List[str] = list(_TOTALS) + [f"process_tree/{k}/{n}" for k in range(slots) for n in _PER_SLOT]
        self._period = max(1, int(math.floor(SMAPS_NS / max(interval_s * 1e9, 1.0) + 0.5)))
        self._tick = 0
        self._members: Dict[int, _Member] = {}
        self._state = ["free"] * slots  # free, busy, vacated (its NaN row not out yet)
        self._rates = [TrailingRate() for _ in range(slots)]
        self._next = 0
        self._acc = 0
        self._rate = TrailingRate()
        self._warned = False
        self._records: List[Dict[str, str]] = []
        self._dropped = 0

    def _note(self, message: str) -> None:
        if self.report is None:
            self._notes.append(message)
        else:
            self.report(message)

    def flush(self, report) -> None:
        """From now on problems go to report(message); the last one noted so far goes there now."""
        self.report = report
        if self._notes:
            report(self._notes[-1])
            self._notes.clear()

    # -- the tenure log (MemberLog) ---------------------------------------------------------------------------
    def _begin(self, pid: int, slot: int, comm: str) -> None:
        if len(self._records) >= MAX_RECORDS:
            ended = next((i for i, r in enumerate(self._records) if "end_ns" in r), None)
            if ended is None:
                self._dropped += 1
                return
            del self._records[ended]
            self._dropped += 1
        self._records.append({"source": "process_tree", "slot": str(slot), "pid": str(pid), "comm": comm,
                              "start_ns": str(time.time_ns())})

    def _end(self, pid: int) -> None:
        for r in reversed(self._records):
            if r["pid"] == str(pid) and "end_ns" not in r:
                r["end_ns"] = str(time.time_ns())
                return

    def describe(self) -> List[Dict[str, str]]:
        out = [dict(r) for r in self._records]
        if self._dropped:
            out.append({"source": "process_tree", "dropped": str(self._dropped)})
        return out

    # -- membership -------------------------------------------------------------------------------------------
    def _leave(self, pid: int) -> None:
        m = self._members.pop(pid)
        if m.slot >= 0:
            self._state[m.slot] = "vacated"
        self._end(pid)

    def _take_slot(self, pid: int, m: _Member) -> bool:
        free = [0] if pid == self.root.pid else range(1, self.slots)
        k = next((k for k in free if k < self.slots and self._state[k] == "free"), None)
        if k is None:
            return False
        m.slot = k
        self._state[k] = "busy"
        self._rates[k] = TrailingRate()
        return True

    def _discover(self, now: int) -> None:
        self._next = now + DISCOVER_NS
        try:
            kids = self.root.children(recursive=True)
        except psutil.NoSuchProcess:
            kids = []
        if len(kids) >= MAX_MEMBERS:
            self._note(f"process tree of {self.root.pid} has more than {MAX_MEMBERS} processes; "
                       f"only the first {MAX_MEMBERS} are summed")
        found = [self.root] + kids[:MAX_MEMBERS - 1]
        for pid in [p for p in self._members if p not in {q.pid for q in found}]:
            self._leave(pid)
        for p in found:
            m = self._members.get(p.pid)
            fresh = m is None or m.proc != p  # != : another process under a reused pid
            if fresh:
                if m is not None:
                    self._leave(p.pid)
                m = self._members[p.pid] = _Member(p)
            if m.slot < 0 and self._take_slot(p.pid, m):
                if not fresh:
                    self._end(p.pid)
                self._begin(p.pid, m.slot, m.comm)
            elif fresh:
                self._begin(p.pid, -1, m.comm)

    def _smaps(self, m: _Member, k: int) -> None:
        if not m.smaps_ok or (not m.due and (self._tick + k) % self._period):
            return
        m.due = False
        try:
            full = m.proc.memory_full_info()
            m.pss, m.uss = float(getattr(full, "pss", NAN)), float(getattr(full, "uss", NAN))
        except psutil.AccessDenied as e:
            m.smaps_ok, m.pss, m.uss = False, NAN, NAN
            if not self._warned:
                self._warned = True
                self._note(f"psutil: memory_full_info of pid {m.proc.pid}: {e}: pss_bytes and uss_bytes (and their "
                           "totals) read NaN")
        except psutil.NoSuchProcess:
            m.pss = m.uss = NAN

    # -- one read ---------------------------------------------------------------------------------------------
    def read(self, _t: int) -> List[float]:
        if time.monotonic_ns() >= self._next:
            self._discover(time.monotonic_ns())
        n = threads = rss = total = unslotted = blocked = sleeping = 0
        pss = uss = 0.0
        root_live = False
        slots: List[List[float]] = [[NAN] * len(_PER_SLOT) for _ in range(self.slots)]
        cpu_of: Dict[int, int] = {}
        for k, (mpid, m) in enumerate(list(self._members.items())):
            p = m.proc
            try:
                with p.oneshot():
                    status, mem, nth, ct = p.status(), p.memory_info(), p.num_threads(), p.cpu_times()
            except psutil.NoSuchProcess:  # reaped: gone until a discovery finds it again
                self._leave(mpid)
                continue
            if m.slot >= 0:
                slots[m.slot][0] = float(mpid)
            if status == psutil.STATUS_ZOMBIE or mem.vms == 0:
                continue
            blocked += status == psutil.STATUS_DISK_SLEEP
            sleeping += status == psutil.STATUS_SLEEPING
            cpu_ns = round((ct.user + ct.system) * 1e9)
            if m.last_cpu is not None and cpu_ns > m.last_cpu:
                self._acc += cpu_ns - m.last_cpu
            m.last_cpu = cpu_ns
            self._smaps(m, k)
            n += 1
            threads += nth
            rss += mem.rss
            total += cpu_ns
            pss += m.pss
            uss += m.uss
            root_live = root_live or mpid == self.root.pid
            if m.slot < 0:
                unslotted += 1
                continue
            cpu_of[m.slot] = cpu_ns
            slots[m.slot][1:] = [float(mem.rss), m.pss, m.uss, NAN, cpu_ns / 1e9, float(nth)]
        now = time.monotonic_ns()
        pct = min(self._rate.update(now, self._acc) / 1e7, self.cap)
        for k, cpu_ns in cpu_of.items():
            slots[k][4] = min(self._rates[k].update(now, cpu_ns) / 1e7, self.cap)
        self._tick += 1
        self._state = ["free" if s == "vacated" else s for s in self._state]
        if not root_live:
            return [NAN] * len(self.channels)
        return [float(n), float(rss), pct, total / 1e9, float(threads), pss, uss, float(unslotted), NAN, NAN,
                float(blocked), float(sleeping), NAN, NAN] + [
            v for row in slots for v in row]
