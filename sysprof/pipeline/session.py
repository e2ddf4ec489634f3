"""The one drain loop of sysprof: :class:`Session`.

A session owns a sampler, its producers and its sinks. Each :meth:`Session.pump` drains the sampler once, asks
every producer for the events of that drain (markers, phases, GPU XIDs, interval changes, driver samples: typed
:class:`~sysprof.trace.events.Event` values in wall-clock ns), merges them in time order and hands one
:class:`Chunk` to every sink. A session pumps on a thread of its own every ``period`` seconds
(``start(thread=True)``) or when its owner calls :meth:`pump` (``sysprof record``'s loop, which also waits on the
command; a Composer batch end). :meth:`stop` stops the sampler, pumps the last chunk (``final``) and closes every
sink with the stop event's arguments (:meth:`stop_args` plus the owner's).

Failure rule: a producer or sink that raises is taken out of the stream (its error kept in :attr:`failures`,
``on_failure`` told once); the others go on, and a failed sink is still closed at the stop. Nothing raises from
the drain thread; :meth:`pump` and :meth:`stop` raise nothing a sink did. A stop from inside a pump (a signal
handler that interrupted the owner's pump, a sink, a hook) closes the sinks there and then, without waiting for
the drain thread; the interrupted pump feeds nobody after it.
"""
from __future__ import annotations

import heapq
import logging
import threading
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Union

from sysprof import forks
from sysprof.trace.events import sampler_errors

__all__ = ["Chunk", "Session", "Sink", "Start", "Producer"]

log = logging.getLogger("sysprof.pipeline")


class Start(NamedTuple):
    """What a sink learns when the session starts: the sampler, its channels (column order of every batch) and
    the start time (wall ns)."""

    sampler: Any
    channels: tuple
    t_start_ns: int


class Chunk(NamedTuple):
    """One drain: ``batch`` (the sampler's rows: ``timestamps_ns``, ``values`` rows x channels; maybe empty),
    ``events`` (typed events in time order, metadata first), ``t_ns`` (when it was drained), ``final`` (the last,
    at the stop), ``cycle_end`` (the owner asked a boundary here: Composer saves a profiling cycle)."""

    batch: Any
    events: list
    t_ns: int
    final: bool = False
    cycle_end: bool = False


class Sink:
    """A consumer of the stream. Every method may raise; the session then stops feeding it (see the module)."""

    #: the sink's name in :attr:`Session.failures`
    name = "sink"

    def open(self, start: Start) -> None:
        """The session starts (before the first chunk)."""

    def take(self, chunk: Chunk) -> None:
        """One drain's rows and events."""

    def flush(self) -> None:
        """Every ``flush_period`` seconds: make what was taken durable (a trace file's flush)."""

    def close(self, stop: dict) -> None:
        """The session stopped (after the final chunk); ``stop``: the stop event's arguments."""


class Producer:
    """A source of events besides the sampler's rows: :meth:`take` gives the events of one drain (``batch``: the
    rows drained; ``stop_ns``: the stop's time in the final drain, else None), in time order; :meth:`stop_args`
    adds to the stop event's arguments."""

    name = "producer"

    def take(self, batch: Any, stop_ns: Optional[int]) -> list:
        return []

    def stop_args(self) -> dict:
        return {}


class _Empty:
    """An empty batch for a sampler that is gone (after a fork, or once stopped and drained)."""

    timestamps_ns = ()
    values = ()

    def __len__(self) -> int:
        return 0


def _key(ev) -> int:
    return ev.t_ns if ev.kind != "metadata" else -1


