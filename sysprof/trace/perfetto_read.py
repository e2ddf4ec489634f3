"""The reader of Perfetto-native traces written by :class:`~sysprof.trace.perfetto_write.PerfettoTraceWriter`:
:func:`read_events` (the format and what comes back: :mod:`sysprof.trace.perfetto`)."""
from __future__ import annotations

import zlib

from .chrome import _open_trace
from .perfetto import (INCREMENTAL_CLOCK, METADATA_TRACK, RESIDUAL, PathLike, TraceTime, _key_from_channel,
                       annotation_value, protos)

__all__ = ["read_events", "iter_packets"]

_PH = {1: "B", 2: "E", 3: "i"}  # TrackEvent.Type -> Chrome phase (TYPE_COUNTER handled apart)


def _varint(data: bytes, pos: int):
    """``(value, next position)`` of the varint at ``pos``; None where the data ends inside it."""
    value = shift = 0
    n = len(data)
    while pos < n:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    return None


def iter_packets(data: bytes):
    """The ``TracePacket`` messages of a ``Trace`` message's bytes, in order, those of ``compressed_packets``
    bundles expanded in their place, up to the last whole one: a truncated or unreadable tail ends the iteration
    (a cut-off compressed bundle yields the whole packets its data still holds).

    Raises:
        ValueError: the data does not start like a Perfetto trace (a ``Trace.packet`` field).
    """
    TracePacket = protos().TracePacket
    pos, n = 0, len(data)
    if n and data[0] != 0x0A:
        raise ValueError("not a Perfetto protobuf trace (it does not start with a TracePacket)")
    while pos < n:
        tag = _varint(data, pos)
        length = None if tag is None else _varint(data, tag[1])
        if length is None:
            return
        key, (size, pos) = tag[0], length
        end = pos + size
        if end > n:  # the last packet was cut short: what a compressed bundle's start still holds
            yield from _cut_bundle(data[pos:])
            return
        if key != 0x0A:  # another field of Trace: skip it (length-delimited only; else stop)
            if key & 7 != 2:
                return
            pos = end
            continue
        try:
            packet = TracePacket.FromString(data[pos:end])
        except Exception:  # noqa: BLE001 - a corrupt packet ends what can be read
            return
        pos = end
        if packet.HasField("compressed_packets"):
            try:
                inner = zlib.decompress(packet.compressed_packets, 32 + zlib.MAX_WBITS)
            except zlib.error:
                return
            yield from iter_packets(inner)
        else:
            yield packet


def _cut_bundle(part: bytes):
    """The whole packets at the start of a cut-off ``compressed_packets`` packet (field 50: tag 0x92 0x03)."""
    if not part.startswith(b"\x92\x03"):
        return
    length = _varint(part, 2)
    if length is None:
        return
    inflate = zlib.decompressobj(32 + zlib.MAX_WBITS)
    try:
        inner = inflate.decompress(part[length[1]:])
    except zlib.error:
        return
    if inner:
        yield from iter_packets(inner)


