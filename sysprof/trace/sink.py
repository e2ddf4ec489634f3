"""The trace-file sink of a recording session (:class:`TraceSink`): the sampler's rows as counter tracks, the
stream's typed events, the head and the stop event, into one trace writer (Chrome JSON, ``.json.gz`` or
Perfetto's ``.pftrace``: :func:`~sysprof.trace.perfetto.writer_class_for`).

The rows go through one renderer: :class:`~sysprof.trace.tracks.EventBuilder` (the changes-only rule, the NaN
rule and each channel's resolution, once), whose typed rows (:class:`~sysprof.trace.tracks.CounterRow`) and the
stream's typed events go to the writer merged in time order (:meth:`~sysprof.trace.chrome.TraceWriter.write_typed`:
the JSON writers render them with the sink's time rule, Perfetto's writes them onto its counter tracks); or, for a
Chrome JSON trace at integer µs without rounding, the :class:`~sysprof.trace.tracks.RowTemplate` fast path (the
same events, as text).
"""
from __future__ import annotations

import heapq
import itertools
import time
from typing import Any, Callable, List, Optional, Sequence

from . import events as ev
from .schema import STATS_COUNTER, samples_event
from .tracks import EventBuilder, RowTemplate, counter_event

__all__ = ["TraceSink", "COUNTED_STATS"]

#: the sampler's statistics that count from the start (the stats counter written at each flush)
COUNTED_STATS = ("taken", "dropped", "missed_deadlines")


