"""Perfetto-native traces (.pftrace): PerfettoTraceWriter and read_events round trips, the protobuf as Perfetto's
own protos parse it, truncated files, `sysprof record/report/repair` on a .pftrace, PerfettoTraceHandler."""
from __future__ import annotations

import json
import math
import os
import sys
import time

import pytest

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")

from sysprof.report import TraceData  # noqa: E402
from sysprof.trace.chrome import ChromeTraceWriter, read_trace  # noqa: E402
from sysprof.trace.perfetto import TraceTime, protos, read_events, writer_class_for  # noqa: E402
from sysprof.trace.perfetto_read import iter_packets  # noqa: E402
from sysprof.trace.perfetto_write import PerfettoTraceWriter  # noqa: E402

from cli_support import run_cli  # noqa: E402

NAN = float("nan")
T0 = 1_796_147_164_026_965  # µs since the epoch (2026)
PID, TID = 4242, 77


def _events():
    """A hand-built trace with every kind of event sysprof writes or reads."""
    start_args = {"version": "0.1.0", "command_line": "python train.py --lr 0.1", "pid": None, "recorder_pid": PID,
                  "interval_s": 0.001, "intervals_s": {"cpu": 0.001, "disk": 0.01}, "capacity": 4000,
                  "channels": ["cpu/user_percent", "memory/used_bytes", "disk/sda/busy_time_seconds"],
                  "errors": {}, "flags": [], "ok": True, "big": 1 << 70, "nested": {"a": [1, 2.5, "x", None, False]}}
    wide = {f"k{i}": float(i) for i in range(12)}  # more keys than one TrackEvent holds
    return [
        {"name": "process_name", "ph": "M", "pid": PID, "tid": 0, "args": {"name": "sysprof: system"}},
        {"name": "thread_name", "ph": "M", "pid": PID, "tid": TID, "args": {"name": "worker"}},
        {"name": "sysprof start", "ph": "i", "s": "g", "ts": T0, "pid": PID, "tid": 0, "args": start_args},
        {"name": "sysprof units", "ph": "M", "pid": PID, "tid": 0,
         "args": {"units": {"cpu/user_percent": "%", "memory/used_bytes": "B", "disk/sda/busy_time_seconds": "s"}}},
        {"name": "cpu", "ph": "C", "ts": T0 + 1000, "pid": PID, "tid": 0, "args": {"user_percent": 12.5}},
        {"name": "memory", "ph": "C", "ts": T0 + 1000, "pid": PID, "tid": 0, "args": {"used_bytes": 1.5e9}},
        {"name": "disk/sda", "ph": "C", "ts": T0 + 1000, "pid": PID, "tid": 0, "args": {"busy_time_seconds": 0.25}},
        {"name": "cpu", "ph": "C", "ts": T0 + 2000, "pid": PID, "tid": 0, "args": {"user_percent": 12.5}},  # same
        {"name": "memory", "ph": "C", "ts": TraceTime((T0 + 2000) * 1000 + 123), "pid": PID, "tid": 0,
         "args": {"used_bytes": 1.6e9, "free_bytes": 3}},  # a new key, an int, an exact ns
        {"name": "memory", "ph": "C", "ts": T0 + 3000.5, "pid": PID, "tid": 0, "args": {"used_bytes": NAN}},
        {"name": "memory", "ph": "C", "ts": T0 + 4000, "pid": PID, "tid": 0, "args": {"used_bytes": 1.7e9}},
        {"name": "wide", "ph": "C", "ts": T0 + 4000, "pid": PID, "tid": 0, "args": wide},
        {"name": "wide", "ph": "C", "ts": T0 + 5000, "pid": PID, "tid": 0, "args": dict(wide, k3=-0.5, k11=1e-300)},
        {"name": "never", "ph": "C", "ts": T0 + 5000, "pid": PID, "tid": 0, "args": {"x": NAN}},  # says nothing
        {"name": "step", "ph": "B", "ts": T0 + 5000, "pid": PID, "tid": TID, "cat": "train",
         "args": {"epoch": 0, "batch": 1}},
        {"name": "dataloader", "ph": "B", "ts": T0 + 5100, "pid": PID, "tid": TID, "cat": "train"},
        {"ph": "E", "ts": T0 + 5900, "pid": PID, "tid": TID},
        {"name": "step", "ph": "E", "ts": T0 + 6000, "pid": PID, "tid": TID, "cat": "train",
         "args": {"epoch": 0, "batch": 1}},
        {"name": "checkpoint", "ph": "X", "ts": T0 + 6100, "dur": 2500.25, "pid": PID, "tid": 0, "args": {"n": 3}},
        {"name": "Xid 79", "ph": "i", "ts": T0 + 6200, "pid": PID, "tid": 0, "s": "p", "cat": "",
         "args": {"limit": math.inf, "gpu": "0000:3b:00.0"}},
        {"name": "late", "ph": "I", "ts": T0 + 900, "pid": PID, "tid": TID, "id": "0x1"},  # earlier than the last
        {"name": "disk/sda", "ph": "C", "ts": T0 + 9000, "pid": PID, "tid": 0, "args": {}},  # all unknown now
        {"name": "cpu/cpu_percent", "cat": "cpu", "ph": "C", "ts": T0 + 9000, "pid": 0, "tid": 31337,
         "args": {"cpu_percent": 42.0}},  # Composer's layout: rank as pid, OS pid as tid, a category
        {"name": "custom", "ph": "n", "ts": T0 + 9500, "pid": "main", "tid": None, "args": {"x": 1}},
        {"name": "sysprof", "ph": "C", "ts": T0 + 9900, "pid": PID, "tid": 0,
         "args": {"taken": 10, "dropped": 0, "missed_deadlines": 1}},
        {"name": "sysprof stop", "ph": "i", "s": "g", "ts": T0 + 10000, "pid": PID, "tid": 0,
         "args": {"stats": {"taken": 10, "dropped": 0}, "signals": [], "elapsed_s": 0.01}},
    ]


