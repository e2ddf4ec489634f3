""".pftrace files with damage in them: a flipped bit costs only the chunk (one flush, about a second of a
recording) it lands in, never the events before or after it; hostile files (a compressed bundle that inflates
hugely, absurd lengths, bundles in bundles) read in bounded memory and time, or answer one "cannot read" line."""
from __future__ import annotations

import logging
import zlib

import pytest

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")

from sysprof.trace import perfetto_read  # noqa: E402
from sysprof.trace.load import load_events  # noqa: E402
from sysprof.trace.perfetto import read_events  # noqa: E402
from sysprof.trace.perfetto_write import PerfettoTraceWriter  # noqa: E402

from cli_support import run_cli  # noqa: E402

T0 = 1_796_147_164_000_000  # µs since the epoch (2026)
PID, TID = 4242, 77


def _second(c: int) -> list:
    """The events of second ``c`` of a recording: counters (one value constant over the whole trace, one key that
    comes and goes, a counter absent from second 1), a slice, an X slice and an instant; the metadata first."""
    out = []
    if c == 0:
        out += [{"name": "process_name", "ph": "M", "pid": PID, "tid": 0, "args": {"name": "sysprof: system"}},
                {"name": "thread_name", "ph": "M", "pid": PID, "tid": TID, "args": {"name": "worker"}},
                {"name": "sysprof units", "ph": "M", "pid": PID, "tid": 0,
                 "args": {"units": {"cpu/user_percent": "%", "memory/used_bytes": "B"}}}]
    for i in range(5):
        ts = T0 + c * 1_000_000 + i * 200_000
        out.append({"name": "cpu", "ph": "C", "ts": ts, "pid": PID, "tid": 0,
                    "args": {"user_percent": float((c * 5 + i) % 7), "system_percent": 3.0}})
        mem = {"used_bytes": 1e9 + c * 10 + i}
        if i % 2 == 0:
            mem["free_bytes"] = 2e9 - c
        out.append({"name": "memory", "ph": "C", "ts": ts, "pid": PID, "tid": 0, "args": mem})
        if c != 1:
            out.append({"name": "disk/sda", "ph": "C", "ts": ts + 1, "pid": PID, "tid": 0,
                        "args": {"busy_time_seconds": 0.5}})
        if i == 0:
            out.append({"name": "step", "ph": "B", "ts": ts + 2, "pid": PID, "tid": TID, "cat": "train",
                        "args": {"step": c}})
        if i == 2:
            out.append({"name": "checkpoint", "ph": "X", "ts": ts + 3, "dur": 50.5, "pid": PID, "tid": 0})
        if i == 3:
            out.append({"name": "mark", "ph": "i", "ts": ts + 4, "pid": PID, "tid": TID, "s": "t", "args": {"c": c}})
        if i == 4:
            out.append({"name": "step", "ph": "E", "ts": ts + 5, "pid": PID, "tid": TID, "cat": "train"})
    return out


def _recorded(path, chunks: int = 6, compress: bool = True):
    """Write ``chunks`` seconds, flushed once a second as ``sysprof record`` does: the events, and per chunk
    ``(first byte, end byte, first event, end event)``."""
    events, bounds = [], []
    with PerfettoTraceWriter(path, compress=compress) as w:
        for c in range(chunks):
            start, lo = w.bytes_written, len(events)
            events += _second(c)
            w.write_many(_second(c))
            w.flush()
            bounds.append((start, w.bytes_written, lo, len(events)))
    assert read_events(path) == events  # they come back exactly
    return events, bounds


def _flipped(tmp_path, data: bytes, offset: int, bit: int):
    bad = bytearray(data)
    bad[offset] ^= 1 << bit
    path = tmp_path / "flipped.pftrace"
    path.write_bytes(bytes(bad))
    return path


def _chunk_of(bounds, offset: int):
    return next((lo, hi) for start, end, lo, hi in bounds if start <= offset < end)


