"""Chrome trace-event JSON files: the one place in sysprof that writes and reads them.

File layout (Composer's): a JSON array, ``[`` newline, one event object per line separated by ``,`` newline, then
newline ``]`` newline. A ``.gz`` suffix (any case: ``.json.GZ`` too) means gzip compression. The Chrome trace format allows the closing ``]`` to
be missing, so a file cut short by a crash is still a trace: :func:`read_trace` accepts it (dropping a partial last
event) and :func:`repair_trace` rewrites it as strict JSON.

A recorder that streams a trace holds an advisory ``flock`` write lock on it (:func:`lock_trace`); :func:`repair_trace`
takes the same lock, so it refuses a trace that is still being written. The kernel drops the lock when the holder's
descriptor closes, however the holder ends (SIGKILL included).

Event objects are written with the standard library's ``json`` (ASCII output). Strict JSON cannot represent float
NaN and +/-inf: in the args of a counter event (``ph`` ``C``) such a key is left out (:func:`counter_args`, the one
finiteness rule of every sysprof writer: a reader takes a missing key as unknown); anywhere else it is written as
``null``.
"""

from __future__ import annotations

import errno
import fcntl
import gzip
import io
import json
import math
import os
import pathlib
import stat
import tempfile
import zlib
from typing import Any, Iterable, Union

from sysprof import forks

__all__ = ["ChromeTraceWriter", "read_trace", "repair_trace", "encode_event", "counter_args", "is_gzip_path",
           "lock_trace", "TraceBusyError"]

PathLike = Union[str, "os.PathLike[str]"]

_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))  # compact: ~12 B less per event
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


class TraceWriter:
    """What every trace writer shares (:class:`ChromeTraceWriter`, ``perfetto_write.PerfettoTraceWriter``): the
    event count, the closed flag, ``write_many`` and the context manager. A writer sets ``_count`` and
    ``_closed`` and defines ``write``, ``flush``, ``close`` and ``bytes_written``."""

    _count = 0
    _closed = False

    def write_many(self, events: Iterable[dict]) -> None:
        """Append every event of ``events`` (an iterable of dicts), in order."""
        for event in events:
            self.write(event)

    @property
    def events_written(self) -> int:
        """Number of events written so far."""
        return self._count

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return self._closed

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class ChromeTraceWriter(TraceWriter):
    """Stream trace events to a Chrome trace-event JSON file (``.json``, or gzip when the name ends in ``.gz``).

    Events are encoded and handed to the file as they are written (nothing is kept in memory beyond the file
    object's buffer). Not thread-safe: serialize calls from several threads.

    Args:
        path: file to create.
        overwrite: replace an existing file instead of raising.
        fd: an open, writable descriptor to write to instead of opening ``path`` (which then only names the
            file, and decides gzip). The writer owns it and closes it in :meth:`close`.

    Raises:
        FileExistsError: ``path`` exists and ``overwrite`` is false.
        OSError: (e.g. ``PermissionError``, ``FileNotFoundError``) the file cannot be created; raised here, at
            construction, so a bad path fails before any profiling happens.

    Attributes:
        path (pathlib.Path): the file being written.
    """

    def __init__(self, path: PathLike, *, overwrite: bool = False, fd: Union[int, None] = None) -> None:
        self.path = pathlib.Path(path)
        self._raw: Any = None  # the descriptor's file object under a GzipFile, which does not close it
        gz = is_gzip_path(self.path)
        if fd is not None:
            raw = os.fdopen(fd, "wb")
            try:
                if gz:
                    binary: Any = gzip.GzipFile(filename=os.fspath(self.path), mode="wb", fileobj=raw)
                    self._raw = raw
                else:
                    binary = raw
            except BaseException:
                raw.close()
                raise
            self._file: Any = io.TextIOWrapper(binary, encoding="ascii", newline="\n")
        elif gz:
            mode = "wb" if overwrite else "xb"
            self._file = io.TextIOWrapper(gzip.open(self.path, mode), encoding="ascii", newline="\n")
        else:
            self._file = open(self.path, "w" if overwrite else "x", encoding="ascii", newline="\n")
        self._closed = False
        self._count = 0
        self._bytes = 0
        forks.register(self)
        self._put("[\n")

    def _after_fork_in_child(self) -> None:
        """A forked child shares this file with the parent; whatever it writes, flushes or closes (at its exit,
        when the file object is freed) would land in the parent's trace. Point its descriptor at /dev/null here."""
        if self._closed:
            return
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
            try:
                self._file.close()
            finally:
                if self._raw is not None:
                    self._raw.close()

    @property
    def bytes_written(self) -> int:
        """Bytes of JSON text written so far, before compression (includes the brackets)."""
        return self._bytes


