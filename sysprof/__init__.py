"""sysprof: high-frequency system metrics for ML training.

A native thread reads /proc (and NVML) into a lock-free ring buffer without touching the GIL;
a thin Python layer drains it and speaks Composer's profiler API.
"""
import sys as _sys

from .sampling import Batch, Sampler, native_available
from .profiler import (Callback, CounterRows, Event, JSONTraceHandler, Marker, Profiler, ProfilerAction, State,
                       SystemProfiler, Timestamp, TraceHandler, cyclic_schedule, merge_traces, profile)
from .trace import chrome as chrome_trace

# ``import sysprof.chrome_trace`` keeps working: the module moved to sysprof.trace.chrome.
_sys.modules[__name__ + ".chrome_trace"] = chrome_trace

__version__ = "0.1.0"
__all__ = [
    "Batch", "Sampler", "native_available",
    "Callback", "Event", "ProfilerAction", "cyclic_schedule", "Marker", "TraceHandler", "CounterRows",
    "JSONTraceHandler", "merge_traces", "Profiler", "State", "Timestamp", "profile", "SystemProfiler",
    "chrome_trace", "__version__",
]
