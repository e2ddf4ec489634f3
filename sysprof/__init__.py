"""sysprof: high-frequency system metrics for ML training.

A native thread reads /proc (and NVML) into a lock-free ring buffer without touching the GIL;
a thin Python layer drains it and speaks Composer's profiler API.
"""
import sys as _sys

from .sampling import Batch, Row, Sampler, native_available
from .profiler import (Callback, CounterRows, Event, JSONTraceHandler, Marker, PerfettoTraceHandler, Profiler,
                       ProfilerAction, State, SystemProfiler, Timestamp, TraceHandler, cyclic_schedule, merge_traces,
                       profile)
from .trace import chrome as chrome_trace
from .frames import read_trace  # any trace file as a DataFrame (needs pandas: sysprof[pandas])
from .markers import mark, mark_instant

from . import profiler as _profiler, sampling as _sampling

# The module paths of the flat package (before sysprof/{sampling,trace,profiler}/) keep importing:
# ``import sysprof.chrome_trace``, ``from sysprof.json_trace_handler import JSONTraceHandler``, ...
for _old, _new in (("chrome_trace", chrome_trace), ("sampler", _sampling.sampler),
                   ("callback", _profiler.callback), ("schedule", _profiler.schedule), ("marker", _profiler.marker),
                   ("trace_handler", _profiler.trace_handler), ("json_trace_handler", _profiler.json_trace_handler),
                   ("system_profiler", _profiler.system_profiler)):
    _sys.modules[f"{__name__}.{_old}"] = _new
del _old, _new



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


__version__ = "0.1.0"
__all__ = [
    "Batch", "Row", "Sampler", "native_available",
    "Callback", "Event", "ProfilerAction", "cyclic_schedule", "Marker", "TraceHandler", "CounterRows",
    "JSONTraceHandler", "PerfettoTraceHandler", "merge_traces", "Profiler", "State", "Timestamp", "profile",
    "SystemProfiler", "chrome_trace", "by_phase", "read_trace", "mark", "mark_instant", "serve", "__version__",
]
