"""The typed events of a recording, and the one place that spells them as Chrome trace events.

Every producer in sysprof (the markers' receiver, the trainer phases, GPU XIDs, the budget's interval changes,
the GPU driver's samples, the start and stop of a recording) makes :class:`Event` values in wall-clock
nanoseconds. A sink turns them into its own format: :func:`to_chrome` for the JSON writers (``ts`` by the sink's
rule), the Perfetto writer and Composer's profiler take the fields as they are. No other module of sysprof
writes an event's phase letter.

The start event's metadata is built here, once (:func:`start_metadata`), for ``sysprof record``, the trainer
callbacks, ``SystemProfiler``'s flight dumps and the flight recorder, so every trace carries the same keys.
"""
from __future__ import annotations

import os
import platform
import sys
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence

from .schema import SAMPLES_EVENT, START_EVENT, STOP_EVENT, UNITS_EVENT

__all__ = ["Event", "SPAN", "BEGIN", "END", "INSTANT", "COUNTER", "METADATA", "to_chrome", "chrome_events",
           "metadata", "instant", "span", "begin", "end", "counter", "process_name", "thread_name",
           "start_metadata", "sampler_errors", "head", "stop", "PHASE", "KINDS"]

#: an event's kind: a span with its duration, a span's begin and end (markers), an instant, a counter, metadata
SPAN, BEGIN, END, INSTANT, COUNTER, METADATA = "span", "begin", "end", "instant", "counter", "metadata"
KINDS = (SPAN, BEGIN, END, INSTANT, COUNTER, METADATA)
#: the Chrome trace format's phase letter of each kind (the one table of them in sysprof's writers)
PHASE = {SPAN: "X", BEGIN: "B", END: "E", INSTANT: "i", COUNTER: "C", METADATA: "M"}
#: an instant's scope: global, process, thread (Chrome's "s")
SCOPES = ("g", "p", "t")


class Event(NamedTuple):
    """One event of a recording, at wall-clock nanoseconds ``t_ns`` (a span: ``dur_ns`` long).

    ``args``: the event's arguments (a counter's: key -> number); ``scope``: an instant's (``"g"``, ``"p"``,
    ``"t"``); ``cat``: a category or None."""

    kind: str
    name: str
    t_ns: int
    pid: Any = 0
    tid: Any = 0
    args: Optional[dict] = None
    cat: Optional[str] = None
    dur_ns: int = 0
    scope: str = "g"


def metadata(name: str, pid: Any, args: dict, tid: Any = 0) -> Event:
    return Event(METADATA, name, 0, pid, tid, args)


def process_name(pid: Any, name: str, sort_index: Optional[int] = None) -> List[Event]:
    out = [metadata("process_name", pid, {"name": name})]
    if sort_index is not None:
        out.append(metadata("process_sort_index", pid, {"sort_index": sort_index}))
    return out


def thread_name(pid: Any, tid: Any, name: str) -> Event:
    return metadata("thread_name", pid, {"name": name}, tid)


def instant(name: str, t_ns: int, pid: Any, args: Optional[dict] = None, tid: Any = 0, scope: str = "g",
            cat: Optional[str] = None) -> Event:
    return Event(INSTANT, name, int(t_ns), pid, tid, args, cat, 0, scope)


def span(name: str, start_ns: int, end_ns: int, pid: Any, tid: Any = 0, args: Optional[dict] = None,
         cat: Optional[str] = None) -> Event:
    return Event(SPAN, name, int(start_ns), pid, tid, args, cat, max(0, int(end_ns) - int(start_ns)))


def begin(name: str, t_ns: int, pid: Any, tid: Any, args: Optional[dict] = None, cat: Optional[str] = None) -> Event:
    return Event(BEGIN, name, int(t_ns), pid, tid, args, cat)


def end(name: str, t_ns: int, pid: Any, tid: Any, args: Optional[dict] = None, cat: Optional[str] = None) -> Event:
    return Event(END, name, int(t_ns), pid, tid, args, cat)


def counter(name: str, t_ns: int, pid: Any, values: dict, tid: Any = 0, cat: Optional[str] = None) -> Event:
    return Event(COUNTER, name, int(t_ns), pid, tid, values, cat)


def to_chrome(ev: Event, ts: Callable[[int], Any]) -> dict:
    """``ev`` as a Chrome trace event; ``ts(t_ns)`` is the sink's rule for ``ts`` (µs, integer or float)."""
    out: Dict[str, Any] = {"name": ev.name}
    if ev.cat is not None:
        out["cat"] = ev.cat
    out["ph"] = PHASE[ev.kind]
    if ev.kind == INSTANT:
        out["s"] = ev.scope
    if ev.kind != METADATA:
        t = ts(ev.t_ns)
        out["ts"] = t
        if ev.kind == SPAN:
            out["dur"] = ts(ev.t_ns + ev.dur_ns) - t
    out["pid"] = ev.pid
    out["tid"] = ev.tid
    if ev.args is not None and (ev.args or ev.kind in (COUNTER, METADATA, INSTANT)):
        out["args"] = ev.args
    return out


