"""The Composer-compatible profiler API: callbacks, schedules, markers, trace handlers, the
``Profiler`` and the drop-in ``SystemProfiler``."""
from .callback import Callback, Event
from .schedule import ProfilerAction, cyclic_schedule
from .marker import Marker
from .trace_handler import CounterRows, TraceHandler
from .json_trace_handler import JSONTraceHandler, merge_traces
from .perfetto_trace_handler import PerfettoTraceHandler
from .profiler import Profiler, State, Timestamp, profile
from .system_profiler import SystemProfiler

__all__ = ["Callback", "Event", "ProfilerAction", "cyclic_schedule", "Marker", "CounterRows", "TraceHandler",
           "JSONTraceHandler", "PerfettoTraceHandler", "merge_traces", "Profiler", "State", "Timestamp", "profile",
           "SystemProfiler"]
