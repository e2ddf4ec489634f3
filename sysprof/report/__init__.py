"""Reading a sysprof trace back: per-channel series, time-weighted statistics, the report table and plots.

Used by ``sysprof report``; independent of the command line (errors are :class:`ReportError`).
Counters hold their value until the next event (Chrome's step semantics), so statistics weigh
each value by how long it held. A counter event is a snapshot of its group: a key that the group has
elsewhere but that is missing from an event (sysprof leaves NaN out) is unknown from that event until
the group's next event, and that time counts for no value.

Besides ``sysprof record`` traces, traces of ``sysprof.profile()`` / ``JSONTraceHandler`` (Composer's
layout: ``memory/virtual`` {used_gb}, ``disk/<dev>/<field>`` {<field>}, no recording metadata) are read.
"""
from __future__ import annotations

import fnmatch
import math
import sys


from ..trace.schema import START_EVENT, STATS_COUNTER, STOP_EVENT, join_channel, split_channel  # noqa: F401
from ..sampling.registry import source_available  # noqa: F401


class ReportError(ValueError):
    """A trace that cannot be reported on or plotted, with a one-line reason."""


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


_UNIT_RULES = (  # (suffix or marker on the base name, unit)
    ("_bytes", "B"), ("bytes_", "B"), ("_percent", "%"), ("_seconds_total", "s"), ("_seconds", "s"),
    ("_watts", "W"), ("_joules", "J"), ("_celsius", "\u00b0C"), ("_hz", "Hz"),
    # the Composer layout of sysprof.profile() / SystemProfiler: GB = 1e9 bytes, kB = 1e3 bytes
    ("_gb", "GB"), ("kb_", "kB"),
)
#: Composer-layout keys with a unit the name does not say: diskstats times in cumulative ms
_UNIT_NAMES = {"read_time": "ms", "write_time": "ms", "busy_time": "ms"}


def infer_unit(channel: str) -> str:
    """Unit of a channel from its name: ``_bytes`` -> B, ``_percent`` -> %, ``_per_second`` -> /s, ``_gb`` -> GB, ..."""
    key = channel.rsplit("/", 1)[-1]
    rate = key.endswith("_per_second")
    base = key[: -len("_per_second")] if rate else key
    unit = _UNIT_NAMES.get(base, "")
    if channel.startswith("memory/cuda/") and base.endswith("_mem"):
        unit = "GB"  # torch allocator statistics, in GB
    for marker, u in _UNIT_RULES:
        if unit:
            break
        if base.endswith(marker) or (marker.endswith("_") and base.startswith(marker)) or base == marker.strip("_"):
            unit = u
    if rate:
        return f"{unit}/s" if unit else "/s"
    return unit


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


