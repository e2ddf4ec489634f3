"""The report as text: number formatting (SI prefixes, seconds, per-unit values) and the per-channel table."""
from __future__ import annotations

import math
import sys

from ..sampling.budget import summary_line

__all__ = ["format_seconds", "format_si", "human_bytes", "format_value", "print_table", "print_verdict",
           "print_phases"]


def format_seconds(s: float) -> str:
    if s >= 1:
        return f"{s:.4g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.4g} ms"
    return f"{s * 1e6:.4g} us"


_SI_PREFIXES = ("", "k", "M", "G", "T", "P", "E")


def format_si(v: float, unit: str) -> str:
    """``v`` with a decimal SI prefix (k = 1e3, M = 1e6, G = 1e9, ...) and ``unit``: ``1.10 GHz``, ``2.50 GB``,
    ``512 B``, ``0.5 Hz``. The one formatter of scaled units in tables, status lines and headers (plots use
    matplotlib's ``EngFormatter``, also decimal)."""
    if v is None or not math.isfinite(v):
        return "nan"
    sign = "-" if v < 0 else ""
    n = abs(float(v))
    i = 0
    while round(n, 2) >= 1000 and i < len(_SI_PREFIXES) - 1:
        n /= 1000
        i += 1
    return f"{sign}{n:.4g} {unit}" if i == 0 else f"{sign}{n:.2f} {_SI_PREFIXES[i]}{unit}"


def human_bytes(n: float) -> str:
    """A byte count in decimal units (kB, MB, GB = 1e9 B), as in plots and the README."""
    return format_si(n, "B")


def format_value(v, unit: str) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "nan"
    if unit in ("B", "B/s", "Hz"):
        return format_si(v, unit)
    if unit == "%":
        return f"{v:.1f}"
    if float(v).is_integer() and abs(v) < 1e15:
        return f"{int(v):d}"
    if abs(v) >= 1e4:
        return f"{v:.0f}"
    return f"{v:.4g}"


def _is_boring(entry) -> bool:
    """All zero (or no value at all): hidden from the table unless --all."""
    return entry["valid"] == 0 or (entry["min"] == 0 and entry["max"] == 0)


