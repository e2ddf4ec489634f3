"""Merging per-rank Chrome trace files into one (:func:`merge_traces`, Composer's ``merge_traces`` semantics), and the
incremental merger ``JSONTraceHandler`` feeds as cycles are saved (:class:`TraceMerger`)."""

from __future__ import annotations

import os
from typing import Any, Dict, NamedTuple, Optional, Sequence, Union

from .chrome import ChromeTraceWriter, read_trace
from .events import metadata, to_chrome

__all__ = ["merge_traces", "TraceMerger", "RankClock", "rank_clock", "clock_shifts"]

PathLike = Union[str, "os.PathLike[str]"]


def _meta_value(events: Sequence[dict], name: str) -> Any:
    for event in events:
        if event.get("ph") == "M" and event.get("name") == name:
            return event.get("args", {}).get("value")
    return None


_RANK_EVENT, _CLOCK_COUNTER = "sysprof_rank", "sysprof clock"  # sysprof.distributed's names


class RankClock(NamedTuple):
    """What a trace file says about its rank's clock: ``rank`` (``global_rank``; None without it), ``sync_us``
    (Composer's first ``clock_sync_timestamp_us``), ``offset_us`` / ``uncertainty_us`` (sysprof's measured offset
    to rank 0: the ``sysprof_rank`` metadata's ``clock_offset_us``, else the ``sysprof clock`` counter round with
    the least uncertainty; None when not measured)."""

    rank: Optional[int]
    sync_us: Optional[float]
    offset_us: Optional[float]
    uncertainty_us: Optional[float]


def rank_clock(events: Sequence[dict]) -> RankClock:
    """The :class:`RankClock` of one file's events."""
    rank = _meta_value(events, "global_rank")
    sync = _meta_value(events, "clock_sync_timestamp_us")
    best = None
    for event in events:
        name, args = event.get("name"), event.get("args")
        if not isinstance(args, dict):
            continue
        if event.get("ph") == "M" and name == _RANK_EVENT and "clock_offset_us" in args:
            best = (0.0, float(args["clock_offset_us"]), float(args.get("clock_uncertainty_us", 0.0)))
            break
        if event.get("ph") == "C" and name == _CLOCK_COUNTER and isinstance(args.get("offset_us"), (int, float)):
            u = args.get("uncertainty_us")
            u = float(u) if isinstance(u, (int, float)) else float("inf")
            if best is None or u < best[0]:
                best = (u, float(args["offset_us"]), u)
    offset, uncertainty = (best[1], best[2]) if best is not None else (None, None)
    return RankClock(rank, sync, offset, uncertainty)


def clock_shifts(clocks: Dict[Any, RankClock]) -> Dict[Any, int]:
    """Microseconds to add to each rank's ``ts`` (keyed as ``clocks``) so that all share the lowest rank's clock.

    When every rank has a measured offset: ``offset(rank) - offset(lowest)``; else Composer's rule,
    ``sync(lowest) - sync(rank)`` over the ranks with clock-sync metadata (0 for the others, and for all when the
    lowest has none). sysprof writes ``clock_sync_timestamp_us`` as ``epoch - offset`` when it measured the offset
    (:func:`sysprof.distributed.trace_metadata`), so both rules shift its ranks alike. Shifts are rounded to whole
    microseconds."""
    if not clocks:
        return {}
    low = min(clocks)
    if all(c.offset_us is not None for c in clocks.values()):
        base = clocks[low].offset_us
        return {r: int(round(c.offset_us - base)) for r, c in clocks.items()}
    synced = {r: c.sync_us for r, c in clocks.items() if c.sync_us is not None}
    if not synced:
        return {r: 0 for r in clocks}
    base = synced[min(synced)]
    return {r: int(round(base - synced[r])) if r in synced else 0 for r in clocks}


class TraceMerger:
    """Append per-rank trace files to one open writer, with ``pid`` = rank and ``ts`` aligned to the lowest rank.

    For each :meth:`add` call, rank ``r`` is shifted by :func:`clock_shifts` of the ranks' first files in the call:
    sysprof's measured offsets when every rank has one, else Composer's rule (``sync(lowest rank) - sync(r)``,
    ``sync`` the first ``clock_sync_timestamp_us`` metadata value; no shift without clock-sync metadata). Events without ``pid`` or ``tid``, and torch's "PyTorch Profiler" thread, are dropped; a
    ``thread_sort_index`` metadata event (sort index 99999) precedes the first event of every (rank, tid).
    """

    def __init__(self, writer: ChromeTraceWriter) -> None:
        self._writer = writer
        self._seen_threads: set = set()

    def add(self, files: Sequence[PathLike]) -> None:
        ranks = []
        clocks: dict = {}
        for f in files:  # first pass: rank and clock of each file (one file in memory at a time)
            clock = rank_clock(read_trace(f))
            if clock.rank is None:
                raise RuntimeError(f"global rank not found in {f}")
            ranks.append(clock.rank)
            clocks.setdefault(clock.rank, clock)
        shifts = clock_shifts(clocks)
        write = self._writer.write
        for f, rank in zip(files, ranks):
            shift = shifts[rank]
            for event in read_trace(f):
                if "pid" not in event or "tid" not in event:
                    continue
                tid = event["tid"]
                if "PyTorch Profiler" in str(tid):
                    continue
                if "ts" in event:
                    event["ts"] = event["ts"] + shift
                event["pid"] = rank
                key = (rank, str(tid))
                if key not in self._seen_threads:
                    self._seen_threads.add(key)
                    write(to_chrome(metadata("thread_sort_index", rank, {"sort_index": 99999}, tid), int))
                write(event)


def merge_traces(output_file: PathLike, *trace_files: PathLike) -> None:
    """Merge per-rank Chrome trace files (Composer's or sysprof's) into ``output_file``.

    Each input's rank is its ``global_rank`` metadata value; events get ``pid`` = rank and ``ts`` shifted onto the
    lowest rank's clock (:func:`clock_shifts`: sysprof's measured clock offsets when every rank has one, else the
    difference between the lowest rank's and the file's ``clock_sync_timestamp_us``, as Composer does). Inputs may be ``.json`` or ``.json.gz`` and may be truncated; the output is written with
    :class:`~sysprof.trace.chrome.ChromeTraceWriter` (gzip if it ends in ``.gz``), replacing an existing file.
    Inputs are read one at a time (twice), so memory is bounded by the largest input.

    Raises:
        ValueError: no input files.
        RuntimeError: an input has no ``global_rank`` metadata event.
    """
    if not trace_files:
        raise ValueError("merge_traces needs at least one trace file")
    with ChromeTraceWriter(output_file, overwrite=True) as writer:
        TraceMerger(writer).add(trace_files)
