"""The registry: the one list of sysprof's sources and their channels.

Each source is declared once, here: its name (the key of ``Sampler.errors`` and the ``Sampler`` keyword),
its CLI flag and help, the file it reads, its options, and its channels with unit, kind, a one-line
description and the kernel or NVML field each comes from. ``Sampler``'s keywords, the CLI's source flags,
``sysprof info``, ``SystemProfiler``'s switches, the units written into traces and docs/reference.md's channel
table (a test compares them) are all read from it. The native extension registers one factory per
source under the same name (``SYSPROF_SOURCE`` in ``csrc/sources/``); a test checks the two agree.

A channel pattern names its per-device part in angle brackets: ``disk/<dev>/read_bytes``.

Kinds (what a value is, so consumers know how to sum it over time):
  ``gauge``      a level at the sampled instant (bytes in use, a percent, a temperature);
  ``counter``    a cumulative total that only grows (a decrease is a reset, read as 0 change);
  ``counter32``  a counter the kernel keeps in 32 bits, unwrapped by sysprof (diskstats, net/dev);
  ``ticks``      a cumulative time counter the kernel advances in scheduler-tick steps;
  ``rate``       the per-second rate of a counter between two samples (``*_per_second``).
Units are display symbols of the Prometheus base units in the names: ``B``, ``B/s``, ``%``, ``s``,
``s/s`` (a share of wall time, 0-1), ``W``, ``J``, ``°C``, ``Hz``, ``/s`` (events per second), ``""`` (a count).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Dict, Iterable, Optional, Tuple

__all__ = ["ChannelSpec", "OptionSpec", "SourceSpec", "SOURCES", "DEFAULT_SOURCES", "channel_spec", "unit_of",
           "source_of", "source_available", "decimals_of"]

KINDS = ("gauge", "counter", "counter32", "ticks", "rate")
#: the kinds of a cumulative total (its increase over a span is what accrued)
TOTAL_KINDS = ("counter", "counter32", "ticks")

# Physical ranges: every value is NaN or inside its channel's range. The native range check (csrc/engine/ranges.hpp)
# takes each channel's from here: csrc/gen/gen_channels.py writes the table at build time.
PERCENT = "percent"  # [0, 100]
CORE_PERCENT = "core_percent"  # percent of one core: [0, 100 x online CPUs]
SHARE = "share"  # [0, 1]: busy or stalled seconds per second
NON_NEGATIVE = "non_negative"  # finite >= 0
LIMIT = "limit"  # >= 0 or +inf ("max": no limit)
CELSIUS = "celsius"  # [-273.15, 1000]
FINITE = "finite"  # any finite value
RANGES = (FINITE, PERCENT, CORE_PERCENT, SHARE, NON_NEGATIVE, LIMIT, CELSIUS)


@dataclass(frozen=True)
class ChannelSpec:
    """One channel (or one per device): ``pattern`` as ``disk/<dev>/read_bytes``."""

    pattern: str
    unit: str
    kind: str
    help: str
    field: str  # the kernel's (or NVML's) field it comes from
    range: str  # its physical range, one of RANGES

    @property
    def regex(self) -> "re.Pattern[str]":
        return _compile(self.pattern)


@dataclass(frozen=True)
class OptionSpec:
    """An option of a source: a Sampler keyword and a CLI flag of its own. A switch (``per_cpu`` of ``cpu``:
    ``default`` None, off unless given) or a whole number in [``lo``, ``hi``] (``process_tree_slots``: ``default``
    its value when not given; True, as ``--all`` and ``sysprof info`` pass, also means the default)."""

    name: str
    help: str
    default: Optional[int] = None
    lo: int = 0
    hi: int = 0

    @property
    def is_switch(self) -> bool:
        return self.default is None

    def value(self, given: object) -> int:
        """The number a keyword value means (a number option only); ValueError naming the option otherwise."""
        if given is None or given is True:
            return int(self.default)
        if isinstance(given, bool) or not isinstance(given, int) or not self.lo <= given <= self.hi:
            raise ValueError(f"{self.name} must be a whole number in [{self.lo}, {self.hi}], got {given!r}")
        return given

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class SourceSpec:
    name: str
    help: str
    file: str  # what it reads, for --help, `sysprof info` and docs/reference.md
    channels: Tuple[ChannelSpec, ...]
    default: bool = False  # on in Sampler() and in `sysprof record` with no source flag
    follows_pid: bool = False  # reads the process given by pid (default: this one)
    needs_target: bool = False  # measures that process itself: `record` needs a command or --pid; --all only then
    target_default: bool = False  # on in `sysprof record` with a command or --pid when no source flag is given
    options: Tuple[OptionSpec, ...] = field(default=())
    portable: bool = True  # the psutil/pynvml backend has a reader for it

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def prefixes(self) -> Tuple[str, ...]:
        """First path components of its channels, with the slash: ``("memory/", "swap/")``."""
        out = []
        for c in self.channels:
            p = c.pattern.split("/", 1)[0] + "/"
            if p not in out:
                out.append(p)
        return tuple(out)


@lru_cache(maxsize=None)
def _compile(pattern: str) -> "re.Pattern[str]":
    parts = re.split(r"(<[a-z]+>)", pattern)
    return re.compile("".join("[^/]+" if p.startswith("<") else re.escape(p) for p in parts))


def _ch(pattern: str, unit: str, kind: str, help: str, field: str, range: str) -> ChannelSpec:
    assert kind in KINDS, kind
    assert range in RANGES, f"{pattern}: range {range!r} is not one of {RANGES}"
    return ChannelSpec(pattern, unit, kind, help, field, range)


def _expand(template: str, names: Iterable[str]) -> Iterable[str]:
    return (template.replace("{}", n) for n in names)


_CPU_MODES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
_DISK_COUNTERS = (("read_bytes", "B", "bytes read (sectors read x 512)", "sectors read"),
                  ("write_bytes", "B", "bytes written (sectors written x 512)", "sectors written"),
                  ("read_count", "", "reads completed", "reads completed successfully"),
                  ("write_count", "", "writes completed", "writes completed"),
                  ("busy_time_seconds", "s", "time the device had I/O in flight", "time spent doing I/Os (io_ticks)"),
                  ("read_time_seconds", "s", "time reads spent waiting", "time spent reading"),
                  ("write_time_seconds", "s", "time writes spent waiting", "time spent writing"))
_DISK_RATES = ("read_bytes", "write_bytes", "read_count", "write_count", "busy_time_seconds")
_NET_COUNTERS = (("bytes_recv", "B", "Receive bytes"), ("bytes_sent", "B", "Transmit bytes"),
                 ("packets_recv", "", "Receive packets"), ("packets_sent", "", "Transmit packets"),
                 ("errors_in", "", "Receive errs"), ("errors_out", "", "Transmit errs"),
                 ("drops_in", "", "Receive drop"), ("drops_out", "", "Transmit drop"))
_NET_RATES = ("bytes_recv", "bytes_sent", "packets_recv", "packets_sent")
_PSI_RESOURCES = ("cpu", "memory", "io")


def _rate_unit(unit: str) -> str:
    return f"{unit}/s" if unit else "/s"


def _cpu() -> Tuple[ChannelSpec, ...]:
    out = [_ch("cpu/percent", "%", "gauge", "busy share of all CPUs: 100 x (total - idle - iowait) / total ticks",
               "/proc/stat cpu line", PERCENT)]
    out += [_ch(f"cpu/{m}_percent", "%", "gauge", f"share of CPU ticks in {m}", f"/proc/stat cpu {m}",
                PERCENT) for m in _CPU_MODES]
    out += [_ch(f"cpu/{m}_seconds_total", "s", "ticks", f"CPU time in {m}, all CPUs (node_cpu_seconds_total)",
                f"/proc/stat cpu {m} / USER_HZ", NON_NEGATIVE) for m in _CPU_MODES]
    out.append(_ch("cpu/<id>/percent", "%", "gauge", "busy share of one CPU (per_cpu; NaN while offline)",
                   "/proc/stat cpuN line", PERCENT))
    out += [_ch(f"cpu/<id>/{m}_seconds_total", "s", "ticks", f"CPU time of one CPU in {m} (per_cpu; NaN while "
                "offline)", f"/proc/stat cpuN {m} / USER_HZ", NON_NEGATIVE)
            for m in _CPU_MODES]
    return tuple(out)


def _memory() -> Tuple[ChannelSpec, ...]:
    rows = (("memory/total_bytes", "MemTotal"), ("memory/available_bytes", "MemAvailable"),
            ("memory/used_bytes", "MemTotal - MemAvailable"), ("memory/free_bytes", "MemFree"),
            ("memory/buffers_bytes", "Buffers"), ("memory/cached_bytes", "Cached"), ("memory/dirty_bytes", "Dirty"),
            ("memory/writeback_bytes", "Writeback"))
    out = [_ch(p, "B", "gauge", f"{f}, in bytes", f, NON_NEGATIVE) for p, f in rows]
    out.append(_ch("memory/used_percent", "%", "gauge", "100 x used / total", "MemTotal, MemAvailable", PERCENT))
    out += [_ch("swap/total_bytes", "B", "gauge", "SwapTotal, in bytes", "SwapTotal", NON_NEGATIVE),
            _ch("swap/used_bytes", "B", "gauge", "SwapTotal - SwapFree, in bytes", "SwapTotal - SwapFree",
                NON_NEGATIVE),
            _ch("swap/free_bytes", "B", "gauge", "SwapFree, in bytes", "SwapFree", NON_NEGATIVE)]
    return tuple(out)


def _disk() -> Tuple[ChannelSpec, ...]:
    out = [_ch(f"disk/<dev>/{n}", u, "counter32", f"{h}, total since boot", f, NON_NEGATIVE)
           for n, u, h, f in _DISK_COUNTERS]
    out += [_ch(f"disk/<dev>/{n}_per_second", _rate_unit(u), "rate",
                "utilisation (0-1)" if n == "busy_time_seconds" else f"{h}, per second", f,
                SHARE if n == "busy_time_seconds" else NON_NEGATIVE)
            for n, u, h, f in _DISK_COUNTERS if n in _DISK_RATES]
    return tuple(out)


def _net() -> Tuple[ChannelSpec, ...]:
    out = [_ch(f"net/<nic>/{n}", u, "counter32", f"{f}, total", f, NON_NEGATIVE) for n, u, f in _NET_COUNTERS]
    out += [_ch(f"net/<nic>/{n}_per_second", _rate_unit(u), "rate", f"{f}, per second", f, NON_NEGATIVE)
            for n, u, f in _NET_COUNTERS if n in _NET_RATES]
    return tuple(out)


def _process(prefix: str, what: str, tree: bool) -> Tuple[ChannelSpec, ...]:
    stat = "/proc/<pid>/stat of each member" if tree else "/proc/<pid>/stat"
    out = [_ch(f"{prefix}/num_processes", "", "gauge", "processes followed (the root and its descendants)",
               "task/<tid>/children", NON_NEGATIVE)] if tree else []
    out += [_ch(f"{prefix}/rss_bytes", "B", "gauge", f"resident set size of {what}", f"{stat} rss x page size",
                NON_NEGATIVE),
            _ch(f"{prefix}/vms_bytes", "B", "gauge", f"virtual memory size of {what}", f"{stat} vsize",
                NON_NEGATIVE)
            ][: 1 if tree else 2]
    out += [_ch(f"{prefix}/cpu_percent", "%", "gauge",
                f"CPU of {what}, percent of one core over the trailing max(interval, 20 ms)", f"{stat} utime+stime",
                CORE_PERCENT),
            _ch(f"{prefix}/cpu_seconds_total", "s", "ticks", f"CPU time of {what}", f"{stat} utime+stime",
                NON_NEGATIVE),
            _ch(f"{prefix}/num_threads", "", "gauge", f"threads of {what}", f"{stat} num_threads", NON_NEGATIVE)]
    return tuple(out + (_tree_extra() if tree else []))


#: per-member slots of process_tree (``process_tree_slots``); the native source's kDefaultSlots, kMaxSlots
TREE_SLOTS = OptionSpec("process_tree_slots", "per-member series of process_tree in N stable slots (slot 0: the "
                        "followed process)", default=8, lo=0, hi=64)


def _tree_extra() -> list:
    """process_tree's proportional memory, its count of members without a slot, and its per-slot series."""
    rollup = "/proc/<pid>/smaps_rollup"
    uss = f"{rollup} Private_Clean + Private_Dirty"
    out = [_ch("process_tree/pss_bytes", "B", "gauge", "proportional set size of the members (shared pages divided "
               "among the processes mapping them), summed; read every 100 ms (less often for large trees)",
               f"{rollup} Pss of each member", NON_NEGATIVE),
           _ch("process_tree/uss_bytes", "B", "gauge", "unique set size of the members (pages no other process maps), "
               "summed; read with pss_bytes", f"{uss} of each member", NON_NEGATIVE),
           _ch("process_tree/num_unslotted", "", "gauge", "members without a slot (summed into the totals only)",
               "task/<tid>/children", NON_NEGATIVE),
           _ch("process_tree/run_delay_seconds_total", "s", "counter", "time the members' threads were runnable but "
               "waited for a CPU (run delay), summed over the threads (at most 1024), since following began; NaN "
               "with the psutil backend, which has no run delay", "/proc/<pid>/task/<tid>/schedstat field 2 (ns)",
               NON_NEGATIVE),
           _ch("process_tree/run_delay_seconds_per_second", "s/s", "rate", "run delay per second of wall time, "
               "summed over the threads (0.6: as if one thread waited for a CPU 60 % of the time; at most the "
               "threads), over the trailing max(interval, 20 ms)", "/proc/<pid>/task/<tid>/schedstat field 2",
               NON_NEGATIVE),  # summed over threads: up to their number, not a share
           _ch("process_tree/procs_blocked", "", "gauge", "members whose main thread is in uninterruptible sleep "
               "(state D: mostly waiting for disk I/O) at the reading; its mean is the average count",
               "/proc/<pid>/stat state", NON_NEGATIVE),
           _ch("process_tree/procs_sleeping", "", "gauge", "members whose main thread is asleep waiting for an event "
               "(state S: a pipe, a socket, a lock, a timer) at the reading; its mean is the average count",
               "/proc/<pid>/stat state", NON_NEGATIVE),
           _ch("process_tree/majflt_total", "", "counter", "major page faults of the members (pages read back from "
               "disk), since following began; NaN with the psutil backend", "/proc/<pid>/stat majflt",
               NON_NEGATIVE),
           _ch("process_tree/majflt_per_second", "/s", "rate", "major page faults of the members per second, over the "
               "trailing max(interval, 20 ms)", "/proc/<pid>/stat majflt", NON_NEGATIVE)]
    what = "the slot's member (NaN: no member)"
    out += [_ch("process_tree/<slot>/pid", "", "gauge", f"process id of {what}", "/proc/<pid>/stat pid",
                NON_NEGATIVE),
            _ch("process_tree/<slot>/rss_bytes", "B", "gauge", f"resident set size of {what}",
                "/proc/<pid>/stat rss x page size", NON_NEGATIVE),
            _ch("process_tree/<slot>/pss_bytes", "B", "gauge", f"proportional set size of {what}", f"{rollup} Pss",
                NON_NEGATIVE),
            _ch("process_tree/<slot>/uss_bytes", "B", "gauge", f"unique set size of {what}", uss, NON_NEGATIVE),
            _ch("process_tree/<slot>/cpu_percent", "%", "gauge",
                f"CPU of {what}, percent of one core over the trailing max(interval, 20 ms)",
                "/proc/<pid>/stat utime+stime", CORE_PERCENT),
            _ch("process_tree/<slot>/cpu_seconds_total", "s", "ticks", f"CPU time of {what}",
                "/proc/<pid>/stat utime+stime", NON_NEGATIVE),
            _ch("process_tree/<slot>/num_threads", "", "gauge", f"threads of {what}", "/proc/<pid>/stat num_threads",
                NON_NEGATIVE)]
    return out


