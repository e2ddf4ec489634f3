"""The trace sink's typed path (issue 30 item 1): TraceSink hands the writer typed counter rows
(tracks.CounterRow) and events; PerfettoTraceWriter writes the rows straight onto counter tracks declared from the
layout. A trace written so reads back exactly as the same rows written as Chrome-style dicts (the writer's dict
path, what the sink wrote before) and holds the same values as the Chrome JSON of the same sink."""
from __future__ import annotations

import numpy as np
import pytest

from sysprof.pipeline.session import Chunk, Start
from sysprof.sampling.rows import Batch
from sysprof.trace import events as ev
from sysprof.trace.chrome import ChromeTraceWriter, read_trace
from sysprof.trace.sink import TraceSink
from sysprof.trace.tracks import CounterRow, EventBuilder

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")

from sysprof.trace.perfetto import TraceTime, read_events  # noqa: E402
from sysprof.trace.perfetto_read import iter_packets  # noqa: E402
from sysprof.trace.perfetto_write import PerfettoTraceWriter  # noqa: E402

MS = 1_000_000
T0 = 1_700_000_000 * 10**9 + 123_457  # not a whole µs
PID = 4242
WIDE = tuple(f"net/eth0/k{i}_bytes" for i in range(11))  # more keys than one TrackEvent holds
CHANNELS = ("cpu/percent", "cpu/user_percent", "memory/used_bytes", "disk/sda/busy_time_seconds",
            "gpu/0/energy_joules", "gpu/0/power_watts", "gpu/0/reading_time_seconds", "load1") + WIDE