def chrome_events(events: Sequence[Event], ts: Callable[[int], Any]) -> List[dict]:
    return [to_chrome(e, ts) for e in events]


def start_metadata(sampler: Any, channels: Sequence[str], t_start_ns: int, *, recorder_pid: int,
                   pid: Optional[int] = None, command_line: Optional[str] = None, framework: str = "",
                   duration_limit_s: Optional[float] = None, errors: Optional[dict] = None,
                   ranks: Optional[dict] = None, **extra: Any) -> dict:
    """The start event's ``args``: the same keys in every sysprof trace (``record``'s, a callback's, a flight
    dump's). ``pid``: the recorded process (None: the machine only); ``command_line``: its command line (the
    recorder's own where None); ``ranks``: :func:`sysprof.distributed.rank_info`'s ``as_dict()`` (read here where
    None); ``extra``: keys a recorder adds (``part``)."""
    from sysprof import __version__

    if ranks is None:
        from sysprof.distributed import rank_info

        ranks = rank_info().as_dict()
    meta = {
        "version": __version__,
        "command_line": " ".join(sys.argv) if command_line is None else command_line,
        "framework": framework,
        "pid": pid,
        "recorder_pid": recorder_pid,
        "interval_s": sampler.interval,
        "intervals_s": dict(getattr(sampler, "intervals", {}) or {}),
        "budget": getattr(sampler, "budget", None),
        "capacity": getattr(sampler, "capacity", None),
        "backend": getattr(sampler, "backend", None),
        "channels": list(channels),
        "errors": sampler_errors(sampler) if errors is None else errors,
        "host": platform.node(),
        "kernel": platform.release(),
        "cpu_count": os.cpu_count(),
        "start_time_ns": int(t_start_ns),
        "duration_limit_s": duration_limit_s,
        "devices": list(sampler.device_filter.globs) if hasattr(sampler, "device_filter") else None,
        "gpus": list(getattr(sampler, "devices", []) or []),
    }
    meta.update(ranks)
    meta.update(extra)
    return meta


def sampler_errors(sampler: Any) -> dict:
    """The sampler's errors; where they cannot be read, that (under ``"recorder"``): the recording goes on."""
    try:
        return dict(getattr(sampler, "errors", {}) or {})
    except Exception as e:  # noqa: BLE001 - what cannot be read is said
        return {"recorder": f"the sampler's errors could not be read: {type(e).__name__}: {e}"}


def head(meta: dict, system_pid: int, t_start_ns: int, units: dict, names: Sequence[Event] = ()) -> List[Event]:
    """A trace's first events: ``names`` (process names), the rank metadata Composer's mergers read
    (``global_rank``, ``clock_sync_timestamp_us``), the start event carrying ``meta`` and the units event."""
    rank = meta.get("rank", 0)
    return [*names,
            metadata("global_rank", system_pid, {"value": rank}),
            metadata("clock_sync_timestamp_us", system_pid, {"value": int(t_start_ns) // 1000}),
            instant(START_EVENT, t_start_ns, system_pid, meta),
            _units(units, system_pid)]


def _units(units: dict, pid: Any) -> Event:
    return metadata(UNITS_EVENT, pid, {"units": dict(units)})


# ---- Chrome events built directly (the hot paths: a counter per track and row; a drain's sample times) ----
def counter_event(name: str, ts: Any, pid: Any, tid: Any, args: dict, cat: Optional[str] = None) -> dict:
    """A Chrome counter event: ``{"name", ["cat",] "ph": "C", "ts", "pid", "tid", "args"}`` (``cat`` only when
    given: Composer's layout has it, sysprof's has not)."""
    if cat is None:
        return {"name": name, "ph": "C", "ts": ts, "pid": pid, "tid": tid, "args": args}
    return {"name": name, "cat": cat, "ph": "C", "ts": ts, "pid": pid, "tid": tid, "args": args}


def units_event(units: dict, pid: Any) -> dict:
    """The Chrome metadata event declaring ``units`` (channel name -> unit symbol, e.g. ``"B/s"``)."""
    return to_chrome(_units(units, pid), int)


def samples_event(times_ns, pid: int, ts, unit_ns: int) -> dict:
    """The ``sysprof samples`` metadata event of sample times ``times_ns`` (ascending ints), in steps of
    ``unit_ns`` (1000: whole µs, each ``t // 1000`` as the counter events' ``ts``; 1: ns); ``ts`` is the first's
    ``ts`` (a metadata event with a time: readers place it)."""
    t = [int(x) // unit_ns for x in times_ns]
    key = "us" if unit_ns == 1000 else "ns"
    return {"name": SAMPLES_EVENT, "ph": PHASE[METADATA], "pid": pid, "tid": 0, "ts": ts,
            "args": {f"t0_{key}": t[0], f"dt_{key}": [b - a for a, b in zip(t, t[1:])]}}


def stop(t_ns: int, system_pid: int, args: dict) -> Event:
    """The stop event, carrying ``args`` (the sampler's statistics, errors, ...)."""
    return instant(STOP_EVENT, t_ns, system_pid, args)