def print_table(s: dict, path: str, show_all: bool) -> None:
    def opt(v, fmt):
        return "n/a" if v is None else fmt(v)

    out = sys.stdout
    note = ""
    if not s.get("recorded", True):
        note = "  (not a sysprof record trace: no recording metadata)"
    elif s["truncated"]:
        note = "  (truncated: no stop event; stats as of the last flush)"
    out.write(f"trace:      {path}{note}\n")
    if s.get("command"):
        out.write(f"command:    {s['command']}" + (f"  (exit status {s['returncode']})" if s.get("returncode") is not None else "") + "\n")
    if s.get("recorded", True):
        out.write(f"backend:    {s.get('backend') or 'n/a'}   version: {s.get('version') or 'n/a'}\n")
    iv = s.get("interval_s")
    if iv is None:
        interval = "interval n/a"
    elif s.get("interval_source") == "median spacing":
        interval = f"median spacing {format_seconds(iv)}"
    else:
        interval = f"interval {format_seconds(iv)} = {format_si(1 / iv, 'Hz')}"
    windows = ""
    if (s.get("windows") or 0) > 1:
        windows = f" ({s['windows']} sampling windows, {s['sampled_s']:.3f} s sampled)"
    out.write(f"samples:    {s['samples']:,} over {s['duration_s']:.3f} s{windows}; effective rate "
              f"{opt(s['effective_rate_hz'], lambda r: f'{r:,.1f} Hz')} ({interval})\n")
    if any(s.get(k) is not None for k in ("dropped", "missed_deadlines", "sample_ns_mean")):
        out.write(f"dropped:    {opt(s.get('dropped'), lambda v: f'{int(v):,}')}   missed deadlines: "
                  f"{opt(s.get('missed_deadlines'), lambda v: f'{int(v):,}')}   sample cost: mean "
                  f"{opt(s.get('sample_ns_mean'), lambda v: f'{v / 1e3:.1f} us')}, p99 "
                  f"{opt(s.get('sample_ns_p99'), lambda v: f'{v / 1e3:.1f} us')}\n")
    own = summary_line(s)  # sysprof's own CPU and the budget's interval changes
    if own:
        out.write(f"sysprof:    {own}\n")
    if s.get("markers_dropped"):
        out.write(f"markers:    {int(s.get('markers') or 0):,} received, {int(s['markers_dropped']):,} dropped "
                  "(see problems: markers)\n" if "markers" in (s.get("errors") or {}) else
                  f"markers:    {int(s.get('markers') or 0):,} received, {int(s['markers_dropped']):,} dropped\n")
    unavailable = set(s.get("unavailable") or ())
    for src, why in sorted((s.get("errors") or {}).items()):  # a source without channels, else part of one
        out.write(f"{'unavailable' if src in unavailable else 'problems'}: {src}: {why}\n")
    rows = []
    hidden = 0
    for ch, e in s["channels"].items():
        if not show_all and _is_boring(e):
            hidden += 1
            continue
        unit = e["unit"]
        rows.append([ch, unit or "-"] + [format_value(e[k], unit) for k in ("min", "mean", "p50", "p95", "max")])
    header = ["channel", "unit", "min", "mean", "p50", "p95", "max"]
    widths = [max([len(header[i])] + [len(r[i]) for r in rows]) for i in range(len(header))]
    out.write("\n")
    out.write("  ".join(h.ljust(widths[i]) if i < 2 else h.rjust(widths[i]) for i, h in enumerate(header)).rstrip() + "\n")
    for r in rows:
        out.write("  ".join(c.ljust(widths[i]) if i < 2 else c.rjust(widths[i]) for i, c in enumerate(r)).rstrip() + "\n")
    if hidden:
        out.write(f"({hidden} channels that were always 0 or never valid are hidden; --all shows them)\n")


def print_verdict(verdict) -> None:
    """The verdict's lines (:func:`sysprof.report.verdict.verdict`), before the table."""
    out = sys.stdout
    out.write("verdict:\n")
    for v in verdict:
        out.write(f"  {v['text']}\n")
    out.write("\n")


def _with_unit(v: float, unit: str) -> str:
    """``v`` and its unit: SI-prefixed for B, B/s, Hz and J, seconds scaled, others plain."""
    if unit == "s":
        return format_seconds(v) if v > 0 else "0 s"
    if unit == "J":
        return format_si(v, unit)
    text = format_value(v, unit)
    return text if unit in ("B", "B/s", "Hz") or not unit else f"{text} {unit}"


def _amount_text(c) -> str:
    if c.amount is None or not math.isfinite(c.amount):
        return ""
    return f" ({_with_unit(c.amount, c.amount_unit or '')})"


def print_phases(phases, keep, width: int = 110) -> None:
    """One row per phase: spans, total and mean duration, then its channels that ``keep`` accepts (all-zero ones
    left out) as ``channel mean unit (amount)``, wrapped under the row."""
    out = sys.stdout
    names = [p.name for p in phases]
    w = max([len("phase")] + [len(n) for n in names])
    out.write(f"{'phase'.ljust(w)}  {'count':>7}  {'total':>10}  {'mean':>10}\n")
    for p in phases:
        out.write(f"{p.name.ljust(w)}  {p.count:>7,}  {format_seconds(p.duration_seconds):>10}  "
                  f"{format_seconds(p.mean_seconds):>10}\n")
        items = []
        for ch, c in p.channels.items():
            if not keep(ch) or (c.mean == 0 and not c.amount):
                continue
            items.append(f"{ch} {_with_unit(c.mean, c.unit)}{_amount_text(c)}")
        line = "   "
        for item in items:
            if len(line) + len(item) + 2 > width and line.strip():
                out.write(line.rstrip("; ") + "\n")
                line = "   "
            line += f" {item};"
        if line.strip():
            out.write(line.rstrip(";") + "\n")
