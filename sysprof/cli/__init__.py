"""The ``sysprof`` command line: record a workload, report on a trace, plot it, inspect the machine.

    sysprof record [-o TRACE] [--interval 1ms] [SOURCE FLAGS: --cpu --per-cpu --memory ... | --all]
                   [--duration SECONDS] [--kill-after SECONDS] [--capacity ROWS] [--max-size SIZE]
                   [--min-free SIZE|PCT] [-- COMMAND ARGS...]
    sysprof report TRACE [PART...] [--json] [--plot FILE.png [--smooth TIME|0]] [-k PATTERN] [--all]
                   [--from TIME] [--to TIME] [--steps A-B [--step GLOB]]
    sysprof info [--json]
    sysprof repair TRACE
    sysprof export TRACE -o OUT.parquet|OUT.csv|- [--format parquet|csv] [-k PATTERN] [--force]
    sysprof serve [--listen 127.0.0.1:9464] [--window 15s] [SOURCE FLAGS] [--pid PID]   (Prometheus /metrics)
    sysprof bench [ARGS...]          (runs benchmarks/run.py of a source checkout)

Trace format (Chrome trace-event JSON, opens in ui.perfetto.dev and chrome://tracing), written by
``sysprof.trace.chrome.ChromeTraceWriter``:

* ``"ph": "M"`` ``process_name`` events naming the system-counter process (sysprof's own pid) and,
  with ``--process`` or ``--process-tree``, the followed command's pid (``PROGRAM (pid N)``).
* one ``"ph": "i"`` instant event named ``"sysprof start"`` whose args hold the recording metadata
  (``version``, ``command_line``, ``interval_s``, ``backend``, ``channels``, ``errors``, ...); the command line,
  every argument included, is written there and nowhere else (the followed process is named by its program);
* one ``"ph": "M"`` ``"sysprof units"`` event (``sysprof.trace.schema.units_event``) declaring the unit of
  every channel, from the registry; ``report`` reads units from it;
* counter events (``ph`` ``C``), one per channel group and sample row: a channel ``a/b/c`` is written as
  ``{"name": "a/b", "args": {"c": value}}``. A NaN (unknown) or +/-inf value (e.g. a cgroup limit of
  ``max``) is left out of its event (``chrome_trace.counter_args``); an event with no value left is not
  written, except as ``"args": {}`` where a group that had values turns all-unknown, so ``report`` knows
  the old values stopped holding there. ``ts`` is in microseconds since
  the Unix epoch (an integer, or a float with sub-microsecond digits when the interval is below 1 ms);
* a ``"sysprof"`` counter event at each flush with the sampler's running ``taken``/``dropped``/
  ``missed_deadlines``, so a truncated trace still tells how much was lost;
* a final ``"ph": "i"`` event ``"sysprof stop"`` whose args hold the sampler's final ``stats``,
  ``samples_written`` (= taken - dropped), the ``signals`` received, the ``signals_sent`` to the command
  and its ``returncode``; ``stopped_writing`` (``reason``, ``available_bytes``, ``min_free_bytes``) when
  ``--min-free`` ended the trace early.

With ``--max-size`` each part (``TRACE.partNNNN.EXT``) is such a trace: its start event's args add ``part``
(``index``, ``recording_id``, ``max_size_bytes``; the other metadata are the recording's), its stop event's
``part`` (``index``, ``recording_id``, ``first_sample``: the recording's samples before this part, ``next``:
the next part's name or None, ``removed``: parts removed so far) and its counts (``samples_written``, the
``stats``' ``taken``/``dropped``/``missed_deadlines``, the ``"sysprof"`` counter) are the part's own.

Modules: ``common`` (errors, time arguments), ``parser``, ``sources`` (the source flags and selection, from the
registry), ``record`` (``record``'s run), ``child`` (the recorded command and signals), ``output`` (the trace
file's policy), ``info``, ``commands`` (``report``, ``repair``, ``bench``), ``export``.
"""
from __future__ import annotations

import os
import sys
import warnings

from ..report import ReportError
from ..trace.chrome import TraceDamageWarning
from .common import PROG, CLIError, _warn, parse_time  # noqa: F401
from .parser import build_parser, join_negative_values
from .sources import _sources_from_args  # noqa: F401
from .record import _default_capacity, cmd_record  # noqa: F401
from .output import _Output  # noqa: F401
from .info import cmd_info, gather_info  # noqa: F401
from .commands import cmd_bench, cmd_repair, cmd_report  # noqa: F401
from .export import cmd_export  # noqa: F401

__all__ = ["main", "build_parser", "parse_time", "CLIError", "gather_info"]


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """``warnings.showwarning`` of the command line: a trace reader's warning as ``sysprof: warning: ...``."""
    if issubclass(category, TraceDamageWarning):
        _warn(str(message))
    else:
        _SHOW_WARNING(message, category, filename, lineno, file, line)


_SHOW_WARNING = warnings.showwarning


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = build_parser()
        args, extras = parser.parse_known_args(join_negative_values(parser, argv))
        if extras and getattr(args, "subcommand", None) == "bench":  # everything goes to benchmarks/run.py
            args.bench_args, extras = extras + list(args.bench_args or []), []
        if extras:
            sub = f"{PROG} {args.subcommand}" if getattr(args, "subcommand", None) else PROG
            raise CLIError(f"unrecognized arguments: {' '.join(extras)} (see '{sub} --help')", status=2)
        if getattr(args, "func", None) is None:
            parser.print_help(sys.stderr)
            return 2
        with warnings.catch_warnings():  # a damaged trace's warnings as one line each
            warnings.simplefilter("always", TraceDamageWarning)
            warnings.showwarning = _show_warning
            return int(args.func(args) or 0)
    except (CLIError, ReportError) as e:
        print(f"{PROG}: {e}", file=sys.stderr, flush=True)
        return getattr(e, "status", 1)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr, flush=True)
        return 130
    except BrokenPipeError:
        try:  # `sysprof report x | head`: stdout went away; say nothing more
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 141
    except SystemExit:
        raise
    except Exception as e:  # never a traceback, unless asked for
        if os.environ.get("SYSPROF_DEBUG"):
            raise
        print(f"{PROG}: internal error: {type(e).__name__}: {e} (set SYSPROF_DEBUG=1 for a traceback)",
              file=sys.stderr, flush=True)
        return 70


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
