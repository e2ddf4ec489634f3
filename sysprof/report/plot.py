"""Plots of a trace (matplotlib, an optional dependency): the series on a shared time axis, phases shaded.

Which panels, in which order, and what is left out: :mod:`sysprof.report.panels`. How each panel is drawn:

* values hold until their next sample (steps), or a centred moving average with ``smooth_s`` (seconds; 0: the
  raw steps). By default (``smooth_s`` None) a panel whose densest series has more than
  :data:`AUTO_SMOOTH_POINTS` points is drawn as a moving average over about 1/500 of the plotted time
  (:func:`auto_window`), which the panel (``mean over ...``) and the footnote say;
* CPU modes are stacked (busy as a black line along them); every other panel draws one line per channel, and
  series equal within :data:`MERGE_TOLERANCE` of their scale are one line labelled ``a = b`` (a process and its
  one-member process tree);
* a panel whose every series is constant is not drawn: the footnote says ``constant: CHANNEL VALUE, ...``;
* a share's axis is fixed (:data:`~sysprof.report.panels.BOUNDED_UNITS`): 0-100 % (0-1 s/s), or 0 to the next
  multiple of 100 % above the maximum (a process on 3.4 cores: 0-400 %), so 98-100 % never looks like a collapse;
* a short spike does not set the axis: on a panel of unbounded values (bytes, rates, watts; not % or shares),
  when the maximum is more than twice as far from the minimum as the time-weighted 99.5th percentile
  (:data:`CLIP_QUANTILE`) and the values above it are at most :data:`MAX_SPIKES` separate excursions (more are
  bursts: the panel's signal, drawn whole), the axis ends at that percentile, the points above it are marked
  with triangles on the top edge, and the panel and the footnote say ``clipped at P (p99.5), max M``;
* y axes are in the channel's unit with decimal SI prefixes (k = 1e3, M = 1e6, G = 1e9), as the table;
* phases (``phases=``: :class:`~sysprof.report.Span` or ``(name, start_us, end_us)``; by default Composer's
  ``event/batch`` and ``event/dataloader`` spans when the trace has them) are shaded on every panel, a colour per
  distinct name, with a legend; spans of one name that touch or overlap are shaded as one; the shading lies over
  the stacked CPU areas and under the lines, so it shows on every panel;
* a :class:`~sysprof.report.window.TraceWindow` (``report --from/--to/--steps``) is drawn on the whole trace's
  time axis (seconds since its start), the window named in the heading;
* a footnote says what was left out (and ``-k PATTERN`` to show it) and how many channels were always 0.
"""
from __future__ import annotations

import os
from typing import List, Optional, Tuple

from .model import ReportError, Span, TraceData
from .panels import MAX_LINES, MAX_PANELS  # noqa: F401  (re-exported by sysprof.report)
from .panels import BOUNDED_UNITS, Panel, choose_panels, compress
from .stats import weighted_quantile  # noqa: F401  (tests import it from here too)
from .table import format_seconds, format_si, format_value, round_up_125

__all__ = ["require_matplotlib", "plot_trace", "build_figure", "PlotResult", "default_phases", "CLIP_QUANTILE",
           "MAX_SPIKES", "AUTO_SMOOTH_POINTS", "MERGE_TOLERANCE", "check_plot_name", "auto_window"]

#: the time-weighted quantile a spiky panel's y axis is clipped at
CLIP_QUANTILE = 0.995
#: at most this many separate excursions above that quantile are spikes; more are bursts, the panel's signal
MAX_SPIKES = 3
#: a panel whose densest series has more points than this is drawn as a moving average (unless --smooth says)
AUTO_SMOOTH_POINTS = 1000  # more than a point a pixel on a panel 8.5 inches wide at 100 dpi: a hairball
#: two series of a panel are drawn as one line when they differ by at most this share of their scale (the axis they
#: share: a percent's 100 %, else their range of values) wherever they have values: less than a line's width
MERGE_TOLERANCE = 0.005
#: the phase shading: over the stacked areas (zorder 1), under the lines (2)
SHADE_ZORDER = 1.5
SHADE_ALPHA = 0.25
#: Composer's per-batch duration events (``event/<canonical event name>``), shaded when no phases are given
COMPOSER_PHASES = ("event/batch", "event/dataloader")
_SI_UNITS = ("B", "B/s", "Hz", "W", "J", "/s", "")  # "": counts (2 M, not 2e6)
_LABEL_SUFFIXES = ("_seconds_per_second", "_bytes_per_second", "_per_second", "_percent", "_bytes", "_watts")


