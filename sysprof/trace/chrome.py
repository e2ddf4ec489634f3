"""Chrome trace-event JSON files: the one place in sysprof that writes and reads them.

File layout (Composer's): a JSON array, ``[`` newline, one event object per line separated by ``,`` newline, then
newline ``]`` newline. A ``.gz`` suffix (any case: ``.json.GZ`` too) means gzip compression. The Chrome trace format allows the closing ``]`` to
be missing, so a file cut short by a crash is still a trace: :func:`read_trace` accepts it (dropping a partial last
event) and :func:`repair_trace` rewrites it as strict JSON.

Reading is streamed (:class:`_Events`), gzip inflated incrementally: memory holds the events read and one event's
text, time follows the text up to ``MAX_GAP`` characters past the last event. Damage (a NUL byte, a broken or
wrongly typed event, nesting past the recursion limit) loses only its event, counted in a
:class:`TraceDamageWarning`; :func:`repair_trace` never replaces a trace with less than its complete events.

A recorder that streams a trace holds an advisory ``flock`` write lock on it (:func:`lock_trace`); :func:`repair_trace`
takes the same lock, so it refuses a trace that is still being written. The kernel drops the lock when the holder's
descriptor closes, however the holder ends (SIGKILL included).

Event objects are written with the standard library's ``json`` (ASCII output). Strict JSON cannot represent float
NaN and +/-inf: in the args of a counter event (``ph`` ``C``) such a key is left out (:func:`counter_args`, the one
finiteness rule of every sysprof writer: a reader takes a missing key as unknown); anywhere else it is written as
``null``.
"""

from __future__ import annotations

import codecs
import errno
import fcntl
import gzip
import io
import json
import math
import os
import pathlib
import re
import stat
import tempfile
import warnings
import zlib
from typing import Any, Iterable, Union

from sysprof import forks
from ..text import encodable

__all__ = ["ChromeTraceWriter", "read_trace", "iter_trace", "repair_trace", "encode_event", "counter_args", "is_gzip_path",
           "lock_trace", "TraceBusyError", "TraceDamageWarning", "RepairResult", "repaired_name"]

PathLike = Union[str, "os.PathLike[str]"]

