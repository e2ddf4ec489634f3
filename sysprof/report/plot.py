"""Plots of a trace (matplotlib, an optional dependency): the varying series on a shared time axis, one panel
per (source, unit)."""
from __future__ import annotations

import fnmatch

from .model import ReportError, TraceData
from .table import format_seconds
from .units import unit_of

__all__ = ["require_matplotlib", "plot_trace"]


def require_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ReportError("--plot needs matplotlib: pip install sysprof[plot]") from None


_SOURCE_ORDER = ("cpu", "per-cpu", "process", "memory", "swap", "gpu", "disk", "net", "network", "load", "load/procs")
#: left out of a plot unless asked for with -k: mirrors of other series (idle = 100 - percent,
#: available/free ~ total - used) and counts that duplicate the byte rates
_PLOT_SKIP = ("cpu/idle_percent", "cpu/*/idle_percent", "memory/available_bytes", "memory/free_bytes",
              "memory/total_bytes", "memory/used_percent", "swap/total_bytes", "swap/free_bytes",
              "*_count_per_second", "net/*/packets_*", "disk/*/read_time_seconds", "disk/*/write_time_seconds",
              "process/num_threads")
MAX_PANELS = 10
MAX_LINES = 8


def _plot_selection(data: TraceData, channel_filter, filtered: bool = False):
    """(panel title, unit, [channels]) to plot: varying series, rates rather than their running totals."""
    import numpy as np

    panels = {}
    for ch, (t, v) in data.series.items():
        if not channel_filter(ch):
            continue
        if not filtered and any(fnmatch.fnmatchcase(ch, p) for p in _PLOT_SKIP):
            continue
        finite = v[np.isfinite(v)]
        if finite.size == 0 or finite.min() == finite.max():
            continue  # constant: nothing to see
        if ch + "_per_second" in data.series:
            continue  # a running total whose rate is plotted instead
        if ch.endswith("_total") or ch.endswith("_seconds_total"):
            continue
        parts = ch.split("/")
        source = parts[0]
        if source == "cpu" and len(parts) == 3 and parts[1].isdigit():
            source = "per-cpu"
        elif source == "load" and parts[-1].startswith("procs_"):
            source = "load/procs"  # task counts, not load averages: a panel of their own
        unit = unit_of(ch, data.units)
        panels.setdefault((source, unit), []).append((float(np.ptp(finite)), ch))
    order = {s: i for i, s in enumerate(_SOURCE_ORDER)}
    keys = sorted(panels, key=lambda k: (order.get(k[0], len(order)), k[1]))[:MAX_PANELS]
    out = []
    for source, unit in keys:
        chs = [ch for _, ch in sorted(panels[(source, unit)], reverse=True)[:MAX_LINES]]
        chs.sort(key=lambda c: list(data.series).index(c))
        out.append((source, unit, chs))
    return out


def _smoothed(t, v, start, iv, window):
    """The step series (t, v) sampled every ``iv`` µs from ``start``, averaged over ``window`` µs (centred)."""
    import numpy as np

    end = t[-1] + iv
    grid = np.arange(min(start, t[0]), end, iv)
    idx = np.searchsorted(t, grid, side="right") - 1
    vals = np.where(idx >= 0, v[np.clip(idx, 0, None)], np.nan)
    k = max(1, int(round(window / iv)))
    ok = np.isfinite(vals)
    box = np.ones(k)
    num = np.convolve(np.where(ok, vals, 0.0), box, mode="same")
    den = np.convolve(ok.astype(float), box, mode="same")
    with np.errstate(invalid="ignore", divide="ignore"):
        return grid, np.where(den > 0, num / np.maximum(den, 1), np.nan)


def plot_trace(data: TraceData, path: str, channel_filter=None, title: str = "", smooth_s=None) -> int:
    """Draw the varying series on a shared time axis, one panel per (source, unit). Returns series drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter

    import numpy as np

    iv = data.interval_us()
    panels = _plot_selection(data, channel_filter or (lambda ch: True), filtered=channel_filter is not None)
    if not panels:
        raise ReportError("nothing to plot: every selected channel is constant")
    ts = data.timestamps()
    t0 = data.start_ts if data.start_ts is not None else (ts[0] if ts.size else 0.0)
    n = len(panels)
    fig, axes = plt.subplots(n, 1, sharex=True, figsize=(11, 1.6 + 1.75 * n), squeeze=False)
    drawn = 0
    for ax, (source, unit, chs) in zip(axes[:, 0], panels):
        for ch in chs:
            t, v = data.series[ch]
            prefix = {"per-cpu": "cpu/", "load/procs": "load/"}.get(source, source + "/")
            label = ch[len(prefix):] if ch.startswith(prefix) else ch
            if smooth_s:
                tt, vv = _smoothed(t, v, t0, iv, smooth_s * 1e6)
                ax.plot((tt - t0) / 1e6, vv, lw=1.0, label=label or ch)
            else:
                tt = np.append(t, t[-1] + iv)  # the last value holds for one interval
                vv = np.append(v, v[-1])
                ax.plot((tt - t0) / 1e6, vv, lw=0.9, drawstyle="steps-post", label=label or ch)
            drawn += 1
        ax.set_ylabel(f"{source}\n[{unit or 'value'}]", fontsize=9)
        if unit in ("B", "B/s"):  # decimal SI (kB, MB, GB = 1e9 B, the project's convention) on decimal ticks
            ax.yaxis.set_major_formatter(EngFormatter(unit=unit, places=None))
        ax.grid(True, alpha=0.3)
        ax.tick_params(labelsize=8)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), frameon=False)
    axes[-1, 0].set_xlabel("time since start [s]")
    interval, source = data.interval()
    title = (title or "").strip().split("\n", 1)[0]  # a multi-line command: its first line, at most ~80 chars
    if len(title) > 80:
        title = title[:77] + "..."
    head = f"sysprof: {title}" if title else "sysprof"
    if interval:
        head += f"  ({'interval' if source == 'metadata' else 'median spacing'} {format_seconds(interval)})"
    if smooth_s:
        head += f", {format_seconds(smooth_s)} moving average"
    fig.suptitle(head, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.985))
    try:
        fig.savefig(path, dpi=110)
    except OSError as e:
        raise ReportError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        plt.close(fig)
    return drawn