def require_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ReportError("--plot needs matplotlib: pip install sysprof[plot]") from None


class PlotResult(int):
    """The number of series drawn (an ``int``, as before), with what the plot left out: ``left_out`` (channels
    with something to show that are not drawn; ``-k`` shows them), ``hidden`` (always 0 or never valid),
    ``panels`` (titles, in order), ``clipped`` ({panel title: (axis top, maximum)}), ``constant`` ([(channel,
    unit, value)] of the panels folded into the footnote), ``smoothed`` ({panel title: window in seconds} of the
    panels smoothed automatically), ``merged`` ([(channel, ...)] drawn as one line)."""

    def __new__(cls, drawn: int, panels=(), left_out=(), hidden=(), clipped=None, filtered=False, constant=(),
                smoothed=None, merged=()):
        self = int.__new__(cls, drawn)
        self.filtered = filtered
        self.panels = list(panels)
        self.left_out = list(left_out)
        self.hidden = list(hidden)
        self.clipped = dict(clipped or {})
        self.constant = list(constant)
        self.smoothed = dict(smoothed or {})
        self.merged = list(merged)
        return self

    def constant_text(self, limit: int = 8) -> str:
        """``constant: swap/used_bytes 5.2 MB, gpu/0/power_watts 70 W`` (at most ``limit``, then ``and N more``),
        or ``""``."""
        if not self.constant:
            return ""
        items = [f"{ch} {_value_text(v, unit)}" for ch, unit, v in self.constant]
        more = f" and {len(items) - limit} more" if len(items) > limit else ""
        return f"constant: {', '.join(items[:limit])}{more}"

    def smoothed_text(self) -> str:
        """What the automatic smoothing did, or ``""``."""
        if not self.smoothed:
            return ""
        windows = sorted(set(self.smoothed.values()))
        over = " or ".join(format_seconds(w) for w in windows)
        n = len(self.smoothed)
        return (f"smoothed: {n} panel{'s' if n != 1 else ''} of more than {AUTO_SMOOTH_POINTS:,} points drawn as "
                f"a {over} moving average (--smooth TIME sets the window, --smooth 0 draws the raw steps)")

    @property
    def drawn(self) -> int:
        return int(self)

    def left_out_text(self) -> str:
        """``left out: N channels (...); show them with -k PATTERN`` (with ``-k``: narrow it), or ``""``."""
        if not self.left_out:
            return ""
        how = "narrow -k PATTERN to show them" if self.filtered else "show them with -k PATTERN"
        return f"left out: {compress(self.left_out)}; {how}"


def _plot_selection(data: TraceData, channel_filter, filtered: bool = False):
    """(panel title, unit, [channels]) of the plot, in order (the stacked CPU panel: its modes, then busy)."""
    return [(p.title, p.unit, list(p.channels) + ([p.line] if p.line else []))
            for p in choose_panels(data, channel_filter, filtered).panels]


