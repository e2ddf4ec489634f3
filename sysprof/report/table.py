"""The report as text: number formatting (SI prefixes, seconds, per-unit values) and the per-channel table."""
from __future__ import annotations

import math
import sys

from ..sampling.budget import summary_line
from .phases import _TOTAL_KINDS

__all__ = ["format_seconds", "format_si", "human_bytes", "format_value", "print_table", "print_verdict",
           "print_phases", "table_layout", "problem_lines", "short_problem", "TOTAL_KINDS", "NOT_STATISTICS"]


def format_seconds(s: float) -> str:
    if s >= 1:
        return f"{s:.4g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.4g} ms"
    return f"{s * 1e6:.4g} us"


def round_up_125(x: float) -> float:
    """``x`` (> 0) rounded up to 1, 2 or 5 of its decade: 0.23 -> 0.5, 3 -> 5, 7 -> 10, 1e-5 -> 1e-5."""
    decade = 10.0 ** math.floor(math.log10(x))
    return next(m * decade for m in (1, 2, 5, 10) if m * decade >= x * (1 - 1e-9))


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


#: registry kinds of cumulative totals: the table gives their increase over the trace, not statistics of the total
TOTAL_KINDS = _TOTAL_KINDS
#: channels that are ids, bitmasks or clock readings, not quantities: never statistics (``--json`` has them;
#: ``sysprof report`` names the process tree's members, XIDs and clock event reasons in lines of their own)
NOT_STATISTICS = ("process_tree/<slot>/pid", "gpu/<index>/xid_last", "gpu/<index>/clocks_event_reasons",
                  "gpu/<index>/reading_time_seconds")
#: the table's columns after channel and unit; a total fills only ``amount``
COLUMNS = ("min", "mean", "p95", "max", "amount")
#: a line of the table's header (a problem, the members) is cut to this many characters
LINE_WIDTH = 120
#: members named per command name, and command names, in the process tree's line
_MEMBER_PIDS, _MEMBER_NAMES = 4, 6


def _pattern_of(channel: str):
    from sysprof.sampling.registry import channel_spec

    spec = channel_spec(channel)
    return spec.pattern if spec is not None else None


def _is_member(channel: str) -> bool:
    """A per-member series of process_tree (``process_tree/<slot>/...``): a slot holds one process after another."""
    parts = channel.split("/")
    return len(parts) == 3 and parts[0] == "process_tree" and parts[1].isdigit()


def _carriers(channels) -> dict:
    """``{total: the rows that carry its increase}``: its rate (whose amount is the total's increase:
    :func:`sysprof.report.stats.summarize`) and the
    shares computed from it (:func:`sysprof.report.shares.counters_of`: ``cpu/user_percent``'s amount is the
    CPU-seconds of ``cpu/user_seconds_total``; ``cpu/0/percent`` sums the modes of ``cpu/0/*_seconds_total``)."""
    from .shares import counters_of
    from .stats import rate_names

    out = {}
    for ch in channels:
        for counter in counters_of(ch):
            out.setdefault(counter, []).append(ch)
    for ch in channels:
        for rate in rate_names(ch):
            if rate in channels:
                out.setdefault(ch, []).append(rate)
    return out