def _pressure() -> Tuple[ChannelSpec, ...]:
    out = []
    for r in _PSI_RESOURCES:
        for kind in ("some", "full"):
            line = f"/proc/pressure/{r} {kind}"
            out += [_ch(f"pressure/{r}/{kind}_{a}_percent", "%", "gauge", f"kernel's {a} stall average", f"{line} {a}",
                       PERCENT)
                    for a in ("avg10", "avg60", "avg300")]
            out += [_ch(f"pressure/{r}/{kind}_seconds_total", "s", "ticks", "stall time", f"{line} total (us)",
                        NON_NEGATIVE),
                    _ch(f"pressure/{r}/{kind}_seconds_per_second", "s/s", "rate",
                        "share of wall time stalled (0-1), over the trailing max(interval, 20 ms)", f"{line} total",
                        SHARE)]
    return tuple(out)


def _cgroup() -> Tuple[ChannelSpec, ...]:
    return (
        _ch("cgroup/memory_current_bytes", "B", "gauge", "memory in use by the cgroup", "memory.current", NON_NEGATIVE),
        _ch("cgroup/memory_max_bytes", "B", "gauge", "memory limit (+inf: max)", "memory.max", LIMIT),
        _ch("cgroup/memory_anon_bytes", "B", "gauge", "anonymous memory", "memory.stat anon", NON_NEGATIVE),
        _ch("cgroup/memory_file_bytes", "B", "gauge", "page cache", "memory.stat file", NON_NEGATIVE),
        _ch("cgroup/cpu_usage_seconds_total", "s", "ticks", "CPU time", "cpu.stat usage_usec", NON_NEGATIVE),
        _ch("cgroup/cpu_user_seconds_total", "s", "ticks", "user CPU time", "cpu.stat user_usec", NON_NEGATIVE),
        _ch("cgroup/cpu_system_seconds_total", "s", "ticks", "system CPU time", "cpu.stat system_usec", NON_NEGATIVE),
        _ch("cgroup/cpu_percent", "%", "gauge", "CPU, percent of one core over the trailing max(interval, 20 ms)",
            "cpu.stat usage_usec", CORE_PERCENT),
        _ch("cgroup/cpu_throttled_seconds_total", "s", "counter", "time throttled", "cpu.stat throttled_usec",
            NON_NEGATIVE),
        _ch("cgroup/cpu_throttled_periods_total", "", "counter", "periods throttled", "cpu.stat nr_throttled",
            NON_NEGATIVE),
        _ch("cgroup/cpu_periods_total", "", "counter", "enforcement periods", "cpu.stat nr_periods", NON_NEGATIVE),
        _ch("cgroup/cpu_limit_cores", "", "gauge", "quota / period (+inf: max)", "cpu.max", LIMIT),
        _ch("cgroup/io_read_bytes", "B", "counter", "bytes read, summed over devices", "io.stat rbytes", NON_NEGATIVE),
        _ch("cgroup/io_write_bytes", "B", "counter", "bytes written, summed over devices", "io.stat wbytes",
            NON_NEGATIVE),
        _ch("cgroup/io_read_bytes_per_second", "B/s", "rate", "bytes read per second", "io.stat rbytes", NON_NEGATIVE),
        _ch("cgroup/io_write_bytes_per_second", "B/s", "rate", "bytes written per second", "io.stat wbytes",
            NON_NEGATIVE),
    )


