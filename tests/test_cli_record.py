"""The ``sysprof`` command line, run for real in subprocesses: ``record`` of a workload, its exit status and
errors, duration, ring size, process tree."""
from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from sysprof.trace.chrome import read_trace

from cli_support import run_cli, series, event, assert_one_line_error, backing_disk

# --------------------------------------------------------------------------------------------------
# record: a real workload shows up in its trace
# --------------------------------------------------------------------------------------------------

WORKLOAD = textwrap.dedent("""
    import os, sys, time
    print(os.getpid(), flush=True)
    block = b"\\x01" * 200_000_000          # 200 MB, every page touched
    time.sleep(0.3)
    with open(sys.argv[1], "wb") as f:     # 50 MB to disk
        f.write(b"\\x02" * 50_000_000)
        f.flush()
        os.fsync(f.fileno())
    time.sleep(0.3)
    sys.exit(3)
""")


def test_record_workload_shows_in_memory_process_and_disk_channels(tmp_path):
    script = tmp_path / "workload.py"
    script.write_text(WORKLOAD)
    trace = tmp_path / "trace.json"
    proc = run_cli("record", "-q", "-o", trace, "--interval", "5ms", "--memory", "--disk", "--process",
                   "--", sys.executable, script, tmp_path / "data.bin")
    assert proc.returncode == 3, proc.stderr  # the command's exit status
    child_pid = int(proc.stdout.split()[0])

    events = json.loads(trace.read_text())  # closed: strict JSON
    start, stop = event(events, "sysprof start"), event(events, "sysprof stop")
    assert start["args"]["interval_s"] == pytest.approx(0.005)
    assert start["args"]["pid"] == child_pid
    assert stop["args"]["returncode"] == 3
    assert stop["args"]["stats"]["taken"] >= 2  # the first row and the one at the stop (how many more: a benchmark)
    s = series(events)

    # --process follows the command, not the recorder
    proc_events = [e for e in events if e.get("ph") == "C" and e["name"] == "process"]
    assert proc_events and {e["pid"] for e in proc_events} == {child_pid}
    assert child_pid != start["args"]["recorder_pid"]
    rss = [v for _, v in s["process/rss_bytes"] if v is not None]
    assert max(rss) >= 150e6, max(rss)
    assert min(rss) < 100e6  # before the allocation

    # System-wide, only part of the 200 MB shows: pages recycled from the kernel's per-CPU free lists were
    # never counted in MemFree (seen here: +100..130 MB for the 200 MB block on a 2-CPU 6.x VM).
    used = [v for _, v in s["memory/used_bytes"] if v is not None]
    assert max(used) - min(used) >= 50e6, (min(used), max(used))

    disk = backing_disk(tmp_path)
    if disk is None or f"disk/{disk}/write_bytes" not in s:
        pytest.skip(f"{tmp_path} is not on a whole disk listed in /proc/diskstats ({disk})")
    written = 0.0
    for ch, pts in s.items():
        if ch.startswith("disk/") and ch.endswith("/write_bytes"):
            vals = [v for _, v in pts if v is not None]
            written += vals[-1] - vals[0]
    assert written >= 40e6, written
    rate = [v for _, v in s[f"disk/{disk}/write_bytes_per_second"] if v is not None]
    assert max(rate) >= 40e6  # a burst well above 40 MB/s in at least one 5 ms interval


def test_record_gzip_and_duration_without_command(tmp_path):
    trace = tmp_path / "t.json.gz"
    t0 = time.monotonic()
    proc = run_cli("record", "-q", "-o", trace, "--duration", "0.5", "--interval", "10ms")
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - t0 >= 0.5  # its end: duration_reached below
    assert trace.read_bytes()[:2] == b"\x1f\x8b"
    events = json.loads(gzip.decompress(trace.read_bytes()))
    stop = event(events, "sysprof stop")
    assert stop["args"]["duration_reached"] is True
    st = stop["args"]["stats"]
    assert st["taken"] >= 2 and st["dropped"] == 0  # how many in 0.5 s depends on the machine's load: not asserted
    s = series(events)
    assert {"cpu/percent", "memory/used_bytes"} <= set(s)  # default sources
    assert any(ch.startswith("net/") for ch in s)
    assert not any(ch.startswith("process/") for ch in s)


