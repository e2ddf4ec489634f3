"""``sysprof record --max-size`` (the trace as numbered parts, the oldest removed) and ``--min-free`` (writing
stops when the file system runs low; the command runs on), run for real in subprocesses."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest

from sysprof.report import TraceData, summarize
from sysprof.trace.chrome import read_trace
from sysprof.trace.merge import merge_traces

from cli_support import SYSPROF, assert_one_line_error, event, run_cli

MAX_SIZE = 512 << 10
PART_SIZE = MAX_SIZE // 4  # sysprof.cli.output.PARTS_KEPT


def _index(path) -> int:
    return int(path.name.split(".part")[1].split(".")[0])


def _row_times(events) -> list:
    """The distinct times of the sample rows (every counter event but the recorder's stats counter)."""
    return sorted({e["ts"] for e in events if e.get("ph") == "C" and e.get("name") != "sysprof"})


def test_max_size_keeps_the_newest_whole_parts_of_one_recording(tmp_path):
    out = tmp_path / "t.json"
    # --every-row: a row per sample in every part (memory's values are always known), ~0.4 kB a row at 1 ms,
    # so 6 s write several times MAX_SIZE even on a loaded machine
    proc = run_cli("record", "--cpu", "--memory", "--every-row", "-i", "1ms", "-d", "6", "--max-size", "512k",
                   "-o", out, "--", sys.executable, "-c", "import time; time.sleep(5); raise SystemExit(4)")
    assert proc.returncode == 4, proc.stderr  # the command's status, rotation or not
    assert not out.exists()  # only the parts are written
    parts = sorted(tmp_path.glob("t.part*.json"), key=_index)
    events = [json.loads(p.read_text()) for p in parts]  # strict JSON: every part closed
    stops = [event(ev, "sysprof stop")["args"] for ev in events]
    starts = [event(ev, "sysprof start")["args"] for ev in events]
    last = stops[-1]["part"]
    assert last["next"] is None and last["index"] == _index(parts[-1])
    # the newest parts are kept, numbered on from the removed ones
    assert last["removed"] >= 1
    assert [_index(p) for p in parts] == list(range(last["removed"] + 1, last["index"] + 1))
    assert f"{len(parts)} of {last['index']} parts kept" in proc.stderr
    # the kept parts and one part's room stayed within --max-size when the last part began
    sizes = [p.stat().st_size for p in parts]
    assert sum(sizes[:-1]) + PART_SIZE <= MAX_SIZE
    assert sum(sizes) <= MAX_SIZE - PART_SIZE + sizes[-1]
    ids = {s["part"]["recording_id"] for s in starts} | {s["part"]["recording_id"] for s in stops}
    assert len(ids) == 1
    for i, (path, ev, start, stop) in enumerate(zip(parts, events, starts, stops)):
        assert start["part"]["index"] == stop["part"]["index"] == _index(path)
        assert [e["name"] for e in ev[:2]] == ["process_name", "process_sort_index"]  # each a whole trace
        if i + 1 < len(parts):
            assert stop["part"]["next"] == parts[i + 1].name
            # contiguous: the next part's first sample is the one after this part's last
            assert stops[i + 1]["part"]["first_sample"] == stop["part"]["first_sample"] + stop["samples_written"]
            assert _row_times(ev)[-1] < _row_times(events[i + 1])[0]  # no sample in two parts
        else:
            assert stop["returncode"] == 4
        times = _row_times(ev)
        assert len(times) == stop["samples_written"] > 0  # a part's own count
        assert stop["stats"]["taken"] - stop["stats"]["dropped"] == stop["samples_written"]
        assert start["start_time_ns"] == starts[0]["start_time_ns"]  # the recording's
    # read as one recording: the parts merged (or concatenated) give the first start and the counts added up
    merged = tmp_path / "merged.json"
    merge_traces(merged, *parts)
    data = TraceData(read_trace(merged))
    summary = summarize(data)
    assert summary["samples"] == sum(s["samples_written"] for s in stops)
    assert summary["returncode"] == 4
    assert data.start_ts == event(events[0], "sysprof start")["ts"]
    assert data.stop_ts == event(events[-1], "sysprof stop")["ts"]
    report = run_cli("report", "--json", *parts)  # the kept parts as one trace
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["samples"] == summary["samples"]
    assert_one_line_error(run_cli("report", parts[0], parts[0]), 2)  # a part twice
    assert_one_line_error(run_cli("report", parts[0], merged), 2)  # not the parts of one recording


def test_max_size_parts_in_perfetto_and_gzip_read_back(tmp_path):
    from sysprof.trace.perfetto import read_events

    for name, read in (("t.pftrace", read_events), ("t.json.gz", read_trace)):
        proc = run_cli("record", "--cpu", "--memory", "--every-row", "-i", "1ms", "-d", "3", "--max-size", "64k",
                       "-o", tmp_path / name)
        assert proc.returncode == 0, proc.stderr
        stem, ext = name.split(".", 1)
        parts = sorted(tmp_path.glob(f"{stem}.part*.{ext}"), key=_index)
        assert parts and not (tmp_path / name).exists()
        for path in parts:
            ev = read(path)
            assert event(ev, "sysprof start")["args"]["part"]["index"] == _index(path)
            assert event(ev, "sysprof stop")["args"]["part"]["index"] == _index(path)


def test_max_size_never_takes_over_parts_of_another_recording(tmp_path):
    old = tmp_path / "t.part0003.json"
    old.write_text("precious")
    for force in ([], ["--force"]):
        proc = run_cli("record", *force, "--max-size", "1M", "-d", "0.5", "-o", tmp_path / "t.json", "--",
                       "true")
        assert_one_line_error(proc, 1)
        assert "output exists" in proc.stderr and "t.part0003.json" in proc.stderr
    assert old.read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.part0003.json"]


@pytest.mark.parametrize("argv,says", [(["--max-size", "lots"], "invalid size 'lots'"),
                                       (["--max-size", "1k"], "--max-size must be at least 65.54 kB"),
                                       (["--max-size", "0"], "size must be > 0"),
                                       (["--min-free", "120%"], "invalid share '120%'"),
                                       (["--min-free", "-1M"], "size must be > 0, got '-1M'")])
def test_bad_sizes_are_one_line_errors_before_anything_runs(tmp_path, argv, says):
    marker = tmp_path / "ran"
    proc = run_cli("record", *argv, "-o", tmp_path / "t.json", "--", "touch", marker)
    assert_one_line_error(proc, 2)
    assert says in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_max_size_refuses_a_device(tmp_path):
    proc = run_cli("record", "--max-size", "1M", "-d", "0.3", "-o", "/dev/null")
    assert_one_line_error(proc, 2)
    assert "not one" in proc.stderr and not os.path.exists("/dev/null.part0001")


def test_max_size_default_name_is_a_free_stem(tmp_path):
    proc = run_cli("record", "--max-size", "1M", "-d", "0.3", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (part,) = tmp_path.iterdir()
    assert part.name.startswith("sysprof-") and part.name.endswith(".part0001.json")
    assert event(json.loads(part.read_text()), "sysprof stop")["args"]["part"]["index"] == 1


def test_report_reads_parts_as_one_recording():
    """Stop events of parts of one recording add up; the first start and the last stop bound it."""
    def part(i, t0, n, rid="r1"):
        p = {"index": i, "recording_id": rid}
        return [{"name": "sysprof start", "ph": "i", "ts": t0, "pid": 1, "tid": 0,
                 "args": {"interval_s": 0.001, "part": p}},
                *({"name": "cpu", "ph": "C", "ts": t0 + k + 1, "pid": 1, "tid": 0, "args": {"busy_percent": k}}
                  for k in range(n)),
                {"name": "sysprof stop", "ph": "i", "ts": t0 + n + 1, "pid": 1, "tid": 0,
                 "args": {"stats": {"taken": n + 1, "dropped": 1, "missed_deadlines": 2}, "samples_written": n,
                          "part": p}}]

    one, two = part(1, 1000, 5), part(2, 1006, 3)
    for events in (one + two, two + one):
        data = TraceData(events)
        assert (data.start_ts, data.stop_ts) == (1000, 1010)
        assert data.stop["stats"] == {"taken": 10, "dropped": 2, "missed_deadlines": 4}
        assert data.stop["samples_written"] == 8
        assert summarize(data)["samples"] == 8
    other = part(2, 1006, 3, rid="r2")  # another recording's: the last one wins, as before
    data = TraceData(one + other)
    assert data.start_ts == 1006 and data.stop["samples_written"] == 3


@pytest.mark.parametrize("status,expected", [(3, 3), (0, 1)])
def test_min_free_stops_writing_and_the_command_runs_on(tmp_path, status, expected):
    out, marker = tmp_path / "t.json", tmp_path / "ran"
    code = f"import time; time.sleep(1); open({str(marker)!r}, 'w').close(); raise SystemExit({status})"
    proc = run_cli("record", "--min-free", "100%", "-i", "1ms", "-o", out, "--", sys.executable, "-c", code)
    assert proc.returncode == expected, proc.stderr  # the command's status first, else 1: the trace stopped early
    assert marker.exists()  # the command ran to its end
    assert "stopped writing" in proc.stderr and "the command runs on" in proc.stderr
    stop = event(json.loads(out.read_text()), "sysprof stop")["args"]  # strict JSON: the trace was closed
    why = stop["stopped_writing"]
    assert why["reason"] == "low disk space"
    assert why["available_bytes"] < why["min_free_bytes"]
    assert "returncode" not in stop  # written when writing stopped, before the command ended


def _tmpfs_ok() -> str:
    if os.geteuid() != 0:
        return "needs root to mount a tmpfs"
    if shutil.which("unshare") is None:
        return "needs unshare(1)"
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
                           capture_output=True, timeout=30)
    return "" if probe.returncode == 0 else f"cannot mount a tmpfs in a private mount namespace: {probe.stderr!r}"


def test_min_free_in_a_small_tmpfs(tmp_path):
    why = _tmpfs_ok()
    if why:
        pytest.skip(why)
    mnt, copy, marker = tmp_path / "mnt", tmp_path / "copy.json", tmp_path / "ran"
    mnt.mkdir()
    code = f"import time; time.sleep(3); open({str(marker)!r}, 'w').close()"
    record = shlex.join(SYSPROF + ["record", "--every-row", "--min-free", "2M", "-i", "1ms", "-o", f"{mnt}/t.json",
                                   "--", sys.executable, "-c", code])
    script = (f"mount -t tmpfs -o size=4m tmpfs {shlex.quote(str(mnt))} || exit 99; {record}; rc=$?; "
              f"cp {shlex.quote(str(mnt))}/t.json {shlex.quote(str(copy))}; exit $rc")
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr  # the command succeeded; the trace stopped early
    assert marker.exists()
    assert "stopped writing" in proc.stderr
    stop = event(json.loads(copy.read_text()), "sysprof stop")["args"]
    assert stop["stopped_writing"]["min_free_bytes"] == 2 << 20
    assert stop["stopped_writing"]["available_bytes"] < 2 << 20
    assert copy.stat().st_size < (4 << 20) - (1 << 20)  # stopped well before the file system filled up


def test_default_floor_of_a_huge_file_system_is_capped(monkeypatch, tmp_path):
    """1 % of a 100 TB shared file system (1 TB) is not "running low": the default's share counts up to 4 GiB."""
    import collections

    from sysprof.cli import output

    St = collections.namedtuple("St", "f_blocks f_frsize f_bavail")
    fs = {"st": St(100 * 10 ** 12 // 4096, 4096, 2 * 10 ** 11 // 4096)}  # 100 TB, 200 GB available
    monkeypatch.setattr(output.os, "statvfs", lambda p: fs["st"])
    guard = output._SpaceGuard(str(tmp_path / "t.json"), output.DEFAULT_MIN_FREE)
    assert guard.low() is None
    fs["st"] = St(100 * 10 ** 12 // 4096, 4096, (4 << 30) // 4096 - 1)  # just under 4 GiB available
    assert guard.low() == (((4 << 30) // 4096 - 1) * 4096, 4 << 30)
    fs["st"] = St(10 * 10 ** 9 // 4096, 4096, (200 << 20) // 4096)  # 10 GB: the floor is 256 MiB
    assert guard.low() == (200 << 20, 256 << 20)
