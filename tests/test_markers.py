"""Markers from any program (sysprof.mark / sysprof.mark_instant): the ring format, the receiver's events, the
no-op without a recorder, a recorder that never drains, odd names, and `sysprof record` end to end."""
import json
import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

from cli_support import run_cli
from sysprof.markers import ring as R
from sysprof.markers.receiver import MarkerReceiver
from sysprof.report import TraceData
from sysprof.trace.chrome import read_trace
from sysprof.trace.events import chrome_events


def _chrome(events, ts=lambda ns: ns // 1000):
    """The receiver's typed events as a trace writes them (``ts`` in µs by default)."""
    return chrome_events(events, ts)


def _run_child(code, env_extra=None, env_drop=(), timeout=60):
    env = {k: v for k, v in os.environ.items() if k not in env_drop and k != R.ENV}
    env.update(env_extra or {})
    # run outside the checkout: `python -c` puts the current directory first on sys.path, and the checkout's
    # sysprof/ has no compiled extension
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=tempfile.gettempdir())
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr
    return proc.stdout


@pytest.fixture(params=["python", "native"])
def writer(request):
    """The environment picking a marking process's writer (the native one skipped where it is not built)."""
    if request.param == "native":
        if R._native_writer() is None:
            pytest.skip("the extension's marker writer is not built")
        return {R.NATIVE_ENV: "1"}
    return {R.NATIVE_ENV: "0"}


def _us(ns):
    return ns // 1000


# ---- the format ----
def test_encode_name_odd_inputs():
    assert R.encode_name("checkpoint") == (b"checkpoint", 0)
    assert R.encode_name("a\0b\nc\"") == (b"a\0b\nc\"", 0)
    assert R.encode_name("bad \udcff") == (b"bad \\udcff", 0)  # a lone surrogate (os.fsdecode of bad bytes)
    assert R.encode_name(b"\xff raw") == ("\ufffd raw".encode(), 0)
    assert R.encode_name(42) == (b"42", 0)
    raw, flags = R.encode_name("é" * 150)  # 300 bytes: cut to 200 at a character boundary
    assert (raw, flags) == (("é" * 100).encode(), R.NAME_TRUNCATED)
    raw, flags = R.encode_name("a" + "é" * 150)  # 301 bytes: 199 kept (a 2-byte character does not fit)
    assert len(raw) == 199 and raw.decode() == "a" + "é" * 99 and flags == R.NAME_TRUNCATED


def _put(ring, ts, tid, kind, flags, name, args=b""):
    """Ring.put stamped ``ts`` on thread id ``tid`` (the clock and the tid cache set for the call)."""
    saved, R._time_ns = R._time_ns, lambda: ts
    ring.tls.tid = tid
    try:
        return ring.put(R.word(kind, flags, len(name), len(args)), R.packer(len(name) + len(args)), name + args)
    finally:
        R._time_ns = saved
        del ring.tls.tid


def test_ring_round_trip_and_full(tmp_path):
    ring = R.Ring(str(tmp_path), 4321, native=False)
    reader = R.RingReader(ring.path)
    assert reader.pid == 4321 and reader.read() == []
    assert _put(ring, 10, 7, R.BEGIN, 0, b"x")
    assert _put(ring, 11, 0xFFFFFFFF, R.INSTANT, R.ARGS_DROPPED, b"i", b'{"a":1}')
    assert reader.read() == [(10, 7, R.BEGIN, 0, b"x", b""),
                             (11, 0xFFFFFFFF, R.INSTANT, R.ARGS_DROPPED, b"i", b'{"a":1}')]
    for k in range(R.CAPACITY):
        assert _put(ring, k, 1, R.INSTANT, 0, b"n")
    assert not _put(ring, 0, 1, R.INSTANT, 0, b"n") and not _put(ring, 0, 1, R.INSTANT, 0, b"n")
    assert reader.dropped == 2
    got = reader.read()
    assert [r[0] for r in got] == list(range(R.CAPACITY))  # in order, across the wrap
    assert _put(ring, 99, 1, R.END, 0, b"n") and reader.read() == [(99, 1, R.END, 0, b"n", b"")]
    payload = b"p" * R.PAYLOAD_MAX  # the largest record
    assert _put(ring, 5, 2, R.INSTANT, 0, payload[:100], payload[100:]) and reader.read() == [
        (5, 2, R.INSTANT, 0, payload[:100], payload[100:])]
    ring.close()
    reader.close(unlink=True)
    assert not os.path.exists(ring.path)