def test_record_with_psutil_backend(tmp_path):
    trace = tmp_path / "t.json"
    proc = run_cli("record", "-q", "-o", trace, "--backend", "psutil", "--memory", "--process", "--",
                   "sh", "-c", "sleep 0.3; exit 5")
    assert proc.returncode == 5, proc.stderr
    events = read_trace(trace)
    assert event(events, "sysprof start")["args"]["backend"] == "psutil"
    s = series(events)
    assert max(v for _, v in s["memory/total_bytes"]) > 100e6 and "process/rss_bytes" in s


def test_record_follows_existing_pid(tmp_path):
    from cli_support import SYSPROF

    # the sleeper lives until the recorder has written its head (a loaded machine starts the CLI slowly); its end
    # then ends the recording
    sleeper = subprocess.Popen(["sleep", "60"])
    trace = tmp_path / "t.json"
    recorder = subprocess.Popen(SYSPROF + ["record", "-q", "-o", str(trace), "--pid", str(sleeper.pid)],
                                stderr=subprocess.PIPE, text=True)  # --process-tree implied
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and recorder.poll() is None and not (
                trace.exists() and "sysprof start" in trace.read_text(errors="replace")):
            time.sleep(0.05)
        time.sleep(0.3)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert recorder.wait(timeout=60) == 0, recorder.stderr.read()
    events = read_trace(trace)
    assert {e["pid"] for e in events if e.get("ph") == "C" and e["name"] == "process_tree"} == {sleeper.pid}
    assert not any(e.get("ph") == "C" and e["name"] == "process" for e in events)  # the tree's slot 0 is it
    # named by its program, as a command is; its command line read from /proc/<pid>/cmdline
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert names[sleeper.pid] == f"sleep (pid {sleeper.pid})"
    start = next(e for e in events if e.get("name") == "sysprof start")
    assert start["args"]["command_line"] == "sleep 60"


# --------------------------------------------------------------------------------------------------
# exit codes and errors
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command, status", [("exit 7", 7), ("exit 0", 0), ("kill -TERM $$", 128 + 15)])
def test_exit_status_is_the_commands(tmp_path, command, status):
    trace = tmp_path / "t.json"
    proc = run_cli("record", "-q", "-o", trace, "--", "sh", "-c", command)
    assert proc.returncode == status, proc.stderr
    stop = event(read_trace(trace), "sysprof stop")
    assert stop["args"]["returncode"] == (-15 if status == 143 else status)


def test_duration_ends_the_command_like_timeout(tmp_path):
    proc = run_cli("record", "-q", "-o", tmp_path / "t.json", "--duration", "0.4", "--", "sleep", "30")
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr  # ended by the duration, not its 30 s sleep
    assert event(read_trace(tmp_path / "t.json"), "sysprof stop")["args"]["duration_reached"] is True


def test_sub_millisecond_interval_gives_fractional_timestamps(tmp_path):
    proc = run_cli("record", "-q", "-o", tmp_path / "t.json", "--cpu", "--interval", "500us", "--duration", "0.3")
    assert proc.returncode == 0, proc.stderr
    events = read_trace(tmp_path / "t.json")
    assert event(events, "sysprof start")["args"]["interval_s"] == pytest.approx(5e-4)
    ts = [e["ts"] for e in events if e.get("ph") == "C"]
    assert ts and all(isinstance(t, float) for t in ts) and any(t != int(t) for t in ts)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_trace_write_failure_still_waits_for_the_command(tmp_path):
    proc = run_cli("record", "--force", "-o", "/dev/full", "--", "sh", "-c", "sleep 0.3; exit 4")
    assert proc.returncode == 4  # the command ran to the end and its status came through
    assert "Traceback" not in proc.stderr and "No space left on device" in proc.stderr


def test_command_not_found_is_127_and_leaves_no_trace(tmp_path):
    trace = tmp_path / "t.json"
    proc = run_cli("record", "-o", trace, "--", "no-such-command-sysprof-xyz", "--flag")
    assert_one_line_error(proc, 127)
    assert proc.stderr == "sysprof: command not found: no-such-command-sysprof-xyz\n"
    assert not trace.exists()


