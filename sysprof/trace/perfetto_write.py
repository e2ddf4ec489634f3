"""The writer of Perfetto-native traces: :class:`PerfettoTraceWriter` (the format: :mod:`sysprof.trace.perfetto`)."""
from __future__ import annotations

import math
import os
import pathlib
import zlib
from typing import Any, Union

from sysprof import forks

from ..text import encodable
from .chrome import ChromeTraceWriter, TraceWriter, counter_args
from .events import Event, to_chrome
from .perfetto import (INCREMENTAL_CLOCK, MAX_VALUES, METADATA_TRACK, REALTIME_CLOCK, RESIDUAL, SEQUENCE_ID,
                       PathLike, TraceTime, _integral, _is_int, _key_from_channel, _key_name, _now_ns, annotate,
                       counter_unit, protos, ts_ns)
from .schema import UNITS_EVENT, join_channel
from .tracks import CounterRow

__all__ = ["PerfettoTraceWriter"]

#: packets are buffered up to this many bytes, then written (compressed) as one chunk; flush() writes them at once
BUFFER_BYTES = 1 << 20

_NATIVE = {"B", "E", "X", "i", "I"}
_NATIVE_KEYS = {"name", "ph", "ts", "pid", "tid", "cat", "args"}


_NAN = math.nan


class _Group:
    """A counter (one event name of one pid/tid/cat): its track, its channels' tracks, their units (a
    :class:`~sysprof.trace.tracks.CounterTrack`'s; None: the units event's), their last values (dict input)."""

    __slots__ = ("uuid", "name", "cat", "tracks", "units", "last", "chunk")

    def __init__(self, uuid, name, cat, units=None):
        self.uuid = uuid
        self.name = name
        self.cat = cat
        self.tracks: dict = {}  # key -> (uuid, channel, label, CounterDescriptor fields)
        self.units = units      # key -> unit, or None
        self.last: dict = {}    # key -> last value written (dict input only)
        self.chunk = 0          # the chunk its values were last written in full


