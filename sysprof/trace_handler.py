"""Trace handler base class: receives the profiler's duration, instant and counter events.

Signatures and keyword names are Composer 0.32.1's ``composer.profiler.TraceHandler``: markers call the methods
with keyword arguments, so a handler written for Composer works here and vice versa.
"""

from __future__ import annotations

import logging
import pathlib
import warnings
from typing import Any, Union

from sysprof.callback import Callback

__all__ = ["TraceHandler", "report_handler_error"]

log = logging.getLogger(__name__)

_reported: set = set()


def report_handler_error(handler: Any, exc: BaseException, what: str) -> None:
    """Report an exception raised by ``handler`` while doing ``what``, once per handler object.

    The first failure of each handler is issued as a ``RuntimeWarning`` (and logged with its traceback at ERROR
    level); later failures of the same handler are logged at DEBUG level only. Callers continue with the other
    handlers, so one broken custom handler cannot stop sampling or the built-in trace files.
    """
    key = id(handler)
    if key in _reported:
        log.debug("trace handler %s raised again in %s: %r", type(handler).__name__, what, exc)
        return
    _reported.add(key)
    msg = (f"sysprof: trace handler {type(handler).__name__} raised {type(exc).__name__}: {exc} in {what}; "
           "the event was skipped for this handler (further errors from it are logged at DEBUG level)")
    log.error(msg, exc_info=exc)
    warnings.warn(msg, RuntimeWarning, stacklevel=3)


class TraceHandler(Callback):
    """Base class for trace handlers (also a :class:`~sysprof.callback.Callback`, so it sees every event).

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
