"""sysprof's Composer-compatible :class:`Profiler`, plus what it needs to run without Composer.

With Composer, pass ``sysprof.Profiler`` (or Composer's own) as ``Trainer(profiler=...)``; the trainer binds it to
its ``State`` and fires the events. Without Composer, drive it yourself::

    import sysprof
    with sysprof.profile("traces", sys_prof_memory=True) as prof:   # or prof = Profiler(...); prof.start()
        for batch in range(100):
            with prof.marker("step"):
                work()
            prof.step()                                               # one "batch" done
    # traces/ep0-ba<N>-rank0.json now holds the markers and the system samples

The standalone driver fires the same events a trainer would (``init``, ``fit_start``, ``epoch_start``,
``batch_start``; ``batch_end``/``batch_start`` at each :meth:`Profiler.step`; ``fit_end`` and ``close`` at
:meth:`Profiler.stop`) on a small :class:`State` whose :class:`Timestamp` counts batches.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import pathlib
import warnings
from typing import Any, Callable, Dict, Iterator, Optional, Sequence, Union

from sysprof import forks
from sysprof.profiler.callback import Callback, Event
from sysprof.profiler.json_trace_handler import JSONTraceHandler
from sysprof.profiler.marker import Marker
from sysprof.profiler.schedule import RECORDED_ACTIONS, ProfilerAction, action_value
from sysprof.profiler.state import State, Time, Timestamp
from sysprof.profiler.trace_handler import TraceHandler, report_handler_error

__all__ = ["Profiler", "profile", "State", "Timestamp", "Time"]

log = logging.getLogger(__name__)

_TORCH_PROF_DEFAULTS = {  # Composer 0.32.1's torch_prof_* keywords and their defaults
    "torch_prof_folder": "{run_name}/torch_traces",
    "torch_prof_filename": "rank{rank}.{batch}.pt.trace.json",
    "torch_prof_remote_file_name": "{run_name}/torch_traces/rank{rank}.{batch}.pt.trace.json",
    "torch_prof_memory_filename": None,
    "torch_prof_memory_remote_file_name": "{run_name}/torch_memory_traces/rank{rank}.{batch}.pt.memory_trace.html",
    "torch_prof_overwrite": False,
    "torch_prof_use_gzip": False,
    "torch_prof_record_shapes": False,
    "torch_prof_profile_memory": True,
    "torch_prof_with_stack": False,
    "torch_prof_with_flops": True,
    "torch_prof_num_traces_to_keep": -1,
}
_TORCH_TRACING_KEYS = ("torch_prof_record_shapes", "torch_prof_profile_memory", "torch_prof_with_stack",
                       "torch_prof_with_flops", "torch_prof_memory_filename")
_warned_torch = False


def _always_active(state: Any) -> ProfilerAction:
    del state
    return ProfilerAction.ACTIVE


def _as_list(handlers: Any) -> list:
    if handlers is None:
        return []
    if isinstance(handlers, (list, tuple)):
        return list(handlers)
    return [handlers]


_UNSET = object()


class Profiler(Callback):
    """Composer-compatible profiler: markers, trace handlers and the system profiler, usable with or without Composer.

    Args:
        schedule: ``(state) -> ProfilerAction`` (e.g. :func:`sysprof.cyclic_schedule`); evaluated at most once
            per ``state.timestamp`` object and event (see :meth:`current_action`).
        trace_handlers: a :class:`TraceHandler` or a sequence of them.
        sys_prof_cpu, sys_prof_memory, sys_prof_disk, sys_prof_net: build a :class:`sysprof.SystemProfiler`
            with ``profile_cpu=...`` etc. when any is true (as Composer does).
        sys_prof_stats_thread_interval_seconds: the system profiler's sampling interval (float seconds > 0).
        sys_prof_<source> (any other source of the registry: ``sys_prof_gpu``, ``sys_prof_process``, ...),
            sys_prof_per_cpu, sys_prof_rates, sys_prof_intervals, sys_prof_devices: sysprof extensions, passed to the
            system profiler as ``profile_gpu``, ``profile_process``, ``per_cpu``, ``rates``, ``intervals``,
            ``devices`` (the disks and NICs sampled: globs, see :class:`sysprof.Sampler`).
        sys_prof_prometheus_listen: serve the system profiler's samples at ``/metrics`` on this address
            (``SystemProfiler(prometheus_listen=...)``; loopback unless a host is given).
        sys_prof_host_sampling: ``"per_node"`` (host sources on local rank 0 only in a distributed job) or
            ``"every_rank"``: the system profiler's ``host_sampling`` (:mod:`sysprof.distributed`).
        sys_prof_flight, sys_prof_flight_folder: the system profiler's flight recorder (``SystemProfiler(flight=,
            flight_folder=)``, :mod:`sysprof.flight`).
        **torch_prof_kwargs: Composer's ``torch_prof_*`` keywords, accepted for compatibility. sysprof does not
            run the torch profiler: a ``RuntimeWarning`` is issued (once per process) when they ask for torch
            tracing (``torch_prof_record_shapes``, ``_profile_memory``, ``_with_stack``, ``_with_flops`` true or
            ``torch_prof_memory_filename`` set).

    Raises:
        TypeError: an unknown keyword argument.
        ValueError: ``sys_prof_stats_thread_interval_seconds <= 0``.
    """

    def __init__(
        self,
        schedule: Callable[[Any], Any],
        trace_handlers: Union[TraceHandler, Sequence[TraceHandler]],
        sys_prof_cpu: bool = True,
        sys_prof_memory: bool = False,
        sys_prof_disk: bool = False,
        sys_prof_net: bool = False,
        sys_prof_stats_thread_interval_seconds: float = 0.5,
        *,
        sys_prof_per_cpu: bool = False,
        sys_prof_rates: bool = False,
        sys_prof_intervals: Optional[Dict[str, float]] = None,
        sys_prof_devices: Optional[Sequence[str]] = None,
        sys_prof_prometheus_listen: Optional[str] = None,
        sys_prof_host_sampling: str = "per_node",
        sys_prof_flight: Any = None,
        sys_prof_flight_folder: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        global _warned_torch
        from sysprof.profiler.system_profiler import source_switches

        # sys_prof_<source> for any other registry source (gpu, process, ...), as SystemProfiler's profile_<source>
        extra = {k: kwargs.pop(k) for k in list(kwargs) if k.startswith("sys_prof_")}
        sources = source_switches({"profile_" + k[len("sys_prof_"):]: v for k, v in extra.items()}, "Profiler",
                                  prefix="sys_prof_")
        torch_prof_kwargs = kwargs
        for key in torch_prof_kwargs:
            if key not in _TORCH_PROF_DEFAULTS:
                raise TypeError(f"Profiler() got an unexpected keyword argument {key!r}")
        asks_tracing = any(torch_prof_kwargs.get(k) for k in _TORCH_TRACING_KEYS)
        if asks_tracing and not _warned_torch:
            _warned_torch = True
            warnings.warn("sysprof.Profiler does not run the torch profiler; the torch_prof_* arguments are accepted "
                          "for compatibility and ignored (use composer.profiler.Profiler for torch traces)",
                          RuntimeWarning, stacklevel=2)
        self.torch_prof_kwargs = {**_TORCH_PROF_DEFAULTS, **torch_prof_kwargs}
        self.schedule = schedule
        self.state: Any = None
        self._names_to_markers: dict = {}
        self._trace_handlers: list = _as_list(trace_handlers)
        self._callbacks: list = []
        self.resumption_batch_idx = 0
        self.remote_filenames: list = []  # read by Composer's Trainer; sysprof uploads nothing itself
        self._cached_ts: Any = _UNSET
        self._cached_action = "skip"
        self._driving = False
        if sys_prof_cpu or sys_prof_memory or sys_prof_disk or sys_prof_net or any(sources.values()):
            from sysprof.profiler.system_profiler import SystemProfiler

            self._callbacks.append(SystemProfiler(
                profile_cpu=sys_prof_cpu, profile_memory=sys_prof_memory, profile_disk=sys_prof_disk,
                profile_net=sys_prof_net, stats_thread_interval_seconds=sys_prof_stats_thread_interval_seconds,
                per_cpu=sys_prof_per_cpu, rates=sys_prof_rates, intervals=sys_prof_intervals,
                devices=sys_prof_devices, prometheus_listen=sys_prof_prometheus_listen,
                host_sampling=sys_prof_host_sampling, flight=sys_prof_flight, flight_folder=sys_prof_flight_folder,
                **{f"profile_{n}": v for n, v in sources.items()}))

    # ------------------------------------------------------------------ Composer API
    def bind_to_state(self, state: Any) -> None:
        """Attach to ``state``: append the profiler, its system profiler and its trace handlers to
        ``state.callbacks`` (in that order, so system samples reach the handlers before they save)."""
        self.state = state
        self._cached_ts = _UNSET
        state.callbacks.append(self)
        state.callbacks.extend(self._callbacks)
        state.callbacks.extend(self._trace_handlers)

    @property
    def trace_handlers(self) -> list:
        """The trace handlers (a list shared with every marker; assigning replaces its contents)."""
        return self._trace_handlers

    @trace_handlers.setter
    def trace_handlers(self, trace_handlers: Union[TraceHandler, Sequence[TraceHandler]]) -> None:
        self._trace_handlers[:] = _as_list(trace_handlers)

    @property
    def system_profiler(self) -> Any:
        """The :class:`sysprof.SystemProfiler` built from the ``sys_prof_*`` arguments, or ``None``."""
        return self._callbacks[0] if self._callbacks else None

    def record_chrome_json_trace_file(self, filepath: Union[str, pathlib.Path]) -> None:
        """Pass a Chrome trace-event JSON file to every trace handler's ``process_chrome_json_trace_file``."""
        for handler in self._trace_handlers:
            try:
                handler.process_chrome_json_trace_file(pathlib.Path(filepath))
            except Exception as e:  # noqa: BLE001
                report_handler_error(handler, e, "process_chrome_json_trace_file")

    def current_action(self, state: Any) -> str:
        """Value string (``"skip"``, ``"warmup"``, ``"active"``, ``"active_and_save"``) of ``schedule(state)``.

        Cached: the schedule is called again only when ``state.timestamp`` is a different object (Composer and
        :class:`Timestamp` replace it at every batch) or an event has been fired since the last call.

        Raises:
            ValueError: the schedule returned something that is not a profiler action.
        """
        ts = state.timestamp
        if ts is self._cached_ts:
            return self._cached_action
        value = action_value(self.schedule(state))
        self._cached_action = value
        self._cached_ts = ts
        return value

    def run_event(self, event: Any, state: Any, logger: Any) -> None:
        self._cached_ts = _UNSET
        super().run_event(event, state, logger)

    def marker(
        self,
        name: str,
        actions: Sequence[Any] = RECORDED_ACTIONS,
        record_instant_on_start: bool = False,
        record_instant_on_finish: bool = False,
        categories: Union[list, tuple] = (),
    ) -> Marker:
        """Get the :class:`Marker` called ``name``, creating it on first use.

        ``actions`` (sysprof or Composer ``ProfilerAction`` members or their values) and the ``record_instant_*``
        flags are fixed when the marker is created; ``categories`` is updated at every call (as Composer does).

        Raises:
            RuntimeError: :meth:`bind_to_state` (or :meth:`start`) has not been called.
            ValueError: an entry of ``actions`` is not a profiler action.
        """
        if self.state is None:
            raise RuntimeError("Profiler.bind_to_state() must be invoked before the Profiler can be used.")
        marker = self._names_to_markers.get(name)
        if marker is None:
            recorded = frozenset(action_value(a) for a in actions)
            current = self.current_action

            def should_record(state: Any) -> bool:
                return current(state) in recorded

            marker = Marker(state=self.state, should_record=should_record, trace_handlers=self._trace_handlers,
                            name=name, record_instant_on_start=record_instant_on_start,
                            record_instant_on_finish=record_instant_on_finish, categories=categories)
            marker._use_profiler_cache(self, recorded)  # same decision as should_record, without two calls
            self._names_to_markers[name] = marker
        marker.categories = categories
        return marker

    def after_load(self, state: Any, logger: Any) -> None:
        del logger
        self.resumption_batch_idx = int(state.timestamp.batch_in_epoch)

    # ------------------------------------------------------------------ standalone driver
    def _fire(self, event: Event) -> None:
        for cb in list(self.state.callbacks):
            cb.run_event(event, self.state, None)

    def start(self, run_name: str = "sysprof", dataloader_len: Optional[int] = None) -> State:
        """Start a standalone profiling run (no trainer): bind to a new :class:`State` and fire ``init``,
        ``fit_start``, ``epoch_start`` and ``batch_start``.

        Returns:
            State: the state the profiler is bound to.

        Raises:
            RuntimeError: already started, or bound to another (e.g. a Composer trainer's) state.
            OSError: a trace handler cannot write its folder (from ``init``).
        """
        if self._driving:
            raise RuntimeError("Profiler.start() was already called; call stop() first")
        if self.state is not None:
            raise RuntimeError("Profiler is bound to a trainer's state; start()/stop() are for standalone use")
        state = State(run_name=run_name, dataloader_len=dataloader_len)
        state.profiler = self
        self.bind_to_state(state)
        self._driving = True
        # A run still going when the interpreter exits (a script that never calls stop(), a profile() context
        # left open) is stopped while modules still work, so its traces are saved and merged, not truncated.
        self._started_in = forks.generation()
        atexit.register(self._stop_at_exit)
        try:
            for event in (Event.INIT, Event.FIT_START, Event.EPOCH_START, Event.BATCH_START):
                self._fire(event)
        except BaseException:
            self._close_callbacks()
            raise
        return state

    def step(self) -> None:
        """End the current standalone batch (``batch_end``, after advancing the timestamp) and start the next.

        Raises:
            RuntimeError: :meth:`start` has not been called.
        """
        if not self._driving:
            raise RuntimeError("Profiler.step() called before Profiler.start()")
        state = self.state
        state.timestamp = state.timestamp.to_next_batch()
        self._fire(Event.BATCH_END)
        self._fire(Event.BATCH_START)

    def stop(self) -> None:
        """Finish a standalone run: fire ``fit_end``, then ``close`` and ``post_close`` on every callback (a
        callback whose ``close`` raises is logged and skipped, like Composer's engine). Safe to call twice."""
        if not self._driving:
            return
        try:
            self._fire(Event.FIT_END)
        finally:
            self._close_callbacks()

    def _stop_at_exit(self) -> None:
        """atexit: stop a standalone run left running; nothing in a forked child (the run is the parent's)."""
        if forks.generation() != getattr(self, "_started_in", None):
            return
        try:
            self.stop()
        except Exception as e:  # noqa: BLE001 - nothing may escape into the interpreter's exit
            log.error("Error stopping the profiler at exit", exc_info=e)

    def _close_callbacks(self) -> None:
        atexit.unregister(self._stop_at_exit)
        state = self.state
        ok = []
        for cb in list(state.callbacks):
            try:
                cb.close(state, None)
            except Exception as e:  # noqa: BLE001 - like Composer's Engine.close
                log.error("Error running %s.close(); skipping its post_close()", type(cb).__name__, exc_info=e)
            else:
                ok.append(cb)
        for cb in ok:
            try:
                cb.post_close()
            except Exception as e:  # noqa: BLE001
                log.error("Error running %s.post_close()", type(cb).__name__, exc_info=e)
        self._driving = False
        self.state = None
        self._names_to_markers.clear()
        self._cached_ts = _UNSET