_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))  # compact: ~12 B less per event
#: zlib level of every gzipped trace written (``.json.gz``): see :class:`ChromeTraceWriter`
GZIP_LEVEL = 6
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
        text = _ENCODER.encode(event)
        # a lone surrogate (a command line's bytes that are not UTF-8) is not strict JSON: U+FFFD instead
        return text if "\\ud" not in text else _ENCODER.encode(encodable(event))
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
    event count, the closed flag, ``write_many``, ``write_typed`` and the context manager. A writer sets
    ``_count`` and ``_closed`` and defines ``write``, ``flush``, ``close`` and ``bytes_written``.

    Two ways in: Chrome-style event dicts (``write``, ``write_many``), and typed items (:meth:`write_typed`: the
    counter rows of a track layout, :class:`~sysprof.trace.tracks.CounterRow`, and the stream's
    :class:`~sysprof.trace.events.Event` values), which a sink writes. Here the typed items are rendered to dicts
    (the JSON writers); a writer with its own model of tracks (Perfetto's) takes them as they are. A new trace
    format is one writer module with ``write`` (and ``write_typed`` where it has a better use of the types), and
    one arm of :func:`~sysprof.trace.perfetto.writer_class_for`."""

    _count = 0
    _closed = False
    #: whether the writer uses :attr:`~sysprof.trace.tracks.CounterRow.changed` (writes a counter's values only
    #: where they changed); a sink computes it only for such a writer
    counter_changes = False

    def write_many(self, events: Iterable[dict]) -> None:
        """Append every event of ``events`` (an iterable of dicts), in order."""
        for event in events:
            self.write(event)

    def write_typed(self, items: Iterable[Any], ts: Any) -> None:
        """Append typed items, in order: :class:`~sysprof.trace.tracks.CounterRow` (a counter track's event, the
        changes-only and NaN rules already applied), :class:`~sysprof.trace.events.Event`, or an event dict.
        ``ts(t_ns)`` is the caller's rule for a dict's ``ts`` (integer or float µs; a writer that keeps every ns
        may ignore it)."""
        from .events import Event, to_chrome

        for item in items:
            if isinstance(item, Event):
                self.write(to_chrome(item, ts))
            elif isinstance(item, dict):
                self.write(item)
            else:
                self.write(item.chrome(ts))

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
        compresslevel: zlib level of a gzipped trace (:data:`GZIP_LEVEL`: zlib's default, 6; on ``record``'s
            traces 9, gzip's, costs 1.8-2.3 x its CPU for 5-7 % fewer bytes, 1 costs 0.3 x for 50 % more).

    Raises:
        FileExistsError: ``path`` exists and ``overwrite`` is false.
        OSError: (e.g. ``PermissionError``, ``FileNotFoundError``) the file cannot be created; raised here, at
            construction, so a bad path fails before any profiling happens.

    Attributes:
        path (pathlib.Path): the file being written.
    """

    def __init__(self, path: PathLike, *, overwrite: bool = False, fd: Union[int, None] = None,
                 compresslevel: int = GZIP_LEVEL) -> None:
        self.path = pathlib.Path(path)
        self._raw: Any = None  # the descriptor's file object under a GzipFile, which does not close it
        gz = is_gzip_path(self.path)
        if fd is not None:
            raw = os.fdopen(fd, "wb")
            try:
                if gz:
                    binary: Any = gzip.GzipFile(filename=os.fspath(self.path), mode="wb", fileobj=raw,
                                                compresslevel=compresslevel)
                    self._raw = raw
                else:
                    binary = raw
            except BaseException:
                raw.close()
                raise
            self._file: Any = io.TextIOWrapper(binary, encoding="ascii", newline="\n")
        elif gz:
            mode = "wb" if overwrite else "xb"
            self._file = io.TextIOWrapper(gzip.open(self.path, mode, compresslevel), encoding="ascii", newline="\n")
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


# ---------------------------------------------------------------------- reading
#: Bounds of the JSON reader (a trace's useful content decides its cost, not its size): past ``MAX_GAP``
#: characters of text without an event (white space, commas, damage skipped) reading stops; an event (or a
#: top-level value of the object format) longer than ``MAX_EVENT`` characters is damage.
MAX_GAP = 1 << 20
MAX_EVENT = 16 << 20
_RAW_CHUNK = 1 << 16  # bytes read from the file at a time
_MAX_GZIP_HEADER = 1 << 16  # a gzip header (its optional name and comment) longer than this is not one


def _gzip_header_end(raw: bytes):
    """The length of the gzip member header (RFC 1952) at the start of ``raw``; None when ``raw`` is too short to
    tell, -1 when it is not one."""
    if len(raw) < 10:
        return None if raw == b"\x1f\x8b\x08"[:len(raw)] else -1
    if raw[:3] != b"\x1f\x8b\x08":
        return -1
    flags, at = raw[3], 10
    if flags & 4:  # FEXTRA
        if len(raw) < at + 2:
            return None
        at += 2 + int.from_bytes(raw[at:at + 2], "little")
    for bit in (8, 16):  # FNAME, FCOMMENT: zero-terminated
        if flags & bit:
            end = raw.find(b"\0", at)
            if end < 0:
                return None
            at = end + 1
    if flags & 2:  # FHCRC
        at += 2
    return at if len(raw) >= at else None
_TEXT_CHUNK = 1 << 18  # characters of text decoded (inflated) at a time
_BATCH_MIN = 1 << 12  # lines of at least this many characters are decoded together
_SEP = re.compile(r"[ \t\r\n,]*")
_SPACE = re.compile(r"[ \t\r\n]*")
# where an event may start after damage: an object opening a line, or following "}," (a one-line array)
_RESYNC = re.compile(r"(?:\n[ \t\r]*|\}[ \t\r\n]*,[ \t\r\n]*)(?=\{)")
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")  # an invalid UTF-8 byte, as "surrogateescape" decodes it
_NUMBER = (int, float, type(None))  # null: unknown
_NUMBER_TYPES = frozenset(_NUMBER)
_ID = (int, str, type(None))


class TraceDamageWarning(UserWarning):
    """A Chrome JSON trace held damage that its reader skipped (events dropped, or reading stopped early)."""


def _int_or_float(text: str):
    """``int`` of a JSON integer, or ``float`` where it has too many digits for ``int`` (inf beyond a float)."""
    try:
        return int(text)
    except ValueError:
        return float(text)


_BIG_DECODER = json.JSONDecoder(parse_int=_int_or_float)


class _Text:
    """The text of a trace file, chunk by chunk: gzip is inflated incrementally (its members in turn; a truncated
    or corrupt member ends the text with what it decoded), UTF-8 is decoded with ``surrogateescape`` (an invalid
    byte makes its event damaged, not the whole file)."""

    def __init__(self, f, gz: bool) -> None:
        self._f = f
        self._gz = gz
        self._inflate = None  # the member being inflated (raw deflate: its checksum is checked here, not by zlib)
        self._member = gz  # a gzip member (its header) comes next
        self._crc = self._size = 0
        self._raw = b""
        self._utf8 = codecs.getincrementaldecoder("utf-8")("surrogateescape")
        self.eof = False
        self.bytes = 0  # bytes of (inflated) text produced so far
        self.bad_bytes = False  # whether an invalid UTF-8 byte was seen
        self.bad_checksum = False  # a member whose CRC-32 or length did not match: its text is damaged somewhere

    def _more(self) -> bool:
        got = self._f.read(_RAW_CHUNK)
        self._raw += got
        return bool(got)

    def _start_member(self) -> bool:
        """Parses a gzip member's header (RFC 1952) at the start of the raw bytes; False when there is none."""
        while True:
            end = _gzip_header_end(self._raw)
            if end is not None:
                break
            if len(self._raw) > _MAX_GZIP_HEADER or not self._more():
                return False
        if end < 0:
            return False
        self._raw = self._raw[end:]
        self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
        self._crc = self._size = 0
        self._member = False
        return True

    def _end_member(self) -> None:
        """Checks the member's trailer (CRC-32 and length): a mismatch marks the text damaged; its events were
        read all the same (each one is checked as it is parsed)."""
        self._raw = self._inflate.unused_data
        self._inflate = None
        while len(self._raw) < 8 and self._more():
            pass
        if len(self._raw) >= 8:
            crc, size = int.from_bytes(self._raw[:4], "little"), int.from_bytes(self._raw[4:8], "little")
            self.bad_checksum |= crc != self._crc or size != self._size & 0xFFFFFFFF
            self._raw = self._raw[8:]
            self._member = True

    def _bytes(self, n: int) -> bytes:
        if not self._gz:
            return self._f.read(n)
        while True:
            if self._inflate is None:
                if not self._member or not self._start_member():
                    return b""
            if not self._raw and not self._more():  # a cut stream: what is left inside zlib is at most one match
                out, self._inflate, self._member = self._inflate.flush(), None, False
                return out
            try:
                out = self._inflate.decompress(self._raw, n)
            except zlib.error:  # damaged deflate data: the text ends here
                self._inflate = self._member = None
                return b""
            self._crc = zlib.crc32(out, self._crc)
            self._size += len(out)
            if self._inflate.eof:
                self._end_member()
            else:
                self._raw = self._inflate.unconsumed_tail
            if out:
                return out

    def read(self, n: int) -> str:
        """About ``n`` characters more ('' once the text has ended)."""
        while not self.eof:
            data = self._bytes(n)
            self.bytes += len(data)
            self.eof = not data
            text = self._utf8.decode(data, final=self.eof)
            if text:
                if not self.bad_bytes and not text.isascii() and _ESCAPED_BYTE.search(text):
                    self.bad_bytes = True
                return text
        return ""


class _Stop(Exception):
    """Reading ends here (the reason is the scanner's ``stopped``)."""


class _Events:
    """The events of a Chrome JSON trace, streamed: iterate for each event (``(event, its text)`` with
    ``keep_text``), in file order; afterwards ``dropped``, ``cut`` and ``stopped`` tell what was skipped.

    The text is scanned value by value with the standard library's decoder; memory holds one event's text at
    most (``MAX_EVENT``). An element of the array that does not decode (a NUL byte in it, an unfinished string,
    nesting past the interpreter's recursion limit, an invalid UTF-8 byte) or decodes to no event
    (:func:`_valid_event`) is damaged: it is skipped and counted in ``dropped``, and reading resumes at the next
    place an event can start (an object opening a line, or following ``},``). An element that the end of the
    text cuts short sets ``cut`` (a killed recorder's last event). Past ``MAX_GAP`` characters without an event,
    reading stops and ``stopped`` says where.

    Raises (while iterating):
        ValueError: not a Chrome trace (neither a JSON array nor an object with a ``traceEvents`` list), or
            nothing but damage.
    """

    def __init__(self, text: _Text, keep_text: bool = False) -> None:
        self._text = text
        self._keep_text = keep_text
        self._buf = ""
        self._pos = 0
        self._base = 0  # offset in the text of _buf[0]
        self._gap_start = 0  # offset in the text where the current run without an event began
        self.events = 0
        self.dropped = 0
        self.cut = False
        self.stopped: Union[str, None] = None
        self.nonfinite = False  # whether the last event decoded held a NaN or Infinity literal
        self._no_batch_before = 0  # offset in the text before which lines are not decoded together
        self._batch_failures = 0
        self._indent = "\n}"  # how a line closing an event starts, in a pretty-printed layout
        self._decoder = json.JSONDecoder(parse_constant=self._constant)

    def _constant(self, name: str) -> float:
        self.nonfinite = True
        return float(name)

    # -- the text buffer
    def _refill(self, keep_from: int) -> bool:
        """Drop the text before ``keep_from``, append more; False at the end of the text."""
        self._base += keep_from
        self._pos -= keep_from
        rest = self._buf[keep_from:]
        more = self._text.read(max(_TEXT_CHUNK, len(rest)))  # doubling: a long event costs linear time
        self._buf = rest + more
        return bool(more)

    def _gap_check(self) -> None:
        if self._base + len(self._buf) - self._gap_start > MAX_GAP:
            self.stopped = (f"reading stopped: no event in the {MAX_GAP >> 20} MiB of text after byte "
                            f"{self._gap_start:,}; the rest is not read")
            raise _Stop

    def _skip(self, pattern) -> str:
        """Move past ``pattern`` (separators), reading on as needed: the next character, '' at the end."""
        while True:
            self._pos = pattern.match(self._buf, self._pos).end()
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            self._gap_check()
            if not self._refill(self._pos):
                return ""

    def _value(self):
        """Decode the JSON value at the position: ``(value, start, end)``; None when it is damaged (then the
        position is where it began); raises _Stop where the end of the text cuts it short."""
        self.nonfinite = False
        while True:
            start, buf = self._pos, self._buf
            try:
                try:
                    value, end = self._decoder.raw_decode(buf, start)
                except json.JSONDecodeError:
                    raise
                except ValueError:  # an integer with more digits than int() takes
                    value, end = _BIG_DECODER.raw_decode(buf, start)
            except json.JSONDecodeError as e:
                if not (e.msg.startswith("Unterminated string") or e.pos >= len(buf) - 16):
                    return None  # damage inside the text we hold
                if len(buf) - start > MAX_EVENT:
                    return None
                if not self._refill(start):
                    self.cut = True
                    raise _Stop from None
                continue
            except (ValueError, RecursionError):
                return None
            if self._text.bad_bytes and _ESCAPED_BYTE.search(buf, start, end):
                return None
            return value, start, end

    def _resync(self) -> None:
        """After damage at the position: on to the next place an event can start (counting one event dropped)."""
        self.dropped += 1
        search = self._pos + 1
        while True:
            m = _RESYNC.search(self._buf, search)
            if m:
                self._pos = m.end()
                return
            self._gap_check()
            tail = len(self._buf.rstrip(" \t\r\n,")) - 1  # keep a '}' or newline a match may start with
            keep = max(search, tail, 0)
            if not self._refill(keep):
                raise _Stop
            search = 0

    # -- the layouts
    def __iter__(self):
        try:
            c = self._skip(_SPACE)
            if c == "[":
                self._pos += 1
                yield from self._array()
            elif c == "{":
                self._pos += 1
                yield from self._object()
            else:
                raise ValueError("not a Chrome trace: expected a JSON array or object")
        except _Stop:
            pass
        if not self.events and (self.dropped or self.stopped):
            what = _damaged(self.dropped) if self.dropped else self.stopped
            raise ValueError(f"not a Chrome trace: no event read ({what})")

    def _batch(self):
        """The events of the whole lines from the position on, decoded at once: sysprof's layout (an event a line)
        at the decoder's speed, and a pretty-printed one (events over several lines, each closed by a ``}`` at
        the indent that opened it) up to its last closing line. None where that text is not a list of whole
        events (damage, the closing ``]``): then it is read event by event."""
        start, buf = self._pos, self._buf
        if self._base + start < self._no_batch_before:
            return None
        events = None
        line = buf.rfind("\n", 0, start)
        if line >= 0 and not buf[line + 1:start].strip(" \t"):
            self._indent = "\n" + buf[line + 1:start] + "}"
        end = buf.rfind(self._indent, start)
        end = end + len(self._indent) if end > start else buf.rfind("\n", start)
        self.nonfinite = False
        for _ in range(2):  # the second time, up to the line where the first one failed
            if end - start < _BATCH_MIN:
                break
            body = buf[start:end].rstrip(" \t\r,")
            try:
                items = self._decoder.decode("[" + body + "]")
            except json.JSONDecodeError as e:
                end = buf.rfind("\n", start, start + e.pos - 1)
                continue
            except (ValueError, RecursionError):
                break
            if self._text.bad_bytes and _ESCAPED_BYTE.search(body):
                break
            if not self._keep_text:
                events = [e for e in items if _valid_event(e)]
                break
            lines = body.split("\n")
            if not self.nonfinite and len(lines) == len(items):
                events = [(e, t.strip(" \t\r,")) for e, t in zip(items, lines) if _valid_event(e)]
            break
        if events is None:  # read what this text holds event by event; twice in a row: every event (a layout
            self._batch_failures += 1  # with events over several lines)
            self._no_batch_before = self._base + len(buf) if self._batch_failures < 2 else math.inf
            return None
        self._batch_failures = 0
        self.dropped += len(items) - len(events)  # whole values, but no events: nothing else is lost
        self.events += len(events)
        self._pos = end
        self._gap_start = self._base + end
        return events

    def _array(self):
        while True:
            c = self._skip(_SEP)
            if c in ("]", ""):
                return
            if c == "{":
                batch = self._batch()
                if batch is not None:
                    yield from batch
                    continue
            got = self._value()
            if got is None:
                self._resync()
                continue
            event, start, end = got
            self._pos = end
            if not _valid_event(event):
                self.dropped += 1
                continue
            self.events += 1
            self._gap_start = self._base + end
            if self._keep_text:
                yield event, self._buf[start:end]
            else:
                yield event

    def _object(self):
        """The JSON Object Format: the events of the ``traceEvents`` list (other members are passed over)."""
        try:
            found = self._to_trace_events()
        except _Stop:
            if self.stopped:
                raise
            found = False  # cut short before it
        if not found:
            raise ValueError("trace JSON object has no 'traceEvents' list")
        yield from self._array()

    def _to_trace_events(self) -> bool:
        """Move past the members before ``traceEvents`` into its list; False where the object has none."""
        while True:
            c = self._skip(_SEP)
            if c == "}" or c == "":
                return False
            got = self._value()
            if got is None or not isinstance(got[0], str):
                return False
            key = got[0]
            self._pos = got[2]
            if self._skip(_SPACE) != ":":
                return False
            self._pos += 1
            c = self._skip(_SPACE)
            if key == "traceEvents":
                if c != "[":
                    raise ValueError("trace JSON object's 'traceEvents' is not a list")
                self._pos += 1
                return True
            got = self._value()
            if got is None:
                return False
            self._pos = got[2]
            self._gap_start = self._base + self._pos

    @property
    def bad_checksum(self) -> bool:
        """A gzip member's checksum did not match: its text is damaged somewhere (the events that parse are kept)."""
        return self._text.bad_checksum

    def warn(self, path: PathLike) -> None:
        """Say what was skipped (a :class:`TraceDamageWarning` each): damaged events, reading stopped early, a
        compressed file whose checksum does not match."""
        if self.bad_checksum:
            warnings.warn(TraceDamageWarning(f"{os.fspath(path)}: its gzip checksum does not match (the file is "
                                             "damaged somewhere; the events that read whole are kept)"),
                          stacklevel=3)
        if self.dropped:
            warnings.warn(TraceDamageWarning(f"{os.fspath(path)}: {_damaged(self.dropped)} skipped"), stacklevel=3)
        if self.stopped:
            warnings.warn(TraceDamageWarning(f"{os.fspath(path)}: {self.stopped}"), stacklevel=3)


def _damaged(n: int) -> str:
    return f"{n:,} damaged event" + ("" if n == 1 else "s")


def _valid_event(ev: Any) -> bool:
    """Whether a decoded element is a trace event: a dict whose standard fields, where present, have their
    types (``ph``, ``name``, ``cat`` strings; ``ts``, ``dur`` numbers; ``pid``, ``tid`` numbers or strings;
    ``args`` an object, a counter's holding numbers; null anywhere but in ``ph``, ``name``, ``cat``)."""
    if type(ev) is not dict:
        return False
    get = ev.get
    if type(get("ph", "")) is not str or type(get("name", "")) is not str or type(get("cat", "")) is not str:
        return False
    if type(get("ts", 0)) not in _NUMBER or type(get("dur", 0)) not in _NUMBER:
        return False
    if type(get("pid", 0)) not in _ID or type(get("tid", 0)) not in _ID:
        return False
    args = get("args")
    if args is None:
        return True
    if type(args) is not dict:
        return False
    if get("ph") == "C":  # (the types of the values tested in one C loop)
        return _NUMBER_TYPES.issuperset(map(type, args.values()))
    return True


def _scan(f, gz: bool) -> "tuple[list, _Events]":
    """Every event of the open trace file ``f`` (``gz``: gzip) and the scanner, which tells what was skipped."""
    scan = _Events(_Text(f, gz))
    return list(scan), scan


def iter_trace(path: PathLike):
    """The events of a Chrome trace file as :func:`read_trace` reads them, one at a time as they are parsed (memory:
    one block of text and its events); the warnings come once the last event has been taken.

    Raises (while iterating): as :func:`read_trace`.
    """
    with _open_trace(path) as f:
        scan = _Events(_Text(f, is_gzip_path(path)))
        yield from scan
    scan.warn(path)


def read_trace(path: PathLike) -> list:
    """Read the events of a Chrome trace file (``.json`` or ``.json.gz``) as a list of dicts, in file order.

    Tolerates a truncated file: a missing closing ``]``, a partial last event (dropped) or a cut gzip stream.
    Damage is skipped (see :class:`_Events`): a damaged event is left out, reading resumes at the next event and
    stops past ``MAX_GAP`` characters without one; each is told by a :class:`TraceDamageWarning`. Memory and
    time follow the events read, not the file's size.

    Raises:
        FileNotFoundError / OSError: the file cannot be read.
        ValueError: the content is not a Chrome trace (array of events or object with ``traceEvents``), or
            holds no event but damage.
    """
    with _open_trace(path) as f:
        events, scan = _scan(f, is_gzip_path(path))
    scan.warn(path)
    return events


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


_STRING_OR_SPACE = re.compile(r'("(?:[^"\\]|\\.)*")|[ \t\r\n]+', re.S)
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _event_text(event: dict, text: str, nonfinite: bool) -> str:
    """One line of strict ASCII JSON for an event read from ``text``: ``text`` itself, with the white space
    between its tokens left out where it spans lines and characters past ASCII escaped (so every number keeps
    its digits); re-encoded (:func:`encode_event`) where it holds a NaN or Infinity literal."""
    if nonfinite:
        return encode_event(event)
    if "\n" in text or "\r" in text:
        text = _STRING_OR_SPACE.sub(lambda m: m.group(1) or "", text)
    if not text.isascii():
        text = _NON_ASCII.sub(lambda m: json.dumps(m.group())[1:-1], text)
    return text


class RepairResult(int):
    """What :func:`repair_trace` did; as an ``int``, the number of events kept.

    Attributes:
        dropped (int): damaged events left out.
        cut (bool): a last event cut short by the end of the file was left out.
        stopped (str | None): why reading stopped before the end of the file, if it did.
        output (pathlib.Path): the file written: the trace itself, or the new file beside it.
        replaced (bool): whether the trace itself was replaced (it holds every event the original had).
    """

    dropped = 0
    cut = False
    stopped: Union[str, None] = None
    output: pathlib.Path
    replaced = True


def repaired_name(path: PathLike) -> pathlib.Path:
    """Where :func:`repair_trace` writes a trace it cannot replace: ``NAME.repaired.json`` beside ``NAME.json``
    (``.json.gz`` kept), ``NAME.repaired.json`` beside any other name."""
    p = pathlib.Path(path)
    name = p.name
    for suffix in (".json.gz", ".json"):
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return p.with_name(name[:-len(suffix)] + ".repaired" + name[-len(suffix):])
    return p.with_name(name + (".repaired.json.gz" if is_gzip_path(p) else ".repaired.json"))


def repair_trace(path: PathLike) -> RepairResult:
    """Rewrite a (possibly truncated or damaged) trace file at ``path`` as strict JSON, keeping every complete
    event (its text as it was: every digit of every number).

    Damage is skipped as :func:`read_trace` skips it (reading resumes at the next event). When nothing but a
    partial last event is lost, the trace is replaced atomically (written next to it, then renamed over it) with
    its permission bits; otherwise (damaged events dropped, or reading stopped early) the trace is left as it
    was and the result is written beside it (:func:`repaired_name`, never over an existing file). A symbolic
    link is followed: the file it points to is repaired and the link kept. Compression follows the name (or the
    gzip content). The trace's lock (:func:`lock_trace`) is held meanwhile, so a trace still being recorded is
    refused.

    Returns:
        RepairResult: the number of events kept, and what was left out and where the result went.

    Raises:
        TraceBusyError: a recorder is still writing the trace.
        FileExistsError: the trace cannot be replaced and its repaired name is taken.
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
        mode = os.fstat(fd).st_mode & 0o7777
        with os.fdopen(os.dup(fd), "rb") as f:
            gz = is_gzip_path(real) or f.read(2) == b"\x1f\x8b"  # a link named .gz to a gzip file of another name
            f.seek(0)
            scan = _Events(_Text(f, gz), keep_text=True)
            tmp_fd, tmp = tempfile.mkstemp(prefix=".repair-", suffix=".json.gz" if gz else ".json", dir=real.parent)
            try:
                with ChromeTraceWriter(tmp, fd=tmp_fd) as writer:
                    for event, text in scan:
                        writer.write_encoded(_event_text(event, text, scan.nonfinite))
                os.chmod(tmp, mode)  # keep the original permissions, not mkstemp's 0600
                result = RepairResult(writer.events_written)
                result.dropped, result.cut, result.stopped = scan.dropped, scan.cut, scan.stopped
                result.replaced = not scan.dropped and scan.stopped is None and not scan.bad_checksum
                if result.replaced:
                    result.output = real
                    os.replace(tmp, real)
                else:  # never less than the user had: the original stays, the result goes beside it
                    result.output = repaired_name(real)
                    try:
                        os.link(tmp, result.output)  # never over a file
                    except FileExistsError:
                        raise FileExistsError(errno.EEXIST, f"{result.output} exists (move it away and repair "
                                              "again); the trace is left as it was") from None
                    os.remove(tmp)
            except BaseException:
                if os.path.exists(tmp):
                    os.remove(tmp)
                raise
    finally:
        os.close(fd)
    return result