def _expected(events):
    """What a reader gets back: NaN counter values left out, a counter that never had a value not written, a
    non-finite arg None and a tuple a list (JSON's rules)."""
    out = []
    for ev in events:
        ev = json.loads(json.dumps(ev, allow_nan=True).replace("Infinity", "null"))
        if ev["ph"] == "C":
            ev["args"] = {k: v for k, v in ev["args"].items() if v == v}
            if ev["name"] == "never":
                continue
        out.append(ev)
    return out


def _write(path, events, **kw):
    with PerfettoTraceWriter(path, **kw) as w:
        w.write_many(events)
    return w


def test_round_trip_is_exact(tmp_path):
    path = tmp_path / "t.pftrace"
    w = _write(path, _events())
    assert w.events_written == len(_events()) and w.closed and w.bytes_written == os.path.getsize(path)
    back = read_events(path)
    assert back == _expected(_events())
    # ns timestamps: exact, also where a float of µs cannot hold them
    by_name = [(e.get("name"), e["ts"].ns) for e in back if "ts" in e]
    assert ("memory", (T0 + 2000) * 1000 + 123) in by_name
    assert ("memory", (T0 + 3000) * 1000 + 500) in by_name
    assert ("checkpoint", (T0 + 6100) * 1000) in by_name and ("late", (T0 + 900) * 1000) in by_name
    assert all(isinstance(e["ts"], TraceTime) for e in back if "ts" in e)
    assert [e for e in back if e.get("name") == "sysprof"][0]["args"] == {"taken": 10.0, "dropped": 0.0,
                                                                          "missed_deadlines": 1.0}
    # what report reads is the same
    a, b = TraceData(_expected(_events())), TraceData(back)
    assert list(a.series) == list(b.series) and a.units == b.units and a.meta == b.meta and a.stop == b.stop
    for ch, (t, v) in a.series.items():
        assert t.tolist() == b.series[ch][0].tolist()
        assert [x if x == x else None for x in v.tolist()] == [x if x == x else None for x in b.series[ch][1].tolist()]
    assert b.spans == a.spans and [s.name for s in b.spans] == ["step", "dataloader", "checkpoint"]
    assert b.instants == a.instants and [i.name for i in b.instants] == ["late", "Xid 79"]
    assert b.series["memory/used_bytes"][1].tolist()[2] != b.series["memory/used_bytes"][1].tolist()[2]  # NaN


