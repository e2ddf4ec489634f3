"""What the pynvml path asks of NVML per device: the metric table, row for row the native one
(csrc/gpu/nvml_query.cpp's ``kMetricTable``, exported as ``sysprof._native.nvml_metrics()``; a test
in tests/test_gpu.py pins the two together). Kept here too for machines without the extension.

A row: the metric's key; the NVML function or field asked (``call``, also the name in messages);
the field id and scopeId for ``nvmlDeviceGetFieldValues`` (None: a getter of its own); the metric
asked instead once this one is refused (``fallback``); the ``rule`` turning the raw answer into
channel values; the channels written; what reads NaN once it and its fallback are refused; ``slow``: read
once every ``SLOW_S`` (the health rows), the values held in between. The clock event reasons are read at every
reading: they change faster than once a second.
"""
from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple

from ..registry import SOURCES

#: channels per device, in row order: the registry's (sysprof/sampling/registry.py, ``_gpu()``)
CHANNELS = tuple(c.pattern.rsplit("/", 1)[-1] for c in SOURCES["gpu"].channels)
INDEX = {c: i for i, c in enumerate(CHANNELS)}

#: rules: level (as is), milli (/1000: mW -> W), mega (*1e6: MHz -> Hz), kilo (*1000: KB/s -> B/s), energy_mj
#: (an mJ counter: joules and EnergyPower), byte_rate and kib_rate (a byte / KiB counter as bytes per second),
#: ns_total (a ns counter: seconds total, and seconds per second)
LEVEL_RULES = ("level", "milli", "mega", "kilo")
COUNTER_RULES = ("energy_mj", "byte_rate", "kib_rate", "ns_total")
SLOW_S = 1.0  # slow rows are read once this long after their previous read (native: kSlowNs)
#: the GPM-only channels (sysprof/sampling/portable/nvml_gpm.py): laid out only where the device has GPM
GPM_CHANNELS = tuple(c for c in CHANNELS if c.endswith("_active_percent") or c == "sm_occupancy_percent")
ALL_LINKS = 0xFFFFFFFF  # scopeId: the sum over all NVLink links (0 would be link 0 alone)


class Metric(NamedTuple):
    metric: str
    call: str
    field_id: Optional[int]
    scope: Optional[int]
    fallback: Optional[str]
    rule: str
    channels: Tuple[str, ...]
    nan_note: str
    slow: bool = False


_MEM = ("memory_used_bytes", "memory_total_bytes", "memory_free_bytes")
_ENERGY = ("energy_joules", "energy_power_watts")

