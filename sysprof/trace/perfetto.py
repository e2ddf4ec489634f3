"""Perfetto-native traces (``.pftrace``): the format. The writer is :class:`PerfettoTraceWriter` (in
:mod:`sysprof.trace.perfetto_write`), :func:`read_events` (in :mod:`sysprof.trace.perfetto_read`) reads them back;
:func:`writer_class_for` picks the writer of a path (``sysprof record -o trace.pftrace``).

A ``.pftrace`` file is Perfetto's protobuf trace format: a stream of ``TracePacket`` messages (a ``Trace`` message
written field by field), built with the official ``perfetto`` package's protos, so ui.perfetto.dev and
trace_processor open it natively. Needs ``pip install 'sysprof[perfetto]'`` (the ``perfetto`` and ``protobuf``
packages); they are imported on first use.

:class:`PerfettoTraceWriter` takes the typed rows and events of a sink
(:meth:`~PerfettoTraceWriter.write_typed`: :class:`~sysprof.trace.tracks.CounterRow`, whose track brings its keys
and units, and :class:`~sysprof.trace.events.Event`) and the Chrome-style event dicts of any other caller, and
writes:

* **counters** (a ``CounterRow``, or ``"ph": "C"``): one counter track per channel (``join_channel(event name,
  key)``, the track's name), declared once by a ``TrackDescriptor`` with its unit: ``UNIT_SIZE_BYTES`` for ``B``,
  ``UNIT_TIME_NS`` with ``unit_multiplier`` 10^9 for ``s`` (values stay in seconds in the file), ``UNIT_COUNT`` for
  unit-less channels, ``unit_name`` otherwise (``%``, ``B/s``, ``s/s``...), from the row's
  :class:`~sysprof.trace.tracks.CounterTrack` (the registry's), for a dict from the trace's ``"sysprof units"``
  event. A row's values are written where its ``changed`` says (the renderer's changes, found once); a dict's
  where they differ from the counter's last ones. Tracks nest as
  process (or thread) -> counter group (the event name, e.g. ``disk/sda``) -> channel. A value is written only when
  it differs from the channel's previous one, or is the counter's first in its chunk (see below; Perfetto's
  counters hold their value, as Chrome's do); a key that
  leaves an event (its value became unknown) is written as NaN, ending the old value. Up to nine values share one
  ``TYPE_COUNTER`` event (``extra_counter_values`` / ``extra_double_counter_values``); an integral value is written as
  an integer (``counter_value``), others as doubles (``double_counter_value``). Every counter event of the input
  yields at least one packet, so its timestamp survives.
* **slices**: ``B``/``E`` as ``TYPE_SLICE_BEGIN``/``TYPE_SLICE_END`` on the thread track of their (pid, tid) (the
  process track where tid is 0); ``X`` as a begin and an end ``dur`` later. Markers of ``sysprof.mark()`` arrive as
  these.
* **instants**: ``i``/``I`` as ``TYPE_INSTANT`` on the same tracks (sysprof's start and stop events included: their
  args survive as debug annotations, typed: bool, int, double, string, nested dicts and lists).
* **everything else** (``M`` metadata such as ``process_name`` and ``"sysprof units"``, other phases, events whose
  pid or tid is not an integer): as ``TYPE_INSTANT`` events on a global ``sysprof metadata`` track, the whole event
  kept in debug annotations; ``process_name`` / ``thread_name`` also name the process and thread descriptors.

Event names, categories and debug-annotation names are interned (``InternedData``; the first packet of each chunk
sets ``SEQ_INCREMENTAL_STATE_CLEARED``, every packet that uses interned names, defaults or the incremental clock sets
``SEQ_NEEDS_INCREMENTAL_STATE``). Timestamps are exact nanoseconds on the ``CLOCK_REALTIME`` clock (the trace's
primary clock: ``ts`` µs since the Unix epoch, times 1000), written as deltas on a sequence-scoped incremental clock
(id 64) that a ``ClockSnapshot`` ties to ``CLOCK_REALTIME`` (Perfetto's own SDK does the same); an event earlier
than the one before it is written with an absolute ``CLOCK_REALTIME`` timestamp instead. A ``ts`` that is a
:class:`TraceTime` gives the exact ns; an int ``ts`` is µs; a float ``ts`` is rounded to the nearest ns.

Streaming: packets are buffered (up to 1 MiB) and each :meth:`~PerfettoTraceWriter.flush` writes them as one
chunk: one ``compressed_packets`` packet (deflate, as Perfetto's tracing service writes them; trace_processor and
the UI expand it; ``compress=False`` writes them as they are). Every packet is whole in the file once ``flush()``
returns (``sysprof record`` flushes at least once a second), so a recorder that is killed loses at most what came
since the last flush and the file stays readable: :func:`read_events` reads up to the last whole packet, those
still held by a cut-off compressed bundle included. Nothing needs repairing (there is no closing bracket);
``sysprof repair`` says so.

Damage (a flipped bit, a torn sector) costs only the chunk it lands in: each chunk reads without the others. It
clears the incremental state and sets it again: trace defaults, a ``ClockSnapshot`` at the last timestamp, the
interned names it uses, the ``TrackDescriptor`` of every track it uses (parents first), each counter's values in
full the first time. The reader checks each chunk whole (deflate's Adler-32), skips a damaged one and finds the
next packet boundary (see :class:`~sysprof.trace.perfetto_read._Scan`). The cost: a recording flushed every second
is 1.1–1.6 × the size of the same events in one chunk (``benchmarks/bench_pftrace.py``: ``--all`` 1.08 ×, the host
set 1.46 × at 1 ms; 1.6 × at the default 10 ms, where a second holds few events). Uncompressed traces have no
checksum: a flipped bit there can change a value unnoticed (still only in its chunk).

What a reader gets back (:func:`~sysprof.trace.perfetto_read.read_events`): the same events, in the same order,
with these normalisations: ``ts`` is a :class:`TraceTime` (a float of µs whose ``.ns`` is the exact ns written);
counter values are floats (an int value comes back as the equal float); NaN and +/-inf counter values are left out
(as in the Chrome writer); a counter event with no value, of a counter that has none at the time, is not written
(it says nothing); a non-numeric counter value is left out (it is no channel); two counter events of one counter
at the same ns, written one after the other, come back as one; args anywhere else follow JSON's rules (a
non-finite float becomes None, a tuple a list, a non-string key a string). ``round(ts * 1000)`` cannot give the ns
of a date in float arithmetic (53 bits hold µs, not ns, since 1970): use ``ts.ns``.
"""
from __future__ import annotations