class PerfettoTraceWriter(TraceWriter):
    """Stream trace events (Chrome-style dicts) to a Perfetto protobuf trace (``.pftrace``); see the module
    docstring for what is written how. The same interface as :class:`~sysprof.trace.chrome.ChromeTraceWriter`.
    Not thread-safe: serialize calls from several threads.

    Args:
        path: file to create.
        overwrite: replace an existing file instead of raising.
        fd: an open, writable descriptor to write to instead of opening ``path`` (which then only names the file).
            The writer owns it and closes it in :meth:`close`.

    Raises:
        ImportError: the ``perfetto`` or ``protobuf`` package is missing.
        FileExistsError: ``path`` exists and ``overwrite`` is false.
        OSError: the file cannot be created (raised here, at construction).

    Attributes:
        path (pathlib.Path): the file being written.
    """

    #: the exact-timestamp type: ``writer.timestamp(t_ns)`` is the ``ts`` to give for ns ``t_ns``
    timestamp = TraceTime
    counter_changes = True

    def __init__(self, path: PathLike, *, overwrite: bool = False, fd: Union[int, None] = None,
                 compress: bool = True) -> None:
        self._pb = pb = protos()
        self.path = pathlib.Path(path)
        if fd is not None:
            self._file: Any = os.fdopen(fd, "wb")
        else:
            self._file = open(self.path, "wb" if overwrite else "xb")
        self._closed = False
        self._count = 0
        self._bytes = 0           # in the file
        self._buf = bytearray()   # whole packets not yet in the file
        self._compress = compress
        self._last_ns = None      # the incremental clock's value; None: no ClockSnapshot written yet
        self._head: list = []     # packets waiting for the first timestamp (the ClockSnapshot)
        self._uuid = 0
        self._chunk = 0           # chunks begun (each one self-contained: see _begin_chunk)
        self._names: dict = {}    # interned event names, categories, annotation names: (kind, str) -> iid
        self._desc: dict = {}     # track uuid -> (parent uuid, its latest TrackDescriptor packet's bytes)
        self._declared: set = set()    # track uuids whose descriptor the current chunk holds
        self._tracks: dict = {}   # ("p", pid) / ("t", pid, tid) / ("m",) -> uuid
        self._groups: dict = {}   # (pid, tid, cat, name) -> _Group (dict input)
        self._typed: dict = {}    # id(CounterTrack) -> (the CounterTrack, its _Group)
        self._proc_names: dict = {}    # pid -> process_name; (pid, tid) -> thread_name
        self._units: dict = {}    # channel -> unit symbol
        self._TP, self._TE = pb.TracePacket, pb.TrackEvent
        self._NEEDS = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        forks.register(self)

    # the child of a fork must not write the parent's trace (ChromeTraceWriter's rule, same attributes)
    _after_fork_in_child = ChromeTraceWriter._after_fork_in_child

    # ------------------------------------------------------------------ packets
    def _begin_chunk(self) -> None:
        """Open a chunk (the packets one :meth:`_drain` writes): it clears the sequence's incremental state and
        sets it again (defaults, the clock; interned names, track descriptors and full counter values as they are
        used), so that it reads without the chunks before it: a damaged chunk costs only itself."""
        self._chunk += 1
        self._names = {}
        self._declared = set()
        p = self._TP(trusted_packet_sequence_id=SEQUENCE_ID,
                     sequence_flags=self._pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED)
        if self._chunk == 1:
            p.first_packet_on_sequence = True
        p.trace_packet_defaults.timestamp_clock_id = INCREMENTAL_CLOCK
        self._put(p)
        if self._last_ns is not None:
            self._clock(self._last_ns)

    def _put(self, packet) -> bytes:
        """Buffer ``packet``; its bytes in the file (the Trace.packet field)."""
        data = packet.SerializeToString()
        data = bytes(b"\x0a" + _varint(len(data)) + data)  # Trace.packet: field 1, length-delimited
        self._buf += data
        return data

    def _drain(self) -> None:
        """Hand the buffered packets to the file: as one ``compressed_packets`` packet (deflate, as Perfetto's
        tracing service writes them), or as they are."""
        buf = self._buf
        if not buf:
            return
        self._buf = bytearray()
        if self._compress:
            data = self._TP(compressed_packets=zlib.compress(bytes(buf), 6)).SerializeToString()
            buf = bytearray(b"\x0a") + _varint(len(data)) + data
        self._file.write(buf)
        self._bytes += len(buf)

    def _clock(self, ns: int) -> None:
        """Write the ClockSnapshot tying the incremental clock to CLOCK_REALTIME at ``ns``, then the packets held
        back for it."""
        pb = self._pb
        p = self._TP(trusted_packet_sequence_id=SEQUENCE_ID)
        snap = p.clock_snapshot
        snap.primary_trace_clock = pb.BUILTIN_CLOCK_REALTIME
        snap.clocks.add(clock_id=REALTIME_CLOCK, timestamp=ns)
        snap.clocks.add(clock_id=INCREMENTAL_CLOCK, timestamp=ns, is_incremental=True)
        self._put(p)
        self._last_ns = ns
        head, self._head = self._head, []
        for packet in head:
            self._timed(packet, ns)

    def _timed(self, packet, ns: int) -> None:
        """Put ``packet`` with timestamp ``ns``: a delta on the incremental clock, or absolute when it is earlier
        than the last one."""
        last = self._last_ns
        if last is None:
            self._clock(ns)
            last = ns
        if ns >= last:
            packet.timestamp = ns - last
            self._last_ns = ns
        else:
            packet.timestamp = ns
            packet.timestamp_clock_id = REALTIME_CLOCK
        self._put(packet)

    def _event_packet(self):
        p = self._TP(trusted_packet_sequence_id=SEQUENCE_ID, sequence_flags=self._NEEDS)
        return p, p.track_event

    def _iid(self, packet, kind: str, name: str) -> int:
        """Interned id of ``name`` (kind ``n``: event name, ``c``: category, ``a``: annotation name), adding its
        InternedData entry to ``packet`` the first time."""
        iid = self._names.get((kind, name))
        if iid is None:
            iid = self._names[(kind, name)] = len(self._names) + 1
            data = packet.interned_data
            table = data.event_names if kind == "n" else data.event_categories if kind == "c" else \
                data.debug_annotation_names
            table.add(iid=iid, name=name)
        return iid

    def _descriptor(self, **fields) -> int:
        self._uuid += 1
        self._put_descriptor(self._uuid, **fields)
        return self._uuid

    def _put_descriptor(self, uuid: int, **fields) -> None:
        """Declare (again) track ``uuid`` with ``fields``, its parents first where this chunk lacks them."""
        parent = fields.get("parent_uuid")
        if parent:
            self._use(parent)
        p = self._TP(trusted_packet_sequence_id=SEQUENCE_ID)
        p.track_descriptor.CopyFrom(self._pb.TrackDescriptor(uuid=uuid, **fields))
        self._desc[uuid] = (parent, self._put(p))
        self._declared.add(uuid)

    def _use(self, uuid: int) -> int:
        """``uuid``, its descriptor (and its parents') in the current chunk."""
        if uuid not in self._declared:
            parent, packet = self._desc[uuid]
            if parent:
                self._use(parent)
            self._buf += packet
            self._declared.add(uuid)
        return uuid

    def _process_fields(self, pid):
        fields = {"pid": pid}
        if pid in self._proc_names:
            fields["process_name"] = self._proc_names[pid]
        return {"process": self._pb.ProcessDescriptor(**fields)}

    def _thread_fields(self, pid, tid):
        fields = {"pid": pid, "tid": tid}
        if (pid, tid) in self._proc_names:
            fields["thread_name"] = self._proc_names[(pid, tid)]
        return {"thread": self._pb.ThreadDescriptor(**fields)}

    def _track(self, pid: int, tid: int) -> int:
        """The track of (pid, tid): the process track where tid is 0, else the thread track."""
        key = ("p", pid) if tid == 0 else ("t", pid, tid)
        uuid = self._tracks.get(key)
        if uuid is None:
            if tid == 0:
                uuid = self._descriptor(**self._process_fields(pid))
            else:
                uuid = self._descriptor(**self._thread_fields(pid, tid))
            self._tracks[key] = uuid
        return self._use(uuid)

    def _name_track(self, event: dict) -> None:
        """``process_name`` / ``thread_name`` metadata: name the descriptor (again, if it was declared)."""
        name, pid, tid = event.get("name"), event.get("pid"), event.get("tid")
        args = event.get("args")
        label = args.get("name") if isinstance(args, dict) else None
        if not isinstance(label, str) or not _is_int(pid) or (name == "thread_name" and not _is_int(tid)):
            return
        if name == "process_name":
            self._proc_names[pid] = label
            uuid = self._tracks.get(("p", pid))
            if uuid is not None:
                self._put_descriptor(uuid, **self._process_fields(pid))
        elif tid != 0:
            self._proc_names[(pid, tid)] = label
            uuid = self._tracks.get(("t", pid, tid))
            if uuid is not None:
                self._put_descriptor(uuid, **self._thread_fields(pid, tid))

    # ------------------------------------------------------------------ events
    def write_typed(self, items, ts=None) -> None:
        """Append typed items (see :meth:`TraceWriter.write_typed`): a :class:`~sysprof.trace.tracks.CounterRow`
        straight onto its counter tracks (declared once, with the units of its
        :class:`~sysprof.trace.tracks.CounterTrack`), an :class:`~sysprof.trace.events.Event` or a dict as
        :meth:`write` takes it, at its exact ns (``ts`` is not used)."""
        for item in items:
            if item.__class__ is CounterRow:
                self._begin()
                self._row(item)
                self._end()
            elif isinstance(item, Event):
                self.write(to_chrome(item, TraceTime))
            else:
                self.write(item)

    def _begin(self) -> None:
        if self._closed:
            raise ValueError(f"PerfettoTraceWriter for {self.path} is closed")
        if not self._buf:
            self._begin_chunk()

    def _end(self) -> None:
        self._count += 1
        if len(self._buf) >= BUFFER_BYTES and not self._head:  # a chunk ends between events, never inside one
            self._drain()

    def _row(self, row: CounterRow) -> None:
        """A counter track's event as the renderer decided it: its values written where they changed (all of
        them the first time in a chunk), NaN where one ended; one repeated where none changed, so its time
        survives."""
        track, args, changed = row.track, row.args, row.changed
        entry = self._typed.get(id(track))
        if entry is None:
            if not args:
                return  # nothing known yet: nothing to say
            group = _Group(self._descriptor(parent_uuid=self._track(track.pid, track.tid), name=track.name),
                           track.name, track.cat, dict(zip(track.keys, track.units)))
            self._typed[id(track)] = (track, group)  # (the track kept alive: its id stays its own)
        else:
            group = entry[1]
        declared = group.tracks
        if group.chunk != self._chunk or changed is None:  # its first in this chunk (the reader's values were
            # cleared): all of them, NaN for those without a value now
            values = [(k, args.get(k, _NAN)) for k in track.keys if k in args or k in declared]
        else:
            values = [(k, args.get(k, _NAN)) for k, c in zip(track.keys, changed)
                      if c and (k in args or k in declared)]
            if not values:
                k = next(iter(args), None)
                values = [] if k is None else [(k, args[k])]
        if not values:
            return
        group.chunk = self._chunk
        ns = row.t_ns
        for lo in range(0, len(values), MAX_VALUES):
            self._counter_packet(group, values[lo:lo + MAX_VALUES], ns)

    def write(self, event: dict) -> None:
        """Append one trace event (a Chrome-style dict).

        Raises:
            ValueError: the writer is closed, or the event's ``ts`` is not a non-negative number.
            TypeError: an arg is not JSON serializable (nothing is written).
        """
        self._begin()
        ph = event.get("ph")
        if ph != "C":  # a command line, a name, a marker's args: lone surrogates, which protobuf refuses, as U+FFFD
            event = encodable(event)
        if ph == "C" and _is_int(event.get("pid")) and _is_int(event.get("tid")) and "ts" in event \
                and _NATIVE_KEYS.issuperset(event) and isinstance(event.get("name"), str) \
                and isinstance(event.get("cat", ""), str):
            self._counter(event)
        elif ph in _NATIVE and _is_int(event.get("pid")) and _is_int(event.get("tid")) and "ts" in event:
            self._slice_or_instant(event, ph)
        else:
            self._stored(event)
        self._end()

    def _counter(self, event: dict) -> None:
        ns = ts_ns(event["ts"])
        raw = event.get("args")
        args = counter_args(raw.keys(), raw.values()) if isinstance(raw, dict) else {}
        pid, tid, name, cat = event["pid"], event["tid"], event["name"], event.get("cat")
        group = self._groups.get((pid, tid, cat, name))
        if group is None:
            if not args:
                return  # nothing known yet: nothing to say
            parent = self._track(pid, tid)
            group = self._groups[(pid, tid, cat, name)] = _Group(self._descriptor(parent_uuid=parent, name=name),
                                                               name, cat)
        last = group.last
        full = group.chunk != self._chunk  # its first values in this chunk: all of them (the reader's are cleared)
        values = []
        for k, v in args.items():
            if not full and k in last and last[k] == v:
                continue  # unchanged
            if v.__class__ is float or (isinstance(v, (int, float)) and not isinstance(v, bool)):
                values.append((k, v))  # (anything else is not a number: no channel)
        values += [(k, math.nan) for k in last if k not in args]
        if not values:  # nothing changed: repeat one value, so the event's time survives
            k = next((k for k in args if k in last), None)
            if k is None:
                return
            values.append((k, last[k]))
        for k, v in values:
            if v != v:
                last.pop(k, None)
            else:
                last[k] = v
        group.chunk = self._chunk
        for lo in range(0, len(values), MAX_VALUES):
            self._counter_packet(group, values[lo:lo + MAX_VALUES], ns)

    def _counter_track(self, group: _Group, key: str):
        track = group.tracks.get(key)
        if track is not None:
            return self._use(track[0])
        channel = join_channel(group.name, key)
        label = channel if _key_from_channel(group.name, channel) == key else f"{group.name}/{key}"
        unit = self._units.get(channel) if group.units is None else group.units.get(key)
        counter = dict(counter_unit(self._pb, unit))
        if group.cat is not None:
            counter["categories"] = [group.cat]
        uuid = self._descriptor(parent_uuid=group.uuid, name=label, counter=self._pb.CounterDescriptor(**counter))
        group.tracks[key] = (uuid, channel, label, counter)
        return uuid

    def _counter_packet(self, group: _Group, values: list, ns: int) -> None:
        p, te = self._event_packet()
        te.type = self._TE.TYPE_COUNTER
        (k, v), rest = values[0], values[1:]
        te.track_uuid = self._counter_track(group, k)
        if _integral(v):
            te.counter_value = int(v)
        else:
            te.double_counter_value = v
        for k, v in rest:
            uuid = self._counter_track(group, k)
            if _integral(v):
                te.extra_counter_track_uuids.append(uuid)
                te.extra_counter_values.append(int(v))
            else:
                te.extra_double_counter_track_uuids.append(uuid)
                te.extra_double_counter_values.append(v)
        self._timed(p, ns)

    def _annotations(self, args: Any, residual: dict) -> list:
        """``(name, DebugAnnotation)`` per arg and for ``residual`` (built before anything is interned, so that a
        TypeError leaves no trace)."""
        DebugAnnotation = self._pb.DebugAnnotation
        out = []
        for k, v in (args.items() if isinstance(args, dict) else ()):
            ann = DebugAnnotation()
            annotate(ann, v)
            out.append((_key_name(k), ann))
        if residual:
            ann = DebugAnnotation()
            annotate(ann, residual)
            out.append((RESIDUAL, ann))
        return out

    def _attach(self, packet, te, annotations: list) -> None:
        for name, ann in annotations:
            ann.name_iid = self._iid(packet, "a", name)
            te.debug_annotations.append(ann)

    def _slice_or_instant(self, event: dict, ph: str) -> None:
        ns = ts_ns(event["ts"])
        residual = {k: v for k, v in event.items() if k not in _NATIVE_KEYS}
        name, cat, args = event.get("name"), event.get("cat"), event.get("args")
        if name is not None and not isinstance(name, str):
            return self._stored(event)
        if ph == "I":
            residual["ph"] = "I"
        if cat == "":
            residual["cat"] = ""
        elif cat is not None and not isinstance(cat, str):
            return self._stored(event)
        if args == {} or (args is not None and not isinstance(args, dict)):
            residual["args"] = args
        if ph == "X":
            dur = residual.get("dur")
            if isinstance(dur, bool) or not isinstance(dur, (int, float)) or dur < 0:
                return self._stored(event)
            residual["ph"] = "X"
        annotations = self._annotations(args, residual)
        track = self._track(event["pid"], event["tid"])
        p, te = self._event_packet()
        te.type = {"B": self._TE.TYPE_SLICE_BEGIN, "E": self._TE.TYPE_SLICE_END, "X": self._TE.TYPE_SLICE_BEGIN}.get(
            ph, self._TE.TYPE_INSTANT)
        te.track_uuid = track
        if name is not None:
            te.name_iid = self._iid(p, "n", name)
        if cat:
            te.category_iids.append(self._iid(p, "c", cat))
        self._attach(p, te, annotations)
        self._timed(p, ns)
        if ph == "X":  # its end, with an absolute timestamp when later ones follow (they come back in order)
            p, te = self._event_packet()
            te.type = self._TE.TYPE_SLICE_END
            te.track_uuid = track
            self._attach(p, te, self._annotations(None, {"ph": "X"}))
            self._timed(p, ns + ts_ns(residual["dur"]))

    def _stored(self, event: dict) -> None:
        """An event Perfetto has no place for: an instant on the metadata track holding all of it."""
        name, args = event.get("name"), event.get("args")
        residual = {k: v for k, v in event.items() if k not in ("name", "args", "ts")}
        if "name" in event and not isinstance(name, str):
            residual["name"] = name
        if not isinstance(args, dict) or not args:
            if "args" in event:
                residual["args"] = args
            args = None
        ns = None
        if "ts" in event:
            try:
                ns = ts_ns(event["ts"])
            except ValueError:
                residual["ts"] = event["ts"]
        else:
            residual["no_ts"] = True
        annotations = self._annotations(args, residual)
        if event.get("ph") == "M":
            if name in ("process_name", "thread_name"):
                self._name_track(event)
            elif name == UNITS_EVENT:
                self._declare_units(event)
        uuid = self._tracks.get(("m",))
        if uuid is None:
            uuid = self._tracks[("m",)] = self._descriptor(name=METADATA_TRACK)
        self._use(uuid)
        p, te = self._event_packet()
        te.type = self._TE.TYPE_INSTANT
        te.track_uuid = uuid
        if isinstance(name, str):
            te.name_iid = self._iid(p, "n", name)
        self._attach(p, te, annotations)
        if ns is None:
            ns = self._last_ns
        if ns is None:  # no time yet: wait for the first one (the ClockSnapshot's)
            self._head.append(p)
        else:
            self._timed(p, ns)

    def _declare_units(self, event: dict) -> None:
        """A units event: declare the unit of every counter track already written with another (again)."""
        units = event.get("args", {}).get("units") if isinstance(event.get("args"), dict) else None
        if not isinstance(units, dict):
            return
        self._units.update(units)
        for group in self._groups.values():
            for key, (uuid, channel, label, counter) in list(group.tracks.items()):
                new = dict(counter_unit(self._pb, self._units.get(channel)))
                if group.cat is not None:
                    new["categories"] = [group.cat]
                if new != counter:
                    group.tracks[key] = (uuid, channel, label, new)
                    self._put_descriptor(uuid, parent_uuid=group.uuid, name=label,
                                         counter=self._pb.CounterDescriptor(**new))

    # ------------------------------------------------------------------ file
    def flush(self) -> None:
        """Push every packet written so far to the operating system: the file then ends on a whole packet and
        :func:`read_events` returns every event written so far. No-op once closed."""
        if self._closed:
            return
        if not self._chunk:  # no event yet: the file still opens like a trace
            self._begin_chunk()
        if self._head:
            self._clock(self._last_ns if self._last_ns is not None else _now_ns())
        self._drain()
        self._file.flush()

    def close(self) -> None:
        """Write what is held back and close the file. Calling it again does nothing."""
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            self._file.close()

    @property
    def bytes_written(self) -> int:
        """Bytes written so far: in the file, and buffered (not yet compressed)."""
        return self._bytes + len(self._buf)



def _varint(n: int) -> bytearray:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return out