def test_reader_skips_records_overwritten_a_lap_ahead(tmp_path):
    ring = R.Ring(str(tmp_path), 1, native=False)
    reader = R.RingReader(ring.path)
    for k in range(R.NSLOTS + 1):  # threads racing past the check: record NSLOTS rewrites slot 0 unread
        ring.head = 0
        assert _put(ring, k, 1, R.INSTANT, 0, b"n")
    assert reader.read() == [(R.NSLOTS, 1, R.INSTANT, 0, b"n", b"")]  # the reader jumps to it, not stuck
    assert reader.dropped == R.NSLOTS
    ring.close()
    reader.close()


needs_native = pytest.mark.skipif(R._native_writer() is None, reason="the extension's marker writer is not built")


@needs_native
def test_native_writer_writes_the_same_records(tmp_path):
    import threading
    import time

    ring = R.Ring(str(tmp_path), os.getpid())
    assert ring.native
    reader = R.RingReader(ring.path)
    t0 = time.time_ns()
    assert ring.put(R.word(R.BEGIN, 0, 4), R.packer(4), b"span")
    assert ring.put(R.word(R.INSTANT, R.ARGS_DROPPED, 1, 7), None, b'i{"a":1}')
    t1 = time.time_ns()
    got = reader.read()
    tid = threading.get_native_id()
    assert [r[1:] for r in got] == [(tid, R.BEGIN, 0, b"span", b""), (tid, R.INSTANT, R.ARGS_DROPPED, b"i", b'{"a":1}')]
    assert t0 <= got[0][0] <= got[1][0] <= t1  # the wall clock of time.time_ns()
    other = []
    th = threading.Thread(target=lambda: other.append((threading.get_native_id(),
                                                       ring.put(R.word(R.END, 0, 4), None, b"span"))))
    th.start()
    th.join()
    assert [(r[1], r[2]) for r in reader.read()] == [(other[0][0], R.END)] and other[0][1]
    assert not ring.put(R.word(R.INSTANT, 0, 1), None, b"x" * (R.PAYLOAD_MAX + 1))  # too long: dropped
    for _ in range(R.CAPACITY):
        assert ring.put(R.word(R.INSTANT, 0, 1), None, b"n")
    assert not ring.put(R.word(R.INSTANT, 0, 1), None, b"n")
    assert reader.dropped == ring.dropped == 2
    assert len(reader.read()) == R.CAPACITY and ring.put(R.word(R.INSTANT, 0, 1), None, b"n")
    with pytest.raises(TypeError):
        ring.put(1, None, "not bytes")
    ring.close()
    reader.close(unlink=True)


def test_reader_skips_a_file_not_ready(tmp_path):
    p = tmp_path / "1-1.ring"
    p.write_bytes(bytes(R.ring_size()))  # no magic yet
    with pytest.raises(ValueError):
        R.RingReader(str(p))


