"""The flight recorder: the last seconds of samples and markers at full rate in bounded memory, and a standalone
trace of the window around an anomaly, written when it happens.

Any drain loop feeds it through a narrow interface (``sysprof record --flight``, the trainer callbacks'
``flight=``)::

    rec = FlightRecorder(folder, channels, interval_s, head=..., float_ts=..., pid=...)
    rec.feed(batch)           # sampler rows (Batch: timestamps_ns, values): kept in a preallocated ring
    rec.feed_events(events)   # trace events ("ts" in the trace's µs): markers' B/E/i, phases' X, metadata M
    rec.trigger(kind, reason) # from anywhere, any thread: SIGUSR1, an exception, sysprof.dump()
    rec.close()               # pending dumps written with what arrived, the writer thread joined

**Memory.** The rows live in a ring preallocated at start: ``rows x channels`` float64 and the rows' int64 times,
``rows`` = (window + :data:`SLACK_S`) / interval, so the memory per second of window is ``(8 + 8 x channels) /
interval`` bytes (:attr:`FlightRecorder.bytes_per_second`). Past ``memory_bytes`` the ring is smaller and the
window shorter (:attr:`FlightRecorder.cut` says so). Events are kept while their time is in the ring, at most
:data:`MAX_EVENTS` (the oldest go first), metadata events (process and thread names) at most :data:`MAX_META`.
A dump copies its window (rows and events) on the drain thread and writes it on a writer thread of its own; at
most :data:`MAX_QUEUED` copies wait, so memory stays within the ring plus two windows.

**Triggers** (:data:`TRIGGERS`): ``slow_step`` (a span whose name matches ``step_patterns`` took more than
``step_factor`` times the median of the last :data:`STEP_HISTORY` spans of that name, once ``min_steps`` of them
were seen), ``xid`` (a GPU XID: :class:`~sysprof.trace.gpu_events.XidInstants`), ``clocks_event`` (a bit of
``gpu/<i>/clocks_event_reasons`` newly set, other than GPU idle and the applications clocks setting; the first
reading is the baseline), ``exception`` (a training-loop exception reaching a callback), ``signal`` (SIGUSR1 to
``sysprof record``), ``dump`` (:func:`dump`, in this process or from a program run under ``sysprof record``: a
:data:`DUMP_EVENT` marker instant).

**A dump** covers ``[at - before, at + after]`` (``before`` = ``before_share`` of the window, 2/3 by default; a
slow step's window starts at the step's start when that is earlier) and is written once rows :data:`LAG_S` past its
end have arrived (or at :meth:`close`, with what arrived). It is a ``sysprof record`` trace (its head, the rows as
counter tracks with their ``sysprof samples`` times, the events, the stop event), named
``flight-<UTC time of the trigger>-<trigger>[suffix].json`` in ``folder`` (created exclusively, never over a
file); its start and stop events' ``flight`` args and a :data:`FLIGHT_EVENT` instant at the trigger name the
trigger and the reason. A trigger inside a pending dump's window joins it (``flight.also``). Dumps are at least
``min_gap_s`` apart (by trigger time), at most ``max_dumps`` in all, at most ``max_bytes`` of JSON together (a dump
that would pass it is cut there, whole); none is written under the free-space floor (``min_free``, as ``record
--min-free``). Triggers turned away are counted (:attr:`FlightRecorder.suppressed`). Each dump written (or
skipped, or failed) gives ``notify`` one line.
"""
from __future__ import annotations

import bisect
import collections
import fnmatch
import heapq
import math
import os
import queue
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

__all__ = ["FlightOptions", "FlightRecorder", "dump", "TRIGGERS", "DUMP_EVENT", "FLIGHT_EVENT",
           "DEFAULT_STEP_PATTERNS"]

#: what can trigger a dump (the ``trigger`` of its name and args)
TRIGGERS = ("slow_step", "xid", "clocks_event", "exception", "signal", "dump")
#: the marker instant :func:`dump` writes from a program run under ``sysprof record``
DUMP_EVENT = "sysprof dump"
#: the instant at the trigger's time in a dump
FLIGHT_EVENT = "sysprof flight"
#: the spans timed as steps by default: ``sysprof.mark("step...")``, Composer's batches, Lightning's training
#: batches (the Hugging Face callback's ``step`` matches ``step*``)
DEFAULT_STEP_PATTERNS = ("step*", "event/batch", "train_batch")
#: the running median covers this many of the latest steps of a name
STEP_HISTORY = 100
#: seconds the ring holds beyond the window: a dump is taken LAG_S after its end has arrived, in drains that come
#: every 0.2 to 0.5 s (markers may be held back 1 s to stay in time order)
LAG_S = 1.5
SLACK_S = 3.0
#: events kept at most (the oldest dropped first), metadata events at most, open spans per thread at most
MAX_EVENTS = 50_000
MAX_META = 10_000
MAX_DEPTH = 64
#: dump copies waiting for the writer thread at most (a dump due meanwhile waits, its window still in the ring)
MAX_QUEUED = 2
#: rows rendered per chunk while writing a dump
CHUNK_ROWS = 2000
#: clock event reason bits that are no anomaly: GPU idle, the applications clocks setting
QUIET_REASONS = 0x1 | 0x2


