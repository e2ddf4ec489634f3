"""Statistics of a trace: time-weighted per-channel statistics (a counter holds its value until its next event)
and the summary ``sysprof report`` prints or writes as JSON.

The effective rate is the samples over the time sampling covered. A ``sysprof record`` trace (its sampler
statistics known) was sampled from its start event to its stop event: ``(taken - dropped) / duration``. A trace
without them (Composer's layout, whose profiler samples only in its schedule's active windows) is split into
sampling windows: a spacing of its distinct timestamps over ``GAP_FACTOR`` x their median spacing ends a window,
and each window covers its first to its last timestamp plus one median spacing (its last sample's share), so
``rate = timestamps / sum of window lengths`` -- 200 Hz for 5 ms spacing however long the gaps between windows.
"""
from __future__ import annotations

import fnmatch
import math
from typing import Optional

from ..sampling.registry import SOURCES, source_available
from .model import TraceData
from .units import unit_of

__all__ = ["weighted_quantile", "weighted_stats", "summarize", "channel_filter", "jsonable", "sampled_windows",
           "GAP_FACTOR"]

#: a spacing of a trace's timestamps over this many median spacings ends a sampling window (Composer's profiling
#: windows are seconds apart at millisecond sampling; a late sample is a few spacings)
GAP_FACTOR = 10.0


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



def _finite(values, weights):
    """The finite values with finite, non-negative weights, as float64 arrays (the arrays given where all are)."""
    import numpy as np

    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    ok = np.isfinite(v)
    ok &= np.isfinite(w)
    ok &= w >= 0
    if ok.all():
        return v, w
    return v[ok], w[ok]


def _quantile_sorted(vs, cw, q: float) -> float:
    """The smallest of the sorted values ``vs`` whose cumulative weight ``cw`` reaches ``q`` of the total."""
    import numpy as np

    return float(vs[min(int(np.searchsorted(cw, q * cw[-1], side="left")), vs.size - 1)])


def weighted_quantile(values, weights, q: float) -> Optional[float]:
    """The time-weighted quantile ``q`` of the finite values (the table's percentiles, and the plot's clip): the
    smallest value whose cumulative weight (values sorted) reaches ``q`` of the total; with no positive weight,
    the largest value; None without finite values."""
    import numpy as np

    v, w = _finite(values, weights)
    if v.size == 0:
        return None
    order = np.argsort(v, kind="stable")
    cw = np.cumsum(w[order])
    if not cw[-1] > 0:
        return float(v[order][-1])
    return _quantile_sorted(v[order], cw, q)


def weighted_stats(values, weights) -> dict:
    """min, mean, p50, p95, max of the finite values, mean and percentiles weighted by ``weights``."""
    import numpy as np

    v, w = _finite(values, weights)
    if v.size == 0:
        return dict(min=None, mean=None, p50=None, p95=None, max=None)
    if not w.sum() > 0:
        w = np.ones_like(v)
    mean = float(np.dot(v, w) / w.sum())
    order = np.argsort(v, kind="stable")
    cw = w[order]
    np.cumsum(cw, out=cw)
    vs = v[order]
    del order
    # A weighted mean lies in [min, max]; the float sum can round just outside (a constant 0.45 read 0.4499...).
    mean = min(max(mean, float(vs[0])), float(vs[-1]))
    return dict(min=float(vs[0]), mean=mean, p50=_quantile_sorted(vs, cw, 0.5), p95=_quantile_sorted(vs, cw, 0.95),
                max=float(vs[-1]))


def sampled_windows(data: TraceData):
    """``[(start_us, end_us)]``: the time a trace was sampled. A ``sysprof record`` trace: one window, its start
    event to its stop event (else its last timestamp plus an interval: a truncated trace). Other traces: runs of
    distinct timestamps no further apart than ``GAP_FACTOR`` median spacings, each from its first to its last
    timestamp plus one median spacing. Empty when the trace has no counter timestamps."""
    import numpy as np

    ts = data.timestamps()
    if ts.size == 0:
        return []
    if data.recorded and data.start_ts is not None:
        end = data.stop_ts if data.stop_ts is not None else float(ts[-1]) + data.interval_us()
        return [(float(data.start_ts), float(max(end, data.start_ts)))]
    if ts.size == 1:
        return [(float(ts[0]), float(ts[0]) + data.interval_us())]
    gaps = np.diff(ts)
    median = float(np.median(gaps))
    cut = np.flatnonzero(gaps > GAP_FACTOR * median) + 1  # index of each window's first timestamp but the first's
    firsts = np.concatenate([[0], cut])
    lasts = np.concatenate([cut - 1, [ts.size - 1]])
    return [(float(ts[a]), float(ts[b]) + median) for a, b in zip(firsts.tolist(), lasts.tolist())]


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
    windows = sampled_windows(data)
    if isinstance(taken, (int, float)):
        samples = int(taken - (dropped or 0))
        sampled = duration
        rate = samples / duration if duration > 0 else None
    else:  # a trace from elsewhere: count distinct timestamps, over the sampling windows only
        samples = int(ts.size)
        sampled = sum(b - a for a, b in windows) / 1e6
        rate = samples / sampled if sampled > 0 and samples >= 2 else None
    channels = {}
    shares = _counter_shares(data)
    for ch, (t, v) in data.series.items():
        entry = {"unit": unit_of(ch, data.units), "events": int(v.size), "valid": 0}
        entry.update(weighted_stats(v, data.weights(t)))
        if ch in shares:  # a share over the whole trace: from its counters (sysprof.report.shares)
            entry["mean"] = shares[ch][0]
        finite = np.isfinite(v)
        entry["valid"] = int(finite.sum())
        entry["first"] = float(v[finite.argmax()]) if entry["valid"] else None
        entry["last"] = float(v[v.size - 1 - finite[::-1].argmax()]) if entry["valid"] else None
        channels[ch] = entry
        del t, v
    interval, interval_source = data.interval()
    errors = dict(data.meta.get("errors") or {})  # at the start; the stop's add what went wrong later (markers)
    stop_errors = (data.stop or {}).get("errors")
    if isinstance(stop_errors, dict):
        errors.update(stop_errors)
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
        "sampled_s": sampled,
        "windows": len(windows),
        "taken": taken,
        "dropped": dropped,
        "missed_deadlines": stats.get("missed_deadlines"),
        "markers": stats.get("markers"),
        "markers_dropped": stats.get("markers_dropped"),
        "sample_ns_mean": stats.get("sample_ns_mean"),
        "sample_ns_p99": stats.get("sample_ns_p99"),
        "returncode": (data.stop or {}).get("returncode"),
        "recorded": data.recorded,
        "truncated": data.truncated,
        "errors": errors,
        "unavailable": [src for src in errors if src in SOURCES
                        and not source_available(src, data.meta.get("channels") or [])],
        "channels": channels,
    })


def _counter_shares(data: TraceData) -> dict:
    """The trace's share channels with counters, over the whole trace (:func:`sysprof.report.shares.counter_means`)."""
    from .shares import counter_means, counters_of, is_share_counter

    wanted = [ch for ch in data.series if counters_of(ch)]
    if not wanted or not any(is_share_counter(ch) for ch in data.series):
        return {}
    from .phases import whole_trace

    got = whole_trace(data, channels=is_share_counter).channels
    return counter_means(wanted, {ch: c.amount for ch, c in got.items()}, {ch: c.seconds for ch, c in got.items()})


def channel_filter(patterns):
    if not patterns:
        return lambda ch: True

    def ok(ch):
        return any(fnmatch.fnmatchcase(ch, p) or p in ch for p in patterns)
    return ok
