"""Plots of a trace (matplotlib, an optional dependency): the series on a shared time axis, phases shaded.

Which panels, in which order, and what is left out: :mod:`sysprof.report.panels`. How each panel is drawn:

* values hold until their next sample (steps), or a centred moving average with ``smooth_s``;
* CPU modes are stacked (busy as a black line along them); every other panel draws one line per channel;
* a constant series is a flat line: when a panel's values never change, its y axis is padded around them;
* a short spike does not set the axis: on a panel of unbounded values (bytes, rates, watts; not % or shares),
  when the maximum is more than twice as far from the minimum as the time-weighted 99.5th percentile
  (:data:`CLIP_QUANTILE`) and the values above it are at most :data:`MAX_SPIKES` separate excursions (more are
  bursts: the panel's signal, drawn whole), the axis ends at that percentile, the points above it are marked
  with triangles on the top edge, and the panel and the footnote say ``clipped at P (p99.5), max M``;
* y axes are in the channel's unit with decimal SI prefixes (k = 1e3, M = 1e6, G = 1e9), as the table;
* phases (``phases=``: :class:`~sysprof.report.Span` or ``(name, start_us, end_us)``; by default Composer's
  ``event/batch`` and ``event/dataloader`` spans when the trace has them) are shaded on every panel, a colour per
  distinct name, with a legend; spans of one name that touch or overlap are shaded as one;
* a footnote says what was left out (and ``-k PATTERN`` to show it) and how many channels were always 0.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

from .model import ReportError, Span, TraceData
from .panels import MAX_LINES, MAX_PANELS  # noqa: F401  (re-exported by sysprof.report)
from .panels import BOUNDED_UNITS, Panel, choose_panels, compress
from .stats import weighted_quantile  # noqa: F401  (tests import it from here too)
from .table import format_seconds, format_si

__all__ = ["require_matplotlib", "plot_trace", "build_figure", "PlotResult", "default_phases", "CLIP_QUANTILE",
           "MAX_SPIKES"]

#: the time-weighted quantile a spiky panel's y axis is clipped at
CLIP_QUANTILE = 0.995
#: at most this many separate excursions above that quantile are spikes; more are bursts, the panel's signal
MAX_SPIKES = 3
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
    ``panels`` (titles, in order), ``clipped`` ({panel title: (axis top, maximum)})."""

    def __new__(cls, drawn: int, panels=(), left_out=(), hidden=(), clipped=None, filtered=False):
        self = int.__new__(cls, drawn)
        self.filtered = filtered
        self.panels = list(panels)
        self.left_out = list(left_out)
        self.hidden = list(hidden)
        self.clipped = dict(clipped or {})
        return self

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


def _smoothed(t, v, start, iv, window, end=None):
    """The step series (t, v) sampled every ``iv`` µs from ``start`` to ``end`` (default: one interval after
    its last sample), averaged over ``window`` µs (centred)."""
    import numpy as np

    end = t[-1] + iv if end is None else end
    grid = np.arange(min(start, t[0]), end, iv)
    vals = _hold(t, v, grid)
    k = max(1, int(round(window / iv)))
    ok = np.isfinite(vals)
    box = np.ones(k)
    num = np.convolve(np.where(ok, vals, 0.0), box, mode="same")
    den = np.convolve(ok.astype(float), box, mode="same")
    with np.errstate(invalid="ignore", divide="ignore"):
        return grid, np.where(den > 0, num / np.maximum(den, 1), np.nan)


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
    t0 = data.start_ts if data.start_ts is not None else (ts[0] if ts.size else 0.0)
    t_end = (ts[-1] + iv) if ts.size else t0
    n = len(sel.panels)
    fig, axes = plt.subplots(n, 1, sharex=True, figsize=(11, 1.2 + 1.5 * n), squeeze=False)
    axes = axes[:, 0]
    drawn = 0
    clipped = {}
    for ax, panel in zip(axes, sel.panels):
        drawn += _draw_panel(ax, panel, data, t0, t_end, iv, smooth_s, clipped)
    shaded = _phase_intervals(default_phases(data) if phases is None else phases, t0, t_end)
    _shade(fig, axes, shaded, t0)
    axes[-1].set_xlim(0, (t_end - t0) / 1e6)
    axes[-1].set_xlabel("time since start [s]")
    head = _heading(data, title, smooth_s)
    fig.suptitle(head, fontsize=10, y=1 - 0.08 / fig.get_figheight(), va="top")
    result = PlotResult(drawn, [p.title for p in sel.panels], sel.left_out, sel.hidden, clipped, filtered)
    notes = [result.left_out_text()] if sel.left_out else []
    if sel.hidden:
        many = len(sel.hidden) != 1
        notes.append(f"not drawn: {len(sel.hidden)} channel{'s' if many else ''} always 0 or never valid")
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


def _heading(data, title, smooth_s):
    interval, source = data.interval()
    title = (title or "").strip().split("\n", 1)[0]  # a multi-line command: its first line, at most ~80 chars
    if len(title) > 80:
        title = title[:77] + "..."
    head = f"sysprof: {title}" if title else "sysprof"
    if interval:
        head += f"  ({'interval' if source == 'metadata' else 'median spacing'} {format_seconds(interval)})"
    if smooth_s:
        head += f", {format_seconds(smooth_s)} moving average"
    return head


