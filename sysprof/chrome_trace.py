"""Chrome trace-event JSON files: the one place in sysprof that writes and reads them.

File layout (Composer's): a JSON array, ``[`` newline, one event object per line separated by ``,`` newline, then
newline ``]`` newline. A ``.gz`` suffix (any case: ``.json.GZ`` too) means gzip compression. The Chrome trace format allows the closing ``]`` to
be missing, so a file cut short by a crash is still a trace: :func:`read_trace` accepts it (dropping a partial last
event) and :func:`repair_trace` rewrites it as strict JSON.

Event objects are written with the standard library's ``json`` (ASCII output). Strict JSON cannot represent float
NaN and +/-inf: in the args of a counter event (``"ph": "C"``) such a key is left out (:func:`counter_args`, the one
finiteness rule of every sysprof writer: a reader takes a missing key as unknown); anywhere else it is written as
``null``.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import pathlib
import tempfile
import weakref
import zlib
from typing import Any, Iterable, Union

__all__ = ["ChromeTraceWriter", "read_trace", "repair_trace", "encode_event", "counter_args", "is_gzip_path"]

PathLike = Union[str, "os.PathLike[str]"]

_ENCODER = json.JSONEncoder(allow_nan=False, separators=(", ", ": "))
_DECODER = json.JSONDecoder()
_INF = float("inf")


def counter_args(keys: Iterable[str], values: Iterable[Any]) -> dict:
    """``{key: value}`` for a counter event, leaving out NaN and +/-inf (unknown: not a number JSON can hold).

    The one finiteness rule for counter values, used by every writer (``sysprof record``, ``JSONTraceHandler``,
    :func:`encode_event`). An empty result means the event has nothing to say; callers skip such an event (except
    ``sysprof record``'s one empty event where a group turns all-unknown).
    """
    return {k: v for k, v in zip(keys, values) if v == v and v != _INF and v != -_INF}


def _finite(obj: Any) -> Any:
    """Copy of ``obj`` with every non-finite float replaced by ``None`` (recursing into dicts, lists, tuples)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def encode_event(event: dict) -> str:
    """Encode one trace event as a single line of strict JSON text: a NaN or +/-inf counter value is left out
    (:func:`counter_args`), any other NaN/inf is written as ``null``.

    Raises:
        TypeError: a value is not JSON serializable.
    """
    try:
        return _ENCODER.encode(event)
    except ValueError:  # a NaN or infinity somewhere (rare): sanitize a copy
        args = event.get("args")
        if event.get("ph") == "C" and isinstance(args, dict):
            event = dict(event, args=counter_args(args.keys(), args.values()))
        return _ENCODER.encode(_finite(event))


def is_gzip_path(path: PathLike) -> bool:
    """Whether a trace at ``path`` is gzip-compressed: its name ends in ``.gz``, in any case (the one place
    that decides it, for writing, reading and repairing)."""
    return os.fspath(path).lower().endswith(".gz")


# Every open writer, for the fork handler below.
_WRITERS: "weakref.WeakSet" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for writer in list(_WRITERS):
        if not writer._closed:
            writer._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class ChromeTraceWriter:
    """Stream trace events to a Chrome trace-event JSON file (``.json``, or gzip when the name ends in ``.gz``).

    Events are encoded and handed to the file as they are written (nothing is kept in memory beyond the file
    object's buffer). Not thread-safe: serialize calls from several threads.

    Args:
        path: file to create.
        overwrite: replace an existing file instead of raising.

    Raises:
        FileExistsError: ``path`` exists and ``overwrite`` is false.
        OSError: (e.g. ``PermissionError``, ``FileNotFoundError``) the file cannot be created; raised here, at
            construction, so a bad path fails before any profiling happens.

    Attributes:
        path (pathlib.Path): the file being written.
    """

    def __init__(self, path: PathLike, *, overwrite: bool = False) -> None:
        self.path = pathlib.Path(path)
        mode = "w" if overwrite else "x"
        if is_gzip_path(self.path):
            self._file: Any = io.TextIOWrapper(gzip.open(self.path, mode + "b"), encoding="ascii", newline="\n")
        else:
            self._file = open(self.path, mode, encoding="ascii", newline="\n")
        self._closed = False
        self._count = 0
        self._bytes = 0
        _WRITERS.add(self)
        self._put("[\n")

    def _after_fork_in_child(self) -> None:
        """A forked child shares this file with the parent; whatever it writes, flushes or closes (at its exit,
        when the file object is freed) would land in the parent's trace. Point its descriptor at /dev/null here."""
        try:
            fd = self._file.fileno()
        except (OSError, ValueError):  # closed, or no descriptor
            return
        null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.dup2(null, fd, inheritable=False)
        finally:
            os.close(null)

    def _put(self, text: str) -> None:
        self._file.write(text)
        self._bytes += len(text)  # ASCII: one byte per character

    def write(self, event: dict) -> None:
        """Append one trace event (a JSON-serializable ``dict``).

        Raises:
            ValueError: the writer is closed.
            TypeError: the event is not JSON serializable (nothing is written).
        """
        if self._closed:
            raise ValueError(f"ChromeTraceWriter for {self.path} is closed")
        text = encode_event(event)
        self._put(text if self._count == 0 else ",\n" + text)
        self._count += 1

    def write_encoded(self, text: str, count: int = 1) -> None:
        """Append ``count`` events already encoded as strict JSON objects separated by ``",\\n"`` (ASCII).

        For bulk writers that render many events from a template built with :func:`encode_event`; the caller
        guarantees the text is valid.

        Raises:
            ValueError: the writer is closed.
        """
        if self._closed:
            raise ValueError(f"ChromeTraceWriter for {self.path} is closed")
        self._put(text if self._count == 0 else ",\n" + text)
        self._count += count

    def write_many(self, events: Iterable[dict]) -> None:
        """Append every event of ``events`` (an iterable of dicts), in order."""
        for event in events:
            self.write(event)

    def flush(self) -> None:
        """Push everything written so far to the operating system (gzip: a ``Z_SYNC_FLUSH`` block).

        Afterwards :func:`read_trace` on :attr:`path` returns every event written so far. No-op once closed.
        """
        if not self._closed:
            self._file.flush()  # TextIOWrapper -> GzipFile.flush(), whose default mode is zlib.Z_SYNC_FLUSH

    def close(self) -> None:
        """Write the closing ``]`` and close the file. Calling it again does nothing."""
        if self._closed:
            return
        try:
            self._put("\n]\n")
        finally:
            self._closed = True
            self._file.close()

    @property
    def bytes_written(self) -> int:
        """Bytes of JSON text written so far, before compression (includes the brackets)."""
        return self._bytes

    @property
    def events_written(self) -> int:
        """Number of events written so far."""
        return self._count

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return self._closed

    def __enter__(self) -> "ChromeTraceWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _read_text(path: PathLike) -> str:
    """Whole text of ``path``, decompressing ``.gz``; a truncated gzip stream yields the data decoded so far."""
    if not is_gzip_path(path):
        with open(path, "r", encoding="utf-8") as f:
            return f.read()
    with open(path, "rb") as f:
        data = f.read()
    chunks = []
    while data:  # one gzip member per iteration; stop at a truncated or corrupt one, keeping its decoded part
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            chunks.append(d.decompress(data))
        except zlib.error:
            break
        if not d.eof:
            break
        data = d.unused_data
    return b"".join(chunks).decode("utf-8", errors="replace")


def _parse_events(text: str) -> list:
    """Parse trace text into a list of event dicts, tolerating a truncated array.

    Accepts a JSON array of events (possibly missing its ``]``, with a partial last event dropped), or a JSON
    object with a ``traceEvents`` list (the Chrome "JSON Object Format", e.g. torch's traces).

    Raises:
        ValueError: the text is neither of these.
    """
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        events = data.get("traceEvents")
        if not isinstance(events, list):
            raise ValueError("trace JSON object has no 'traceEvents' list")
        return events
    # Truncated array: decode event by event until the text runs out or stops parsing.
    pos = len(text) - len(text.lstrip())
    if not text.startswith("[", pos):
        raise ValueError("not a Chrome trace: expected a JSON array or object")
    pos += 1
    events = []
    n = len(text)
    while pos < n:
        while pos < n and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= n or text[pos] == "]":
            break
        try:
            obj, pos = _DECODER.raw_decode(text, pos)
        except ValueError:
            break  # partial last event
        events.append(obj)
    return events


def read_trace(path: PathLike) -> list:
    """Read the events of a Chrome trace file (``.json`` or ``.json.gz``) as a list of dicts, in file order.

    Tolerates a truncated file: a missing closing ``]``, a partial last event (dropped) or a cut gzip stream.

    Raises:
        FileNotFoundError / OSError: the file cannot be read.
        ValueError: the content is not a Chrome trace (array of events or object with ``traceEvents``).
    """
    return _parse_events(_read_text(path))


def repair_trace(path: PathLike) -> int:
    """Rewrite a (possibly truncated) trace file at ``path`` as strict JSON, keeping every complete event.

    The file is replaced atomically (written next to it, then renamed); its compression follows its name.

    Returns:
        int: the number of events kept.

    Raises:
        FileNotFoundError / OSError / ValueError: as :func:`read_trace`, or the directory is not writable.
    """
    path = pathlib.Path(path)
    events = read_trace(path)
    fd, tmp = tempfile.mkstemp(prefix=".repair-", suffix=".json.gz" if is_gzip_path(path) else ".json",
                               dir=path.parent)
    os.close(fd)
    try:
        with ChromeTraceWriter(tmp, overwrite=True) as writer:
            writer.write_many(events)
        os.chmod(tmp, os.stat(path).st_mode & 0o7777)  # keep the original permissions, not mkstemp's 0600
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return len(events)