def _smoothed(t, v, start, iv, window, end=None, step=None):
    """The step series (t, v) as a centred moving average over ``window`` µs, read every ``step`` µs (default
    ``iv``) from ``start`` to ``end`` (default: one interval after its last sample). Each value holds until the
    next sample (the last one until ``end``, at least an interval); the average is over the time the window has a
    value (NaN counts for nothing), from the running integrals: O(samples + points) whatever the window."""
    import numpy as np

    end = t[-1] + iv if end is None else end
    grid = np.arange(min(start, t[0]), end, step or iv)
    edges = np.append(t, max(t[-1] + iv, end))  # value i holds over [edges[i], edges[i + 1])
    dur = np.diff(edges)
    ok = np.isfinite(v)
    area = np.concatenate([[0.0], np.cumsum(np.where(ok, v, 0.0) * dur)])
    valid = np.concatenate([[0.0], np.cumsum(np.where(ok, dur, 0.0))])
    lo, hi = grid - window / 2, grid + window / 2
    num = np.interp(hi, edges, area) - np.interp(lo, edges, area)
    den = np.interp(hi, edges, valid) - np.interp(lo, edges, valid)
    with np.errstate(invalid="ignore", divide="ignore"):
        return grid, np.where(den > 1e-9 * window, num / np.where(den > 0, den, 1.0), np.nan)


def _hold(t, v, grid):
    """The step series (t, v) read at the times ``grid`` (NaN before its first sample)."""
    import numpy as np

    idx = np.searchsorted(t, grid, side="right") - 1
    return np.where(idx >= 0, v[np.clip(idx, 0, None)], np.nan)


def default_phases(data: TraceData) -> List[Span]:
    """Composer's batch and dataloader spans of the trace (:data:`COMPOSER_PHASES`), else none."""
    return [s for s in data.spans if s.name in COMPOSER_PHASES]


def _phase_intervals(phases, lo_us, hi_us):
    """{name: [(start_us, end_us)]} in first-seen order, clipped to [lo_us, hi_us], touching ones merged."""
    out = {}
    for p in phases:
        try:
            name, start, end = str(p[0]), float(p[1]), float(p[2])
        except (TypeError, ValueError, IndexError):
            raise ReportError(f"a phase is a Span or (name, start_us, end_us), got {p!r}") from None
        start, end = max(start, lo_us), min(end, hi_us)
        if end >= start:
            out.setdefault(name, []).append((start, end))
    for name, spans in out.items():
        spans.sort()
        merged = [list(spans[0])]
        for s, e in spans[1:]:
            if s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        out[name] = [tuple(m) for m in merged]
    return out


def _value_text(v, unit):
    """A value with its unit, as the footnote names a constant: ``5.2 MB``, ``100 %``, ``3``."""
    if unit in _SI_UNITS and unit:
        return _si_tick(v, unit)
    return f"{format_value(v, unit)}{' ' + unit if unit else ''}"


def _si_tick(v, unit):
    """A tick label: ``format_si`` without trailing zeros (``250 MB/s``, ``1.5 GB``)."""
    num, _, rest = format_si(v, unit).partition(" ")
    if "." in num:
        num = num.rstrip("0").rstrip(".")
    return f"{num} {rest}"


def _label(ch: str, panel: Panel, data: TraceData, prefix: str) -> str:
    parts = ch.split("/")
    if panel.title.startswith("member ") and len(parts) == 3:
        return _member_label(data, parts[1])
    if ch == panel.line:
        return "busy"
    if len(panel.channels) == 1 and not panel.line:
        prefix = ""  # a panel of one channel: its whole name
    label = ch[len(prefix):] if ch.startswith(prefix) and len(ch) > len(prefix) else ch
    for suffix in _LABEL_SUFFIXES:
        if label.endswith(suffix) and len(label) > len(suffix) and not label.endswith("/" + suffix[1:]):
            return label[: -len(suffix)]
    return label


def _member_label(data: TraceData, slot: str) -> str:
    """``slot 2 (pid 4711)``: the pids the slot's member had (``process_tree/<slot>/pid``), at most three."""
    import numpy as np

    pid = data.series.get(f"process_tree/{slot}/pid")
    if pid is None:
        return f"slot {slot}"
    pids = [int(p) for p in dict.fromkeys(pid[1][np.isfinite(pid[1])].tolist())]
    if not pids:
        return f"slot {slot}"
    more = f" +{len(pids) - 3}" if len(pids) > 3 else ""
    return f"slot {slot} (pid {', '.join(map(str, pids[:3]))}{more})"