# ---- the receiver's events ----
def test_receiver_balances_spans(tmp_path):
    rec = MarkerReceiver(directory=str(tmp_path))
    pid = os.getpid()
    ring = R.Ring(rec.path, pid, native=False)
    put = lambda *a: _put(ring, *a)  # noqa: E731
    put(1000, 5, R.END, 0, b"orphan")  # its begin was dropped: left out
    put(2000, 5, R.BEGIN, 0, b"outer")
    put(3000, 5, R.BEGIN, 0, b"inner")
    put(4000, 5, R.END, 0, b"outer")  # closes inner too
    put(5000, 6, R.BEGIN, R.NAME_TRUNCATED, b"open")
    put(4500, 6, R.INSTANT, R.ARGS_DROPPED, b"tick")  # stamped before the thread's last: kept in order
    put(6000, 6, R.INSTANT, 0, b"args", b'{"step":3,"loss":0.5}')
    events = _chrome(rec.drain())
    meta = [e for e in events if e["ph"] == "M"]
    assert [e["name"] for e in meta][:1] == ["process_name"] and meta[0]["pid"] == pid
    timed = [e for e in events if e["ph"] != "M"]
    assert [(e["ph"], e["name"], e["ts"], e["tid"]) for e in timed] == [
        ("B", "outer", 2, 5), ("B", "inner", 3, 5), ("E", "inner", 4, 5), ("E", "outer", 4, 5),
        ("B", "open", 5, 6), ("i", "tick", 5, 6), ("i", "args", 6, 6)]
    assert timed[4]["args"] == {"name_truncated": True}
    assert timed[5]["args"] == {"args_dropped": True} and timed[6]["args"] == {"step": 3, "loss": 0.5}
    assert rec.stats() == {"markers": 7, "markers_dropped": 0}
    end = _chrome(rec.finish(9_000_000))
    assert end == [{"name": "open", "cat": "sysprof.mark", "ph": "E", "ts": 9000, "pid": pid, "tid": 6,
                    "args": {"closed": "at stop"}}]
    assert not os.path.exists(rec.path) and rec.drain() == []
    spans = TraceData(timed + end).spans
    assert [(s.name, s.start_us, s.end_us) for s in spans] == [("outer", 2, 4), ("inner", 3, 4), ("open", 5, 9000)]


def test_markers_producer_holds_back_what_is_newer_than_the_rows(tmp_path):
    """The session's producer: a drain gives the markers up to its batch's newest row; the stop gives the rest,
    open spans closed at the stop; the stop event gets the counts in ``stats``."""
    import time

    import numpy as np

    from sysprof.markers.receiver import Markers

    class Rows:
        def __init__(self, *t):
            self.timestamps_ns = np.array(t, dtype=np.int64)

        def __len__(self):
            return len(self.timestamps_ns)

    rec = MarkerReceiver(directory=str(tmp_path))
    producer = Markers(rec)
    pid, now = os.getpid(), time.time_ns()
    ring = R.Ring(rec.path, pid, native=False)
    _put(ring, now - 3000, 5, R.BEGIN, 0, b"a")
    _put(ring, now - 1000, 5, R.INSTANT, 0, b"i")
    got = _chrome(producer.take(Rows(now - 2000), None), lambda ns: ns)
    assert [(e["ph"], e["name"], e.get("ts")) for e in got] == [("M", "process_name", None), ("B", "a", now - 3000)]
    assert producer.take(Rows(), None) == []  # no rows: held back (under HOLD_NS old)
    got = _chrome(producer.take(Rows(), now), lambda ns: ns)
    assert [(e["ph"], e["name"], e["ts"], e.get("args")) for e in got] == [
        ("i", "i", now - 1000, None), ("E", "a", now, {"closed": "at stop"})]
    assert producer.stop_args() == {"stats": {"markers": 2, "markers_dropped": 0}}
    assert not os.path.exists(rec.path)
    ring.close()


def test_receiver_closes_spans_of_an_exited_process(tmp_path):
    ns_ts = lambda ns: ns  # noqa: E731 - the trace's ts in ns here
    rec = MarkerReceiver(directory=str(tmp_path))
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(child.stdout)
    ring = R.Ring(rec.path, dead, native=False)
    _put(ring, 100, dead, R.BEGIN, 0, b"work")
    for _ in range(3):
        ring.drop()
    # mapped (locked) here: its producer lives
    assert [e["ph"] for e in _chrome(rec.drain(), ns_ts) if e["ph"] != "M"] == ["B"]
    ring.close()  # the producer's end: its mapping, and with it its lock, gone
    events = _chrome(rec.drain(), ns_ts)
    assert [(e["ph"], e["name"], e.get("args")) for e in events if e["ph"] != "M"] == [
        ("E", "work", {"closed": "process exited"})]
    assert not os.path.exists(ring.path)  # retired: its file removed, its drops still counted
    assert rec.stats() == {"markers": 1, "markers_dropped": 3}
    rec.close()


