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

from ..sampling.registry import SOURCES, channel_spec, source_available, source_of
from .model import TraceData
from .units import unit_of

__all__ = ["weighted_quantile", "weighted_stats", "summarize", "channel_filter", "jsonable", "sampled_windows",
           "section_of", "rate_names", "GAP_FACTOR", "REPORT_VERSION"]

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
    """The summary ``report`` prints and ``report --json`` writes (:data:`REPORT_VERSION`). Channels are named as
    the sampler names them (a Composer-layout trace's mapped back, :mod:`sysprof.report.names`), each with its
    registry ``source`` and ``kind``, its time-weighted statistics and its ``amount`` over the trace (a total's
    increase, a rate's integral, CPU-seconds of a CPU share: :func:`sysprof.report.phases.amount_rule`)."""
    import numpy as np

    from .names import sampler_series
    from .phases import _TOTAL_KINDS, whole_trace
    from .table import problem_lines

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
    series, units = sampler_series(data)
    whole = whole_trace(data).channels  # amounts over the trace; a share's mean from its counters
    shares = _counter_shares(series, whole)
    channels = {}
    for ch, (t, v) in series.items():
        spec = channel_spec(ch)
        entry = {"unit": unit_of(ch, units), "events": int(v.size), "valid": 0,
                 "source": section_of(ch), "kind": spec.kind if spec is not None else None}
        entry.update(weighted_stats(v, data.weights(t)))
        if ch in shares:  # a share over the whole trace: from its counters (sysprof.report.shares)
            entry["mean"] = shares[ch]
        finite = np.isfinite(v)  # (a mask, not a copy of the values: one channel's arrays at a time)
        entry["valid"] = int(finite.sum())
        entry["first"] = float(v[finite.argmax()]) if entry["valid"] else None
        entry["last"] = float(v[v.size - 1 - finite[::-1].argmax()]) if entry["valid"] else None
        got = whole.get(ch)
        entry["amount"] = got.amount if got is not None else None
        entry["amount_unit"] = got.amount_unit if got is not None and got.amount is not None else None
        channels[ch] = entry
        del t, v, finite
    for total, got in whole.items():  # a rate's amount: its total's increase where the trace holds the total
        if channels.get(total, {}).get("kind") not in _TOTAL_KINDS or got.amount is None:
            continue
        for name in rate_names(total):
            if name in channels and channels[name]["amount"] is not None:
                channels[name]["amount"], channels[name]["amount_unit"] = got.amount, got.amount_unit
    interval, interval_source = data.interval()
    errors = dict(data.meta.get("errors") or {})  # at the start; the stop's add what went wrong later (markers)
    stop_errors = (data.stop or {}).get("errors")
    if isinstance(stop_errors, dict):
        errors.update(stop_errors)
    unavailable = [src for src in errors if src in SOURCES
                   and not source_available(src, data.meta.get("channels") or [])]
    returncode = (data.stop or {}).get("returncode")
    from ..sampling.budget import own_cost

    return jsonable({
        "report_version": REPORT_VERSION,
        **own_cost(data.meta, data.stop or {}, duration),
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
        "decimation": _decimation(data.meta.get("decimation")),
        "returncode": returncode,
        "recorded": data.recorded,
        "truncated": data.truncated,
        "errors": errors,
        "unavailable": unavailable,
        "problems": problem_lines(errors, unavailable, command_ended=returncode is not None),
        "process_tree_members": _members(data, series),
        "channels": channels,
    })


#: ``report --json``'s layout: 2 added ``report_version``, the channels' ``source``, ``kind``, ``amount`` and
#: ``amount_unit``, ``problems``, ``process_tree_members`` and ``table``, sysprof's own cost (``sysprof_cpu_percent``,
#: ``budget_percent``, ``interval_changes``), and names a Composer-layout trace's channels as the sampler does
#: (``memory/used_bytes``, not ``memory/virtual/used_gb``); absent: 1
REPORT_VERSION = 2


def rate_names(total: str) -> tuple:
    """The names a rate of the total ``total`` can have: ``disk/sda/read_bytes`` -> ``..._per_second``,
    ``vmstat/pgfault_total`` and ``pressure/io/some_seconds_total`` -> ``..._per_second`` without ``_total``."""
    names = (total + "_per_second",)
    return names + ((total[: -len("_total")] + "_per_second",) if total.endswith("_total") else ())


def section_of(channel: str) -> str:
    """The table section of a channel: its registry source; for one the registry does not know, the source whose
    prefix it has (``memory/cuda/...`` -> ``memory``), else its first path component."""
    known = source_of(channel)
    if known is not None:
        return known
    head = channel.split("/", 1)[0] + "/"
    for src in SOURCES.values():
        if head in src.prefixes:
            return src.name
    return head[:-1]


def _counter_shares(series, whole) -> dict:
    """``{share channel: its mean over the whole trace}`` for the share channels whose counters the trace holds
    (:func:`sysprof.report.shares.counter_means`, from the counters' increases in ``whole``)."""
    from .shares import counter_means, counters_of

    wanted = [ch for ch in series if counters_of(ch)]
    if not wanted:
        return {}
    got = counter_means(wanted, {ch: c.amount for ch, c in whole.items()}, {ch: c.seconds for ch, c in whole.items()})
    return {ch: mean for ch, (mean, _) in got.items()}


def _members(data: TraceData, series) -> list:
    """process_tree's members: the stop event's record of who held which slot (``pid``, ``comm``, ``slot``; a last
    ``{"dropped": n}``), else the distinct values of the trace's ``process_tree/<slot>/pid`` channels (``pid`` and
    ``slot`` only: a truncated trace, one from elsewhere)."""
    import numpy as np

    got = (data.stop or {}).get("process_tree_members")
    out = []
    if isinstance(got, list):
        for m in got:
            if isinstance(m, dict) and isinstance(m.get("dropped"), int):
                out.append({"dropped": m["dropped"]})
            elif isinstance(m, dict) and isinstance(m.get("pid"), int):
                out.append({"slot": m.get("slot"), "pid": m["pid"], "comm": str(m.get("comm") or "")})
        return out
    for ch, (_, v) in series.items():
        parts = ch.split("/")
        if len(parts) == 3 and parts[0] == "process_tree" and parts[2] == "pid" and parts[1].isdigit():
            finite = v[np.isfinite(v)]
            seen = dict.fromkeys(int(p) for p in finite.tolist())
            out += [{"slot": int(parts[1]), "pid": p} for p in seen]
    return out


def channel_filter(patterns):
    if not patterns:
        return lambda ch: True

    def ok(ch):
        return any(fnmatch.fnmatchcase(ch, p) or p in ch for p in patterns)
    return ok


def _decimation(d) -> "dict | None":
    """A decimated trace's rule (``record --flight-trace``'s start event ``decimation``): ``every_s``, the
    ``sampled_interval_s`` it was decimated from, and how many channels each rule kept; None for a full-rate trace."""
    if not isinstance(d, dict) or not isinstance(d.get("every_s"), (int, float)):
        return None
    modes = d.get("modes") if isinstance(d.get("modes"), dict) else {}
    return {"every_s": d["every_s"], "sampled_interval_s": d.get("sampled_interval_s"),
            "modes": {k: v for k, v in modes.items() if isinstance(v, int)}}
