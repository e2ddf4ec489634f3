"""Trace handler base class: receives the profiler's duration, instant and counter events.

Signatures and keyword names are Composer 0.32.1's ``composer.profiler.TraceHandler``: markers call the methods
with keyword arguments, so a handler written for Composer works here and vice versa.
"""

from __future__ import annotations

import logging
import pathlib
import warnings
from typing import Any, Union

from sysprof.profiler.callback import Callback
from sysprof.trace.chrome import counter_args

__all__ = ["TraceHandler", "CounterRows", "report_handler_error", "send_counter_rows", "send_system_events"]

log = logging.getLogger(__name__)

_reported: set = set()


def report_handler_error(handler: Any, exc: BaseException, what: str) -> None:
    """Report an exception raised by ``handler`` while doing ``what``, once per handler object.

    The first failure of each handler is issued as a ``RuntimeWarning`` (and logged with its traceback at ERROR
    level; where warnings are made errors, the log only: this never raises); later failures of the same handler
    are logged at DEBUG level only. Callers continue with the other handlers, so one broken custom handler cannot
    stop sampling or the built-in trace files.
    """
    key = id(handler)
    if key in _reported:
        log.debug("trace handler %s raised again in %s: %r", type(handler).__name__, what, exc)
        return
    _reported.add(key)
    msg = (f"sysprof: trace handler {type(handler).__name__} raised {type(exc).__name__}: {exc} in {what}; "
           "the event was skipped for this handler (further errors from it are logged at DEBUG level)")
    log.error(msg, exc_info=exc)
    try:
        warnings.warn(msg, RuntimeWarning, stacklevel=3)
    except Exception:  # noqa: BLE001 - warnings made errors (-W error, filterwarnings): raising would reach
        pass  # training, or take the other handlers' feed out with this one; the log has it


class CounterRows:
    """A batch of counter events sharing their names: one row per sample, one series per trace event name (built by
    :meth:`sysprof.trace.tracks.TrackLayout.counter_rows`, whose ``series`` it shares).

    Row ``i`` and series ``(name, categories, keys, lo, hi)`` make the event ``name`` at ``times_ns[i]`` with
    values ``{keys[k]: values[i, lo + k]}``, non-finite values left out (no event when none is left).

    Attributes:
        series (list[tuple[str, tuple[str, ...], tuple[str, ...], int, int]]): name, categories, keys, column
            range ``[lo, hi)``; ``hi - lo == len(keys)``.
        times_ns (numpy.ndarray): int64 (n,), wall-clock ns since the epoch at which each row was sampled.
        values (numpy.ndarray): float64 (n, m), in trace units.
        timestamps (list): (n,) training timestamp current at each row.
        units (dict | None): unit of each traced channel (``join_channel(name, key)`` -> unit), for the trace's
            ``"sysprof units"`` metadata event; None: not known.
        track_ns (dict): series index -> int64 (n,): when the values of a series stamped with its own reading time
            (a GPU's) were read (:meth:`sysprof.trace.tracks.TrackLayout.track_times_ns`); its events carry that
            time, once per reading.
    """

    __slots__ = ("series", "times_ns", "values", "timestamps", "units", "track_ns")

    def __init__(self, series: list, times_ns: Any, values: Any, timestamps: list, units: Any = None,
                 track_ns: Any = None) -> None:
        self.series = series
        self.times_ns = times_ns
        self.values = values
        self.timestamps = timestamps
        self.units = units
        self.track_ns = track_ns or {}

    def __len__(self) -> int:
        return len(self.timestamps)

    def row_events(self, i: int, row: Any = None, fresh: Any = None):
        """Yield ``(name, categories, timestamp, wall_clock_time_ns, values)`` for row ``i`` (``row``: its values as
        a list, if already converted): a series in :attr:`track_ns` at its reading time, and only where ``fresh``
        (series index -> bool per row; None: every row) says the reading is new."""
        row = self.values[i].tolist() if row is None else row
        t = int(self.times_ns[i])
        timestamp = self.timestamps[i]
        own = self.track_ns
        for g, (name, categories, keys, lo, hi) in enumerate(self.series):
            if g in own and fresh is not None and not fresh[g][i]:
                continue
            values = counter_args(keys, row[lo:hi])
            if values:
                yield name, categories, timestamp, int(own[g][i]) if g in own else t, values

    def events(self):
        """Yield every event of the batch, row by row, as :meth:`row_events` does (a timed series once per
        reading)."""
        from sysprof.trace.tracks import new_readings

        fresh = {g: new_readings(ns) for g, ns in self.track_ns.items()}
        for i, row in enumerate(self.values.tolist()):
            yield from self.row_events(i, row, fresh)