# ---- the caller's side ----
def test_no_recorder_is_a_no_op(writer):
    out = _run_child("""
        import sysprof, sysprof.markers as m
        def f(x): return x + 1
        g = sysprof.mark("x")(f)
        with sysprof.mark("a") as a, sysprof.mark(["unhashable"]):
            sysprof.mark_instant("i", step=1)
        try:
            with sysprof.mark("raising"):
                raise KeyError("passes through")
        except KeyError:
            print("raised")
        print(g is f, a is sysprof.mark("b"), m.enabled(), m.dropped(), sysprof.mark_instant("j"),
              type(a).__name__, repr(a))
    """, env_extra=writer)
    no_op = "NoMark" if writer[R.NATIVE_ENV] == "1" else "_NoMark"  # the extension's C no-op, or Python's
    assert out.split() == ["raised", "True", "True", "False", "0", "None", no_op, "sysprof.mark(<not", "recording>)"]


def test_recorder_that_never_drains_drops_without_blocking(tmp_path, writer):
    # a directory nobody reads (a recorder that died): the ring fills, then every marker is dropped and counted
    out = _run_child("""
        import sysprof, sysprof.markers as m
        for i in range(5000):
            sysprof.mark_instant("tick")
        with sysprof.mark("after"):
            pass
        print(m.enabled(), m.dropped(), m._producer.ring.native)
    """, {R.ENV: str(tmp_path), **writer})
    assert out.split() == ["True", str(5000 + 2 - R.CAPACITY), str(writer[R.NATIVE_ENV] == "1")]
    # a directory that is gone: nothing can be written, nothing raises
    out = _run_child("""
        import sysprof, sysprof.markers as m
        with sysprof.mark("a"):
            sysprof.mark_instant("b", x=1)
        print(m.dropped())
    """, {R.ENV: str(tmp_path / "gone")})
    assert out.split() == ["3"]


def test_odd_names_through_a_child(tmp_path, writer):
    rec = MarkerReceiver(directory=str(tmp_path))
    _run_child("""
        import sysprof
        for name in ["", "tab\\there \\"quoted\\"", "nul\\0byte", "bad \\udcff", b"\\xffraw", 7, "é" * 150,
                     "日本語"]:
            sysprof.mark_instant(name)
        sysprof.mark_instant("big args", blob="x" * 300)
        sysprof.mark_instant("unserialisable", obj=object(), nan=float("nan"))
    """, {R.ENV: rec.path, **writer})
    events = [e for e in _chrome(rec.drain()) if e["ph"] == "i"]
    rec.close()
    assert [e["name"] for e in events] == ["", 'tab\there "quoted"', "nul\0byte", "bad \\udcff", "\ufffdraw", "7",
                                           "é" * 100, "日本語", "big args", "unserialisable"]
    assert events[6]["args"] == {"name_truncated": True}
    assert events[8]["args"] == {"args_dropped": True}
    args = events[9]["args"]
    assert args["obj"].startswith("<object object at") and args["nan"] != args["nan"]


# ---- sysprof record, end to end ----
CHILD = """
import json, os, sys, threading, time, sysprof

out = {"pid": os.getpid(), "tid": threading.get_native_id(), "dir": os.environ.get("SYSPROF_MARKERS")}

@sysprof.mark("fsync")
def sync(f):
    f.flush()
    os.fsync(f.fileno())

def worker():
    out["worker_tid"] = threading.get_native_id()
    with sysprof.mark("worker"):
        pass

with sysprof.mark("phases"):
    with sysprof.mark("busy"):
        x = 0
        for i in range(300000):
            x += i
    with sysprof.mark("write"):
        with open(os.path.join(sys.argv[1], "data.bin"), "wb") as f:
            f.write(os.urandom(1 << 20))
            sync(f)
    with sysprof.mark("sleep"):
        out["t0"] = time.time_ns()
        time.sleep(0.2)
        out["t1"] = time.time_ns()
    sysprof.mark_instant("done", step=3)
    t = threading.Thread(target=worker)
    t.start(); t.join()
    out["native"] = sysprof.markers._producer.ring.native
pid = os.fork()
if pid == 0:
    with sysprof.mark("forked"):
        sysprof.mark_instant("in child")
    os._exit(0)
os.waitpid(pid, 0)
out["fork_pid"] = pid
with sysprof.mark("left open"):
    print(json.dumps(out), flush=True)
    os._exit(0)  # the end never comes: the recorder closes the span
"""


