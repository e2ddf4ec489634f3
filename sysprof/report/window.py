"""A time window of a trace (``sysprof report --from/--to`` or ``--steps``): the table, the verdict, ``--by``, the
JSON and the plot of that part of the trace only.

Bounds are seconds from the trace's start (its start event; a trace without one: its first sample), a negative one
from its end (its stop event, else its last sample and one interval): ``--from 30 --to 60``, ``--from -10s``
(the last 10 s). A bound outside the trace is clamped to it; an empty window is an error. ``--steps A-B`` is the
window from the start of step A to the end of step B (``A``: that step; ``A-``: to the end of the trace), the steps
being the spans of the first ``--step`` pattern the trace has (default ``event/batch``, else ``step``: what
``report --ranks`` calls steps), counted from 1 in time order.

:class:`TraceWindow` is the trace seen through the window, a :class:`~sysprof.report.model.TraceData` as the rest
of the report reads it. Values keep their step semantics: the value held at the window's start is a sample there,
and the value held at its end holds to it (a ``sysprof record`` trace; the samples of a trace from elsewhere are
only cut, so no value is carried across a gap between its sampling windows). Spans are clipped to the window, and
instants outside it left out. The window's sample count is the samples taken inside it (a changes-only trace's
listed sample times, else the distinct sample times); the sampler's dropped rows and missed deadlines are counted
for the whole recording only, so a window leaves them unknown.
"""
from __future__ import annotations

import fnmatch
import re
from typing import NamedTuple, Optional, Sequence, Tuple

from ..trace.columns import HeldSeries
from .model import ReportError, Span, TraceData

__all__ = ["TraceWindow", "Bounds", "parse_steps", "trace_extent", "window_bounds"]

_STEPS_RE = re.compile(r"\s*(\d+)\s*(?:(-)\s*(\d+)?)?\s*")


class Bounds(NamedTuple):
    """A window: ``lo_us``, ``hi_us`` (trace time, µs), ``origin_us`` (the trace's start: what the bounds count
    from), ``label`` (how the report names it) and ``json`` (the JSON report's ``"window"``)."""

    lo_us: float
    hi_us: float
    origin_us: float
    label: str
    json: dict


def parse_steps(text: str) -> Tuple[int, Optional[int]]:
    """``--steps``: ``"A"`` -> (A, A), ``"A-B"`` -> (A, B), ``"A-"`` -> (A, None: to the end); steps count from 1."""
    import argparse

    m = _STEPS_RE.fullmatch(str(text))
    if not m:
        raise argparse.ArgumentTypeError(f"invalid steps {text!r} (examples: 100, 100-120, 100-; counted from 1)")
    first = int(m.group(1))
    last = None if m.group(2) and m.group(3) is None else int(m.group(3) or first)
    if first < 1 or (last is not None and last < first):
        raise argparse.ArgumentTypeError(f"invalid steps {text!r}: steps count from 1, the first before the last")
    return first, last


def trace_extent(data: TraceData) -> Tuple[float, float]:
    """``(start_us, end_us)`` of the trace: its sampling windows' first start and last end
    (:func:`~sysprof.report.stats.sampled_windows`: a ``sysprof record`` trace's start and stop events)."""
    from .stats import sampled_windows

    windows = sampled_windows(data)
    if not windows:
        raise ReportError("the trace has no samples to take a window of")
    return windows[0][0], windows[-1][1]


def window_bounds(data: TraceData, start_s: Optional[float] = None, end_s: Optional[float] = None,
                  steps: Optional[Tuple[int, Optional[int]]] = None,
                  step: Optional[Sequence[str]] = None) -> Bounds:
    """The window of ``--from start_s --to end_s`` (seconds from the start; negative: from the end) or of
    ``--steps`` (:func:`parse_steps`; ``step``: the step spans' patterns). ReportError for an empty window or
    steps the trace does not have."""
    from .table import format_seconds

    begin, end = trace_extent(data)
    length = (end - begin) / 1e6
    if steps is not None:
        lo, hi, what = _step_bounds(data, steps, step, end)
    else:
        lo = begin if start_s is None else (begin if start_s >= 0 else end) + start_s * 1e6
        hi = end if end_s is None else (begin if end_s >= 0 else end) + end_s * 1e6
        what = None
        if lo >= end:
            raise ReportError(f"--from {start_s:g} s is at or past the trace's end ({length:.3f} s after its start)")
        if hi <= begin:
            raise ReportError(f"--to {end_s:g} s is at or before the trace's start")
    lo, hi = max(lo, begin), min(hi, end)
    if not hi > lo:
        raise ReportError(f"the window is empty: it starts {(lo - begin) / 1e6:.3f} s after the trace's start and "
                          f"ends {(hi - begin) / 1e6:.3f} s after it")
    a, b = (lo - begin) / 1e6, (hi - begin) / 1e6
    label = f"{format_seconds(a) if a else '0 s'} to {format_seconds(b)} of {format_seconds(length)}"
    out = {"from_s": a, "to_s": b, "trace_s": length}
    if what is not None:
        label += f" ({what[0]})"
        out.update(steps=what[1], step=what[2])
    return Bounds(lo, hi, begin, label, out)