def _draw_panel(ax, panel: Panel, data: TraceData, t0, t_end, iv, smooth_s, clipped) -> int:
    """Draw one panel; returns the number of series drawn. Records a clipped axis in ``clipped``."""
    import numpy as np
    from matplotlib.ticker import FuncFormatter

    prefix = _common_prefix(list(panel.channels) + ([panel.line] if panel.line else []))
    drawn_vals = []  # (values, weights) of what is drawn, for the axis limits
    if panel.stacked:
        if smooth_s:
            start = min([t0] + [data.series[ch][0][0] for ch in panel.channels])  # one grid for the stack
            smoothed = [_smoothed(*data.series[ch], start, iv, smooth_s * 1e6, end=t_end) for ch in panel.channels]
            grid, ys = smoothed[0][0], [y for _, y in smoothed]
        else:
            grid = np.unique(np.concatenate([data.series[ch][0] for ch in panel.channels]))
            ys = [_hold(*data.series[ch], grid) for ch in panel.channels]
        x = np.append(grid, grid[-1] + iv) if not smooth_s else grid
        ys = [np.append(y, y[-1]) if not smooth_s else y for y in ys]
        step = None if smooth_s else "post"
        ax.stackplot((x - t0) / 1e6, *[np.nan_to_num(y) for y in ys], step=step, alpha=0.85, lw=0,
                     labels=[_label(ch, panel, data, prefix) for ch in panel.channels])
        drawn = len(panel.channels)
        total = np.sum([np.nan_to_num(y) for y in ys], axis=0)
        drawn_vals.append((total, np.ones_like(total)))
        lines, color = ([panel.line] if panel.line else []), "black"
    else:
        drawn, lines, color = 0, list(panel.channels), None
    for ch in lines:
        t, v = data.series[ch]
        if smooth_s:
            tt, vv = _smoothed(t, v, t0, iv, smooth_s * 1e6)
            w = np.full(tt.shape, iv)
            ax.plot((tt - t0) / 1e6, vv, lw=1.0, color=color, label=_label(ch, panel, data, prefix))
        else:
            tt, vv = np.append(t, t[-1] + iv), np.append(v, v[-1])  # the last value holds for one interval
            w = np.append(data.weights(t), 0.0)
            ax.plot((tt - t0) / 1e6, vv, lw=0.9, color=color, drawstyle="steps-post",
                    label=_label(ch, panel, data, prefix))
        drawn_vals.append((vv, w))
        drawn += 1
    _set_ylim(ax, panel, drawn_vals, clipped)
    unit = panel.unit
    ax.set_ylabel(f"{panel.title}\n[{unit or 'value'}]", fontsize=9)
    if unit in _SI_UNITS:
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, pos, u=unit: _si_tick(v, u)))
    ax.grid(True, alpha=0.3)
    ax.tick_params(labelsize=8)
    handles, labels = ax.get_legend_handles_labels()
    if panel.stacked:
        handles, labels = handles[::-1], labels[::-1]  # the legend reads as the stack, top first
    ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), frameon=False)
    return drawn


def _set_ylim(ax, panel: Panel, drawn_vals, clipped):
    """Pad a constant panel's axis; clip a spiky unbounded one at the time-weighted :data:`CLIP_QUANTILE`."""
    import numpy as np

    allv = np.concatenate([v[np.isfinite(v)] for v, _ in drawn_vals]) if drawn_vals else np.zeros(0)
    if allv.size == 0:
        return
    lo, hi = float(allv.min()), float(allv.max())
    if lo == hi:
        pad = abs(lo) * 0.05 or 1.0
        ax.set_ylim(lo - pad, hi + pad)
        return
    if panel.stacked and panel.unit == "%":
        ax.set_ylim(0, max(100.0, hi) * 1.02)
        return
    if panel.unit in BOUNDED_UNITS:
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
                                  alpha=0.22, zorder=0, gid=f"phase:{name}")
            ax.add_collection(coll, autolim=False)
        handles.append(Patch(facecolor=color, alpha=0.5, label=f"{name} ({len(spans)})"))
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1 - 0.3 / fig.get_figheight()),
               ncol=min(len(handles), 6), fontsize=8, frameon=False, handlelength=1.5, columnspacing=1.5)


def plot_trace(data: TraceData, path: str, channel_filter=None, title: str = "", smooth_s=None,
               phases=None) -> PlotResult:
    """Draw the trace's series on a shared time axis (see the module's docstring) into ``path`` (PNG, or any
    format matplotlib writes by the name). ``channel_filter``: only the channels it accepts, all of them (as
    ``-k``); ``phases``: spans to shade (None: Composer's batch spans when the trace has them; ``[]``: none).
    Returns a :class:`PlotResult`: the number of series drawn, with what was left out."""
    import matplotlib.pyplot as plt

    fig, result = build_figure(data, channel_filter, title, smooth_s, phases)
    try:
        fig.savefig(path, dpi=100)
    except OSError as e:
        raise ReportError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        plt.close(fig)
    return result

