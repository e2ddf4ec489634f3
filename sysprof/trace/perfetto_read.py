"""The reader of Perfetto-native traces written by :class:`~sysprof.trace.perfetto_write.PerfettoTraceWriter`:
:func:`read_events` (the format and what comes back: :mod:`sysprof.trace.perfetto`)."""
from __future__ import annotations

import itertools
import logging
import zlib

from .chrome import _open_trace
from .perfetto import (INCREMENTAL_CLOCK, METADATA_TRACK, RESIDUAL, PathLike, TraceTime, _key_from_channel,
                       annotation_value, protos)

__all__ = ["read_events", "iter_events", "iter_packets"]

log = logging.getLogger(__name__)

_PH = {1: "B", 2: "E", 3: "i"}  # TrackEvent.Type -> Chrome phase (TYPE_COUNTER handled apart)
#: a varint is at most this many bytes (64 bits); a longer one is damage
_MAX_VARINT = 10
#: one compressed bundle inflates to at most this many bytes (the writer's chunks are about 1 MiB); more is damage
MAX_INFLATED = 16 << 20
#: reading stops after this many packets that give nothing (damaged, refused, empty), plus 4 per event read
MAX_JUNK = 100_000
_PACKET_TAG = 0x0A      # Trace.packet: field 1, length-delimited
_BUNDLE_TAG = b"\x92\x03"  # TracePacket.compressed_packets: field 50, length-delimited


def _varint(data: bytes, pos: int):
    """``(value, next position)`` of the varint at ``pos``; None where the data ends inside it or it is longer than
    a varint can be."""
    value = shift = 0
    for pos in range(pos, min(len(data), pos + _MAX_VARINT)):
        b = data[pos]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos + 1
        shift += 7
    return None


def _boundary(data: bytes, pos: int) -> bool:
    """Whether a packet may start at ``pos`` (or the data ends there)."""
    return pos == len(data) or data[pos] == _PACKET_TAG


