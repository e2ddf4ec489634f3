"""Markers from any program: ``sysprof.mark(name)`` and ``sysprof.mark_instant(name, **args)``.

A program run under ``sysprof record ... -- COMMAND`` marks its phases in the recorder's trace::

    import sysprof

    with sysprof.mark("checkpoint"):      # a span: a B and an E event on this process's pid and thread's tid
        save(model)

    @sysprof.mark("validate")             # a decorator: every call is a span
    def validate(): ...

    sysprof.mark_instant("epoch", n=3)    # an instant ("i" event, thread scope), args optional

Behaviour:

* **Where markers go.** The recorder creates a directory and names it in the child's environment
  (``SYSPROF_MARKERS``, inherited by the child's own children, exec'd or forked). Each marking process writes its
  own shared-memory ring file there (created at its first marker; a forked child makes its own); the recorder
  drains the rings about every 0.2 s into the trace, on the samples' clock (``time.time_ns()``, the wall clock
  the sampler stamps its rows with). Without ``SYSPROF_MARKERS`` at import, every call is a no-op:
  ``mark(name)`` returns one shared object whose ``with`` does nothing and whose decorator returns the function
  unchanged (where the extension is built, these no-ops are C functions and a C object).
* **Cost.** No system call, no I/O, no lock and no allocation of shared memory on the caller's thread after its
  first marker: a record is written by the extension's writer (``csrc/markers/``) where it is built, else by
  the pure-Python one (the same format; ``SYSPROF_MARKERS_NATIVE=0`` picks it). Figures in
  ``benchmarks/bench_mark.py`` (median and p99 per call). ``mark(name)`` objects are cached by name (up to
  4096 names), so ``with mark("x"):`` in a loop builds nothing; ``m = mark("x")`` once and ``with m:`` saves
  the lookup too. ``mark_instant`` with keyword args pays for their JSON encoding on the caller's thread.
* **Never blocks, never raises.** No lock on the hot path (a slot is claimed by one atomic call under the GIL;
  a signal handler may mark in the middle of its thread's marker). A full ring (4032 unread records), a
  recorder that died, or a ring that cannot be created (or is being created by another thread) drops the marker
  and counts it; the recorder writes the count into the trace's stop stats
  (``stats.markers_dropped``). :func:`dropped` returns this process's count. A ring's pages are reserved before
  its first store, so a full file system (a container's small ``/dev/shm``) never raises SIGBUS: without room,
  the markers are dropped, counted where a one-page stub fits, and the stop event's ``errors["markers"]`` says so
  (``sysprof.markers.ring``).
* **Names.** Any ``str`` (other objects are ``str()``-ed; bytes decoded as UTF-8 with replacement); lone
  surrogates are written escaped (``\\udcxx``); names longer than 200 UTF-8 bytes are cut at a character boundary
  (the event's args then say ``"name_truncated": true``). Instant args are any JSON-serialisable keywords
  (others are ``repr()``-ed); args that do not fit the record with the name (230 bytes together) are dropped
  (``"args_dropped": true``).
* **Spans and threads.** ``mark`` is re-entrant and nestable: one object may be entered again while entered, in
  any thread; each ``with`` writes its begin and end on the calling thread, so spans nest per thread. A span left
  open when the recorder stops (or its process exits) is closed by the recorder at that time.
"""
from __future__ import annotations

import functools
import inspect
import json
import os
import threading

from .. import forks
from .ring import ARGS_DROPPED, BEGIN, END, ENV, INSTANT, PAYLOAD_MAX, Ring, encode_name, native, packer, word

__all__ = ["mark", "mark_instant", "enabled", "dropped"]

_CACHE_MAX = 4096
_encode_args = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=repr).encode


class _Producer:
    """This process's end: its ring, made at its first marker (a forked child makes its own)."""

    def __init__(self, directory):
        self.directory = directory
        self._reset()
        forks.register(self)

    def _reset(self):
        self.pid = os.getpid()
        self.ring = None
        self.failed = False
        self.lost = 0  # dropped without a ring (it could not be made)
        self.lock = threading.Lock()  # only around the ring's creation

    def _after_fork_in_child(self):
        self._reset()  # the parent's ring (and the tids it caches) are not this process's

    def put(self, word, pack, payload):
        try:
            ring = self.ring
            if ring is None:
                ring = self._open()
                if ring is None:
                    self.lost += 1
                    return
            ring.put(word, pack, payload)
        except Exception:  # noqa: BLE001 - a marker never raises into the program
            self.lost += 1

    def _open(self):
        """The ring, made once; None while another thread (or this one, from a signal handler) makes it."""
        if self.failed or not self.lock.acquire(False):
            return None
        try:
            if self.ring is None:
                self.ring = Ring(self.directory, self.pid)
        except Exception:  # noqa: BLE001 - the recorder's directory is gone, /dev/shm full, ...: drop
            self.failed = True
        finally:
            self.lock.release()
        return self.ring

    @property
    def dropped(self):
        return self.lost + (self.ring.dropped if self.ring is not None else 0)


