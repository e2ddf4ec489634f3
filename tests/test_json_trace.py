"""Chrome trace files (ChromeTraceWriter, read_trace, repair_trace), JSONTraceHandler layout and merge_traces."""

import gzip
import json
import os
import time

import pytest

import sysprof.marker as marker_mod
from sysprof.chrome_trace import ChromeTraceWriter, read_trace, repair_trace
from sysprof.json_trace_handler import JSONTraceHandler, merge_traces
from sysprof.profiler import Profiler, Timestamp
from sysprof.schedule import cyclic_schedule


# ---------------------------------------------------------------------- ChromeTraceWriter / read / repair
@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_writer_roundtrip_layout_and_nan(tmp_path, name):
    path = tmp_path / name
    w = ChromeTraceWriter(path)
    w.write({"name": "a", "ph": "C", "ts": 1, "args": {"x": float("nan"), "y": float("inf"), "z": 1.5}})
    w.write_many([{"name": "b", "ph": "i", "ts": 2}, {"name": "c", "ph": "i", "ts": 3}])
    w.flush()
    assert [e["name"] for e in read_trace(path)] == ["a", "b", "c"]  # readable before close
    w.close()
    w.close()  # idempotent
    raw = (gzip.open(path, "rt") if name.endswith(".gz") else open(path)).read()
    assert raw == ('[\n{"name": "a", "ph": "C", "ts": 1, "args": {"x": null, "y": null, "z": 1.5}},\n'
                   '{"name": "b", "ph": "i", "ts": 2},\n{"name": "c", "ph": "i", "ts": 3}\n]\n')
    assert json.loads(raw)[0]["args"] == {"x": None, "y": None, "z": 1.5}
    assert w.bytes_written == len(raw)
    assert w.path == path
    with pytest.raises(ValueError):
        w.write({"name": "late"})


def test_writer_exists_and_bad_path(tmp_path):
    path = tmp_path / "t.json"
    path.write_text("x")
    with pytest.raises(FileExistsError):
        ChromeTraceWriter(path)
    ChromeTraceWriter(path, overwrite=True).close()
    assert read_trace(path) == []
    with pytest.raises(OSError):
        ChromeTraceWriter(tmp_path / "missing_dir" / "t.json")
    with pytest.raises(OSError):
        ChromeTraceWriter(path / "below_a_file.json")


@pytest.mark.parametrize("cut", ["missing_bracket", "partial_event", "trailing_comma"])
def test_read_and_repair_truncated(tmp_path, cut):
    path = tmp_path / "t.json"
    body = '[\n{"name": "a", "ts": 1},\n{"name": "b", "ts": 2}'
    body += {"missing_bracket": "\n", "partial_event": ',\n{"name": "c", "ts', "trailing_comma": ",\n"}[cut]
    path.write_text(body)
    assert read_trace(path) == [{"name": "a", "ts": 1}, {"name": "b", "ts": 2}]
    assert repair_trace(path) == 2
    assert json.loads(path.read_text()) == [{"name": "a", "ts": 1}, {"name": "b", "ts": 2}]


def test_read_truncated_gzip_and_object_format(tmp_path):
    path = tmp_path / "t.json.gz"
    w = ChromeTraceWriter(path)
    w.write_many({"name": f"e{i}", "ts": i} for i in range(100))
    w.flush()  # sync-flushed, never closed: a crashed process
    data = path.read_bytes()
    path.write_bytes(data)
    assert len(read_trace(path)) == 100
    assert repair_trace(path) == 100
    with gzip.open(path, "rt") as f:
        assert len(json.load(f)) == 100
    obj = tmp_path / "torch.json"
    obj.write_text(json.dumps({"traceEvents": [{"name": "k", "ts": 5}], "schemaVersion": 1}))
    assert read_trace(obj) == [{"name": "k", "ts": 5}]
    bad = tmp_path / "bad.json"
    bad.write_text('"hello"')
    with pytest.raises(ValueError):
        read_trace(bad)


# ---------------------------------------------------------------------- JSONTraceHandler through the Profiler
@pytest.fixture
def clock(monkeypatch):
    """Fake ``time.time_ns`` for markers and trace metadata: 1e18 + 1000 * k ns for the k-th reading."""
    box = {"t": 10**18}

    def now():
        box["t"] += 1000
        return box["t"]

    monkeypatch.setattr(marker_mod, "_time_ns", now)
    monkeypatch.setattr(time, "time_ns", now)
    return box


