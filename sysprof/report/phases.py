"""Phase attribution: the trace's series measured inside its duration events (``sysprof report --by PATTERN``,
``sysprof.by_phase``).

A *phase* is every span (X event or B/E pair: Composer's ``event/batch``, ``dataloader``, ``sysprof.mark()``
markers, any program's) whose name matches one of the patterns (:mod:`fnmatch` globs, case-sensitive); one
:class:`PhaseStats` per matched name, in the order of the first pattern each name matches, then of its first
span. A span matching several patterns counts once.

Per phase:

* ``count``: its spans; ``duration_seconds``: their durations summed; ``mean_seconds`` = duration / count.
  Spans of the same name that overlap (two threads, two ranks) each count here, so ``duration_seconds`` can
  exceed the wall time they take; ``wall_seconds`` is the length of their union, ``sampled_seconds`` the part of
  it inside the trace's sampling windows (all of it in a ``sysprof record`` trace).
* per channel, over the union of its spans (an overlap counts once): ``mean``, the time-weighted mean of the
  channel's values (a share whose counters the trace holds: from their increases, :mod:`sysprof.report.shares`),
  and ``amount``, what accrued inside the spans (below). Nested spans of different names are
  each attributed fully: a ``batch`` span holding a ``dataloader`` span gives the overlap to both rows.

Values follow the trace's step semantics (:class:`~sysprof.report.model.TraceData`): a value holds from its
timestamp until the series' next event (the last one an interval), and a sample straddling a span's edge is split
by time: a 1000 B/s rate held over [0, 0.2 s) and [0.2, 0.4 s) gives a span [0.1, 0.35 s) 250 B. Time with no value
(NaN, before the first sample, outside the sampling windows of a Composer trace -- see
:func:`~sysprof.report.stats.sampled_windows`) counts for nothing; a channel with no value inside a phase is left
out of it. The amount of a cumulative total (registry kinds ``counter``, ``counter32``, ``ticks``) is its increase:
the step between two consecutive samples accrues evenly over the time since the trace's row before the later one
(a changes-only trace writes a total only when it changed, so the sample before can be long before; a row the
sampler took late carries its whole gap), at least its source's interval -- one interval in a trace that does not
list its rows -- and a decrease is a reset (no increase); a span gets the share of each step that its time
covers.

Amounts, by the channel's kind and unit (:func:`amount_rule`; the amount's unit in brackets):

* a rate (kind ``rate``, a ``*_per_second`` channel; unit ``X/s``): its integral over time [``X``]: ``B/s`` -> B,
  ``/s`` -> a count, ``s/s`` (a PSI stall share, a disk's busy share) -> s (stall-seconds, busy seconds);
* a total (kinds ``counter``, ``counter32``, ``ticks``): its increase [the channel's unit: B, s, J, a count];
* power drawn (``W``; not a ``*_limit_watts``): its integral [J];
* a percent of one core or CPU (``process/cpu_percent``, ``process_tree/cpu_percent``, ``cgroup/cpu_percent``,
  ``cpu/<id>/percent``): integral / 100 [s: CPU-seconds];
* a share of all CPUs' time (``cpu/percent``, ``cpu/<mode>_percent``): integral / 100 x the trace's
  ``cpu_count`` [s: CPU-seconds]; none without ``cpu_count`` (Composer traces);
* a GPU's time share (``gpu/<i>/utilization_percent``, ``gpu/<i>/memory_utilization_percent``): integral / 100
  [s: seconds busy];
* anything else (bytes in use, temperatures, clocks, counts, the kernel's pressure averages): no amount
  (``amount`` and ``amount_unit`` None; JSON null).

Kinds come from the registry (:mod:`sysprof.sampling.registry`) for sampler channels; a channel it does not know is
a rate when its unit ends in ``/s``. Units are the trace's declared ones, else inferred from the names
(:func:`~sysprof.report.units.unit_of`). A Composer-named trace is read under the sampler's channel names and units
(:mod:`sysprof.report.names`: ``memory/virtual/used_gb`` -> ``memory/used_bytes`` in bytes).
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

from sysprof.sampling.registry import TOTAL_KINDS

from .model import ReportError, Span, TraceData
from .units import unit_of

__all__ = ["ChannelPhase", "PhaseStats", "by_phase", "whole_trace", "amount_rule", "phases_json", "phases_frame",
           "match_spans", "no_match_message", "outside", "overlap_seconds", "WHOLE_TRACE"]

#: the phase name of a trace without spans (the verdict's one phase)
WHOLE_TRACE = "(whole trace)"

#: sampler channels that are a percent of one core or one CPU: percent x seconds / 100 = CPU-seconds
_CORE_PERCENT = ("process/cpu_percent", "process_tree/cpu_percent", "cgroup/cpu_percent", "cpu/*/percent")
#: shares of all CPUs' ticks: x cpu_count for CPU-seconds
_ALL_CPU_PERCENT = ("cpu/percent", "cpu/*_percent")
#: shares of a GPU's time
_GPU_TIME_PERCENT = ("gpu/*/utilization_percent", "gpu/*/memory_utilization_percent")
_TOTAL_KINDS = TOTAL_KINDS


@dataclass
class ChannelPhase:
    """One channel inside one phase: ``mean`` (time-weighted, in ``unit``), ``amount`` (accrued inside the spans,
    in ``amount_unit``; None where no amount makes sense), ``seconds`` (the time it had a value there)."""

    mean: float
    amount: Optional[float]
    unit: str
    amount_unit: Optional[str]
    seconds: float


@dataclass
class PhaseStats:
    """One phase (see the module docstring): its spans' ``count``, summed ``duration_seconds``, the
    ``wall_seconds`` of their union, the ``sampled_seconds`` of it inside the sampling windows, ``channels``
    (sampler channel name -> :class:`ChannelPhase`) and ``union_us``, that sampled union as sorted disjoint
    ``(start_us, end_us)`` in trace time (how phases nest: :func:`overlap_seconds`)."""

    name: str
    count: int
    duration_seconds: float
    wall_seconds: float
    sampled_seconds: float = 0.0
    channels: Dict[str, ChannelPhase] = field(default_factory=dict)
    union_us: List[Tuple[float, float]] = field(default_factory=list, repr=False, compare=False)

    @property
    def mean_seconds(self) -> float:
        return self.duration_seconds / self.count if self.count else float("nan")

    def to_json(self) -> dict:
        """``{"name", "count", "duration_seconds", "channels": {CHANNEL: {"mean", "amount", "unit"}}}``: ``unit``
        is the channel's (the mean's); the amount's follows from it (the module's table)."""
        return {"name": self.name, "count": self.count, "duration_seconds": self.duration_seconds,
                "channels": {ch: {"mean": c.mean, "amount": c.amount, "unit": c.unit}
                             for ch, c in self.channels.items()}}


def amount_rule(channel: str, unit: str, cpu_count=None):
    """``(mode, factor, amount unit)`` of a channel: mode ``"increase"`` (a total: its increase),
    ``"integral"`` (the time integral of its values, in value x seconds, times ``factor``) or None (no amount)."""
    from sysprof.sampling.registry import channel_spec

    spec = channel_spec(channel)
    kind = spec.kind if spec is not None else ("rate" if unit.endswith("/s") else None)
    if kind in _TOTAL_KINDS:
        return "increase", 1.0, unit
    if kind == "rate":
        return "integral", 1.0, unit[:-2] if unit.endswith("/s") else unit
    if unit == "W" and not channel.endswith("_limit_watts"):  # power drawn, not a limit
        return "integral", 1.0, "J"
    if unit == "%" and spec is not None:
        if _matches(channel, _CORE_PERCENT) or _matches(channel, _GPU_TIME_PERCENT):
            return "integral", 0.01, "s"
        if _matches(channel, _ALL_CPU_PERCENT) and isinstance(cpu_count, (int, float)) and cpu_count > 0:
            return "integral", 0.01 * float(cpu_count), "s"
    return None, None, None


def _matches(name: str, patterns) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def match_spans(data: TraceData, patterns: Sequence[str]) -> Dict[str, List[Span]]:
    """Phase name -> its spans (see the module docstring for the order); empty when no span matches."""
    groups: Dict[str, List[Span]] = {}
    for pattern in patterns:
        for span in data.spans:
            if span.name not in groups and fnmatch.fnmatchcase(span.name, pattern):
                groups[span.name] = []
    for span in data.spans:
        if span.name in groups:
            groups[span.name].append(span)
    return groups


def _union(intervals):
    """Sorted disjoint ``[(lo, hi)]`` covering the given ``(lo, hi)`` intervals (empty ones dropped)."""
    out = []
    for lo, hi in sorted(iv for iv in intervals if iv[1] > iv[0]):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(lo, hi) for lo, hi in out]


def _intersect(a, b):
    """The intersection of two sorted disjoint interval lists."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