class TraceSink:
    """Writes a session into ``writer`` (see the module).

    Args:
        writer: an open trace writer (``write_typed``, ``write``, ``flush``, ``close``; ``write_encoded`` for the
            fast path; ``timestamp`` where it keeps every ns; ``counter_changes``: it takes the rows' per-key
            changes).
        head: ``head(sink) -> [Event]``: the trace's first events (:func:`sysprof.trace.events.head`), called at
            :meth:`open` once the time rule is known.
        system_pid, process_pid: the tracks' pids (``process/*`` and ``process_tree/*`` on ``process_pid``).
        float_ts: ``ts`` as float µs (an interval under 1 ms), else integer µs.
        changes_only: a track's event only where a value changed (False: every row).
        decimals: ``decimals(channels) -> [int | None]`` per channel (values rounded to their resolution), or None.
        samples: write a ``sysprof samples`` event per drain (the rows' times, so a changes-only trace reads back
            a row per sample).
        fast: use the text fast path where it applies (Chrome JSON, integer µs, no rounding).
        stats: ``stats() -> dict`` for the stats counter written at each flush (None: none).
    """

    name = "trace"

    def __init__(self, writer: Any, head: Callable[["TraceSink"], List[ev.Event]], *, system_pid: int,
                 process_pid: Optional[int] = None, float_ts: bool = False, changes_only: bool = True,
                 decimals: Optional[Callable[[Sequence[str]], list]] = None, samples: bool = True,
                 fast: bool = False, stats: Optional[Callable[[], dict]] = None) -> None:
        self.writer = writer
        self._head = head
        self.system_pid = system_pid
        self.process_pid = process_pid
        self.float_ts = float_ts
        self.changes_only = changes_only
        self._decimals = decimals
        self._samples = samples
        self._fast = fast
        self._stats = stats
        self.builder: Optional[EventBuilder] = None
        self.rows: Optional[RowTemplate] = None
        self.head: List[ev.Event] = []
        self.stats_base: dict = {}  # a part's start values of COUNTED_STATS (the stats counter counts from there)

    # ---- the time rule ----
    def ts(self, t_ns: int):
        """The trace's ``ts`` of a wall time (ns): the writer's own rule (``.pftrace``: every ns), else µs."""
        return self.builder.ts(t_ns) if self.builder is not None else (
            round(t_ns / 1000.0, 3) if self.float_ts else t_ns // 1000)

    @property
    def samples_written(self) -> int:
        return self.builder.rows if self.builder is not None else 0

    # ---- the stream ----
    def open(self, start) -> None:
        channels = start.channels
        decimals = self._decimals(channels) if self._decimals is not None else None
        self.builder = EventBuilder(channels, system_pid=self.system_pid, process_pid=self.process_pid,
                                    float_ts=self.float_ts, changes_only=self.changes_only, decimals=decimals)
        exact = getattr(self.writer, "timestamp", None)
        if exact is not None:  # a writer that keeps every ns (.pftrace) gets them
            self.builder.ts = exact
        from .chrome import ChromeTraceWriter

        if (self._fast and isinstance(self.writer, ChromeTraceWriter) and not self.float_ts and self.changes_only
                and not (decimals and any(d is not None for d in decimals))):
            layout = self.builder.layout  # rows as text from %-templates: half the drain's time, the same events
            self.rows = RowTemplate(layout.series, self.system_pid, 0, changes_only=True,
                                    timed=[g for g, _ in layout.timed])
        self.head = list(self._head(self))
        self.write_events(self.head)
        self.writer.flush()

    def write_events(self, events: Sequence[ev.Event]) -> None:
        self.writer.write_typed(events, self.ts)

    def _key(self, item):
        """An item's place in time (the writer's ``ts``; metadata first), to merge the rows with the events."""
        if isinstance(item, dict):
            return item.get("ts", -1)
        return -1 if getattr(item, "kind", None) == ev.METADATA else self.ts(item.t_ns)

    def take(self, chunk) -> None:
        batch, builder, writer = chunk.batch, self.builder, self.writer
        if writer.closed:
            return
        n = len(batch)
        others = chunk.events
        if self.rows is not None:  # the fast path: the rows as text, then the other events (readers sort)
            if n:
                builder.rows += n
                layout = builder.layout
                rendered = self.rows.render(batch.timestamps_ns, layout.project(batch.values),
                                            layout.track_times_ns(batch.timestamps_ns, batch.values))
                if rendered:
                    writer.write_encoded(",\n".join(t for t, _ in rendered), sum(k for _, k in rendered))
            if chunk.final:
                for text, count in self.rows.finish():
                    writer.write_encoded(text, count)
            writer.write_typed(others, self.ts)
            return
        rows: Any = builder.counter_rows(batch, getattr(writer, "counter_changes", False)) if n else ()
        if n and self.changes_only and self._samples:  # the rows' times: a row per sample when read back
            exact = getattr(writer, "timestamp", None) is not None
            rows = itertools.chain([samples_event(batch.timestamps_ns, self.system_pid,
                                                  self.ts(int(batch.timestamps_ns[0])),
                                                  1 if exact or self.float_ts else 1000)], rows)
        if chunk.final:
            rows = itertools.chain(rows, _later(builder.finish_rows))
        writer.write_typed(heapq.merge(rows, others, key=self._key) if others else rows, self.ts)

    def write_stats(self) -> None:
        """The stats counter (``sysprof stats``: the sampler's counts, since :attr:`stats_base`)."""
        if self._stats is None:
            return
        st = self._stats()
        base = self.stats_base
        values = {k: (st.get(k) - base[k] if k in base and isinstance(st.get(k), (int, float)) else st.get(k))
                  for k in COUNTED_STATS}
        self.writer.write(counter_event(STATS_COUNTER, self.ts(time.time_ns()), self.system_pid, 0, values))

    def flush(self) -> None:
        if self.writer.closed:
            return
        self.write_stats()
        self.writer.flush()

    def close(self, stop: dict) -> None:
        """The stats counter, the stop event carrying ``stop``, the writer closed (each tried)."""
        writer = self.writer
        if writer.closed:
            return
        try:
            self.write_stats()
            writer.write(ev.to_chrome(ev.stop(time.time_ns(), self.system_pid, stop), self.ts))
        finally:
            writer.close()

    # ---- a new file (``record --max-size``'s parts) ----
    def end_file(self) -> None:
        """End the current file: each track's last values written again, so they hold to its end; the next row then
        writes every track."""
        if self.rows is not None:
            for text, count in self.rows.finish():
                self.writer.write_encoded(text, count)
            self.rows.changes.reset()
            return
        self.writer.write_typed(self.builder.new_file_rows(), self.ts)


def _later(make):
    yield from make()  # called once the events before it are written
