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
    """The :data:`SAMPLES_EVENT` (:func:`sysprof.trace.events.samples_event`, where events are spelled)."""
    from .events import samples_event

    return samples_event(times_ns, pid, ts, unit_ns)


def sample_times_ns(args):
    """The sample times (ns, a list of ints) of a :data:`SAMPLES_EVENT`'s args; [] when they are not well formed."""
    return sample_times_array(args).tolist()


_INT64 = 1 << 63


def sample_times_array(args):
    """:func:`sample_times_ns` as an int64 numpy array (empty when not well formed, or past int64's range)."""
    import numpy as np

    if isinstance(args, dict):
        for key, scale in (("us", 1000), ("ns", 1)):
            t0, dt = args.get(f"t0_{key}"), args.get(f"dt_{key}")
            if isinstance(t0, int) and isinstance(dt, list):
                times = _times(t0, dt, scale, np)
                if times is not None:
                    return times
    return np.zeros(0, dtype=np.int64)


def _times(t0: int, dt: list, scale: int, np):
    """``t0 + cumsum(dt)`` times ``scale`` (int64), or None where ``dt`` is not a list of ints >= 0 or a time is
    past int64."""
    try:
        d = np.array(dt)
    except (ValueError, OverflowError):
        d = None
    if d is not None and (d.size == 0 or (d.ndim == 1 and d.dtype.kind in "ib")):
        d = d.astype(np.int64, copy=False)
        if d.size and d.min() < 0:
            return None
        top = abs(t0) + (int(d.max()) * d.size if d.size else 0)
        if top * scale < _INT64:  # no sum below can leave int64
            out = np.empty(d.size + 1, dtype=np.int64)
            out[0] = t0
            np.cumsum(d, out=out[1:])
            out[1:] += t0
            return out * scale if scale != 1 else out
    if not all(isinstance(x, int) and x >= 0 for x in dt):  # the rare rest (huge numbers): in Python
        return None
    out, t = [t0 * scale], t0
    for x in dt:
        t += x
        out.append(t * scale)
    if not all(-_INT64 <= x < _INT64 for x in (out[0], out[-1])):
        return None
    return np.array(out, dtype=np.int64)


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
    """The metadata event declaring ``units`` (:func:`sysprof.trace.events.units_event`)."""
    from .events import units_event

    return units_event(units, pid)