class _Pieces:
    """A piecewise-constant function: ``values[i]`` on ``[starts[i], starts[i] + widths[i])`` (sorted,
    non-overlapping pieces; non-finite values count for nothing), with its running integral, to integrate it over
    any intervals in O(log n) each."""

    def __init__(self, starts, widths, values):
        import numpy as np

        ok = np.isfinite(values)
        ok &= widths > 0
        if ok.all():  # (the arrays themselves: no copy)
            self.s, self.w, self.v = starts, widths, values
        else:
            self.s, self.w, self.v = starts[ok], widths[ok], values[ok]
        del ok
        self.c_int = np.empty(self.v.size + 1)  # the running integral, from 0
        self.c_int[0] = 0.0
        np.multiply(self.v, self.w, out=self.c_int[1:])
        np.cumsum(self.c_int[1:], out=self.c_int[1:])
        self.c_cov = np.empty(self.w.size + 1)
        self.c_cov[0] = 0.0
        np.cumsum(self.w, out=self.c_cov[1:])

    def _upto(self, x):
        import numpy as np

        k = np.searchsorted(self.s, x, side="right") - 1
        kk = np.clip(k, 0, None)
        part = np.clip(x - self.s[kk], 0.0, self.w[kk])
        return (np.where(k >= 0, self.c_int[kk] + self.v[kk] * part, 0.0),
                np.where(k >= 0, self.c_cov[kk] + part, 0.0))

    def integrate(self, lo, hi):
        """``(integral, covered)`` over the disjoint intervals ``[lo_k, hi_k)``: the integral of the function and the
        time covered by finite values."""
        if self.s.size == 0 or lo.size == 0:
            return 0.0, 0.0
        i1, k1 = self._upto(hi)
        i0, k0 = self._upto(lo)
        return float((i1 - i0).sum()), float((k1 - k0).sum())