def _common_prefix(chs) -> str:
    """The source all of ``chs`` share (``disk/``: the legend then reads ``vda/read``), else ``""``."""
    sources = {c.split("/", 1)[0] for c in chs}
    return sources.pop() + "/" if len(sources) == 1 and all("/" in c for c in chs) else ""


def check_plot_name(path: str) -> str:
    """The format of a plot file named ``path`` (its extension, one that matplotlib's Agg backend writes), or a
    ReportError: checked before the trace is read, so a mistyped name costs nothing."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    formats = sorted(FigureCanvasAgg.get_supported_filetypes())
    ext = os.path.splitext(os.path.basename(str(path)))[1][1:].lower()
    others = ", .".join(f for f in formats if f != "png")
    if not ext:
        raise ReportError(f"cannot tell the plot's format from {path!r}: name it FILE.png (or .{others})")
    if ext not in formats:
        raise ReportError(f"matplotlib cannot write .{ext} ({path}): name the plot FILE.png (or .{others})")
    return ext


def auto_window(span_us: float, iv: float) -> float:
    """The moving-average window (µs) of an automatically smoothed panel: about 1/500 of the plotted span (what
    shows a trend across a panel some 850 pixels wide, drawn every half window), at least two intervals, rounded up
    to 1, 2 or 5 of a decade."""
    return round_up_125(max(span_us / 500.0, 2 * iv) / 1e6) * 1e6


def build_figure(data: TraceData, channel_filter=None, title: str = "", smooth_s=None, phases=None,
                 filtered: Optional[bool] = None) -> Tuple[object, PlotResult]:
    """The figure of :func:`plot_trace` and what it drew, without saving it (the caller closes the figure)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if filtered is None:
        filtered = channel_filter is not None
    sel = choose_panels(data, channel_filter, filtered=filtered)
    if not sel.panels:
        what = "every selected channel is always 0 or never valid" if sel.hidden else "no channel to draw"
        raise ReportError(f"nothing to plot: {what}")
    iv = data.interval_us()
    ts = data.timestamps()
    bounds = getattr(data, "bounds", None)  # a TraceWindow: its place in the whole trace
    if bounds is not None:
        t0, t_lo, t_end = bounds.origin_us, bounds.lo_us, bounds.hi_us
    else:
        t0 = data.start_ts if data.start_ts is not None else (ts[0] if ts.size else 0.0)
        t_lo, t_end = t0, ((ts[-1] + iv) if ts.size else t0)
    auto = smooth_s is None
    window_us = auto_window(t_end - t_lo, iv) if auto else (smooth_s or 0.0) * 1e6
    n = len(sel.panels)
    fig, axes = plt.subplots(n, 1, sharex=True, figsize=(11, 1.2 + 1.5 * n), squeeze=False)
    axes = axes[:, 0]
    drawn = 0
    clipped, smoothed, merged = {}, {}, []
    for ax, panel in zip(axes, sel.panels):
        smooth = window_us if not auto or _panel_points(panel, data) > AUTO_SMOOTH_POINTS else 0.0
        if smooth and auto:
            smoothed[panel.title] = smooth / 1e6
        drawn += _draw_panel(ax, panel, data, t0, t_lo, t_end, iv, smooth, clipped, merged, auto)
    shaded = _phase_intervals(default_phases(data) if phases is None else phases, t_lo, t_end)
    _shade(fig, axes, shaded, t0)
    axes[-1].set_xlim((t_lo - t0) / 1e6, (t_end - t0) / 1e6)
    axes[-1].set_xlabel("time since start [s]")
    head = _heading(data, title, None if auto else smooth_s, bounds)
    fig.suptitle(head, fontsize=10, y=1 - 0.08 / fig.get_figheight(), va="top")
    result = PlotResult(drawn, [p.title for p in sel.panels], sel.left_out, sel.hidden, clipped, filtered,
                        constant=sel.constant, smoothed=smoothed, merged=merged)
    notes = [result.left_out_text()] if sel.left_out else []
    if sel.hidden:
        many = len(sel.hidden) != 1
        notes.append(f"not drawn: {len(sel.hidden)} channel{'s' if many else ''} always 0 or never valid")
    if sel.constant:
        notes.append(result.constant_text())
    if smoothed:
        notes.append(result.smoothed_text())
    for name, (top, hi) in clipped.items():
        unit = next(p.unit for p in sel.panels if p.title == name)
        notes.append(f"{name}: y axis clipped at {_si_tick(top, unit)} (p{CLIP_QUANTILE * 100:g}), "
                     f"max {_si_tick(hi, unit)}")
    foot = 0.0
    if notes:
        fig.text(0.01, 0.004, "\n".join(notes), fontsize=7, va="bottom", ha="left", color="0.25", wrap=True)
        foot = (0.16 * len(notes) + 0.05) / fig.get_figheight()
    top = 1 - (0.6 if shaded else 0.3) / fig.get_figheight()
    fig.tight_layout(rect=(0, foot, 1, top))
    return fig, result


