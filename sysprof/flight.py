"""The flight recorder: the last seconds of samples and markers at full rate in bounded memory, and a standalone
trace of the window around an anomaly, written when it happens.

Any drain loop feeds it through a narrow interface (``sysprof record --flight``, the trainer callbacks'
``flight=``)::

    rec = FlightRecorder(folder, channels, interval_s, head=..., float_ts=..., pid=...)
    rec.feed(batch)           # sampler rows (Batch: timestamps_ns, values): kept in a preallocated ring
    rec.feed_events(events)   # trace events ("ts" in the trace's µs): markers' B/E/i, phases' X, metadata M
    rec.feed_spans(spans, cat)  # spans timed in ns ((name, start_ns, end_ns)): X events, ``ts`` made here once
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

**The decimated trace** (``trace_every_s``; ``record --flight-trace [EVERY]``): beside the dumps,
``folder/trace[suffix].json.gz`` (created exclusively; ``-1``, ``-2``, ... where the name is taken) holds the whole
run at one row per ``trace_every_s`` (:data:`DEFAULT_TRACE_EVERY_S` from the CLI), with every event fed (markers,
phases, metadata), the XIDs found, the budget's interval changes the CLI feeds, and a :data:`FLIGHT_EVENT` instant
at each dump's trigger: a ``sysprof record`` trace that ``report`` reads like any other. It is written on the
feeding thread as the rows come (one flush a second); a failure ends it, never the dumps.

Decimation is honest: every value it writes is true over its row's span. The rows are cut at the multiples of
``trace_every_s`` since the epoch; a span's row is its first sample (its time a real sample's) and the span runs
from it to the next span's first sample, which is how ``report`` and Perfetto hold a value (until the next one).
Per channel (:func:`decimation_modes`):

* ``at``: the value at the row: a cumulative total (registry kinds ``counter``, ``counter32``, ``ticks``), so its
  increase over any run of rows is exact; also identities and times (``*/pid``, ``gpu/<i>/xid_last``,
  ``gpu/<i>/reading_time_seconds``: a GPU track sits at its kept row's reading time) and channels the registry
  does not know;
* ``mean``: a rate (``*_per_second``) or gauge (a level, a percent, watts): the time-weighted mean over the span of
  the values as a full trace holds them (each sample until the next), NaN time left out; so a rate's integral (the
  bytes, the joules, the CPU-seconds ``report`` gives) is the full-rate trace's. A span's minimum and maximum are
  not kept: ``report``'s min, p95 and max of such a channel are those of the span means;
* ``any``: a bit mask (``gpu/<i>/clocks_event_reasons``): the OR of the span's values (each reason that was on in
  it).

The start event says so: ``interval_s`` is ``trace_every_s`` (the rows'), ``decimation`` =
``{"every_s", "sampled_interval_s", "span", "modes": {mode: count}, "at": [channels], "any": [channels]}`` (the rest
are ``mean``); the stop event's ``stats.taken`` counts the rows written (``recording_stats`` the sampler's) and its
``flight_trace`` the rows in and out, the bytes, the dumps and why the trace ended early (``cut``). On disk it
stops, closed (its tracks' last values, its open spans ended, the stop event), at ``trace_max_bytes`` (compressed,
as on disk) or under the free-space floor (``min_free``), and is not begun under it.
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
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .trace.events import instant, to_chrome

__all__ = ["FlightOptions", "FlightRecorder", "dump", "TRIGGERS", "DUMP_EVENT", "FLIGHT_EVENT",
           "DEFAULT_STEP_PATTERNS", "DEFAULT_TRACE_EVERY_S", "decimation_modes"]

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
#: the decimated trace's row interval of ``record --flight-trace`` without a value
DEFAULT_TRACE_EVERY_S = 0.1
#: the decimated trace takes the rows fed in steps of this many seconds of rows (each step decimated, written, its
#: bounds checked, flushed: a killed recorder loses about this much of it, plus the open span)
TRACE_FLUSH_S = 1.0
#: channel keys written at the row (not averaged) in the decimated trace, besides the cumulative totals and the
#: reading times (``schema.READING_TIME_KEY``)
TRACE_AT_KEYS = ("pid", "xid_last")
#: channel keys whose values are bit masks: the decimated trace ORs them over a span
TRACE_ANY_KEYS = ("clocks_event_reasons",)


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
    ``(bytes, fraction[, cap])`` (None: record's default); ``trace_every_s``: a decimated trace of the whole run,
    one row per this many seconds (None: none; :data:`DEFAULT_TRACE_EVERY_S` is ``record --flight-trace``'s
    default), at most ``trace_max_bytes`` on disk."""

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
    trace_every_s: Optional[float] = None
    trace_max_bytes: int = 1 << 30

    def __post_init__(self):
        checks = (("window_s", self.window_s > 0 and math.isfinite(self.window_s), "must be a time > 0"),
                  ("before_share", 0 <= self.before_share <= 1, "must be between 0 and 1"),
                  ("min_gap_s", self.min_gap_s >= 0, "must be a time >= 0"),
                  ("max_dumps", isinstance(self.max_dumps, int) and self.max_dumps >= 1, "must be at least 1"),
                  ("max_bytes", self.max_bytes > 0, "must be a size > 0"),
                  ("memory_bytes", self.memory_bytes > 0, "must be a size > 0"),
                  ("step_factor", self.step_factor > 1, "must be more than 1"),
                  ("min_steps", isinstance(self.min_steps, int) and self.min_steps >= 1, "must be at least 1"),
                  ("trace_every_s", self.trace_every_s is None or (isinstance(self.trace_every_s, (int, float))
                                                                  and not isinstance(self.trace_every_s, bool)
                                                                  and 0 < self.trace_every_s < math.inf),
                   "must be a time > 0"),
                  ("trace_max_bytes", self.trace_max_bytes > 0, "must be a size > 0"))
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