def rows(n=400, seed=3):
    """Rows every 1 ms: a counter that changes every row, one that holds, values that become NaN and +inf and
    come back, a track all NaN for a while, a GPU read every 10 ms, a wide track where one key moves."""
    rng = np.random.default_rng(seed)
    t = T0 + np.arange(n, dtype=np.int64) * MS + rng.integers(0, 900, n)
    v = np.zeros((n, len(CHANNELS)))
    v[:, 0] = np.arange(n) % 7 * 0.5
    v[:, 1] = 12.25
    v[:, 2] = 4096.0 * (np.arange(n) // 50)
    v[100:130, 2] = np.nan
    v[200:205, 1] = np.inf
    v[:, 3] = (np.arange(n) // 3) * 0.001
    v[60:90, 3] = np.nan  # every key of disk/sda unknown: its values end, then come back
    k = np.arange(n) // 10
    v[:, 4], v[:, 5], v[:, 6] = k * 1.5, 100.0 + k % 4, (T0 + k * 10 * MS) / 1e9
    v[:15, 4:7] = np.nan
    v[:, 7] = np.where(np.arange(n) < 150, np.nan, 0.75)  # unknown at first
    v[:, 8:] = 1.0
    v[:, 8] = np.arange(n) // 20
    return Batch(t, v, CHANNELS, 0.001)


def _head(sink):
    return ev.head({"channels": list(CHANNELS)}, PID, T0, sink.builder.layout.units, ev.process_name(PID, "sys"))


def _chunks(batch, size, marks=True):
    out = []
    for lo in range(0, len(batch), size):
        b = Batch(batch.timestamps_ns[lo:lo + size], batch.values[lo:lo + size], CHANNELS, 0.001)
        t = int(b.timestamps_ns[len(b) // 2])
        events = [ev.span("step", t, t + 250_000, PID, 1, cat="sysprof.mark")] if marks else []
        out.append(Chunk(b, events, int(b.timestamps_ns[-1]), lo + size >= len(batch)))
    return out


def _sink_write(writer, batch, size, flush_every=1, **kw):
    sink = TraceSink(writer, _head, system_pid=PID, **kw)
    sink.open(Start(None, CHANNELS, T0))
    for i, chunk in enumerate(_chunks(batch, size)):
        sink.take(chunk)
        if i % flush_every == 0:
            writer.flush()  # a new chunk of the .pftrace: every counter's values written in full again
    writer.write_typed([ev.stop(T0 + 10**9, PID, {"ok": True})], sink.ts)
    writer.close()
    return sink


def _dict_write(path, batch, size, changes_only=True, decimals=None):
    """The same trace through the writer's dict path: the rows as EventBuilder's counter dicts."""
    import heapq
    import itertools

    from sysprof.trace.schema import samples_event

    w = PerfettoTraceWriter(path)
    b = EventBuilder(CHANNELS, system_pid=PID, changes_only=changes_only, decimals=decimals)
    b.ts = TraceTime
    ts = TraceTime
    w.write_many(ev.to_chrome(e, ts) for e in _head(type("S", (), {"builder": b})()))
    w.flush()
    for i, chunk in enumerate(_chunks(batch, size)):
        events = b.events(chunk.batch)
        if changes_only:
            events = [samples_event(chunk.batch.timestamps_ns, PID, ts(int(chunk.batch.timestamps_ns[0])), 1)] + events
        if chunk.final:
            events = itertools.chain(events, b.finish())
        w.write_many(heapq.merge(events, [ev.to_chrome(e, ts) for e in chunk.events], key=lambda e: e.get("ts", -1)))
        w.flush()
    w.write(ev.to_chrome(ev.stop(T0 + 10**9, PID, {"ok": True}), ts))
    w.close()


def _values(events):
    """(name, ns, args) of every counter event."""
    return [(e["name"], e["ts"].ns if hasattr(e["ts"], "ns") else e["ts"], e["args"])
            for e in events if e.get("ph") == "C"]


@pytest.mark.parametrize("changes_only", [True, False])
@pytest.mark.parametrize("size", [1, 37, 400])
def test_typed_rows_read_back_as_the_dict_path_wrote_them(tmp_path, changes_only, size):
    batch = rows()
    typed, dicts = tmp_path / "typed.pftrace", tmp_path / "dicts.pftrace"
    _sink_write(PerfettoTraceWriter(typed), batch, size, changes_only=changes_only)
    _dict_write(dicts, batch, size, changes_only=changes_only)
    back = read_events(typed)
    assert back == read_events(dicts)
    assert len(_values(back)) > 100
    # the Chrome JSON of the same sink holds the same counter values (at µs)
    js = tmp_path / "t.json"
    _sink_write(ChromeTraceWriter(js), batch, size, changes_only=changes_only)
    chrome = [(n, t, {k: float(v) for k, v in a.items()}) for n, t, a in _values(read_trace(js))]
    assert [(n, t // 1000, a) for n, t, a in _values(back)] == chrome


def test_rounded_values_read_back_as_the_dict_path_wrote_them(tmp_path):
    batch = rows()
    batch.values[:, 0] += np.linspace(0, 0.004, len(batch))  # moves less than its resolution
    decimals = [1] + [None] * (len(CHANNELS) - 1)
    typed, dicts = tmp_path / "typed.pftrace", tmp_path / "dicts.pftrace"
    _sink_write(PerfettoTraceWriter(typed), batch, 50, decimals=lambda ch: decimals)
    _dict_write(dicts, batch, 50, decimals=decimals)
    assert read_events(typed) == read_events(dicts)


def test_counter_tracks_take_their_units_from_the_layout_and_changed_values_only(tmp_path):
    """Counter tracks are declared once each, with the registry's unit (not from the units event: no
    descriptor is declared twice); one moving key of a wide track is one value written."""
    path = tmp_path / "t.pftrace"
    _sink_write(PerfettoTraceWriter(path, compress=False), rows(), 400)
    packets = list(pb.Trace.FromString(path.read_bytes()).packet)
    descs = [p.track_descriptor for p in packets if p.HasField("track_descriptor")]
    counters = {d.name: d.counter for d in descs if d.HasField("counter")}
    assert len(counters) == len([d for d in descs if d.HasField("counter")])  # each declared once
    assert counters["memory/used_bytes"].unit == pb.CounterDescriptor.UNIT_SIZE_BYTES
    assert counters["cpu/user_percent"].unit_name == "%"
    busy = counters["disk/sda/busy_time_seconds"]
    assert busy.unit == pb.CounterDescriptor.UNIT_TIME_NS and busy.unit_multiplier == 1_000_000_000
    assert "gpu/0/reading_time_seconds" not in counters  # the GPU's time: the events' ts, no channel
    uuids = {d.uuid: d.name for d in descs}
    wide = [p.track_event for p in packets if p.HasField("track_event") and p.track_event.type == 4
            and uuids[p.track_event.track_uuid].startswith("net/eth0/")]
    sizes = [1 + len(t.extra_counter_values) + len(t.extra_double_counter_values) for t in wide]
    assert sizes[:2] == [9, 2] and set(sizes[2:]) == {1}  # 11 keys at first, then the one that moves
    assert len(sizes) == 2 + 400 // 20 - 1 + 1  # each change of k0, and the closing row


def test_the_sinks_rows_are_typed_and_the_json_writer_renders_them(tmp_path):
    b = EventBuilder(CHANNELS, system_pid=PID)
    got = b.counter_rows(rows(5), changed=True)
    assert all(isinstance(r, CounterRow) for r in got)
    first = got[0]
    assert (first.track.name, first.t_ns, first.args, first.changed) == (
        "cpu", int(rows(5).timestamps_ns[0]), {"percent": 0, "user_percent": 12.25}, [True, True])
    assert got[len(b.tracks) - 3:] and [r.changed for r in got if r.track.name == "cpu"][1:] == [[True, False]] * 4
    path = tmp_path / "t.json"
    with ChromeTraceWriter(path) as w:
        w.write_typed(got, lambda t: t // 1000)
    assert read_trace(path)[0] == {"name": "cpu", "ph": "C", "ts": int(rows(5).timestamps_ns[0]) // 1000,
                                   "pid": PID, "tid": 0, "args": {"percent": 0, "user_percent": 12.25}}
