"""Chrome trace-event JSON output in Composer's layout (:class:`JSONTraceHandler`); rank merging
(:func:`merge_traces`) lives in :mod:`sysprof.trace.merge` and is re-exported here.

Event layout (identical to Composer 0.32.1's ``JSONTraceHandler``; one JSON object per event):

* duration: ``{"name", "cat", "ph": "B"|"E", "ts", "pid", "tid", "args": {"epoch", "batch"}}``
* instant: ``{"name", "cat", "ph": "i", "ts", "pid", "tid", "args": {"epoch", "batch"}, "s": "p"}``; the system
  profiler's (``gpu xid``, ``sysprof gpu_refresh``) as ``sysprof record`` writes them (``"s": "g"``, their args)
* counter (``ph`` ``C``): ``{"name", "cat", "ph", "ts", "pid", "tid", "args": {<key>: <number>, ...}}``; the
  system profiler's counters changes only by default (see :class:`JSONTraceHandler`'s ``changes_only``); the GPU
  driver's own samples (``gpu/<i>/power_samples_watts``, ...) one event each at the driver's time, as ``record``
* metadata (once per profiling cycle): ``{"name", "cat": "", "ph": "M", "ts", "pid", "tid", "args"}`` named
  ``process_name``, ``thread_name``, ``thread_sort_index``, ``global_rank``, ``process_sort_index``,
  ``clock_sync_timestamp_us`` and ``clock_sync_error_bound``; with system-profiler counters also sysprof's units
  event (:data:`sysprof.trace.schema.UNITS_EVENT`, ``args.units``: channel -> unit), once per file and channel set.

``ts`` is an integer: microseconds since the Unix epoch (``wall_clock_time_ns // 1000``); ``pid`` is the global
rank; ``tid`` is the OS process id; ``cat`` is the categories joined with ``,``; ``epoch``/``batch`` are the
training timestamp's counters at the event.
"""

from __future__ import annotations

import collections
import os
import pathlib
import sys
import threading
import time
from typing import Any, Optional, Union

from sysprof import distributed, forks
from sysprof.trace.gpu_events import instant_event
from sysprof.trace.chrome import ChromeTraceWriter, counter_args, is_gzip_path, read_trace
from sysprof.trace.merge import TraceMerger, merge_traces
from sysprof.trace.schema import units_event
from sysprof.trace.tracks import RowTemplate, counter_event
from sysprof.profiler.schedule import current_action
from sysprof.profiler.trace_handler import CounterRows, TraceHandler

__all__ = ["JSONTraceHandler", "merge_traces", "format_name", "dist_info"]

PathLike = Union[str, "os.PathLike[str]"]

_MAX_PENDING = 8192  # events buffered before they are encoded and written (bounds memory)
_B, _E, _I, _C, _RAW, _META, _TEXT, _UNITS = range(8)  # _RAW: external event; _META: our metadata; _TEXT: encoded
# _UNITS: the units metadata event (re-declared in the next file when the file it went to is saved)
_PH = ("B", "E", "i")


def _torch_dist() -> Any:
    """``torch.distributed`` if torch is already imported and a process group is initialized, else ``None``."""
    td = sys.modules.get("torch.distributed")
    if td is not None and td.is_available() and td.is_initialized():
        return td
    return None


def dist_info() -> dict:
    """Distributed settings as Composer reads them: ``rank``, ``local_rank``, ``world_size``,
    ``local_world_size``, ``node_rank`` (ints, from the environment variables ``RANK``, ``LOCAL_RANK``,
    ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``NODE_RANK``; defaults 0, 0, 1, 1, 0; rank and world size come from
    ``torch.distributed`` when a process group is initialized)."""
    env = os.environ
    info = {
        "rank": int(env.get("RANK", 0)),
        "local_rank": int(env.get("LOCAL_RANK", 0)),
        "world_size": int(env.get("WORLD_SIZE", 1)),
        "local_world_size": int(env.get("LOCAL_WORLD_SIZE", 1)),
        "node_rank": int(env.get("NODE_RANK", 0)),
    }
    td = _torch_dist()
    if td is not None:
        info["rank"] = td.get_rank()
        info["world_size"] = td.get_world_size()
    return info