def table_layout(s: dict, show_all: bool) -> dict:
    """Which of the summary's channels the table shows, under which source's section, and why the others are
    not shown (``report --json``'s ``"table"``, the same as the text):

    ``{"columns": [...], "sections": [{"source", "title", "rows": [channel, ...], "facts": [text, ...]}],
    "hidden": {"idle": n, "carried": n, "members": n}, "not_statistics": [channel, ...]}``

    A channel is hidden (``--all``, or a ``-k`` that matches it, shows it) when it was always 0 or never valid,
    or is a total that did not increase (``idle``); when it is a total whose increase a shown row's amount
    already gives (``carried``: a rate's integral, a CPU share's CPU-seconds); when it is a per-member series of
    the process tree (``members``: a slot's statistics mix the processes that held it; the members are named in
    the section's facts). Pids, XID numbers, clock event bitmasks and reading times are never statistics."""
    from sysprof.sampling.registry import SOURCES

    channels = s["channels"]
    idle, carried, members, labels = [], [], [], []
    shown = {}
    for ch, e in channels.items():
        if _pattern_of(ch) in NOT_STATISTICS:
            labels.append(ch)
        elif show_all:
            shown[ch] = e
        elif _is_boring(e) or (e.get("kind") in TOTAL_KINDS and not e.get("amount")):
            idle.append(ch)
        elif _is_member(ch):
            members.append(ch)
        else:
            shown[ch] = e
    if not show_all:
        carriers = _carriers(shown)
        for ch in [c for c, e in shown.items() if e.get("kind") in TOTAL_KINDS and carriers.get(c)]:
            carried.append(ch)
            del shown[ch]
    order = {name: i for i, name in enumerate(SOURCES)}
    sections = {}
    for ch, e in shown.items():
        sections.setdefault(e.get("source") or ch.split("/", 1)[0], []).append(ch)
    tree = any(ch.startswith("process_tree/") for ch in channels)
    members_text = _members_text(s.get("process_tree_members") or []) if tree else ""
    if members_text:
        sections.setdefault("process_tree", [])
    out = []
    for src in sorted(sections, key=lambda x: (order.get(x, len(order)), list(sections).index(x))):
        spec = SOURCES.get(src)
        out.append({"source": src, "title": f"{src} ({spec.file})" if spec is not None else src,
                    "rows": sections[src], "facts": [members_text] if src == "process_tree" and members_text else []})
    return {"columns": ["channel", "unit", *COLUMNS], "sections": out,
            "hidden": {"idle": len(idle), "carried": len(carried), "members": len(members)},
            "not_statistics": labels}


def _members_text(members) -> str:
    """The process tree's members in one line: ``members: 5 processes: python3 (15323), bash (15334, 15341)``."""
    names = {}
    dropped = 0
    for m in members:
        if "dropped" in m:
            dropped += int(m["dropped"])
            continue
        names.setdefault(m.get("comm") or "pid", []).append(m["pid"])
    if not names:
        return ""
    count = sum(len(p) for p in names.values()) + dropped
    items = []
    for comm, pids in list(names.items())[:_MEMBER_NAMES]:
        pids = list(dict.fromkeys(pids))
        more = f", +{len(pids) - _MEMBER_PIDS}" if len(pids) > _MEMBER_PIDS else ""
        items.append(f"{comm} ({', '.join(str(p) for p in pids[:_MEMBER_PIDS])}{more})")
    if len(names) > _MEMBER_NAMES:
        items.append(f"{len(names) - _MEMBER_NAMES} more names")
    if dropped:
        items.append(f"{dropped} not recorded")
    return f"members: {count} process{'es' if count != 1 else ''}: " + ", ".join(items)


def _process_gone(source: str, text: str) -> bool:
    """An error saying only that the followed process is gone (``/proc/<pid>/stat: No such process``)."""
    from sysprof.sampling.registry import SOURCES

    spec = SOURCES.get(source)
    if spec is None or not spec.follows_pid:
        return False
    return all(("No such process" in p or "no longer exists" in p) for p in text.split("; "))


def problem_lines(errors: dict, unavailable, command_ended: bool = False) -> dict:
    """``{source: its problem, said once and short}`` (:func:`short_problem`): what the table's header shows;
    ``report --json`` has the full texts under ``"errors"``. A followed process found gone once the command ended
    (the recorder's last read after the exit) is no problem and left out."""
    out = {}
    for src, why in sorted(errors.items()):
        text = str(why)
        if command_ended and src not in unavailable and _process_gone(src, text):
            continue
        out[src] = short_problem(text, LINE_WIDTH - len(f"unavailable: {src}: "))
    return out


