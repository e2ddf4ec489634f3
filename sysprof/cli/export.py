"""``sysprof export TRACE -o OUT``: a trace (any format :func:`sysprof.read_trace` reads) as a Parquet or CSV
table, a row per sampled time and a column per channel (:mod:`sysprof.frames`).

The format follows ``--format``, else the output's name: ``.parquet`` / ``.pq`` Parquet, ``.csv`` CSV; ``-o -``
writes CSV to stdout. The whole table is built before the output is touched, so a bad trace never leaves a
half-written or emptied file; the output is then created exclusively, or with ``--force`` an existing file is
emptied and rewritten, never through a symbolic link (the ``record`` output's rules, :class:`~.output._Output`),
and never the trace itself.
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
        from ..frames import csv_text, parquet_bytes, read_trace, require_pandas, require_pyarrow

        require_pandas()  # what the output needs, before the trace is read
        if fmt == "parquet":
            require_pyarrow()

        df = read_trace(args.trace, changes=getattr(args, "changes", False))
        if args.channel:
            keep = channel_filter(args.channel)
            chosen = [c for c in df.columns if keep(c)]
            if not chosen:
                raise CLIError(f"no channel matches {' or '.join(repr(p) for p in args.channel)} "
                               f"({df.shape[1]} channels in {args.trace})")
            attrs = dict(df.attrs)
            df = df[chosen]
            df.attrs.update(attrs, units={c: attrs.get("units", {}).get(c, "") for c in chosen})
        payload = parquet_bytes(df) if fmt == "parquet" else csv_text(df).encode()
    except ImportError as e:
        raise CLIError(str(e)) from None
    except (OSError, ValueError, EOFError) as e:
        raise CLIError(f"cannot read {args.trace}: {e}") from None
    if out == "-":
        sys.stdout.flush()
        sys.stdout.buffer.write(payload)
        sys.stdout.buffer.flush()
        return 0
    target = _Output(out, args.force)
    try:
        target.truncate()
        view = memoryview(payload)
        while view:
            view = view[os.write(target.fd, view):]
    except OSError as e:
        target.discard()
        raise CLIError(f"cannot write {out}: {e.strerror or e}") from None
    target.close()
    if not args.quiet:
        print(f"{PROG}: {out}: {df.shape[0]:,} rows x {df.shape[1]} channels, {len(payload):,} bytes ({fmt})",
              file=sys.stderr)
    return 0
