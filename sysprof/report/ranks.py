"""Cross-rank straggler report (``sysprof report --ranks DIR_OR_FILES``, :func:`rank_report`).

Inputs: per-rank trace files (sysprof's ``JSONTraceHandler`` / ``.pftrace`` cycle files, Composer's, ``sysprof
record``'s), or folders of them (every ``*.json``, ``*.json.gz``, ``*.pftrace`` but ``merged*``). A file's rank is
its ``global_rank`` metadata (else the start event's ``rank``); a rank's files are read as one trace. Its node is
the ``sysprof_rank`` metadata's ``node``, else the start event's ``node`` / ``host`` ("" when unknown). Ranks are
aligned on the lowest rank's clock as the merger does (:func:`sysprof.trace.merge.clock_shifts`).

Steps: each rank's spans named by the first of ``step`` patterns (default :data:`STEP_PATTERNS`: Composer's
``event/batch``, then ``sysprof.mark("step")``'s ``step``) that any rank has. Per rank: ``steps`` (count),
``step_seconds_p50`` / ``_p95`` (linear-interpolated percentiles of the span durations, numpy's default).
Mark the rank's own work (forward, backward, optimizer) as ``step``: a span that also holds the collective
(``event/batch`` under DDP) lasts as long on every rank, since the fast ranks wait there for the slow one.

Stragglers: ``slowdown`` = the rank's p50 / the median of the *other* ranks' p50; a rank with ``slowdown >=
threshold`` (1.15) is a straggler; slowest first. Evidence (:data:`RULES`): for each rule whose channels the
traces have, the straggler's value against the median of the others': per-process rules (``scope`` "rank":
its process, cgroup and GPU, which every rank samples) against the other ranks; host rules (``scope`` "node")
against the other nodes (host sources are sampled once per node, so ranks of one node share them; with one node
there is nothing to compare). A value is the time-weighted mean of the matching channels (summed over devices
for a NIC's rate, averaged otherwise), or for ``kind`` ``"rate"`` a total's increase per second. A rule fires
when the straggler differs in its direction by at least ``min_abs`` and by a factor of at least ``min_ratio``.
"""
from __future__ import annotations

import fnmatch
import os
import statistics
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from .model import ReportError, TraceData

__all__ = ["STEP_PATTERNS", "RULES", "Rule", "RankSummary", "rank_report", "format_ranks", "trace_files"]

#: the step spans looked for, in order (the first any rank has wins)
STEP_PATTERNS = ("event/batch", "step")
#: the straggler threshold: p50 / others' median p50
THRESHOLD = 1.15


@dataclass(frozen=True)
class Rule:
    """One evidence rule: ``channels`` (globs over sampler channel names), ``direction`` (+1: higher on the
    straggler is evidence, -1: lower, 0: either), ``scope`` ("rank" or "node"), ``kind`` ("mean" or "rate"),
    ``min_abs`` and ``min_ratio`` (both must hold), ``combine`` ("mean" or "sum" over matching channels)."""

    label: str
    channels: tuple
    direction: int
    scope: str
    min_abs: float
    min_ratio: float
    unit: str
    kind: str = "mean"
    combine: str = "mean"


#: the evidence rules, in the order they are reported
RULES = (
    Rule("process CPU", ("process_tree/cpu_percent", "process/cpu_percent"), 0, "rank", 20.0, 1.3, "%"),
    Rule("CPU throttling", ("cgroup/cpu_throttled_seconds_total",), 1, "rank", 0.01, 1.5, "s/s", kind="rate"),
    Rule("GPU clocks-event reasons", ("gpu/*/clocks_event_reasons*",), 1, "rank", 0.5, 1.0, ""),
    Rule("GPU SM activity", ("gpu/*/sm_activ*",), -1, "rank", 5.0, 1.2, "%"),
    Rule("GPU SM clock", ("gpu/*/sm_clock_hz",), -1, "rank", 50e6, 1.05, "Hz"),
    Rule("CPU steal", ("cpu/steal_percent",), 1, "node", 2.0, 1.5, "%"),
    Rule("CPU stall (PSI)", ("pressure/cpu/some_seconds_per_second",), 1, "node", 0.02, 1.5, "s/s"),
    Rule("memory stall (PSI)", ("pressure/memory/some_seconds_per_second",), 1, "node", 0.01, 1.5, "s/s"),
    Rule("major page faults", ("vmstat/pgmajfault_per_second",), 1, "node", 10.0, 2.0, "/s"),
    Rule("slower NIC", ("net/*/bytes_recv_per_second", "net/*/bytes_sent_per_second"), -1, "node", 1e6, 1.25,
         "B/s", combine="sum"),
)


@dataclass
class RankSummary:
    rank: int
    node: str
    files: List[str]
    steps: List[float]  # step durations, seconds
    shift_us: int = 0
    offset_us: Optional[float] = None
    uncertainty_us: Optional[float] = None
    local_rank: Optional[int] = None
    values: Dict[str, float] = field(default_factory=dict)  # rule label -> value
    spans: list = field(default_factory=list, repr=False)

    def quantile(self, q: float) -> Optional[float]:
        import numpy as np

        return float(np.percentile(self.steps, 100 * q)) if self.steps else None