def _split(text: str, sep: str) -> list:
    """``text.split(sep)`` outside parentheses (``read NaN (FIELD: NOT_SUPPORTED)`` stays one piece)."""
    out, depth, start, i = [], 0, 0, 0
    while i < len(text):
        c = text[i]
        depth += (c == "(") - (c == ")" and depth > 0)
        if depth == 0 and text.startswith(sep, i):
            out.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    return out + [text[start:]]


def short_problem(text: str, width: int = 100) -> str:
    """A source's error text (its problems joined by ``"; "``, each ``subject: ...: reason``) said once and short:
    a part of a problem repeating the part before it is left out (``library (libx.so): libx.so: cannot open``),
    problems with the same reason are one (``dir/: a, b, c: No such file or directory``), and a text over
    ``width`` characters names fewer subjects (``a, b and 3 more: reason``), then keeps the problems that fit
    (``...; …``), else is cut at a word (``…``)."""
    groups = {}  # reason -> [subjects]
    for part in (p.strip() for p in _split(str(text), "; ")):
        if not part:
            continue
        segs = _split(part, ": ")
        segs = [seg for i, seg in enumerate(segs) if i == 0 or seg not in segs[i - 1]]
        subjects = groups.setdefault(segs[-1], [])
        subject = ": ".join(segs[:-1])
        if subject and subject not in subjects:
            subjects.append(subject)

    def items(k):
        out = []
        for reason, subjects in groups.items():
            named = ", ".join(subjects[:k]) + (f" and {len(subjects) - k} more" if len(subjects) > k else "")
            out.append(f"{named}: {reason}" if named else reason)
        return out

    most = max([len(x) for x in groups.values()] + [1])
    best = []
    for k in range(most, 0, -1):
        got = items(k)
        kept = []
        for item in got:
            if len("; ".join(kept + [item])) > width:
                break
            kept.append(item)
        if len(kept) == len(got):
            return "; ".join(kept)
        if len(kept) > len(best):
            best = kept
    if best:
        return "; ".join(best) + "; \u2026"
    return _cut("; ".join(items(1)), width)


def _amount_cell(e) -> str:
    amount = e.get("amount")
    if amount is None or not math.isfinite(amount):
        return ""
    return _with_unit(amount, e.get("amount_unit") or "")


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
    dec = s.get("decimation")
    if dec:  # record --flight-trace: a row per span of a faster recording
        sampled = dec.get("sampled_interval_s")
        modes = dec.get("modes") or {}
        out.write(f"decimated:  a row per {format_seconds(dec['every_s'])}"
                  + (f" of a recording at {format_seconds(sampled)}" if isinstance(sampled, (int, float)) else "")
                  + f": {modes.get('mean', 0)} rates and gauges as time-weighted means over the span, "
                  f"{modes.get('at', 0)} totals and identities at the row, {modes.get('any', 0)} bit masks OR-ed "
                  "(min, p95 and max of the means are over span means)\n")
    if any(s.get(k) is not None for k in ("dropped", "missed_deadlines", "sample_ns_mean")):
        out.write(f"dropped:    {opt(s.get('dropped'), lambda v: f'{int(v):,}')}   missed deadlines: "
                  f"{opt(s.get('missed_deadlines'), lambda v: f'{int(v):,}')}   sample cost: mean "
                  f"{opt(s.get('sample_ns_mean'), lambda v: f'{v / 1e3:.1f} us')}, p99 "
                  f"{opt(s.get('sample_ns_p99'), lambda v: f'{v / 1e3:.1f} us')}\n")
    own = summary_line(s)  # sysprof's own CPU and the budget's interval changes
    if own:
        out.write(f"sysprof:    {own}\n")
    problems = s.get("problems")
    if problems is None:  # a summary without them (an older caller): every error, shortened
        problems = problem_lines(s.get("errors") or {}, s.get("unavailable") or ())
    if s.get("markers_dropped"):
        out.write(f"markers:    {int(s.get('markers') or 0):,} received, {int(s['markers_dropped']):,} dropped "
                  "(see problems: markers)\n" if "markers" in problems else
                  f"markers:    {int(s.get('markers') or 0):,} received, {int(s['markers_dropped']):,} dropped\n")
    unavailable = set(s.get("unavailable") or ())
    for src, why in problems.items():  # a source without channels, else part of one
        out.write(f"{'unavailable' if src in unavailable else 'problems'}: {src}: {why}\n")
    if any(why.endswith("\u2026") for why in problems.values()):
        out.write("            (\u2026: cut short; report --json has the whole text under \"errors\")\n")
    layout = s.get("table") or table_layout(s, show_all)
    _write_rows(out, s["channels"], layout)


