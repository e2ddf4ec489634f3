"""What every ``sysprof`` command shares: its error type, time arguments, the version, warnings."""
from __future__ import annotations

import argparse
import math
import re
import sys

PROG = "sysprof"


class CLIError(Exception):
    """An error reported as one line ``sysprof: <message>`` and exit status ``status``."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


_TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0,
               "m": 60.0, "min": 60.0, "h": 3600.0}
_TIME_RE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-z\u00b5]*)\s*")


def parse_time(text: str) -> float:
    """Parse ``1ms``, ``500us``, ``0.5s``, ``2`` (seconds), ``1m`` into seconds (> 0)."""
    m = _TIME_RE.fullmatch(str(text).lower())
    if not m or m.group(2) not in ("",) + tuple(_TIME_UNITS):
        raise argparse.ArgumentTypeError(f"invalid time {text!r} (examples: 1ms, 500us, 0.5s, 2)")
    value = float(m.group(1)) * _TIME_UNITS.get(m.group(2), 1.0)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"time must be > 0, got {text!r}")
    return value


def _version() -> str:
    try:
        import sysprof

        v = getattr(sysprof, "__version__", None)
        if v:
            return str(v)
    except Exception:  # pragma: no cover - the CLI must still say something
        pass
    try:
        from importlib.metadata import version

        return version("sysprof")
    except Exception:
        return "unknown"


def _import_sysprof():
    try:
        import sysprof
        from sysprof.trace.chrome import ChromeTraceWriter, read_trace, repair_trace  # noqa: F401
    except ImportError as e:
        raise CLIError(f"cannot import the sysprof package: {e}") from None
    return sysprof


def _warn(msg: str, quiet: bool = False) -> None:
    if not quiet:
        print(f"{PROG}: warning: {msg}", file=sys.stderr, flush=True)
