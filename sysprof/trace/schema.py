"""The trace's own vocabulary: sysprof's event names and how a channel name maps to a counter track
(group and key). Writers and readers both import it; no writer imports the report."""
from __future__ import annotations

#: names of sysprof's own events in a trace (written by ``sysprof record``)
START_EVENT = "sysprof start"
STOP_EVENT = "sysprof stop"
STATS_COUNTER = "sysprof"
#: a metadata event ("ph": "M") listing the times of the samples written since the previous one, so a
#: changes-only trace (a counter written only when it changed) still yields a row per sample:
#: ``{"name": SAMPLES_EVENT, "ph": "M", "pid": P, "tid": 0, "ts": <the first's ts>, "args": {"t0_us": first,
#: "dt_us": [next - previous, ...]}}`` in whole µs (the ``ts`` of the counter events), or ``t0_ns`` / ``dt_ns``
#: where the trace keeps finer times (intervals below 1 ms; ``.pftrace``). Readers: :func:`sample_times_ns`.
SAMPLES_EVENT = "sysprof samples"


def samples_event(times_ns, pid: int, ts, unit_ns: int) -> dict:
    """The :data:`SAMPLES_EVENT` of sample times ``times_ns`` (ascending ints), in steps of ``unit_ns`` (1000:
    whole µs, each ``t // 1000`` as the counter events' ``ts``; 1: ns); ``ts`` is the first's ``ts``."""
    t = [int(x) // unit_ns for x in times_ns]
    key = "us" if unit_ns == 1000 else "ns"
    return {"name": SAMPLES_EVENT, "ph": "M", "pid": pid, "tid": 0, "ts": ts,
            "args": {f"t0_{key}": t[0], f"dt_{key}": [b - a for a, b in zip(t, t[1:])]}}


def sample_times_ns(args):
    """The sample times (ns, a list of ints) of a :data:`SAMPLES_EVENT`'s args; [] when they are not well formed."""
    if not isinstance(args, dict):
        return []
    for key, scale in (("us", 1000), ("ns", 1)):
        t0, dt = args.get(f"t0_{key}"), args.get(f"dt_{key}")
        if isinstance(t0, int) and isinstance(dt, list) and all(isinstance(d, int) and d >= 0 for d in dt):
            out, t = [t0 * scale], t0
            for d in dt:
                t += d
                out.append(t * scale)
            return out
    return []


#: the key of a track that says when its values were read (``gpu/<i>/reading_time_seconds``: wall-clock seconds
#: since the epoch): writers stamp the track's events with it instead of the row's time and leave it out of the
#: args (:class:`~sysprof.trace.tracks.TrackLayout`), so the values sit in the trace at the time they were true
READING_TIME_KEY = "reading_time_seconds"
#: how far before its row a reading time may lie (:func:`reading_times_ns`)
READING_TIME_SPAN_NS = 10 * 10**9


def reading_times_ns(rows_ns, seconds):
    """int64 ns per row: when each row's values were read, from a :data:`READING_TIME_KEY` column (wall-clock
    seconds, which a float64 holds to 0.24 µs: rounded to the µs), kept within ``[row - READING_TIME_SPAN_NS, row]``
    (a reading never comes after the row that found it, and a clock step cannot move it further back); the row's
    own time where the reading has none (NaN)."""
    import numpy as np

    rows = np.asarray(rows_ns, dtype=np.int64)
    s = np.asarray(seconds, dtype=np.float64)
    ok = np.isfinite(s) & (np.abs(s) < 9e9)  # seconds whose µs fit a float64 exactly
    read = np.rint(np.where(ok, s, 0.0) * 1e6).astype(np.int64) * 1000
    return np.where(ok, np.clip(read, rows - READING_TIME_SPAN_NS, rows), rows)


def split_channel(name: str):
    """Counter-event grouping of a channel: ``("disk/sda", "read_bytes")`` for ``disk/sda/read_bytes``.

    The group is everything before the last '/'; a name without '/' forms its own group with key
    ``"value"``. ``join_channel`` is the inverse."""
    group, sep, key = name.rpartition("/")
    if not sep:
        return name, "value"
    return group, key


def join_channel(group: str, key: str) -> str:
    """Channel name of key ``key`` of counter ``group``: ``group/key``, but ``group`` alone for the key
    ``value`` of a one-level group, and when ``group`` already ends in ``key`` (Composer's layout writes
    ``{"name": "disk/sda/read_bytes", "args": {"read_bytes": ...}}``)."""
    if (key == "value" and "/" not in group) or group.rsplit("/", 1)[-1] == key:
        return group
    return f"{group}/{key}"


#: a metadata event ("ph": "M") that declares the unit of every counter channel in the trace, as Perfetto's
#: counter tracks declare theirs: ``{"name": UNITS_EVENT, "ph": "M", "pid": P, "tid": 0,
#: "args": {"units": {channel: unit}}}``, ``channel`` being the name ``join_channel(event name, key)`` gives.
#: Writers emit it once per channel set; ``report`` reads it and infers a unit from a name only in traces
#: without it (foreign ones, older sysprof).
UNITS_EVENT = "sysprof units"


def units_event(units: dict, pid: int) -> dict:
    """The metadata event declaring ``units`` (channel name -> unit symbol, e.g. ``"B/s"``)."""
    return {"name": UNITS_EVENT, "ph": "M", "pid": pid, "tid": 0, "args": {"units": dict(units)}}
