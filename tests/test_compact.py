"""Compact traces on the profiler paths (issue 12, item 8): JSONTraceHandler writes the system profiler's counters
changes only, each cycle file standing alone; the device filter reaches the sampler from every path; a
``sysprof record`` trace carries Composer's rank metadata, so both mergers take it with Composer-layout traces."""
import json
import os

import numpy as np
import pytest

import sysprof
from sysprof.profiler import Profiler
from sysprof.profiler.json_trace_handler import JSONTraceHandler
from sysprof.profiler.schedule import cyclic_schedule
from sysprof.profiler.system_profiler import SystemProfiler
from sysprof.profiler.trace_handler import CounterRows
from sysprof.trace.chrome import read_trace
from sysprof.trace.tracks import Changes, EventRenderer, RowTemplate, TrackLayout

from cli_support import run_cli

NAN = float("nan")
SERIES = [("cpu", ("cpu",), ("cpu_percent",), 0, 1),
          ("memory/virtual", ("memory",), ("used_gb", "available_gb"), 1, 3),
          ("disk/sda/read_bytes", ("disk",), ("read_bytes",), 3, 4)]


def rows(t_ms, values):
    return CounterRows(SERIES, np.array([t * 1_000_000 for t in t_ms], dtype=np.int64),
                       np.array(values, dtype=np.float64), [None] * len(t_ms))


def counters(path):
    return [(e["name"], e["ts"], e["args"]) for e in read_trace(path) if e["ph"] == "C"]


def test_changes_mask_and_nan_rule():
    ch = Changes([(0, 1), (1, 3)])
    m = ch.mask(np.array([[1, 2, 3], [1, 2, 3], [2, 2, 3], [2, 2, 4]], dtype=float))
    assert m.tolist() == [[True, True], [False, False], [True, False], [False, True]]
    m = ch.mask(np.array([[2, NAN, 4], [2, NAN, 4]]))  # across batches; NaN equals NaN
    assert m.tolist() == [[False, True], [False, False]]
    assert ch.finish_tracks() == [0, 1]
    assert ch.args(1, ("a", "b"), [NAN, NAN]) is None  # never known: nothing to say
    assert ch.args(1, ("a", "b"), [1.0, NAN]) == {"a": 1.0}
    assert ch.args(1, ("a", "b"), [NAN, float("inf")]) == {}  # known values end here
    assert ch.args(1, ("a", "b"), [NAN, NAN]) is None
    ch.reset()
    assert ch.mask(np.array([[2, NAN, 4]])).tolist() == [[True, True]]


def test_cycle_files_stand_alone(tmp_path):
    """Two cycle files (one batch each): the first row of each writes every counter, then only changes, and each
    ends with its last row's other counters (values hold to the file's end)."""
    h = JSONTraceHandler(folder=str(tmp_path), remote_file_name=None, merged_trace_filename=None)
    prof = Profiler(schedule=cyclic_schedule(wait=0, warmup=0, active=1, repeat=2), trace_handlers=[h],
                    sys_prof_cpu=False)
    prof.start()
    h.process_counter_rows(rows([1, 2], [[1, 5, 6, 7], [2, 5, 6, 7]]))
    h.process_counter_rows(rows([3], [[2, 5, 6, 7]]))
    prof.step()  # saves ep0-ba1
    h.process_counter_rows(rows([4, 5, 6], [[2, 5, 6, 7], [2, 5.5, 6, 7], [2, 5.5, 6, 7]]))
    prof.step()  # saves ep0-ba2
    prof.stop()
    assert counters(tmp_path / "ep0-ba1-rank0.json") == [
        ("cpu", 1000, {"cpu_percent": 1.0}), ("memory/virtual", 1000, {"used_gb": 5.0, "available_gb": 6.0}),
        ("disk/sda/read_bytes", 1000, {"read_bytes": 7.0}),
        ("cpu", 2000, {"cpu_percent": 2.0}),
        ("cpu", 3000, {"cpu_percent": 2.0}), ("memory/virtual", 3000, {"used_gb": 5.0, "available_gb": 6.0}),
        ("disk/sda/read_bytes", 3000, {"read_bytes": 7.0})]
    assert counters(tmp_path / "ep0-ba2-rank0.json") == [
        ("cpu", 4000, {"cpu_percent": 2.0}), ("memory/virtual", 4000, {"used_gb": 5.0, "available_gb": 6.0}),
        ("disk/sda/read_bytes", 4000, {"read_bytes": 7.0}),
        ("memory/virtual", 5000, {"used_gb": 5.5, "available_gb": 6.0}),
        ("cpu", 6000, {"cpu_percent": 2.0}), ("memory/virtual", 6000, {"used_gb": 5.5, "available_gb": 6.0}),
        ("disk/sda/read_bytes", 6000, {"read_bytes": 7.0})]


