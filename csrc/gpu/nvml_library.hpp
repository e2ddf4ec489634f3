// gpu: the NVML library, loaded with dlopen (SYSPROF_NVML_LIBRARY, else libnvidia-ml.so.1), and the
// symbols sysprof calls, each optional one resolved to its newest version the library exports.
// Used by the reader thread only (csrc/gpu/nvml_reader.hpp).
#pragma once
#include <string>

#include "gpu/nvml_abi.hpp"

namespace sysprof {
namespace nvml {

constexpr const char* kDefaultLibrary = "libnvidia-ml.so.1";

struct Library {
  void* handle = nullptr;
  bool initialized = false;  // nvmlInit_v2 succeeded: nvmlShutdown is owed
  // Required: without one of these the library is not used.
  InitFn init = nullptr;
  ShutdownFn shutdown = nullptr;
  GetCountFn get_count = nullptr;
  GetHandleByIndexFn get_handle = nullptr;
  // Optional: a missing one disables its metric only (csrc/gpu/nvml_query.cpp).
  GetStringFn get_name = nullptr, get_uuid = nullptr;
  GetPciInfoFn get_pci = nullptr;
  GetUtilizationFn get_util = nullptr;
  GetMemoryV1Fn get_mem_v1 = nullptr;
  GetMemoryV2Fn get_mem_v2 = nullptr;
  GetUintFn get_power = nullptr;
  GetUllFn get_energy = nullptr;
  GetTemperatureFn get_temp = nullptr;
  GetTemperatureVFn get_temp_v = nullptr;
  GetClockFn get_clock = nullptr;
  GetFieldValuesFn get_fields = nullptr;
  GetClockFn get_pcie_tput = nullptr;  // nvmlDeviceGetPcieThroughput (KB/s): where the PCIe count fields are not
  // XID events (csrc/gpu/nvml_events.cpp): all four, or none is used.
  EventSetCreateFn event_set_create = nullptr;
  RegisterEventsFn register_events = nullptr;
  EventSetWaitFn event_set_wait = nullptr;
  EventSetFreeFn event_set_free = nullptr;
  // Throttling and health (issue 13, item 2); health read at kSlowNs (csrc/gpu/nvml_query.hpp).
  GetReasonsFn get_clk_events = nullptr, get_clk_throttle = nullptr;
  GetViolationFn get_violation = nullptr;
  GetEccFn get_ecc = nullptr;
  GetRemappedRowsFn get_remapped = nullptr;
  GetUintFn get_pcie_replay = nullptr, get_power_limit = nullptr, get_pcie_gen = nullptr, get_pcie_width = nullptr;
  // GPM (issue 13, item 1; csrc/gpu/nvml_gpm.hpp).
  GpmQueryDeviceSupportFn gpm_support = nullptr;
  GpmSampleAllocFn gpm_alloc = nullptr;
  GpmSampleFreeFn gpm_free = nullptr;
  GpmSampleGetFn gpm_sample = nullptr;
  GpmMetricsGetFn gpm_metrics = nullptr;
  // The driver's buffered samples (issue 13, item 4; csrc/gpu/nvml_samples.hpp).
  GetSamplesFn get_samples = nullptr;
  // MIG (issue 13, item 5).
  GetMigModeFn get_mig_mode = nullptr;
  GetUintFn get_max_mig = nullptr;
  GetMigDeviceHandleFn get_mig_handle = nullptr;
};

// The library's path: SYSPROF_NVML_LIBRARY when set and not empty, else kDefaultLibrary.
// `from_env` says which.
std::string library_path(bool& from_env);

// dlopen and dlsym; nvmlInit_v2 is left to the caller (so that it can be timed). False: err says why.
bool load_library(Library& lib, std::string& err);
// dlclose, once nvmlShutdown (if owed) has returned.
void unload_library(Library& lib);

// What an nvmlInit_v2 failure most likely means, as " (...)", or "".
const char* init_hint(Return r);

// Answers that will not change while the driver is loaded.
inline bool permanent(Return r) {
  return r == kErrorNotSupported || r == kErrorNoPermission || r == kErrorFunctionNotFound ||
         r == kErrorArgumentVersionMismatch;
}
// The device is gone until a reset.
inline bool lost(Return r) { return r == kErrorGpuIsLost || r == kErrorResetRequired; }

}  // namespace nvml
}  // namespace sysprof