def jsonable(x):
    """NaN/inf -> None, numpy scalars -> Python, recursively."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        try:
            x = x.item()
        except (TypeError, ValueError):
            return str(x)
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x



class TraceData:
    """What ``report`` needs from a trace: per-channel series, the start metadata, the final stats.

    ``series[channel] = (ts_us, values)``, sorted by time; a counter holds its value until its next
    event (Chrome's step semantics), so statistics weigh each value by how long it held. Each event of a
    counter gives a value to every key the counter has anywhere in the trace: NaN where the event lacks
    the key (or has ``null``), so a value is never held across a time it was unknown."""

    def __init__(self, events):
        import numpy as np

        self.meta = {}
        self.stop = None
        self.start_ts = None
        self.stop_ts = None
        self.last_counter_stats = None
        self.last_counter_ts = None
        groups = {}  # counter name -> ([ts], [args])
        for ev in events:
            if not isinstance(ev, dict):
                continue
            ph = ev.get("ph")
            name = ev.get("name")
            ts = ev.get("ts")
            if ph == "C":
                args = ev.get("args") or {}
                if not isinstance(ts, (int, float)) or not isinstance(args, dict):
                    continue
                if name == STATS_COUNTER:
                    self.last_counter_stats = args
                    self.last_counter_ts = ts
                    continue
                group = groups.get(name)
                if group is None:
                    group = groups[name] = ([], [])
                group[0].append(ts)
                group[1].append(args)
            elif ph in ("i", "I") and name == START_EVENT:
                self.meta = ev.get("args") or {}
                self.start_ts = ts
            elif ph in ("i", "I") and name == STOP_EVENT:
                self.stop = ev.get("args") or {}
                self.stop_ts = ts
        nan = float("nan")
        raw = {}
        for name, (tss, argss) in groups.items():
            for key in dict.fromkeys(k for a in argss for k in a):  # every key of the counter, in order
                vals = [a.get(key) for a in argss]
                raw[join_channel(str(name), str(key))] = (tss, [nan if v is None else v for v in vals])
        order = list(self.meta.get("channels") or [])
        known = set(order)
        order += [c for c in raw if c not in known]
        self.series = {}
        for ch in order:
            if ch not in raw:
                continue
            ts, vals = raw[ch]
            t = np.asarray(ts, dtype=np.float64)
            try:
                v = np.asarray(vals, dtype=np.float64)
            except (TypeError, ValueError):
                continue  # not numeric: not a channel
            idx = np.argsort(t, kind="stable")
            self.series[ch] = (t[idx], v[idx])

    @property
    def recorded(self) -> bool:
        """Whether the trace has ``sysprof record``'s metadata (its start event)."""
        return self.start_ts is not None

    @property
    def truncated(self) -> bool:
        """A ``sysprof record`` trace without its stop event (the recorder was killed or the disk filled)."""
        return self.recorded and self.stop is None

    def stats(self) -> dict:
        if self.stop is not None and self.stop.get("stats"):
            return dict(self.stop["stats"])
        return dict(self.last_counter_stats or {})

    def timestamps(self):
        import numpy as np

        if not self.series:
            return np.zeros(0)
        return np.unique(np.concatenate([t for t, _ in self.series.values()]))

    def interval(self):
        """``(seconds, source)``: the sampling interval from the metadata (source ``"metadata"``), else the
        median spacing of the counter timestamps (``"median spacing"``); ``(None, None)`` when neither."""
        import numpy as np

        iv = self.meta.get("interval_s")
        if isinstance(iv, (int, float)) and iv > 0:
            return float(iv), "metadata"
        ts = self.timestamps()
        if ts.size >= 2:
            return float(np.median(np.diff(ts))) / 1e6, "median spacing"
        return None, None

    def interval_us(self) -> float:
        """The sampling interval in µs (see :meth:`interval`; 1 when unknown)."""
        iv, _ = self.interval()
        return iv * 1e6 if iv else 1.0

    def weights(self, t):
        """How long (µs) each value of a series held: until the series' next event; the last one an interval."""
        import numpy as np

        w = np.empty_like(t)
        if t.size:
            w[:-1] = np.diff(t)
            w[-1] = self.interval_us()
        return w


def weighted_stats(values, weights) -> dict:
    """min, mean, p50, p95, max of the finite values, mean and percentiles weighted by ``weights``."""
    import numpy as np

    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    ok = np.isfinite(v) & np.isfinite(w) & (w >= 0)
    v, w = v[ok], w[ok]
    if v.size == 0:
        return dict(min=None, mean=None, p50=None, p95=None, max=None)
    if not w.sum() > 0:
        w = np.ones_like(v)
    order = np.argsort(v, kind="stable")
    vs, cw = v[order], np.cumsum(w[order])
    total = cw[-1]

    def q(p):
        return float(vs[min(int(np.searchsorted(cw, p * total, side="left")), vs.size - 1)])

    return dict(min=float(vs[0]), mean=float(np.dot(v, w) / w.sum()), p50=q(0.5), p95=q(0.95), max=float(vs[-1]))


def summarize(data: TraceData) -> dict:
    import numpy as np

    stats = data.stats()
    # duration: start event -> stop event (or the last flush of a truncated trace), else the data's span
    ts = data.timestamps()
    end_ts = data.stop_ts if data.stop_ts is not None else data.last_counter_ts
    if data.start_ts is not None and end_ts is not None and end_ts > data.start_ts:
        duration = (end_ts - data.start_ts) / 1e6
    else:
        duration = float((ts[-1] - ts[0]) / 1e6) if ts.size >= 2 else 0.0
    taken, dropped = stats.get("taken"), stats.get("dropped")
    if isinstance(taken, (int, float)):
        samples = int(taken - (dropped or 0))
        rate = samples / duration if duration > 0 else None
    else:  # a trace from elsewhere: count distinct timestamps
        samples = int(ts.size)
        rate = (samples - 1) / duration if duration > 0 and samples >= 2 else None
    channels = {}
    for ch, (t, v) in data.series.items():
        entry = {"unit": infer_unit(ch), "events": int(v.size), "valid": int(np.isfinite(v).sum())}
        entry.update(weighted_stats(v, data.weights(t)))
        finite = v[np.isfinite(v)]
        entry["first"] = float(finite[0]) if finite.size else None
        entry["last"] = float(finite[-1]) if finite.size else None
        channels[ch] = entry
    interval, interval_source = data.interval()
    errors = data.meta.get("errors") or {}
    return jsonable({
        "command": data.meta.get("command_line"),
        "version": data.meta.get("version"),
        "backend": data.meta.get("backend"),
        "interval_s": interval,
        "interval_source": interval_source,
        "nominal_rate_hz": (1.0 / interval) if interval else None,
        "samples": samples,
        "duration_s": duration,
        "effective_rate_hz": rate,
        "taken": taken,
        "dropped": dropped,
        "missed_deadlines": stats.get("missed_deadlines"),
        "sample_ns_mean": stats.get("sample_ns_mean"),
        "sample_ns_p99": stats.get("sample_ns_p99"),
        "returncode": (data.stop or {}).get("returncode"),
        "recorded": data.recorded,
        "truncated": data.truncated,
        "errors": errors,
        "unavailable": [src for src in errors if not source_available(src, data.meta.get("channels") or [])],
        "channels": channels,
    })


def channel_filter(patterns):
    if not patterns:
        return lambda ch: True

    def ok(ch):
        return any(fnmatch.fnmatchcase(ch, p) or p in ch for p in patterns)
    return ok


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
    out.write(f"samples:    {s['samples']:,} over {s['duration_s']:.3f} s; effective rate "
              f"{opt(s['effective_rate_hz'], lambda r: f'{r:,.1f} Hz')} ({interval})\n")
    if any(s.get(k) is not None for k in ("dropped", "missed_deadlines", "sample_ns_mean")):
        out.write(f"dropped:    {opt(s.get('dropped'), lambda v: f'{int(v):,}')}   missed deadlines: "
                  f"{opt(s.get('missed_deadlines'), lambda v: f'{int(v):,}')}   sample cost: mean "
                  f"{opt(s.get('sample_ns_mean'), lambda v: f'{v / 1e3:.1f} us')}, p99 "
                  f"{opt(s.get('sample_ns_p99'), lambda v: f'{v / 1e3:.1f} us')}\n")
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
        unit = infer_unit(ch)
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