def _vmstat() -> Tuple[ChannelSpec, ...]:
    """/proc/vmstat counters (csrc/parse/vmstat.hpp): NaN where this kernel has no such key."""
    rows = (("pgfault", "page faults (minor and major)", "pgfault"),
            ("pgmajfault", "major page faults (needed I/O)", "pgmajfault"),
            ("pswpin", "pages swapped in", "pswpin"), ("pswpout", "pages swapped out", "pswpout"),
            ("pgscan_kswapd", "pages scanned by kswapd", "pgscan_kswapd (per-zone keys summed before 4.8)"),
            ("pgscan_direct", "pages scanned by direct reclaim", "pgscan_direct (per-zone keys summed before 4.8)"),
            ("pgsteal_kswapd", "pages reclaimed by kswapd", "pgsteal_kswapd (per-zone keys summed before 4.8)"),
            ("pgsteal_direct", "pages reclaimed by direct reclaim",
             "pgsteal_direct (per-zone keys summed before 4.8)"),
            ("oom_kill", "processes killed by the OOM killer (4.13+)", "oom_kill"),
            ("workingset_refault_anon", "refaults of evicted anonymous pages (5.9+)", "workingset_refault_anon"),
            ("workingset_refault_file", "refaults of evicted file pages",
             "workingset_refault_file (workingset_refault before 5.9)"))
    totals = [_ch(f"vmstat/{n}_total", "", "counter", f"{h}, since boot", f, NON_NEGATIVE) for n, h, f in rows]
    rates = [_ch(f"vmstat/{n}_per_second", "/s", "rate", f"{h}, per second", f, NON_NEGATIVE)
             for n, h, f in rows[:2]]
    out = totals[:2] + rates + totals[2:]
    return tuple(out)