def trace_files(paths: Sequence[str]) -> List[str]:
    """The trace files named by ``paths`` (files as given; folders: their ``*.json``, ``*.json.gz``, ``*.pftrace``
    but ``merged*``, recursively, sorted). Raises ReportError for a missing path or an empty result."""
    out: List[str] = []
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                out += [os.path.join(root, n) for n in sorted(names) if not n.startswith((".", "merged"))
                        and n.endswith((".json", ".json.gz", ".pftrace"))]
        elif os.path.exists(p):
            out.append(p)
        else:
            raise ReportError(f"{p}: no such file or folder")
    if not out:
        raise ReportError(f"no trace files in {', '.join(paths)}")
    return out


def _rank_of(events: list, path: str) -> tuple:
    """``(rank, local_rank, node)`` of one file's events."""
    rank = node = local = None
    for e in events:
        if e.get("ph") not in ("M", "i", "I"):
            continue
        name, args = e.get("name"), e.get("args") if isinstance(e.get("args"), dict) else {}
        if name == "global_rank" and rank is None:
            rank = args.get("value")
        elif name == "sysprof_rank":
            node, local = args.get("node", node), args.get("local_rank", local)
            rank = args.get("rank") if rank is None else rank
        elif name == "sysprof start":
            node = node or args.get("node") or args.get("host")
            local = args.get("local_rank", local)
            rank = args.get("rank") if rank is None else rank
    if not isinstance(rank, int):
        raise ReportError(f"{path}: no rank (no global_rank metadata): not a per-rank trace")
    return rank, local, str(node or "")


def _value(rule: Rule, data: TraceData, series: dict) -> Optional[float]:
    from .stats import weighted_stats
    import numpy as np

    globs = rule.channels
    if rule.combine == "mean":  # alternatives, preferred first (process_tree over process)
        globs = next(((g,) for g in globs if any(fnmatch.fnmatchcase(ch, g) for ch in series)), ())
    vals = []
    for ch, (t, v) in series.items():
        if not any(fnmatch.fnmatchcase(ch, g) for g in globs):
            continue
        if rule.kind == "rate":
            ok = np.isfinite(v)
            if ok.sum() >= 2 and t[ok][-1] > t[ok][0]:
                vals.append(float(max(0.0, v[ok][-1] - v[ok][0]) / ((t[ok][-1] - t[ok][0]) / 1e6)))
        else:
            mean = weighted_stats(v, data.weights(t))["mean"]
            if mean is not None:
                vals.append(mean)
    if not vals:
        return None
    return float(sum(vals)) if rule.combine == "sum" else float(sum(vals) / len(vals))


def _load(files: List[str]) -> Dict[int, RankSummary]:
    from ..trace.load import load_events
    from ..trace.merge import clock_shifts, rank_clock
    from .names import sampler_series

    by_rank: Dict[int, list] = {}
    meta: Dict[int, tuple] = {}
    clocks = {}
    for f in files:
        try:
            events = load_events(f)
        except (OSError, ValueError) as e:
            raise ReportError(f"{f}: {e}") from None
        rank, local, node = _rank_of(events, f)
        by_rank.setdefault(rank, []).extend(events)
        old = meta.get(rank, (None, "", []))
        meta[rank] = (local if local is not None else old[0], node or old[1], old[2] + [f])
        clocks.setdefault(rank, rank_clock(events))
    shifts = clock_shifts(clocks)
    out = {}
    for rank in sorted(by_rank):
        data = TraceData(by_rank.pop(rank))
        series, _ = sampler_series(data)
        local, node, fs = meta[rank]
        out[rank] = RankSummary(rank, node, fs, [], shifts[rank], clocks[rank].offset_us, clocks[rank].uncertainty_us,
                                local)
        out[rank].values = {r.label: v for r in RULES for v in [_value(r, data, series)] if v is not None}
        out[rank].spans = data.spans
    return out


def step_pattern(spans, step: Optional[Sequence[str]] = None, where: str = "the trace") -> str:
    """The first of the ``step`` patterns (default :data:`STEP_PATTERNS`) that names one of ``spans``; a
    ReportError when none does."""
    patterns = tuple(step) if step else STEP_PATTERNS
    names = {s.name for s in spans}
    for pattern in patterns:
        if any(fnmatch.fnmatchcase(name, pattern) for name in names):
            return pattern
    raise ReportError(f"no step spans ({' or '.join(repr(p) for p in patterns)}) in {where}; mark the "
                      "steps with sysprof.mark('step') or name them with --step GLOB")


def _steps(ranks: Dict[int, RankSummary], step: Optional[Sequence[str]]) -> str:
    pattern = step_pattern((s for r in ranks.values() for s in r.spans), step, "any rank's trace")
    for r in ranks.values():
        r.steps = [s.duration_us / 1e6 for s in r.spans if fnmatch.fnmatchcase(s.name, pattern)]
    return pattern