def test_record_marks_phases(tmp_path, writer):
    trace = tmp_path / "t.json"
    proc = run_cli("record", "-q", "--cpu", "-o", trace, "--", sys.executable, "-c", CHILD, tmp_path, timeout=120,
                   env={**os.environ, **writer}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["native"] == (writer[R.NATIVE_ENV] == "1")
    events = read_trace(trace)
    data = TraceData(events)
    pid, tid, fpid = info["pid"], info["tid"], info["fork_pid"]
    spans = [(s.name, s.pid, s.tid) for s in data.spans]
    assert spans == [("phases", pid, tid), ("busy", pid, tid), ("write", pid, tid), ("fsync", pid, tid),
                     ("sleep", pid, tid), ("worker", pid, info["worker_tid"]), ("forked", fpid, fpid),
                     ("left open", pid, tid)]
    by = {s.name: s for s in data.spans}
    outer = by["phases"]
    for name in ("busy", "write", "sleep", "worker"):
        assert outer.start_us <= by[name].start_us <= by[name].end_us <= outer.end_us, name
    assert by["busy"].end_us <= by["write"].start_us and by["write"].end_us <= by["sleep"].start_us
    assert by["write"].start_us <= by["fsync"].start_us <= by["fsync"].end_us <= by["write"].end_us
    assert by["sleep"].start_us <= _us(info["t0"]) <= _us(info["t1"]) <= by["sleep"].end_us
    assert by["sleep"].end_us - by["sleep"].start_us >= _us(info["t1"]) - _us(info["t0"]) - 1
    # its process exited inside it: closed by the recorder when it saw that (or at its stop)
    assert by["left open"].args["closed"] in ("process exited", "at stop")
    assert by["forked"].start_us >= outer.end_us and by["left open"].start_us >= by["forked"].end_us
    instants = [(i.name, i.pid, i.tid, i.args or None) for i in data.instants if i.name not in ("sysprof start",)]
    assert instants == [("done", pid, tid, {"step": 3}), ("in child", fpid, fpid, None)]
    # every span a balanced B/E pair; the samples' clock: markers lie within the recording
    assert sum(e.get("ph") == "B" for e in events) == sum(e.get("ph") == "E" for e in events) == 8
    assert data.start_ts <= outer.start_us and by["left open"].end_us <= data.stop_ts
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert names[fpid].endswith(f"(pid {fpid})") and pid in names
    stats = data.stop["stats"]
    assert stats["markers"] == 8 * 2 - 1 + 2 and stats["markers_dropped"] == 0  # "left open" sent no end
    assert not os.path.exists(info["dir"])  # the recorder removed the markers' directory
    # timestamps in file order never go back between markers and samples written by one drain
    ts = [e["ts"] for e in events if e.get("ph") in ("B", "E", "i", "C")
          and e.get("name") not in ("sysprof", "sysprof start", "sysprof stop")]
    assert ts == sorted(ts)


def test_bench_mark_runs(monkeypatch):
    # benchmarks/bench_mark.py with few calls: every case measured, every record written (none dropped)
    import sysprof

    monkeypatch.syspath_prepend(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                             "benchmarks"))
    from bench_mark import bench_mark, print_mark

    res = bench_mark({"mark": (2000, 500)}, sysprof)
    assert res["writers"] == ["python"] + (["native"] if R._native_writer() is not None else [])
    assert set(res["off"]) == {"timer", "with", "hoisted", "instant", "decorated"}
    for w in res["writers"]:
        assert res[f"on_{w}_dropped"] == 0 and res[f"on_{w}_used_native"] == (w == "native")
        assert res[f"on_{w}"]["instant"]["alone_ns"]["n"] == 1000 and res[f"on_{w}"]["with"]["loop_ns"]["n"] == 2
    assert "seqpacket" in res["on_python"]
    assert print_mark(res).startswith("## Markers: the caller's cost")