def send_counter_rows(handler: Any, rows: CounterRows) -> None:
    """Hand ``rows`` to ``handler`` one event at a time (``process_counter_event`` with keyword arguments): what a
    handler without ``process_counter_rows`` (e.g. Composer's) gets."""
    emit = handler.process_counter_event
    for name, categories, timestamp, t, values in rows.events():
        emit(name=name, categories=categories, timestamp=timestamp, wall_clock_time_ns=t, values=values)


def send_system_events(handlers: list, method: str, plain: str, extra: str, events: list) -> None:
    """The system profiler's own events (each a dict of keyword arguments) to each handler: its sysprof extension
    ``method`` (``process_system_instant``, ``process_system_counter``) with them all, or, for a handler without it
    (Composer's), Composer's ``plain`` method without the ``extra`` keyword. One handler's failure is reported once
    and skips the rest of the events for it only."""
    for h in handlers:
        emit = getattr(h, method, None)
        for kw in events:
            try:
                if emit is not None:
                    emit(**kw)
                else:
                    getattr(h, plain)(**{k: v for k, v in kw.items() if k != extra})
            except Exception as e:  # noqa: BLE001
                report_handler_error(h, e, method)
                break


class TraceHandler(Callback):
    """Base class for trace handlers (also a :class:`~sysprof.profiler.callback.Callback`, so it sees every event).

    Subclasses override any of the four ``process_*`` methods; the defaults ignore the event. All times are
    wall-clock nanoseconds since the Unix epoch (``time.time_ns()`` or, for system samples, the time the sample was
    taken); ``timestamp`` is the training-time snapshot (Composer ``Timestamp`` or sysprof ``Timestamp``, with
    ``.epoch`` and ``.batch`` counters) current when the event happened.
    """

    def process_duration_event(
        self,
        name: str,
        categories: Union[list, tuple],
        is_start: bool,
        timestamp: Any,
        wall_clock_time_ns: int,
    ) -> None:
        """Record the start (``is_start=True``) or the end of a duration event named ``name``.

        For one name, a start is always followed by its end before the next start (no interleaving).
        """
        del name, categories, is_start, timestamp, wall_clock_time_ns

    def process_instant_event(
        self,
        name: str,
        categories: Union[list, tuple],
        timestamp: Any,
        wall_clock_time_ns: int,
    ) -> None:
        """Record an instant event."""
        del name, categories, timestamp, wall_clock_time_ns

    def process_system_instant(
        self,
        name: str,
        categories: Union[list, tuple],
        timestamp: Any,
        wall_clock_time_ns: int,
        args: dict,
    ) -> None:
        """sysprof extension: an instant of the system profiler carrying ``args`` of its own (a GPU XID, the GPU
        refresh periods measured at start). The default records it as :meth:`process_instant_event` (Composer's
        instants carry no args); sysprof's handlers write ``args`` as ``record`` does."""
        del args
        self.process_instant_event(name=name, categories=categories, timestamp=timestamp,
                                   wall_clock_time_ns=wall_clock_time_ns)

    def process_system_counter(
        self,
        name: str,
        categories: Union[list, tuple],
        timestamp: Any,
        wall_clock_time_ns: int,
        values: dict,
        units: dict,
    ) -> None:
        """sysprof extension: a counter of the system profiler's own with the ``units`` of its channels
        (``join_channel(name, key)`` -> unit), e.g. a GPU driver sample at the driver's own time
        (:mod:`sysprof.profiler.composer_sink`). The default records it as :meth:`process_counter_event`;
        sysprof's handlers also declare the units in the file, as ``record`` does."""
        del units
        self.process_counter_event(name=name, categories=categories, timestamp=timestamp,
                                   wall_clock_time_ns=wall_clock_time_ns, values=values)

    def process_counter_event(
        self,
        name: str,
        categories: Union[list, tuple],
        timestamp: Any,
        wall_clock_time_ns: int,
        values: dict,
    ) -> None:
        """Record counter values (``dict[str, int | float]``) at ``wall_clock_time_ns``.

        The ``values`` dict may be shared with other handlers: do not modify it.
        """
        del name, categories, timestamp, wall_clock_time_ns, values

    def process_chrome_json_trace_file(self, filepath: pathlib.Path) -> None:
        """Record the events of a Chrome trace-event JSON file written by another tool (e.g. torch)."""
        del filepath

    def process_counter_rows(self, rows: CounterRows) -> None:
        """sysprof extension: record a batch of system-profiler counter events (see :class:`CounterRows`).

        The default calls :meth:`process_counter_event` once per event; handlers may override it to record the
        batch faster. Handlers without this method (e.g. Composer's) get the per-event calls.
        """
        send_counter_rows(self, rows)