def _fmt(x: float, unit: str) -> str:
    if unit == "B/s":
        return f"{x / 1e6:.3g} MB/s"
    if unit == "Hz":
        return f"{x / 1e6:.4g} MHz"
    return f"{x:.3g}{' ' + unit if unit else ''}"


def _evidence(s: RankSummary, ranks: Dict[int, RankSummary]) -> List[str]:
    out = []
    for rule in RULES:
        mine = s.values.get(rule.label)
        if mine is None:
            continue
        if rule.scope == "rank":
            others = [r.values[rule.label] for r in ranks.values() if r.rank != s.rank and rule.label in r.values]
            where = "the other ranks"
        else:  # one value per other node: its lowest rank's that has it
            nodes: Dict[str, float] = {}
            for r in sorted(ranks.values(), key=lambda r: r.rank):
                if r.node != s.node and rule.label in r.values:
                    nodes.setdefault(r.node, r.values[rule.label])
            others = list(nodes.values())
            where = "the other nodes"
        if not others:
            continue
        ref = statistics.median(others)
        diff = mine - ref
        hi, lo = max(mine, ref), min(mine, ref)
        ratio = hi / lo if lo > 0 else float("inf") if hi > 0 else 1.0
        if rule.direction * diff < 0 or abs(diff) < rule.min_abs or ratio < rule.min_ratio:
            continue
        word = "higher" if diff > 0 else "lower"
        out.append(f"{rule.label} {word}: {_fmt(mine, rule.unit)} vs {_fmt(ref, rule.unit)} on {where} (median)")
    return out


def rank_report(paths: Sequence[str], step: Optional[Sequence[str]] = None, threshold: float = THRESHOLD) -> dict:
    """The straggler report of the per-rank traces under ``paths`` (see the module docstring):
    ``{"ranks": [{"rank", "node", "steps", "step_seconds_p50", "step_seconds_p95"}], "stragglers": [{"rank",
    "slowdown", "evidence"}]}``, plus ``"_detail"`` (step pattern, clock shifts; dropped by ``--json``).

    Raises:
        ReportError: no files, a file without a rank, no step spans.
    """
    ranks = _load(trace_files(paths))
    pattern = _steps(ranks, step)
    p50 = {r.rank: r.quantile(0.5) for r in ranks.values()}
    stragglers = []
    for r in ranks.values():
        others = [v for k, v in p50.items() if k != r.rank and v is not None]
        if p50[r.rank] is None or not others or not statistics.median(others) > 0:
            continue
        slowdown = p50[r.rank] / statistics.median(others)
        if slowdown >= threshold:
            stragglers.append({"rank": r.rank, "slowdown": slowdown, "evidence": _evidence(r, ranks)})
    stragglers.sort(key=lambda s: -s["slowdown"])
    return {
        "ranks": [{"rank": r.rank, "node": r.node, "steps": len(r.steps), "step_seconds_p50": p50[r.rank],
                   "step_seconds_p95": r.quantile(0.95)} for r in ranks.values()],
        "stragglers": stragglers,
        "_detail": {"step": pattern, "threshold": threshold,
                    "clock": {r.rank: {"shift_us": r.shift_us, "offset_us": r.offset_us,
                                       "uncertainty_us": r.uncertainty_us} for r in ranks.values()}},
    }


def format_ranks(report: dict) -> str:
    """``report`` (from :func:`rank_report`) as text: a table of the ranks, then the stragglers and evidence."""
    detail = report.get("_detail", {})
    clock = detail.get("clock", {})
    lines = [f"steps: spans named {detail.get('step')!r}; straggler: p50 >= {detail.get('threshold', THRESHOLD):g}"
             " x the other ranks' median p50", "",
             f"{'rank':>4}  {'node':<20} {'steps':>6} {'p50 s':>10} {'p95 s':>10}  clock offset to rank 0"]
    for r in report["ranks"]:
        c = clock.get(r["rank"], {})
        off = (f"{c['offset_us']:+.0f} us +- {c['uncertainty_us']:.0f} us" if c.get("offset_us") is not None
               else "not measured")
        p50 = "-" if r["step_seconds_p50"] is None else f"{r['step_seconds_p50']:.4f}"
        p95 = "-" if r["step_seconds_p95"] is None else f"{r['step_seconds_p95']:.4f}"
        lines.append(f"{r['rank']:>4}  {r['node'][:20]:<20} {r['steps']:>6} {p50:>10} {p95:>10}  {off}")
    lines.append("")
    if not report["stragglers"]:
        lines.append("no straggler")
    for s in report["stragglers"]:
        lines.append(f"straggler: rank {s['rank']}, {s['slowdown']:.2f}x the other ranks' median step")
        lines += [f"  - {e}" for e in s["evidence"]] or ["  - no evidence in its samples (no rule fired)"]
    return "\n".join(lines)