def _regular_file(fd: int, path: PathLike) -> None:
    """Raises ValueError unless ``fd`` is a regular file: a FIFO, a device (/dev/zero) or a directory is never a
    trace, and reading one would block or never end."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise ValueError(f"{path}: not a regular file")


def _open_trace(path: PathLike):
    """``path`` opened for binary reading, refused unless it is a regular file (checked without blocking)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        _regular_file(fd, path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read_text(path: PathLike) -> str:
    """Whole text of ``path``, decompressing ``.gz``; a truncated gzip stream yields the data decoded so far."""
    with _open_trace(path) as f:
        return _decode(f.read(), is_gzip_path(path))


def _decode(data: bytes, gz: bool) -> str:
    """Text of a trace file's bytes (UTF-8); ``gz``: decompress, keeping what a truncated stream decodes to."""
    if not gz:
        return data.decode("utf-8")
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


class TraceBusyError(BlockingIOError):
    """Another process holds the trace's lock (:func:`lock_trace`): it is still writing the trace.

    Attributes:
        path: the trace, as given.
        pid (int | None): the holder's process id where ``/proc/locks`` tells it.
    """

    def __init__(self, path: PathLike, pid: Union[int, None]):
        self.path = os.fspath(path)
        self.pid = pid
        who = f"process {pid}" if pid else "another process"
        super().__init__(errno.EWOULDBLOCK, f"{self.path} is being written by {who} (it holds the trace's lock)")


def lock_trace(fd: int, path: PathLike) -> None:
    """Take the advisory write lock on the open trace ``fd`` (``flock(LOCK_EX | LOCK_NB)``), without waiting.

    The lock belongs to the open file description: it lasts until every descriptor of it is closed, and the kernel
    releases it when the holder exits, however it ends. Open ``fd`` close-on-exec (Python's default) so that no
    child process keeps it. ``path`` only names the file in the error.

    Raises:
        TraceBusyError: another open file description holds the lock.
        OSError: the file system refuses the call.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise TraceBusyError(path, _lock_holder(fd)) from None


def _lock_holder(fd: int) -> Union[int, None]:
    """The pid ``/proc/locks`` gives for the FLOCK lock on ``fd``'s file, or None where it does not say."""
    st = os.fstat(fd)
    try:
        with open("/proc/locks", "r", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:  # "1: FLOCK  ADVISORY  WRITE 1234 fd:00:5678 0 EOF" (device numbers in hex)
        fields = line.split()
        if len(fields) < 6 or fields[1] != "FLOCK":  # "->" lines are waiters
            continue
        try:
            major, minor, ino = fields[5].split(":")
            if (int(major, 16), int(minor, 16), int(ino)) == (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino):
                pid = int(fields[4])
                return pid if pid > 0 else None
        except ValueError:
            continue
    return None


def repair_trace(path: PathLike) -> int:
    """Rewrite a (possibly truncated) trace file at ``path`` as strict JSON, keeping every complete event.

    A symbolic link is followed: the file it points to is repaired and the link kept. That file is replaced
    atomically (written next to it, then renamed over it) with its permission bits; its compression follows its
    name (or its gzip content). The trace's lock (:func:`lock_trace`) is held meanwhile, so a trace still being recorded is refused.

    Returns:
        int: the number of events kept.

    Raises:
        TraceBusyError: a recorder is still writing the trace.
        FileNotFoundError / OSError / ValueError: as :func:`read_trace`, or the directory is not writable.
    """
    real = pathlib.Path(os.path.realpath(path))
    fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        _regular_file(fd, path)
    except BaseException:
        os.close(fd)
        raise
    os.set_blocking(fd, True)
    try:
        lock_trace(fd, path)
        with os.fdopen(os.dup(fd), "rb") as f:
            text = f.read()
        mode = os.fstat(fd).st_mode & 0o7777
        gz = is_gzip_path(real) or text[:2] == b"\x1f\x8b"  # a link named .gz to a gzip file of another name
        events = _parse_events(_decode(text, gz))
        tmp_fd, tmp = tempfile.mkstemp(prefix=".repair-", suffix=".json.gz" if gz else ".json", dir=real.parent)
        try:
            with ChromeTraceWriter(tmp, fd=tmp_fd) as writer:
                writer.write_many(events)
            os.chmod(tmp, mode)  # keep the original permissions, not mkstemp's 0600
            os.replace(tmp, real)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
    finally:
        os.close(fd)
    return len(events)