def _panel_points(panel: Panel, data: TraceData) -> int:
    """The points of a panel's densest series (a stacked panel: of its common grid), as drawn raw."""
    import numpy as np

    if panel.stacked:
        return int(np.unique(np.concatenate([data.series[ch][0] for ch in panel.channels])).size)
    return max(int(data.series[ch][0].size) for ch in panel.channels + ((panel.line,) if panel.line else ()))


def _heading(data, title, smooth_s, bounds=None):
    interval, source = data.interval()
    title = (title or "").strip().split("\n", 1)[0]  # a multi-line command: its first line, at most ~80 chars
    if len(title) > 80:
        title = title[:77] + "..."
    head = f"sysprof: {title}" if title else "sysprof"
    if interval:
        head += f"  ({'interval' if source == 'metadata' else 'median spacing'} {format_seconds(interval)})"
    if smooth_s:
        head += f", {format_seconds(smooth_s)} moving average"
    if bounds is not None:
        head += f"\nwindow: {bounds.label}"
    return head


def _draw_panel(ax, panel: Panel, data: TraceData, t0, t_lo, t_end, iv, smooth, clipped, merged, auto) -> int:
    """Draw one panel (``smooth``: the moving average's window in µs, 0: the raw steps); returns the number of
    series drawn. Records a clipped axis in ``clipped`` and the lines drawn as one in ``merged``."""
    import numpy as np
    from matplotlib.ticker import FuncFormatter

    prefix = _common_prefix(list(panel.channels) + ([panel.line] if panel.line else []))
    step = max(iv, smooth / 2) if smooth else None  # a moving average holds nothing finer than half its window
    drawn_vals = []  # (values, weights) of what is drawn, for the axis limits
    if panel.stacked:
        if smooth:
            start = min([t_lo] + [data.series[ch][0][0] for ch in panel.channels])  # one grid for the stack
            smoothed = [_smoothed(*data.series[ch], start, iv, smooth, end=t_end, step=step)
                        for ch in panel.channels]
            grid, ys = smoothed[0][0], [y for _, y in smoothed]
        else:
            grid = np.unique(np.concatenate([data.series[ch][0] for ch in panel.channels]))
            ys = [_hold(*data.series[ch], grid) for ch in panel.channels]
        x = np.append(grid, grid[-1] + iv) if not smooth else grid
        ys = [np.append(y, y[-1]) if not smooth else y for y in ys]
        ax.stackplot((x - t0) / 1e6, *[np.nan_to_num(y) for y in ys], step=None if smooth else "post", alpha=0.85,
                     lw=0, labels=[_label(ch, panel, data, prefix) for ch in panel.channels])
        drawn = len(panel.channels)
        total = np.sum([np.nan_to_num(y) for y in ys], axis=0)
        drawn_vals.append((total, np.ones_like(total)))
        groups, color = ([[panel.line]] if panel.line else []), "black"
    else:
        drawn, color = 0, None
        groups = _identical_groups(panel.channels, data, panel.unit)
        merged.extend(tuple(g) for g in groups if len(g) > 1)
    for group in groups:
        ch = group[0]
        t, v = data.series[ch]
        label = " = ".join(_label(c, panel, data, prefix) for c in group)
        if smooth:
            tt, vv = _smoothed(t, v, t_lo, iv, smooth, end=t_end, step=step)
            w = np.full(tt.shape, step)
            ax.plot((tt - t0) / 1e6, vv, lw=1.0, color=color, label=label)
        else:
            tt, vv = np.append(t, t[-1] + iv), np.append(v, v[-1])  # the last value holds for one interval
            w = np.append(data.weights(t), 0.0)
            ax.plot((tt - t0) / 1e6, vv, lw=0.9, color=color, drawstyle="steps-post", label=label)
        drawn_vals.append((vv, w))
        drawn += len(group)
    _set_ylim(ax, panel, drawn_vals, clipped)
    unit = panel.unit
    ax.set_ylabel(f"{panel.title}\n[{unit or 'value'}]", fontsize=9)
    if unit in _SI_UNITS:
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, pos, u=unit: _si_tick(v, u)))
    ax.grid(True, alpha=0.3)
    ax.tick_params(labelsize=8)
    if smooth and auto:  # said on the panel itself, not only in the footnote
        ax.text(0.005, 0.96, f"mean over {format_seconds(smooth / 1e6)}", transform=ax.transAxes, ha="left",
                va="top", fontsize=7, color="0.2", gid="smoothed",
                bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="0.7", alpha=0.85))
    handles, labels = ax.get_legend_handles_labels()
    if panel.stacked:
        handles, labels = handles[::-1], labels[::-1]  # the legend reads as the stack, top first
    ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), frameon=False)
    return drawn