def test_nan_rule_in_composer_layout(tmp_path):
    h = JSONTraceHandler(folder=str(tmp_path), remote_file_name=None, merged_trace_filename=None)
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[h], sys_prof_cpu=False)
    prof.start()
    h.process_counter_rows(rows([1, 2, 3, 4, 5], [[NAN, 5, 6, 7], [1, 5, NAN, 7], [1, NAN, NAN, 7],
                                                  [1, NAN, NAN, 7], [1, 4, 6, 7]]))
    prof.stop()
    (path,) = tmp_path.glob("ep*.json")
    assert counters(path) == [
        ("memory/virtual", 1000, {"used_gb": 5.0, "available_gb": 6.0}), ("disk/sda/read_bytes", 1000,
                                                                          {"read_bytes": 7.0}),
        ("cpu", 2000, {"cpu_percent": 1.0}), ("memory/virtual", 2000, {"used_gb": 5.0}),
        ("memory/virtual", 3000, {}),  # its values end here
        ("memory/virtual", 5000, {"used_gb": 4.0, "available_gb": 6.0}),
        ("cpu", 5000, {"cpu_percent": 1.0}), ("disk/sda/read_bytes", 5000, {"read_bytes": 7.0})]


def test_every_row_mode_unchanged(tmp_path):
    h = JSONTraceHandler(folder=str(tmp_path), remote_file_name=None, merged_trace_filename=None,
                         changes_only=False)
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[h], sys_prof_cpu=False)
    prof.start()
    h.process_counter_rows(rows([1, 2], [[1, 5, 6, 7], [1, 5, 6, 7]]))
    prof.stop()
    (path,) = tmp_path.glob("ep*.json")
    assert [(n, t) for n, t, _ in counters(path)] == [(n, t) for t in (1000, 2000)
                                                      for n in ("cpu", "memory/virtual", "disk/sda/read_bytes")]


def test_row_template_text_matches_event_renderer():
    """Changes only, the Composer layout's text renderer and the dict renderer write the same events."""
    channels = ("cpu/percent", "memory/used_bytes", "memory/available_bytes", "load/1m")
    layout = TrackLayout(channels, "composer")
    values = np.array([[1, 2e9, 3e9, 0.5], [1, 2e9, 3e9, 0.5], [NAN, 2e9, 3e9, 0.5], [3, 2e9, 3e9, NAN],
                       [3, 2e9, 4e9, NAN]])
    ts = np.arange(1, 6, dtype=np.int64) * 1_000_000

    class B:
        timestamps_ns, values_ = ts, values

        def __len__(self):
            return len(ts)

    b = B()
    b.values = values
    ev = EventRenderer(layout, pid=0, tid=7)
    want = ev.events(b) + ev.finish()
    tpl = RowTemplate(layout.series, 0, 7, changes_only=True)
    rendered = tpl.render(ts, layout.project(values)) + tpl.finish()
    got = json.loads("[" + ",\n".join(text for text, _ in rendered) + "]")
    assert got == want
    # rows: all 3 tracks; none; cpu {} (ends); cpu, load {}; memory; closing row: cpu (load is unknown)
    assert sum(n for _, n in rendered) == len(want) == 8


# ------------------------------------------------------------------------------ the device filter on every path
def test_device_filter_reaches_the_sampler():
    assert SystemProfiler(devices=["nvme*", "!lo"])._make_sampler().device_filter.globs == ("nvme*", "!lo")
    assert SystemProfiler()._make_sampler().device_filter.globs == ()
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[], sys_prof_net=True, sys_prof_devices=["eth*"])
    assert prof.system_profiler.devices == ["eth*"]
    with pytest.raises(ValueError, match="devices"):
        SystemProfiler(devices="sda")


