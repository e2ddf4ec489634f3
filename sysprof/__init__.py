"""sysprof: high-frequency system metrics for ML training.

A native thread reads /proc (and NVML) into a lock-free ring buffer without touching the GIL;
a thin Python layer drains it and speaks Composer's profiler API.
"""
from .sampler import Batch, Sampler, native_available
from .callback import Callback, Event
from .schedule import ProfilerAction, cyclic_schedule
from .marker import Marker
from .trace_handler import CounterRows, TraceHandler
from .json_trace_handler import JSONTraceHandler, merge_traces
from .profiler import Profiler, State, Timestamp, profile
from .system_profiler import SystemProfiler
from . import chrome_trace

__version__ = "0.1.0"
__all__ = [
    "Batch", "Sampler", "native_available",
    "Callback", "Event", "ProfilerAction", "cyclic_schedule", "Marker", "TraceHandler", "CounterRows",
    "JSONTraceHandler", "merge_traces", "Profiler", "State", "Timestamp", "profile", "SystemProfiler",
    "chrome_trace", "__version__",
]
