"""A user's mistakes are said first, in one line, never as an "internal error": outputs and their formats are
checked before a trace is read (a trace that would raise if read stands in for a large one), values are checked
as arguments (a negative one included), and ``record`` without a command says what it does."""
from __future__ import annotations

import argparse
import os

import pytest

from sysprof.cli import main
from sysprof.cli.parser import build_parser, join_negative_values
from sysprof.cli.record import MISSED_MIN_TICKS, MISSED_SHARE_WARN, missed_deadlines_line
from sysprof.trace.chrome import ChromeTraceWriter

from cli_support import run_cli


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "t.json"
    w = ChromeTraceWriter(path)
    w.write({"name": "sysprof start", "ph": "i", "s": "g", "ts": 1_000_000, "pid": 1, "tid": 0,
             "args": {"interval_s": 0.01, "channels": ["cpu/percent"]}})
    for i in range(20):
        w.write({"name": "cpu", "ph": "C", "ts": 1_000_000 + i * 10_000, "pid": 1, "tid": 0,
                 "args": {"percent": float(i)}})
    w.close()
    return path


@pytest.fixture
def unread(monkeypatch):
    """Every trace reader raises: a check that comes after reading fails the test ("internal error", 70)."""
    import sysprof.trace.load

    def read(*args, **kwargs):
        raise AssertionError("the trace was read")
    monkeypatch.setattr(sysprof.trace.load, "load_events", read)


def _run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


FORMATS = "(or .avif, .eps, .gif, .jpeg, .jpg, .pdf, .pgf, .ps, .raw, .rgba, .svg, .svgz, .tif, .tiff, .webp)"


@pytest.mark.parametrize("argv, rc, message", [
    (["report", "{trace}", "--plot", "{tmp}/out.txt"], 2,
     "matplotlib cannot write .txt ({tmp}/out.txt): name the plot FILE.png " + FORMATS),
    (["report", "{trace}", "--plot", "{tmp}/out"], 2,
     "cannot tell the plot's format from '{tmp}/out': name it FILE.png " + FORMATS),
    (["report", "{trace}", "--plot", "{tmp}/nodir/out.png"], 1, "cannot write {tmp}/nodir/out.png: no such directory: "
                                                                 "{tmp}/nodir"),
    (["report", "{trace}", "--plot", "{tmp}/file/out.png"], 1, "cannot write {tmp}/file/out.png: {tmp}/file is not a "
                                                                "directory"),
    (["report", "{trace}", "--plot", "{tmp}/dir.png"], 2, "plot is a directory: {tmp}/dir.png"),
    (["report", "{trace}", "--smooth", "1s"], 2, "--smooth applies to --plot FILE.png (see 'sysprof report --help')"),
    (["report", "{trace}", "--plot", "{tmp}/p.png", "--smooth", "-5ms"], 2,
     "argument --smooth: time must be > 0, got '-5ms' (see 'sysprof report --help')"),
    (["report", "{trace}", "--steps", "1", "--from", "-1s"], 2,
     "--steps is a window of its own; give it or --from/--to, not both"),
    (["report", "{trace}", "--step", "batch"], 2, "--step names the steps of --steps (or --ranks); give --steps A-B"),
    (["report", "{trace}", "--from", "soon"], 2,
     "argument --from: invalid time 'soon' (examples: 1ms, 500us, 0.5s, 2) (see 'sysprof report --help')"),
    (["report", "--ranks", "{trace}", "--plot", "{tmp}/p.png"], 2,
     "--plot applies to one TRACE, not to --ranks (see 'sysprof report --help')"),
    (["export", "{trace}", "-o", "{tmp}/nodir/t.csv"], 1, "cannot write {tmp}/nodir/t.csv: no such directory: "
                                                          "{tmp}/nodir"),
    (["export", "{trace}", "-o", "{tmp}/t.xlsx"], 2,
     "cannot tell the format of {tmp}/t.xlsx (name it .parquet or .csv, or give --format parquet or csv)"),
    (["export", "{trace}", "-o", "{tmp}/dir.png", "--format", "csv", "--force"], 2, "output is a directory: "
                                                                                    "{tmp}/dir.png"),
    (["record", "--interval", "-5ms"], 2, "argument -i/--interval: time must be > 0, got '-5ms' "
                                          "(see 'sysprof record --help')"),
    (["record", "-i", "-5ms"], 2, "argument -i/--interval: time must be > 0, got '-5ms' (see 'sysprof record --help')"),
    (["record", "--interval", "0"], 2, "argument -i/--interval: time must be > 0, got '0' "
                                       "(see 'sysprof record --help')"),
    (["record", "--interval", "100ns"], 2, "argument -i/--interval: must be at least 1 us (the sampler's shortest "
                                           "interval), got '100ns' (see 'sysprof record --help')"),
    (["record", "--duration", "-1m"], 2, "argument -d/--duration: time must be > 0, got '-1m' "
                                         "(see 'sysprof record --help')"),
    (["record", "--capacity", "1"], 2, "argument --capacity: must be in [2, 2147483648], got '1' "
                                       "(see 'sysprof record --help')"),
    (["record", "--pid", "0"], 2, "argument --pid: must be >= 1, got '0' (see 'sysprof record --help')"),
    (["record", "--max-size", "-5M"], 2, "argument --max-size: size must be > 0, got '-5M' "
                                         "(see 'sysprof record --help')"),
    (["record", "--process-tree-slots", "65", "--", "true"], 2,
     "argument --process-tree-slots: must be in [0, 64], got '65' (see 'sysprof record --help')"),
    (["record", "-o", "{tmp}/nodir/t.json", "--", "true"], 1, "cannot write {tmp}/nodir/t.json: no such directory: "
                                                              "{tmp}/nodir"),
    (["serve", "--interval", "-1ms"], 2, "argument -i/--interval: time must be > 0, got '-1ms' "
                                         "(see 'sysprof serve --help')"),
])
def test_errors_before_any_work(tmp_path, trace, unread, capsys, argv, rc, message):
    if "--plot" in argv:
        pytest.importorskip("matplotlib")
    (tmp_path / "file").write_text("a file, not a directory\n")
    (tmp_path / "dir.png").mkdir()
    before = sorted(os.listdir(tmp_path))
    got, out, err = _run(capsys, *[a.format(trace=trace, tmp=tmp_path) for a in argv])
    assert (got, err) == (rc, f"sysprof: {message.format(tmp=tmp_path)}\n")
    assert out == "" and sorted(os.listdir(tmp_path)) == before  # nothing written


