"""What the Lightning and Hugging Face callbacks share: their options, which ranks record, where the trace goes,
starting and stopping a :class:`~sysprof.integrations.recorder.Recorder`, and the rule that no failure of sysprof
reaches the training loop (:func:`guarded`).

Ranks (``ranks=``): ``"local_zero"`` (the default) records on local rank 0 of each node, the one process per machine
that the system metrics describe; ``"zero"`` on global rank 0 only; ``"all"`` on every rank. Each recording rank
writes its own file, ``sysprof-rank<global rank>.json``, with its rank in the trace (``global_rank`` metadata, as
Composer's traces), so :func:`sysprof.merge_traces` and ``sysprof report`` take them together.
"""
from __future__ import annotations

import functools
import logging
import os
import pathlib
import sys
from typing import Any, Dict, Optional, Sequence

from sysprof.integrations.recorder import Recorder
from sysprof.integrations.summaries import SummaryWindow

__all__ = ["Session", "guarded", "outermost_frame", "RANKS"]

log = logging.getLogger("sysprof.integrations")

RANKS = ("local_zero", "zero", "all")


def guarded(hook):
    """A callback hook that never raises into the trainer: a failure is logged once per callback (then counted in
    ``callback.failures``) and the hook returns None."""
    @functools.wraps(hook)
    def run(self, *args, **kwargs):
        try:
            return hook(self, *args, **kwargs)
        except Exception as e:  # noqa: BLE001 - profiling never stops training
            session = getattr(self, "session", None)
            if session is not None:
                session.failed(hook.__name__, e)
            return None
    return run


def outermost_frame(match, start=None):
    """The outermost frame of the calling thread's stack (from ``start``, default the caller's) for which
    ``match(frame)`` is true, or None."""
    found, frame = None, start if start is not None else sys._getframe(1)
    while frame is not None:
        try:
            if match(frame):
                found = frame
        except Exception:  # noqa: BLE001 - a frame whose locals cannot be read
            pass
        frame = frame.f_back
    return found


class Session:
    """The options every callback takes, and its recording (:attr:`recorder`, None when this rank does not record).

    Args:
        path: the trace file (``.json``, ``.json.gz``, ``.pftrace``); None: ``sysprof-rank<R>.json`` in the
            trainer's output folder. A file there is never replaced (a free name ``-1``, ``-2``, ... is taken),
            unless ``overwrite``.
        interval: sampling interval in seconds (default 10 ms).
        sources: the sampler sources (None: :data:`~sysprof.integrations.recorder.DEFAULT_SOURCES`, each where
            available); intervals, devices, backend: as :class:`sysprof.Sampler`'s; options: other Sampler
            keywords (``per_cpu=True``, ``process_tree_slots=4``).
        summaries: what is logged at each logging step (:mod:`sysprof.integrations.summaries`): None (the default
            set), False (nothing), or a list of ``"channel:stat"`` / :class:`~sysprof.integrations.summaries.Summary`.
        ranks: which ranks record (module docstring).
        flight: a flight recorder instead of a trace of the whole run (:mod:`sysprof.flight`): the window in
            seconds (``30``), as a time (``"30s"``), or a dict of :class:`~sysprof.flight.FlightOptions`; the dumps
            go into the folder ``path`` (default ``sysprof-flight`` in the trainer's output folder), one line each
            to the ``sysprof.integrations`` logger. An exception that reaches the callback triggers one.

    Raises:
        ValueError: an unknown ``ranks``, a bad summary or ``flight``.
    """

    def __init__(self, path=None, *, interval: float = 0.01, sources: Optional[Sequence[str]] = None,
                 intervals: Optional[Dict[str, float]] = None, devices: Optional[Sequence[str]] = None,
                 backend: str = "auto", summaries: Any = None, ranks: str = "local_zero", overwrite: bool = False,
                 options: Optional[Dict[str, Any]] = None, flight: Any = None) -> None:
        if ranks not in RANKS:
            raise ValueError(f"ranks must be one of {', '.join(RANKS)}, got {ranks!r}")
        self.path = path
        self.settings = dict(interval=interval, sources=sources, intervals=intervals, devices=devices,
                             backend=backend, options=options, overwrite=overwrite)
        self.summaries = summaries
        SummaryWindow(summaries)  # checks the spec now, in the user's code
        self.ranks = ranks
        from sysprof.flight import FlightOptions

        self.flight = FlightOptions.of(flight) if flight is not None else None
        self.recorder: Optional[Recorder] = None
        self.failures = 0
        self.last_path: Optional[pathlib.Path] = None

    def records(self, rank: int, local_rank: int) -> bool:
        return self.ranks == "all" or (rank == 0 if self.ranks == "zero" else local_rank == 0)

    def start(self, folder, framework: str, rank: int = 0, local_rank: int = 0, watch=None) -> Optional[Recorder]:
        """Start recording into ``path`` (or ``folder``/``sysprof-rank<rank>.json``) when this rank records; says
        where on stderr. A recording still running (a run that ended without its end hook) is stopped first.
        A failure is logged and leaves the run unrecorded (None)."""
        self.stop("restarted")
        if not self.records(rank, local_rank):
            return None
        path = pathlib.Path(self.path) if self.path is not None else \
            pathlib.Path(folder or ".") / (f"sysprof-rank{rank}.json" if self.flight is None else "sysprof-flight")
        window = SummaryWindow(self.summaries) if self.summaries is not False else None
        recorder = Recorder(path, summaries=window, framework=framework, rank=rank, flight=self.flight,
                            **self.settings)
        try:
            recorder.start()
        except Exception as e:  # noqa: BLE001 - a bad path or argument: train without sysprof, say why
            log.warning("sysprof: not recording (%s: %s)", type(e).__name__, e)
            print(f"sysprof: not recording: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            return None
        recorder.watch(watch)
        self.recorder = recorder
        self.last_path = recorder.path
        flight = recorder.flight
        where = (f"to {recorder.path}" if flight is None else f"into a {flight.window_s:g} s flight recorder, dumps "
                 f"around anomalies to {recorder.path}")
        print(f"sysprof: recording system metrics every {recorder.sampler.interval * 1e3:g} ms {where}",
              file=sys.stderr, flush=True)
        return recorder

    def stop(self, reason: str = "end", exception: Optional[BaseException] = None) -> None:
        """Stop recording; ``exception``: the one that reached the callback (a flight recorder dumps around it)."""
        recorder, self.recorder = self.recorder, None
        if recorder is not None and recorder._pid == os.getpid():
            if exception is not None and recorder.flight is not None:
                recorder.flight.trigger("exception", f"{type(exception).__name__}: {exception}")
            recorder.stop(reason)

    def summaries_now(self) -> Dict[str, float]:
        """The summaries of the window ending now ({} when not recording or without summaries)."""
        recorder = self.recorder
        return recorder.summaries() if recorder is not None else {}

    def failed(self, where: str, e: BaseException) -> None:
        self.failures += 1
        if self.failures == 1:
            log.warning("sysprof: callback %s failed (%s: %s); training goes on, later failures are counted",
                        where, type(e).__name__, e, exc_info=e)
