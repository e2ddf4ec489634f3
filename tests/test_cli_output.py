"""The ``sysprof`` command line: the output file (symbolic links, the recorder's lock, default names, the
command line, files that are not regular)."""
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

from cli_support import (
    HANG_S, SYSPROF, run_cli, series, event, assert_one_line_error, wait_for,
    trace_has, _start_recorder, _cleanup, _strict_load,
)

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
    taken = sorted({time.strftime("sysprof-%Y%m%d-%H%M%S.json.gz", time.localtime(now + d)) for d in range(-1, 8)})
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
    event(json.loads(gzip.decompress(made.read_bytes())), "sysprof stop")


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
        wait_for(lambda: trace_has(trace, "sysprof", "C"), HANG_S, "the first flush")
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


# --------------------------------------------------------------------------------------------------
# QA fixes: output names
# --------------------------------------------------------------------------------------------------

#: ``sysprof record ARGS`` whose clock reads a fixed second (FROZEN_TIME) for its default output name: however slowly
#: the recorders start, they all want the same name
FROZEN_TIME = 1_700_000_000
FROZEN_NAME_CLOCK = textwrap.dedent(f"""
    import sys, time
    strftime = time.strftime
    time.strftime = lambda fmt, t=None: strftime(fmt, time.localtime({FROZEN_TIME}) if t is None else t)
    from sysprof.cli import main
    sys.exit(main(sys.argv[1:]))
""")


def test_default_output_names_never_collide(tmp_path):
    # three recordings at once in the same second, whose name and its -1 are taken (a file, and a symbolic link to
    # nowhere): sysprof adds -2, -3, -4, never overwrites a file and never follows the link
    stem = time.strftime("sysprof-%Y%m%d-%H%M%S", time.localtime(FROZEN_TIME))
    (tmp_path / f"{stem}.json.gz").write_text("precious")
    (tmp_path / f"{stem}-1.json.gz").symlink_to(tmp_path / "elsewhere")
    procs = [subprocess.Popen([sys.executable, "-c", FROZEN_NAME_CLOCK, "record", "-q", "--", "true"], cwd=tmp_path,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read()
    assert (tmp_path / f"{stem}.json.gz").read_text() == "precious" and not (tmp_path / "elsewhere").exists()
    new = set(os.listdir(tmp_path)) - {f"{stem}.json.gz", f"{stem}-1.json.gz"}
    assert new == {f"{stem}-{n}.json.gz" for n in (2, 3, 4)}, new
    for n in new:
        event(json.loads(gzip.decompress((tmp_path / n).read_bytes())), "sysprof stop")


def test_default_output_name_is_the_local_time_of_the_start(tmp_path):
    before = int(time.time())
    assert run_cli("record", "-q", "--", "true", cwd=tmp_path, timeout=120).returncode == 0
    after = time.time()
    (name,) = os.listdir(tmp_path)
    assert name.startswith("sysprof-") and name.endswith(".json.gz"), name
    named = time.mktime(time.strptime(name[:-len(".json.gz")], "sysprof-%Y%m%d-%H%M%S"))
    assert before <= named <= after, (name, before, after)
    event(json.loads(gzip.decompress((tmp_path / name).read_bytes())), "sysprof stop")


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


def test_output_fifo_and_socket_are_refused_without_blocking(tmp_path):
    # A FIFO with no reader would block the open for ever (and Ctrl-C with it); with a reader it would take the
    # trace away from any file. Both are refused before the command starts, with --force too.
    import socket

    marker = tmp_path / "ran"
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    for extra in ([], ["--force"]):
        proc = run_cli("record", *extra, "-o", fifo, "--", "touch", marker, timeout=60)
        assert_one_line_error(proc, 1 if not extra else 2)
        if extra:
            assert proc.stderr == (f"sysprof: output is a FIFO: {fifo} (a trace is written to a file or a "
                                   "device)\n")
    # a reader waiting on the FIFO: the open succeeds, and the FIFO is still refused
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        proc = run_cli("record", "--force", "-o", fifo, "--", "touch", marker, timeout=60)
        assert_one_line_error(proc, 2)
        assert "output is a FIFO" in proc.stderr
        assert os.read(reader, 100) == b""
    finally:
        os.close(reader)
    sock_path = tmp_path / "s"
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(sock_path))
        proc = run_cli("record", "--force", "-o", sock_path, "--", "touch", marker, timeout=60)
        assert_one_line_error(proc, 2)
        assert proc.stderr.startswith(f"sysprof: output is a socket: {sock_path}")
    finally:
        sock.close()
    assert not marker.exists()
    # a device is still written to (opened non-blocking like the rest, then made blocking again)
    proc = run_cli("record", "-q", "--force", "-o", os.devnull, "--cpu", "--duration", "0.2")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_gzip_suffix_is_case_insensitive(tmp_path):
    trace = tmp_path / "x.JSON.GZ"
    proc = run_cli("record", "-q", "-o", trace, "--cpu", "--duration", "0.2")
    assert proc.returncode == 0, proc.stderr
    assert trace.read_bytes()[:2] == b"\x1f\x8b"
    event(json.loads(gzip.decompress(trace.read_bytes())), "sysprof stop")
    assert run_cli("report", trace).returncode == 0