def test_export_checks_pyarrow_before_reading(trace, tmp_path, unread, capsys, monkeypatch):
    import sysprof.frames

    def missing():
        raise ImportError("Parquet files need pyarrow (no module named 'pyarrow'): pip install 'sysprof[pandas]'")
    monkeypatch.setattr(sysprof.frames, "require_pyarrow", missing)
    rc, out, err = _run(capsys, "export", trace, "-o", tmp_path / "t.parquet")
    assert (rc, err) == (1, "sysprof: Parquet files need pyarrow (no module named 'pyarrow'): "
                            "pip install 'sysprof[pandas]'\n")
    assert not (tmp_path / "t.parquet").exists()


def test_negative_values_are_values():
    """argparse takes "-5ms" for an option; an option that takes a value gets it (joined with "="), up to "--"
    and, for record, up to its command; a unique abbreviation too."""
    parser = build_parser()
    assert join_negative_values(parser, ["report", "t.json", "--from", "-10s", "--to", "-5s"]) == [
        "report", "t.json", "--from=-10s", "--to=-5s"]
    assert join_negative_values(parser, ["record", "-i", "-5ms", "--", "x", "--interval", "-1"]) == [
        "record", "--interval=-5ms", "--", "x", "--interval", "-1"]
    assert join_negative_values(parser, ["record", "-q", "python", "-c", "x", "--duration", "-1s"]) == [
        "record", "-q", "python", "-c", "x", "--duration", "-1s"]  # the command's own arguments
    assert join_negative_values(parser, ["record", "--dur", "-1s", "-q"]) == ["record", "--duration=-1s", "-q"]
    assert join_negative_values(parser, ["report", "t.json", "-k", "cpu", "--json"]) == [
        "report", "t.json", "-k", "cpu", "--json"]
    args = parser.parse_args(join_negative_values(parser, ["report", "t.json", "--from", "-1.5m"]))
    assert args.window_from == -90.0


def test_missed_deadlines_warning():
    """More than MISSED_SHARE_WARN of at least MISSED_MIN_TICKS deadlines missed: the interval is shorter than this
    machine samples; the line says how often it did sample and suggests an interval."""
    stats = {"taken": 86_904, "missed_deadlines": 1_933_730, "sample_ns_mean": 6968.0}
    assert missed_deadlines_line(stats, 1e-6, 2.0) == (
        "96% of the sampling deadlines were missed (1,933,730 of 2,020,634): --interval 1 us is shorter than this "
        "machine samples (a sample every 23.01 us on average, each taking 6.968 us); try --interval 50us")
    assert "deadlines so far were missed" in missed_deadlines_line(stats, 1e-6, 2.0, live=True)
    half = int(MISSED_MIN_TICKS * MISSED_SHARE_WARN)
    assert missed_deadlines_line({"taken": MISSED_MIN_TICKS - half, "missed_deadlines": half}, 0.01, 10) is None
    assert missed_deadlines_line({"taken": 10, "missed_deadlines": 50}, 1e-6, 0.1) is None  # too few to judge
    assert missed_deadlines_line({"taken": 400, "missed_deadlines": 600}, 0.001, 0.8).endswith(
        "(a sample every 2 ms on average); try --interval 2ms")
    assert missed_deadlines_line({}, 0.01, 1.0) is None


def test_record_without_a_command_says_what_it_does(tmp_path):
    for argv in (["--duration", "0.3"], ["--duration", "0.3", "--"]):
        proc = run_cli("record", "--cpu", "-o", tmp_path / "t.json", "--force", *argv)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.splitlines()[0] == (f"sysprof: no command given: recording the whole machine into "
                                               f"{tmp_path / 't.json'} for 300 ms (Ctrl-C or SIGTERM stops it sooner)")


def test_parse_time_signs():
    from sysprof.cli.common import parse_signed_time, parse_time

    assert parse_signed_time("-10s") == -10.0 and parse_signed_time("+1.5m") == 90.0 and parse_signed_time("0") == 0
    for bad in ("-5ms", "0", "-0"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"^time must be > 0, got "):
            parse_time(bad)
    with pytest.raises(argparse.ArgumentTypeError, match=r"^invalid time '--5ms'"):
        parse_signed_time("--5ms")