#: in the order a reading asks the getters
METRICS: Tuple[Metric, ...] = (
    Metric("util", "nvmlDeviceGetUtilizationRates", None, None, None, "level",
           ("utilization_percent", "memory_utilization_percent"), "utilization_percent, memory_utilization_percent"),
    Metric("mem_v2", "nvmlDeviceGetMemoryInfo_v2", None, None, "mem_v1", "level", _MEM + ("memory_reserved_bytes",),
           "memory_*_bytes"),
    Metric("mem_v1", "nvmlDeviceGetMemoryInfo", None, None, None, "level", _MEM, "memory_*_bytes"),
    Metric("power_field", "NVML_FI_DEV_POWER_INSTANT", 186, 0, "power_usage", "milli", ("power_watts",),
           "power_watts"),  # scope 0: the GPU alone, not the module
    Metric("power_usage", "nvmlDeviceGetPowerUsage", None, None, None, "milli", ("power_watts",), "power_watts"),
    Metric("energy_field", "NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 83, 0, "energy_fn", "energy_mj", _ENERGY,
           "energy_joules, energy_power_watts"),
    Metric("energy_fn", "nvmlDeviceGetTotalEnergyConsumption", None, None, None, "energy_mj", _ENERGY,
           "energy_joules, energy_power_watts"),
    Metric("temp_v", "nvmlDeviceGetTemperatureV", None, None, "temp", "level", ("temperature_celsius",),
           "temperature_celsius"),
    Metric("temp", "nvmlDeviceGetTemperature", None, None, None, "level", ("temperature_celsius",),
           "temperature_celsius"),
    Metric("sm_clock", "nvmlDeviceGetClockInfo(NVML_CLOCK_SM)", None, None, None, "mega", ("sm_clock_hz",),
           "sm_clock_hz"),
    Metric("mem_clock", "nvmlDeviceGetClockInfo(NVML_CLOCK_MEM)", None, None, None, "mega", ("memory_clock_hz",),
           "memory_clock_hz"),
    Metric("pcie_tx", "NVML_FI_DEV_PCIE_COUNT_TX_BYTES", 197, 0, "pcie_tx_tput", "byte_rate",
           ("pcie_tx_bytes_per_second",), "pcie_tx_bytes_per_second"),
    Metric("pcie_rx", "NVML_FI_DEV_PCIE_COUNT_RX_BYTES", 198, 0, "pcie_rx_tput", "byte_rate",
           ("pcie_rx_bytes_per_second",), "pcie_rx_bytes_per_second"),
    # older drivers without the count fields: the driver's 20 ms throughput (GPM, where there is, comes first)
    Metric("pcie_tx_tput", "nvmlDeviceGetPcieThroughput(NVML_PCIE_UTIL_TX_BYTES)", None, None, None, "kilo",
           ("pcie_tx_bytes_per_second",), "pcie_tx_bytes_per_second"),
    Metric("pcie_rx_tput", "nvmlDeviceGetPcieThroughput(NVML_PCIE_UTIL_RX_BYTES)", None, None, None, "kilo",
           ("pcie_rx_bytes_per_second",), "pcie_rx_bytes_per_second"),
    Metric("nvlink_tx", "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", 138, ALL_LINKS, None, "kib_rate",
           ("nvlink_tx_bytes_per_second",), "nvlink_tx_bytes_per_second"),
    Metric("nvlink_rx", "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", 139, ALL_LINKS, None, "kib_rate",
           ("nvlink_rx_bytes_per_second",), "nvlink_rx_bytes_per_second"),
    # throttling, at every reading; ClocksEventReasons is the r535+ name of ThrottleReasons
    Metric("clk_events", "nvmlDeviceGetCurrentClocksEventReasons", None, None, "clk_throttle", "level",
           ("clocks_event_reasons",), "clocks_event_reasons"),
    Metric("clk_throttle", "nvmlDeviceGetCurrentClocksThrottleReasons", None, None, None, "level",
           ("clocks_event_reasons",), "clocks_event_reasons"),
    # health: slow rows
    Metric("viol_power", "nvmlDeviceGetViolationStatus(NVML_PERF_POLICY_POWER)", None, None, None, "ns_total",
           ("violation_power_seconds_total", "violation_power_seconds_per_second"), "violation_power_seconds_*", True),
    Metric("viol_thermal", "nvmlDeviceGetViolationStatus(NVML_PERF_POLICY_THERMAL)", None, None, None, "ns_total",
           ("violation_thermal_seconds_total", "violation_thermal_seconds_per_second"), "violation_thermal_seconds_*",
           True),
    Metric("ecc_corrected", "nvmlDeviceGetTotalEccErrors(CORRECTED, VOLATILE)", None, None, None, "level",
           ("ecc_corrected_total",), "ecc_corrected_total", True),
    Metric("ecc_uncorrected", "nvmlDeviceGetTotalEccErrors(UNCORRECTED, VOLATILE)", None, None, None, "level",
           ("ecc_uncorrected_total",), "ecc_uncorrected_total", True),
    Metric("remapped_rows", "nvmlDeviceGetRemappedRows", None, None, None, "level",
           ("remapped_rows_correctable", "remapped_rows_uncorrectable", "remap_pending"),
           "remapped_rows_*, remap_pending", True),
    Metric("pcie_replay", "nvmlDeviceGetPcieReplayCounter", None, None, None, "level", ("pcie_replay_total",),
           "pcie_replay_total", True),
    Metric("power_limit", "nvmlDeviceGetEnforcedPowerLimit", None, None, None, "milli", ("power_limit_watts",),
           "power_limit_watts", True),
    Metric("pcie_gen", "nvmlDeviceGetCurrPcieLinkGeneration", None, None, None, "level", ("pcie_link_generation",),
           "pcie_link_generation", True),
    Metric("pcie_width", "nvmlDeviceGetCurrPcieLinkWidth", None, None, None, "level", ("pcie_link_width",),
           "pcie_link_width", True),
)
BY_KEY: Dict[str, Metric] = {m.metric: m for m in METRICS}
#: the channels the slow rows write
SLOW_CHANNELS: Tuple[str, ...] = tuple(c for m in METRICS if m.slow for c in m.channels)
FIELDS: Tuple[Metric, ...] = tuple(m for m in METRICS if m.field_id is not None)
GETTERS: Tuple[Metric, ...] = tuple(m for m in METRICS if m.field_id is None)
#: metric -> the metric whose fallback it is (asked only once that one is refused)
PRIMARY: Dict[str, str] = {m.fallback: m.metric for m in METRICS if m.fallback is not None}


def wanted(metric: str, refused) -> bool:
    """Asked now: not refused, and when it is a fallback, the metric it stands in for is refused."""
    if metric in refused:
        return False
    primary = PRIMARY.get(metric)
    return primary is None or primary in refused


def field_value(f) -> Optional[float]:
    """The value of an nvmlFieldValue_t entry as a number, whatever type the driver chose; None if unusable."""
    t, v = f.valueType, f.value
    if t == 0:
        return v.dVal
    if t == 1:
        return None if v.uiVal == 0xFFFFFFFF else v.uiVal
    if t == 2:
        return v.ulVal
    if t == 3:
        return None if v.ullVal == 0xFFFFFFFFFFFFFFFF else v.ullVal
    if t == 4:
        return v.sllVal
    if t == 5:
        return v.siVal
    if t == 6:
        return v.usVal
    return None