class _Channel:
    """One series prepared for attribution: its pieces (times in seconds from ``origin``) and its amount rule."""

    def __init__(self, data: TraceData, channel: str, t_us, v, unit: str, rule, origin_us: float, rows):
        """``rows``: the trace's sample times (seconds from ``origin``; empty where it does not list them)."""
        import numpy as np

        t = np.subtract(t_us, origin_us, dtype=np.float64)  # (in place from here: one channel's arrays at a time)
        t /= 1e6
        v = np.asarray(v, dtype=np.float64)
        iv = data.interval_us(channel) / 1e6  # its source's: a GPU counter steps once per GPU reading
        w = np.empty_like(t)
        if t.size:
            np.subtract(t[1:], t[:-1], out=w[:-1])
            w[-1] = iv
        self.pieces = _Pieces(t, w, v)
        mode, self.factor, self.amount_unit = rule
        self.unit, self.mode = unit, mode
        self.steps = None
        if mode == "increase" and t.size >= 2:
            density = np.diff(v)  # the step, then its density over the span
            density[density < 0] = 0.0  # a reset: no increase known
            # a step accrues since the row before it (a row the sampler took late carries its whole gap), over at
            # least its source's interval (a slower source steps once per reading), at most since the sample
            # before; a trace that does not list its rows: over one interval
            gap = np.full(t.size - 1, iv)
            if rows.size:
                k = np.searchsorted(rows, t[1:] - 1e-7, side="left") - 1
                gap = np.where(k >= 0, t[1:] - rows[np.clip(k, 0, None)], gap)
            span = np.diff(t)
            np.minimum(span, np.maximum(gap, iv), out=span)
            with np.errstate(divide="ignore", invalid="ignore"):
                np.divide(density, span, out=density)
            density[~(span > 0)] = np.nan
            self.steps = _Pieces(t[1:] - span, span, density)

    def attribute(self, lo, hi) -> Optional[ChannelPhase]:
        mean_int, covered = self.pieces.integrate(lo, hi)
        if not covered > 0:
            return None
        amount = None
        if self.mode == "integral":
            amount = mean_int * self.factor
        elif self.mode == "increase":
            amount = self.steps.integrate(lo, hi)[0] if self.steps is not None else 0.0
        return ChannelPhase(mean_int / covered, amount, self.unit, self.amount_unit, covered)


