"""The ``sysprof`` command line, run for real in subprocesses (``python -m sysprof ...``)."""
from __future__ import annotations

import gzip
import json
import os
import platform
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from sysprof.trace.chrome import ChromeTraceWriter, read_trace
from sysprof.cli.common import parse_time
from sysprof.report.units import infer_unit

# The installed console script, as a user runs it. (`python -m sysprof` from the checkout would put the
# source tree, which has no compiled extension, first on sys.path.)
_SCRIPT = os.path.join(os.path.dirname(sys.executable), "sysprof")
SYSPROF = [_SCRIPT] if os.path.exists(_SCRIPT) else [sys.executable, "-m", "sysprof"]


def run_cli(*args, timeout=60, **kw):
    return subprocess.run(SYSPROF + [str(a) for a in args], capture_output=True, text=True, timeout=timeout, **kw)


def series(events):
    """channel -> [(ts, value)] from the counter events of a trace (the sysprof stats counter left out)."""
    out = {}
    for ev in events:
        if ev.get("ph") == "C" and ev.get("name") != "sysprof":
            for key, v in ev["args"].items():
                out.setdefault(f"{ev['name']}/{key}", []).append((ev["ts"], v))
    return out


def event(events, name):
    found = [e for e in events if e.get("name") == name and e.get("ph") == "i"]
    assert len(found) == 1, f"{name}: {len(found)} events"
    return found[0]


def assert_one_line_error(proc, rc=None):
    assert proc.returncode != 0
    if rc is not None:
        assert proc.returncode == rc, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("sysprof: "), proc.stderr


def backing_disk(path):
    """The whole disk (as named in /proc/diskstats) holding ``path``, or None (tmpfs, overlay, ...)."""
    st = os.stat(path)
    dev = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    if not os.path.exists(dev):
        return None
    real = os.path.realpath(dev)
    if os.path.exists(os.path.join(real, "partition")):
        real = os.path.dirname(real)
    return os.path.basename(real).replace("!", "/")


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def trace_has(path, name, ph):
    try:
        return any(e.get("name") == name and e.get("ph") == ph for e in read_trace(path))
    except (OSError, ValueError):
        return False


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
    assert stop["args"]["stats"]["taken"] >= 100  # >= 0.6 s of sleeps at 200 Hz
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
    assert 0.5 <= time.monotonic() - t0 < 10
    assert trace.read_bytes()[:2] == b"\x1f\x8b"
    events = json.loads(gzip.decompress(trace.read_bytes()))
    stop = event(events, "sysprof stop")
    assert stop["args"]["duration_reached"] is True
    assert 25 <= stop["args"]["stats"]["taken"] <= 60
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
    sleeper = subprocess.Popen(["sleep", "0.8"])
    try:
        trace = tmp_path / "t.json"
        proc = run_cli("record", "-q", "-o", trace, "--pid", sleeper.pid)  # --process implied
        assert proc.returncode == 0, proc.stderr
    finally:
        sleeper.kill()
        sleeper.wait()
    events = read_trace(trace)
    assert {e["pid"] for e in events if e.get("ph") == "C" and e["name"] == "process"} == {sleeper.pid}


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
    t0 = time.monotonic()
    proc = run_cli("record", "-q", "-o", tmp_path / "t.json", "--duration", "0.4", "--", "sleep", "30")
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr
    assert time.monotonic() - t0 < 10
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
    for argv, rc in [(["--capacity", "1", "--", "touch", marker], 1),
                     (["--interval", "1ms", "--", str(script)], 127),
                     (["--gpu", "--", "touch", marker], 1)]:
        proc = run_cli("record", "--force", "-o", trace, *argv,
                       env=dict(os.environ, SYSPROF_NVML_LIBRARY=str(tmp_path / "no-libnvidia-ml.so.1")))
        assert_one_line_error(proc, rc)
        assert trace.read_text() == "precious", argv
        assert not marker.exists()
    assert sorted(os.listdir(tmp_path)) == ["bad-interpreter.sh", "old.json"]  # nothing else left behind
    new = tmp_path / "new.json"
    assert run_cli("record", "-o", new, "--capacity", "1", "--", "true").returncode == 1
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
# signals
# --------------------------------------------------------------------------------------------------

HANDLER_CHILD = textwrap.dedent("""
    import signal, sys, time
    def handler(signum, frame):
        print("got", signum, flush=True)
        sys.exit(42)
    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    print("ready", flush=True)
    time.sleep(30)
""")


def _default_sigint():
    # A test runner started as a background job of a script inherits SIGINT ignored (and so would the
    # recorder, which then keeps it ignored, as a nohup'ed program should): give it the default.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_recorder(trace, *command, stdout=subprocess.PIPE):
    # its own session: no controlling terminal, and the whole group can be cleaned up
    return subprocess.Popen(SYSPROF + ["record", "-q", "-o", str(trace), "--interval", "5ms", "--", *command],
                            stdout=stdout, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=_default_sigint)


def _cleanup(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_is_forwarded_and_trace_written(tmp_path, sig):
    trace = tmp_path / "t.json"
    proc = _start_recorder(trace, sys.executable, "-c", HANDLER_CHILD)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=20)
    finally:
        _cleanup(proc)
    assert proc.returncode == 42, err  # the child handled it and chose its status
    assert f"got {int(sig)}" in out
    events = json.loads(trace.read_text())
    stop = event(events, "sysprof stop")
    assert stop["args"]["signals"] == [sig.name]
    assert stop["args"]["returncode"] == 42
    assert len(series(events)["cpu/percent"]) > 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_child_killed_by_forwarded_signal_gives_128_plus_signal(tmp_path, sig):
    trace = tmp_path / "t.json"
    proc = _start_recorder(trace, "sleep", "30", stdout=subprocess.DEVNULL)
    try:
        wait_for(lambda: trace_has(trace, "sysprof start", "i"), 10, "the recording to start")
        proc.send_signal(sig)
        proc.wait(timeout=20)
    finally:
        _cleanup(proc)
    assert proc.returncode == 128 + int(sig)
    assert event(json.loads(trace.read_text()), "sysprof stop")["args"]["returncode"] == -int(sig)