def test_handler_cycle_files_exact_layout(tmp_path, clock):
    handler = JSONTraceHandler(folder=str(tmp_path / "{run_name}"), remote_file_name=None)
    prof = Profiler(schedule=cyclic_schedule(wait=1, warmup=1, active=1, repeat=1), trace_handlers=[handler],
                    sys_prof_cpu=False)
    prof.start(run_name="run")
    pid = os.getpid()
    for _ in range(4):  # batches 0 (skip), 1 (warmup), 2 (active_and_save), 3 (skip)
        m = prof.marker("step", categories=("train", "x"))
        with m:
            m.counter({"loss": 0.25, "bad": float("nan")})
            prof.marker("tick").instant()
        prof.step()
    prof.stop()
    folder = tmp_path / "run"
    assert sorted(os.listdir(folder)) == ["ep0-ba3-rank0.json", "merged_trace.json"]
    events = json.loads((folder / "ep0-ba3-rank0.json").read_text())
    base = dict(pid=0, tid=pid)
    meta_ts = 10**15 + 1  # 1st clock reading: batch 1's batch_start (batch 0 is skipped: no reading)
    assert events[:7] == [
        {"name": "process_name", "cat": "", "ph": "M", "ts": meta_ts, **base,
         "args": {"name": "Rank 0 training loop process"}},
        {"name": "thread_name", "cat": "", "ph": "M", "ts": meta_ts, **base, "args": {"name": "Training Loop"}},
        {"name": "thread_sort_index", "cat": "", "ph": "M", "ts": meta_ts, **base, "args": {"sort_index": 0}},
        {"name": "global_rank", "cat": "", "ph": "M", "ts": meta_ts, **base, "args": {"value": 0}},
        {"name": "process_sort_index", "cat": "", "ph": "M", "ts": meta_ts, **base, "args": {"sort_index": 0}},
        {"name": "clock_sync_timestamp_us", "cat": "", "ph": "M", "ts": meta_ts, **base,
         "args": {"value": meta_ts + 2}},
        {"name": "clock_sync_error_bound", "cat": "", "ph": "M", "ts": meta_ts, **base, "args": {"value": 2}},
    ]
    t0 = meta_ts + 4
    assert events[7:] == [
        {"name": "step", "cat": "train,x", "ph": "B", "ts": t0, **base, "args": {"epoch": 0, "batch": 1}},
        {"name": "step", "cat": "train,x", "ph": "C", "ts": t0 + 1, **base, "args": {"loss": 0.25, "bad": None}},
        {"name": "tick", "cat": "", "ph": "i", "ts": t0 + 2, **base, "args": {"epoch": 0, "batch": 1}, "s": "p"},
        {"name": "step", "cat": "train,x", "ph": "E", "ts": t0 + 3, **base, "args": {"epoch": 0, "batch": 1}},
        {"name": "step", "cat": "train,x", "ph": "B", "ts": t0 + 4, **base, "args": {"epoch": 0, "batch": 2}},
        {"name": "step", "cat": "train,x", "ph": "C", "ts": t0 + 5, **base, "args": {"loss": 0.25, "bad": None}},
        {"name": "tick", "cat": "", "ph": "i", "ts": t0 + 6, **base, "args": {"epoch": 0, "batch": 2}, "s": "p"},
        {"name": "step", "cat": "train,x", "ph": "E", "ts": t0 + 7, **base, "args": {"epoch": 0, "batch": 2}},
    ]
    assert handler.saved_traces[0][1] == [folder / "ep0-ba3-rank0.json"]
    assert int(handler.saved_traces[0][0].batch) == 3
    merged = json.loads((folder / "merged_trace.json").read_text())
    assert merged[0] == {"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": pid, "args": {"sort_index": 99999}}
    assert merged[1:] == events


def test_handler_saves_remaining_events_at_close(tmp_path):
    handler = JSONTraceHandler(folder=str(tmp_path), remote_file_name=None, merged_trace_filename=None)
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[handler], sys_prof_cpu=False)
    prof.start()
    prof.marker("a").instant()
    prof.step()
    prof.stop()
    assert os.listdir(tmp_path) == ["ep0-ba1-rank0.json"]
    names = [e["name"] for e in read_trace(tmp_path / "ep0-ba1-rank0.json")]
    assert names[-1] == "a" and names[0] == "process_name"


def test_handler_gzip_and_num_traces_to_keep(tmp_path):
    handler = JSONTraceHandler(folder=str(tmp_path), filename="b{batch}.json.gz", remote_file_name=None,
                               merged_trace_filename=None, num_traces_to_keep=1)
    prof = Profiler(schedule=cyclic_schedule(warmup=0, active=1, repeat=0), trace_handlers=[handler],
                    sys_prof_cpu=False)
    prof.start()
    for _ in range(3):
        prof.marker("a").instant()
        prof.step()
    prof.stop()
    assert sorted(os.listdir(tmp_path)) == ["b3.json.gz"]
    with gzip.open(tmp_path / "b3.json.gz", "rt") as f:
        assert [e["name"] for e in json.load(f)][-1] == "a"