def _prepare(data: TraceData, channels: Optional[Callable[[str], bool]], origin_us: float):
    """``(channel, _Channel)`` of each series wanted, prepared one at a time (a long trace's pieces are several
    arrays per value: only one channel's are held at once)."""
    from .names import sampler_series

    series, units = sampler_series(data)
    cpu_count = data.meta.get("cpu_count")
    rows = (data.sample_ns / 1e3 - origin_us) / 1e6  # empty where the trace does not list its samples
    for ch in series:
        if channels is not None and not channels(ch):
            continue
        t, v = series[ch]
        unit = unit_of(ch, units)
        yield ch, _Channel(data, ch, t, v, unit, amount_rule(ch, unit, cpu_count), origin_us, rows)
        del t, v


def _attribute(data: TraceData, groups: Dict[str, List[Span]], channels=None) -> List[PhaseStats]:
    import numpy as np

    from .stats import sampled_windows

    from .shares import counter_means, is_share_counter

    ts = data.timestamps()
    origin = float(ts[0]) if ts.size else min(s.start_us for spans in groups.values() for s in spans)
    windows = None if data.recorded else [((a - origin) / 1e6, (b - origin) / 1e6) for a, b in sampled_windows(data)]
    out, bounds = [], []
    for name, spans in groups.items():
        union = _union(((s.start_us - origin) / 1e6, (s.end_us - origin) / 1e6) for s in spans)
        wall = sum(hi - lo for lo, hi in union)
        if windows is not None:
            union = _intersect(union, windows)
        bounds.append((np.array([a for a, _ in union], dtype=np.float64),
                       np.array([b for _, b in union], dtype=np.float64)))
        out.append(PhaseStats(name, len(spans), sum(s.duration_us for s in spans) / 1e6, wall,
                              sum(b - a for a, b in union), union_us=[(origin + a * 1e6, origin + b * 1e6)
                                                                     for a, b in union]))
    # the counters a share is computed from are prepared even where not asked for (left out of the result)
    for ch, c in _prepare(data, None if channels is None else (lambda ch: channels(ch) or is_share_counter(ch)),
                          origin):
        for phase, (lo, hi) in zip(out, bounds):
            got = c.attribute(lo, hi)
            if got is not None:
                phase.channels[ch] = got
        del c  # before the next channel is prepared
    for phase in out:
        got = phase.channels
        shares = counter_means(got, {ch: c.amount for ch, c in got.items()}, {ch: c.seconds for ch, c in got.items()})
        for ch, (mean, amount) in shares.items():  # a share over the span: from its counters' increases
            got[ch].mean = mean
            if got[ch].amount is not None:
                got[ch].amount = amount
        if channels is not None:
            phase.channels = {ch: c for ch, c in got.items() if channels(ch)}
    return out


def by_phase(data: TraceData, patterns: Union[str, Sequence[str]],
             channels: Optional[Callable[[str], bool]] = None) -> List[PhaseStats]:
    """The phases whose names match ``patterns`` (a glob or several), each with its channels (only those
    ``channels(name)`` accepts, when given; sampler names). Empty when no span matches."""
    if isinstance(patterns, str):
        patterns = [patterns]
    groups = match_spans(data, patterns)
    return _attribute(data, groups, channels) if groups else []


def whole_trace(data: TraceData, channels: Optional[Callable[[str], bool]] = None) -> PhaseStats:
    """The whole sampled time as one phase named :data:`WHOLE_TRACE` (one span per sampling window)."""
    from .stats import sampled_windows

    spans = [Span(WHOLE_TRACE, a, b) for a, b in sampled_windows(data)]
    if not spans:
        return PhaseStats(WHOLE_TRACE, 0, 0.0, 0.0, 0.0)
    return _attribute(data, {WHOLE_TRACE: spans}, channels)[0]


def overlap_seconds(a: PhaseStats, b: PhaseStats) -> float:
    """The sampled wall time two phases share (seconds): how much of ``a`` runs inside ``b``'s spans."""
    return sum(hi - lo for lo, hi in _intersect(a.union_us, b.union_us)) / 1e6