def test_sigint_stops_a_recording_without_command(tmp_path):
    trace = tmp_path / "t.json"
    proc = subprocess.Popen(SYSPROF + ["record", "-q", "-o", str(trace), "--duration", "60"],
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=_default_sigint)
    try:
        wait_for(lambda: trace_has(trace, "sysprof start", "i"), 10, "the recording to start")
        time.sleep(0.2)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
        assert time.monotonic() - t0 < 2
    finally:
        _cleanup(proc)
    assert proc.returncode == 0, proc.stderr.read()
    stop = event(json.loads(trace.read_text()), "sysprof stop")
    assert stop["args"]["signals"] == ["SIGINT"] and stop["args"]["duration_reached"] is False


def _strict_load(path):
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)


@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_killed_recorder_leaves_readable_trace_that_repair_closes(tmp_path, name):
    trace = tmp_path / name
    proc = _start_recorder(trace, "sleep", "30", stdout=subprocess.DEVNULL)
    try:
        # the stats counter is written at each flush (at least every second)
        wait_for(lambda: trace_has(trace, "sysprof", "C"), 10, "the first flush")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        _cleanup(proc)
    assert proc.returncode == -signal.SIGKILL
    with pytest.raises((ValueError, EOFError)):
        _strict_load(trace)  # never closed
    events = read_trace(trace)
    assert not any(e.get("name") == "sysprof stop" for e in events)
    assert len(series(events)["cpu/percent"]) >= 1

    fixed = run_cli("repair", trace)
    assert fixed.returncode == 0, fixed.stderr
    n = len(_strict_load(trace))
    assert n >= len(events) and f"{n:,} events" in fixed.stdout

    rep = run_cli("report", "--json", trace)
    assert rep.returncode == 0, rep.stderr
    summary = json.loads(rep.stdout)
    assert summary["truncated"] is True
    assert summary["dropped"] == 0 and summary["taken"] >= 100  # >= 1 s at 200 Hz, from the last flush
    assert summary["channels"]["cpu/percent"]["max"] <= 100


# --------------------------------------------------------------------------------------------------
# report on a known trace
# --------------------------------------------------------------------------------------------------

T0 = 1_700_000_000_000_000  # µs


@pytest.fixture
def known_trace(tmp_path):
    """101 rows at 10 ms: cpu/percent = 0..100; a disk rate written only when it changes
    (0 for rows 0-89, 1e6 for rows 90-94, 0 for rows 95-100); memory constant."""
    path = tmp_path / "known.json"
    channels = ["cpu/percent", "memory/used_bytes", "disk/sda/write_bytes_per_second", "net/eth0/bytes_recv"]
    w = ChromeTraceWriter(path)
    w.write({"name": "sysprof start", "ph": "i", "s": "g", "ts": T0, "pid": 1, "tid": 0,
             "args": {"version": "test", "command_line": "train", "interval_s": 0.01, "backend": "native",
                      "channels": channels, "errors": {"gpu": "no NVML"}}})
    for i in range(101):
        ts = T0 + i * 10_000
        w.write({"name": "cpu", "ph": "C", "ts": ts, "pid": 1, "tid": 0, "args": {"percent": float(i)}})
        if i in (0, 100):
            w.write({"name": "memory", "ph": "C", "ts": ts, "pid": 1, "tid": 0, "args": {"used_bytes": 2.5e9}})
        if i in (0, 90, 95, 100):
            w.write({"name": "disk/sda", "ph": "C", "ts": ts, "pid": 1, "tid": 0,
                     "args": {"write_bytes_per_second": 1e6 if i == 90 else 0.0}})
        w.write({"name": "net/eth0", "ph": "C", "ts": ts, "pid": 1, "tid": 0,
                 "args": {"bytes_recv": float("nan") if i == 50 else 1000.0 * i}})
    w.write({"name": "sysprof stop", "ph": "i", "s": "g", "ts": T0 + 1_010_000, "pid": 1, "tid": 0,
             "args": {"stats": {"taken": 104, "dropped": 3, "missed_deadlines": 5, "sample_ns_mean": 2000.0,
                                "sample_ns_p99": 5000.0}, "returncode": 0}})
    w.close()
    return path


def test_report_json_values(known_trace):
    proc = run_cli("report", "--json", known_trace)
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    assert s["samples"] == 101 and s["dropped"] == 3 and s["missed_deadlines"] == 5
    assert s["duration_s"] == pytest.approx(1.01)
    assert s["effective_rate_hz"] == pytest.approx(101 / 1.01)
    assert s["interval_s"] == 0.01 and s["truncated"] is False and s["errors"] == {"gpu": "no NVML"}
    cpu = s["channels"]["cpu/percent"]
    assert cpu["unit"] == "%"
    assert (cpu["min"], cpu["mean"], cpu["p50"], cpu["p95"], cpu["max"]) == (0, pytest.approx(50), 50, 95, 100)
    disk = s["channels"]["disk/sda/write_bytes_per_second"]
    assert disk["unit"] == "B/s" and disk["events"] == 4
    # time-weighted: 1e6 held for 5 of 101 intervals
    assert disk["mean"] == pytest.approx(5e6 / 101) and disk["p50"] == 0 and disk["p95"] == 0
    assert disk["max"] == 1e6
    mem = s["channels"]["memory/used_bytes"]
    assert (mem["unit"], mem["min"], mem["mean"], mem["max"]) == ("B", 2.5e9, pytest.approx(2.5e9), 2.5e9)
    net = s["channels"]["net/eth0/bytes_recv"]
    assert net["unit"] == "B" and net["valid"] == 100 and net["max"] == 100_000 and net["first"] == 0