def test_existing_output_needs_force(tmp_path):
    trace = tmp_path / "t.json"
    trace.write_text("precious")
    marker = tmp_path / "ran"
    proc = run_cli("record", "-o", trace, "--", "touch", marker)
    assert_one_line_error(proc, 1)
    assert "--force" in proc.stderr
    assert trace.read_text() == "precious" and not marker.exists()  # checked before the command started

    proc = run_cli("record", "-q", "--force", "-o", trace, "--", "touch", marker)
    assert proc.returncode == 0, proc.stderr
    assert marker.exists()
    json.loads(trace.read_text())


def test_bad_input_loses_nothing(tmp_path):
    """An existing trace survives --force when recording cannot start: a bad argument, a command that cannot be
    run (a script whose interpreter is missing passes the existence checks), or no requested source."""
    trace = tmp_path / "old.json"
    trace.write_text("precious")
    script = tmp_path / "bad-interpreter.sh"
    script.write_text("#!/nonexistent/interpreter\n")
    script.chmod(0o755)
    marker = tmp_path / "ran"
    for argv, rc in [(["--capacity", "1", "--", "touch", marker], 2),
                     (["--interval", "1ms", "--", str(script)], 127),
                     (["--gpu", "--", "touch", marker], 1)]:
        proc = run_cli("record", "--force", "-o", trace, *argv,
                       env=dict(os.environ, SYSPROF_NVML_LIBRARY=str(tmp_path / "no-libnvidia-ml.so.1")))
        assert_one_line_error(proc, rc)
        assert trace.read_text() == "precious", argv
        assert not marker.exists()
    assert sorted(os.listdir(tmp_path)) == ["bad-interpreter.sh", "old.json"]  # nothing else left behind
    new = tmp_path / "new.json"
    assert run_cli("record", "-o", new, "--capacity", "1", "--", "true").returncode == 2
    assert not new.exists()


