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
_TIME_RE = re.compile(r"\s*([-+]?)\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-z\u00b5]*)\s*")


def parse_signed_time(text: str) -> float:
    """Parse a time that may be negative or 0: ``-10s``, ``+1.5m``, ``0``, ``2`` (seconds), in seconds."""
    m = _TIME_RE.fullmatch(str(text).lower())
    if not m or m.group(3) not in ("",) + tuple(_TIME_UNITS):
        raise argparse.ArgumentTypeError(f"invalid time {text!r} (examples: 1ms, 500us, 0.5s, 2)")
    value = float(m.group(2)) * _TIME_UNITS.get(m.group(3), 1.0)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"invalid time {text!r} (examples: 1ms, 500us, 0.5s, 2)")
    return -value if m.group(1) == "-" else value


def parse_time(text: str) -> float:
    """Parse ``1ms``, ``500us``, ``0.5s``, ``2`` (seconds), ``1m`` into seconds (> 0); ``-5ms`` or ``0`` is
    refused with "must be > 0"."""
    value = parse_signed_time(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"time must be > 0, got {text!r}")
    return value


def time_at_least(floor: float, why: str):
    """An argparse type: :func:`parse_time`, and at least ``floor`` seconds (``why`` says whose floor)."""
    def parse(text: str) -> float:
        value = parse_time(text)
        if value < floor * (1 - 1e-9):
            from ..report.table import format_seconds

            raise argparse.ArgumentTypeError(f"must be at least {format_seconds(floor)} ({why}), got {text!r}")
        return value
    parse.__name__ = "time"  # argparse names the type in its messages
    return parse


def parse_interval(text: str) -> float:
    """``--interval``: :func:`parse_time`, at least the sampler's shortest interval (``MIN_INTERVAL_S``). An
    interval shorter than this machine can keep is warned about while recording (``record.MISSED_SHARE_WARN``)."""
    from ..sampling.sampler import MIN_INTERVAL_S

    return time_at_least(MIN_INTERVAL_S, "the sampler's shortest interval")(text)


def int_in(lo: int, hi: int):
    """An argparse type: an integer in ``[lo, hi]`` (``hi`` None: no upper bound)."""
    def parse(text: str) -> int:
        try:
            value = int(str(text).strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
        if value < lo or (hi is not None and value > hi):
            bound = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
            raise argparse.ArgumentTypeError(f"must be {bound}, got {text!r}")
        return value
    parse.__name__ = "int"
    return parse


_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE_RE = re.compile(r"\s*(-?)\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)(?:i?b)?\s*")


def parse_size(text: str) -> int:
    """Parse ``500M``, ``2G``, ``1GiB``, ``64k``, ``1048576`` (bytes) into bytes (> 0); K, M, G, T are powers of
    1024, with or without ``B`` / ``iB``."""
    m = _SIZE_RE.fullmatch(str(text).lower())
    if not m:
        raise argparse.ArgumentTypeError(f"invalid size {text!r} (examples: 500M, 2G, 1GiB, 65536)")
    value = int(float(m.group(2)) * _SIZE_UNITS[m.group(3)])
    if value <= 0 or m.group(1):
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


def check_output_path(path: str, what: str = "output") -> None:
    """Before any long work: ``path`` can be written as a new or replaced file. A directory at ``path`` is a
    usage error (status 2); a missing folder, a folder that is a file, or one without write permission (for a new
    file; an existing file's own permission otherwise) is status 1, as the write itself would say. The write still
    checks (the file system can refuse later: a full disk, a read-only mount); this only says it first."""
    import os

    if os.path.isdir(path):
        raise CLIError(f"{what} is a directory: {path}", status=2)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.exists(folder):
        raise CLIError(f"cannot write {path}: no such directory: {os.path.dirname(path) or '.'}")
    if not os.path.isdir(folder):
        raise CLIError(f"cannot write {path}: {os.path.dirname(path)} is not a directory")
    exists = os.path.lexists(path)
    if not os.access(path if exists and not os.path.islink(path) else folder, os.W_OK):
        raise CLIError(f"cannot write {path}: permission denied")