def _identical_groups(channels, data: TraceData, unit: str) -> list:
    """The channels of a panel in groups drawn as one line, in trace order: series with values at the same times
    that differ by at most :data:`MERGE_TOLERANCE` of their scale (a share's full scale, 100 % or 1 s/s, on its
    fixed axis; else the two series' range of values, what an autoscaled axis spans), such as a process and its
    one-member process tree."""
    import numpy as np

    groups = []
    for ch in channels:
        t, v = data.series[ch]
        for group in groups:
            t1, v1 = data.series[group[0]]
            if t1.size == t.size and np.array_equal(t1, t):
                a, b = v1, v
            else:
                grid = np.union1d(t1, t)
                a, b = _hold(t1, v1, grid), _hold(t, v, grid)
            fa, fb = np.isfinite(a), np.isfinite(b)
            if not np.array_equal(fa, fb) or not fa.any():
                continue
            both = np.concatenate([a[fa], b[fb]])
            scale = BOUNDED_UNITS.get(unit) or float(np.ptp(both))
            if float(np.max(np.abs(a[fa] - b[fb]))) <= MERGE_TOLERANCE * scale:
                group.append(ch)
                break
        else:
            groups.append([ch])
    return groups


def _set_ylim(ax, panel: Panel, drawn_vals, clipped):
    """A share's axis is fixed: 0 to 100 % (1 s/s), or to the next multiple of it above the maximum (a process
    on 3.4 cores: 0-400 %). Otherwise pad a constant panel's axis; clip a spiky unbounded one at the
    time-weighted :data:`CLIP_QUANTILE`."""
    import math

    import numpy as np

    allv = np.concatenate([v[np.isfinite(v)] for v, _ in drawn_vals]) if drawn_vals else np.zeros(0)
    if allv.size == 0:
        return
    lo, hi = float(allv.min()), float(allv.max())
    full = BOUNDED_UNITS.get(panel.unit)
    if full is not None:
        top = full * max(1, math.ceil(hi / full - 1e-9))
        margin = 0.02 * top
        ax.set_ylim(min(lo, 0.0) - margin, top + margin)
        return
    if lo == hi:
        pad = abs(lo) * 0.05 or 1.0
        ax.set_ylim(lo - pad, hi + pad)
        return
    qs = [weighted_quantile(v, w, CLIP_QUANTILE) for v, w in drawn_vals]
    top = max(q for q in qs if q is not None)
    if not (top > lo and hi - lo > 2 * (top - lo)):
        return
    runs = 0
    for v, _ in drawn_vals:
        over = np.isfinite(v) & (v > top)
        runs += int(over[0]) + int(np.count_nonzero(over[1:] & ~over[:-1]))
    if runs > MAX_SPIKES:
        return
    ax.set_ylim(lo - 0.05 * (top - lo), top)  # the margin autoscale gives, of the clipped range
    clipped[panel.title] = (top, hi)
    for line in ax.get_lines():
        x, y = line.get_xdata(), np.asarray(line.get_ydata(), dtype=np.float64)
        over = np.isfinite(y) & (y > top)
        if over.any():
            ax.plot(np.asarray(x)[over], np.full(int(over.sum()), top), ls="none", marker="^", ms=4,
                    color=line.get_color(), clip_on=False, label="_clipped", gid="clipped")
    u = panel.unit
    ax.text(0.995, 0.96, f"clipped at {_si_tick(top, u)} (p{CLIP_QUANTILE * 100:g}), max {_si_tick(hi, u)}",
            transform=ax.transAxes, ha="right", va="top", fontsize=7, color="0.2",
            bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="0.7", alpha=0.85))