def test_profile_devices(tmp_path):
    with sysprof.profile(str(tmp_path), sys_prof_cpu=False, sys_prof_net=True, devices=["*"],
                         sys_prof_stats_thread_interval_seconds=0.01) as prof:
        channels = prof.system_profiler.sampler.channels
        assert prof.system_profiler.devices == ["*"]
    nics = {c.split("/")[1] for c in channels}
    with open("/proc/net/dev") as f:
        assert nics == {line.split(":")[0].strip() for line in f if ":" in line}  # lo among them


def test_record_devices_flag(tmp_path):
    out = tmp_path / "t.json"
    proc = run_cli("record", "-q", "--net", "--devices", "lo", "-d", "0.2s", "-o", out)
    assert proc.returncode == 0, proc.stderr
    start = [e for e in read_trace(out) if e["name"] == "sysprof start"][0]["args"]
    assert {c.split("/")[1] for c in start["channels"]} == {"lo"} and start["devices"] == ["lo"]
    proc = run_cli("record", "-q", "--devices", "disk/", "-d", "0.1s", "-o", tmp_path / "u.json")
    assert proc.returncode == 2 and "--devices: 'disk/' has no glob after disk/" in proc.stderr


# ------------------------------------------------------------------------------ rank metadata and merging
def _composer_layout_trace(folder):
    h = JSONTraceHandler(folder=str(folder), remote_file_name=None, merged_trace_filename=None)
    prof = Profiler(schedule=lambda s: "active", trace_handlers=[h], sys_prof_cpu=False)
    prof.start()
    with prof.marker("step"):
        h.process_counter_rows(rows([1], [[1, 5, 6, 7]]))
    prof.stop()
    (path,) = folder.glob("ep*.json")
    return path