class _Scan:
    """Splits a ``Trace`` message's bytes into its ``TracePacket`` messages, expanding ``compressed_packets`` bundles,
    and steps over damage: a packet whose framing, protobuf or deflate data is bad is skipped (``damaged`` counts
    them, and a None takes its place in what :meth:`packets` yields), and reading goes on at the next place where a
    whole, well-formed packet starts (the tag byte, a length ending on the next packet's tag or the end, a
    packet that parses and serializes back to the same bytes). A bundle whose outer length was damaged is told
    apart by its own length (the bundle field's). Bounded: protobuf parses of candidates while resynchronising, in
    bytes, at most ``4 * len(data) + 1 MiB``; a bundle inflates to at most :data:`MAX_INFLATED` bytes, and bundles
    inside bundles are damage."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.damaged = 0
        self.budget = 4 * len(data) + (1 << 20)
        self.TracePacket = protos().TracePacket

    def packets(self):
        yield from self._packets(self.data, True)

    def _packets(self, data: bytes, outer: bool):
        pos, n = 0, len(data)
        while pos < n:
            if data[pos] == _PACKET_TAG and pos + 1 < n and data[pos + 1] < 0x80 and (
                    pos + 2 + data[pos + 1] == n or (pos + 2 + data[pos + 1] < n
                                                     and data[pos + 2 + data[pos + 1]] == _PACKET_TAG)):
                frame = pos + 2, pos + 2 + data[pos + 1]  # the common case: a small packet, then the next one
            else:
                frame = self._frame(data, pos)
            if frame is None:
                if n - pos <= _MAX_VARINT and all(b & 0x80 for b in data[pos + 1:]):
                    return  # the file ends inside the last packet's length: cut short
                yield self._damage()
                pos = self._resync(data, pos + 1)
                continue
            start, end = frame
            if end > n:  # the last packet, cut short (a killed recorder's) or a damaged length
                nxt = self._resync(data, pos + 1)
                if nxt < n:
                    yield self._damage()
                    pos = nxt
                    continue
                if outer:
                    yield from self._cut_bundle(data[start:])
                return
            packet = self._parse(data, start, end)
            if packet is None or not (_boundary(data, end) or self._bundle_end(data, start) == end
                                      or self._frame(data, end) is not None):  # (the next packet's tag damaged)
                yield self._damage()
                pos = self._resync(data, pos + 1)
                continue
            pos = end
            if not packet.HasField("compressed_packets"):
                yield packet
                continue
            inner = self._inflate(packet.compressed_packets) if outer else None
            if inner is None:
                yield self._damage()
                continue
            yield from self._packets(inner, False)  # deflate's checksum held: its packets are as written

    def _damage(self):
        self.damaged += 1
        return None

    @staticmethod
    def _bundle_end(data: bytes, start: int):
        """Where the ``compressed_packets`` bundle starting at ``start`` ends by its own length (None: not one)."""
        if data[start:start + 2] != _BUNDLE_TAG:
            return None
        inner = _varint(data, start + 2)
        return None if inner is None else inner[1] + inner[0]

    def _frame(self, data: bytes, pos: int):
        """``(start, end)`` of the packet whose tag is at ``pos`` (end may be past the data: a cut packet); None
        where none plausibly starts there."""
        length = _varint(data, pos + 1)
        if length is None:
            return None
        start = length[1]
        end = start + length[0]
        inner = self._bundle_end(data, start)
        if inner is not None and inner != end and inner <= len(data) and _boundary(data, inner) \
                and (end > len(data) or not _boundary(data, end)):
            end = inner  # the outer length is damaged; the bundle's own says where it ends
        if data[pos] != _PACKET_TAG and not (end <= len(data) and _boundary(data, end) and (
                inner == end or self._plausible(data, start, end))):
            return None  # a damaged tag is read through only where the packet is plausible: see _resync
        return start, end

    def _parse(self, data: bytes, start: int, end: int):
        try:
            return self.TracePacket.FromString(data[start:end])
        except Exception:  # noqa: BLE001 - protobuf's DecodeError, or any other refusal: damage
            return None

    def _resync(self, data: bytes, pos: int) -> int:
        """The next position from ``pos`` on where a whole, well-formed packet starts (the end where none does)."""
        n = len(data)
        while self.budget > 0:
            pos = data.find(b"\x0a", pos)
            if pos < 0:
                return n
            frame = self._frame(data, pos)
            if frame is not None and frame[1] <= n and _boundary(data, frame[1]) and self._plausible(data, *frame):
                return pos
            pos += 1
        self.damaged += 1  # out of budget: the rest is left unread
        return n

    def _plausible(self, data: bytes, start: int, end: int) -> bool:
        """Whether ``data[start:end]`` is a packet as a writer makes them: it parses and serializes back to the
        same bytes, and it is on a sequence or a bundle (random bytes almost never are)."""
        self.budget -= end - start
        packet = self._parse(data, start, end)
        return packet is not None and packet.SerializeToString() == data[start:end] and bool(
            packet.trusted_packet_sequence_id or packet.HasField("compressed_packets"))

    @staticmethod
    def _inflate(blob: bytes):
        """The bytes a whole ``compressed_packets`` bundle inflates to; None where it is damaged or too big."""
        inflate = zlib.decompressobj(32 + zlib.MAX_WBITS)
        try:
            out = inflate.decompress(blob, MAX_INFLATED)
        except zlib.error:
            return None
        return out if inflate.eof and not inflate.unconsumed_tail else None

    def _cut_bundle(self, part: bytes):
        """The whole packets at the start of a cut-off ``compressed_packets`` packet (its deflate stream cut short
        too: unchecked, as far as it inflates)."""
        if not part.startswith(_BUNDLE_TAG):
            return
        length = _varint(part, 2)
        if length is None:
            return
        inflate = zlib.decompressobj(32 + zlib.MAX_WBITS)
        try:
            inner = inflate.decompress(part[length[1]:], MAX_INFLATED)
        except zlib.error:
            return
        for packet in self._packets(inner, False):
            if packet is None:  # what the cut left of its last packet, or damage: the end of what is known
                return
            yield packet


def iter_packets(data: bytes):
    """The ``TracePacket`` messages of a ``Trace`` message's bytes, in order, those of ``compressed_packets``
    bundles expanded in their place, up to the last whole one (a cut-off compressed bundle yields the whole packets
    its data still holds); damaged packets and bundles are left out (see :class:`_Scan`).

    Raises:
        ValueError: the data does not start like a Perfetto trace (a ``Trace.packet`` field).
    """
    return (p for p in _scan(data).packets() if p is not None)


def _scan(data: bytes) -> _Scan:
    scan = _Scan(data)
    if data and data[0] != _PACKET_TAG and scan._frame(data, 0) is None:
        raise ValueError("not a Perfetto protobuf trace (it does not start with a TracePacket)")
    return scan


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
        self.pending = None             # (group uuid, ns) of the counter event being assembled
        self.carried = None             # the pending counter's group, its values from before the state was cleared
        self.lost = False               # packets were lost: those needing incremental state wait for it cleared
        self.groups: dict = {}          # counter track uuid -> its group's uuid; group uuid -> (name, pid, tid)

    def packet(self, p) -> bool:
        """Take packet ``p`` (None: a damaged one); whether it holds anything sysprof writes."""
        if p is None:  # a damaged packet or bundle, skipped: what it set is unknown until the state is cleared
            self.finish_counter()
            self.lost = True
            return False
        if p.sequence_flags & 1 or p.incremental_state_cleared:  # SEQ_INCREMENTAL_STATE_CLEARED
            self.clear()
        elif self.lost and p.sequence_flags & 2:  # SEQ_NEEDS_INCREMENTAL_STATE
            return False
        used = False
        if p.HasField("trace_packet_defaults"):
            self.clock = p.trace_packet_defaults.timestamp_clock_id
            used = True
        if p.HasField("interned_data"):
            used = True
            data = p.interned_data
            for kind, table in (("n", data.event_names), ("c", data.event_categories),
                                ("a", data.debug_annotation_names)):
                for entry in table:
                    self.names[(kind, entry.iid)] = entry.name
        if p.HasField("clock_snapshot"):
            for clock in p.clock_snapshot.clocks:
                if clock.clock_id == INCREMENTAL_CLOCK:
                    self.last_ns = clock.timestamp
            return True
        if p.HasField("track_descriptor"):
            self.tracks[p.track_descriptor.uuid] = p.track_descriptor
            self.keys.pop(p.track_descriptor.uuid, None)
            self.groups.clear()
            used = True
        if p.HasField("track_event"):
            used = True
            ns = self.timestamp(p)
            if p.track_event.type == 4:  # TYPE_COUNTER
                self.counter(p.track_event, ns)
            else:
                self.finish_counter()
                self.event(p.track_event, ns)
        return used

    def clear(self) -> None:
        """A new chunk: interned names and counter values start again (the writer sends all of a counter's values
        the first time in a chunk). A counter event being assembled keeps its values: the next packet may add to
        it."""
        self.names.clear()
        self.keys.clear()
        self.cats.clear()
        self.lost = False
        group = self.pending[0] if self.pending is not None else None
        self.state = {group: self.state[group]} if group in self.state else {}
        self.carried = group

    def timestamp(self, p) -> int:
        clock = p.timestamp_clock_id or self.clock
        if clock == INCREMENTAL_CLOCK:
            self.last_ns += p.timestamp
            return self.last_ns
        return p.timestamp

    # ---- counters
    def counter(self, te, ns: int) -> None:
        uuid = te.track_uuid
        values = [(uuid, float(te.counter_value) if te.HasField("counter_value") else te.double_counter_value)]
        if te.extra_counter_track_uuids:
            values += [(u, float(v)) for u, v in zip(te.extra_counter_track_uuids, te.extra_counter_values)]
        if te.extra_double_counter_track_uuids:
            values += list(zip(te.extra_double_counter_track_uuids, te.extra_double_counter_values))
        group = self.groups.get(uuid)
        if group is None:
            group = self.groups[uuid] = self.tracks[uuid].parent_uuid
        pending = self.pending
        if pending is None or pending[0] != group or pending[1] != ns:
            self.finish_counter()
            self.pending = (group, ns)
        else:
            self.carried = None  # the same event goes on, with all its values in this chunk
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
            cats = self.tracks[uuid].counter.categories
            self.cats[group] = cats[0] if len(cats) else None

    def finish_counter(self) -> None:
        if self.pending is None:
            return
        group, ns = self.pending
        self.pending = None
        owner = self.groups.get(("g", group))
        if owner is None:
            desc = self.tracks[group]
            owner = self.groups[("g", group)] = (desc.name,) + self.owner(desc.parent_uuid)
        event = {"name": owner[0], "ph": "C", "ts": TraceTime(ns), "pid": owner[1], "tid": owner[2],
                 "args": dict(self.state[group])}
        if self.carried == group:  # its values were from before the state was cleared: gone now
            del self.state[group]
            self.carried = None
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

    A damaged packet or compressed bundle (a flipped bit, a torn write) is skipped with what depends on it, at most
    its chunk (about a second of a recording: each one the writer writes reads without the others); the events
    before and after it are read as written, and a warning (logger ``sysprof.trace.perfetto_read``) says how many
    parts were skipped.

    Raises:
        ImportError: the ``perfetto`` or ``protobuf`` package is missing.
        FileNotFoundError / OSError: the file cannot be read.
        ValueError: not a Perfetto protobuf trace, or not one of sysprof's (a track event on a track it never
            declared, a value where sysprof writes none).
    """
    return list(iter_events(path))