def test_report_table(known_trace):
    proc = run_cli("report", known_trace)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "effective rate 100.0 Hz" in out and "interval 10 ms" in out
    assert "dropped:    3" in out and "missed deadlines: 5" in out
    assert "unavailable: gpu: no NVML" in out  # no gpu channel at all
    assert "(interval 10 ms = 100 Hz)" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(("cpu/", "memory/"))}
    assert rows["cpu/percent"][1:] == ["%", "0.0", "50.0", "50.0", "95.0", "100.0"]
    assert rows["memory/used_bytes"][1:4] == ["B", "2.50", "GB"]  # decimal, as in plots: GB = 1e9 B


def test_report_units_rate_and_source_problems(tmp_path):
    """Hz with significant digits, clocks scaled like bytes (decimal), and an error of a source that has channels
    (one refused metric) reported as a problem, not as the source being unavailable."""
    from sysprof.report.table import format_si, format_value, human_bytes

    path = tmp_path / "slow.json"
    w = ChromeTraceWriter(path)
    w.write({"name": "sysprof start", "ph": "i", "s": "g", "ts": T0, "pid": 1, "tid": 0,
             "args": {"interval_s": 2.0, "channels": ["gpu/0/sm_clock_hz", "gpu/0/utilization_percent"],
                      "errors": {"gpu": "gpu 0: power_watts: NOT_SUPPORTED", "pressure": "no /proc/pressure"}}})
    for i in range(3):
        w.write({"name": "gpu/0", "ph": "C", "ts": T0 + i * 2_000_000, "pid": 1, "tid": 0,
                 "args": {"sm_clock_hz": 1103157481.0, "utilization_percent": 50.0}})
    w.close()
    proc = run_cli("report", path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "(interval 2 s = 0.5 Hz)" in out
    assert "problems: gpu: gpu 0: power_watts: NOT_SUPPORTED" in out and "unavailable: gpu" not in out
    assert "unavailable: pressure: no /proc/pressure" in out
    row = next(line.split() for line in out.splitlines() if line.startswith("gpu/0/sm_clock_hz"))
    assert row[1:4] == ["Hz", "1.10", "GHz"]
    assert json.loads(run_cli("report", "--json", path).stdout)["unavailable"] == ["pressure"]
    assert (format_si(0.5, "Hz"), format_si(999.996, "B"), format_si(-1.5e6, "B/s")) == ("0.5 Hz", "1.00 kB", "-1.50 MB/s")
    assert human_bytes(2.5e9) == format_value(2.5e9, "B") == "2.50 GB" and format_value(512.0, "B") == "512 B"


def test_plot_title_is_the_first_line_of_the_command(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sysprof.report.model import TraceData
    from sysprof.report.plot import plot_trace

    events = [{"name": "cpu", "ph": "C", "ts": T0 + i * 10_000, "args": {"percent": float(i % 7)}} for i in range(50)]
    figures = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig))
    plot_trace(TraceData(events), str(tmp_path / "p.png"), title="python -c 'import x\nx.run()\n'")
    assert figures[-1]._suptitle.get_text().startswith("sysprof: python -c 'import x  (")
    plot_trace(TraceData(events), str(tmp_path / "p.png"), title="python train.py " + "--flag " * 40)
    title = figures[-1]._suptitle.get_text()
    assert "\n" not in title and title.split("  (")[0].endswith("...") and len(title.split("  (")[0]) <= 90