def test_a_flipped_bit_costs_only_the_chunk_it_lands_in(tmp_path, caplog):
    path = tmp_path / "t.pftrace"
    events, bounds = _recorded(path)
    data = path.read_bytes()
    assert len(bounds) == 6 and all(hi - lo > 10 for _, _, lo, hi in bounds)
    for share in (0.3, 0.5, 0.7):
        offset = int(len(data) * share)
        lo, hi = _chunk_of(bounds, offset)
        for bit in range(8):
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="sysprof.trace.perfetto_read"):
                got = read_events(_flipped(tmp_path, data, offset, bit))
            assert got == events[:lo] + events[hi:], (share, bit)  # exact values before and after
            assert "1 damaged part skipped" in caplog.text
    # a sweep over the whole file: every flip costs at most its own chunk (a damaged tag or length of a chunk is
    # read through: the bundle's own length agrees with it)
    read_through = 0
    for offset in range(0, len(data), 3):
        lo, hi = _chunk_of(bounds, offset)
        got = read_events(_flipped(tmp_path, data, offset, offset % 8))
        assert got in (events[:lo] + events[hi:], events), offset
        read_through += got == events
    assert 0 < read_through < 10
    # the first byte too, by any reader of traces (`sysprof report`)
    first = _flipped(tmp_path, data, 0, 4)
    assert load_events(first) == events
    proc = run_cli("report", first, "--json")
    assert proc.returncode == 0, proc.stderr


def test_uncompressed_a_flipped_bit_keeps_the_chunks_before_and_after(tmp_path):
    """Without deflate's checksum a flip may change a value unnoticed; the chunks around it are read exactly."""
    path = tmp_path / "t.pftrace"
    events, bounds = _recorded(path, chunks=4, compress=False)
    data = path.read_bytes()
    lost = []
    for offset in range(0, len(data), 5):
        lo, hi = _chunk_of(bounds, offset)
        got = read_events(_flipped(tmp_path, data, offset, offset % 8))
        after = len(events) - hi
        assert got[:lo] == events[:lo] and got[len(got) - after:] == events[hi:], offset
        lost.append(len(events) - len(got))
    assert max(lost) <= max(hi - lo for _, _, lo, hi in bounds)


def _bundle(inner: bytes) -> bytes:
    """One Trace.packet holding ``inner`` (packets) deflated in compressed_packets."""
    return pb.Trace(packet=[pb.TracePacket(compressed_packets=zlib.compress(inner))]).SerializeToString()


def test_hostile_files_read_in_bounded_memory_or_are_one_cannot_read_line(tmp_path):
    path = tmp_path / "t.pftrace"
    events, _ = _recorded(path, chunks=2)
    good = path.read_bytes()
    bomb = _bundle(b"\x0a\x00" * (perfetto_read.MAX_INFLATED // 2 + 1))  # 16 MiB of empty packets from 16 KiB
    empties = _bundle(b"\x0a\x00" * (perfetto_read.MAX_INFLATED // 4))  # 4 M empty packets
    nested = _bundle(_bundle(good))          # a bundle inside a bundle (Perfetto never writes one)
    absurd = b"\x0a" + b"\xff" * 20 + b"\x01"  # a varint longer than 64 bits
    huge = b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\x7f" + b"\x08\x01" * 4  # a length of 2^63 - 1
    for junk in (bomb, nested, absurd, huge, empties):
        path.write_bytes(junk + good)  # the junk, then the good trace
        if junk is empties:  # reading gives up after a flood of packets that hold nothing
            with pytest.raises(ValueError, match="damaged"):
                read_events(path)
        else:
            assert read_events(path) == events
        path.write_bytes(good + junk)
        assert read_events(path) == events
        path.write_bytes(junk)
        if junk is huge:  # a packet cut short (a killed recorder's first one): no event yet
            assert read_events(path) == []
            continue
        with pytest.raises(ValueError, match="damaged"):
            read_events(path)
        proc = run_cli("report", path)
        assert proc.returncode == 1 and proc.stderr.strip().count("\n") == 0, proc.stderr
        assert proc.stderr.startswith("sysprof: cannot read ")
