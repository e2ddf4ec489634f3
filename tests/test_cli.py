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

from sysprof.chrome_trace import ChromeTraceWriter, read_trace
from sysprof.cli import parse_time
from sysprof.report import infer_unit

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


def _start_recorder(trace, *command, stdout=subprocess.PIPE):
    # its own session: no controlling terminal, and the whole group can be cleaned up
    return subprocess.Popen(SYSPROF + ["record", "-q", "-o", str(trace), "--interval", "5ms", "--", *command],
                            stdout=stdout, stderr=subprocess.PIPE, text=True, start_new_session=True)


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
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
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
    assert "unavailable: gpu: no NVML" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(("cpu/", "memory/"))}
    assert rows["cpu/percent"][1:] == ["%", "0.0", "50.0", "50.0", "95.0", "100.0"]
    assert rows["memory/used_bytes"][1:4] == ["B", "2.33", "GiB"]


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
