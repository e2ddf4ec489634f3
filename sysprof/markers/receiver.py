"""The recorder's end of the markers (``sysprof record``): a directory named in the child's environment, drained
into typed events (:mod:`sysprof.trace.events`) on the recording's drain (:class:`Markers`, a producer of a
:class:`~sysprof.pipeline.Session`).

Events: a span is a begin and an end event (``cat`` ``"sysprof.mark"``) on the marking process's pid and
thread's tid, an instant one of thread scope; times are the markers' wall-clock ns (the samples' clock; the sink
writes them by its own time rule). The first marker of a process or thread also yields its
``process_name`` / ``thread_name`` metadata (the process's comm as its ring records it, a thread's from
``/proc/<pid>/task/<tid>/comm`` at its first marker).

Balance: the receiver keeps each thread's open spans. An end whose begin was dropped is left out; an end that
closes a span with inner spans still open closes those too, at its time. A span still open when its process has
exited (seen at a drain) is closed then (args ``"closed": "process exited"``), one open at the recorder's stop is
closed at the stop time (``"closed": "at stop"``), so every span in the trace is a balanced begin/end pair and
any viewer shows it.
"""
from __future__ import annotations

import json
import os
import tempfile
import time

from ..pipeline.session import Producer
from ..text import text
from ..trace import events as ev
from .ring import ARGS_DROPPED, BEGIN, END, ENV, INSTANT, NAME_TRUNCATED, NOSPACE, RingReader

__all__ = ["MarkerReceiver", "Markers", "ENV"]

CATEGORY = "sysprof.mark"
#: drain(until_ns) holds a marker back at most this long (ns) waiting for samples as new as it
HOLD_NS = 1_000_000_000
#: a file in the markers' directory that is not a ring this long after it was first seen is ignored (reported)
NOT_A_RING_S = 10.0
#: problems() names at most this many processes or files, then says how many more
MAX_CLAUSES = 20


#: a tmpfs holds the rings only with this much room free, and at least half of it free: the rings (1 MiB per
#: marking process) never compete with the job for a small /dev/shm (a container's 64 MB, which DataLoader
#: workers fill with tensors); elsewhere they go to the temporary directory, on disk
SHM_MIN_FREE = 1 << 30


def _shm_dir() -> str:
    """A roomy tmpfs for the rings when one is writable (no disk I/O, no page-in on the marking threads), else
    the temporary directory."""
    for d in ("/dev/shm", os.environ.get("XDG_RUNTIME_DIR")):
        if d and os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK) and _roomy(d):
            return d
    return tempfile.gettempdir()


def _roomy(d: str) -> bool:
    try:
        st = os.statvfs(d)
    except OSError:
        return False
    free = st.f_bavail * st.f_frsize
    return free >= SHM_MIN_FREE and 2 * free >= st.f_blocks * st.f_frsize


def _comm(pid, tid=None) -> str:
    path = f"/proc/{pid}/comm" if tid is None else f"/proc/{pid}/task/{tid}/comm"
    try:
        with open(path, "rb") as f:
            return text(f.read(64)).strip()
    except OSError:
        return ""


def _who(ring) -> str:
    return f"pid {ring.pid} ({ring.comm})" if ring.comm else f"pid {ring.pid}"


def _lost(ring) -> str:
    return f"{_who(ring)}: {ring.damaged}; its markers from then on were lost"


def _pid_of(name: str) -> str:
    """``pid N`` from a producer's file name ``<pid>-<created>.<suffix>``."""
    pid = name.split("-", 1)[0]
    return f"pid {pid}" if pid.isdigit() else name


