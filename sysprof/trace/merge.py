"""Merging per-rank Chrome trace files into one (:func:`merge_traces`, Composer's ``merge_traces`` semantics), and the
incremental merger ``JSONTraceHandler`` feeds as cycles are saved (:class:`TraceMerger`)."""

from __future__ import annotations

import os
from typing import Any, Sequence, Union

from .chrome import ChromeTraceWriter, read_trace

__all__ = ["merge_traces", "TraceMerger"]

PathLike = Union[str, "os.PathLike[str]"]


def _meta_value(events: Sequence[dict], name: str) -> Any:
    for event in events:
        if event.get("ph") == "M" and event.get("name") == name:
            return event.get("args", {}).get("value")
    return None


class TraceMerger:
    """Append per-rank trace files to one open writer, with ``pid`` = rank and ``ts`` aligned to the lowest rank.

    For each :meth:`add` call, the offset of rank ``r`` is ``sync(lowest rank) - sync(r)`` where ``sync`` is the
    first ``clock_sync_timestamp_us`` metadata value of that rank's first file in the call (no shift without
    clock-sync metadata). Events without ``pid`` or ``tid``, and torch's "PyTorch Profiler" thread, are dropped; a
    ``thread_sort_index`` metadata event (sort index 99999) precedes the first event of every (rank, tid).
    """

    def __init__(self, writer: ChromeTraceWriter) -> None:
        self._writer = writer
        self._seen_threads: set = set()

    def add(self, files: Sequence[PathLike]) -> None:
        ranks = []
        syncs: dict = {}
        for f in files:  # first pass: rank and clock sync of each file (one file in memory at a time)
            events = read_trace(f)
            rank = _meta_value(events, "global_rank")
            if rank is None:
                raise RuntimeError(f"global rank not found in {f}")
            ranks.append(rank)
            sync = _meta_value(events, "clock_sync_timestamp_us")
            if sync is not None:
                syncs.setdefault(rank, sync)
        base = syncs[min(syncs)] if syncs else None
        write = self._writer.write
        for f, rank in zip(files, ranks):
            shift = base - syncs[rank] if base is not None and rank in syncs else 0
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
                    write({"name": "thread_sort_index", "ph": "M", "pid": rank, "tid": tid,
                           "args": {"sort_index": 99999}})
                write(event)


def merge_traces(output_file: PathLike, *trace_files: PathLike) -> None:
    """Merge per-rank Chrome trace files (Composer's or sysprof's) into ``output_file``.

    Each input's rank is its ``global_rank`` metadata value; events get ``pid`` = rank and ``ts`` shifted by the
    difference between the lowest rank's and the file's ``clock_sync_timestamp_us`` (so all ranks share rank
    ``min``'s clock). Inputs may be ``.json`` or ``.json.gz`` and may be truncated; the output is written with
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