_ACTIVE: "weakref.WeakSet" = weakref.WeakSet()  # the running flight recorders of this process (sysprof.dump() reaches them)


class FlightOptionError(ValueError):
    """A :class:`FlightOptions` value out of its range; ``field`` names it."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name


@dataclass(frozen=True)
class FlightOptions:
    """What a flight recorder keeps and when it dumps (module docstring). ``memory_bytes``: the ring's cap;
    ``max_bytes``: the dumps' JSON together; ``min_free``: the free-space floor as ``record --min-free``'s
    ``(bytes, fraction[, cap])`` (None: record's default)."""

    window_s: float = 30.0
    before_share: float = 2 / 3
    min_gap_s: float = 60.0
    max_dumps: int = 20
    max_bytes: int = 1 << 30
    memory_bytes: int = 256 << 20
    step_patterns: Tuple[str, ...] = DEFAULT_STEP_PATTERNS
    step_factor: float = 3.0
    min_steps: int = 20
    min_free: Optional[tuple] = None

    def __post_init__(self):
        checks = (("window_s", self.window_s > 0 and math.isfinite(self.window_s), "must be a time > 0"),
                  ("before_share", 0 <= self.before_share <= 1, "must be between 0 and 1"),
                  ("min_gap_s", self.min_gap_s >= 0, "must be a time >= 0"),
                  ("max_dumps", isinstance(self.max_dumps, int) and self.max_dumps >= 1, "must be at least 1"),
                  ("max_bytes", self.max_bytes > 0, "must be a size > 0"),
                  ("memory_bytes", self.memory_bytes > 0, "must be a size > 0"),
                  ("step_factor", self.step_factor > 1, "must be more than 1"),
                  ("min_steps", isinstance(self.min_steps, int) and self.min_steps >= 1, "must be at least 1"))
        for name, ok, rule in checks:
            if not ok:
                raise FlightOptionError(name, f"flight {name} {rule}, got {getattr(self, name)!r}")
        object.__setattr__(self, "step_patterns", tuple(self.step_patterns))

    @classmethod
    def of(cls, value) -> "FlightOptions":
        """The options of a callback's ``flight=``: seconds (``30``), a time (``"30s"``), a dict of options, or
        FlightOptions. Raises ValueError for anything else."""
        if isinstance(value, FlightOptions):
            return value
        if isinstance(value, dict):
            return cls(**value)
        if isinstance(value, str):
            from .cli.common import parse_time

            try:
                return cls(window_s=parse_time(value))
            except Exception as e:  # noqa: BLE001 - argparse's error type: one ValueError for the caller
                raise ValueError(f"flight: {e}") from None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return cls(window_s=float(value))
        raise ValueError(f"flight must be seconds, a time such as '30s', or a dict of options, got {value!r}")


def dump(reason: str = "") -> bool:
    """Ask for a flight dump of the window around now, naming ``reason``: every flight recorder running in this
    process gets it (a callback's ``flight=``), and, in a program run under ``sysprof record --flight``, the
    recorder (a :data:`DUMP_EVENT` marker instant). Never raises; whether anything could hear it."""
    heard = False
    try:
        reason = str(reason)
        for rec in list(_ACTIVE):
            rec.trigger("dump", reason)
            heard = True
        from . import markers

        if markers.enabled():
            markers.mark_instant(DUMP_EVENT, reason=reason)
            heard = True
    except Exception:  # noqa: BLE001 - asking for a dump never disturbs the program
        pass
    return heard


class _Ring:
    """``rows`` sampler rows, newest overwriting oldest: int64 times and float64 values, preallocated."""

    def __init__(self, rows: int, width: int) -> None:
        import numpy as np

        self.size = rows
        self.times = np.zeros(rows, dtype=np.int64)
        self.values = np.full((rows, width), np.nan)
        self.end = 0  # the next row's slot
        self.count = 0

    @property
    def nbytes(self) -> int:
        return self.times.nbytes + self.values.nbytes

    def push(self, times, values) -> None:
        n = len(times)
        if n == 0:
            return
        if n > self.size:
            times, values, n = times[-self.size:], values[-self.size:], self.size
        first = min(n, self.size - self.end)
        self.times[self.end:self.end + first] = times[:first]
        self.values[self.end:self.end + first] = values[:first]
        if n > first:
            self.times[:n - first] = times[first:]
            self.values[:n - first] = values[first:]
        self.end = (self.end + n) % self.size
        self.count = min(self.size, self.count + n)

    def _order(self):
        import numpy as np

        return (self.end - self.count + np.arange(self.count)) % self.size

    @property
    def newest_ns(self) -> Optional[int]:
        return int(self.times[(self.end - 1) % self.size]) if self.count else None

    @property
    def oldest_ns(self) -> Optional[int]:
        return int(self.times[(self.end - self.count) % self.size]) if self.count else None

    def window(self, lo_ns: int, hi_ns: int):
        """Copies of the rows with ``lo_ns <= time <= hi_ns``, in order: ``(times, values)``."""
        idx = self._order()
        t = self.times[idx]
        keep = idx[(t >= lo_ns) & (t <= hi_ns)]
        return self.times[keep], self.values[keep]


class _Steps:
    """The slow-step rule: per span name matching the patterns, the latest STEP_HISTORY durations, in arrival order
    and sorted (the median at no cost)."""

    def __init__(self, patterns: Sequence[str], factor: float, min_steps: int) -> None:
        self.patterns = tuple(patterns)
        self.factor = factor
        self.min_steps = min_steps
        self.history: Dict[str, Tuple[collections.deque, list]] = {}
        self._match: Dict[str, bool] = {}

    def is_step(self, name: str) -> bool:
        hit = self._match.get(name)
        if hit is None:
            hit = any(fnmatch.fnmatchcase(name, p) for p in self.patterns)
            if len(self._match) < 4096:
                self._match[name] = hit
        return hit

    def add(self, name: str, start_ns: int, end_ns: int) -> Optional[str]:
        """The reason when this step is slow (None otherwise); the step joins its name's history."""
        if not self.is_step(name) or end_ns < start_ns:
            return None
        entry = self.history.get(name)
        if entry is None:
            if len(self.history) >= 256:
                return None
            entry = self.history[name] = (collections.deque(), [])
        order, ranked = entry
        dur = (end_ns - start_ns) / 1e9
        why = None
        n = len(ranked)
        if n >= self.min_steps:
            median = ranked[n // 2] if n % 2 else (ranked[n // 2 - 1] + ranked[n // 2]) / 2
            if dur > self.factor * median:
                ratio = dur / median if median > 0 else math.inf
                why = (f"step {name!r} took {dur:.3g} s, {ratio:.3g}x the median {median:.3g} s of the "
                       f"previous {n}")
        if n >= STEP_HISTORY:
            del ranked[bisect.bisect_left(ranked, order.popleft())]
        order.append(dur)
        bisect.insort(ranked, dur)
        return why


class _Reasons:
    """The clocks-event rule: each ``gpu/<i>/clocks_event_reasons`` column's newly set bits (not QUIET_REASONS),
    at the time of the reading that found them; the first finite reading is the baseline."""

    def __init__(self, channels: Sequence[str]) -> None:
        from .trace.schema import READING_TIME_KEY

        index = {c: i for i, c in enumerate(channels)}
        self.columns = []  # (gpu name, reasons column, reading time column or None)
        for c, i in index.items():
            parts = c.split("/")
            if len(parts) == 3 and parts[0] == "gpu" and parts[2] == "clocks_event_reasons":
                self.columns.append((f"gpu/{parts[1]}", i, index.get(f"gpu/{parts[1]}/{READING_TIME_KEY}")))
        self.prev: List[Optional[int]] = [None] * len(self.columns)

    def found(self, batch) -> List[Tuple[int, str]]:
        if not self.columns or len(batch) == 0:
            return []
        import numpy as np

        from .report.gpu_reasons import decode_reasons
        from .trace.schema import reading_times_ns

        out = []
        for k, (gpu, col, clock) in enumerate(self.columns):
            v = np.asarray(batch.values[:, col], dtype=float)
            ok = np.flatnonzero(np.isfinite(v) & (v >= 0))
            if not len(ok):
                continue
            masks = v[ok].astype(np.int64)
            prev = np.empty_like(masks)
            prev[1:] = masks[:-1]
            prev[0] = masks[0] if self.prev[k] is None else self.prev[k]
            new = masks & ~prev & ~QUIET_REASONS
            at = batch.timestamps_ns if clock is None else reading_times_ns(batch.timestamps_ns, batch.values[:, clock])
            for r in np.flatnonzero(new).tolist():
                names = ", ".join(decode_reasons(float(new[r])))
                out.append((int(at[ok[r]]), f"{gpu}: clocks event reason {names} turned on"))
            self.prev[k] = int(masks[-1])
        out.sort()
        return out


@dataclass
class _Pending:
    kind: str
    reason: str
    at_ns: int
    lo_ns: int
    hi_ns: int
    index: int
    also: list = field(default_factory=list)


def _utc_name(t_ns: int) -> str:
    sec, ns = divmod(int(t_ns), 10**9)
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(sec)) + f".{ns // 10**6:03d}Z"


def _event_ns(ev: dict) -> Optional[int]:
    ts = ev.get("ts")
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
        return None
    return int(round(ts * 1000))


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class FlightRecorder:
    """Keeps the last window of rows and events; writes a dump around each trigger (module docstring).

    Args:
        folder: where the dumps go (made when the first is written).
        channels: the sampler's channel names (the rows' columns).
        interval_s: the sampling interval (sizes the ring).
        options: :class:`FlightOptions`.
        head: the events that open every dump, as the recorder writes its trace's (the start event, its metadata,
            the units): the start event gets the window's time and the ``flight`` args. None: a minimal head.
        float_ts: event times in float µs (intervals under 1 ms), else whole µs: as the events fed.
        pid: the recorder's pid (the tracks' and the instants'); process_pid: the followed process's (its tracks).
        stop_args: called at each dump (on the feeding thread): args for the dump's stop event (the recording's
            ``errors``, its ``stats``, which become ``recording_stats``).
        notify: gets one line per dump (from the writer thread); default: stderr.
        suffix: added to each dump's name before ``.json`` (``-rank0``).
    """

    def __init__(self, folder, channels: Sequence[str], interval_s: float, options: Optional[FlightOptions] = None,
                 *, head: Optional[list] = None, float_ts: bool = False, pid: Optional[int] = None,
                 process_pid: Optional[int] = None, stop_args: Optional[Callable[[], dict]] = None,
                 notify: Optional[Callable[[str], None]] = None, suffix: str = "") -> None:
        from .trace.gpu_events import XidInstants

        self.options = opts = options or FlightOptions()
        self.folder = os.fspath(folder)
        self.channels = tuple(channels)
        self.interval_s = float(interval_s)
        self.float_ts = bool(float_ts)
        self.pid = os.getpid() if pid is None else pid
        self.process_pid = process_pid
        self.head = list(head) if head is not None else None
        self.stop_args = stop_args
        self.notify = notify or _stderr
        self.suffix = suffix
        #: bytes of the ring per second of window
        self.bytes_per_second = (8 + 8 * len(self.channels)) / self.interval_s
        rows = math.ceil((opts.window_s + SLACK_S) / self.interval_s)
        self.cut = None  # why the window is shorter than asked
        most = max(16, opts.memory_bytes // (8 + 8 * len(self.channels)))
        if rows > most:
            rows = most
            span = rows * self.interval_s
            self.window_s = max(span - SLACK_S, span / 2)
            self.cut = (f"the window is {self.window_s:.3g} s, not {opts.window_s:g} s: {len(self.channels)} channels "
                        f"at {self.interval_s * 1e3:g} ms take {self.bytes_per_second / 2**20:.3g} MiB a second, "
                        f"over the memory cap of {opts.memory_bytes / 2**20:.4g} MiB")
        else:
            self.window_s = opts.window_s
        self.before_ns = int(self.window_s * opts.before_share * 1e9)
        self.after_ns = int(self.window_s * 1e9) - self.before_ns
        self._ring = _Ring(rows, len(self.channels))
        self._events: collections.deque = collections.deque()  # (t_ns, event), about in time order
        self._meta: Dict[tuple, dict] = {}
        self._open: Dict[tuple, list] = {}  # (pid, tid) -> [(name, t_ns)] of the B events not yet ended
        self._steps = _Steps(opts.step_patterns, opts.step_factor, opts.min_steps)
        self._xids = XidInstants(self.channels, self.ts, self.pid)
        self._reasons = _Reasons(self.channels)
        self._requests: collections.deque = collections.deque()  # (kind, reason, at_ns) from any thread
        self._pending: List[_Pending] = []
        self._last_at: Optional[int] = None
        self._lock = threading.Lock()
        self._jobs: "queue.Queue" = queue.Queue()
        self._queued = 0
        self._worker: Optional[threading.Thread] = None
        #: a SIGUSR1's time (ns), set by the caller's handler (a flag only): the next feed triggers ``signal``
        self.signalled_ns: Optional[int] = None
        self.started = 0  # dumps begun (the count bound)
        self.written: List[dict] = []  # per dump written: path, trigger, reason, bytes, rows
        self.bytes_written = 0
        self.suppressed: Dict[str, int] = {}  # why -> triggers turned away
        self.events_dropped = 0
        self.failures: List[str] = []
        self.closed = False
        _ACTIVE.add(self)

    # ---- the feeding thread ----
    def ts(self, t_ns: int):
        return t_ns / 1000.0 if self.float_ts else t_ns // 1000

    @property
    def memory_bytes(self) -> int:
        """The ring's bytes (preallocated)."""
        return self._ring.nbytes

    def feed(self, batch) -> None:
        """Keep ``batch``'s rows; look for XIDs and clock event reasons in them; take the dumps now due."""
        if self.closed:
            return
        n = len(batch)
        if n:
            self._ring.push(batch.timestamps_ns, batch.values)
            for t_ns, args in self._xids.found(batch):
                from .trace.gpu_events import XID_EVENT, instant_event

                self._keep(t_ns, instant_event(XID_EVENT, self.ts(t_ns), self.pid, args))
                self._admit("xid", f"gpu/{args['gpu']}: XID {args['xid']} ({args['meaning']})", t_ns)
            for t_ns, why in self._reasons.found(batch):
                self._admit("clocks_event", why, t_ns)
        self._take_requests()
        self._prune()
        self._due()

    def feed_events(self, events) -> None:
        """Keep trace events (dicts, ``ts`` in µs as the trace writes them); time the steps among their spans (B/E
        pairs per thread, X events) and take :data:`DUMP_EVENT` instants as ``dump`` triggers."""
        if self.closed:
            return
        for ev in events:
            if not isinstance(ev, dict):
                continue
            ph = ev.get("ph")
            if ph == "M":
                key = (ev.get("name"), ev.get("pid"), ev.get("tid"))
                if key in self._meta or len(self._meta) < MAX_META:
                    self._meta[key] = ev
                continue
            t_ns = _event_ns(ev)
            if t_ns is None:
                continue
            self._keep(t_ns, ev)
            name = ev.get("name")
            if ph == "B":
                stack = self._open.setdefault((ev.get("pid"), ev.get("tid")), [])
                if len(stack) < MAX_DEPTH and len(self._open) < 4096:
                    stack.append((name, t_ns))
            elif ph == "E":
                stack = self._open.get((ev.get("pid"), ev.get("tid")))
                if stack:
                    begun, start = stack.pop()
                    self._step(begun, start, t_ns)
            elif ph == "X":
                dur = ev.get("dur")
                if isinstance(dur, (int, float)) and dur >= 0:
                    self._step(name, t_ns, t_ns + int(round(dur * 1000)))
            elif ph in ("i", "I") and name == DUMP_EVENT:
                args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
                self._admit("dump", str(args.get("reason", "") or "sysprof.dump()"), t_ns)
        self._prune()

    def trigger(self, kind: str, reason: str = "", at_ns: Optional[int] = None) -> None:
        """Ask for a dump around ``at_ns`` (default now); any thread, never blocks (taken at the next feed).
        Raises ValueError for a ``kind`` not in :data:`TRIGGERS`."""
        if kind not in TRIGGERS:
            raise ValueError(f"unknown flight trigger {kind!r} (one of {', '.join(TRIGGERS)})")
        self._requests.append((kind, str(reason), time.time_ns() if at_ns is None else int(at_ns)))

    def _take_requests(self) -> None:
        at = self.signalled_ns
        if at is not None:
            self.signalled_ns = None
            self._admit("signal", f"SIGUSR1 to pid {os.getpid()}", at)
        while self._requests:
            self._admit(*self._requests.popleft())

    def _step(self, name, start_ns: int, end_ns: int) -> None:
        if not isinstance(name, str):
            return
        why = self._steps.add(name, start_ns, end_ns)
        if why is not None:
            self._admit("slow_step", why, end_ns, start_ns)

    def _keep(self, t_ns: int, ev: dict) -> None:
        self._events.append((t_ns, ev))
        if len(self._events) > MAX_EVENTS:
            self._events.popleft()
            self.events_dropped += 1

    def _prune(self) -> None:
        """Events older than the ring's oldest row go, but those a pending dump still needs."""
        oldest = self._ring.oldest_ns
        if oldest is None or self._ring.count < self._ring.size:
            return
        keep_from = min([oldest] + [p.lo_ns for p in self._pending])
        ev = self._events
        while ev and ev[0][0] < keep_from:
            ev.popleft()

    def _turn_away(self, why: str) -> None:
        self.suppressed[why] = self.suppressed.get(why, 0) + 1

    def _admit(self, kind: str, reason: str, at_ns: int, start_ns: Optional[int] = None) -> None:
        """The rate limit: a trigger inside a pending dump's window joins it; else it starts a dump unless the
        count, the bytes or the gap since the last dump's trigger say no (counted in :attr:`suppressed`)."""
        for p in self._pending:
            if p.lo_ns <= at_ns <= p.hi_ns:
                if len(p.also) < 20:
                    p.also.append({"trigger": kind, "reason": reason, "at_ns": at_ns})
                return
        if self.started >= self.options.max_dumps:
            return self._turn_away("max_dumps")
        if self.bytes_written >= self.options.max_bytes:
            return self._turn_away("max_bytes")
        if self._last_at is not None and abs(at_ns - self._last_at) < self.options.min_gap_s * 1e9:
            return self._turn_away("min_gap")
        self._last_at = at_ns
        self.started += 1
        lo = at_ns - self.before_ns
        if start_ns is not None:
            lo = min(lo, start_ns)
        self._pending.append(_Pending(kind, reason, at_ns, lo, at_ns + self.after_ns, self.started))

    def _due(self, final: bool = False) -> None:
        newest = self._ring.newest_ns
        for p in list(self._pending):
            if not final and (newest is None or newest < p.hi_ns + LAG_S * 1e9):
                continue
            with self._lock:
                if self._queued >= MAX_QUEUED and not final:
                    continue  # the writer is busy: this one waits, its window still in the ring
                self._queued += 1
            self._pending.remove(p)
            self._submit(self._snapshot(p, final))

    def _snapshot(self, p: _Pending, final: bool) -> dict:
        """Copies of what dump ``p`` holds, taken on the feeding thread."""
        hi = p.hi_ns
        if final:  # the recording ends: up to its newest row or event (the trigger's time at least)
            newest = [t for t in (self._ring.newest_ns, self._events[-1][0] if self._events else None) if t is not None]
            hi = min(hi, max(newest + [p.at_ns]))
        times, values = self._ring.window(p.lo_ns, hi)
        events = sorted(((t, ev) for t, ev in self._events if p.lo_ns <= t <= hi), key=lambda e: e[0])
        held_from = self._ring.oldest_ns
        stop = {}
        if self.stop_args is not None:
            try:
                stop = dict(self.stop_args())
            except Exception as e:  # noqa: BLE001 - the dump goes out without them
                stop = {"errors": {"flight": f"stop args: {type(e).__name__}: {e}"}}
        return {"pending": p, "times": times, "values": values, "events": events, "meta": list(self._meta.values()),
                "hi_ns": hi, "stop": stop, "suppressed": dict(self.suppressed),
                "short": (f"the ring held rows from {(held_from - p.lo_ns) / 1e9:.3g} s after the window's start"
                          if held_from is not None and held_from > p.lo_ns and self._ring.count == self._ring.size
                          else None),
                "ended_early": final and hi < p.hi_ns}

    # ---- the writer thread ----
    def _submit(self, job: dict) -> None:
        if self._worker is None:
            self._worker = threading.Thread(target=self._work, name="sysprof-flight", daemon=True)
            self._worker.start()
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                self._write(job)
            except Exception as e:  # noqa: BLE001 - a dump that fails never stops the recording
                p = job["pending"]
                self.failures.append(f"{p.kind}: {type(e).__name__}: {e}")
                self._say(f"sysprof: flight dump ({p.kind}: {p.reason}) failed: {type(e).__name__}: {e}")
            finally:
                del job
                with self._lock:
                    self._queued -= 1

    def _say(self, line: str) -> None:
        try:
            self.notify(line)
        except Exception:  # noqa: BLE001
            pass

    def _space_low(self, folder: str):
        """(available, floor) bytes where ``folder`` (made here) is under the free-space floor, else None."""
        from .cli.output import DEFAULT_MIN_FREE, _SpaceGuard

        os.makedirs(folder, exist_ok=True)
        floor = self.options.min_free if self.options.min_free is not None else DEFAULT_MIN_FREE
        return _SpaceGuard(os.path.join(folder, "x"), floor, True).low()

    def _open_dump(self, p: _Pending):
        from .trace.chrome import ChromeTraceWriter

        stem = os.path.join(self.folder, f"flight-{_utc_name(p.at_ns)}-{p.kind}{self.suffix}")
        for n in range(1000):
            path = f"{stem}.json" if n == 0 else f"{stem}-{n}.json"
            try:
                return ChromeTraceWriter(path)  # created exclusively: never over a file or through a link
            except FileExistsError:
                continue
        raise FileExistsError(f"no free name for {stem}.json")

    def _write(self, job: dict) -> None:
        from .report.table import human_bytes
        from .sampling.rows import Batch
        from .trace.schema import STOP_EVENT, samples_event
        from .trace.tracks import EventBuilder

        p: _Pending = job["pending"]
        times, values = job["times"], job["values"]
        low = self._space_low(self.folder)
        if low is not None:
            self._turn_away("low_disk_space")
            self._say(f"sysprof: flight dump ({p.kind}: {p.reason}) skipped: {human_bytes(low[0])} available in "
                      f"{self.folder}, under the free-space floor of {human_bytes(low[1])}")
            return
        budget = self.options.max_bytes - self.bytes_written
        events = [ev for _, ev in job["events"]]
        events.append({"name": FLIGHT_EVENT, "ph": "i", "s": "g", "ts": self.ts(p.at_ns), "pid": self.pid,
                       "tid": 0, "args": {"trigger": p.kind, "reason": p.reason}})
        events.sort(key=_ts_key)
        # the window's times: its rows', its events' and the trigger's
        ends = [p.at_ns] + [int(t) for t in times[:1]] + [int(t) for t in times[-1:]]
        first_ns = min(ends + [t for t, _ in job["events"][:1]])
        last_ns = max(ends + [t for t, _ in job["events"][-1:]])
        opened, _ = _balance(events, self.ts(first_ns), None)
        info = {"trigger": p.kind, "reason": p.reason, "at_ns": p.at_ns, "index": p.index, "window_s": self.window_s,
                "before_s": (p.at_ns - first_ns) / 1e9, "after_s": (last_ns - p.at_ns) / 1e9,
                "also": p.also, "suppressed_before": job["suppressed"]}
        notes = [n for n in (self.cut, job["short"],
                             "the recording ended before the window's end" if job["ended_early"] else None) if n]
        if notes:
            info["notes"] = notes
        builder = EventBuilder(self.channels, system_pid=self.pid, process_pid=self.process_pid,
                               float_ts=self.float_ts, changes_only=True)
        writer = self._open_dump(p)
        cut, rows, k = None, 0, 0  # k: the next event to write
        try:
            writer.write_many(self._head(builder, first_ns, info))
            writer.write_many(job["meta"])
            writer.write_many(opened)  # the spans begun before the window
            for lo in range(0, len(times), CHUNK_ROWS):
                t, v = times[lo:lo + CHUNK_ROWS], values[lo:lo + CHUNK_ROWS]
                limit = self.ts(int(t[-1]))
                writer.write(samples_event(t, self.pid, self.ts(int(t[0])), 1 if self.float_ts else 1000))
                end = _index_past(events, k, limit)
                writer.write_many(heapq.merge(builder.events(Batch(t, v, self.channels, self.interval_s)),
                                              events[k:end], key=_ts_key))
                k, rows = end, rows + len(t)
                if writer.bytes_written > budget:
                    cut = f"the dumps' size bound ({human_bytes(self.options.max_bytes)}) was reached"
                elif self._space_low(self.folder) is not None:
                    cut = "the file system fell under the free-space floor"
                if cut:
                    break
                time.sleep(0)  # let the drain have the interpreter
            if cut is None:
                writer.write_many(events[k:])
                k = len(events)
            end_ns = last_ns if cut is None else int(times[rows - 1])
            writer.write_many(builder.finish())
            writer.write_many(_balance(opened + events[:k], None, self.ts(end_ns))[1])  # spans open at the end
            stop = dict(job["stop"])
            stop["recording_stats"] = stop.pop("stats", None)
            stop.update({"stats": {"taken": rows}, "samples_written": rows, "elapsed_s": (end_ns - first_ns) / 1e9,
                         "flight": dict(info, cut=cut)})
            writer.write({"name": STOP_EVENT, "ph": "i", "s": "g", "ts": self.ts(end_ns), "pid": self.pid,
                          "tid": 0, "args": stop})
        finally:
            writer.close()
        size = writer.bytes_written
        self.bytes_written += size
        entry = {"path": os.fspath(writer.path), "trigger": p.kind, "reason": p.reason, "bytes": size, "rows": rows,
                 "before_s": info["before_s"], "after_s": info["after_s"], "cut": cut}
        self.written.append(entry)
        more = f"; {len(p.also)} more trigger(s) in its window" if p.also else ""
        self._say(f"sysprof: flight dump {entry['path']}: {p.kind}: {p.reason}; {info['before_s']:.3g} s before, "
                  f"{info['after_s']:.3g} s after, {rows:,} samples, {human_bytes(size)}{more}"
                  f"{'; cut: ' + cut if cut else ''}")

    def _head(self, builder, first_ns: int, info: dict) -> list:
        from .trace.schema import START_EVENT

        if self.head is None:
            return [{"name": START_EVENT, "ph": "i", "s": "g", "ts": self.ts(first_ns), "pid": self.pid, "tid": 0,
                     "args": {"interval_s": self.interval_s, "channels": list(self.channels), "flight": info}},
                    builder.units_event()]
        out = []
        for ev in self.head:
            if ev.get("name") == START_EVENT:
                ev = dict(ev, ts=self.ts(first_ns), args=dict(ev.get("args") or {}, flight=info))
            out.append(ev)
        return out

    # ---- the end ----
    def close(self, timeout: Optional[float] = 120.0) -> List[dict]:
        """Take the triggers asked for, write the pending dumps with the rows that arrived, wait for the writer
        (at most ``timeout`` s); the dumps written. Idempotent."""
        if not self.closed:
            self._take_requests()
            self._due(final=True)
            self.closed = True
            _ACTIVE.discard(self)
            if self._worker is not None:
                self._jobs.put(None)
        if self._worker is not None:
            self._worker.join(timeout)
        return list(self.written)

    def summary(self) -> str:
        """One line: the dumps written, the triggers turned away."""
        away = ", ".join(f"{n} by {why.replace('_', ' ')}" for why, n in self.suppressed.items())
        size = sum(d["bytes"] for d in self.written)
        from .report.table import human_bytes

        return (f"{len(self.written)} flight dump(s) in {self.folder} ({human_bytes(size)})"
                f"{'; triggers turned away: ' + away if away else ''}"
                f"{'; ' + str(len(self.failures)) + ' failed' if self.failures else ''}")


def _ts_key(ev: dict):
    ts = ev.get("ts")
    return ts if isinstance(ts, (int, float)) else -1


def _index_past(events: list, k: int, limit) -> int:
    while k < len(events) and _ts_key(events[k]) <= limit:
        k += 1
    return k


def _balance(events: list, first_ts, last_ts) -> tuple:
    """``(opened, closing)``: B events at ``first_ts`` for the E events of ``events`` (in time order) whose B came
    before the window, outermost first, and E events at ``last_ts`` for the B events not ended in it, innermost
    first, so every span of a dump is a balanced pair."""
    stacks: Dict[tuple, list] = {}
    opened = []
    for ev in events:
        ph = ev.get("ph")
        if ph not in ("B", "E"):
            continue
        key = (ev.get("pid"), ev.get("tid"))
        stack = stacks.setdefault(key, [])
        if ph == "B":
            stack.append(ev)
        elif stack:
            stack.pop()
        else:
            b = {k: v for k, v in ev.items() if k != "args"}
            b.update(ph="B", ts=first_ts, args={"clipped": "began before the window"})
            opened.append(b)
    closing = []
    for stack in stacks.values():
        while stack:
            b = stack.pop()
            e = {k: v for k, v in b.items() if k != "args"}
            e.update(ph="E", ts=last_ts, args={"closed": "window end"})
            closing.append(e)
    return opened[::-1], closing


class FlightSink:
    """A :class:`FlightRecorder` as a sink of a recording session (:class:`sysprof.pipeline.Session`, whose
    :class:`~sysprof.pipeline.Sink` interface it has): each chunk's events (Chrome events by the recorder's time
    rule), then its rows; the session's stop closes the recorder (the pending dumps written).

    ``head``: ``head(start) -> [Event]``, the typed events that open every dump
    (:func:`sysprof.trace.events.head`), taken at the session's start; None: the recorder's own. The session's GPU
    XID instants are left out: the recorder finds the XIDs in the rows it is fed (its ``xid`` trigger) and keeps
    their instants itself."""

    name = "flight recorder"

    def __init__(self, recorder: FlightRecorder, head: Optional[Callable] = None) -> None:
        self.recorder = recorder
        self._head = head

    def open(self, start) -> None:
        if self._head is not None:
            from .trace.events import chrome_events

            self.recorder.head = chrome_events(self._head(start), self.recorder.ts)

    def take(self, chunk) -> None:
        from .trace.events import to_chrome
        from .trace.gpu_events import XID_EVENT

        rec = self.recorder
        if chunk.events:
            rec.feed_events([to_chrome(e, rec.ts) for e in chunk.events if e.name != XID_EVENT])
        rec.feed(chunk.batch)

    def flush(self) -> None:
        pass

    def close(self, stop: dict) -> None:
        self.recorder.close()