def decimation_modes(channels: Sequence[str]) -> List[str]:
    """Per channel, how the decimated trace reduces a span (module docstring): ``"at"``, ``"mean"`` or ``"any"``."""
    from .sampling.registry import TOTAL_KINDS, channel_spec
    from .trace.schema import READING_TIME_KEY

    out = []
    for c in channels:
        key = c.rpartition("/")[2]
        spec = channel_spec(c)
        if key in TRACE_ANY_KEYS:
            out.append("any")
        elif spec is None or spec.kind in TOTAL_KINDS or key in TRACE_AT_KEYS or key == READING_TIME_KEY:
            out.append("at")
        else:
            out.append("mean")
    return out


class _Decimator:
    """Rows in, one row per span of ``every_ns`` out (module docstring). A span is closed, and its row given, when
    the first row of a later span arrives (its time ends the span's last sample); :meth:`end` closes the open one."""

    def __init__(self, modes: Sequence[str], every_ns: int) -> None:
        import numpy as np

        self.every_ns = max(1, int(every_ns))
        self.mean = np.asarray([i for i, m in enumerate(modes) if m == "mean"], dtype=np.intp)
        self.any = np.asarray([i for i, m in enumerate(modes) if m == "any"], dtype=np.intp)
        self.times = np.zeros(0, dtype=np.int64)  # the open span's rows
        self.values = np.zeros((0, len(modes)))

    def push(self, times, values):
        """``(times, values)`` of the spans that the rows closed (possibly none); ``times`` and ``values`` may be
        lists of arrays (batches, in order), taken in one copy."""
        import numpy as np

        times = [self.times] + (list(times) if isinstance(times, list) else [times])
        values = [self.values] + (list(values) if isinstance(values, list) else [values])
        t = np.concatenate(times).astype(np.int64, copy=False)
        if len(t) == len(self.times):
            return self.times[:0], self.values[:0]
        v = np.concatenate(values).astype(np.float64, copy=False)
        span = t // self.every_ns  # (a clock stepping back starts a span too: the open one never grows past one)
        firsts = np.flatnonzero(np.concatenate([[True], span[1:] != span[:-1]]))
        last = int(firsts[-1])  # the open span's first row
        self.times, self.values = t[last:].copy(), v[last:].copy()
        if last == 0:
            return t[:0], v[:0]
        return self._reduce(t[:last + 1], v[:last], firsts[:-1])

    def end(self):
        """The open span's rows: the span up to its last sample, then the last sample itself (so the totals' last
        value is in, and it holds only its own interval); ``(times, values)``, empty without one."""
        import numpy as np

        t, v = self.times, self.values
        self.times, self.values = t[:0], v[:0]
        if len(t) < 2:
            return t, v
        head_t, head_v = self._reduce(t, v[:-1], np.zeros(1, dtype=np.intp))
        return np.concatenate([head_t, t[-1:]]), np.concatenate([head_v, v[-1:]])

    def _reduce(self, t, v, firsts):
        """One row per span starting at row ``firsts[k]``: ``t`` has a time more than ``v`` has rows (the end of
        the last row's hold)."""
        import numpy as np

        out = v[firsts]  # "at" (a copy: fancy indexing)
        hold = np.diff(t).astype(np.float64)
        np.maximum(hold, 0.0, out=hold)  # a clock stepping back holds nothing
        if self.mean.size:
            cols = self.mean
            with np.errstate(invalid="ignore", divide="ignore"):
                # every column at once, NaN carried (one pass); the spans with a value not finite again, masked
                mean = (np.add.reduceat(v * hold[:, None], firsts, axis=0)[:, cols]
                        / np.add.reduceat(hold, firsts)[:, None])
                redo = np.flatnonzero(~np.isfinite(mean).all(axis=0))
                if redo.size:
                    x = v[:, cols[redo]]
                    ok = np.isfinite(x)
                    known = ok.any(axis=0)  # (a column never known stays NaN)
                    redo, x, ok = redo[known], x[:, known], ok[:, known]
                    w = ok * hold[:, None]
                    mean[:, redo] = (np.add.reduceat(np.where(ok, x, 0.0) * w, firsts, axis=0)
                                     / np.add.reduceat(w, firsts, axis=0))
            out[:, cols] = np.where(np.isfinite(mean), mean, out[:, cols])  # no time held: the row's value
        if self.any.size:
            x = v[:, self.any]
            ok = np.isfinite(x) & (x >= 0) & (x < 2.0 ** 63)
            bits = np.bitwise_or.reduceat(np.where(ok, x, 0.0).astype(np.int64), firsts, axis=0)
            seen = np.logical_or.reduceat(ok, firsts, axis=0)
            out[:, self.any] = np.where(seen, bits.astype(np.float64), np.nan)
        return t[firsts], out