def test_report_plot_writes_png(known_trace, tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "plot.png"
    proc = run_cli("report", known_trace, "--plot", png)
    assert proc.returncode == 0, proc.stderr
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    img = matplotlib.image.imread(png)
    assert img.shape[0] >= 300 and img.shape[1] >= 800  # a readable figure, not a thumbnail
    assert f"plot: {png} (3 series)" in proc.stdout  # cpu, disk rate, net; constant memory left out


def test_report_plot_without_matplotlib_is_one_line(known_trace, tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from sysprof.cli import main\n"
            f"sys.exit(main(['report', {str(known_trace)!r}, '--plot', {str(tmp_path / 'p.png')!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert_one_line_error(proc, 1)
    assert "pip install sysprof[plot]" in proc.stderr


# --------------------------------------------------------------------------------------------------
# info, version, the live status line, parsing helpers
# --------------------------------------------------------------------------------------------------

def test_info():
    import sysprof

    proc = run_cli("info")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    backend = sysprof.Sampler(interval=0.01).backend
    assert f"backend:  {backend}" in out
    assert platform.release() in out and f"{os.cpu_count()} online" in out
    assert "/proc/stat" in out and "readable" in out
    v2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
    assert ("cgroup:   v2" in out) == v2

    info = json.loads(run_cli("info", "--json").stdout)
    assert info["backend"] == backend and info["cpu_count"] == os.cpu_count()
    assert info["sources"]["cpu"]["available"] is True and info["sources"]["cpu"]["channels"] >= 9
    assert info["proc_files"]["/proc/stat"]["readable"] is True
    assert isinstance(info["nvml"]["found"], bool)
    gpu = info["sources"]["gpu"]
    assert gpu["available"] or gpu["reason"]


def test_version_and_help():
    import sysprof

    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"sysprof {sysprof.__version__}"
    proc = run_cli("record", "--help")
    assert proc.returncode == 0 and "--interval" in proc.stdout and "--process" in proc.stdout


def test_status_line_only_on_a_terminal(tmp_path):
    import pty

    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(SYSPROF + ["record", "-o", str(tmp_path / "a.json"), "--duration", "1.2"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the other side closed
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=20)
    finally:
        os.close(master)
    tty_out = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0
    assert "\r" in tty_out and " samples " in tty_out and " dropped " in tty_out

    proc = run_cli("record", "-o", tmp_path / "b.json", "--duration", "1.2")  # stderr is a pipe
    assert proc.returncode == 0 and "\r" not in proc.stderr
    assert proc.stderr.startswith("sysprof: wrote ") and proc.stderr.count("\n") == 1
    proc = run_cli("record", "-q", "-o", tmp_path / "c.json", "--duration", "0.3")
    assert proc.returncode == 0 and proc.stderr == ""


def test_parse_time_and_units():
    assert parse_time("1ms") == pytest.approx(1e-3)
    assert parse_time("500us") == pytest.approx(5e-4)
    assert parse_time("0.5s") == 0.5 and parse_time("2") == 2.0 and parse_time("1m") == 60.0
    for bad in ("0", "-1ms", "fast", "1 parsec", ""):
        with pytest.raises(Exception):
            parse_time(bad)
    assert infer_unit("disk/sda/write_bytes_per_second") == "B/s"
    assert infer_unit("net/eth0/bytes_recv") == "B" and infer_unit("net/eth0/packets_sent_per_second") == "/s"
    assert infer_unit("cpu/3/percent") == "%" and infer_unit("cpu/user_percent") == "%"
    assert infer_unit("disk/sda/busy_time_seconds_per_second") == "s/s"
    assert infer_unit("process/cpu_seconds_total") == "s" and infer_unit("load/1m") == ""
    assert infer_unit("gpu/0/power_watts") == "W" and infer_unit("gpu/0/temperature_celsius") == "\u00b0C"


# --------------------------------------------------------------------------------------------------
# QA fixes: bench, exit status on a failed write, output names, ring size, NaN, foreign traces, plots
# --------------------------------------------------------------------------------------------------

def test_bench_runs_the_checkout_in_the_current_directory(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "sysprof"\n')
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "run.py").write_text("import sys; print('stub', sys.argv[1:]); sys.exit(5)\n")
    proc = run_cli("bench", "--quick", "-x", cwd=tmp_path)
    assert proc.returncode == 5, proc.stderr
    assert proc.stdout.strip() == "stub ['--quick', '-x']"


def test_bench_without_a_checkout_is_one_line(tmp_path, monkeypatch, capsys):
    import sysprof.cli as cli
    import sysprof.cli.commands as commands

    other = tmp_path / "other"  # another project's benchmarks/run.py is not sysprof's
    (other / "benchmarks").mkdir(parents=True)
    (other / "benchmarks" / "run.py").write_text("raise SystemExit('must not run')\n")
    (other / "pyproject.toml").write_text('[project]\nname = "other"\n')
    monkeypatch.setattr(commands, "_PACKAGE_PARENT", tmp_path / "site-packages")  # as after `pip install .`
    monkeypatch.chdir(other)
    assert cli.main(["bench", "--quick"]) == 2
    err = capsys.readouterr().err
    assert err == f"sysprof: bench needs a source checkout (benchmarks/run.py not found in {other})\n"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_failed_trace_write_is_exit_1_when_the_command_succeeded():
    proc = run_cli("record", "-q", "-f", "-o", "/dev/full", "--", "sleep", "0.3")
    assert proc.returncode == 1
    assert "No space left on device" in proc.stderr and "the trace is incomplete" in proc.stderr
    help_text = run_cli("record", "--help").stdout
    assert "otherwise 1 if the trace could not be written completely" in " ".join(help_text.split())


def test_default_output_names_never_collide(tmp_path):
    # every name of this second and the next few is taken: sysprof must add -1, -2, ... and not overwrite
    now = time.time()
    taken = {time.strftime("sysprof-%Y%m%d-%H%M%S.json", time.localtime(now + d)) for d in range(-1, 8)}
    for name in taken:
        (tmp_path / name).write_text("precious")
    procs = [subprocess.Popen(SYSPROF + ["record", "-q", "--", "true"], cwd=tmp_path, stderr=subprocess.PIPE,
                              text=True) for _ in range(3)]
    for p in procs:
        assert p.wait(timeout=30) == 0, p.stderr.read()
    names = set(os.listdir(tmp_path))
    assert all((tmp_path / n).read_text() == "precious" for n in taken)
    new = names - taken
    assert len(new) == 3 and all(n.startswith("sysprof-") and n.endswith(".json") for n in new), new
    assert all(n[:-len(".json")].rsplit("-", 1)[-1] in ("1", "2", "3") for n in new), new
    for n in new:
        event(json.loads((tmp_path / n).read_text()), "sysprof stop")


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


def test_output_directory_and_stdout_are_refused(tmp_path):
    marker = tmp_path / "ran"
    for extra in ([], ["--force"]):
        proc = run_cli("record", *extra, "-o", tmp_path, "--", "touch", marker)
        assert_one_line_error(proc, 2)
        assert proc.stderr == f"sysprof: output is a directory: {tmp_path}\n"
    proc = run_cli("record", "-o", "-", "--", "touch", marker, cwd=tmp_path)
    assert_one_line_error(proc, 2)
    assert "writing to stdout is not supported" in proc.stderr
    assert not marker.exists() and not (tmp_path / "-").exists()


def test_gzip_suffix_is_case_insensitive(tmp_path):
    trace = tmp_path / "x.JSON.GZ"
    proc = run_cli("record", "-q", "-o", trace, "--cpu", "--duration", "0.2")
    assert proc.returncode == 0, proc.stderr
    assert trace.read_bytes()[:2] == b"\x1f\x8b"
    event(json.loads(gzip.decompress(trace.read_bytes())), "sysprof stop")
    assert run_cli("report", trace).returncode == 0


def test_report_channel_filter_without_match_and_smooth_without_plot(known_trace):
    proc = run_cli("report", known_trace, "-k", "nomatch")
    assert_one_line_error(proc, 1)
    assert proc.stderr.startswith("sysprof: no channel matches 'nomatch'")
    proc = run_cli("report", known_trace, "--smooth", "100ms")
    assert_one_line_error(proc, 2)
    assert "--smooth" in proc.stderr and "--plot" in proc.stderr


def test_summary_counts_written_samples_not_dropped_ones(tmp_path):
    trace = tmp_path / "t.json"
    proc = run_cli("record", "-o", trace, "--cpu", "--capacity", "2", "--interval", "100us", "--duration", "0.5")
    assert proc.returncode == 0, proc.stderr
    stop = event(read_trace(trace), "sysprof stop")["args"]
    taken, dropped, written = stop["stats"]["taken"], stop["stats"]["dropped"], stop["samples_written"]
    assert dropped > 0 and written == taken - dropped and written < taken / 10
    assert f": {written:,} samples in " in proc.stderr and f"{dropped:,} dropped" in proc.stderr
    assert "raise --capacity" in proc.stderr


STUBBORN_CHILD = textwrap.dedent("""
    import signal, sys, time
    for name in sys.argv[1:]:
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    print("ready", flush=True)
    time.sleep(30)
""")


@pytest.mark.parametrize("ignored, sigints, status, sent", [
    (["SIGINT"], 2, 128 + signal.SIGTERM, ["SIGINT", "SIGTERM"]),
    (["SIGINT", "SIGTERM"], 3, 128 + signal.SIGKILL, ["SIGINT", "SIGTERM", "SIGKILL"]),
])
def test_repeated_sigint_escalates_to_sigterm_then_sigkill(tmp_path, ignored, sigints, status, sent):
    trace = tmp_path / "t.json"
    proc = _start_recorder(trace, sys.executable, "-c", STUBBORN_CHILD, *ignored)
    try:
        assert proc.stdout.readline().strip() == "ready"
        for _ in range(sigints):
            proc.send_signal(signal.SIGINT)
            time.sleep(0.3)
        proc.wait(timeout=10)
    finally:
        _cleanup(proc)
    assert proc.returncode == status, proc.stderr.read()
    stop = event(json.loads(trace.read_text()), "sysprof stop")["args"]
    assert stop["signals"] == ["SIGINT"] * sigints and stop["signals_sent"] == sent
    assert stop["returncode"] == 128 - status


def test_duration_kills_a_command_that_ignores_sigterm(tmp_path):
    trace = tmp_path / "t.json"
    t0 = time.monotonic()
    proc = run_cli("record", "-q", "-o", trace, "--duration", "0.3", "--kill-after", "0.5", "--",
                   sys.executable, "-c", STUBBORN_CHILD, "SIGTERM", timeout=30)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 128 + signal.SIGKILL, proc.stderr
    assert 0.8 <= elapsed < 10
    stop = event(read_trace(trace), "sysprof stop")["args"]
    assert stop["returncode"] == -signal.SIGKILL and stop["duration_reached"] is True
    assert stop["signals_sent"] == ["SIGTERM", "SIGKILL"]


class _Batch:
    def __init__(self, t0_ns, rows):
        import numpy as np

        self.values = np.asarray(rows, dtype=np.float64)
        self.timestamps_ns = np.arange(len(rows), dtype=np.int64) * 1_000_000 + t0_ns

    def __len__(self):
        return len(self.values)


def test_event_builder_leaves_nan_out_and_marks_where_values_end():
    from sysprof.trace.tracks import EventBuilder

    nan = float("nan")
    b = EventBuilder(["cpu/percent", "cpu/user_percent", "cpu/0/percent", "cpu/1/percent"], system_pid=1)
    ev = b.events(_Batch(0, [[nan, nan, nan, 5.0],     # cpu and cpu/0 unknown: no event
                             [10.0, nan, nan, 5.0],    # cpu known, user_percent still unknown
                             [10.0, nan, nan, 5.0],    # nothing changed (NaN equals NaN)
                             [10.0, 2.0, nan, nan]]))  # cpu/1 turns unknown: an empty event ends its 5.0
    ev += b.events(_Batch(4_000_000, [[10.0, 2.0, nan, nan], [10.0, 2.0, nan, nan]]))
    got = [(e["ts"], e["name"], e["args"]) for e in ev + b.finish()]
    assert got == [(0, "cpu/1", {"percent": 5.0}),
                   (1000, "cpu", {"percent": 10.0}),
                   (3000, "cpu", {"percent": 10.0, "user_percent": 2.0}),
                   (3000, "cpu/1", {}),
                   (5000, "cpu", {"percent": 10.0, "user_percent": 2.0})]  # finish: the last row
    assert b.rows == 6


def test_event_builder_leaves_infinity_out_like_nan():
    """cgroup/memory_max_bytes reads +inf for "max": left out (the one counter_args rule), never null."""
    from sysprof.trace.tracks import EventBuilder
    from sysprof.trace.chrome import encode_event

    inf = float("inf")
    b = EventBuilder(["cgroup/memory_current_bytes", "cgroup/memory_max_bytes", "x/only_inf"], system_pid=1)
    ev = b.events(_Batch(0, [[5.0, inf, inf], [5.0, 8.0, -inf], [5.0, inf, inf]]))
    got = [(e["ts"], e["name"], e["args"]) for e in ev]
    assert got == [(0, "cgroup", {"memory_current_bytes": 5.0}),
                   (1000, "cgroup", {"memory_current_bytes": 5.0, "memory_max_bytes": 8.0}),
                   (2000, "cgroup", {"memory_current_bytes": 5.0})]
    assert all("null" not in encode_event(e) for e in ev)


def test_recorded_counters_have_no_null(tmp_path):
    trace = tmp_path / "t.json"
    proc = run_cli("record", "-q", "-o", trace, "--cpu", "--per-cpu", "--memory", "--interval", "2ms",
                   "--duration", "0.3")
    assert proc.returncode == 0, proc.stderr
    events = json.loads(trace.read_text())
    counters = [e for e in events if e.get("ph") == "C" and e["name"] != "sysprof"]
    assert counters and all(v is not None for e in counters for v in e["args"].values())
    assert any(e["name"] == "cpu/0" for e in counters)


def test_report_does_not_hold_a_value_across_an_unknown_period(tmp_path):
    # cpu/0: 50 for 0.5 s, unknown (an event without the key) for 0.4 s, then 100 for one 0.1 s interval;
    # memory: a = 1 throughout, b = 4 until an event without b at 0.5 s
    path = tmp_path / "gap.json"
    w = ChromeTraceWriter(path)
    w.write({"name": "sysprof start", "ph": "i", "s": "g", "ts": T0, "pid": 1, "tid": 0,
             "args": {"interval_s": 0.1, "channels": ["cpu/0/percent", "memory/a", "memory/b"]}})
    for ts, cpu, mem in [(0, {"percent": 50.0}, {"a": 1.0, "b": 4.0}), (500_000, {}, {"a": 1.0}),
                         (900_000, {"percent": 100.0}, {"a": 1.0})]:
        w.write({"name": "cpu/0", "ph": "C", "ts": T0 + ts, "pid": 1, "tid": 0, "args": cpu})
        w.write({"name": "memory", "ph": "C", "ts": T0 + ts, "pid": 1, "tid": 0, "args": mem})
    w.write({"name": "sysprof stop", "ph": "i", "s": "g", "ts": T0 + 1_000_000, "pid": 1, "tid": 0,
             "args": {"stats": {"taken": 10, "dropped": 0}}})
    w.close()
    proc = run_cli("report", "--json", "--all", path)
    assert proc.returncode == 0, proc.stderr
    ch = json.loads(proc.stdout)["channels"]
    assert ch["cpu/0/percent"]["mean"] == pytest.approx((50 * 0.5 + 100 * 0.1) / 0.6)  # not (50*.9+100*.1)/1
    assert ch["cpu/0/percent"]["valid"] == 2 and ch["cpu/0/percent"]["p50"] == 50
    assert ch["memory/b"]["mean"] == 4 and ch["memory/b"]["valid"] == 1 and ch["memory/b"]["events"] == 3
    assert ch["memory/a"]["mean"] == 1 and ch["memory/a"]["valid"] == 3


@pytest.fixture
def composer_trace(tmp_path):
    """A trace in the layout of sysprof.profile() / JSONTraceHandler: no recording metadata, *_gb, kb_*,
    disk/<dev>/<field> {<field>}, read_time in ms; rows every 10 ms."""
    path = tmp_path / "composer.json"
    w = ChromeTraceWriter(path)
    w.write({"name": "process_name", "ph": "M", "pid": 0, "tid": 1, "args": {"name": "Rank 0 training loop process"}})
    for i in range(50):
        ts = T0 + i * 10_000
        for name, args in [("cpu", {"cpu_percent": float(i)}),
                           ("memory/virtual", {"used_gb": 1.5 + i / 100, "available_gb": 20.0}),
                           ("disk/sda/read_bytes", {"read_bytes": 1e6 * i}),
                           ("disk/sda/read_time", {"read_time": 3.0 * i}),
                           ("network/eth0/kb_recv", {"kb_recv": 2.0 * i}),
                           ("network/eth0/kb_recv_per_second", {"kb_recv_per_second": 200.0})]:
            w.write({"name": name, "cat": "", "ph": "C", "ts": ts, "pid": 0, "tid": 1, "args": args})
    w.close()
    return path


def test_report_on_a_composer_layout_trace(composer_trace):
    proc = run_cli("report", composer_trace)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "not a sysprof record trace: no recording metadata" in out
    assert "truncated" not in out and "n/an/a" not in out and "median spacing 10 ms" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if "/" in line.split(" ", 1)[0]}
    assert rows["memory/virtual/used_gb"][1] == "GB" and rows["memory/virtual/available_gb"][1] == "GB"
    assert rows["disk/sda/read_time"][1] == "ms" and rows["disk/sda/read_bytes"][1] == "B"
    assert rows["network/eth0/kb_recv"][1] == "kB" and rows["network/eth0/kb_recv_per_second"][1] == "kB/s"
    assert rows["cpu/cpu_percent"][1] == "%"
    assert not any(ch.endswith(("read_bytes/read_bytes", "read_time/read_time")) for ch in rows)
    s = json.loads(run_cli("report", "--json", composer_trace).stdout)
    assert s["recorded"] is False and s["truncated"] is False
    assert s["interval_s"] == pytest.approx(0.01) and s["interval_source"] == "median spacing"
    assert s["samples"] == 50 and s["channels"]["disk/sda/read_time"]["max"] == 147


def test_report_on_a_sysprof_profile_trace(tmp_path):
    import sysprof

    with sysprof.profile(str(tmp_path / "traces"), sys_prof_memory=True, sys_prof_disk=True,
                         sys_prof_stats_thread_interval_seconds=0.005) as prof:
        for _ in range(5):
            time.sleep(0.02)
            prof.step()
    proc = run_cli("report", "--all", tmp_path / "traces" / "merged_trace.json")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "no recording metadata" in out and "truncated" not in out
    assert any(line.split()[:2] == ["memory/virtual/used_gb", "GB"] for line in out.splitlines()), out
    assert "/read_bytes/read_bytes" not in out


def test_plot_uses_decimal_byte_units_and_keeps_task_counts_apart(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sysprof.report.model import TraceData
    from sysprof.report.plot import _plot_selection, plot_trace

    events = [{"name": "sysprof start", "ph": "i", "ts": T0, "args": {"interval_s": 0.01}}]
    for i in range(100):
        ts = T0 + i * 10_000
        events += [{"name": "memory", "ph": "C", "ts": ts, "args": {"used_bytes": 1e8 + 1e6 * i}},
                   {"name": "load", "ph": "C", "ts": ts, "args": {"1m": 0.5 + i / 100, "procs_running": i % 3}}]
    data = TraceData(events)
    panels = {(src, unit): chs for src, unit, chs in _plot_selection(data, lambda ch: True)}
    assert panels[("load", "")] == ["load/1m"] and panels[("load/procs", "")] == ["load/procs_running"]
    figures = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig))
    assert plot_trace(data, str(tmp_path / "p.png")) == 3
    fig = figures[-1]
    fig.canvas.draw()
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_text()]
    assert labels and all(lab.endswith(" MB") for lab in labels), labels  # 100 MB .. 199 MB, SI
    assert not any("MiB" in lab for lab in labels)


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