class MarkerReceiver:
    """Creates the markers' directory; :attr:`env` is the ``(name, value)`` to put in the child's environment.

    ``named_pids`` are pids whose ``process_name`` the trace already has."""

    def __init__(self, named_pids=(), directory=None):
        self.path = tempfile.mkdtemp(prefix="sysprof-markers-", dir=directory or _shm_dir())
        self.env = (ENV, self.path)
        self._rings = {}  # (path, inode) -> RingReader
        self._stacks = {}  # (pid, tid) -> [(name bytes, name str)]
        self._names = {}  # bytes -> str
        self._named_pids = set(named_pids)
        self._named_tids = set()
        self._pending = []  # events held back by drain(until_ns)
        self._last_ns = {}  # (pid, tid) -> its latest stamp: a thread's events never go back in time
        self.received = 0
        self._retired_dropped = 0
        self._problems = []  # clauses of problems(), for rings no longer open (at most MAX_CLAUSES)
        self._more = 0  # clauses past MAX_CLAUSES
        self._ignored = set()  # (path, inode) of files not read: .nospace, never a ring
        self._seen = {}  # (path, inode) -> when first seen not yet a ring
        self.closed = False

    # ---- the loop ----
    def drain(self, until_ns=None) -> list:
        """The events (:class:`~sysprof.trace.events.Event`) of the markers published since the last call: metadata
        first, then in time order.

        With ``until_ns`` (the newest sample the recorder writes with them), markers stamped later are held back
        for a later call, so the trace stays in time order across drains, unless held over HOLD_NS."""
        if self.closed:
            return []
        meta, timed = [], []
        self._discover()
        for key, ring in list(self._rings.items()):
            try:  # one ring, however damaged, never stops the others
                self._read(ring, meta, timed)
                if ring.producer_gone():
                    self._read(ring, meta, timed)
                    self._close_open(ring.pid, time.time_ns(), "process exited", timed)
                    self._retire(key, ring)
            except Exception as e:  # noqa: BLE001
                ring.damaged = ring.damaged or f"its ring could not be read ({type(e).__name__}: {e})"
                self._retire(key, ring)
        pending = self._pending
        pending += timed
        pending.sort(key=_ns_key)
        if until_ns is None:
            self._pending = []
            return meta + pending
        cut = max(until_ns, time.time_ns() - HOLD_NS)
        k = 0
        while k < len(pending) and pending[k].t_ns <= cut:
            k += 1
        self._pending = pending[k:]
        return meta + pending[:k]

    def _discover(self) -> None:
        """Opens the rings that appeared since the last drain. A ring is known by its path and inode, so one
        replaced under its name is read to its end while its producer lives, and the new file is read as
        another ring. A file that never becomes a ring (within NOT_A_RING_S) and a producer's ``.nospace``
        file are reported in :meth:`problems`."""
        now = time.monotonic()
        try:
            entries = [(e.name, e.path, e.inode()) for e in os.scandir(self.path)]
        except OSError:
            entries = []
        for name, path, ino in entries:
            key = (path, ino)
            if key in self._rings or key in self._ignored:
                continue
            if name.endswith(NOSPACE):
                self._ignored.add(key)
                self._note(f"{_pid_of(name)}: no room for a marker ring in {self.path}; its markers "
                           "were dropped (count unknown)")
                continue
            if not name.endswith(".ring"):
                continue
            try:
                self._rings[key] = RingReader(path)
            except (OSError, ValueError):  # not complete yet (or not ours): looked at again next time
                first = self._seen.setdefault(key, now)
                if now - first > NOT_A_RING_S:
                    self._ignored.add(key)
                    self._seen.pop(key, None)
                    self._note(f"{name}: not a marker ring after {NOT_A_RING_S:g} s; ignored")
                continue
            self._seen.pop(key, None)
            ring = self._rings[key]
            host = ring.holder()
            if host is not None and host != ring.pid:  # a producer in another pid namespace: its pid here
                ring.pid, ring.foreign_tids = host, True
            if ring.stub:
                self._note(f"{_who(ring)}: no room for a marker ring in {self.path}; every marker of "
                           "it was dropped (counted in markers_dropped)")

    def _retire(self, key, ring) -> None:
        if ring.damaged is not None:
            self._note(_lost(ring))
        self._retired_dropped += ring.dropped
        ring.close(unlink=True)
        del self._rings[key]

    def problems(self) -> str:
        """What went wrong with the markers, one clause per process ("" when nothing did; the first
        MAX_CLAUSES, then how many more): a ring that could not be made (no room), one damaged while read
        (truncated, replaced, impossible records), a file that never became a ring. The recorder writes it in the
        stop event's ``errors["markers"]``."""
        found = list(self._problems)
        found += [_lost(r) for r in self._rings.values() if r.damaged is not None]
        more = self._more + max(0, len(found) - MAX_CLAUSES)
        return "; ".join(found[:MAX_CLAUSES] + ([f"{more} more"] if more else []))

    def _note(self, clause: str) -> None:
        if len(self._problems) < MAX_CLAUSES:
            self._problems.append(clause)
        else:
            self._more += 1

    def finish(self, t_stop_ns: int) -> list:
        """The last events: what is left in the rings, then an end at ``t_stop_ns`` for every span still open.
        Removes the directory and its rings."""
        if self.closed:
            return []
        events = self.drain()
        self._close_open(None, t_stop_ns, "at stop", events)
        self.close()
        return events

    def named(self, pid) -> None:
        """The trace already names ``pid`` (its ``process_name``): not written again."""
        self._named_pids.add(pid)

    @property
    def dropped(self) -> int:
        """Markers the marking processes dropped (full ring, a recorder not draining, lock contention)."""
        return self._retired_dropped + sum(r.dropped for r in self._rings.values())

    def stats(self) -> dict:
        return {"markers": self.received, "markers_dropped": self.dropped}

    def close(self) -> None:
        """Unmaps and removes the rings and the directory (idempotent)."""
        if self.closed:
            return
        for key, ring in list(self._rings.items()):
            self._retire(key, ring)
        try:
            for e in os.scandir(self.path):
                if e.name.endswith((".ring", NOSPACE)):
                    os.unlink(e.path)
            os.rmdir(self.path)
        except OSError:
            pass
        self.closed = True

    # ---- records -> events ----
    def _name(self, raw: bytes) -> str:
        s = self._names.get(raw)
        if s is None:
            s = text(raw)
            if len(self._names) < 65536:
                self._names[raw] = s
        return s

    def _read(self, ring, meta, timed) -> None:
        pid = ring.pid
        records = ring.read()
        if not records:
            return
        self.received += len(records)
        if pid not in self._named_pids:
            self._named_pids.add(pid)
            comm = ring.comm or _comm(pid)
            meta += ev.process_name(pid, f"{comm} (pid {pid})" if comm else f"pid {pid}")
        for ts_ns, tid, kind, flags, raw, args_raw in records:
            key = (pid, tid)
            if key not in self._named_tids:
                self._named_tids.add(key)
                comm = "" if ring.foreign_tids else _comm(pid, tid)  # another namespace's tid
                if comm:
                    meta.append(ev.thread_name(pid, tid, comm))
            name = self._name(raw)
            last = self._last_ns.get(key)
            if last is not None and ts_ns < last:
                ts_ns = last  # the wall clock stepped back: keep the thread's begin/end order
            self._last_ns[key] = ts_ns
            if kind == BEGIN:
                self._stacks.setdefault(key, []).append((raw, name))
                timed.append(ev.begin(name, ts_ns, pid, tid, {"name_truncated": True} if flags & NAME_TRUNCATED
                                      else None, CATEGORY))
            elif kind == END:
                stack = self._stacks.get(key)
                if not stack or all(r != raw for r, _ in stack):
                    continue  # its begin was dropped
                while stack:
                    r, n = stack.pop()
                    timed.append(ev.end(n, ts_ns, pid, tid, None, CATEGORY))
                    if r == raw:
                        break
            elif kind == INSTANT:
                args = {}
                if args_raw:
                    try:
                        loaded = json.loads(text(args_raw))
                        args = loaded if isinstance(loaded, dict) else {"args": loaded}
                    except (ValueError, RecursionError):
                        args = {"args_dropped": True}
                if flags & NAME_TRUNCATED:
                    args["name_truncated"] = True
                if flags & ARGS_DROPPED:
                    args["args_dropped"] = True
                timed.append(ev.instant(name, ts_ns, pid, args or None, tid, "t", CATEGORY))

    def _close_open(self, pid, t_ns, why, out) -> None:
        for key in [k for k in self._stacks if pid is None or k[0] == pid]:
            stack = self._stacks.pop(key)
            ns = max(t_ns, self._last_ns.get(key, t_ns))
            while stack:
                _, n = stack.pop()
                out.append(ev.end(n, ns, key[0], key[1], {"closed": why}, CATEGORY))


def _ns_key(event):
    return event.t_ns


class Markers(Producer):
    """The markers of a recording's command as a producer of its session: each drain gives the markers up to the
    drain's newest row (:meth:`MarkerReceiver.drain`), the stop every one left, open spans closed at the stop
    (:meth:`MarkerReceiver.finish`, which removes the directory). The stop event gets the markers' counts in
    ``stats`` (``markers``, ``markers_dropped``) and their problems in ``errors["markers"]``."""

    name = "markers"

    def __init__(self, receiver: MarkerReceiver) -> None:
        self.receiver = receiver

    def take(self, batch, stop_ns):
        if stop_ns is not None:
            return self.receiver.finish(stop_ns)
        return self.receiver.drain(int(batch.timestamps_ns[-1]) if len(batch) else 0)

    def stop_args(self) -> dict:
        problems = self.receiver.problems()
        return {"stats": self.receiver.stats(), **({"errors": {"markers": problems}} if problems else {})}