def test_protobuf_is_perfettos_trace(tmp_path):
    """The file parses as Perfetto's Trace (its packets deflated in compressed_packets bundles, as Perfetto's
    service writes them, or not); counter tracks carry the channel names and units; names interned."""
    path, plain = tmp_path / "t.pftrace", tmp_path / "plain.pftrace"
    _write(path, _events())
    _write(plain, _events(), compress=False)
    bundles = list(pb.Trace.FromString(path.read_bytes()).packet)
    assert bundles and all(p.ListFields()[0][0].name == "compressed_packets" for p in bundles)
    packets = list(pb.Trace.FromString(plain.read_bytes()).packet)
    assert list(iter_packets(path.read_bytes())) == packets
    assert os.path.getsize(path) < os.path.getsize(plain)
    assert all(p.trusted_packet_sequence_id == 1 for p in packets)
    first = packets[0]
    assert first.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED and first.first_packet_on_sequence
    assert first.trace_packet_defaults.timestamp_clock_id == 64
    snap = [p.clock_snapshot for p in packets if p.HasField("clock_snapshot")]
    assert len(snap) == 1 and snap[0].primary_trace_clock == pb.BUILTIN_CLOCK_REALTIME
    assert {(c.clock_id, c.timestamp, c.is_incremental) for c in snap[0].clocks} == {
        (1, T0 * 1000, False), (64, T0 * 1000, True)}
    tracks = {}
    for p in packets:
        if p.HasField("track_descriptor"):
            tracks[p.track_descriptor.uuid] = p.track_descriptor  # a later one (the units) replaces the first
    counters = {t.name: t.counter for t in tracks.values() if t.HasField("counter")}
    assert counters["cpu/user_percent"].unit_name == "%"
    assert counters["memory/used_bytes"].unit == pb.CounterDescriptor.UNIT_SIZE_BYTES
    disk = counters["disk/sda/busy_time_seconds"]
    assert disk.unit == pb.CounterDescriptor.UNIT_TIME_NS and disk.unit_multiplier == 1_000_000_000
    assert list(counters["cpu/cpu_percent"].categories) == ["cpu"]
    assert len([n for n in counters if n.startswith("wide/")]) == 12
    parents = {t.name: tracks[t.parent_uuid].name for t in tracks.values() if t.HasField("counter")}
    assert parents["disk/sda/busy_time_seconds"] == "disk/sda"  # channel -> its counter group -> the process
    procs = [t.process for t in tracks.values() if t.HasField("process")]
    assert any(p.pid == PID and p.process_name == "sysprof: system" for p in procs)
    assert any(t.thread.tid == TID and t.thread.thread_name == "worker" for t in tracks.values()
               if t.HasField("thread"))
    events = [p for p in packets if p.HasField("track_event")]
    assert all(p.sequence_flags == pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE for p in events)
    names = [n.name for p in packets for n in p.interned_data.event_names]
    assert len(names) == len(set(names)) and "step" in names  # each name interned once
    kinds = {pb.TrackEvent.Type.Name(p.track_event.type) for p in events}
    assert kinds == {"TYPE_COUNTER", "TYPE_SLICE_BEGIN", "TYPE_SLICE_END", "TYPE_INSTANT"}
    wide = [p.track_event for p in events if p.track_event.type == pb.TrackEvent.TYPE_COUNTER
            and len(p.track_event.extra_counter_values) + len(p.track_event.extra_double_counter_values) == 8]
    assert wide  # 12 values: one TrackEvent of 9, one of 3
    # one changed value is one value written
    second = [p.track_event for p in events if p.track_event.type == pb.TrackEvent.TYPE_COUNTER][-6:]
    assert all(len(te.extra_counter_values) + len(te.extra_double_counter_values) <= 8 for te in second)