# --------------------------------------------------------------------------------------------------
# the output file: symbolic links, the recorder's lock, the command line
# --------------------------------------------------------------------------------------------------

def flock_holder(path):
    """The pid /proc/locks gives for a FLOCK lock on ``path``'s file, or None (an independent reader)."""
    st = os.stat(path)
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    with open("/proc/locks") as f:
        for line in f:
            fields = line.split()
            if fields[1:2] == ["FLOCK"] and fields[5] == key:
                return int(fields[4])
    return None


def _precious(path, data=b"precious\x00bytes\n", mode=0o600):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode)
    return data


@pytest.mark.parametrize("force", [False, True])
def test_record_never_writes_through_a_symlink(tmp_path, force):
    secret = tmp_path / "elsewhere" / "secret"
    data = _precious(secret)
    link, dangling, marker = tmp_path / "t.json", tmp_path / "d.json.gz", tmp_path / "ran"
    link.symlink_to(secret)
    dangling.symlink_to(tmp_path / "elsewhere" / "nowhere")
    for out in (link, dangling):
        proc = run_cli("record", *(["--force"] if force else []), "-o", out, "--", "touch", marker)
        assert_one_line_error(proc, 1)
        assert proc.stderr == (f"sysprof: output is a symbolic link: {out} -> {os.readlink(out)} (sysprof never "
                               f"writes through a link; give the file's own path)\n")
    assert secret.read_bytes() == data and secret.stat().st_mode & 0o777 == 0o600
    assert os.readlink(link) == str(secret) and os.readlink(dangling) == str(tmp_path / "elsewhere" / "nowhere")
    assert sorted(os.listdir(tmp_path / "elsewhere")) == ["secret"] and not marker.exists()
    assert "never writes through a link" in " ".join(run_cli("record", "--help").stdout.split())


