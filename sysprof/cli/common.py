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


_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE_RE = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)(?:i?b)?\s*")


def parse_size(text: str) -> int:
    """Parse ``500M``, ``2G``, ``1GiB``, ``64k``, ``1048576`` (bytes) into bytes (> 0); K, M, G, T are powers of
    1024, with or without ``B`` / ``iB``."""
    m = _SIZE_RE.fullmatch(str(text).lower())
    if not m:
        raise argparse.ArgumentTypeError(f"invalid size {text!r} (examples: 500M, 2G, 1GiB, 65536)")
    value = int(float(m.group(1)) * _SIZE_UNITS[m.group(2)])
    if value <= 0:
        raise argparse.ArgumentTypeError(f"size must be > 0, got {text!r}")
    return value


def parse_free(text: str) -> tuple:
    """Parse ``--min-free``: a size (:func:`parse_size`), a share of the file system (``5%``) or ``0`` (no
    floor); returns ``(bytes, fraction)``, one of them 0."""
    t = str(text).strip()
    if t == "0":  # no guard
        return 0, 0.0
    if t.endswith("%"):
        try:
            pct = float(t[:-1])
        except ValueError:
            pct = float("nan")
        if not 0 <= pct <= 100:
            raise argparse.ArgumentTypeError(f"invalid share {text!r} (0% to 100%)")
        return 0, pct / 100
    return parse_size(t), 0.0


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
