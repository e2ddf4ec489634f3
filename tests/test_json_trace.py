"""Chrome trace files (ChromeTraceWriter, read_trace, repair_trace), JSONTraceHandler layout and merge_traces."""

import gzip
import json
import os
import time

import pytest

import sysprof.profiler.marker as marker_mod
from sysprof.trace.chrome import ChromeTraceWriter, read_trace, repair_trace
from sysprof.profiler.json_trace_handler import JSONTraceHandler, merge_traces
from sysprof.profiler import Profiler, Timestamp
from sysprof.profiler.schedule import cyclic_schedule


# ---------------------------------------------------------------------- ChromeTraceWriter / read / repair
@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_writer_roundtrip_layout_and_nan(tmp_path, name):
    path = tmp_path / name
    w = ChromeTraceWriter(path)
    # counter args: NaN and +/-inf are left out (unknown); elsewhere a non-finite number is written as null
    w.write({"name": "a", "ph": "C", "ts": 1, "args": {"x": float("nan"), "y": float("inf"), "z": 1.5,
                                                        "w": float("-inf")}})
    w.write_many([{"name": "b", "ph": "i", "ts": 2, "args": {"limit": float("inf")}}, {"name": "c", "ph": "i", "ts": 3}])
    w.flush()
    assert [e["name"] for e in read_trace(path)] == ["a", "b", "c"]  # readable before close
    w.close()
    w.close()  # idempotent
    raw = (gzip.open(path, "rt") if name.endswith(".gz") else open(path)).read()
    assert raw == ('[\n{"name":"a","ph":"C","ts":1,"args":{"z":1.5}},\n'
                   '{"name":"b","ph":"i","ts":2,"args":{"limit":null}},\n{"name":"c","ph":"i","ts":3}\n]\n')
    assert json.loads(raw)[0]["args"] == {"z": 1.5}
    assert w.bytes_written == len(raw)
    assert w.path == path
    with pytest.raises(ValueError):
        w.write({"name": "late"})


class _St:
    run_name = "r"
    timestamp = Timestamp()
    profiler = None


def test_counter_args_is_the_one_finiteness_rule():
    import numpy as np

    from sysprof.trace.chrome import counter_args

    inf, nan = float("inf"), float("nan")
    assert counter_args("abcdef", [1.0, nan, inf, -inf, 0, np.float32(inf)]) == {"a": 1.0, "e": 0}
    assert counter_args(["a"], [nan]) == {}


def test_handler_leaves_non_finite_counter_values_out(tmp_path):
    """process_counter_event and process_counter_rows (fast and slow rows) follow counter_args: inf and NaN keys
    are left out, an event with none left is not written."""
    import numpy as np

    from sysprof.profiler.trace_handler import CounterRows

    inf, nan = float("inf"), float("nan")
    h = JSONTraceHandler(folder=str(tmp_path), merged_trace_filename=None, remote_file_name=None,
                         changes_only=False)  # every row (changes only: tests/test_compact.py)
    state = _St()
    h.init(state, None)
    h.process_counter_event("lim", ["m"], None, 1_000_000, {"max": inf, "cur": 5.0})
    h.process_counter_event("gone", ["m"], None, 2_000_000, {"a": nan, "b": -inf})
    series = [("cg", ("cgroup",), ("max_gb", "cur_gb"), 0, 2)]
    h.process_counter_rows(CounterRows(series, np.array([3_000_000, 4_000_000, 5_000_000], dtype=np.int64),
                                       np.array([[1.0, 2.0], [inf, 2.0], [inf, nan]]), [None] * 3))
    h.close(state, None)
    events = [e for f in tmp_path.glob("*.json") for e in json.loads(f.read_text()) if e["ph"] == "C"]
    assert [(e["name"], e["ts"], e["args"]) for e in events] == [
        ("lim", 1000, {"cur": 5.0}), ("cg", 3000, {"max_gb": 1.0, "cur_gb": 2.0}), ("cg", 4000, {"cur_gb": 2.0})]


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
        {"name": "step", "cat": "train,x", "ph": "C", "ts": t0 + 1, **base, "args": {"loss": 0.25}},
        {"name": "tick", "cat": "", "ph": "i", "ts": t0 + 2, **base, "args": {"epoch": 0, "batch": 1}, "s": "p"},
        {"name": "step", "cat": "train,x", "ph": "E", "ts": t0 + 3, **base, "args": {"epoch": 0, "batch": 1}},
        {"name": "step", "cat": "train,x", "ph": "B", "ts": t0 + 4, **base, "args": {"epoch": 0, "batch": 2}},
        {"name": "step", "cat": "train,x", "ph": "C", "ts": t0 + 5, **base, "args": {"loss": 0.25}},
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


def _run_profile(folder, marks, **kw):
    """A ``sysprof.profile`` run with one instant event per step for ``marks`` steps, never ACTIVE_AND_SAVE: its
    events are saved by close as ``ep0-ba<marks>-rank0.json``."""
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[JSONTraceHandler(folder=str(folder), **kw)],
                    sys_prof_cpu=False)
    prof.start()
    for i in range(marks):
        prof.marker(f"run-mark-{i}").instant()
        prof.step()
    prof.stop()