def test_unchanged_values_are_not_written_again(tmp_path):
    ev = [{"name": "g", "ph": "C", "ts": T0 + i, "pid": 1, "tid": 0, "args": {"a": 1.0, "b": float(i), "c": 2.5}}
          for i in range(100)]
    path = tmp_path / "t.pftrace"
    _write(path, ev)
    te = [p.track_event for p in iter_packets(path.read_bytes()) if p.HasField("track_event")]
    assert len(te) == 100
    assert sum(1 + len(t.extra_counter_values) + len(t.extra_double_counter_values) for t in te) == 3 + 99
    assert read_events(path) == ev
    assert [t.counter_value for t in te[1:]] == list(range(1, 100))  # integral values go as integers


@pytest.mark.parametrize("compress", [True, False])
def test_flush_makes_everything_readable_and_a_truncated_file_reads_up_to_its_last_whole_packet(tmp_path, compress):
    ev = [e for e in _expected(_events()) if e.get("name") != "wide"]  # events of one packet each (and X's two)
    path = tmp_path / "t.pftrace"
    w = PerfettoTraceWriter(path, compress=compress)
    w.write_many(ev[:10])
    w.flush()
    assert read_events(path) == ev[:10]  # streamed: readable while being written
    w.write_many(ev[10:])
    w.close()
    data = path.read_bytes()
    seen = []
    for cut in range(0, len(data) + 1, 3):
        part = tmp_path / "cut.pftrace"
        part.write_bytes(data[:cut])
        got = read_events(part)
        assert got == ev[:len(got)]
        seen.append(len(got))
    assert seen == sorted(seen) and seen[0] == 0 and seen[-1] >= len(ev) - 2
    assert len(set(seen)) > len(ev) // 2  # a cut inside a compressed bundle still yields its whole packets
    assert read_events(path) == ev
    bad = tmp_path / "bad.pftrace"
    bad.write_bytes(b"[\n{}")
    with pytest.raises(ValueError):
        read_events(bad)


def test_smaller_than_the_json_of_the_same_events(tmp_path):
    ev = _expected(_events())
    rows = [{"name": "cpu", "ph": "C", "ts": T0 + 1000 * i, "pid": PID, "tid": 0,
             "args": {"user_percent": 10 + (i % 7) * 0.125, "system_percent": 3.0, "idle_percent": 87 - (i % 7)}}
            for i in range(2000)]
    _write(tmp_path / "t.pftrace", ev + rows)
    with ChromeTraceWriter(tmp_path / "t.json") as w:
        w.write_many(ev + rows)
    assert os.path.getsize(tmp_path / "t.pftrace") < os.path.getsize(tmp_path / "t.json")
    assert read_events(tmp_path / "t.pftrace") == read_trace(tmp_path / "t.json")


def test_writer_interface_and_errors(tmp_path):
    path = tmp_path / "t.pftrace"
    assert writer_class_for(path) is PerfettoTraceWriter and writer_class_for("x.PFTRACE") is PerfettoTraceWriter
    assert writer_class_for(tmp_path / "t.json.gz") is ChromeTraceWriter
    _write(path, [])
    with pytest.raises(FileExistsError):
        PerfettoTraceWriter(path)
    w = PerfettoTraceWriter(path, overwrite=True)
    with pytest.raises(TypeError):
        w.write({"name": "b", "ph": "i", "ts": T0, "pid": 1, "tid": 1, "args": {"o": object()}})
    with pytest.raises(ValueError):
        w.write({"name": "c", "ph": "C", "ts": -5, "pid": 1, "tid": 0, "args": {"x": 1}})
    w.write({"name": "a", "ph": "i", "ts": T0, "pid": 1, "tid": 1, "args": {"ok": 1}})
    w.close()
    w.close()
    with pytest.raises(ValueError):
        w.write({"name": "late", "ph": "i", "ts": T0, "pid": 1, "tid": 1})
    assert read_events(path) == [{"name": "a", "ph": "i", "ts": T0, "pid": 1, "tid": 1, "args": {"ok": 1}}]
    fd = os.open(tmp_path / "fd.pftrace", os.O_WRONLY | os.O_CREAT)
    with PerfettoTraceWriter(tmp_path / "fd.pftrace", fd=fd) as w:
        w.write({"name": "x", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "n"}})
    assert read_events(tmp_path / "fd.pftrace") == [{"name": "x", "ph": "M", "pid": 1, "tid": 0,
                                                    "args": {"name": "n"}}]