def test_output_open_itself_refuses_a_symlink(tmp_path):
    """Below the up-front check: the open (O_NOFOLLOW) refuses a link that appears after it."""
    from sysprof.cli.common import CLIError
    from sysprof.cli.output import _Output

    secret = tmp_path / "secret"
    data = _precious(secret)
    link = tmp_path / "t.json"
    link.symlink_to(secret)
    for force in (False, True):
        with pytest.raises(CLIError, match="output exists" if not force else "output is a symbolic link"):
            _Output(str(link), force)
    assert secret.read_bytes() == data and secret.stat().st_mode & 0o777 == 0o600


def test_default_output_name_never_follows_a_symlink(tmp_path):
    cwd, secret = tmp_path / "cwd", tmp_path / "secret"
    data = _precious(secret)
    cwd.mkdir()
    now = time.time()
    taken = sorted({time.strftime("sysprof-%Y%m%d-%H%M%S.json", time.localtime(now + d)) for d in range(-1, 8)})
    for i, name in enumerate(taken):  # every name of these seconds: a link to the secret, or a dangling one
        (cwd / name).symlink_to(secret if i % 2 else tmp_path / f"gone-{i}")
    proc = subprocess.run(SYSPROF + ["record", "-q", "--", "true"], cwd=cwd, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert secret.read_bytes() == data
    assert sorted(os.listdir(tmp_path)) == ["cwd", "secret"]  # no dangling link's target was created
    new = set(os.listdir(cwd)) - set(taken)
    assert len(new) == 1 and all(os.path.islink(cwd / n) for n in taken)
    made = cwd / new.pop()
    assert not made.is_symlink() and made.name.startswith("sysprof-")
    event(json.loads(made.read_text()), "sysprof stop")


@pytest.mark.parametrize("name", ["real.json", "real.json.gz"])
def test_repair_through_a_symlink_repairs_the_target_and_keeps_the_link(tmp_path, name):
    target = tmp_path / "store" / name
    cut = b'[\n{"name": "a", "ts": 1},\n{"name": "b", "ts": 2},\n{"name": "c", "ts'
    _precious(target, gzip.compress(cut) if name.endswith(".gz") else cut, mode=0o640)
    link = tmp_path / ("t.json.gz" if name.endswith(".gz") else "t.json")
    link.symlink_to(os.path.join("store", name))
    proc = run_cli("repair", link)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"sysprof: {link}: 2 events kept; the trace is closed\n"
    assert link.is_symlink() and os.readlink(link) == os.path.join("store", name)
    assert _strict_load(target) == [{"name": "a", "ts": 1}, {"name": "b", "ts": 2}]
    assert target.stat().st_mode & 0o777 == 0o640
    assert os.listdir(tmp_path / "store") == [name]  # no temporary file left


WAIT_FOR_STDIN = "import sys; print('ready', flush=True); sys.stdin.readline()"


def test_second_recorder_on_a_locked_output_fails_before_its_command(tmp_path):
    trace, marker = tmp_path / "t.json", tmp_path / "ran"
    first = subprocess.Popen(SYSPROF + ["record", "--force", "-o", str(trace), "--interval", "5ms", "--",
                                        sys.executable, "-c", WAIT_FOR_STDIN],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        assert first.stdout.readline() == "ready\n"  # its command runs: the lock was taken before
        holder = flock_holder(trace)
        second = run_cli("record", "--force", "-o", trace, "--", "touch", marker)
        out, err = first.communicate("\n", timeout=30)
    finally:
        _cleanup(first)
    assert_one_line_error(second, 1)
    who = f"pid {first.pid}" if holder is not None else "another process"
    assert holder in (None, first.pid)
    assert second.stderr == (f"sysprof: output is in use: {trace} is locked by {who} "
                             f"(another sysprof record or repair)\n")
    assert not marker.exists()  # refused before its command started
    assert first.returncode == 0, err
    assert f"sysprof: wrote {trace}: " in err
    events = json.loads(trace.read_text())  # the surviving trace is the first recorder's, complete
    assert event(events, "sysprof start")["args"]["recorder_pid"] == first.pid
    assert event(events, "sysprof stop")["args"]["returncode"] == 0
    assert len(series(events)["cpu/percent"]) >= 1


def test_repair_refuses_a_live_recording_and_the_command_does_not_hold_the_lock(tmp_path):
    trace = tmp_path / "t.json"
    proc = _start_recorder(trace, "sleep", "30", stdout=subprocess.DEVNULL)
    try:
        wait_for(lambda: trace_has(trace, "sysprof", "C"), 10, "the first flush")
        child = event(read_trace(trace), "sysprof start")["args"]["pid"]
        inode = trace.stat().st_ino
        holder = flock_holder(trace)
        busy = run_cli("repair", trace)
        assert_one_line_error(busy, 1)
        who = f"pid {proc.pid}" if holder is not None else "another process"
        assert holder in (None, proc.pid)
        assert busy.stderr == (f"sysprof: cannot repair {trace}: it is locked by {who}, a recorder still "
                               f"writing it; repair it once that ends\n")
        assert trace.stat().st_ino == inode  # not replaced under the recorder

        # the command never had the trace open (close-on-exec) ...
        fds = os.listdir(f"/proc/{child}/fd")
        assert str(trace) not in {os.readlink(f"/proc/{child}/fd/{fd}") for fd in fds}
        # ... so once the recorder is SIGKILLed, with its command still running, repair goes through
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert _pid_state(child) not in (None, "Z")
        assert flock_holder(trace) is None
        fixed = run_cli("repair", trace)
        assert fixed.returncode == 0, fixed.stderr
    finally:
        _cleanup(proc)
    events = _strict_load(trace)
    assert len(series(events)["cpu/percent"]) >= 1 and event(events, "sysprof start")["args"]["pid"] == child


def _pid_state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def test_command_line_is_written_once(tmp_path):
    import shlex

    trace = tmp_path / "t.json"
    secret = "--token=s3cr3t-sysprof-7f3a"
    command = [sys.executable, "-c", "pass", secret]
    proc = run_cli("record", "-q", "--process", "-o", trace, "--", *command)
    assert proc.returncode == 0, proc.stderr
    text = trace.read_text()
    assert text.count("s3cr3t-sysprof-7f3a") == 1 and text.count('"-c"') == 0
    events = json.loads(text)
    start = event(events, "sysprof start")
    assert start["args"]["command_line"] == shlex.join(command) and "command" not in start["args"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    child = start["args"]["pid"]
    assert names == {start["args"]["recorder_pid"]: "sysprof: system",
                     child: f"{os.path.basename(sys.executable)} (pid {child})"}


@pytest.mark.parametrize("command", ["repair", "report"])
@pytest.mark.parametrize("kind", ["dev_zero", "fifo", "link_to_dev_zero"])
def test_repair_and_report_refuse_a_file_that_is_not_regular(tmp_path, command, kind):
    # /dev/zero never ends (read whole, it grew to 24 GB before the OOM killer); a FIFO blocks its reader.
    if kind == "dev_zero":
        path = "/dev/zero"
    elif kind == "fifo":
        path = tmp_path / "t.json"
        os.mkfifo(path)
    else:
        path = tmp_path / "t.json"
        os.symlink("/dev/zero", path)
    proc = run_cli(command, path, timeout=60)
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith(f"{path}: not a regular file"), proc.stderr
    if kind == "link_to_dev_zero":
        assert os.path.islink(path)  # the link is left as it was