def _gpu() -> Tuple[ChannelSpec, ...]:
    rows = (
        ("utilization_percent", "%", "gauge", "time a kernel ran, over NVML's last 1/6-1 s", "nvmlDeviceGetUtilizationRates gpu",
         PERCENT),
        ("memory_utilization_percent", "%", "gauge", "time memory was read or written", "nvmlDeviceGetUtilizationRates memory",
         PERCENT),
        ("memory_used_bytes", "B", "gauge", "device memory used", "nvmlDeviceGetMemoryInfo used", NON_NEGATIVE),
        ("memory_total_bytes", "B", "gauge", "device memory", "nvmlDeviceGetMemoryInfo total", NON_NEGATIVE),
        ("memory_free_bytes", "B", "gauge", "device memory free", "nvmlDeviceGetMemoryInfo free", NON_NEGATIVE),
        ("memory_reserved_bytes", "B", "gauge", "device memory reserved by the driver", "nvmlDeviceGetMemoryInfo_v2 reserved",
         NON_NEGATIVE),
        ("power_watts", "W", "gauge", "power draw (instant where supported)", "NVML_FI_DEV_POWER_INSTANT",
         NON_NEGATIVE),
        ("energy_joules", "J", "counter", "energy since the driver loaded", "nvmlDeviceGetTotalEnergyConsumption",
         NON_NEGATIVE),
        ("energy_power_watts", "W", "gauge", "power from the energy counter's last two changes",
         "nvmlDeviceGetTotalEnergyConsumption", NON_NEGATIVE),
        ("temperature_celsius", "\u00b0C", "gauge", "GPU temperature", "nvmlDeviceGetTemperature", CELSIUS),
        ("sm_clock_hz", "Hz", "gauge", "SM clock", "nvmlDeviceGetClockInfo(NVML_CLOCK_SM)", NON_NEGATIVE),
        ("memory_clock_hz", "Hz", "gauge", "memory clock", "nvmlDeviceGetClockInfo(NVML_CLOCK_MEM)", NON_NEGATIVE),
        ("pcie_tx_bytes_per_second", "B/s", "rate", "PCIe bytes sent", "NVML_FI_DEV_PCIE_COUNT_TX_BYTES", NON_NEGATIVE),
        ("pcie_rx_bytes_per_second", "B/s", "rate", "PCIe bytes received", "NVML_FI_DEV_PCIE_COUNT_RX_BYTES",
         NON_NEGATIVE),
        ("nvlink_tx_bytes_per_second", "B/s", "rate", "NVLink bytes sent, all links",
         "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", NON_NEGATIVE),
        ("nvlink_rx_bytes_per_second", "B/s", "rate", "NVLink bytes received, all links",
         "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", NON_NEGATIVE),
        # throttling and health, read about once a second (csrc/gpu/nvml_query.hpp kSlowNs)
        ("clocks_event_reasons", "", "gauge", "why the clocks are held down: NVML's bitmask (names: sysprof report)",
         "nvmlDeviceGetCurrentClocksEventReasons", NON_NEGATIVE),
        ("violation_power_seconds_total", "s", "counter", "time the clocks were held down by the power limit",
         "nvmlDeviceGetViolationStatus(NVML_PERF_POLICY_POWER)", NON_NEGATIVE),
        ("violation_power_seconds_per_second", "s/s", "rate", "share of time held down by the power limit",
         "nvmlDeviceGetViolationStatus(NVML_PERF_POLICY_POWER)", SHARE),
        ("violation_thermal_seconds_total", "s", "counter", "time the clocks were held down by temperature",
         "nvmlDeviceGetViolationStatus(NVML_PERF_POLICY_THERMAL)", NON_NEGATIVE),
        ("violation_thermal_seconds_per_second", "s/s", "rate", "share of time held down by temperature",
         "nvmlDeviceGetViolationStatus(NVML_PERF_POLICY_THERMAL)", SHARE),
        ("ecc_corrected_total", "", "counter", "corrected ECC errors since the driver loaded",
         "nvmlDeviceGetTotalEccErrors(CORRECTED, VOLATILE)", NON_NEGATIVE),
        ("ecc_uncorrected_total", "", "counter", "uncorrected ECC errors since the driver loaded",
         "nvmlDeviceGetTotalEccErrors(UNCORRECTED, VOLATILE)", NON_NEGATIVE),
        ("remapped_rows_correctable", "", "gauge", "memory rows remapped for correctable errors",
         "nvmlDeviceGetRemappedRows", NON_NEGATIVE),
        ("remapped_rows_uncorrectable", "", "gauge", "memory rows remapped for uncorrectable errors",
         "nvmlDeviceGetRemappedRows", NON_NEGATIVE),
        ("remap_pending", "", "gauge", "1: a row remapping waits for a GPU reset", "nvmlDeviceGetRemappedRows",
         NON_NEGATIVE),
        ("pcie_replay_total", "", "counter", "PCIe replays (link-level retransmissions)",
         "nvmlDeviceGetPcieReplayCounter", NON_NEGATIVE),
        ("power_limit_watts", "W", "gauge", "power limit enforced", "nvmlDeviceGetEnforcedPowerLimit", NON_NEGATIVE),
        ("pcie_link_generation", "", "gauge", "PCIe link generation now", "nvmlDeviceGetCurrPcieLinkGeneration",
         NON_NEGATIVE),
        ("pcie_link_width", "", "gauge", "PCIe lanes now", "nvmlDeviceGetCurrPcieLinkWidth", NON_NEGATIVE),
        # GPM (Hopper and newer; absent elsewhere): each value covers the time between two readings
        ("sm_active_percent", "%", "gauge", "SMs busy (GPM)", "NVML_GPM_METRIC_SM_UTIL", PERCENT),
        ("sm_occupancy_percent", "%", "gauge", "warps resident vs the maximum (GPM)", "NVML_GPM_METRIC_SM_OCCUPANCY",
         PERCENT),
        ("tensor_active_percent", "%", "gauge", "time any tensor pipe was busy (GPM)",
         "NVML_GPM_METRIC_ANY_TENSOR_UTIL", PERCENT),
        ("dram_active_percent", "%", "gauge", "DRAM bandwidth used vs the maximum (GPM)", "NVML_GPM_METRIC_DRAM_BW_UTIL",
         PERCENT),
        ("fp16_active_percent", "%", "gauge", "time the SMs did non-tensor FP16 math (GPM)", "NVML_GPM_METRIC_FP16_UTIL",
         PERCENT),
        ("fp32_active_percent", "%", "gauge", "time the SMs did non-tensor FP32 math (GPM)", "NVML_GPM_METRIC_FP32_UTIL",
         PERCENT),
        ("fp64_active_percent", "%", "gauge", "time the SMs did non-tensor FP64 math (GPM)", "NVML_GPM_METRIC_FP64_UTIL",
         PERCENT),
        # XID events, waited for on a thread of their own (csrc/gpu/nvml_events.hpp); each step is an instant
        ("xid_total", "", "counter", "XID errors (critical) since the sampler opened", "nvmlEventTypeXidCriticalError",
         NON_NEGATIVE),
        ("xid_last", "", "gauge", "the latest XID's number (0: none yet)", "nvmlEventData_t eventData", NON_NEGATIVE),
        # the reader's own clock: traces stamp the device's values with it (sysprof/trace/schema.py READING_TIME_KEY)
        ("reading_time_seconds", "s", "gauge", "when these values were read: wall-clock seconds since the epoch, the "
         "middle of the device's NVML calls", "clock_gettime(CLOCK_REALTIME)", NON_NEGATIVE),
    )
    return tuple(_ch(f"gpu/<index>/{n}", u, k, h, f, r) for n, u, k, h, f, r in rows)