def iter_events(path: PathLike):
    """:func:`read_events`, one event at a time as the packets are read (memory: the file's bytes, one inflated
    chunk and the events of one packet); the warning comes once the last event has been taken.

    Raises (while iterating): as :func:`read_events` (a trace that is no sysprof one, or all damage, once its end
    is reached without an event).
    """
    with _open_trace(path) as f:
        data = f.read()
    scan = _scan(data)
    reader = _Reader()
    events = reader.events
    read = refused = junk = 0
    first = None
    for packet in itertools.chain(scan.packets(), [False]):
        try:
            if packet is False or junk > MAX_JUNK + 4 * read:  # the end (or a bomb of empty packets)
                reader.finish_counter()
                scan.damaged += packet is not False
                stop = True
            else:
                junk += not reader.packet(packet)
                stop = False
        except (KeyError, AttributeError, TypeError, ValueError, IndexError, RecursionError) as e:
            refused += 1  # not what sysprof writes (a value changed unnoticed in an uncompressed trace): skipped
            junk += 1
            first = first or (f"unknown track {e}" if isinstance(e, KeyError) else f"{type(e).__name__}: {e}")
            stop = False
        if events:
            read += len(events)
            yield from events
            events.clear()
        if stop:
            break
    if refused and not read:
        raise ValueError(f"{path}: not a sysprof Perfetto trace ({first})")
    if scan.damaged and not read:
        raise ValueError(f"{path}: damaged: no packet of it reads ({scan.damaged} damaged part"
                         f"{'s' if scan.damaged > 1 else ''})")
    if scan.damaged or refused:
        n = scan.damaged + refused
        log.warning("%s: %d damaged part%s skipped (the events in %s are lost; the rest is read)", path, n,
                    "s" if n > 1 else "", "them" if n > 1 else "it")
