"""The trainer's phases, as the callbacks report them: appended on the training thread, paired off it.

A hook does the least it can on the training thread: one clock read and one ``deque.append`` of a small tuple
(atomic under the GIL, no lock). The recorder's thread replays the appended events in order through the state
machine below and gets finished spans; so the rules live in one place and cost the training loop nothing:

* ``begin(name)`` opens ``name`` (a phase of that name still open is replaced: its start moves);
* ``end(name)`` closes it into a span, with ``args``; nothing when it is not open;
* ``cancel(name)`` forgets it (it did not happen after all);
* ``restart(name)`` moves the start of ``name`` to now when it is open (the time before was no ``name``);
* ``span(name, start, end)`` is a finished one;
* a ``tentative`` phase (a fetch that may not follow: the next batch's ``dataloader``) still open when the
  recording stops is dropped; any other is closed then, with ``args.closed`` the stop's reason.

A hook that does several of these at one instant pushes them as one event: ``push((steps, t_ns))`` with
``steps`` made once by :func:`steps` (e.g. ``steps(("end", "dataloader"), ("begin", "train_batch"))``): the hook's
whole cost is then a clock read and an append, in the hook's own frame.

Every span is on the thread that made the :class:`PhaseLog` (the trainer's, which calls every hook).
"""
from __future__ import annotations

import collections
import threading
import time
from typing import Dict, List, Optional, Tuple

__all__ = ["PhaseLog", "Span", "steps"]

#: (name, start ns, end ns, native tid, args) of a finished phase
Span = Tuple[str, int, int, int, dict]

_BEGIN, _TENTATIVE, _END, _CANCEL, _RESTART, _SPAN = range(6)
#: the events kept between two collections at most (the oldest go first): ~30 k hooks a second at 0.5 s
MAX_PENDING = 1 << 14


_KINDS = {"begin": _BEGIN, "tentative": _TENTATIVE, "end": _END, "cancel": _CANCEL, "restart": _RESTART}
_NO_ARGS: dict = {}


def steps(*ops: Tuple[str, str]) -> tuple:
    """The steps of one :meth:`PhaseLog.push` event: ``(kind, phase name)`` pairs, kind one of ``begin``,
    ``tentative`` (a tentative begin), ``end``, ``cancel``, ``restart``, applied in order at the event's time.

    Raises:
        ValueError: an unknown kind.
    """
    try:
        return tuple((_KINDS[kind], name) for kind, name in ops)
    except KeyError as e:
        raise ValueError(f"unknown phase step {e.args[0]!r} (one of {', '.join(_KINDS)})") from None


class PhaseLog:
    """Phase events from the training thread (:meth:`begin` ... :meth:`span`), paired by :meth:`collect`."""

    def __init__(self) -> None:
        self.tid = threading.get_native_id()
        self._events: collections.deque = collections.deque(maxlen=MAX_PENDING)
        self._open: Dict[str, Tuple[int, bool]] = {}  # name -> (start ns, tentative): the collector's state
        self.closed = False
        #: ``push((steps(...), t_ns))``: several steps at one instant, one append (module docstring)
        self.push = self._events.append

    # ---- the training thread: one clock read and one append each ----
    def begin(self, name: str, t_ns: Optional[int] = None, tentative: bool = False) -> None:
        self._events.append((_TENTATIVE if tentative else _BEGIN, name, time.time_ns() if t_ns is None else t_ns))

    def end(self, name: str, t_ns: Optional[int] = None, **args) -> None:
        self._events.append((_END, name, time.time_ns() if t_ns is None else t_ns, args))

    def cancel(self, name: str) -> None:
        self._events.append((_CANCEL, name, 0))

    def restart(self, name: str, t_ns: Optional[int] = None) -> None:
        self._events.append((_RESTART, name, time.time_ns() if t_ns is None else t_ns))

    def span(self, name: str, start_ns: int, end_ns: int, **args) -> None:
        self._events.append((_SPAN, name, start_ns, args, end_ns))

    # ---- the recorder's thread ----
    def collect(self) -> List[Span]:
        """The spans finished by the events appended since the previous call, in the order they finished."""
        events, out = self._events, []
        if self.closed:
            events.clear()
            return out
        while events:
            ev = events.popleft()
            if type(ev[0]) is tuple:  # a push: its steps at its time
                t = ev[1]
                for kind, name in ev[0]:
                    self._apply((kind, name, t, _NO_ARGS), out)
            else:
                self._apply(ev, out)
        return out

    def _apply(self, ev: tuple, out: List[Span]) -> None:
        opened, tid = self._open, self.tid
        kind, name = ev[0], ev[1]
        if kind <= _TENTATIVE:
            opened[name] = (ev[2], kind == _TENTATIVE)
        elif kind == _END:
            start = opened.pop(name, None)
            if start is not None:
                out.append((name, start[0], ev[2], tid, ev[3]))
        elif kind == _CANCEL:
            opened.pop(name, None)
        elif kind == _RESTART:
            if name in opened:
                opened[name] = (ev[2], opened[name][1])
        else:
            out.append((name, ev[2], ev[4], tid, ev[3]))

    def close(self, now_ns: int, reason: str) -> List[Span]:
        """The last spans: what :meth:`collect` still finds, then every phase still open but the tentative ones,
        ended at ``now_ns`` with ``args.closed = reason``. Later events are ignored."""
        out = self.collect()
        self.closed = True
        for name, (start, tentative) in sorted(self._open.items(), key=lambda kv: kv[1][0]):
            if not tentative:
                out.append((name, start, now_ns, self.tid, {"closed": reason}))
        self._open.clear()
        self._events.clear()
        return out

    def is_open(self, name: str) -> bool:
        """Whether ``name`` was open at the last :meth:`collect` (the recorder's view, not the hooks')."""
        return name in self._open