# ---- harm where it runs (issue 26, items 1 and 2) ----
def test_reader_reads_a_truncated_ring_without_a_signal(tmp_path):
    # in a child: on a mapping, the reads below raise SIGBUS, which kills the process that reads
    out = _run_child(f"""
        import os
        from sysprof.markers import ring as R
        ring = R.Ring({str(tmp_path)!r}, 1, native=False)
        reader = R.RingReader(ring.path)
        for k in range(3):
            ring.put(R.word(R.INSTANT, 0, 1), R.packer(1), b"n")
        print(len(reader.read()), getattr(reader, "damaged", None))
        for k in range(2):
            ring.put(R.word(R.INSTANT, 0, 1), R.packer(1), b"n")
        os.truncate(ring.path, 0)  # the program (or any process of its user) shrinks the file
        print(len(reader.read()), getattr(reader, "damaged", None) is not None, reader.dropped, reader.read())
    """)
    assert out.split("\n")[:2] == ["3 None", "0 True 0 []"]


def test_reader_takes_only_published_records_and_rejects_impossible_ones(tmp_path):
    ring = R.Ring(str(tmp_path), 1, native=False)
    reader = R.RingReader(ring.path)
    for k in range(R.RingReader.FIRST_RUN + 5):  # more than a first run: read on in longer runs
        assert _put(ring, k, 1, R.INSTANT, 0, b"n")
    ring.buf[R.HEADER + 20 * R.SLOT_SIZE:R.HEADER + 20 * R.SLOT_SIZE + 8] = (0).to_bytes(8, "little")  # unpublished
    assert [r[0] for r in reader.read()] == list(range(20))
    ring.buf[R.HEADER + 20 * R.SLOT_SIZE:R.HEADER + 20 * R.SLOT_SIZE + 8] = (21).to_bytes(8, "little")
    assert [r[0] for r in reader.read()] == [20]
    assert int.from_bytes(ring.buf[R.TAIL_AT:R.TAIL_AT + 8], "little") == 21  # acknowledged: the writer may reuse
    _put(ring, 99, 1, R.INSTANT, 0, b"n")
    ring.buf[R.HEADER + 21 * R.SLOT_SIZE:R.HEADER + 21 * R.SLOT_SIZE + 8] = (10 ** 12).to_bytes(8, "little")
    assert reader.read() == [] and reader.damaged == "its ring held an impossible record number"
    ring.close()
    reader.close()


def test_receiver_reports_a_damaged_and_a_replaced_ring(tmp_path):
    rec = MarkerReceiver(directory=str(tmp_path))
    pid = os.getpid()
    ring = R.Ring(rec.path, pid, native=False)
    _put(ring, 1000, 5, R.BEGIN, 0, b"a")
    assert [e["ph"] for e in _chrome(rec.drain()) if e["ph"] != "M"] == ["B"]
    # replaced under its name: the producer still writes into the file it mapped, which the recorder keeps reading
    other = R.Ring(str(tmp_path), pid, native=False)
    _put(other, 3000, 6, R.INSTANT, 0, b"other")
    os.replace(other.path, ring.path)
    _put(ring, 2000, 5, R.END, 0, b"a")
    got = [(e["ph"], e["name"]) for e in _chrome(rec.drain()) if e["ph"] != "M"]
    assert got == [("E", "a"), ("i", "other")]
    # truncated: the rest of that process's markers are lost, and said so; the recording goes on
    _put(other, 4000, 6, R.INSTANT, 0, b"lost")
    os.truncate(ring.path, 4096)  # the file now at the name: the one `other` mapped
    assert rec.problems() == ""
    assert [e for e in _chrome(rec.drain()) if e["ph"] != "M"] == [] and rec.stats()["markers"] == 3
    assert rec.problems().endswith(": its ring file was truncated or resized; its markers from then on were lost")
    (tmp_path / os.path.basename(rec.path) / "9-9.ring").write_bytes(b"junk")  # never a ring
    rec.drain()
    rec.finish(9_000_000)
    assert "truncated or resized" in rec.problems() and not os.path.exists(rec.path)
    ring.close()
    other.close()


