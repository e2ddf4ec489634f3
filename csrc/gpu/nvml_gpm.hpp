// gpu: GPU Performance Monitoring (GPM; Hopper and newer), read with the other metrics of a device.
//
// At discovery, nvmlGpmQueryDeviceSupport says whether the device has GPM; if so, two sample buffers are
// allocated (nvmlGpmSampleAlloc) and kept for the device's life. Each reading takes one sample into the
// buffer not holding the previous one (nvmlGpmSampleGet) and asks nvmlGpmMetricsGet for the metrics
// between the two, so each value covers the interval between two readings; nothing is allocated per
// reading. The first reading only takes a sample (NaN). A device without GPM, or a library without the
// GPM calls (an older driver), has no GPM channels (kFirstGpm..) and a note says why. PCIe and NVLink
// throughput come from GPM where the field counters (NVML_FI_DEV_PCIE_COUNT_*, NVLINK_THROUGHPUT_*) are
// refused (noted once when GPM first answers; the PCIe fields' own fallback, nvmlDeviceGetPcieThroughput,
// is then never asked). Each metric's own return code is checked: a permanent one
// reads NaN from then on, noted (but for a stand-in, whose channel's field was noted already).
// The table is written in sysprof/sampling/gpu_metrics.py (GPM_METRICS), which the pynvml path
// (sysprof/sampling/portable/nvml_gpm.py) reads too; it is exported to Python as _native.nvml_gpm_metrics().
#pragma once
#include <memory>
#include <string>

#include "gpu/nvml_query.hpp"

namespace sysprof {
namespace nvml {

// kGpmTable (GpmSpec rows, kGpmMetrics) is generated with kMetricTable (gen/gpu_metrics.hpp).
struct GpmState {
  GpmSample sample[2] = {nullptr, nullptr};
  int next = 0;           // the buffer the next sample goes into
  bool primed = false;    // the other buffer holds the previous sample
  uint32_t refused = 0;   // kGpmTable bits answered permanently
  uint32_t served = 0;    // stand-in rows that answered (noted once)
  uint32_t asked = 0;     // the request's kGpmTable bits; rebuilt when the wanted set changes
  int slot[kGpmMetrics];  // request entry -> kGpmTable row
  int n = 0;
  std::unique_ptr<GpmMetricsGet> req;
};

// At discovery: sets g.gpm when the device supports GPM and both buffers were allocated; else notes why
// the GPM channels are absent on it.
void gpm_open(const Library& lib, Gpu& g, Calls& calls);
// One GPM reading into o. False: the device is lost.
bool gpm_read(const Library& lib, Gpu& g, int64_t now, double* o, std::string& err, Calls& calls);
// Frees the buffers (before nvmlShutdown).
void gpm_close(const Library& lib, Gpu& g, Calls& calls);

}  // namespace nvml
}  // namespace sysprof