def test_missing_package_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "perfetto.protos.perfetto.trace.perfetto_trace_pb2", None)
    with pytest.raises(ImportError, match=r"pip install 'sysprof\[perfetto\]'"):
        protos()


def test_a_forked_child_writes_nothing_into_the_parents_trace(tmp_path):
    path = tmp_path / "t.pftrace"
    w = PerfettoTraceWriter(path)
    w.write({"name": "parent", "ph": "i", "ts": T0, "pid": 1, "tid": 1})
    pid = os.fork()
    if pid == 0:  # the child: writes, flushes and closes into /dev/null
        try:
            w.write({"name": "child", "ph": "i", "ts": T0 + 1, "pid": 2, "tid": 2})
            w.close()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    w.write({"name": "parent2", "ph": "i", "ts": T0 + 2, "pid": 1, "tid": 1})
    w.close()
    assert [e["name"] for e in read_events(path)] == ["parent", "parent2"]


def test_record_report_and_repair_a_pftrace(tmp_path):
    """A real recording to .pftrace reports the channels a JSON recording has, exactly as the JSON of its events."""
    pf, js = tmp_path / "x.pftrace", tmp_path / "x.json"
    for out in (pf, js):
        proc = run_cli("record", "--duration", "0.5s", "-q", "-o", out)
        assert proc.returncode == 0, proc.stderr
    events = read_events(pf)
    data = TraceData(events)
    assert data.recorded and not data.truncated and data.meta["channels"]
    assert set(data.series) == set(TraceData(read_trace(js)).series)
    assert data.units == TraceData(read_trace(js)).units
    assert all(isinstance(e["ts"].ns, int) for e in events if "ts" in e)
    assert any(e["ts"].ns % 1000 for e in events if e["ph"] == "C")  # sub-µs digits kept
    rep_pf = run_cli("report", pf, "--json", "--all")
    rep_js = run_cli("report", js, "--json", "--all")
    assert rep_pf.returncode == 0 and rep_js.returncode == 0, rep_pf.stderr + rep_js.stderr
    assert set(json.loads(rep_pf.stdout)["channels"]) == set(json.loads(rep_js.stdout)["channels"])
    # the same events as Chrome JSON report the same numbers
    same = tmp_path / "same.json"
    with ChromeTraceWriter(same) as w:
        w.write_many(events)
    rep_same = run_cli("report", same, "--json", "--all")
    assert json.loads(rep_same.stdout)["channels"] == json.loads(rep_pf.stdout)["channels"]
    assert os.path.getsize(pf) < os.path.getsize(same)
    fix = run_cli("repair", pf)
    assert fix.returncode == 0 and "nothing to repair" in fix.stdout
    table = run_cli("report", pf)
    assert table.returncode == 0 and "cpu/" in table.stdout


def test_perfetto_trace_handler_writes_cycles_of_pftrace(tmp_path):
    import sysprof

    h = sysprof.PerfettoTraceHandler(folder=str(tmp_path / "traces"), remote_file_name=None)
    with sysprof.profile(trace_handlers=[h], sys_prof_stats_thread_interval_seconds=0.01) as prof:
        marker = prof.marker("work", categories=["train"])
        for _ in range(3):
            with marker:
                time.sleep(0.02)
            prof.step()
    files = sorted(os.listdir(tmp_path / "traces"))
    assert files == ["ep0-ba3-rank0.pftrace"]
    events = read_events(tmp_path / "traces" / files[0])
    data = TraceData(events)
    assert [s.name for s in data.spans] == ["work"] * 3 and data.spans[0].args == {"epoch": 0, "batch": 0}
    assert data.series and data.units  # the system profiler's counters, with units
    meta = {e["name"]: e for e in events if e["ph"] == "M"}
    assert meta["global_rank"]["args"] == {"value": 0} and meta["process_name"]["cat"] == ""
    assert [e["cat"] for e in events if e["ph"] == "B"] == ["train"] * 3
    with pytest.raises(ValueError):
        sysprof.PerfettoTraceHandler(merged_trace_filename="merged.pftrace")
