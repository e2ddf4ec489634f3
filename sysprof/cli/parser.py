"""The ``sysprof`` argument parser: one sub-parser per command; ``record``'s source flags come from the registry
(:func:`~sysprof.cli.sources.add_source_flags`)."""
from __future__ import annotations

import argparse
import re

from ..sampling.sampler import MAX_CAPACITY as SAMPLER_MAX_CAPACITY
from .commands import cmd_bench, cmd_repair, cmd_report
from .common import (PROG, CLIError, _version, int_in, parse_free, parse_interval, parse_signed_time, parse_size,
                     parse_time)
from .export import FORMATS as EXPORT_FORMATS, cmd_export
from .flight import add_flight_flags
from .info import cmd_info
from .output import PARTS_KEPT
from .record import (DEFAULT_INTERVAL, DEFAULT_KILL_AFTER, MAX_CAPACITY, MIN_CAPACITY, MISSED_SHARE_WARN,
                     RING_SECONDS, cmd_record)
from .serve import add_serve_parser
from ..report.plot import AUTO_SMOOTH_POINTS
from ..report.window import parse_steps
from .sources import add_interval_flags, add_source_flags


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one line (no usage block) and raise instead of exiting."""

    def error(self, message):  # noqa: D401 - argparse API
        raise CLIError(f"{message} (see '{self.prog} --help')", status=2)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="High-frequency system-metrics profiler for ML training.")
    p.add_argument("--version", action="version", version=f"{PROG} {_version()}")
    sub = p.add_subparsers(dest="subcommand", metavar="COMMAND", parser_class=_Parser)

    r = sub.add_parser("record", help="sample system metrics while a command runs; write a Chrome/Perfetto trace",
                       description="Sample system metrics while COMMAND runs (or for --duration, or until Ctrl-C) "
                                   "and write a Chrome trace-event JSON file, or Perfetto's protobuf format for a .pftrace "
                                   "output (open either in ui.perfetto.dev). "
                                   "Exit status: the command's when it is not 0; otherwise 1 if the trace could "
                                   "not be written completely (e.g. the disk filled up), else 0. "
                                   "SIGINT/SIGTERM/SIGHUP/SIGQUIT are passed on to the command; should it "
                                   "ignore them, a second one sends it SIGTERM and a third SIGKILL.")
    r.add_argument("-o", "--output", metavar="TRACE",
                   help="trace file (.json, .json.gz for gzip, or .pftrace for Perfetto's protobuf format; not '-'); "
                        "default: a new sysprof-YYYYmmdd-HHMMSS.json.gz (gzipped JSON, which Perfetto's UI and "
                        "chrome://tracing open) in the current directory (-1, -2, ... added if that exists; never "
                        "overwritten). A symbolic link at TRACE, even a dangling one, is refused: sysprof never "
                        "writes through a link. The trace is locked (flock) while recorded: a "
                        "second 'record' on it fails before its command starts. The trace holds the command "
                        "line, every argument included")
    r.add_argument("-f", "--force", action="store_true",
                   help="overwrite an existing output file (emptied in place once the command has started)")
    r.add_argument("--max-size", type=parse_size, metavar="SIZE",
                   help=f"bound the trace's size on disk (500M, 2G, 1GiB): write it as parts TRACE.part0001.json, "
                        f"... (before TRACE's suffix), each a whole trace of about SIZE/{PARTS_KEPT}, and remove "
                        f"the oldest parts so that those kept hold at most SIZE. Part names already taken are "
                        f"refused, --force or not. 'report --ranks PART...' reads the parts as one recording")
    r.add_argument("--min-free", type=parse_free, metavar="SIZE|PCT",
                   help="stop writing when the trace's file system has less than this available (e.g. 1G, 5%%; "
                        "0: never); the command runs on, stderr and the stop event say so, the exit status is 1 "
                        "unless the command's. Default: 256M or 1%% of the file system (at most 4G), the larger; "
                        "checked at the start and five times a second")
    r.add_argument("-i", "--interval", type=parse_interval, default=parse_time(DEFAULT_INTERVAL), metavar="TIME",
                   help=f"sampling interval: 1ms, 500us, 0.5s, 2 (seconds); default {DEFAULT_INTERVAL}; at least "
                        f"1us; shorter than this machine can sample (more than "
                        f"{MISSED_SHARE_WARN * 100:g}%% of the deadlines missed) is warned about")
    r.add_argument("-d", "--duration", type=parse_time, metavar="TIME",
                   help="stop after this long (a running command is then sent SIGTERM, like timeout(1), and "
                        "recorded until it exits)")
    r.add_argument("--kill-after", type=parse_time, default=parse_time(DEFAULT_KILL_AFTER), metavar="TIME",
                   help=f"with --duration: send SIGKILL if the command is still running this long after the "
                        f"SIGTERM (default {DEFAULT_KILL_AFTER})")
    add_source_flags(r)
    add_interval_flags(r, parse_time)
    r.add_argument("--pid", type=int_in(1, None), metavar="PID",
                   help="follow an existing process instead of running a command")
    r.add_argument("--backend", choices=("auto", "native", "psutil"), default="auto", help="sampler backend")
    r.add_argument("--every-row", action="store_true",
                   help="write every channel group at every sample (default: only when a value changed)")
    r.add_argument("--capacity", type=int_in(2, SAMPLER_MAX_CAPACITY), metavar="ROWS",
                   help=f"sampler ring-buffer rows, 8 x (1 + channels) bytes each; default about "
                        f"{RING_SECONDS:g} s of samples: ceil({RING_SECONDS:g} / interval), "
                        f"{MIN_CAPACITY} to {MAX_CAPACITY}")
    r.add_argument("-q", "--quiet", action="store_true", help="no status line, warnings or summary")
    add_flight_flags(r)
    r.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS...]",
                   help="the command to run and record")
    r.set_defaults(func=_record)

    rp = sub.add_parser("report", help="summarize a trace: per-channel statistics, rate, drops; --plot, --json",
                        description="Per-channel statistics (min, mean, p50, p95, max) of a sysprof trace, opened by a "
                                    "verdict: the phases that take the most wall time and what was saturated "
                                    "or starved during each.")
    rp.add_argument("trace", metavar="TRACE", nargs="?")
    rp.add_argument("parts", metavar="PART", nargs="*",
                    help="more parts of TRACE's recording (record --max-size), read with it as one trace")
    rp.add_argument("--json", action="store_true", help="machine-readable output")
    rp.add_argument("--ranks", nargs="+", metavar="DIR_OR_FILE",
                    help="instead of TRACE: per-rank traces (files or folders): per-rank step times, the "
                         "stragglers and what differed on them (see sysprof.report.ranks)")
    rp.add_argument("--step", action="append", metavar="PATTERN",
                    help="with --ranks or --steps: the step spans' name (glob; default event/batch, else step)")
    rp.add_argument("--plot", metavar="FILE.png", help="draw the series on a shared time axis (needs matplotlib)")
    rp.add_argument("--smooth", type=parse_smooth, metavar="TIME",
                    help=f"with --plot: a moving average over this window (e.g. 100ms) instead of the raw steps; "
                         f"0: the raw steps. Default: a panel of more than {AUTO_SMOOTH_POINTS:,} points is smoothed "
                         f"(the panel says over what)")
    win = rp.add_argument_group("time window (the table, the verdict, --by, --json and --plot)")
    win.add_argument("--from", dest="window_from", type=parse_signed_time, metavar="TIME",
                     help="from TIME after the trace's start (30s, 1.5m, 90); negative: before its end (-10s)")
    win.add_argument("--to", dest="window_to", type=parse_signed_time, metavar="TIME",
                     help="to TIME after the start; negative: before the end (--from -60s --to -30s)")
    win.add_argument("--steps", metavar="A-B", type=parse_steps,
                     help="from the start of step A to the end of step B (A, A-B or A-), the steps counted from 1 in "
                          "time order: the spans named by --step (default event/batch, else step: "
                          "sysprof.mark('step'))")
    rp.add_argument("-k", "--channel", action="append", metavar="PATTERN",
                    help="only channels matching this glob or substring (repeatable)")
    rp.add_argument("--all", action="store_true", help="also list channels that were always 0")
    rp.add_argument("--by", action="append", metavar="PATTERN",
                    help="one row per phase: the spans (X or B/E duration events: Composer's event/batch, "
                         "dataloader, sysprof.mark() markers) whose name matches this glob (repeatable): count, "
                         "total and mean duration, and per channel the mean and the amount accrued inside them "
                         "(bytes, CPU-seconds, stall-seconds, joules); -k chooses the channels")
    rp.set_defaults(func=cmd_report)

    inf = sub.add_parser("info", help="backend, available sources and why not, kernel, CPUs",
                         description="What sysprof can sample on this machine, and why not.")
    inf.add_argument("--json", action="store_true", help="machine-readable output")
    inf.set_defaults(func=cmd_info)

    rep = sub.add_parser("repair", help="close a truncated trace (e.g. of a killed recorder)",
                         description="Rewrite a truncated trace as valid JSON, keeping every complete event. "
                                     "A symbolic link is followed: the file it points to is repaired and the "
                                     "link kept. A trace still being recorded (its recorder holds the lock) is "
                                     "refused; a killed recorder's lock is gone with it.")
    rep.add_argument("trace", metavar="TRACE")
    rep.set_defaults(func=cmd_repair)

    ex = sub.add_parser("export", help="a trace as a table: Parquet or CSV, a row per sample (needs pandas)",
                        description="Write a trace (sysprof record's JSON, .json.gz, the Composer layout, "
                                    "Perfetto .pftrace) as a table: a row per sample time the trace holds "
                                    "(values held until they change, as the trace means them), a column per "
                                    "channel (the sampler's names; Composer names mapped back), NaN (empty in "
                                    "CSV) where unknown. Parquet keeps the units (field metadata 'unit') and the "
                                    "trace's metadata (schema metadata 'sysprof'); CSV has one header row (time, "
                                    "then the channel names, which carry their units: _bytes, _percent, "
                                    "_seconds, _per_second) and the time in ISO 8601 UTC with ns. "
                                    "Needs pandas and, for Parquet, pyarrow: pip install 'sysprof[pandas]'.")
    ex.add_argument("trace", metavar="TRACE")
    ex.add_argument("-o", "--output", required=True, metavar="OUT",
                    help="OUT.parquet or OUT.csv ('-': CSV to stdout). An existing file is refused without "
                         "--force; a symbolic link at OUT always (sysprof never writes through a link)")
    ex.add_argument("--format", choices=EXPORT_FORMATS, help="the format, whatever OUT's name")
    ex.add_argument("--changes", action="store_true",
                    help="a row per written change instead of per sample (the raw changes of a changes-only trace)")
    ex.add_argument("-f", "--force", action="store_true", help="overwrite an existing output file")
    ex.add_argument("-k", "--channel", action="append", metavar="PATTERN",
                    help="only channels matching this glob or substring (repeatable)")
    ex.add_argument("-q", "--quiet", action="store_true", help="no summary line on stderr")
    ex.set_defaults(func=cmd_export)

    add_serve_parser(sub)

    b = sub.add_parser("bench", help="run the benchmarks (benchmarks/run.py of a source checkout)", add_help=False)
    b.add_argument("bench_args", nargs=argparse.REMAINDER)
    b.set_defaults(func=cmd_bench)
    return p


def _record(args) -> int:
    """``record``, once the options that need another are known to have it."""
    if getattr(args, "flight_trace", None) is not None and getattr(args, "flight", None) is None:
        raise CLIError("--flight-trace needs --flight WINDOW (it writes beside the flight dumps)", status=2)
    return cmd_record(args)


def parse_smooth(text: str) -> float:
    """``--smooth``: a time (> 0), or ``0`` for the raw steps."""
    if str(text).strip() in ("0", "0s", "off", "raw"):
        return 0.0
    return parse_time(text)


_NEGATIVE = re.compile(r"-(\d|\.\d)")


def join_negative_values(parser: argparse.ArgumentParser, argv: list) -> list:
    """``argv`` with each option that takes a value joined to a following negative value (``--from -10s`` ->
    ``--from=-10s``): argparse reads ``-5ms`` as an option, so ``--interval -5ms`` would say "expected one
    argument" instead of the value's own error ("must be > 0"). Stops at ``--`` and, for ``record``, at the
    command."""
    subs = next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})
    at = next((i for i, tok in enumerate(argv) if not tok.startswith("-")), None)
    sub = subs.get(argv[at]) if at is not None else None
    if sub is None:
        return list(argv)
    takes_one = {}
    for action in sub._actions:
        if action.option_strings and action.nargs is None:
            longest = max(action.option_strings, key=len)
            takes_one.update((opt, longest) for opt in action.option_strings)
    remainder = any(a.nargs == argparse.REMAINDER for a in sub._actions if not a.option_strings)
    out, i = list(argv[:at + 1]), at + 1
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            break
        name = takes_one.get(tok) or _unique_prefix(tok, takes_one)
        if name is not None and i + 1 < len(argv):
            value = argv[i + 1]
            out += [f"{name}={value}"] if _NEGATIVE.match(value) else [tok, value]
            i += 2
            continue
        if remainder and not tok.startswith("-"):
            break
        out.append(tok)
        i += 1
    return out + list(argv[i:])


def _unique_prefix(tok: str, takes_one: dict):
    """The option ``tok`` abbreviates (argparse takes a unique prefix of a long option), if it takes one value."""
    if not tok.startswith("--") or "=" in tok:
        return None
    found = {name for opt, name in takes_one.items() if opt.startswith(tok)}
    return found.pop() if len(found) == 1 else None