def test_handler_folder_errors_at_init(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[JSONTraceHandler(folder=str(blocker / "traces"))],
                    sys_prof_cpu=False)
    with pytest.raises(OSError):
        prof.start()
    full = tmp_path / "full"
    full.mkdir()
    (full / "old.json").write_text("[]")
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[JSONTraceHandler(folder=str(full))],
                    sys_prof_cpu=False)
    with pytest.raises(FileExistsError, match="is not empty"):
        prof.start()
    ok = Profiler(schedule=lambda s: "active",
                  trace_handlers=[JSONTraceHandler(folder=str(full), overwrite=True, remote_file_name=None)],
                  sys_prof_cpu=False)
    ok.start()
    ok.stop()


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_handler_unwritable_folder_fails_at_init(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[JSONTraceHandler(folder=str(ro))],
                    sys_prof_cpu=False)
    with pytest.raises(PermissionError):
        prof.start()


def test_process_chrome_json_trace_file(tmp_path):
    ext = tmp_path / "ext.json"
    ext.write_text('[{"name": "k", "ph": "X", "ts": 5, "dur": 2, "pid": 77, "tid": 1}')  # no closing bracket
    out = tmp_path / "out"
    handler = JSONTraceHandler(folder=str(out), remote_file_name=None, merged_trace_filename=None)
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[handler], sys_prof_cpu=False)
    prof.start()
    prof.record_chrome_json_trace_file(ext)
    prof.stop()
    (trace,) = os.listdir(out)
    assert read_trace(out / trace)[-1] == {"name": "k", "ph": "X", "ts": 5, "dur": 2, "pid": 0, "tid": 1}


def test_handler_direct_calls_with_composer_style_timestamp(tmp_path):
    """Handlers also accept timestamps whose counters have ``.value`` (Composer's Time)."""

    class T:
        def __init__(self, v):
            self.value = v

    class CompTs:
        epoch, batch = T(2), T(7)

    class St:
        run_name = "r"
        timestamp = Timestamp()
        profiler = None

    handler = JSONTraceHandler(folder=str(tmp_path), remote_file_name=None, merged_trace_filename=None)
    handler.init(St(), None)
    handler.process_duration_event(name="n", categories=["a", "b"], is_start=True, timestamp=CompTs(),
                                   wall_clock_time_ns=1_234_567_890)
    handler.close(St(), None)
    (trace,) = os.listdir(tmp_path)
    events = read_trace(tmp_path / trace)
    assert events[0] == {"name": "n", "cat": "a,b", "ph": "B", "ts": 1_234_567, "pid": 0, "tid": os.getpid(),
                         "args": {"epoch": 2, "batch": 7}}
    # no cycle was started, so the leftover file gets its metadata at close (mergeable)
    assert [e["name"] for e in events[1:]] == ["process_name", "thread_name", "thread_sort_index", "global_rank",
                                               "process_sort_index", "clock_sync_timestamp_us",
                                               "clock_sync_error_bound"]


# ---------------------------------------------------------------------- merge_traces
def _rank_trace(path, rank, sync_us, events):
    meta = [{"name": "global_rank", "cat": "", "ph": "M", "ts": sync_us, "pid": rank, "tid": 10 + rank,
             "args": {"value": rank}},
            {"name": "clock_sync_timestamp_us", "cat": "", "ph": "M", "ts": sync_us, "pid": rank, "tid": 10 + rank,
             "args": {"value": sync_us}}]
    path.write_text(json.dumps(meta + events))


def test_merge_traces_aligns_clocks(tmp_path):
    r0, r1, out = tmp_path / "r0.json", tmp_path / "r1.json", tmp_path / "m.json"
    _rank_trace(r0, 0, 1000, [{"name": "a", "ph": "i", "ts": 1500, "pid": 0, "tid": 10}])
    _rank_trace(r1, 1, 1300, [{"name": "b", "ph": "i", "ts": 1800, "pid": 5, "tid": 11},
                              {"name": "no_tid", "ph": "i", "ts": 1, "pid": 1},
                              {"name": "torch", "ph": "X", "ts": 1, "pid": 1, "tid": "PyTorch Profiler (0)"}])
    merge_traces(out, r1, r0)
    merged = json.loads(out.read_text())
    shifted = [(e["name"], e["pid"], e.get("ts")) for e in merged]
    assert shifted == [
        ("thread_sort_index", 1, None), ("global_rank", 1, 1000), ("clock_sync_timestamp_us", 1, 1000),
        ("b", 1, 1500),
        ("thread_sort_index", 0, None), ("global_rank", 0, 1000), ("clock_sync_timestamp_us", 0, 1000),
        ("a", 0, 1500),
    ]
    with pytest.raises(ValueError):
        merge_traces(out)
    nor = tmp_path / "norank.json"
    nor.write_text("[]")
    with pytest.raises(RuntimeError, match="global rank not found"):
        merge_traces(out, nor)
