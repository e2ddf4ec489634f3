"""The ``sysprof`` command line, run for real in subprocesses: signals forwarded to the command, their
escalation, a killed recorder and ``repair``."""
from __future__ import annotations

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
    HANG_S, SYSPROF, run_cli, series, event, wait_for, trace_has,
    _default_sigint, _start_recorder, _cleanup, _strict_load,
)

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
        wait_for(lambda: trace_has(trace, "sysprof start", "i"), HANG_S, "the recording to start")
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
        wait_for(lambda: trace_has(trace, "sysprof start", "i"), HANG_S, "the recording to start")
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=HANG_S)  # the stop event tells that SIGINT ended it, not the 60 s duration
    finally:
        _cleanup(proc)
    assert proc.returncode == 0, proc.stderr.read()
    stop = event(json.loads(trace.read_text()), "sysprof stop")
    assert stop["args"]["signals"] == ["SIGINT"] and stop["args"]["duration_reached"] is False


@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_killed_recorder_leaves_readable_trace_that_repair_closes(tmp_path, name):
    trace = tmp_path / name
    proc = _start_recorder(trace, "sleep", "30", stdout=subprocess.DEVNULL)
    try:
        # the stats counter is written at each flush (at least every second)
        wait_for(lambda: trace_has(trace, "sysprof", "C"), HANG_S, "the first flush")
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
    assert summary["dropped"] == 0 and summary["taken"] >= 1  # from the last flush (how many: not a test's business)
    assert summary["channels"]["cpu/percent"]["max"] <= 100


# --------------------------------------------------------------------------------------------------
# QA fixes: SIGINT escalation, --duration with --kill-after
# --------------------------------------------------------------------------------------------------

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
                   sys.executable, "-c", STUBBORN_CHILD, "SIGTERM", timeout=HANG_S)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 128 + signal.SIGKILL, proc.stderr  # killed, not its 30 s sleep ended
    assert elapsed >= 0.8
    stop = event(read_trace(trace), "sysprof stop")["args"]
    assert stop["returncode"] == -signal.SIGKILL and stop["duration_reached"] is True
    assert stop["signals_sent"] == ["SIGTERM", "SIGKILL"]