def _shade(fig, axes, shaded, t0):
    """Shade each phase on every panel (one PolyCollection per name and panel, gid ``phase:<name>``) and add
    the figure's legend of phase names."""
    if not shaded:
        return
    import matplotlib
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    cmap = matplotlib.colormaps["Set2"]
    handles = []
    for i, (name, spans) in enumerate(shaded.items()):
        color = cmap(i % cmap.N)
        verts = [[(x0, 0), (x0, 1), (x1, 1), (x1, 0)] for x0, x1 in
                 (((s - t0) / 1e6, (e - t0) / 1e6) for s, e in spans)]
        for ax in axes:
            coll = PolyCollection(verts, transform=ax.get_xaxis_transform(), facecolors=[color], edgecolors="none",
                                  alpha=SHADE_ALPHA, zorder=SHADE_ZORDER, gid=f"phase:{name}")
            ax.add_collection(coll, autolim=False)
        handles.append(Patch(facecolor=color, alpha=0.5, label=f"{name} ({len(spans)})"))
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1 - 0.3 / fig.get_figheight()),
               ncol=min(len(handles), 6), fontsize=8, frameon=False, handlelength=1.5, columnspacing=1.5)


def plot_trace(data: TraceData, path: str, channel_filter=None, title: str = "", smooth_s=None,
               phases=None) -> PlotResult:
    """Draw the trace's series on a shared time axis (see the module's docstring) into ``path`` (PNG, or any
    format matplotlib writes by the name: :func:`check_plot_name`, before any work). ``channel_filter``: only the
    channels it accepts, all of them (as ``-k``); ``phases``: spans to shade (None: Composer's batch spans when the
    trace has them; ``[]``: none); ``smooth_s``: see the module's docstring. Returns a :class:`PlotResult`: the
    number of series drawn, with what was left out."""
    import matplotlib.pyplot as plt

    check_plot_name(path)
    fig, result = build_figure(data, channel_filter, title, smooth_s, phases)
    try:
        fig.savefig(path, dpi=100)
    except OSError as e:
        raise ReportError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        plt.close(fig)
    return result

