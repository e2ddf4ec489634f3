"""Composer's trace names for sysprof's channels, as data: which sampler channel becomes which counter event
of Composer's ``SystemProfiler`` layout, with which args key, scale, category and unit. No logic lives here;
:class:`sysprof.trace.tracks.TrackLayout` (``preset="composer"``) reads these tables.

Composer's names are fixed: GB = 1e9 bytes, kB = 1e3 bytes, the disk key is the field name, ``*_time`` are
cumulative milliseconds (as psutil reported them).
"""
from __future__ import annotations

__all__ = ["COUNTER_RULES", "NAMED_SOURCES", "CUDA_MEMORY_KEYS", "CUDA_MEMORY_UNITS"]

#: Sampler channel -> trace counter. Each rule: (channel regex (full match), trace event name, args key, multiplier,
#: divisor, category, needs ``rates=True``, unit of the traced value); the traced value is
#: ``channel value * multiplier / divisor``. The name and key are ``str.format``-ed with the regex's named groups.
#: Channels sharing a trace name become one counter event with several keys, in rule order. A channel of a
#: source in :data:`NAMED_SOURCES` matching no rule is not traced (the seed's layout leaves it out); a channel of
#: any other source is traced under its sysprof name. A unit of ``None`` is the channel's own (``registry.unit_of``: the value is not scaled).
#: the sources whose channels Composer's layout names (only through :data:`COUNTER_RULES`)
NAMED_SOURCES = ("cpu", "memory", "disk", "net", "process", "gpu")

COUNTER_RULES = (
    (r"cpu/percent", "cpu", "cpu_percent", 1, 1, "cpu", False, "%"),
    (r"cpu/(?P<id>\d+)/percent", "cpu/{id}", "cpu_percent", 1, 1, "cpu", False, "%"),
    (r"memory/used_bytes", "memory/virtual", "used_gb", 1, 1e9, "memory", False, "GB"),
    (r"memory/available_bytes", "memory/virtual", "available_gb", 1, 1e9, "memory", False, "GB"),
    (r"swap/used_bytes", "memory/swap", "used_gb", 1, 1e9, "memory", False, "GB"),
    (r"swap/free_bytes", "memory/swap", "free_gb", 1, 1e9, "memory", False, "GB"),
    (r"disk/(?P<dev>.+)/(?P<f>read_count|write_count)", "disk/{dev}/{f}", "{f}", 1, 1, "disk", False, ""),
    (r"disk/(?P<dev>.+)/(?P<f>read_bytes|write_bytes)", "disk/{dev}/{f}", "{f}", 1, 1, "disk", False, "B"),
    (r"disk/(?P<dev>.+)/(?P<f>read_time|write_time|busy_time)_seconds", "disk/{dev}/{f}", "{f}", 1000, 1, "disk",
     False, "ms"),
    (r"disk/(?P<dev>.+)/(?P<f>(read|write)_count_per_second)", "disk/{dev}/{f}", "{f}", 1, 1, "disk", True, "/s"),
    (r"disk/(?P<dev>.+)/(?P<f>(read|write)_bytes_per_second)", "disk/{dev}/{f}", "{f}", 1, 1, "disk", True, "B/s"),
    (r"disk/(?P<dev>.+)/busy_time_seconds_per_second", "disk/{dev}/busy_percent", "busy_percent", 100, 1, "disk",
     True, "%"),
    (r"net/(?P<nic>.+)/bytes_(?P<d>sent|recv)", "network/{nic}/kb_{d}", "kb_{d}", 1, 1e3, "net", False, "kB"),
    (r"net/(?P<nic>.+)/bytes_(?P<d>sent|recv)_per_second", "network/{nic}/kb_{d}_per_second", "kb_{d}_per_second",
     1, 1e3, "net", True, "kB/s"),
    (r"process/cpu_percent", "process/cpu", "cpu_percent", 1, 1, "process", False, "%"),
    (r"process/rss_bytes", "process/memory", "rss_gb", 1, 1e9, "process", False, "GB"),
    (r"process/vms_bytes", "process/memory", "vms_gb", 1, 1e9, "process", False, "GB"),
    (r"process/num_threads", "process/threads", "num_threads", 1, 1, "process", False, ""),
    (r"gpu/(?P<index>\d+)/(?P<f>[^/]+)", "gpu/{index}/{f}", "{f}", 1, 1, "gpu", False, None),
    # load is sysprof's own (the seed has none): unscaled, in Composer's one-counter-per-field style for the
    # fast-moving task counts (procs_running moves at nearly every ms sample; the averages every 5 s), so a
    # change rewrites one small event, not the whole group
    (r"load/(?P<f>1m|5m|15m)", "load", "{f}", 1, 1, "load", False, None),
    (r"load/(?P<f>procs_running|procs_total)", "load/{f}", "{f}", 1, 1, "load", False, None),
)

#: torch CUDA allocator statistic -> counter name (Composer 0.32.1 memory monitor's names); ``*bytes*`` statistics
#: are reported in GB (1e9 bytes). Traced as ``memory/cuda/<name>`` with key ``<name>``, category ``memory``.
CUDA_MEMORY_KEYS = {
    "allocated_bytes.all.current": "current_allocated_mem",
    "active_bytes.all.current": "current_active_mem",
    "inactive_split_bytes.all.current": "current_inactive_mem",
    "reserved_bytes.all.current": "current_reserved_mem",
    "allocated_bytes.all.peak": "peak_allocated_mem",
    "active_bytes.all.peak": "peak_active_mem",
    "inactive_split_bytes.all.peak": "peak_inactive_mem",
    "reserved_bytes.all.peak": "peak_reserved_mem",
    "num_alloc_retries": "alloc_retries",
}

#: unit of each CUDA_MEMORY_KEYS counter, by torch statistic
CUDA_MEMORY_UNITS = {stat: ("GB" if "bytes" in stat else "") for stat in CUDA_MEMORY_KEYS}