def _step_bounds(data: TraceData, steps, step, end):
    from .ranks import step_pattern

    pattern = step_pattern(data.spans, step)
    spans = [s for s in data.spans if fnmatch.fnmatchcase(s.name, pattern)]  # sorted by start (TraceData)
    first, last = steps
    if first > len(spans) or (last is not None and last > len(spans)):
        asked = f"{first}-{last if last is not None else ''}" if last != first else f"{first}"
        raise ReportError(f"--steps {asked}: the trace has {len(spans)} step{'s' if len(spans) != 1 else ''} "
                          f"({pattern!r} spans), counted from 1")
    lo = spans[first - 1].start_us
    hi = end if last is None else max(s.end_us for s in spans[first - 1:last])
    shown = f"{first}" if last == first else f"{first}-{last if last is not None else ''}"
    text = f"step{'s' if last != first else ''} {shown} of {len(spans)}, {pattern!r} spans"
    return lo, hi, (text, [first, last], pattern)


class TraceWindow(TraceData):
    """``data`` between ``bounds.lo_us`` and ``bounds.hi_us`` (a :class:`Bounds`), read as a trace of its own
    (see the module docstring); ``bounds`` and ``origin_us`` (the whole trace's start) tell the plot where it is."""

    def __init__(self, data: TraceData, bounds: Bounds):  # noqa: D107 - no events to read: a view of ``data``
        import numpy as np

        from .stats import GAP_FACTOR  # a trace from elsewhere: a longer spacing is a gap between sampling windows

        self.__dict__.update(vars(data))
        self.bounds = bounds
        self.origin_us = bounds.origin_us
        lo, hi = bounds.lo_us, bounds.hi_us
        iv = data.interval_us()
        recorded = data.recorded
        series = HeldSeries()  # (each channel kept as its changes, as the whole trace's)
        for ch, (t, v) in data.series.items():
            a = int(np.searchsorted(t, lo, side="right"))  # the first sample after lo
            b = int(np.searchsorted(t, hi, side="left"))   # the first sample at or after hi
            tt, vv = t[a:b], v[a:b]
            if a > 0 and (recorded or lo - t[a - 1] <= GAP_FACTOR * iv):  # the value held at lo
                tt, vv = np.concatenate([[lo], tt]), np.concatenate([v[a - 1:a], vv])
            if recorded and b < t.size and tt.size and tt[-1] < hi - iv:  # it holds on to hi (the last weighs iv)
                tt, vv = np.append(tt, hi - iv), np.append(vv, vv[-1])
            if tt.size:
                series[ch] = (tt, vv)
        self.series = series
        self.series_ns = None  # (the whole trace's ns are not the window's times)
        self.spans = [Span(s.name, max(s.start_us, lo), min(s.end_us, hi), s.pid, s.tid, s.args)
                      for s in data.spans if s.end_us > lo and s.start_us < hi or lo <= s.start_us == s.end_us < hi]
        self.instants = [i for i in data.instants if lo <= i.ts_us <= hi]
        sample_ns = getattr(data, "sample_ns", None)
        if sample_ns is not None and len(sample_ns):
            self.sample_ns = sample_ns[(sample_ns >= lo * 1000) & (sample_ns < hi * 1000)]
            taken = int(self.sample_ns.size)
        else:
            times = data.timestamps()
            taken = int(np.count_nonzero((times >= lo) & (times < hi)))
        if recorded:
            self.start_ts, self.stop_ts = lo, hi
            # only what the window knows: its samples; drops and missed deadlines are the whole recording's
            kept = {k: v for k, v in data.stats().items() if k.startswith("sample_ns_")}
            stats = dict(kept, taken=taken)
            if self.stop is not None:
                self.stop = dict(self.stop, stats=stats)
            self.last_counter_stats, self.last_counter_ts = stats, hi
