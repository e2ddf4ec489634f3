"""fork() in one place. A forked child (a DataLoader worker, a multiprocessing or pre-forking server process)
inherits sysprof's objects but none of their threads, and their locks may have been held by those threads.
Objects that care register here; in the child each one's ``_after_fork_in_child()`` runs, in the forking
thread, before any other code of the child. ``generation()`` counts the forks this process descends from.
"""
from __future__ import annotations

import os
import weakref

_generation = 0
_registered: "weakref.WeakSet" = weakref.WeakSet()


def generation() -> int:
    """How many fork()s separate this process from the one that imported sysprof (0 there)."""
    return _generation


def register(obj: object) -> None:
    """Calls ``obj._after_fork_in_child()`` in every forked child while ``obj`` is alive (kept weakly)."""
    _registered.add(obj)


def _after_fork_in_child() -> None:
    global _generation
    _generation += 1
    for obj in list(_registered):
        try:
            obj._after_fork_in_child()
        except Exception:  # noqa: BLE001 - one object's trouble must not stop the child
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
