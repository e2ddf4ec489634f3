"""Any sysprof trace file read as Chrome-style event dicts: the one place that tells the formats apart.

:func:`load_events` decides by content, not by name alone:

* gzip (the first two bytes are ``1f 8b``, whatever the name): a compressed Chrome JSON trace (``.json.gz``);
* after ASCII white space, ``[`` or ``{``: a Chrome JSON trace (``sysprof record``'s, the Composer layout of
  ``JSONTraceHandler`` / ``sysprof.profile()``, the JSON Object Format); both JSON forms may be truncated (a
  killed recorder's), as :func:`sysprof.trace.chrome.read_trace` allows;
* a Perfetto protobuf trace (a ``Trace`` message: its packets are field 1, length-delimited, so the file starts
  with the tag byte ``0x0a`` and a varint length): read by :func:`sysprof.trace.perfetto.read_events`, imported
  only then. A name ending in ``.pftrace``, ``.perfetto-trace`` or ``.pb`` is read as protobuf first (a packet
  91 bytes long starts ``0a 5b``, which is also ``\\n[``), and so is such a name whose first byte is not JSON's
  (a damaged tag); any other name whose JSON reading finds no event but starts with ``0x0a`` is read as protobuf
  next.

Only regular files are read (a FIFO or a device would block or never end), opened without blocking. A JSON trace
is streamed (:func:`sysprof.trace.chrome.read_trace`'s bounds and damage rules): only its first MiB is read to
tell the format. :func:`iter_events` hands the events over one at a time as they are parsed (JSON and
``.pftrace``), for readers that keep only what they need of them (:class:`sysprof.report.TraceData`).
"""
from __future__ import annotations

import importlib
import os
from typing import Union

__all__ = ["load_events", "iter_events", "trace_format", "PERFETTO_SUFFIXES"]

PathLike = Union[str, "os.PathLike[str]"]

#: names read as Perfetto protobuf first (any case)
PERFETTO_SUFFIXES = (".pftrace", ".perfetto-trace", ".pb")
_GZIP_MAGIC = b"\x1f\x8b"
_PACKET_TAG = 0x0A  # TracePacket: field 1 of Trace, wire type 2 (length-delimited)
_JSON_SPACE = b" \t\r\n"


def _packet_start(data: bytes) -> bool:
    """Whether ``data`` opens like a protobuf ``Trace``: the packet tag, then a complete varint length above 0 (the
    packet itself may be cut short: a truncated trace)."""
    if not data or data[0] != _PACKET_TAG:
        return False
    length = 0
    for i in range(1, min(len(data), 11)):
        length |= (data[i] & 0x7F) << (7 * (i - 1))
        if not data[i] & 0x80:
            return length > 0
    return False


def trace_format(path: PathLike, data: bytes) -> str:
    """``"gzip"``, ``"json"``, ``"perfetto"`` or ``"unknown"``: what the bytes of a trace file look like
    (``path`` only for its name's suffix)."""
    if data[:2] == _GZIP_MAGIC:
        return "gzip"
    if os.fspath(path).lower().endswith(PERFETTO_SUFFIXES) and _packet_start(data):
        return "perfetto"
    if data.lstrip(_JSON_SPACE)[:1] in (b"[", b"{"):
        return "json"
    if _packet_start(data) or (data and os.fspath(path).lower().endswith(PERFETTO_SUFFIXES)):
        return "perfetto"  # (a .pftrace whose first byte is damaged: its reader reads past that)
    return "unknown"


def _perfetto_module(path: PathLike):
    try:  # its own errors name what it needs (the perfetto and protobuf packages)
        return importlib.import_module("sysprof.trace.perfetto")
    except ModuleNotFoundError as e:
        if e.name != "sysprof.trace.perfetto":
            raise
        raise ImportError(f"{os.fspath(path)} is a Perfetto protobuf trace, and this sysprof has no reader for "
                          "them (sysprof.trace.perfetto is missing)") from None


def _perfetto_events(path: PathLike):
    """The events of a Perfetto trace, streamed where its reader streams them."""
    perfetto = _perfetto_module(path)
    stream = getattr(perfetto, "iter_events", None)
    return stream(path) if stream is not None else perfetto.read_events(path)


def load_events(path: PathLike) -> list:
    """The events of a sysprof trace file as Chrome trace-event dicts (``ts`` in µs), whatever its format (see the
    module docstring): ``sysprof record``'s JSON (``.json``, ``.json.gz``, truncated too), the Composer layout,
    Perfetto protobuf.

    Raises:
        FileNotFoundError / OSError: the file cannot be read.
        ValueError: not a trace (empty, not a regular file, neither JSON, gzip nor protobuf).
        ImportError: a Perfetto trace where its reader (or the packages it needs) is missing.
    """
    return list(iter_events(path))


def iter_events(path: PathLike):
    """:func:`load_events`, one event at a time as the file is read (a JSON trace's and a ``.pftrace``'s events are
    parsed as they are taken), for a reader that keeps only what it needs of them (``sysprof report``,
    :func:`sysprof.read_trace`). The format is told, and a file that is no trace refused, at the first event
    asked for; damage is told (warned) once the last one has been taken.

    Raises (while iterating): as :func:`load_events`.
    """
    from .chrome import MAX_GAP, _Events, _open_trace, _Text

    with _open_trace(path) as f:
        head = f.read(MAX_GAP + 2)  # enough to find the first '[' or '{' after the white space allowed
        kind = trace_format(path, head)
        if kind in ("gzip", "json"):
            f.seek(0)
            scan = _Events(_Text(f, kind == "gzip"))
            read = 0
            try:
                for event in scan:
                    read += 1
                    yield event
            except ValueError as e:  # not a Chrome trace (told before any event)
                if read or not (kind == "json" and _packet_start(head)):
                    raise ValueError(f"{os.fspath(path)}: {e}") from None
                read = -1
            if read > 0 or not (kind == "json" and _packet_start(head)):
                scan.warn(path)
                return
            # "\n[" opening a 91-byte first packet, not JSON: a Perfetto trace
        elif kind != "perfetto":
            if not head:
                raise ValueError(f"{os.fspath(path)}: empty file, not a trace")
            raise ValueError(f"{os.fspath(path)}: not a trace (neither Chrome JSON, gzip nor Perfetto protobuf)")
    yield from _perfetto_events(path)
