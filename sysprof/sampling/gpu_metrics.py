"""The GPU metric table: per NVML metric, what is asked and how the answer becomes the registry's channels, written
once for both backends.

The native reader takes it from the build: csrc/gen/gen_gpu_metrics.py writes it as ``gen/gpu_metrics.hpp``
(``kMetricTable``, ``kGpmTable`` and their enums, used by csrc/gpu/nvml_query.cpp and nvml_gpm.cpp); the pynvml
path imports it (sysprof/sampling/portable/nvml_table.py, nvml_gpm.py). Pure data: the build loads this file by
path with the standard library alone. What stays code on each side is the call itself, keyed by the metric: the
C++ getter (``ask_of`` in nvml_query.cpp) and the pynvml one (``_getters`` in portable/nvml_query.py).

A :class:`Metric` row: its key; the NVML function or field asked (``call``, also the name in messages); the field
id and scopeId for ``nvmlDeviceGetFieldValues`` (None: a getter of its own); the metric asked instead once this
one is refused (``fallback``); the ``rule`` turning the raw answer into values in the channels' base units; the
registry channels written (sysprof/sampling/registry.py, ``_gpu()``); what reads NaN once it and its fallback are
refused; ``slow``: read once every ``SLOW_S`` (the health rows), the values held in between. The clock event
reasons are read at every reading: they change faster than once a second. Rows are in the order a reading asks
the getters.

A :class:`GpmMetric` row (GPM, Hopper and newer): the NVML_GPM_METRIC_* name and id, the channel, the scale to the
channel's unit, and the metric row whose refusal makes it asked (None: always asked).
"""
from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple

SLOW_S = 1.0  # slow rows are read once this long after their previous read (native: kSlowNs)
ALL_LINKS = 0xFFFFFFFF  # scopeId: the sum over all NVLink links (0 would be link 0 alone)
MIB = 1024.0 * 1024.0

#: rule -> how a raw answer becomes channel values (the conversion to the base unit in the channel's name)
RULES: Dict[str, str] = {
    "level": "values as they are, one per channel written",
    "milli": "one value / 1000 (mW -> W)",
    "mega": "one value * 1e6 (MHz -> Hz)",
    "kilo": "one value * 1000 (KB/s -> B/s)",
    "energy_mj": "an mJ counter: energy_joules, and energy_power_watts from its last two changes",
    "byte_rate": "a byte counter, as bytes per second",
    "kib_rate": "a KiB counter, as bytes per second",
    "ns_total": "a ns counter: seconds total, and seconds per second",
}
LEVEL_RULES = ("level", "milli", "mega", "kilo")  # a value per reading
COUNTER_RULES = ("energy_mj", "byte_rate", "kib_rate", "ns_total")  # a counter, its rate kept between readings


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


class GpmMetric(NamedTuple):
    name: str  # NVML_GPM_METRIC_*
    id: int
    channel: str
    scale: float  # percent as is; MiB/s -> B/s
    stands_in_for: Optional[str]  # the metric row whose refusal makes this asked (None: always)


_MEM = ("memory_used_bytes", "memory_total_bytes", "memory_free_bytes")
_ENERGY = ("energy_joules", "energy_power_watts")

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

#: percentages 0-100 as they are, bandwidths in MiB/s
GPM_METRICS: Tuple[GpmMetric, ...] = (
    GpmMetric("NVML_GPM_METRIC_SM_UTIL", 2, "sm_active_percent", 1.0, None),
    GpmMetric("NVML_GPM_METRIC_SM_OCCUPANCY", 3, "sm_occupancy_percent", 1.0, None),
    GpmMetric("NVML_GPM_METRIC_ANY_TENSOR_UTIL", 5, "tensor_active_percent", 1.0, None),
    GpmMetric("NVML_GPM_METRIC_DRAM_BW_UTIL", 10, "dram_active_percent", 1.0, None),
    GpmMetric("NVML_GPM_METRIC_FP16_UTIL", 13, "fp16_active_percent", 1.0, None),
    GpmMetric("NVML_GPM_METRIC_FP32_UTIL", 12, "fp32_active_percent", 1.0, None),
    GpmMetric("NVML_GPM_METRIC_FP64_UTIL", 11, "fp64_active_percent", 1.0, None),
    GpmMetric("NVML_GPM_METRIC_PCIE_TX_PER_SEC", 20, "pcie_tx_bytes_per_second", MIB, "pcie_tx"),
    GpmMetric("NVML_GPM_METRIC_PCIE_RX_PER_SEC", 21, "pcie_rx_bytes_per_second", MIB, "pcie_rx"),
    GpmMetric("NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC", 61, "nvlink_tx_bytes_per_second", MIB, "nvlink_tx"),
    GpmMetric("NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC", 60, "nvlink_rx_bytes_per_second", MIB, "nvlink_rx"),
)