class _KeepMissing(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def format_name(fmt: str, run_name: str, timestamp: Any = None) -> str:
    """Fill a Composer-style name template.

    Available fields: ``run_name``, the :func:`dist_info` keys and, when ``timestamp`` is given, ``epoch``,
    ``batch``, ``batch_in_epoch``, ``sample``, ``sample_in_epoch``, ``token``, ``token_in_epoch`` (ints).
    Unknown fields are left in place (like Composer's ``partial_format``).
    """
    fields = _KeepMissing(run_name=run_name, **dist_info())
    if timestamp is not None:
        for key in ("epoch", "batch", "batch_in_epoch", "sample", "sample_in_epoch", "token", "token_in_epoch"):
            value = getattr(timestamp, key, None)
            if value is not None:
                fields[key] = int(value)
    return fmt.format_map(fields)


def _ensure_folder_is_empty(folder: PathLike) -> None:
    """Raise ``FileExistsError`` if ``folder`` holds a non-hidden file (recursively; hidden folders skipped)."""
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if not name.startswith("."):
                raise FileExistsError(f"{folder} is not empty; {os.path.join(root, name)} exists.")


def _counter_value(t: Any) -> int:
    """``int`` of a Composer ``Time`` (via ``.value``) or of a sysprof counter."""
    return int(getattr(t, "value", t))


class JSONTraceHandler(TraceHandler):
    """Write profiler events to Chrome trace-event JSON files, one file per profiling cycle (Composer's layout).

    A profiling cycle starts at the first ``batch_start`` whose action is not SKIP and ends at the ``batch_end`` of an
    ACTIVE_AND_SAVE batch, when the cycle's file is saved as ``{folder}/{filename}`` (formatted with
    :func:`format_name` and the timestamp at that ``batch_end``). Events are streamed: they are buffered (at most
    8192) and then encoded into a hidden ``.sysprof-rank<r>-<pid>.partial.json`` file in the folder, which is renamed
    when the cycle is saved. Events recorded after the last save are saved by :meth:`close` (name formatted with the
    final timestamp; ``.final`` is inserted before ``.json`` of the file name if this run already saved a file of that
    name, or, without ``overwrite``, if that file exists; with ``overwrite`` an older run's file is replaced), unless
    they are only the cycle's metadata (metadata events are added to such a file if its cycle had none).

    Args:
        folder: folder template (``{run_name}`` and dist fields); created at ``init``.
        filename: per-cycle file name template, relative to ``folder``; ending in ``.gz`` gives gzip files.
        remote_file_name: upload name template passed to ``logger.upload_file`` when the logger has it
            (Composer's ``Logger``); ``None`` disables uploads.
        merged_trace_filename: name (in ``folder``) of the trace merging every saved cycle of the ranks on this
            node, written by local rank 0 as cycles are saved (see :func:`merge_traces`); ``None`` disables it.
        merged_trace_remote_file_name: upload name of the merged trace; ``None`` disables the upload.
        overwrite: allow a non-empty folder (otherwise ``init`` raises ``FileExistsError``).
        num_traces_to_keep: how many saved cycle files to keep on disk (oldest removed first); ``-1`` keeps all.
        changes_only: the system profiler's counters (:meth:`process_counter_rows`) as ``sysprof record`` writes them:
            a counter's event only at a sample where one of its values changed (an idle disk or NIC costs nothing),
            plus every counter at the first sample of each cycle file and again at its last (so each saved file stands
            alone, and a value holds until the next event, as Chrome's and Perfetto's counter tracks draw it, and as
            Composer's tools read it). NaN and +/-inf keys are left out; where all of a counter's keys turn unknown,
            an event with ``"args": {}`` ends its old values. ``False``: an event per counter and sample (Composer's
            density; an event with no finite key is not written). Counters given one at a time
            (``process_counter_event``, markers) are always written as given.

    Raises (at ``init``, before training):
        FileExistsError: the folder is not empty and ``overwrite`` is false.
        OSError: the folder cannot be created or written (e.g. ``PermissionError``, ``NotADirectoryError``).

    Attributes:
        saved_traces (list[tuple[Timestamp, list[pathlib.Path]]]): timestamp of each save and the files saved
            then, indexed by global rank.
    """

    #: the writer of the cycle files and the suffix they end in (:class:`~sysprof.profiler.PerfettoTraceHandler`'s
    #: differ); a writer without ``write_encoded`` gets the system counters as event dicts
    trace_writer: Any = ChromeTraceWriter
    trace_suffix = ".json"

    @staticmethod
    def _ts(wall_ns: int) -> Any:
        """An event's ``ts`` for wall-clock ``wall_ns``: integer µs, as in Composer's layout."""
        return wall_ns // 1000

    def __init__(self, folder: str = "{run_name}/traces", filename: str = "ep{epoch}-ba{batch}-rank{rank}.json",
                 remote_file_name: Optional[str] = "{run_name}/traces/ep{epoch}-ba{batch}-rank{rank}.json",
                 merged_trace_filename: Optional[str] = "merged_trace.json",
                 merged_trace_remote_file_name: Optional[str] = "{run_name}/traces/merged_trace.json", *,
                 overwrite: bool = False, num_traces_to_keep: int = -1, changes_only: bool = True) -> None:
        super().__init__()
        self.folder = folder
        self.filename = filename
        self.remote_file_name = remote_file_name
        self.merged_trace_filename = merged_trace_filename
        self.merged_trace_remote_file_name = merged_trace_remote_file_name
        self.overwrite = overwrite
        self.num_traces_to_keep = num_traces_to_keep
        self.changes_only = bool(changes_only)
        self.saved_traces: list = []
        self._saved_paths: set = set()  # files this run saved (the final save never replaces one of them)

        self._pending: collections.deque = collections.deque()
        self._lock = threading.RLock()
        forks.register(self)
        self._folder: Optional[str] = None
        self._writer: Optional[ChromeTraceWriter] = None
        self._merged_writer: Optional[ChromeTraceWriter] = None
        self._merger: Optional[TraceMerger] = None
        self._rank = 0
        self._tid = os.getpid()
        self._is_trace_active = False
        self._save_at_batch_end = False
        self._cycle_events = 0  # non-metadata events written to the current partial file
        self._cycle_has_metadata = False
        self._template: Optional[RowTemplate] = None  # of the last CounterRows.series seen
        self._units_for: Any = None  # the units last declared in the current partial file
        self._declared: set = set()  # the channels of process_system_counter declared in it
        self._forked = False  # inherited through fork(): the files are the parent's

    def _after_fork_in_child(self) -> None:
        """A forked child (a DataLoader worker, a pre-forked server) inherits this handler with the parent's files
        and locks, possibly held by the parent's threads: here it writes, saves, moves and removes nothing."""
        self._lock = threading.RLock()
        self._forked = True
        self._pending.clear()

    # ------------------------------------------------------------------ events (hot path: append only)
    def process_duration_event(self, name: str, categories: Union[list, tuple], is_start: bool, timestamp: Any,
                               wall_clock_time_ns: int) -> None:
        pending = self._pending
        pending.append((_B if is_start else _E, name, categories, wall_clock_time_ns, timestamp))
        if len(pending) > _MAX_PENDING:
            self._write_pending()

    def process_instant_event(self, name: str, categories: Union[list, tuple], timestamp: Any,
                              wall_clock_time_ns: int) -> None:
        pending = self._pending
        pending.append((_I, name, categories, wall_clock_time_ns, timestamp))
        if len(pending) > _MAX_PENDING:
            self._write_pending()

    def process_system_instant(self, name: str, categories: Union[list, tuple], timestamp: Any,
                               wall_clock_time_ns: int, args: dict) -> None:
        """An instant with ``args`` of its own, as ``sysprof record`` writes it; ``pid`` the rank, ``tid`` ours."""
        event = instant_event(name, self._ts(wall_clock_time_ns), self._rank, dict(args), tid=self._tid)
        self._pending.append((_RAW, dict(event, cat=",".join(categories))))

    def process_system_counter(self, name: str, categories: Union[list, tuple], timestamp: Any,
                               wall_clock_time_ns: int, values: dict, units: dict) -> None:
        """A counter of the system profiler's own (a GPU driver sample), written as :meth:`process_counter_event`
        after a ``"sysprof units"`` event declaring those of ``units`` this file has not declared yet (as ``record``
        does)."""
        if self._forked:
            return
        with self._lock:  # a drain thread's counters and the training thread's save do not interleave
            new = {c: u for c, u in units.items() if c not in self._declared}
            if new:
                self._declared.update(new)
                event = units_event(new, self._rank)
                event["tid"] = self._tid
                self._pending.append((_UNITS, event))
            self.process_counter_event(name=name, categories=categories, timestamp=timestamp,
                                       wall_clock_time_ns=wall_clock_time_ns, values=values)

    def process_counter_event(self, name: str, categories: Union[list, tuple], timestamp: Any,
                              wall_clock_time_ns: int, values: dict) -> None:
        pending = self._pending
        pending.append((_C, name, categories, wall_clock_time_ns, values.copy()))
        if len(pending) > _MAX_PENDING:
            self._write_pending()

    def process_counter_rows(self, rows: CounterRows) -> None:
        """Record a batch of system-profiler counters as text (:class:`~sysprof.trace.tracks.RowTemplate`:
        templates for all-finite rows; the text is identical to per-event encoding), changes only unless
        ``changes_only=False``; a writer without encoded text (.pftrace: it keeps changes only itself) gets the
        counter events. The units of ``rows`` are declared once per file and channel set (a ``"sysprof units"``
        metadata event)."""
        if self._forked:
            return
        with self._lock:  # a drain thread's batch and the training thread's save do not interleave
            pending = self._pending
            if rows.units and rows.units is not self._units_for:
                self._units_for = rows.units
                event = units_event(rows.units, self._rank)
                event["tid"] = self._tid  # the training loop's thread, as every event of Composer's layout
                pending.append((_UNITS, event))
            if not hasattr(self.trace_writer, "write_encoded"):
                pending.extend((_C, name, cats, t, values) for name, cats, _, t, values in rows.events())
            else:
                template = self._template
                if template is None or template.series is not rows.series:
                    self._finish_rows()  # the old channel set's last values end here
                    template = self._template = RowTemplate(rows.series, self._rank, self._tid, self.changes_only,
                                                            timed=rows.track_ns)
                for text, n in template.render(rows.times_ns, rows.values, rows.track_ns):
                    pending.append((_TEXT, text, n))
            self._write_pending()  # off the hot path (called from a drain): write now, memory stays per-batch

    def _new_file_units(self) -> None:
        """A new file: it declares its units again."""
        self._units_for = None
        self._declared = set()

    def _finish_rows(self) -> None:
        """Changes only: queue the closing row of the counters (the last sample's values of every counter not
        written at it) and start the next file afresh (its first sample writes every counter)."""
        template = self._template
        if template is None or template.changes is None:
            return
        for text, n in template.finish():
            self._pending.append((_TEXT, text, n))
        template.changes.reset()

    def process_chrome_json_trace_file(self, filepath: pathlib.Path) -> None:
        """Copy every event of the Chrome trace at ``filepath`` into the current cycle, with ``pid`` set to the
        global rank (tolerates a truncated file, see :func:`sysprof.trace.chrome.read_trace`)."""
        events = read_trace(filepath)
        with self._lock:
            for event in events:
                event["pid"] = self._rank
                self._pending.append((_RAW, event))
            self._write_pending()

    # ------------------------------------------------------------------ encoding
    def _event(self, rec: tuple) -> Optional[dict]:
        """The event of a buffered record; None for a counter with no finite value (nothing to write)."""
        kind = rec[0]
        if kind == _RAW or kind == _META or kind == _UNITS:
            return rec[1]
        _, name, categories, wall_ns, extra = rec
        if kind == _C:
            args = counter_args(extra.keys(), extra.values())  # NaN and +/-inf left out
            if not args:
                return None
            return counter_event(name, self._ts(wall_ns), self._rank, self._tid, args, ",".join(categories))
        event = {"name": name, "cat": ",".join(categories), "ph": _PH[kind], "ts": self._ts(wall_ns),
                 "pid": self._rank, "tid": self._tid,
                 "args": {"epoch": _counter_value(extra.epoch), "batch": _counter_value(extra.batch)}}
        if kind == _I:
            event["s"] = "p"
        return event

    def _open_writer(self) -> None:
        assert self._folder is not None
        suffix = self.trace_suffix + (".gz" if is_gzip_path(self.filename) else "")
        tmp = os.path.join(self._folder, f".sysprof-rank{self._rank}-{os.getpid()}.partial{suffix}")
        self._writer = self.trace_writer(tmp, overwrite=True)
        self._cycle_events = 0

    def _write_pending(self) -> None:
        """Encode and write every buffered event (no-op before ``init``, when the folder is not known yet)."""
        if self._forked:
            self._pending.clear()
            return
        with self._lock:
            if self._folder is None:
                return
            if self._writer is None:
                if not self._pending:
                    return
                self._open_writer()
            write = self._writer.write
            pending = self._pending
            event = self._event
            write_encoded = getattr(self._writer, "write_encoded", None)  # only _TEXT records use it
            n = 0
            while pending:
                rec = pending.popleft()
                kind = rec[0]
                if kind == _TEXT:
                    write_encoded(rec[1], rec[2])
                    n += rec[2]
                else:
                    ev = event(rec)
                    if ev is not None:
                        n += kind != _META and kind != _UNITS
                        write(ev)
            self._cycle_events += n

    def flush(self) -> None:
        """Write buffered events and flush the current cycle's partial file to the operating system."""
        if self._forked:
            return
        with self._lock:
            self._write_pending()
            if self._writer is not None:
                self._writer.flush()

    # ------------------------------------------------------------------ callback events
    def init(self, state: Any, logger: Any) -> None:
        del logger
        info = dist_info()
        self._rank = info["rank"]
        self._tid = os.getpid()
        folder = format_name(self.folder, state.run_name)
        self._saved_paths = set()
        os.makedirs(folder, exist_ok=True)
        if not self.overwrite:
            _ensure_folder_is_empty(folder)
        if self.merged_trace_filename is not None:
            merged = os.path.join(folder, format_name(self.merged_trace_filename, state.run_name))
            if os.path.exists(merged):
                os.remove(merged)
        with self._lock:
            self._folder = folder
            self._template = None  # rank/pid may have changed
            self._new_file_units()
            self._open_writer()  # fails now, not at the end of training, if the folder is not writable
        td = _torch_dist()
        if td is not None:
            td.barrier()

    def _metadata(self, name: str, wall_ns: int, args: dict) -> None:
        self._pending.append((_META, {"name": name, "cat": "", "ph": "M", "ts": self._ts(wall_ns),
                                     "pid": self._rank, "tid": self._tid, "args": args}))

    def _write_metadata(self, synchronize: bool) -> None:
        """Queue the cycle's metadata events; ``synchronize`` takes the clock sync between two barriers of all ranks
        (when ``torch.distributed`` is initialized), as Composer does at the start of each cycle."""
        rank = self._rank
        wall_ns = time.time_ns()
        self._metadata("process_name", wall_ns, {"name": f"Rank {rank} training loop process"})
        self._metadata("thread_name", wall_ns, {"name": "Training Loop"})
        self._metadata("thread_sort_index", wall_ns, {"sort_index": 0})
        self._metadata("global_rank", wall_ns, {"value": rank})
        self._metadata("process_sort_index", wall_ns, {"sort_index": rank})
        td = _torch_dist() if synchronize else None
        sync_a = time.time_ns()
        if td is not None:
            td.barrier()
        sync = time.time_ns()
        if td is not None:
            td.barrier()
        sync_b = time.time_ns()
        for name, args in distributed.trace_metadata(sync // 1000, (sync_b - sync_a) // 1000).items():
            self._metadata(name, wall_ns, args)  # Composer's clock sync (ours when measured) and the rank
        self._cycle_has_metadata = True

    def batch_start(self, state: Any, logger: Any) -> None:
        del logger
        if state.profiler is None:
            raise RuntimeError(f"The profiler is not enabled, which is required to use the {type(self).__name__}. "
                               "To enable it, pass `profiler=Profiler(...)` to the Trainer.")
        action = current_action(state)
        if action != "skip" and not self._is_trace_active:
            self._write_metadata(synchronize=True)
            self._is_trace_active = True
        if action == "active_and_save":
            self._save_at_batch_end = True

    def batch_end(self, state: Any, logger: Any) -> None:
        if self._forked:
            return
        if self._save_at_batch_end:
            self._save(state, logger, final=False)
            self._is_trace_active = False
            self._save_at_batch_end = False

    def close(self, state: Any, logger: Any) -> None:
        """Write buffered events; save the events recorded since the last save as a last cycle file; finish the
        merged trace."""
        if self._forked:
            return
        with self._lock:
            self._write_pending()
            writer = self._writer
            if writer is not None and self._cycle_events == 0:  # nothing but metadata: not worth a file
                writer.close()
                os.remove(writer.path)
                self._writer = None
                self._new_file_units()
            if self._writer is not None:
                if not self._cycle_has_metadata:  # events left after the last save: make the file mergeable
                    self._write_metadata(synchronize=False)
                self._save(state, logger, final=True)
            if self._merged_writer is not None:
                self._merged_writer.close()
                self._merged_writer = None
                self._merger = None
        self._is_trace_active = False
        self._save_at_batch_end = False

    # ------------------------------------------------------------------ saving
    def _save(self, state: Any, logger: Any, final: bool) -> None:
        if self._forked:
            return
        timestamp = state.timestamp
        with self._lock:
            self._finish_rows()
            self._write_pending()
            if self._writer is None:  # nothing recorded in this cycle: save an empty trace, like Composer
                self._open_writer()
            writer = self._writer
            self._writer = None
            self._cycle_has_metadata = False
            self._new_file_units()  # the next file declares the units again
            writer.close()
            assert self._folder is not None
            path = os.path.join(self._folder, format_name(self.filename, state.run_name, timestamp))
            # the final save does not replace a file of this run's (nor, without overwrite, any file): it inserts
            # ".final" before ".json" of the file name; an older run's file is replaced with overwrite=True
            if final and (path in self._saved_paths or (not self.overwrite and os.path.exists(path))):
                head, name = os.path.split(path)
                stem, dot, ext = name.partition(self.trace_suffix)
                path = os.path.join(head, f"{stem}.final{dot}{ext}")
            self._saved_paths.add(path)
            if os.path.dirname(path):
                os.makedirs(os.path.dirname(path), exist_ok=True)
            os.replace(writer.path, path)
        if self.remote_file_name is not None and hasattr(logger, "upload_file"):
            logger.upload_file(remote_file_name=format_name(self.remote_file_name, state.run_name, timestamp),
                               file_path=path, overwrite=self.overwrite)
        td = None if final else _torch_dist()
        trace_files = [pathlib.Path(path)]
        if td is not None:
            gathered: list = [None] * td.get_world_size()
            td.all_gather_object(gathered, path)
            trace_files = [pathlib.Path(p) for p in gathered]
        self.saved_traces.append((timestamp, trace_files))
        if td is not None:
            td.barrier()
        info = dist_info()
        if self.merged_trace_filename is not None and info["local_rank"] == 0:
            if td is None:
                local_files = [pathlib.Path(path)]
            else:
                local_files = trace_files[info["rank"]:info["rank"] + info["local_world_size"]]
            with self._lock:
                if self._merged_writer is None:
                    merged = os.path.join(self._folder, format_name(self.merged_trace_filename, state.run_name))
                    if os.path.dirname(merged):
                        os.makedirs(os.path.dirname(merged), exist_ok=True)
                    self._merged_writer = ChromeTraceWriter(merged, overwrite=True)
                    self._merger = TraceMerger(self._merged_writer)
                assert self._merger is not None
                self._merger.add(local_files)
                self._merged_writer.flush()
            if self.merged_trace_remote_file_name is not None and hasattr(logger, "upload_file"):
                logger.upload_file(remote_file_name=format_name(self.merged_trace_remote_file_name, state.run_name),
                                   file_path=str(self._merged_writer.path), overwrite=True)
        if self.num_traces_to_keep >= 0:
            rank = info["rank"]
            while len(self.saved_traces) > self.num_traces_to_keep:
                _, files = self.saved_traces.pop(0)
                if rank < len(files) and os.path.exists(files[rank]):
                    os.remove(files[rank])