def _in_small_tmpfs(script, size="600k"):
    """Runs ``script`` (sh) in a private mount namespace where /dev/shm and $TMPDIR are tmpfs of ``size``."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs in a private mount namespace needs root")
    small = tempfile.mkdtemp(prefix="sysprof-small-")
    try:
        proc = subprocess.run(["unshare", "-m", "sh", "-c",
                               f"mount -t tmpfs -o size={size} tmpfs /dev/shm && "
                               f"mount -t tmpfs -o size={size} tmpfs {small} && export TMPDIR={small} && {script}"],
                              capture_output=True, text=True, timeout=180)
    except (FileNotFoundError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"unshare: {e}")
    finally:
        os.rmdir(small)
    if "mount" in proc.stderr and proc.returncode == 32 or "unshare failed" in proc.stderr:
        pytest.skip(f"no private mount namespace here: {proc.stderr.strip()}")
    return proc


MARKING = "import sysprof\nfor i in range(10):\n    with sysprof.mark('step'):\n        sysprof.mark_instant('i')\n"


def test_markers_on_a_nearly_full_tmpfs_never_raise_a_signal(tmp_path, writer):
    """Less than a ring's 1 MiB free where the rings go (a small /dev/shm and $TMPDIR): the program and the
    recorder run on (no SIGBUS), every marker is dropped and counted (a stub ring), and errors say so."""
    import shlex

    trace = tmp_path / "t.json"
    prog = tmp_path / "marking.py"
    prog.write_text(MARKING + "print('ran')\n")
    env = " ".join(f"{k}={v}" for k, v in writer.items())
    cmd = " ".join(shlex.quote(str(a)) for a in (sys.executable, "-m", "sysprof", "record", "-q", "--cpu", "-o",
                                                   trace, "--", sys.executable, prog))
    proc = _in_small_tmpfs(f"cd {shlex.quote(str(tmp_path))} && env {env} {cmd}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ran"
    stop = [e for e in read_trace(trace) if e.get("name") == "sysprof stop"][0]["args"]
    assert stop["returncode"] == 0 and stop["stats"]["markers"] == 0 and stop["stats"]["markers_dropped"] == 30
    assert "no room for a marker ring" in stop["errors"]["markers"]
    assert "every marker of it was dropped" in stop["errors"]["markers"]


FULL = """
import json, os, subprocess, sys
from sysprof.markers.receiver import MarkerReceiver
rec = MarkerReceiver(directory=os.environ["TMPDIR"])
fd = os.open(os.path.join(os.environ["TMPDIR"], "filler"), os.O_WRONLY | os.O_CREAT)
try:  # fill the tmpfs to the last block
    while True:
        os.write(fd, bytes(4096))
except OSError:
    os.close(fd)
child = subprocess.run([sys.executable, sys.argv[1]], env=dict(os.environ, SYSPROF_MARKERS=rec.path),
                       capture_output=True, text=True)