_directory = os.environ.get(ENV) or None
_producer = _Producer(_directory) if _directory else None
_marks: dict = {}


class _Mark:
    """``mark(name)``: a context manager and a decorator writing a span (begin on enter, end on exit)."""

    __slots__ = ("name", "_raw", "_flags", "_begin", "_end", "_instant", "_pack", "__weakref__")

    def __init__(self, name):
        self.name = name
        self._raw, self._flags = encode_name(name)
        self._begin = word(BEGIN, self._flags, len(self._raw))
        self._end = word(END, self._flags, len(self._raw))
        self._instant = word(INSTANT, self._flags, len(self._raw))
        self._pack = packer(len(self._raw))

    def __enter__(self):
        ring = _producer.ring
        if ring is None:
            _producer.put(self._begin, self._pack, self._raw)
        else:  # the hot path: straight to the ring
            try:
                ring.put(self._begin, self._pack, self._raw)
            except Exception:  # noqa: BLE001 - a marker never raises into the program
                _producer.lost += 1
        return self

    def __exit__(self, exc_type, exc, tb):
        ring = _producer.ring
        if ring is None:
            _producer.put(self._end, self._pack, self._raw)
        else:
            try:
                ring.put(self._end, self._pack, self._raw)
            except Exception:  # noqa: BLE001
                _producer.lost += 1
        return False

    def __call__(self, func):
        if inspect.iscoroutinefunction(func):
            @functools.wraps(func)
            async def marked_async(*args, **kwargs):
                with self:
                    return await func(*args, **kwargs)
            return marked_async

        @functools.wraps(func)
        def marked(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return marked

    def __repr__(self):
        return f"sysprof.mark({self.name!r})"


class _NoMark:
    """``mark(name)`` when not under a recorder: nothing on enter or exit; as a decorator, the function itself."""

    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        return False

    def __call__(self, func):
        return func

    def __repr__(self):
        return "sysprof.mark(<not recording>)"


_NO_MARK = _NoMark()


def _make(name):
    m = _Mark(name)
    if len(_marks) < _CACHE_MAX and isinstance(name, str):
        _marks[name] = m
    return m


def mark(name):
    """A span named ``name`` around a ``with`` block or every call of a decorated function (module docstring).
    In a hot loop, ``m = mark("step")`` once and ``with m:`` saves the name's lookup."""
    if _producer is None:
        return _NO_MARK
    try:
        return _marks[name]
    except (KeyError, TypeError):  # TypeError: an unhashable name
        pass
    try:
        return _make(name)
    except Exception:  # noqa: BLE001 - e.g. a name whose str() raises: a marker that marks nothing
        return _NO_MARK


def mark_instant(name, **args) -> None:
    """An instant event named ``name`` (thread scope) with optional JSON-serialisable ``args``."""
    if _producer is None:
        return
    try:
        try:
            m = _marks.get(name)
        except TypeError:  # an unhashable name
            m = None
        if m is None:
            m = _make(name)
        if not args:
            ring = _producer.ring
            if ring is None:
                _producer.put(m._instant, m._pack, m._raw)
            else:
                ring.put(m._instant, m._pack, m._raw)  # raising: counted below
            return
        raw = m._raw
        extra = _encode_args(args).encode("utf-8", "backslashreplace")
        flags = m._flags
        if len(raw) + len(extra) > PAYLOAD_MAX:
            extra, flags = b"", flags | ARGS_DROPPED
        _producer.put(word(INSTANT, flags, len(raw), len(extra)), packer(len(raw) + len(extra)), raw + extra)
    except Exception:  # noqa: BLE001 - a marker never raises into the program (a str() that raises, ...)
        _producer.lost += 1


if _producer is None and native("NO_MARK") is not None:  # the extension's no-ops: fewer Python calls
    mark, mark_instant, _NO_MARK = native("no_mark"), native("no_mark_instant"), native("NO_MARK")


def enabled() -> bool:
    """True when this process was started under a recorder (``SYSPROF_MARKERS`` set at import)."""
    return _producer is not None


def dropped() -> int:
    """Markers this process dropped so far (0 when not recording)."""
    return _producer.dropped if _producer is not None else 0