def test_overwrite_replaces_an_older_runs_file_instead_of_adding_final(tmp_path):
    folder = tmp_path / "traces"
    _run_profile(folder, 2, overwrite=True, remote_file_name=None)
    (folder / "ep0-ba2-rank0.json").write_text("[]")  # stands for run 1's content
    _run_profile(folder, 2, overwrite=True, remote_file_name=None)
    assert sorted(os.listdir(folder)) == ["ep0-ba2-rank0.json", "merged_trace.json"]
    assert "run-mark-1" in [e["name"] for e in read_trace(folder / "ep0-ba2-rank0.json")]  # the latest run's


@pytest.mark.parametrize("folder", ["traces", "runs.json.d"])  # ".json" in a folder name: not split there
def test_final_save_never_replaces_this_runs_own_file(tmp_path, folder):
    """A cycle saved at batch 2 and the leftover events at close, also at batch 2: the leftover goes to .final
    (inserted into the file name only)."""
    folder = tmp_path / folder
    handler = JSONTraceHandler(folder=str(folder), remote_file_name=None, merged_trace_filename=None,
                               overwrite=True)
    actions = {0: "active", 1: "active_and_save", 2: "active"}
    prof = Profiler(schedule=lambda s: actions.get(int(s.timestamp.batch), "active"), trace_handlers=[handler],
                    sys_prof_cpu=False)
    prof.start()
    for _ in range(2):
        prof.marker("cycle").instant()
        prof.step()
    prof.marker("leftover").instant()
    prof.stop()
    assert sorted(os.listdir(tmp_path)) == [folder.name]
    assert sorted(os.listdir(folder)) == ["ep0-ba2-rank0.final.json", "ep0-ba2-rank0.json"]
    assert "leftover" in [e["name"] for e in read_trace(folder / "ep0-ba2-rank0.final.json")]
    assert "cycle" in [e["name"] for e in read_trace(folder / "ep0-ba2-rank0.json")]


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


# ---------------------------------------------------------------------- the track model
def test_track_layout_presets():
    """One channel set, both presets: grouping, keys, scale, category, pid and units."""
    import numpy as np

    from sysprof.trace.tracks import EventRenderer, TrackLayout

    channels = ("memory/used_bytes", "cpu/percent", "memory/available_bytes", "process/rss_bytes")
    sp = TrackLayout(channels, "sysprof", system_pid=7, process_pid=9)
    assert [(t.name, t.keys, t.columns, t.pid) for t in sp.tracks] == [
        ("memory", ("used_bytes", "available_bytes"), [0, 2], 7), ("cpu", ("percent",), [1], 7),
        ("process", ("rss_bytes",), [3], 9)]
    assert sp.units == {"memory/used_bytes": "B", "memory/available_bytes": "B", "cpu/percent": "%",
                        "process/rss_bytes": "B"}
    co = TrackLayout(channels, "composer")
    assert co.series == [("memory/virtual", ("memory",), ("used_gb", "available_gb"), 0, 2),
                         ("cpu", ("cpu",), ("cpu_percent",), 2, 3), ("process/memory", ("process",), ("rss_gb",), 3, 4)]
    assert co.units == {"memory/virtual/used_gb": "GB", "memory/virtual/available_gb": "GB",
                        "cpu/cpu_percent": "%", "process/memory/rss_gb": "GB"}
    row = np.array([[2.5e9, 50.0, 1.5e9, 3e8]])
    assert co.project(row).tolist() == [[2.5, 1.5, 50.0, 0.3]]

    class B:
        timestamps_ns = np.array([5_000_000], dtype=np.int64)
        values = row

        def __len__(self):
            return 1

    events = EventRenderer(co, pid=3, tid=4).events(B())
    assert events[0] == {"name": "memory/virtual", "cat": "memory", "ph": "C", "ts": 5000, "pid": 3, "tid": 4,
                         "args": {"used_gb": 2.5, "available_gb": 1.5}}
    with pytest.raises(ValueError, match="unknown track preset"):
        TrackLayout(channels, "perfetto")


def test_composer_preset_names_other_sources_by_their_sysprof_names():
    """A source Composer never had (pressure, vmstat, ...) is traced under sysprof's names, unscaled, with the
    registry's units; its rates only with rates=True. Composer's own sources keep the seed's layout only."""
    from sysprof.trace.tracks import TrackLayout

    channels = ("cpu/user_percent", "pressure/io/some_seconds_total", "pressure/io/some_seconds_per_second",
                "vmstat/pgfault_total", "load/1m")
    co = TrackLayout(channels, "composer", rates=False)
    assert co.series == [("pressure/io", ("pressure",), ("some_seconds_total",), 0, 1),
                         ("vmstat", ("vmstat",), ("pgfault_total",), 1, 2), ("load", ("load",), ("1m",), 2, 3)]
    assert co.units == {"pressure/io/some_seconds_total": "s", "vmstat/pgfault_total": "", "load/1m": ""}
    with_rates = TrackLayout(channels, "composer", rates=True)
    assert with_rates.series[0] == ("pressure/io", ("pressure",), ("some_seconds_total", "some_seconds_per_second"),
                                    0, 2)
    assert with_rates.units["pressure/io/some_seconds_per_second"] == "s/s"
