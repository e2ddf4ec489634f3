"""Perfetto protobuf output on the profiler path: :class:`PerfettoTraceHandler`, the ``.pftrace`` counterpart of
:class:`~sysprof.profiler.json_trace_handler.JSONTraceHandler` (its profiling cycles, file naming, uploads and
fork rules, with :class:`~sysprof.trace.perfetto_write.PerfettoTraceWriter` writing the files)."""
from __future__ import annotations

from typing import Any, Optional

from sysprof.profiler.json_trace_handler import JSONTraceHandler
from sysprof.trace.perfetto import PERFETTO_SUFFIX, TraceTime, protos

__all__ = ["PerfettoTraceHandler"]


class _LazyWriter:
    """The writer class, imported when the first file is opened (``perfetto`` is an optional dependency)."""

    def __get__(self, obj: Any, owner: Any = None):
        from sysprof.trace.perfetto_write import PerfettoTraceWriter

        return PerfettoTraceWriter


class PerfettoTraceHandler(JSONTraceHandler):
    """Write profiler events to Perfetto protobuf traces (``.pftrace``), one file per profiling cycle, as
    :class:`~sysprof.profiler.json_trace_handler.JSONTraceHandler` does for Chrome JSON (same arguments, same
    cycle and naming rules; ``.final`` goes before ``.pftrace``). Events are Composer's (duration, instant, counter,
    metadata), with exact ns timestamps; the system profiler's counters become one Perfetto counter track per
    channel with its unit (see :mod:`sysprof.trace.perfetto`). Read a file back with
    :func:`sysprof.trace.perfetto.read_events`.

    Needs ``pip install 'sysprof[perfetto]'``: checked when the handler is created.

    Args: as :class:`~sysprof.profiler.json_trace_handler.JSONTraceHandler`, except that the cycle files are not
        merged (``merged_trace_filename`` must stay None: merging reads and writes Chrome JSON).

    Raises:
        ImportError: the ``perfetto`` or ``protobuf`` package is missing.
        ValueError: a ``merged_trace_filename`` was given.
    """

    trace_writer = _LazyWriter()
    trace_suffix = PERFETTO_SUFFIX
    _ts = staticmethod(TraceTime)

    def __init__(
        self,
        folder: str = "{run_name}/traces",
        filename: str = "ep{epoch}-ba{batch}-rank{rank}" + PERFETTO_SUFFIX,
        remote_file_name: Optional[str] = "{run_name}/traces/ep{epoch}-ba{batch}-rank{rank}"
        + PERFETTO_SUFFIX,
        merged_trace_filename: Optional[str] = None,
        merged_trace_remote_file_name: Optional[str] = None,
        *,
        overwrite: bool = False,
        num_traces_to_keep: int = -1,
    ) -> None:
        protos()  # fail here, before training, when the extra is missing
        if merged_trace_filename is not None:
            raise ValueError("PerfettoTraceHandler does not merge its files (merged_trace_filename must be None)")
        super().__init__(folder, filename, remote_file_name, None, merged_trace_remote_file_name,
                         overwrite=overwrite, num_traces_to_keep=num_traces_to_keep)