def test_no_requested_source_available_fails_before_the_command(tmp_path):
    env = dict(os.environ, SYSPROF_NVML_LIBRARY=str(tmp_path / "no-libnvidia-ml.so.1"))
    trace, marker = tmp_path / "t.json", tmp_path / "ran"
    proc = run_cli("record", "--gpu", "-o", trace, "--", "touch", marker, env=env)
    assert_one_line_error(proc, 1)
    assert proc.stderr.startswith("sysprof: no requested source is available: gpu: ")
    assert "no-libnvidia-ml.so.1" in proc.stderr
    assert not trace.exists() and not marker.exists()
    # some available: record them and warn about the rest
    proc = run_cli("record", "--gpu", "--cpu", "-o", trace, "--", "touch", marker, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("sysprof: warning: gpu: ") and marker.exists()
    assert "cpu/percent" in event(read_trace(trace), "sysprof start")["args"]["channels"]


@pytest.mark.parametrize("argv, rc", [
    (["record", "--bogus", "--", "true"], 2),
    (["record", "--interval", "0", "--", "true"], 2),
    (["record", "--interval", "fast", "--", "true"], 2),
    (["record", "-o", "{tmp}/not-a-dir/t.json", "--", "touch", "{tmp}/ran"], 1),
    (["record", "-o", "{tmp}/missing-dir/t.json", "--", "touch", "{tmp}/ran"], 1),
    (["record", "--process", "-o", "{tmp}/t.json"], 2),
    (["record", "--backend", "quantum", "--", "true"], 2),
    (["report", "{tmp}/missing.json"], 1),
    (["report", "{tmp}/not-a-dir"], 1),
    (["repair", "{tmp}/missing.json"], 1),
    (["frobnicate"], 2),
])
def test_errors_are_one_line_without_traceback(tmp_path, argv, rc):
    (tmp_path / "not-a-dir").write_text("a file, not a directory\n")
    proc = run_cli(*[a.format(tmp=tmp_path) for a in argv])
    assert_one_line_error(proc, rc)
    assert not (tmp_path / "ran").exists()


# --------------------------------------------------------------------------------------------------
# QA fixes: exit status on a failed write, ring size, dropped rows, NaN
# --------------------------------------------------------------------------------------------------

@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_failed_trace_write_is_exit_1_when_the_command_succeeded():
    proc = run_cli("record", "-q", "-f", "-o", "/dev/full", "--", "sleep", "0.3")
    assert proc.returncode == 1
    assert "No space left on device" in proc.stderr and "the trace is incomplete" in proc.stderr
    help_text = run_cli("record", "--help").stdout
    assert "otherwise 1 if the trace could not be written completely" in " ".join(help_text.split())


def test_ring_capacity_is_about_four_seconds_of_samples(tmp_path):
    from sysprof.cli.record import _default_capacity

    assert _default_capacity(1e-3) == 4000 and _default_capacity(1e-4) == 40000
    assert _default_capacity(0.01) == 1024 and _default_capacity(1.0) == 1024  # at least 1024 rows
    assert _default_capacity(1e-6) == 65536  # never more than the sampler's old default
    proc = run_cli("record", "-q", "-o", tmp_path / "a.json", "--cpu", "--interval", "1ms", "--duration", "0.2")
    assert proc.returncode == 0, proc.stderr
    assert event(read_trace(tmp_path / "a.json"), "sysprof start")["args"]["capacity"] == 4000
    proc = run_cli("record", "-q", "-o", tmp_path / "b.json", "--cpu", "--capacity", "5000", "--duration", "0.2")
    assert proc.returncode == 0, proc.stderr
    assert event(read_trace(tmp_path / "b.json"), "sysprof start")["args"]["capacity"] == 5000


def test_summary_counts_written_samples_not_dropped_ones(tmp_path):
    trace = tmp_path / "t.json"
    proc = run_cli("record", "-o", trace, "--cpu", "--capacity", "2", "--interval", "100us", "--duration", "0.5")
    assert proc.returncode == 0, proc.stderr
    stop = event(read_trace(trace), "sysprof stop")["args"]
    taken, dropped, written = stop["stats"]["taken"], stop["stats"]["dropped"], stop["samples_written"]
    assert dropped > 0 and written == taken - dropped and written < taken / 10
    assert f": {written:,} samples in " in proc.stderr and f"{dropped:,} dropped" in proc.stderr
    assert "raise --capacity" in proc.stderr


def test_recorded_counters_have_no_null(tmp_path):
    trace = tmp_path / "t.json"
    proc = run_cli("record", "-q", "-o", trace, "--cpu", "--per-cpu", "--memory", "--interval", "2ms",
                   "--duration", "0.3")
    assert proc.returncode == 0, proc.stderr
    events = json.loads(trace.read_text())
    counters = [e for e in events if e.get("ph") == "C" and e["name"] != "sysprof"]
    assert counters and all(v is not None for e in counters for v in e["args"].values())
    assert any(e["name"] == "cpu/0" for e in counters)


SPAWN_TWO_BUSY = textwrap.dedent("""
    import subprocess, sys, time
    kids = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    time.sleep(1.0)
    for k in kids:
        k.kill()
        k.wait()
""")


def test_record_process_tree_follows_the_commands_children(tmp_path):
    trace = tmp_path / "tree.json"
    proc = run_cli("record", "-q", "-o", trace, "--interval", "10ms", "--process-tree",
                   "--", sys.executable, "-c", SPAWN_TWO_BUSY)
    assert proc.returncode == 0, proc.stderr
    events = json.loads(trace.read_text())
    start = event(events, "sysprof start")
    s = series(events)
    n = [v for _, v in s["process_tree/num_processes"] if v is not None]
    assert max(n) >= 3, n
    # the counters are attributed to the followed command, not the recorder
    tree = [e for e in events if e.get("ph") == "C" and e["name"] == "process_tree"]
    assert tree and {e["pid"] for e in tree} == {start["args"]["pid"]} != {start["args"]["recorder_pid"]}
    assert not any(c.startswith("cpu/") for c in s)  # only the source asked for


def test_record_process_tree_needs_a_target():
    assert_one_line_error(run_cli("record", "--process-tree", "--duration", "0.1"), rc=2)


def test_record_follows_the_commands_tree_by_default(tmp_path):
    # no source flag and a command: the default sources and the command's process tree (its two children found),
    # its run delay among the channels, the counters on the command's track; --process and the sources --all
    # adds stay off
    trace = tmp_path / "default.json"
    proc = run_cli("record", "-q", "-o", trace, "--interval", "10ms", "--", sys.executable, "-c", SPAWN_TWO_BUSY)
    assert proc.returncode == 0, proc.stderr
    events = json.loads(trace.read_text())
    start = event(events, "sysprof start")
    s = series(events)
    assert max(v for _, v in s["process_tree/num_processes"] if v is not None) >= 3
    assert {"cpu/percent", "memory/used_bytes", "process_tree/cpu_seconds_total",
            "process_tree/run_delay_seconds_total", "process_tree/procs_blocked"} <= set(s)
    assert any(c.startswith("disk/") for c in s) and any(c.startswith("net/") for c in s)
    assert not any(c.startswith(("process/", "pressure/", "load/", "vmstat/", "cgroup/")) for c in s)
    tree = [e for e in events if e.get("ph") == "C" and e["name"] == "process_tree"]
    assert tree and {e["pid"] for e in tree} == {start["args"]["pid"]} != {start["args"]["recorder_pid"]}


@pytest.mark.parametrize("flags, on, off", [
    (["--all"], ("cpu/", "process/", "process_tree/", "load/"), ()),  # --all adds every source to the tree
    (["--cpu"], ("cpu/",), ("process/", "process_tree/", "memory/")),  # a named source replaces the defaults
])
def test_record_all_adds_sources_and_a_named_one_replaces_the_defaults(tmp_path, flags, on, off):
    trace = tmp_path / "t.json"
    proc = run_cli("record", "-q", "-o", trace, *flags, "--", sys.executable, "-c", "import time; time.sleep(0.3)")
    assert proc.returncode == 0, proc.stderr
    s = series(json.loads(trace.read_text()))
    for prefix in on:
        assert any(c.startswith(prefix) for c in s), (prefix, sorted(s)[:20])
    for prefix in off:
        assert not any(c.startswith(prefix) for c in s), prefix


@pytest.mark.parametrize("where", ["head", "members", "errors"])
def test_a_failure_inside_the_recorder_never_orphans_the_command(tmp_path, monkeypatch, capsys, where):
    """Any failure inside the recorder (issue 26, item 3: a name that did not decode) stops the recording only:
    the stop event is written, the trace closed, the command waited for and its status returned first."""
    import subprocess as sp

    from sysprof.cli import main
    from sysprof.cli import record as record_mod
    from sysprof.sampling.sampler import Sampler

    def boom(*a, **k):
        raise UnicodeDecodeError("utf-8", b"\xd0", 0, 1, "unexpected end of data")

    if where == "head":
        monkeypatch.setattr(record_mod, "rank_info", boom)
    else:
        monkeypatch.setattr(Sampler, where, property(boom))
    flag = tmp_path / "done"
    trace = tmp_path / "t.json"
    rc = main(["record", "-q", "--cpu", "-o", str(trace), "--", "sh", "-c", f"sleep 0.3; touch {flag}; exit 5"])
    assert rc == 5 and flag.exists()  # waited for to its end; its status first
    events = read_trace(trace)  # closed
    stop = [e for e in events if e.get("name") == "sysprof stop"]
    assert len(stop) == 1  # with the command's status where it had ended (a failure at the head closes at once)
    assert stop[0]["args"].get("returncode") == (None if where == "head" else 5)
    if where == "errors":  # said, and the recording went on
        assert stop[0]["args"]["errors"] == {"recorder": "the sampler's errors could not be read: "
                                             "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xd0 in position 0: "
                                             "unexpected end of data"}
        assert "failure" not in stop[0]["args"]
    else:
        assert "UnicodeDecodeError" in capsys.readouterr().err
        assert stop[0]["args"]["failure"].startswith("UnicodeDecodeError")
    assert not [p for p in sp.run(["pgrep", "-f", f"touch {flag}"], capture_output=True, text=True).stdout.split()]