#: every source, in channel order (the order of the sampler's row)
SOURCES: Dict[str, SourceSpec] = {s.name: s for s in (
    SourceSpec("cpu", "CPU utilisation by mode", "/proc/stat", _cpu(), default=True,
               options=(OptionSpec("per_cpu", "also per-CPU utilisation"),)),
    SourceSpec("memory", "memory and swap", "/proc/meminfo", _memory(), default=True),
    SourceSpec("disk", "per-disk I/O", "/proc/diskstats", _disk(), default=True),
    SourceSpec("net", "per-interface network I/O", "/proc/net/dev", _net(), default=True),
    SourceSpec("load", "load average", "/proc/loadavg", (
        _ch("load/1m", "", "gauge", "load average over 1 minute", "loadavg field 1", NON_NEGATIVE),
        _ch("load/5m", "", "gauge", "load average over 5 minutes", "loadavg field 2", NON_NEGATIVE),
        _ch("load/15m", "", "gauge", "load average over 15 minutes", "loadavg field 3", NON_NEGATIVE),
        _ch("load/procs_running", "", "gauge", "runnable scheduling entities", "loadavg field 4 (before /)",
            NON_NEGATIVE),
        _ch("load/procs_total", "", "gauge", "scheduling entities that exist", "loadavg field 4 (after /)",
            NON_NEGATIVE))),
    SourceSpec("process", "the followed process (RSS, CPU, threads)", "/proc/<pid>/stat",
               _process("process", "the process", tree=False), follows_pid=True, needs_target=True),
    SourceSpec("process_tree", "the followed process and all its descendants (e.g. DataLoader workers), summed "
               "and per member", "/proc/<pid>/{stat,smaps_rollup,task/<tid>/children}",
               _process("process_tree", "the members", tree=True), follows_pid=True, needs_target=True,
               target_default=True, options=(TREE_SLOTS,)),
    SourceSpec("pressure", "pressure stall information", "/proc/pressure/{cpu,memory,io}", _pressure(),
               portable=False),
    SourceSpec("cgroup", "memory, CPU and I/O of the process's cgroup v2", "/sys/fs/cgroup/<path>/", _cgroup(),
               follows_pid=True, portable=False),
    SourceSpec("vmstat", "page faults, swapping, reclaim and OOM kills", "/proc/vmstat", _vmstat(), portable=False),
    SourceSpec("gpu", "NVIDIA GPUs through NVML", "NVML", _gpu()),
)}