def _write_rows(out, channels, layout) -> None:
    """The sections of ``layout`` (:func:`table_layout`): a title line each, then its rows and facts, indented."""
    rows = []  # (section title, None) or (None, cells) or (fact, "fact")
    for sec in layout["sections"]:
        rows.append((sec["title"], None))
        for ch in sec["rows"]:
            e = channels[ch]
            unit = e["unit"]
            if e.get("kind") in TOTAL_KINDS:
                stats = [""] * 4
            else:
                stats = [format_value(e[k], unit) for k in ("min", "mean", "p95", "max")]
            rows.append((None, ["  " + ch, unit or "-"] + stats + [_amount_cell(e)]))
        rows += [("  " + f, "fact") for f in sec["facts"]]
    header = list(layout["columns"])
    cells = [r for _, r in rows if isinstance(r, list)]
    widths = [max([len(header[i])] + [len(r[i]) for r in cells]) for i in range(len(header))]

    def line(r):
        return "  ".join(c.ljust(widths[i]) if i < 2 else c.rjust(widths[i]) for i, c in enumerate(r)).rstrip()

    out.write("\n" + line(header) + "\n")
    for title, r in rows:
        if r is None:
            out.write(title + "\n")
        elif r == "fact":
            out.write(_cut(title, LINE_WIDTH) + "\n")
        else:
            out.write(line(r) + "\n")
    if any(channels[ch].get("amount") is not None for sec in layout["sections"] for ch in sec["rows"]):
        out.write("amount: accrued over the trace (a total's increase, a rate's integral, a CPU share's CPU-seconds, "
                  "energy from power)\n")
    hidden = layout["hidden"]
    why = [f"{hidden['idle']} always 0 or unchanged" if hidden["idle"] else "",
           f"{hidden['carried']} total{'s' if hidden['carried'] != 1 else ''} in a row's amount"
           if hidden["carried"] else "",
           f"{hidden['members']} per-member series" if hidden["members"] else ""]
    why = [w for w in why if w]
    if why:
        out.write(f"hidden (--all shows them): {', '.join(why)}\n")
    labels = layout["not_statistics"]
    if labels:
        kinds = ", ".join(dict.fromkeys(_pattern_of(ch) for ch in labels))
        out.write(f"not statistics (--json has them): {len(labels)} channel{'s' if len(labels) != 1 else ''} "
                  f"({kinds})\n")


def _cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters: cut after a ``: ``, else a ``; ``, a ``, ``, a space in its second
    half (the last of the first kind found), then ``…``."""
    if len(text) <= width:
        return text
    cut = text[: width - 2]
    for sep in (": ", "; ", ", ", " "):
        at = cut.rfind(sep)
        if at > width // 2:
            return cut[:at] + sep.rstrip() + " \u2026"
    return cut + " \u2026"


def print_verdict(verdict) -> None:
    """The verdict's lines (:func:`sysprof.report.verdict.judgement`: the job, then the phases, nested ones
    indented under their parent), before the table."""
    out = sys.stdout
    out.write("verdict:\n")
    for line in verdict["lines"]:
        out.write(f"  {line}\n")
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
