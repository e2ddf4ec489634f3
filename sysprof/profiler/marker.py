"""Profiler markers: duration, instant and counter events sent to the profiler's trace handlers."""

from __future__ import annotations

import functools
import time
from typing import Any, Callable, Optional, Sequence, Union

from sysprof.profiler.trace_handler import report_handler_error

__all__ = ["Marker"]

_time_ns = time.time_ns


class Marker:
    """A named event source created by :meth:`sysprof.Profiler.marker` (do not construct it directly).

    Records three kinds of events into every handler of ``trace_handlers``:

    * duration: :meth:`start` / :meth:`finish`, also as ``with marker:`` or as a decorator (``@marker`` and
      ``@marker()``; the decorated function's return value is returned);
    * instant: :meth:`instant`;
    * counter: :meth:`counter` with a ``dict[str, int | float]``.

    An event is recorded only when ``should_record(state)`` is true at the call (by default: the profiler's
    action is WARMUP, ACTIVE or ACTIVE_AND_SAVE). A finish is recorded exactly when its start was, so duration
    events in a trace are always balanced. Event times are ``time.time_ns()`` (wall clock, ns since the epoch);
    ``timestamp`` is ``state.timestamp`` at the call.

    A handler that raises is reported once (see :func:`sysprof.profiler.trace_handler.report_handler_error`) and the
    event still reaches the other handlers.

    Args:
        state: the training state (Composer ``State`` or :class:`sysprof.profiler.State`).
        should_record: ``(state) -> bool``.
        trace_handlers: the profiler's handler list; read at every event, so later changes are seen.
        name: event name.
        record_instant_on_start: also record an instant event at each recorded start.
        record_instant_on_finish: also record an instant event at each recorded finish.
        categories: event categories (list or tuple of str).
    """

    __slots__ = ("state", "should_record", "trace_handlers", "name", "categories", "record_instant_on_start",
                 "record_instant_on_finish", "_started", "_recorded_start", "_profiler", "_recorded")

    def __init__(
        self,
        state: Any,
        should_record: Callable[[Any], bool],
        trace_handlers: Sequence[Any],
        name: str,
        record_instant_on_start: bool,
        record_instant_on_finish: bool,
        categories: Union[list, tuple],
    ) -> None:
        self.state = state
        self.should_record = should_record
        self.trace_handlers = trace_handlers
        self.name = name
        self.categories = categories
        self.record_instant_on_start = record_instant_on_start
        self.record_instant_on_finish = record_instant_on_finish
        self._started = False
        self._recorded_start = False
        self._profiler: Any = None
        self._recorded: frozenset = frozenset()

    def _use_profiler_cache(self, profiler: Any, recorded: frozenset) -> None:
        """Decide recording from ``profiler``'s cached action (``recorded``: action value strings) instead of
        calling ``should_record``; used by :meth:`sysprof.Profiler.marker` for a sub-microsecond hot path."""
        self._profiler = profiler
        self._recorded = recorded

    def _should_record(self) -> bool:
        p = self._profiler
        if p is None:
            return self.should_record(self.state)
        state = self.state
        return (p._cached_action if state.timestamp is p._cached_ts else p.current_action(state)) in self._recorded

    def _duration(self, is_start: bool, t: int, ts: Any) -> None:
        name = self.name
        categories = self.categories
        for h in self.trace_handlers:
            try:
                h.process_duration_event(name=name, categories=categories, is_start=is_start, timestamp=ts,
                                         wall_clock_time_ns=t)
            except Exception as e:  # noqa: BLE001 - a broken handler must not break training
                report_handler_error(h, e, "process_duration_event")
        if self.record_instant_on_start if is_start else self.record_instant_on_finish:
            self._instant(t, ts)

    def _instant(self, t: int, ts: Any) -> None:
        for h in self.trace_handlers:
            try:
                h.process_instant_event(name=self.name, categories=self.categories, timestamp=ts,
                                        wall_clock_time_ns=t)
            except Exception as e:  # noqa: BLE001
                report_handler_error(h, e, "process_instant_event")

    # __enter__/__exit__ hold the implementation (the hot path, one Python frame each); start/finish wrap them.
    def __enter__(self) -> "Marker":
        if self._started:
            raise RuntimeError(
                f"Attempted to start profiler event {self.name}; however, this marker is already started")
        p = self._profiler
        state = self.state
        if p is None:
            record = self.should_record(state)
        else:
            ts = state.timestamp
            record = (p._cached_action if ts is p._cached_ts else p.current_action(state)) in self._recorded
        self._started = True
        self._recorded_start = record
        if record:
            self._duration(True, _time_ns(), state.timestamp)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if not self._started:
            raise RuntimeError(
                f"Attempted to finish profiler event {self.name}; however, this profiler event is not yet started")
        self._started = False
        if self._recorded_start:
            self._recorded_start = False
            self._duration(False, _time_ns(), self.state.timestamp)

    def start(self) -> None:
        """Record the start of a duration event (if recording now).

        Raises:
            RuntimeError: the marker is already started.
        """
        self.__enter__()

    def finish(self) -> None:
        """Record the end of the duration event begun by :meth:`start` (if its start was recorded).

        Raises:
            RuntimeError: the marker is not started.
        """
        self.__exit__(None, None, None)

    def instant(self) -> None:
        """Record an instant event now (if recording now)."""
        if self._should_record():
            self._instant(_time_ns(), self.state.timestamp)

    def counter(self, values: dict) -> None:
        """Record counter ``values`` (``dict[str, int | float]``) now (if recording now)."""
        p = self._profiler
        state = self.state
        if p is None:
            record = self.should_record(state)
        else:
            ts = state.timestamp
            record = (p._cached_action if ts is p._cached_ts else p.current_action(state)) in self._recorded
        if record:
            t = _time_ns()
            ts = state.timestamp
            name = self.name
            categories = self.categories
            for h in self.trace_handlers:
                try:
                    h.process_counter_event(name=name, categories=categories, timestamp=ts, wall_clock_time_ns=t,
                                            values=values)
                except Exception as e:  # noqa: BLE001
                    report_handler_error(h, e, "process_counter_event")

    def __call__(self, func: Optional[Callable[..., Any]] = None) -> Callable[..., Any]:
        """Decorate ``func`` so each call is a duration event; ``@marker()`` (no function) returns the marker."""
        if func is None:
            return self

        @functools.wraps(func)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return wrapped