DEFAULT_SOURCES: Tuple[str, ...] = tuple(n for n, s in SOURCES.items() if s.default)


@lru_cache(maxsize=4096)
def channel_spec(channel: str) -> Optional[ChannelSpec]:
    """The spec a sampler channel name matches, or None (a foreign or Composer-named trace)."""
    for src in SOURCES.values():
        if not channel.startswith(src.prefixes):
            continue
        for spec in src.channels:
            if spec.regex.fullmatch(channel):
                return spec
    return None


def unit_of(channel: str) -> Optional[str]:
    """The declared unit of a sampler channel, or None where the registry has no such channel."""
    spec = channel_spec(channel)
    return None if spec is None else spec.unit


def source_of(channel: str) -> Optional[str]:
    """The source that yields a sampler channel, or None."""
    for src in SOURCES.values():
        if channel.startswith(src.prefixes) and any(c.regex.fullmatch(channel) for c in src.channels):
            return src.name
    return None


def source_available(source: str, channels) -> bool:
    """Whether ``channels`` (sampler channel names) include one of ``source``'s. An entry of ``Sampler.errors``
    for a source with channels is a problem with part of it (one metric, one file), not an unavailable source."""
    spec = SOURCES.get(source)
    prefixes = spec.prefixes if spec else (f"{source}/",)
    return any(str(c).startswith(prefixes) for c in channels)