class Session:
    """Sampler -> one drain loop -> sinks (see the module).

    Args:
        sampler: a :class:`sysprof.Sampler` (or anything with ``channels``, ``start``, ``stop``, ``drain``,
            ``stats``, ``errors``).
        sinks, producers: :class:`Sink` and :class:`Producer` objects (more with :meth:`add_sink`,
            :meth:`add_producer` before :meth:`start`).
        period: the drain thread's period (s); flush_period: sinks' ``flush`` at least this often (s).
        on_failure: ``on_failure(what, exc)`` once per failed sink or producer (``what``: its name).
        name: the drain thread's name.
    """

    def __init__(self, sampler: Any, sinks: Sequence[Sink] = (), producers: Sequence[Producer] = (), *,
                 period: float = 0.5, flush_period: float = 1.0,
                 on_failure: Optional[Callable[[str, BaseException], None]] = None,
                 name: str = "sysprof-drain") -> None:
        self.sampler = sampler
        self.sinks: List[Sink] = list(sinks)
        self.producers: List[Producer] = list(producers)
        self.period = float(period)
        self.flush_period = float(flush_period)
        self.on_failure = on_failure
        self.name = name
        self.failures: Dict[str, str] = {}
        self.rows = 0  # sample rows drained
        self.t_start_ns = 0
        self.channels: tuple = ()
        self._failed: set = set()  # ids of failed sinks and producers
        self._lock = threading.RLock()
        self._stopped = threading.Event()
        self._closed = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._last_flush = 0.0
        self._pumping: Optional[int] = None  # the thread inside pump() (holding the lock), else None
        self._hooks: List[Callable[[Chunk], None]] = []
        forks.register(self)

    def _after_fork_in_child(self) -> None:
        """A forked child inherits the parent's session but not its thread: it must never drain, write or stop."""
        self._stopped.set()
        self._closed.set()
        self.sampler = None
        self._thread = None
        self.sinks, self.producers = [], []
        self._lock = threading.RLock()
        self._pumping = None

    # ---- assembly ----
    def add_sink(self, sink: Sink) -> Sink:
        self.sinks.append(sink)
        return sink

    def add_producer(self, producer: Producer) -> Producer:
        self.producers.append(producer)
        return producer

    def after_pump(self, hook: Callable[[Chunk], None]) -> None:
        """Call ``hook(chunk)`` after every pump, under the session's lock (the owner's per-drain work)."""
        self._hooks.append(hook)

    @property
    def running(self) -> bool:
        return self.t_start_ns != 0 and not self._stopped.is_set()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def live_sinks(self) -> List[Sink]:
        return [s for s in self.sinks if id(s) not in self._failed]

    # ---- start ----
    def start(self, *, thread: bool = True, start_sampler: bool = True, t_start_ns: Optional[int] = None) -> None:
        """Open the sinks, start the sampler (unless the owner did) and, with ``thread``, the drain thread.

        Raises: what a sink's :meth:`Sink.open` or the sampler's start raises (nothing has been written then)."""
        self.channels = tuple(self.sampler.channels)
        self.t_start_ns = int(t_start_ns) if t_start_ns is not None else time.time_ns()
        start = Start(self.sampler, self.channels, self.t_start_ns)
        for sink in self.sinks:
            sink.open(start)
        if start_sampler:
            self.sampler.start()
        self._stopped.clear()
        self._last_flush = time.monotonic()
        if thread:
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while not self._stopped.wait(self.period):
            try:
                self.pump()
            except Exception as e:  # noqa: BLE001 - the drain thread never dies of a drain
                self._fail("drain", self, e)

    # ---- the drain ----
    def pump(self, *, cycle_end: bool = False, _stop_ns: Optional[int] = None) -> Optional[Chunk]:
        """Drain once and feed every sink; returns the chunk (None when the session has no sampler or is closed)."""
        with self._lock:
            outer, self._pumping = self._pumping, threading.get_ident()
            try:
                return self._pump(cycle_end, _stop_ns)
            finally:
                self._pumping = outer

    def _pump(self, cycle_end: bool, _stop_ns: Optional[int]) -> Optional[Chunk]:
        sampler = self.sampler
        if sampler is None or self._closed.is_set():
            return None
        try:
            batch = sampler.drain()
        except Exception as e:  # noqa: BLE001 - e.g. a sampler already torn down: no rows this time
            self._fail("sampler", sampler, e)
            batch = _Empty()
        self.rows += len(batch)
        events = self._events(batch, _stop_ns)
        chunk = Chunk(batch, events, time.time_ns(), _stop_ns is not None, cycle_end)
        for sink in self.sinks:
            if self._closed.is_set():  # a stop inside this pump (a signal handler's) closed the sinks
                return chunk
            if id(sink) not in self._failed:
                try:
                    sink.take(chunk)
                except Exception as e:  # noqa: BLE001 - one sink never stops the others
                    if self._closed.is_set():  # closed under it by that stop: not the sink's failure
                        return chunk
                    self._fail(getattr(sink, "name", type(sink).__name__), sink, e)
        if self._closed.is_set():
            return chunk
        now = time.monotonic()
        if _stop_ns is None and now - self._last_flush >= self.flush_period:
            self._last_flush = now
            self.flush()
        for hook in self._hooks:
            try:
                hook(chunk)
            except Exception as e:  # noqa: BLE001
                self._fail("hook", hook, e)
        return chunk

    def _events(self, batch: Any, stop_ns: Optional[int]) -> list:
        lists = []
        for p in self.producers:
            if id(p) in self._failed:
                continue
            try:
                got = p.take(batch, stop_ns)
            except Exception as e:  # noqa: BLE001 - one producer never stops the rows or the others
                self._fail(getattr(p, "name", type(p).__name__), p, e)
                continue
            if got:
                lists.append(got)
        if not lists:
            return []
        if len(lists) == 1:
            return list(lists[0])
        return list(heapq.merge(*lists, key=_key))

    def flush(self) -> None:
        """Every live sink's :meth:`Sink.flush`."""
        with self._lock:
            for sink in self.sinks:
                if id(sink) not in self._failed:
                    try:
                        sink.flush()
                    except Exception as e:  # noqa: BLE001
                        self._fail(getattr(sink, "name", type(sink).__name__), sink, e)

    def _fail(self, what: str, obj: Any, e: BaseException) -> None:
        self._failed.add(id(obj))
        if what not in self.failures:
            self.failures[what] = f"{type(e).__name__}: {e}"
            if self.on_failure is not None:
                try:
                    self.on_failure(what, e)
                except Exception:  # noqa: BLE001
                    pass
            else:
                log.warning("sysprof: %s failed (%s: %s); the rest of the recording goes on", what,
                            type(e).__name__, e)

    # ---- stop ----
    def stop_args(self) -> dict:
        """The stop event's arguments every recording has: the sampler's statistics and errors, the samples
        drained, the elapsed time, the intervals as they ended, and each producer's (interval changes, GPU
        refresh periods, driver samples; a producer's dict adds to the dict of the same key: the markers' counts to
        ``stats``, their problems to ``errors``)."""
        sampler = self.sampler
        out: Dict[str, Any] = {"samples_written": self.rows,
                               "elapsed_s": (time.time_ns() - self.t_start_ns) / 1e9 if self.t_start_ns else 0.0}
        if sampler is not None:
            for key, read in (("stats", lambda: dict(sampler.stats)), ("errors", lambda: sampler_errors(sampler)),
                              ("intervals_s", lambda: dict(getattr(sampler, "intervals", {}) or {}))):
                try:
                    out[key] = read()
                except Exception:  # noqa: BLE001 - what cannot be read is left empty
                    out[key] = {}
        for p in self.producers:
            try:
                for key, value in p.stop_args().items():
                    mine = out.get(key)
                    out[key] = {**mine, **value} if isinstance(mine, dict) and isinstance(value, dict) else value
            except Exception as e:  # noqa: BLE001
                self._fail(getattr(p, "name", type(p).__name__), p, e)
        return out

    def stop(self, extra: Union[None, dict, Callable[[dict], Optional[dict]]] = None, *,
             stop_sampler: bool = True) -> Optional[dict]:
        """Stop the drain thread and the sampler, pump the final chunk, close every sink (failed ones too) with
        :meth:`stop_args` updated by ``extra`` (a dict, or ``extra(args)`` called after the final drain: it may
        change ``args`` in place or return a dict to add; one that raises adds nothing). Idempotent and never
        raises; returns the stop arguments (None when it had stopped before)."""
        if self._closed.is_set():
            return None
        self._stopped.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread() and not self._pumping_here():
            thread.join()  # (not from inside a pump of this thread: the drain thread may wait for its lock)
        with self._lock:
            if self._closed.is_set():
                return None
            sampler = self.sampler
            if sampler is not None and stop_sampler:
                try:
                    sampler.stop()
                except Exception as e:  # noqa: BLE001
                    self._fail("sampler", sampler, e)
            try:
                self.pump(_stop_ns=time.time_ns())
            except Exception as e:  # noqa: BLE001
                self._fail("drain", self, e)
            args = self.stop_args()
            if callable(extra):
                try:
                    extra = extra(args)
                except Exception as e:  # noqa: BLE001 - the sinks still close
                    self._fail("stop", extra, e)
                    extra = None
            if extra:
                args.update(extra)
            for sink in self.sinks:
                try:
                    sink.close(args)
                except Exception as e:  # noqa: BLE001 - the next sink still closes
                    self._fail(getattr(sink, "name", type(sink).__name__), sink, e)
            self._closed.set()
            return args

    def _pumping_here(self) -> bool:
        """Whether this thread is inside :meth:`pump` (holds the lock): a stop from a signal handler that
        interrupted a pump, or from a sink or hook. The drain thread then ends by itself (it finds the session
        closed)."""
        return self._pumping == threading.get_ident()

    def wait_closed(self, timeout: Optional[float] = None) -> bool:
        return self._closed.wait(timeout)
