"""The ``sysprof`` command line: ``info``, ``--version``, the live status line, parsing helpers, ``bench``."""
from __future__ import annotations

import json
import os
import platform
import subprocess

import pytest

from sysprof.cli.common import parse_time
from sysprof.report.units import infer_unit

from cli_support import SYSPROF, run_cli

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
    assert "sysprof: no command given: recording the whole machine into " in tty_out  # on a terminal too

    proc = run_cli("record", "-o", tmp_path / "b.json", "--duration", "1.2")  # stderr is a pipe
    assert proc.returncode == 0 and "\r" not in proc.stderr
    lines = proc.stderr.splitlines()  # what it does (no command given), then the summary
    assert lines[0] == (f"sysprof: no command given: recording the whole machine into {tmp_path / 'b.json'} for "
                        "1.2 s (Ctrl-C or SIGTERM stops it sooner)")
    assert lines[1].startswith("sysprof: wrote ")
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
# QA fixes: bench
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