import json
import math
import os
from typing import Any, Union

from .chrome import ChromeTraceWriter

__all__ = ["PerfettoTraceWriter", "TraceTime", "writer_class_for", "is_perfetto_path", "read_events", "iter_events",
           "protos", "PERFETTO_SUFFIX"]


def __getattr__(name: str):
    if name == "PerfettoTraceWriter":  # the writer's module imports this one: loaded on first use
        from .perfetto_write import PerfettoTraceWriter

        return PerfettoTraceWriter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


PathLike = Union[str, "os.PathLike[str]"]

#: the file name suffix of Perfetto protobuf traces (any case)
PERFETTO_SUFFIX = ".pftrace"
SEQUENCE_ID = 1          # the one packet sequence of a sysprof trace
INCREMENTAL_CLOCK = 64   # sequence-scoped clock ids are 64..127
REALTIME_CLOCK = 1       # BUILTIN_CLOCK_REALTIME
RESIDUAL = "sysprof.event"  # debug annotation: the fields of an event Perfetto has no place for
METADATA_TRACK = "sysprof metadata"
MAX_VALUES = 9           # one counter value and at most 8 extra ones per TrackEvent (trace_processor's limit)
_INT64 = 1 << 63
_EXACT_INT = 1 << 53


def protos():
    """The ``perfetto_trace_pb2`` module of the ``perfetto`` package.

    Raises:
        ImportError: ``perfetto`` or ``protobuf`` is not installed (one line naming the extra).
    """
    import importlib

    try:
        return importlib.import_module("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    except ImportError as e:
        raise ImportError(f"Perfetto traces (.pftrace) need the perfetto and protobuf packages: "
                          f"pip install 'sysprof[perfetto]' ({e})") from None


def is_perfetto_path(path: PathLike) -> bool:
    """Whether ``path`` names a Perfetto protobuf trace: its name ends in ``.pftrace`` (any case)."""
    return os.fspath(path).lower().endswith(PERFETTO_SUFFIX)


def writer_class_for(path: PathLike):
    """The trace writer class for ``path``: :class:`PerfettoTraceWriter` for ``.pftrace``, else
    :class:`~sysprof.trace.chrome.ChromeTraceWriter` (``.json``, ``.json.gz``)."""
    if not is_perfetto_path(path):
        return ChromeTraceWriter
    from .perfetto_write import PerfettoTraceWriter

    return PerfettoTraceWriter


def read_events(path: PathLike) -> list:
    """Read a ``.pftrace`` back into Chrome-style event dicts (see :mod:`sysprof.trace.perfetto_read`)."""
    from .perfetto_read import read_events as read

    return read(path)


def iter_events(path: PathLike):
    """:func:`read_events`, one event at a time as the packets are read (see :mod:`sysprof.trace.perfetto_read`)."""
    from .perfetto_read import iter_events as events

    return events(path)


class TraceTime(float):
    """A timestamp in µs (a ``float``, as Chrome events have it) that carries the exact nanoseconds in ``.ns``.

    A float of µs since the epoch resolves only ~0.25 µs today; writers that know the ns (``sysprof record``) pass
    ``TraceTime(t_ns)`` as ``ts`` and :class:`PerfettoTraceWriter` keeps every ns; the reader returns them."""

    __slots__ = ("ns",)

    def __new__(cls, ns: int) -> "TraceTime":
        self = float.__new__(cls, ns / 1000)
        self.ns = ns
        return self

    def __reduce__(self):
        return (TraceTime, (self.ns,))


def ts_ns(ts: Any) -> int:
    """Nanoseconds of an event's ``ts``: a :class:`TraceTime`'s ``.ns``, an int (µs) times 1000, a float (µs) to the
    nearest ns (exactly: the fraction is taken apart from the whole µs).

    Raises:
        ValueError: not a finite, non-negative number.
    """
    ns = getattr(ts, "ns", None)
    if ns is None:
        if isinstance(ts, bool) or not isinstance(ts, (int, float)):
            raise ValueError(f"ts is not a number: {ts!r}")
        if isinstance(ts, int):
            ns = ts * 1000
        elif not math.isfinite(ts):
            raise ValueError(f"ts is not finite: {ts!r}")
        else:
            whole = int(ts)
            ns = whole * 1000 + round((ts - whole) * 1000)
    if ns < 0:
        raise ValueError(f"ts is negative: {ts!r}")
    return ns


def _key_name(key: Any) -> str:
    return key if isinstance(key, str) else json.dumps(key)  # JSON's rule for non-string keys (TypeError if none)


def annotate(ann, value: Any) -> None:
    """Set DebugAnnotation ``ann`` to ``value`` (JSON's types; None, empty dicts/lists and ints beyond int64 as
    ``legacy_json_value``; a non-finite float as None, as JSON writes it).

    Raises:
        TypeError: a value JSON cannot hold.
    """
    if value is None:
        ann.legacy_json_value = "null"
    elif value is True or value is False:
        ann.bool_value = value
    elif isinstance(value, int):
        if -_INT64 <= value < _INT64:
            ann.int_value = value
        else:
            ann.legacy_json_value = str(int(value))
    elif isinstance(value, float):
        if math.isfinite(value):
            ann.double_value = value
        else:
            ann.legacy_json_value = "null"
    elif isinstance(value, str):
        ann.string_value = value
    elif isinstance(value, dict):
        if not value:
            ann.legacy_json_value = "{}"
        for k, v in value.items():
            entry = ann.dict_entries.add()
            entry.name = _key_name(k)
            annotate(entry, v)
    elif isinstance(value, (list, tuple)):
        if not value:
            ann.legacy_json_value = "[]"
        for v in value:
            annotate(ann.array_values.add(), v)
    else:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def annotation_value(ann) -> Any:
    """The value :func:`annotate` stored in DebugAnnotation ``ann``."""
    kind = ann.WhichOneof("value")
    if kind is None:
        if len(ann.dict_entries):
            return {e.name: annotation_value(e) for e in ann.dict_entries}
        return [annotation_value(a) for a in ann.array_values]
    if kind == "legacy_json_value":
        return json.loads(ann.legacy_json_value)
    return getattr(ann, kind)


def counter_unit(pb, unit: Any) -> dict:
    """CounterDescriptor fields for a sysprof unit symbol."""
    if unit == "B":
        return {"unit": pb.CounterDescriptor.UNIT_SIZE_BYTES}
    if unit == "ns":
        return {"unit": pb.CounterDescriptor.UNIT_TIME_NS}
    if unit == "s":
        return {"unit": pb.CounterDescriptor.UNIT_TIME_NS, "unit_multiplier": 1_000_000_000}
    if unit == "":
        return {"unit": pb.CounterDescriptor.UNIT_COUNT}
    if isinstance(unit, str):
        return {"unit_name": unit}
    return {}


def _now_ns() -> int:
    import time

    return time.time_ns()


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -_INT64 <= v < _INT64


def _integral(v: Any) -> bool:
    """Whether a counter value goes as an integer (``counter_value``): an int, or a float holding one exactly."""
    if isinstance(v, int):
        return -_INT64 <= v < _INT64
    return v == v and -_EXACT_INT < v < _EXACT_INT and v == int(v)


def _key_from_channel(group: str, label: str) -> str:
    """The args key of counter track ``label`` under counter ``group`` (the reader's rule, see the writer)."""
    if label.startswith(group + "/"):
        return label[len(group) + 1:]
    if "/" in group:
        return group.rsplit("/", 1)[-1]
    return "value"