@contextlib.contextmanager
def profile(
    folder: str = "sysprof_traces",
    *,
    schedule: Optional[Callable[[Any], Any]] = None,
    trace_handlers: Optional[Sequence[TraceHandler]] = None,
    run_name: str = "sysprof",
    overwrite: bool = False,
    devices: Optional[Sequence[str]] = None,
    **profiler_kwargs: Any,
) -> Iterator[Profiler]:
    """Profile a plain Python loop: a started standalone :class:`Profiler`, stopped on exit.

    Args:
        folder: trace folder for the default :class:`JSONTraceHandler` (files ``ep{epoch}-ba{batch}-rank{rank}.json``
            and ``merged_trace.json``); ignored when ``trace_handlers`` is given.
        schedule: profiler schedule; default: always ACTIVE (one trace file, saved on exit).
        trace_handlers: handlers to use instead of the default JSON handler.
        run_name: the state's run name (fills ``{run_name}``).
        overwrite: let the default handler write into a non-empty folder.
        devices: the disks and network interfaces sampled (``sys_prof_devices``): globs as
            :class:`sysprof.Sampler`'s ``devices``; None: all but loop, RAM and zram disks and ``lo``.
        **profiler_kwargs: :class:`Profiler` keywords (``sys_prof_cpu``, ``sys_prof_memory``, ...,
            ``sys_prof_stats_thread_interval_seconds``, ``sys_prof_host_sampling``: in a distributed job the host
            is sampled once per node, by local rank 0, unless ``"every_rank"``; see :mod:`sysprof.distributed`).

    Yields:
        Profiler: call ``marker(...)`` and ``step()`` on it.

    The default handler writes the system counters changes only (:class:`JSONTraceHandler`'s ``changes_only``).
    """
    if trace_handlers is None:
        trace_handlers = [JSONTraceHandler(folder=folder, remote_file_name=None, merged_trace_remote_file_name=None,
                                           overwrite=overwrite)]
    if devices is not None:
        profiler_kwargs["sys_prof_devices"] = devices
    prof = Profiler(schedule=schedule or _always_active, trace_handlers=list(trace_handlers), **profiler_kwargs)
    prof.start(run_name=run_name)
    try:
        yield prof
    finally:
        prof.stop()
