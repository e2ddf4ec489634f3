"""Profiler actions and the cyclic profiling schedule (Composer 0.32.1 semantics).

A *schedule* is a callable ``schedule(state) -> ProfilerAction`` evaluated on the training state. ``state`` needs
``state.timestamp.batch_in_epoch`` (anything ``int()`` accepts), ``state.dataloader_len`` (``int`` or ``None``)
and ``state.profiler`` (``None`` or an object with an ``int`` ``resumption_batch_idx``), which Composer's ``State``
and sysprof's standalone :class:`sysprof.profiler.State` both provide.
"""

from __future__ import annotations

import enum
from typing import Any, Callable

__all__ = ["ProfilerAction", "cyclic_schedule", "action_value", "current_action", "RECORDED_ACTIONS",
           "RECORDED_ACTION_VALUES"]


def action_value(action: Any) -> str:
    """Lower-case string value of a sysprof or Composer ``ProfilerAction`` member, or of a plain string.

    Raises:
        ValueError: ``action`` is not one of ``skip``, ``warmup``, ``active``, ``active_and_save``.
    """
    value = getattr(action, "value", action)
    if isinstance(value, str):
        low = value.lower()
        if low in _VALUES:
            return low
    raise ValueError(f"not a profiler action: {action!r}")


class ProfilerAction(enum.Enum):
    """What the profiler does during a batch (values equal Composer's ``ProfilerAction`` values).

    Members compare equal to the Composer member of the same value and to their value string
    (case-insensitive), and hash like their value string, so mixed sysprof/Composer schedules work in either
    profiler.

    Attributes:
        SKIP: record nothing new (a duration started earlier still records its finish).
        WARMUP: record events (markers record by default in WARMUP, ACTIVE and ACTIVE_AND_SAVE).
        ACTIVE: record events.
        ACTIVE_AND_SAVE: record events and save the trace file at the end of the batch.
    """

    SKIP = "skip"
    WARMUP = "warmup"
    ACTIVE = "active"
    ACTIVE_AND_SAVE = "active_and_save"

    def __eq__(self, other: object) -> bool:
        try:
            return self.value == action_value(other)
        except ValueError:
            return False

    def __hash__(self) -> int:
        return hash(self.value)

    @classmethod
    def _missing_(cls, value: object) -> "ProfilerAction":
        try:
            return cls._value2member_map_[action_value(value)]  # type: ignore[return-value]
        except ValueError:
            return None  # type: ignore[return-value]  # Enum then raises ValueError


_VALUES = frozenset(m.value for m in ProfilerAction)

#: the actions that record: a marker's default ``actions`` and the actions in which ``SystemProfiler`` traces its
#: samples (Composer's defaults)
RECORDED_ACTIONS = (ProfilerAction.WARMUP, ProfilerAction.ACTIVE, ProfilerAction.ACTIVE_AND_SAVE)
#: their string values (what :func:`current_action` returns)
RECORDED_ACTION_VALUES = frozenset(a.value for a in RECORDED_ACTIONS)


def cyclic_schedule(
    skip_first: int = 0,
    wait: int = 0,
    warmup: int = 1,
    active: int = 4,
    repeat: int = 1,
) -> Callable[[Any], ProfilerAction]:
    """Return a schedule that profiles cyclic windows of batches in every epoch (Composer's semantics).

    Per epoch, with ``b = int(state.timestamp.batch_in_epoch)`` and ``s = skip_first +
    state.profiler.resumption_batch_idx`` (``skip_first`` alone when ``state.profiler`` is ``None``):
    batches ``b < s`` are SKIP; then cycles of ``wait`` SKIP, ``warmup`` WARMUP and ``active`` ACTIVE batches
    repeat ``repeat`` times (for the whole epoch when ``repeat == 0``), SKIP afterwards. The last batch of a cycle,
    and the last batch of the epoch (``b == state.dataloader_len - 1``) when it is in a cycle's active part, are
    ACTIVE_AND_SAVE.

    Args:
        skip_first: batches skipped at the start of each epoch (int >= 0).
        wait: SKIP batches at the start of each cycle (int >= 0).
        warmup: WARMUP batches after the wait (int >= 0).
        active: ACTIVE batches after the warmup (int >= 0).
        repeat: cycles per epoch; 0 means until the end of the epoch (int >= 0).

    Raises:
        ValueError: a negative argument, or a cycle of length 0.
    """
    for name, v in (("skip_first", skip_first), ("wait", wait), ("warmup", warmup), ("active", active),
                    ("repeat", repeat)):
        if int(v) < 0:
            raise ValueError(f"cyclic_schedule: {name} must be >= 0, got {v}")
    cycle_len = wait + warmup + active
    if cycle_len <= 0:
        raise ValueError("cyclic_schedule: wait + warmup + active must be > 0")

    def schedule(state: Any) -> ProfilerAction:
        batch_idx = int(state.timestamp.batch_in_epoch)
        profiler = getattr(state, "profiler", None)
        start = skip_first + (int(getattr(profiler, "resumption_batch_idx", 0)) if profiler is not None else 0)
        if batch_idx < start:
            return ProfilerAction.SKIP
        if repeat != 0 and batch_idx >= start + cycle_len * repeat:
            return ProfilerAction.SKIP
        pos = (batch_idx - start) % cycle_len
        if pos < wait:
            return ProfilerAction.SKIP
        if pos < wait + warmup:
            return ProfilerAction.WARMUP
        dataloader_len = getattr(state, "dataloader_len", None)
        last_in_epoch = dataloader_len is not None and batch_idx == int(dataloader_len) - 1
        if pos == cycle_len - 1 or last_in_epoch:
            return ProfilerAction.ACTIVE_AND_SAVE
        return ProfilerAction.ACTIVE

    return schedule


def current_action(state: Any) -> str:
    """String value of the profiler action for ``state`` (``state.profiler`` must not be ``None``).

    Uses sysprof's cached :meth:`sysprof.Profiler.current_action` when available, otherwise evaluates
    ``state.profiler.schedule(state)`` (e.g. for Composer's ``Profiler``).
    """
    profiler = state.profiler
    fast = getattr(profiler, "current_action", None)
    if fast is not None:
        return fast(state)
    return action_value(profiler.schedule(state))
