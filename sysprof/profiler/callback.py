"""Minimal callback protocol shared by sysprof's profiler pieces, usable with or without Composer.

Composer's :class:`composer.core.Callback` dispatches an engine event by calling the method whose name is the
event's value (``"batch_start"`` -> ``callback.batch_start(state, logger)``). :class:`Callback` here implements
the same ``run_event`` dispatch without importing Composer (importing Composer pulls in torch, ~5 s).

When Composer is imported in the process, every subclass of :class:`Callback` is registered as a *virtual*
subclass of Composer's ``Callback`` ABC (``composer.core.Callback.register``), so ``isinstance(cb,
composer.core.Callback)`` is ``True`` for sysprof callbacks. Registration happens at ``import sysprof`` when
Composer was imported first, otherwise when a sysprof callback is constructed (see :func:`register_with_composer`).
"""

from __future__ import annotations

import enum
import sys
from typing import Any

__all__ = ["Callback", "Event", "event_name", "register_with_composer"]


class Event(str, enum.Enum):
    """Training-loop events, with the same string values as Composer 0.32.1's ``composer.core.Event``.

    Only the subset that sysprof's standalone driver (:meth:`sysprof.Profiler.start`) fires is listed; any
    Composer event is accepted by :meth:`Callback.run_event` through its ``.value``.
    """

    INIT = "init"
    FIT_START = "fit_start"
    EPOCH_START = "epoch_start"
    BATCH_START = "batch_start"
    BATCH_END = "batch_end"
    EPOCH_END = "epoch_end"
    FIT_END = "fit_end"


def event_name(event: Any) -> str:
    """Return the method name for ``event``: its ``.value`` (Composer or sysprof ``Event``) or ``str(event)``."""
    value = getattr(event, "value", event)
    return value if isinstance(value, str) else str(value)


_registered: set = set()


def register_with_composer(cls: type) -> None:
    """Register ``cls`` as a virtual subclass of ``composer.core.Callback`` if Composer is already imported.

    Cheap (a dict lookup) when Composer is not imported or ``cls`` is already registered; never imports Composer.
    """
    if cls in _registered:
        return
    mod = sys.modules.get("composer.core.callback")
    if mod is None:
        return
    mod.Callback.register(cls)
    _registered.add(cls)


class Callback:
    """Base class for objects that receive training-loop events (duck-compatible with Composer's ``Callback``).

    Subclasses override the method named after an event (``init``, ``batch_start``, ``batch_end``, ...), each
    taking ``(state, logger)``, plus :meth:`close` ``(state, logger)`` and :meth:`post_close` ``()``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        del args, kwargs
        register_with_composer(Callback)  # covers every subclass

    def run_event(self, event: Any, state: Any, logger: Any) -> None:
        """Call ``self.<event value>(state, logger)``; events without such a method are ignored."""
        handler = getattr(self, event_name(event), None)
        if handler is not None:
            handler(state, logger)

    def init(self, state: Any, logger: Any) -> None:
        """Called on the ``init`` event (before training)."""

    def fit_start(self, state: Any, logger: Any) -> None:
        """Called on the ``fit_start`` event."""

    def epoch_start(self, state: Any, logger: Any) -> None:
        """Called on the ``epoch_start`` event."""

    def batch_start(self, state: Any, logger: Any) -> None:
        """Called on the ``batch_start`` event."""

    def batch_end(self, state: Any, logger: Any) -> None:
        """Called on the ``batch_end`` event (``state.timestamp`` already counts the finished batch)."""

    def epoch_end(self, state: Any, logger: Any) -> None:
        """Called on the ``epoch_end`` event."""

    def fit_end(self, state: Any, logger: Any) -> None:
        """Called on the ``fit_end`` event."""

    def close(self, state: Any, logger: Any) -> None:
        """Called when training finishes (also after an exception); flush and release resources here."""

    def post_close(self) -> None:
        """Called after :meth:`close` has run for every callback."""

    def state_dict(self) -> dict:
        """Checkpoint state (Composer's ``Serializable`` protocol); sysprof callbacks keep none."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Restore checkpoint state (no-op)."""
        del state
