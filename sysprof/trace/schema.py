"""The trace's own vocabulary: sysprof's event names and how a channel name maps to a counter track
(group and key). Writers and readers both import it; no writer imports the report."""
from __future__ import annotations

#: names of sysprof's own events in a trace (written by ``sysprof record``)
START_EVENT = "sysprof start"
STOP_EVENT = "sysprof stop"
STATS_COUNTER = "sysprof"


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