#: decimals a trace writes of a channel, by unit (:func:`decimals_of`): each finer than what any source measures
#: (``%``: shares of scheduler ticks, in steps of 100 / the ticks a read sees, 0.01 or more up to 10,000 ticks, and
#: the exact ticks are the same event's ``*_seconds_total``; ``s/s``: PSI's µs over its 20 ms window are 5e-5;
#: ``s``: the ns, NVML's, the finest any source counts; ``B`` and ``Hz``: whole, as every source counts them;
#: ``W``, ``J``: NVML's mW and mJ). A unit not here (counts, load averages, ``°C``) is written as sampled: the
#: fewest digits that read back as the same double.
UNIT_DECIMALS = {"%": 2, "s/s": 6, "s": 9, "B": 0, "Hz": 0, "W": 3, "J": 3}
#: the units of counter rates (whole units counted over an interval, divided by it)
RATE_UNITS = ("B/s", "/s")
#: a counter rate is written to this fraction of its step (one unit per interval) or finer
RATE_STEP_FRACTION = 1e-3


def decimals_of(channel: str, interval_s: float) -> Optional[int]:
    """Decimals of ``channel``'s values in a trace sampled every ``interval_s`` seconds (its source's interval):
    :data:`UNIT_DECIMALS` of its unit; a counter rate (:data:`RATE_UNITS`) to :data:`RATE_STEP_FRACTION` of one
    unit per interval (0 decimals at 1 ms, 1 at 10 ms, 3 at 1 s), so ``round(rate * dt)`` still gives the count of
    an interval ``dt`` up to 500 intervals long. None: written as sampled (a unit with no rule, a channel the
    registry does not know, an interval that is not positive)."""
    unit = unit_of(channel)
    if unit in RATE_UNITS:
        if not interval_s > 0:
            return None
        return max(0, math.ceil(math.log10(interval_s / RATE_STEP_FRACTION) - 1e-9))
    return UNIT_DECIMALS.get(unit)


def channels_markdown() -> str:
    """docs/channels.md: every source and channel of the registry, as Markdown (a test keeps the file equal to this;
    ``python -m sysprof.sampling.registry > docs/channels.md`` writes it)."""
    def cell(s: str) -> str:
        return s.replace("|", "\\|")

    out = ["# Channels", "",
           "Generated from the registry (`sysprof/sampling/registry.py`) by `python -m sysprof.sampling.registry`; a "
           "test keeps this file equal to it. Values are float64 in base units; NaN where unknown. `<dev>`, `<nic>`, "
           "`<id>`, `<slot>`, `<index>`: one channel per disk, interface, CPU, process-tree slot, GPU.", ""]
    for s in SOURCES.values():
        switch = f"`{s.name}`" + (" (default)" if s.default else "")
        out += [f"## {switch}: {cell(s.help)}", "", f"Reads {cell(s.file)}. CLI `{s.flag}`.", "",
                "| channel | unit | kind | range | what | from |", "| --- | --- | --- | --- | --- | --- |"]
        out += [f"| `{c.pattern}` | {cell(c.unit) or '-'} | {c.kind} | {c.range} | {cell(c.help)} | {cell(c.field)} |"
                for c in s.channels]
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(channels_markdown(), end="")
