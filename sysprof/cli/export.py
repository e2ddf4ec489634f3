"""``sysprof export TRACE -o OUT``: a trace (any format :func:`sysprof.read_trace` reads) as a Parquet or CSV
table, a row per sampled time and a column per channel (:mod:`sysprof.frames`).

The format follows ``--format``, else the output's name: ``.parquet`` / ``.pq`` Parquet, ``.csv`` CSV; ``-o -``
writes CSV to stdout. The trace is read whole (streamed into its counters' columns) and checked before the output
is touched, so a bad trace never leaves a half-written or emptied file; the output is then created exclusively, or
with ``--force`` an existing file is emptied and rewritten, never through a symbolic link (the ``record`` output's
rules, :class:`~.output._Output`), and never the trace itself. The table is written in blocks of rows
(:meth:`sysprof.frames.TraceFrame.blocks`), so a long trace never becomes one frame in memory.
"""
from __future__ import annotations

import os
import sys

from .common import PROG, CLIError, _import_sysprof, check_output_path

FORMATS = ("parquet", "csv")
_SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}


def _format(args) -> str:
    if args.format:
        fmt = args.format
    elif args.output == "-":
        fmt = "csv"
    else:
        fmt = _SUFFIXES.get(os.path.splitext(args.output)[1].lower())
        if fmt is None:
            raise CLIError(f"cannot tell the format of {args.output} (name it .parquet or .csv, or give "
                           f"--format {' or '.join(FORMATS)})", status=2)
    if fmt == "parquet" and args.output == "-":
        raise CLIError("Parquet is not written to stdout; give -o FILE.parquet (or --format csv)", status=2)
    return fmt


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def cmd_export(args) -> int:
    _import_sysprof()
    from ..report import channel_filter
    from .output import _Output

    fmt = _format(args)
    out = args.output
    if out != "-":
        if os.path.lexists(out) and not args.force:
            raise CLIError(f"output exists: {out} (use --force to overwrite)")
        if _same_file(out, args.trace):
            raise CLIError(f"output {out} is the trace itself; give another name")
        check_output_path(out)  # before the trace is read: reading a large one takes a while
    if not os.path.exists(args.trace):
        raise CLIError(f"no such file: {args.trace}")
    try:
        from ..frames import (TraceFrame, read_trace_data, require_pandas, require_pyarrow, write_csv,
                              write_parquet)
        from ..report.model import ReportError

        require_pandas()  # what the output needs, before the trace is read
        if fmt == "parquet":
            require_pyarrow()
        data = read_trace_data(args.trace)
        try:
            table = TraceFrame(data, changes=getattr(args, "changes", False))
        except ReportError as e:
            raise ReportError(f"{args.trace}: {e}") from None
        if args.channel:
            keep = channel_filter(args.channel)
            n = len(table.columns)
            table.select(keep)
            if not table.columns:
                raise CLIError(f"no channel matches {' or '.join(repr(p) for p in args.channel)} "
                               f"({n} channels in {args.trace})")
    except ImportError as e:
        raise CLIError(str(e)) from None
    except (OSError, ValueError, EOFError) as e:
        raise CLIError(f"cannot read {args.trace}: {e}") from None
    if fmt == "parquet":
        write = write_parquet
    else:
        unit = table.time_unit()  # the whole table's: every block writes its times alike

        def write(blocks, out):
            write_csv(blocks, out, unit)
    if out == "-":
        sys.stdout.flush()
        write(table.blocks(), sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return 0
    target = _Output(out, args.force)
    try:
        target.truncate()
        with os.fdopen(os.dup(target.fd), "wb") as f:
            write(table.blocks(), f)
            size = f.tell()
    except (OSError, ValueError) as e:
        target.discard()
        raise CLIError(f"cannot write {out}: {getattr(e, 'strerror', None) or e}") from None
    target.close()
    if not args.quiet:
        print(f"{PROG}: {out}: {table.rows:,} rows x {len(table.columns)} channels, {size:,} bytes ({fmt})",
              file=sys.stderr)
    return 0
