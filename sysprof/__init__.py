"""sysprof: high-frequency system metrics for ML training.

A native thread reads /proc (and NVML) into a lock-free ring buffer without touching the GIL;
a thin Python layer drains it and speaks Composer's profiler API.
"""
from .sampling import Batch, Row, Sampler, native_available
from .profiler import (Callback, CounterRows, Event, JSONTraceHandler, Marker, PerfettoTraceHandler, Profiler,
                       ProfilerAction, State, SystemProfiler, Timestamp, TraceHandler, cyclic_schedule, merge_traces,
                       profile)
from .frames import read_trace  # any trace file as a DataFrame (needs pandas: sysprof[pandas])
from .markers import mark, mark_instant
from .flight import dump  # a flight dump around now (sysprof.flight)


def by_phase(trace, patterns):
    """The trace's series inside its phases (spans whose names match ``patterns``, globs) as a pandas DataFrame,
    one row per (phase, channel): see :func:`sysprof.report.phases.phases_frame`. Needs ``sysprof[pandas]``."""
    from .report.phases import phases_frame

    return phases_frame(trace, patterns)


def serve(listen="127.0.0.1:9464", **kwargs):
    """Samples and serves ``/metrics`` to Prometheus on ``listen`` (loopback by default) until the returned
    endpoint's ``stop()``: see :func:`sysprof.prometheus.serve`. Needs ``sysprof[prometheus]``."""
    from .prometheus import serve as _serve

    return _serve(listen, **kwargs)


__version__ = "0.2.0"  # the one place (pyproject.toml reads it)
__all__ = [
    "Batch", "Row", "Sampler", "native_available",
    "Callback", "Event", "ProfilerAction", "cyclic_schedule", "Marker", "TraceHandler", "CounterRows",
    "JSONTraceHandler", "PerfettoTraceHandler", "merge_traces", "Profiler", "State", "Timestamp", "profile",
    "SystemProfiler", "by_phase", "read_trace", "mark", "mark_instant", "dump", "serve", "__version__",
]