class _Trace:
    """The decimated trace of a :class:`FlightRecorder` (module docstring), written on the feeding thread. Every
    method may raise; the recorder catches, and ends the trace (:meth:`FlightRecorder._to_trace`)."""

    def __init__(self, rec: "FlightRecorder") -> None:
        from .sampling.registry import decimals_of, source_of
        from .trace.tracks import EventBuilder

        self.rec = rec
        opts = rec.options
        self.every_s = float(opts.trace_every_s)
        self.modes = decimation_modes(rec.channels)
        self.decimator = _Decimator(self.modes, round(self.every_s * 1e9))
        start = self._start_args()
        own = start.get("intervals_s") if isinstance(start.get("intervals_s"), dict) else {}
        slowest = lambda c: max([self.every_s] + [v for v in (own.get(source_of(c)),)  # noqa: E731
                                                  if isinstance(v, (int, float)) and not isinstance(v, bool)])
        self.builder = EventBuilder(rec.channels, system_pid=rec.pid, process_pid=rec.process_pid,
                                    float_ts=rec.float_ts, changes_only=True,
                                    decimals=[decimals_of(c, slowest(c)) for c in rec.channels])
        self.writer = None
        self.fd = None
        self.path: Optional[str] = None
        self.done = False  # ended (closed, cut, failed or never begun)
        self.cut: Optional[str] = None
        self.held: list = []  # heap of (t_ns, seq, event): events after the newest row written
        self.seq = 0
        self.open_spans: Dict[tuple, list] = {}  # (pid, tid) -> the B events written and not yet ended
        self.rows_in = self.rows = 0
        self.first_ns = None  # the trace's start (the recording's, else its first row's)
        self.last_ns = None  # the newest row fed
        self.written_ns = None  # the newest row or event written
        self.size = 0  # bytes on disk at the last look
        self.guard = None  # the free-space floor (cli.output._SpaceGuard), once the folder is there
        self.waiting: list = []  # (times, values) fed and not yet decimated: up to TRACE_FLUSH_S of rows

    def _start_args(self) -> dict:
        from .trace.schema import START_EVENT

        for ev in self.rec.head or ():
            if ev.get("name") == START_EVENT and isinstance(ev.get("args"), dict):
                return ev["args"]
        return {}

    def _on_disk(self) -> int:
        """Bytes on disk now (what the kernel has; the last few kB may still be buffered): :attr:`size`."""
        try:
            self.size = os.fstat(self.fd).st_size
        except OSError:
            pass
        return self.size

    # ---- fed ----
    def event(self, t_ns: int, ev: dict) -> None:
        if self.done:
            return
        self.seq += 1
        heapq.heappush(self.held, (t_ns, self.seq, ev))
        if len(self.held) > MAX_EVENTS:  # a long span's worth of events: the oldest go now, out of order if need be
            if self.writer is None:
                heapq.heappop(self.held)  # (none written yet: the oldest is dropped)
            else:
                self._write_events(self.held[0][0])

    def meta(self, ev: dict) -> None:
        if not self.done:
            self.event(-1, ev)  # before everything held

    def feed(self, batch) -> None:
        """Keeps the rows; every TRACE_FLUSH_S of them, decimates, writes, checks the bounds, flushes (one
        rendering call a second, whatever the drains: its cost is mostly per call)."""
        if self.done or not len(batch):
            return
        if self.writer is None and not self._begin(int(batch.timestamps_ns[0])):
            return
        self.rows_in += len(batch)
        self.waiting.append((batch.timestamps_ns, batch.values))  # (a batch is never changed once drained)
        self.last_ns = max(int(batch.timestamps_ns[-1]), self.last_ns or 0)
        if self.last_ns - int(self.waiting[0][0][0]) >= TRACE_FLUSH_S * 1e9:
            self._step()

    def _step(self) -> None:
        if not self.waiting:
            return
        waiting, self.waiting = self.waiting, []
        self._write_rows(*self.decimator.push([t for t, _ in waiting], [v for _, v in waiting]))
        self._check()

    # ---- the file ----
    def _begin(self, first_ns: int) -> bool:
        from .report.table import human_bytes
        from .trace.chrome import ChromeTraceWriter

        rec = self.rec
        low = rec._space_low(rec.folder)
        if low is not None:
            self.done = True
            self.cut = "not begun: under the free-space floor"
            rec._say(f"sysprof: flight trace not written: {human_bytes(low[0])} available in {rec.folder}, under "
                     f"the free-space floor of {human_bytes(low[1])}")
            return False
        stem = os.path.join(rec.folder, f"trace{rec.suffix}")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        for n in range(1000):
            path = f"{stem}.json.gz" if n == 0 else f"{stem}-{n}.json.gz"
            try:
                fd = os.open(path, flags, 0o666)  # never over a file or through a link
            except FileExistsError:
                continue
            try:
                self.writer = ChromeTraceWriter(path, fd=fd)
            except BaseException:
                os.close(fd)
                raise
            self.fd, self.path = fd, path
            break
        else:
            raise FileExistsError(f"no free name for {stem}.json.gz")
        from .cli.output import DEFAULT_MIN_FREE, _SpaceGuard

        self.guard = _SpaceGuard(path, rec.options.min_free if rec.options.min_free is not None else DEFAULT_MIN_FREE)
        self.first_ns = first_ns
        self.writer.write_many(self._head(first_ns))
        return True

    def _head(self, first_ns: int) -> list:
        from .trace.schema import START_EVENT

        rec = self.rec
        at = [c for c, m in zip(rec.channels, self.modes) if m == "at"]
        anyof = [c for c, m in zip(rec.channels, self.modes) if m == "any"]
        decimation = {"every_s": self.every_s, "sampled_interval_s": rec.interval_s,
                      "span": "from the row to the next row: its first sample to the next span's first",
                      "modes": {m: self.modes.count(m) for m in ("at", "mean", "any")},
                      "at": at, "any": anyof,
                      "rules": {"at": "the value at the row (cumulative totals, identities, reading times)",
                                "mean": "the time-weighted mean over the span (rates, gauges), NaN time left out",
                                "any": "the OR of the span's values (bit masks)"}}
        if rec.head is None:
            return [to_chrome(instant(START_EVENT, first_ns, rec.pid, {
                "interval_s": self.every_s, "channels": list(rec.channels), "decimation": decimation}), rec.ts),
                    self.builder.units_event()]
        out = []
        for ev in rec.head:
            if ev.get("name") == START_EVENT:
                ev = dict(ev, args=dict(ev.get("args") or {}, interval_s=self.every_s, decimation=decimation))
                if isinstance(ev.get("ts"), (int, float)):
                    self.first_ns = min(self.first_ns, _event_ns(ev) or self.first_ns)
            out.append(ev)
        return out

    def _write_rows(self, times, values) -> None:
        from .sampling.rows import Batch
        from .trace.schema import samples_event

        if not len(times):
            return
        rec = self.rec
        upto = int(times[-1])
        events = self._due(upto)
        rows = self.builder.events(Batch(times, values, rec.channels, self.every_s))
        self.writer.write(samples_event(times, rec.pid, rec.ts(int(times[0])), 1 if rec.float_ts else 1000))
        self.writer.write_many(heapq.merge(rows, events, key=_ts_key))
        self.rows += len(times)
        self.written_ns = max(upto, self.written_ns or upto)

    def _due(self, upto_ns: Optional[int]) -> list:
        """The held events up to ``upto_ns`` (all: None), in time order, the spans' B and E followed."""
        out = []
        held = self.held
        while held and (upto_ns is None or held[0][0] <= upto_ns):
            t_ns, _, ev = heapq.heappop(held)
            out.append(ev)
            ph = ev.get("ph")
            if ph == "B":
                stack = self.open_spans.setdefault((ev.get("pid"), ev.get("tid")), [])
                if len(stack) < MAX_DEPTH:
                    stack.append(ev)
            elif ph == "E":
                stack = self.open_spans.get((ev.get("pid"), ev.get("tid")))
                if stack:
                    stack.pop()
            if self.written_ns is None or t_ns > self.written_ns:
                self.written_ns = t_ns
        return out

    def _write_events(self, upto_ns: Optional[int]) -> None:
        self.writer.write_many(self._due(upto_ns))

    def _check(self) -> None:
        """The bounds (the size, the free-space floor) after each step's writes; then a flush."""
        from .report.table import human_bytes

        rec = self.rec
        if self._on_disk() > rec.options.trace_max_bytes:
            self.end(cut=f"the trace's size bound ({human_bytes(rec.options.trace_max_bytes)}) was reached")
        elif self.guard.low() is not None:
            self.end(cut="the file system fell under the free-space floor")
        else:
            self.writer.flush()

    def end(self, cut: Optional[str] = None) -> None:
        """The open span's row (at the end), the events left, the tracks' last values, the spans still open
        ended, the stop event; closed. ``cut``: why it ends before the recording (the rows and events after are
        not written)."""
        import numpy as np

        from .report.table import human_bytes
        from .sampling.rows import Batch
        from .trace.schema import STOP_EVENT

        if self.done:
            return
        self.done = True
        rec, writer = self.rec, self.writer
        if writer is None:
            return
        try:
            self.cut = cut
            # the values end where the last row's span does, so each holds only its span (a full trace's last
            # sample holds one interval; cut: the next span, not written, began there)
            if cut is None:
                self._step()
                self._write_rows(*self.decimator.end())
                stop_ns = None if self.last_ns is None else self.last_ns + round(rec.interval_s * 1e9)
            else:
                stop_ns = int(self.decimator.times[0]) if len(self.decimator.times) else None
            if stop_ns is not None and self.rows:
                nan = np.full((1, len(rec.channels)), np.nan)
                writer.write_many(heapq.merge(self.builder.events(Batch(np.array([stop_ns]), nan, rec.channels)),
                                              self._due(None if cut is None else stop_ns), key=_ts_key))
            elif cut is None:
                self._write_events(None)
            ends = [self.first_ns, self.written_ns, stop_ns]
            end_ns = max(t for t in ends if t is not None)
            writer.write_many(self.builder.finish())
            closing = [dict({k: v for k, v in b.items() if k != "args"}, ph="E", ts=rec.ts(end_ns),
                            args={"closed": "trace end"}) for stack in self.open_spans.values() for b in stack[::-1]]
            writer.write_many(closing)
            stop = {}
            if rec.stop_args is not None:
                try:
                    stop = dict(rec.stop_args())
                except Exception as e:  # noqa: BLE001 - the trace ends without them
                    stop = {"errors": {"flight": f"stop args: {type(e).__name__}: {e}"}}
            stop["recording_stats"] = stop.pop("stats", None)
            stop.update({"stats": {"taken": self.rows}, "samples_written": self.rows,
                         "elapsed_s": (end_ns - self.first_ns) / 1e9,
                         "flight_trace": {"every_s": self.every_s, "rows_in": self.rows_in, "rows": self.rows,
                                          "cut": cut, "dumps": [os.path.basename(d["path"]) for d in rec.written],
                                          "suppressed": dict(rec.suppressed)}})
            writer.write(to_chrome(instant(STOP_EVENT, end_ns, rec.pid, stop), rec.ts))
        finally:
            self.held, self.waiting = [], []
            writer.close()
            try:
                self.size = os.stat(self.path).st_size
            except OSError:
                pass
        if cut is not None:
            rec._say(f"sysprof: flight trace {self.path} ended early: {cut}; {self.rows:,} rows, "
                     f"{human_bytes(self.size)}")


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
        self._xids = XidInstants(self.channels)
        self._reasons = _Reasons(self.channels)
        self._requests: collections.deque = collections.deque()  # (kind, reason, at_ns) from any thread
        self._pending: List[_Pending] = []
        self._last_at: Optional[int] = None
        self._lock = threading.RLock()  # (a stop from a signal handler may re-enter a feed)
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
        self._trace = None
        if opts.trace_every_s is not None:
            try:
                self._trace = _Trace(self)
            except Exception as e:  # noqa: BLE001 - the dumps go on without it
                self.failures.append(f"trace: {type(e).__name__}: {e}")
                self._say(f"sysprof: no flight trace: {type(e).__name__}: {e}")
        _ACTIVE.add(self)
        from . import forks

        forks.register(self)

    def _after_fork_in_child(self) -> None:
        """A forked child (a DataLoader worker) inherits the parent's recorder but not its feeding: nothing
        there would ever write a dump it asked for, so :func:`dump` no longer reaches it (and says so)."""
        _ACTIVE.discard(self)
        self.closed = True

    # ---- the feeding thread ----
    def ts(self, t_ns: int):
        return t_ns / 1000.0 if self.float_ts else t_ns // 1000

    @property
    def memory_bytes(self) -> int:
        """The ring's bytes (preallocated)."""
        return self._ring.nbytes

    @property
    def trace(self) -> Optional[dict]:
        """The decimated trace (None without ``trace_every_s``): ``path`` (None before the first row or when it
        could not be begun), ``every_s``, ``rows_in``, ``rows`` written, ``bytes`` on disk, ``cut`` (why it ended
        early), ``done``."""
        t = self._trace
        if t is None:
            return None
        return {"path": t.path, "every_s": t.every_s, "rows_in": t.rows_in, "rows": t.rows, "bytes": t.size,
                "cut": t.cut, "done": t.done}

    def _to_trace(self, method: str, *args) -> None:
        """``self._trace.<method>(*args)``; a failure ends the trace (said once), never the recording or the
        dumps."""
        t = self._trace
        if t is None or t.done:
            return
        try:
            getattr(t, method)(*args)
        except Exception as e:  # noqa: BLE001 - the trace is one sink: the dumps go on without it
            self.failures.append(f"trace: {type(e).__name__}: {e}")
            t.cut = f"failed: {type(e).__name__}: {e}"
            self._say(f"sysprof: flight trace {t.path or os.path.join(self.folder, 'trace.json.gz')} failed: "
                      f"{type(e).__name__}: {e}")
            t.done = True
            t.held = []
            if t.writer is not None:
                try:
                    t.writer.close()
                except Exception:  # noqa: BLE001
                    pass

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
        self._to_trace("feed", batch)
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
            t_ns = _event_ns(ev) if ph != "M" else 0
            if t_ns is None:
                continue
            dur = ev.get("dur")
            self._event(ev, ph, t_ns, int(round(dur * 1000)) if isinstance(dur, (int, float)) else None)
        self._prune()

    def feed_typed(self, events) -> None:
        """Keep a session's typed events (:class:`sysprof.trace.events.Event`, wall ns): written with this
        recorder's time rule, the steps timed on their ns."""
        if self.closed:
            return
        from .trace.events import PHASE, SPAN, to_chrome

        for e in events:
            self._event(to_chrome(e, self.ts), PHASE[e.kind], e.t_ns, e.dur_ns if e.kind == SPAN else None)
        self._prune()

    def _event(self, ev: dict, ph, t_ns: int, dur_ns) -> None:
        if ph == "M":
            key = (ev.get("name"), ev.get("pid"), ev.get("tid"))
            if key in self._meta or len(self._meta) < MAX_META:
                self._meta[key] = ev
                self._to_trace("meta", ev)
            return
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
            if dur_ns is not None and dur_ns >= 0:
                self._step(name, t_ns, t_ns + dur_ns)
        elif ph in ("i", "I") and name == DUMP_EVENT:
            args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
            self._admit("dump", str(args.get("reason", "") or "sysprof.dump()"), t_ns)

    def feed_spans(self, spans, cat: Optional[str] = None, tid: Any = 0) -> None:
        """Keep spans the caller timed in ns (``(name, start_ns, end_ns)``) as ``X`` events of this recorder's pid:
        their ``ts``/``dur`` are made here, the one ns -> µs step, and the steps are timed on the ns themselves
        (:meth:`feed_events` takes events whose ``ts`` is the trace's µs already)."""
        if self.closed:
            return
        for name, start_ns, end_ns in spans:
            ev = {"name": name} if cat is None else {"name": name, "cat": cat}
            ev.update(ph="X", ts=self.ts(start_ns), dur=self.ts(end_ns) - self.ts(start_ns), pid=self.pid, tid=tid)
            self._keep(start_ns, ev)
            if end_ns >= start_ns:  # a span the wall clock stepped back across times no step
                self._step(name, start_ns, end_ns)
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
        self._to_trace("event", t_ns, ev)
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
        self._to_trace("event", at_ns, to_chrome(instant(FLIGHT_EVENT, at_ns, self.pid, {
            "trigger": kind, "reason": reason, "index": self.started}), self.ts))
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
        events.append(to_chrome(instant(FLIGHT_EVENT, p.at_ns, self.pid, {"trigger": p.kind, "reason": p.reason}),
                                self.ts))
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
            writer.write(to_chrome(instant(STOP_EVENT, end_ns, self.pid, stop), self.ts))
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
            return [to_chrome(instant(START_EVENT, first_ns, self.pid, {
                "interval_s": self.interval_s, "channels": list(self.channels), "flight": info}), self.ts),
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
        self._to_trace("end")  # after the dumps: its stop event names them
        return list(self.written)

    def summary(self) -> str:
        """One line: the dumps written, the triggers turned away."""
        away = ", ".join(f"{n} by {why.replace('_', ' ')}" for why, n in self.suppressed.items())
        size = sum(d["bytes"] for d in self.written)
        from .report.table import human_bytes

        t = self._trace
        trace = ""
        if t is not None and t.path is not None:
            trace = (f"; trace {t.path}: {t.rows:,} rows, one per {t.every_s:g} s, {human_bytes(t.size)}"
                     f"{' (ended early: ' + t.cut + ')' if t.cut else ''}")
        elif t is not None:
            trace = f"; no trace ({t.cut or 'no rows'})"
        return (f"{len(self.written)} flight dump(s) in {self.folder} ({human_bytes(size)}){trace}"
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
    :class:`~sysprof.pipeline.Sink` interface it has): each chunk's typed events (written by the recorder's time
    rule, steps timed on their ns), then its rows; the session's stop closes the recorder (the pending dumps written).

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
        from .trace.gpu_events import XID_EVENT

        rec = self.recorder
        if chunk.events:
            rec.feed_typed([e for e in chunk.events if e.name != XID_EVENT])
        rec.feed(chunk.batch)

    def flush(self) -> None:
        pass

    def close(self, stop: dict) -> None:
        self.recorder.close()
