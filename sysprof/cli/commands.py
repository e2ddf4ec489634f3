"""``sysprof report`` (statistics, --plot, --json of a trace), ``sysprof repair`` (close a truncated trace) and
``sysprof bench`` (the benchmarks of a source checkout)."""
from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from ..report import (ReportError, TraceData, by_phase, channel_filter, is_key_channel, jsonable, judgement,
                      match_spans, no_match_message, phases_json, plot_trace, print_phases, print_table,
                      print_verdict, require_matplotlib, summarize, table_layout)
from ..report.gpu_reasons import reason_lines, reason_shares
from ..report.plot import check_plot_name
from ..report.window import TraceWindow, window_bounds
from ..trace.schema import START_EVENT
from .common import PROG, CLIError, _import_sysprof, check_output_path


def _report_ranks(args) -> int:
    from sysprof.report.ranks import format_ranks, rank_report

    report = rank_report(args.ranks, step=args.step)  # a ReportError is main's one-line error
    if args.json:
        json.dump({k: v for k, v in report.items() if not k.startswith("_")}, sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        print(format_ranks(report))
    return 0


def cmd_report(args) -> int:
    _import_sysprof()
    if (args.ranks is None) == (args.trace is None):
        raise CLIError("report takes one TRACE or --ranks DIR_OR_FILE... (see 'sysprof report --help')", status=2)
    if args.ranks is not None:
        alone = [flag for flag, given in (("--plot", args.plot), ("--from", args.window_from is not None),
                                          ("--to", args.window_to is not None), ("--steps", args.steps is not None),
                                          ("--by", args.by)) if given]
        if alone:
            raise CLIError(f"{alone[0]} applies to one TRACE, not to --ranks (see 'sysprof report --help')", status=2)
        return _report_ranks(args)

    _check_report_args(args)  # before the trace is read: a large one takes a while
    data = _read_parts([args.trace] + list(args.parts or []))
    if not data.series:
        raise CLIError(f"{args.trace}: no counter events (is it a sysprof trace?)")
    whole, bounds = data, None
    if args.steps is not None or args.window_from is not None or args.window_to is not None:
        try:
            bounds = window_bounds(data, args.window_from, args.window_to, args.steps, args.step)
        except ReportError as e:
            raise CLIError(str(e), status=2) from None
        data = TraceWindow(data, bounds)
    summary = summarize(data)
    if bounds is not None:
        summary["window"] = bounds.json
    keep = channel_filter(args.channel)
    summary["channels"] = {ch: e for ch, e in summary["channels"].items() if keep(ch)}
    if not summary["channels"]:
        raise CLIError(f"no channel matches {' or '.join(repr(p) for p in args.channel)} "
                       f"({len(data.series)} channels in {args.trace}; 'sysprof report --all' lists them)")
    show_all = args.all or bool(args.channel)
    summary["table"] = table_layout(summary, show_all)  # the rows the text shows; --json says the same
    phases = None
    if args.by:
        phases = by_phase(data, args.by)
        if not phases:
            raise CLIError(no_match_message(data, args.by))
    judged = judgement(data, phases=phases, total_seconds=summary["sampled_s"])
    plotted = None
    if args.plot:
        shaded = None  # Composer's batch spans where the trace has them
        if args.by:
            shaded = [s for spans in match_spans(data, args.by).values() for s in spans]
        elif bounds is not None and "step" in bounds.json:  # --steps: the steps chosen
            shaded = [s for s in data.spans if fnmatch.fnmatchcase(s.name, bounds.json["step"])]
        plotted = plot_trace(data, args.plot, channel_filter=keep if args.channel else None,
                             title=summary.get("command") or args.trace, smooth_s=args.smooth, phases=shaded)
    from sysprof.trace.gpu_events import xid_lines
    xids = xid_lines(data.instants, whole.start_ts)  # GPU XID errors (critical), one line each, in the window
    from sysprof.sampling.gpu_refresh import refresh_line
    refresh = refresh_line(whole.instants)  # each GPU channel's refresh period, measured at start
    clocks = reason_shares(data)  # per GPU: each clock event reason's share of time, and the violation counters'
    if args.json:
        summary["gpu_xid_events"] = xids
        summary["gpu_clock_reasons"] = jsonable(clocks)
        if refresh is not None:
            summary["gpu_refresh_at_start"] = refresh
        summary["verdict"] = jsonable(judged)
        if phases is not None:
            summary["phases"] = jsonable(phases_json(_kept(phases, keep)))
        json.dump(summary, sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        print_verdict(judged)
        name = f"{args.trace} .. {args.parts[-1]} ({len(args.parts) + 1} parts)" if args.parts else args.trace
        if bounds is not None:
            name += f", {bounds.label}"
        print_table(summary, name, show_all=show_all)
        for line in reason_lines(data, clocks):  # the names of gpu/<i>/clocks_event_reasons' bits
            print(line)
        if refresh is not None:
            print(refresh)
        if xids:
            print(f"\nGPU XID errors ({len(xids)}):")
            print("\n".join(f"  {line}" for line in xids))
        if phases is not None:
            print()
            print_phases(phases, keep if args.channel else is_key_channel)
        if plotted is not None:
            print(f"\nplot: {args.plot} ({plotted} series)")
    if plotted is not None and plotted.left_out:
        print(f"plot {plotted.left_out_text()}", file=sys.stderr if args.json else sys.stdout)
    return 0


def _check_report_args(args) -> None:
    """What ``report`` can check before reading the trace: the options' combinations, the plot's output (its name
    says a format matplotlib writes; its folder exists and is writable), matplotlib itself."""
    if args.smooth is not None and not args.plot:
        raise CLIError("--smooth applies to --plot FILE.png (see 'sysprof report --help')", status=2)
    if args.steps is not None and (args.window_from is not None or args.window_to is not None):
        raise CLIError("--steps is a window of its own; give it or --from/--to, not both", status=2)
    if args.step and args.steps is None:
        raise CLIError("--step names the steps of --steps (or --ranks); give --steps A-B", status=2)
    if args.plot:
        require_matplotlib()
        try:
            check_plot_name(args.plot)
        except ReportError as e:
            raise CLIError(str(e), status=2) from None
        check_output_path(args.plot, "plot")


def _kept(phases, keep):
    """The phases with only the channels ``-k`` keeps."""
    return [dataclasses.replace(p, channels={ch: c for ch, c in p.channels.items() if keep(ch)}) for p in phases]


def _read_parts(paths) -> TraceData:
    """One trace, or the parts of one ``record --max-size`` recording read as one, streamed into a
    :class:`TraceData` (its counters' columns: the events are not kept)."""
    from sysprof.trace.load import iter_events

    for path in paths:
        if not os.path.exists(path):
            raise CLIError(f"no such file: {path}")
    parts = set()

    def events():
        for path in paths:
            info = None
            for event in _events_or_fail(iter_events(path), path):
                if info is None and isinstance(event, dict) and event.get("name") == START_EVENT:
                    start = event.get("args")
                    part = start.get("part") if isinstance(start, dict) else None
                    info = ((part.get("recording_id"), part.get("index")),) if isinstance(part, dict) else (None,)
                yield event
            parts.add(info[0] if info is not None else None)

    data = TraceData(events())
    if len(paths) > 1 and (None in parts or len(parts) != len(paths) or len({r for r, _ in parts}) != 1):
        raise CLIError("several TRACEs are read only as the distinct parts of one recording (record --max-size); "
                       "--ranks compares ranks' traces", status=2)
    return data


def _events_or_fail(events, path):
    """``events`` (a reader's stream of ``path``), its errors as the one-line ``cannot read`` error."""
    try:
        yield from events
    except (OSError, ValueError, EOFError, ImportError) as e:
        raise CLIError(f"cannot read {path}: {e}") from None


def _read_trace_or_fail(read_trace, path):
    if not os.path.exists(path):
        raise CLIError(f"no such file: {path}")
    try:
        return read_trace(path)
    except (OSError, ValueError, EOFError, ImportError) as e:
        raise CLIError(f"cannot read {path}: {e}") from None


def cmd_repair(args) -> int:
    _import_sysprof()
    from sysprof.trace.chrome import TraceBusyError, repair_trace

    if not os.path.exists(args.trace):
        raise CLIError(f"no such file: {args.trace}")
    if _perfetto_repair(args.trace):
        return 0
    try:
        done = repair_trace(args.trace)
    except TraceBusyError as e:
        who = f"pid {e.pid}" if e.pid else "another process"
        raise CLIError(f"cannot repair {args.trace}: it is locked by {who}, a recorder still writing it; "
                       f"repair it once that ends") from None
    except FileExistsError as e:
        raise CLIError(f"cannot repair {args.trace}: {e.strerror}") from None
    except (OSError, ValueError, EOFError) as e:
        raise CLIError(f"cannot repair {args.trace}: {e}") from None
    if done.replaced:
        print(f"{PROG}: {args.trace}: {done:,} events kept; the trace is closed")
        return 0
    lost = [f"{done.dropped:,} damaged event{'' if done.dropped == 1 else 's'} dropped"] if done.dropped else []
    if done.stopped:
        lost.append(done.stopped)
    print(f"{PROG}: {args.trace}: {done:,} events kept, {'; '.join(lost)}; wrote {done.output} "
          f"(the trace itself is left as it was)")
    return 0


def _perfetto_repair(path) -> bool:
    """``repair`` of a .pftrace: nothing to do (every flush ends on a whole packet; a truncated last packet is
    skipped by the reader): say so, with the events it holds. False for any other trace."""
    from sysprof.trace.perfetto import is_perfetto_path, read_events

    if not is_perfetto_path(path):
        return False
    n = len(_read_trace_or_fail(read_events, path))
    print(f"{PROG}: {path}: {n:,} events; nothing to repair (a .pftrace is readable as it is: a cut-off last "
          f"packet is skipped)")
    return True


#: the directory above the package: a source checkout when sysprof runs from one (an editable install)
_PACKAGE_PARENT = Path(__file__).resolve().parent.parent.parent


def _bench_script():
    """``benchmarks/run.py`` of a sysprof source checkout: the current directory's, else the one beside the
    package (an editable install); None after ``pip install .``. A checkout is told by its pyproject.toml
    naming the project sysprof, so another project's benchmarks/run.py is never run."""
    for root in (Path.cwd(), _PACKAGE_PARENT):
        script = root / "benchmarks" / "run.py"
        try:
            if script.is_file() and re.search(r'^name\s*=\s*"sysprof"', (root / "pyproject.toml").read_text(), re.M):
                return script
        except (OSError, UnicodeDecodeError):
            continue
    return None


def cmd_bench(args) -> int:
    script = _bench_script()
    if script is None:
        raise CLIError(f"bench needs a source checkout (benchmarks/run.py not found in {os.getcwd()})", status=2)
    rest = list(args.bench_args or [])
    if rest and rest[0] == "--":
        rest = rest[1:]
    return subprocess.call([sys.executable, str(script), *rest])
