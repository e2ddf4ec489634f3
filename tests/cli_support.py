"""Helpers shared by the ``sysprof`` command-line tests (tests/test_cli_*.py): running the installed
console script, reading what a trace holds, and starting / cleaning up a recorder in its own session."""
from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time

from sysprof.trace.chrome import read_trace

# The installed console script, as a user runs it. (`python -m sysprof` from the checkout would put the
# source tree, which has no compiled extension, first on sys.path.)
_SCRIPT = os.path.join(os.path.dirname(sys.executable), "sysprof")
SYSPROF = [_SCRIPT] if os.path.exists(_SCRIPT) else [sys.executable, "-m", "sysprof"]


def in_forked_child(check) -> bool:
    """``check()``'s truth in a forked child (which then ends with ``os._exit``), read back in the parent; False when
    it raised."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(w, b"1" if check() else b"0")
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.close(r)
    os.waitpid(pid, 0)
    return got == b"1"


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


#: how long a test waits for a recorder to start, flush or end: a guard against a hang, never an expectation (with
#: every core busy, a recorder took over 8 s to start)
HANG_S = 120


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


def _strict_load(path):
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)