@pytest.mark.parametrize("rank", [None, "3"])
def test_record_trace_merges_with_composer_layout(tmp_path, rank):
    env = dict(os.environ)
    env.pop("RANK", None)
    if rank is not None:
        env["RANK"] = rank
    rec = tmp_path / "rec.json"
    proc = run_cli("record", "-q", "--load", "-d", "0.2s", "-o", rec, env=env)
    assert proc.returncode == 0, proc.stderr
    events = read_trace(rec)
    meta = {e["name"]: e["args"]["value"] for e in events if e["ph"] == "M" and "value" in e.get("args", {})}
    start = [e for e in events if e["name"] == "sysprof start"][0]
    assert meta == {"global_rank": int(rank or 0), "clock_sync_timestamp_us": start["args"]["start_time_ns"] // 1000}
    comp = _composer_layout_trace(tmp_path / "c")
    out = tmp_path / "merged.json"
    sysprof.merge_traces(out, comp, rec)
    merged = json.loads(out.read_text())
    n_rec = len(events)
    n_comp = len(read_trace(comp))
    assert sum(e.get("args", {}).get("sort_index") != 99999 for e in merged) == n_rec + n_comp
    assert {e["pid"] for e in merged} == {0, int(rank or 0)}
    # same rank: no shift; another rank: shifted by the difference of the clock syncs (rank 0's is the base)
    comp_sync = [e for e in read_trace(comp) if e["name"] == "clock_sync_timestamp_us"][0]["args"]["value"]
    shift = 0 if rank is None else comp_sync - meta["clock_sync_timestamp_us"]
    merged_start = [e for e in merged if e["name"] == "sysprof start"][0]
    assert merged_start["ts"] == start["ts"] + shift


def _composer_python():
    """The Composer venv's python (tests/test_composer_integration.py's venv, not built here), or None where it has
    no Composer."""
    import subprocess

    import recipe_venv

    if not recipe_venv.RECIPES["composer"].exists():
        return None
    py = os.path.join(recipe_venv.venv_path("composer"), "bin", "python")
    if not os.access(py, os.X_OK):
        return None
    ok = subprocess.run([py, "-c", "import composer.profiler.json_trace_merger"], capture_output=True, timeout=120)
    return py if ok.returncode == 0 else None


def test_composer_merger_takes_a_record_trace(tmp_path):
    import subprocess

    py = _composer_python()
    if py is None:
        pytest.skip("no Composer venv (shared/recipes/composer-venv.sh builds one)")
    env = {k: v for k, v in os.environ.items() if k != "RANK"}
    rec = tmp_path / "rec.json"
    assert run_cli("record", "-q", "--cpu", "-d", "0.2s", "-o", rec, env=env).returncode == 0
    comp = _composer_layout_trace(tmp_path / "c")
    out = tmp_path / "merged.json"
    code = ("import sys; from composer.profiler.json_trace_merger import merge_traces; "
            "merge_traces(sys.argv[1], *sys.argv[2:])")
    proc = subprocess.run([py, "-c", code, str(out), str(comp), str(rec)], capture_output=True, text=True,
                          timeout=120, cwd="/")
    assert proc.returncode == 0, proc.stderr
    merged = json.loads(out.read_text())
    names = [e["name"] for e in merged]
    assert "sysprof start" in names and "step" in names and names.count("global_rank") == 2
    assert {e["pid"] for e in merged} == {0}


# ------------------------------------------------------------------------------ handlers without process_counter_rows
from test_system_profiler import MS, T0, fake  # noqa: E402,F401 - the fake sampler and clock fixture


class PerEventHandler:
    """A handler as Composer's: callback methods and process_counter_event only (no process_counter_rows)."""

    def __init__(self):
        self.calls = []

    def run_event(self, event, state, logger):
        pass

    def close(self, state, logger):
        pass

    def post_close(self):
        pass

    def process_counter_event(self, name, categories, timestamp, wall_clock_time_ns, values):
        self.calls.append((name, (wall_clock_time_ns - T0) // MS, values))


@pytest.mark.parametrize("changes_only", [True, False])
def test_per_event_handlers_get_changes_only(fake, changes_only):  # noqa: F811
    """Two cycles of one batch each: rows at 2, 4, 6 ms (first cycle) and 12, 14 ms (second); only cpu changes (at
    4 ms); eth0's kb_recv is NaN throughout. Each cycle opens with every counter and closes with its last row's."""
    sampler, clock = fake
    sampler.channels = ("cpu/percent", "net/eth0/bytes_sent", "net/eth0/bytes_recv")
    h = PerEventHandler()
    prof = Profiler(schedule=cyclic_schedule(wait=0, warmup=0, active=1, repeat=2), trace_handlers=[h],
                    sys_prof_cpu=True, sys_prof_net=True)
    prof.system_profiler.changes_only = changes_only
    prof.start()  # observed at T0: active_and_save
    first, changed = [12.5, 2500.0, NAN], [13.5, 2500.0, NAN]
    sampler.rows = [(T0 + 2 * MS, first), (T0 + 4 * MS, changed), (T0 + 6 * MS, changed)]
    clock["t"] = T0 + 10 * MS
    prof.step()  # batch_end: drained and closed before the save
    sampler.rows = [(T0 + 12 * MS, changed), (T0 + 14 * MS, changed)]
    prof.stop()
    cpu = lambda v: ("cpu", {"cpu_percent": v})  # noqa: E731
    net = ("network/eth0/kb_sent", {"kb_sent": 2.5})
    got = [(t, (n, v)) for n, t, v in h.calls]
    if not changes_only:
        assert got == [(t, e) for t, v in ((2, 12.5), (4, 13.5), (6, 13.5), (12, 13.5), (14, 13.5))
                       for e in (cpu(v), net)]
        return
    assert got == [(2, cpu(12.5)), (2, net), (4, cpu(13.5)), (6, cpu(13.5)), (6, net),
                   (12, cpu(13.5)), (12, net), (14, cpu(13.5)), (14, net)]


def test_bench_density_runs():
    """benchmarks/bench_density.py's structure (no size or rate asserts: the machine decides them), except what
    holds anywhere: the every-row file is larger than the changes-only one of the same path."""
    import pathlib

    sys_path = str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks")
    import sys

    sys.path.insert(0, sys_path)
    try:
        import bench_density
    finally:
        sys.path.remove(sys_path)
    res = bench_density.bench_density({"density": (1, 0.3)}, sysprof)
    paths = res["paths"]
    assert {"record", "profile()", "Profiler, cyclic", "Profiler, cyclic, every row"} <= set(paths)
    for e in paths.values():
        assert e["bytes_per_sample"]["n"] == 1 and min(e["samples"]) > 0
    assert (paths["Profiler, cyclic, every row"]["counter_bytes_per_sample"]["median"]
            > paths["Profiler, cyclic"]["counter_bytes_per_sample"]["median"])
    text = bench_density.print_density(res)
    assert "| record" in text and "goal <= 20 B/sample" in text