rec.drain()
print(json.dumps({"rc": child.returncode, "out": child.stdout, "problems": rec.problems(), "stats": rec.stats()}))
rec.close()
"""


def test_markers_on_a_full_tmpfs_never_raise_a_signal(tmp_path, writer):
    """Not even a stub ring fits: the program runs on, and its empty .nospace file tells the recorder."""
    import shlex

    prog = tmp_path / "marking.py"
    prog.write_text(MARKING + "print(sysprof.markers.dropped())\n")
    script = tmp_path / "full.py"
    script.write_text(FULL)
    env = " ".join(f"{k}={v}" for k, v in writer.items())
    proc = _in_small_tmpfs(f"cd {shlex.quote(str(tmp_path))} && env {env} {shlex.quote(sys.executable)} "
                           f"{shlex.quote(str(script))} {shlex.quote(str(prog))}")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["rc"] == 0 and got["out"].split() == ["30"]
    assert got["stats"] == {"markers": 0, "markers_dropped": 0}
    assert got["problems"].endswith("no room for a marker ring in " + got["problems"].split(" in ", 1)[1])
    assert "count unknown" in got["problems"]


def test_a_hostile_ring_never_stops_the_other_rings(tmp_path):
    """A ring whose header holds an impossible pid (2**40) or counts: the other processes' markers still arrive,
    and absurd counts are not believed (issue 26 QA)."""
    rec = MarkerReceiver(directory=str(tmp_path))
    bad = bytearray(R.ring_size())
    R._INFO.pack_into(bad, 8, R.SLOT_SIZE, R.NSLOTS, 2 ** 40, 0)
    R._I64.pack_into(bad, R.DROPPED_AT, 2 ** 62)
    bad[:8] = R.MAGIC
    (tmp_path / os.path.basename(rec.path) / "1-1.ring").write_bytes(bytes(bad))
    good = R.Ring(rec.path, os.getpid(), native=False)
    _put(good, 1000, 5, R.INSTANT, 0, b"kept")
    assert [e["name"] for e in _chrome(rec.drain()) if e["ph"] == "i"] == ["kept"]
    _put(good, 2000, 5, R.INSTANT, 0, b"kept too")
    assert [e["name"] for e in _chrome(rec.drain()) if e["ph"] == "i"] == ["kept too"]
    assert rec.stats()["markers_dropped"] <= R.MAX_COUNT
    good.close()
    rec.close()


@pytest.mark.skipif(R._atomic_drop is None, reason="the extension's atomic drop count is not built")
def test_drops_from_racing_threads_are_all_counted(tmp_path):
    import threading

    ring = R.Ring(str(tmp_path), 1, native=False)
    reader = R.RingReader(ring.path)

    def drops():
        for _ in range(20000):
            ring.drop()
    threads = [threading.Thread(target=drops) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert reader.dropped == 80000
    ring.close()
    reader.close(unlink=True)


NS_CHILD = """
import os, sys, time, sysprof
for _ in range(50):  # pids in the new namespace: 1, 2, ... so the worker's is not a pid of the host's job
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
pid = os.fork()
if pid == 0:
    from sysprof.markers import ring as R
    sysprof.mark_instant("ready")
    buf = sysprof.markers._producer.ring.buf
    for _ in range(6000):  # until the recorder has read "ready" (so it has found this ring live), at most 60 s
        if R._unpack_i64(buf, R.TAIL_AT)[0] > 0:
            break
        time.sleep(0.01)
    for j in range(20):
        with sysprof.mark("worker"):
            time.sleep(0.01)
    os._exit(0)
os.waitpid(pid, 0)
"""


def test_markers_from_another_pid_namespace(tmp_path):
    """A job in its own pid namespace (unshare -p, bwrap, apptainer --pid): its rings' pids are that namespace's.
    The recorder knows a producer lives by its lock on the ring, and names it by its pid here (/proc/locks)."""
    if os.geteuid() != 0:
        pytest.skip("a pid namespace needs root here")
    import shutil

    if shutil.which("unshare") is None:
        pytest.skip("no unshare")
    trace = tmp_path / "t.json"
    prog = tmp_path / "ns.py"
    prog.write_text(NS_CHILD)
    proc = run_cli("record", "-q", "--cpu", "-o", trace, "--", "unshare", "-p", "-f", "--mount-proc",
                   sys.executable, prog, timeout=120, cwd=tempfile.gettempdir())
    if proc.returncode != 0 and "unshare" in proc.stderr:
        pytest.skip(f"no pid namespace here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    data = TraceData(read_trace(trace))
    spans = [s for s in data.spans if s.name == "worker"]
    assert len(spans) == 20 and not any((s.args or {}).get("closed") for s in spans)
    pids = {s.pid for s in spans}
    assert len(pids) == 1 and pids.pop() > 60  # the host's pid of the worker, not its namespace's (52)
    assert data.stop["stats"]["markers"] == 41 and data.stop["stats"]["markers_dropped"] == 0