class _Reader:
    """Rebuilds the Chrome-style events from the packets, in their order."""

    def __init__(self) -> None:
        self.events: list = []
        self.clock = INCREMENTAL_CLOCK  # TracePacketDefaults.timestamp_clock_id
        self.last_ns = 0                # the incremental clock's value
        self.names: dict = {}           # (kind, iid) -> str
        self.tracks: dict = {}          # uuid -> TrackDescriptor
        self.state: dict = {}           # counter (group track uuid) -> {key: value}: its current values
        self.keys: dict = {}            # counter track uuid -> its args key
        self.cats: dict = {}            # counter -> its category (None: none)
        self.pending = None             # (group uuid, ns, event) of the counter event being assembled

    def packet(self, p) -> None:
        if p.sequence_flags & 1 or p.incremental_state_cleared:  # SEQ_INCREMENTAL_STATE_CLEARED
            self.names.clear()
        if p.HasField("trace_packet_defaults"):
            self.clock = p.trace_packet_defaults.timestamp_clock_id
        if p.HasField("interned_data"):
            data = p.interned_data
            for kind, table in (("n", data.event_names), ("c", data.event_categories),
                                ("a", data.debug_annotation_names)):
                for entry in table:
                    self.names[(kind, entry.iid)] = entry.name
        if p.HasField("clock_snapshot"):
            for clock in p.clock_snapshot.clocks:
                if clock.clock_id == INCREMENTAL_CLOCK:
                    self.last_ns = clock.timestamp
            return
        if p.HasField("track_descriptor"):
            self.tracks[p.track_descriptor.uuid] = p.track_descriptor
        if p.HasField("track_event"):
            ns = self.timestamp(p)
            if p.track_event.type == 4:  # TYPE_COUNTER
                self.counter(p.track_event, ns)
            else:
                self.finish_counter()
                self.event(p.track_event, ns)

    def timestamp(self, p) -> int:
        clock = p.timestamp_clock_id or self.clock
        if clock == INCREMENTAL_CLOCK:
            self.last_ns += p.timestamp
            return self.last_ns
        return p.timestamp

    # ---- counters
    def counter(self, te, ns: int) -> None:
        values = [(te.track_uuid, float(te.counter_value) if te.HasField("counter_value")
                   else te.double_counter_value)]
        values += [(u, float(v)) for u, v in zip(te.extra_counter_track_uuids, te.extra_counter_values)]
        values += list(zip(te.extra_double_counter_track_uuids, te.extra_double_counter_values))
        group = self.tracks[te.track_uuid].parent_uuid
        pending = self.pending
        if pending is None or pending[0] != group or pending[1] != ns:
            self.finish_counter()
            self.pending = (group, ns)
        state = self.state.setdefault(group, {})
        keys = self.keys
        for uuid, value in values:
            key = keys.get(uuid)
            if key is None:
                key = keys[uuid] = _key_from_channel(self.tracks[group].name, self.tracks[uuid].name)
            if value != value:  # NaN: the value ends here
                state.pop(key, None)
            else:
                state[key] = value
        if group not in self.cats:
            cats = self.tracks[te.track_uuid].counter.categories
            self.cats[group] = cats[0] if len(cats) else None

    def finish_counter(self) -> None:
        if self.pending is None:
            return
        group, ns = self.pending
        self.pending = None
        desc = self.tracks[group]
        pid, tid = self.owner(desc.parent_uuid)
        event = {"name": desc.name, "ph": "C", "ts": TraceTime(ns), "pid": pid, "tid": tid,
                 "args": dict(self.state[group])}
        cat = self.cats.get(group)
        if cat is not None:
            event["cat"] = cat
        self.events.append(event)

    def owner(self, uuid: int):
        """(pid, tid) of a process or thread track."""
        desc = self.tracks[uuid]
        if desc.HasField("thread"):
            return desc.thread.pid, desc.thread.tid
        return desc.process.pid, 0

    # ---- slices, instants, stored events
    def event(self, te, ns: int) -> None:
        args: dict = {}
        residual: dict = {}
        for ann in te.debug_annotations:
            name = self.names.get(("a", ann.name_iid), ann.name) if ann.name_iid else ann.name
            if name == RESIDUAL:
                residual = annotation_value(ann)
            else:
                args[name] = annotation_value(ann)
        name = self.names.get(("n", te.name_iid)) if te.name_iid else (te.name if te.HasField("name") else None)
        desc = self.tracks[te.track_uuid]
        if desc.name == METADATA_TRACK and not desc.HasField("process") and not desc.HasField("thread"):
            event: dict = {} if name is None else {"name": name}
            if not residual.pop("no_ts", False) and "ts" not in residual:
                event["ts"] = TraceTime(ns)
            if args:
                event["args"] = args
            event.update(residual)
            self.events.append(event)
            return
        ph = residual.pop("ph", None) or _PH.get(te.type)
        if ph == "X" and te.type == 2:
            return  # the end of an X event, written for Perfetto
        pid, tid = self.owner(te.track_uuid)
        event = {} if name is None else {"name": name}
        event["ph"] = ph
        event["ts"] = TraceTime(ns)
        event["pid"] = pid
        event["tid"] = tid
        cats = [self.names.get(("c", i)) for i in te.category_iids] + list(te.categories)
        if cats:
            event["cat"] = ",".join(c for c in cats if c is not None)
        if args:
            event["args"] = args
        event.update(residual)
        self.events.append(event)


def read_events(path: PathLike) -> list:
    """Read a ``.pftrace`` written by :class:`~sysprof.trace.perfetto_write.PerfettoTraceWriter` back into Chrome-style
    event dicts (the ones :class:`sysprof.report.TraceData` reads), in the order written, up to the last whole
    packet (a truncated file reads as far as it goes).

    Raises:
        ImportError: the ``perfetto`` or ``protobuf`` package is missing.
        FileNotFoundError / OSError: the file cannot be read.
        ValueError: not a Perfetto protobuf trace, or not one of sysprof's (a track event on a track it never
            declared).
    """
    with _open_trace(path) as f:
        data = f.read()
    reader = _Reader()
    try:
        for packet in iter_packets(data):
            reader.packet(packet)
    except KeyError as e:
        raise ValueError(f"{path}: not a sysprof Perfetto trace (unknown track {e})") from None
    reader.finish_counter()
    return reader.events