def _subtract(a, b):
    """The parts of the sorted disjoint intervals ``a`` that no interval of ``b`` (sorted, disjoint) covers."""
    out, j = [], 0
    for lo, hi in a:
        while j < len(b) and b[j][1] <= lo:
            j += 1
        k, at = j, lo
        while k < len(b) and b[k][0] < hi:
            if b[k][0] > at:
                out.append((at, b[k][0]))
            at = max(at, b[k][1])
            k += 1
        if at < hi:
            out.append((at, hi))
    return out


def outside(data: TraceData, phases: Sequence[PhaseStats], name: str) -> Optional[PhaseStats]:
    """The sampled time no span of ``phases`` covers, as a phase named ``name`` (its channels attributed as any
    phase's); None where the phases cover all of it."""
    from .stats import sampled_windows

    covered = _union(iv for p in phases for iv in p.union_us)
    rest = _subtract(_union(sampled_windows(data)), covered)
    if not rest:
        return None
    return _attribute(data, {name: [Span(name, lo, hi) for lo, hi in rest]})[0]


def phases_json(phases: Sequence[PhaseStats]) -> list:
    """The ``"phases"`` list of ``report --json --by``."""
    return [p.to_json() for p in phases]


def phases_frame(trace, patterns: Union[str, Sequence[str]]):
    """``sysprof.by_phase(trace, patterns)``: the phases of ``trace`` (a path to a Chrome JSON trace, ``.json`` or
    ``.json.gz``, or a :class:`TraceData`) as a pandas DataFrame, one row per (phase, channel) under a
    ``MultiIndex`` ``("phase", "channel")``: columns ``count``, ``duration_seconds``, ``mean_seconds``,
    ``wall_seconds``, ``sampled_seconds`` (of the phase), ``mean``, ``unit``, ``amount``, ``amount_unit`` (NaN / None where no amount
    makes sense), ``seconds`` (time the channel had a value in the phase). Phases in the order of
    :func:`by_phase`; ``df.loc["dataloader"]`` is one phase's channels. A phase without any channel value has no
    row. Raises :class:`ReportError` when no span matches (naming the spans the trace has); ImportError naming
    ``sysprof[pandas]`` without pandas."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("sysprof.by_phase needs pandas: pip install sysprof[pandas]") from None
    data = trace if isinstance(trace, TraceData) else _read(trace)
    phases = by_phase(data, patterns)
    if not phases:
        raise ReportError(no_match_message(data, [patterns] if isinstance(patterns, str) else patterns))
    rows, index = [], []
    for p in phases:
        for ch, c in p.channels.items():
            index.append((p.name, ch))
            rows.append({"count": p.count, "duration_seconds": p.duration_seconds, "mean_seconds": p.mean_seconds,
                         "wall_seconds": p.wall_seconds, "sampled_seconds": p.sampled_seconds, "mean": c.mean, "unit": c.unit,
                         "amount": float("nan") if c.amount is None else c.amount, "amount_unit": c.amount_unit,
                         "seconds": c.seconds})
    columns = ["count", "duration_seconds", "mean_seconds", "wall_seconds", "sampled_seconds", "mean", "unit", "amount", "amount_unit",
               "seconds"]
    return pd.DataFrame(rows, index=pd.MultiIndex.from_tuples(index, names=["phase", "channel"]), columns=columns)


def _read(path) -> TraceData:
    from sysprof.trace.chrome import iter_trace

    try:
        return TraceData(iter_trace(str(path)))
    except (OSError, ValueError, EOFError) as e:
        raise ReportError(f"cannot read {path}: {e}") from None


def no_match_message(data: TraceData, patterns: Sequence[str], limit: int = 12) -> str:
    """The one-line error of ``--by`` patterns matching no span: the span names the trace has."""
    names = list(dict.fromkeys(s.name for s in data.spans))
    asked = " or ".join(repr(p) for p in patterns)
    if not names:
        return f"no span matches {asked}: the trace has no duration events (X or B/E)"
    shown = ", ".join(names[:limit]) + (f", ... ({len(names)} names)" if len(names) > limit else "")
    return f"no span matches {asked}; span names in the trace: {shown}"
