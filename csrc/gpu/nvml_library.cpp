// gpu: dlopen of the NVML library and its symbols (see nvml_library.hpp).
#include "gpu/nvml_library.hpp"

#include <dlfcn.h>

#include <cstdlib>

namespace sysprof {
namespace nvml {
namespace {

template <class Fn>
Fn symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

// Every symbol sysprof calls. The versioned getters (_v2, V) and their older forms are looked up
// separately: the metric table asks the newest one and falls back to the older one where it is
// missing or refused. True: the required ones are there.
bool resolve(Library& lib) {
  void* h = lib.handle;
  lib.init = symbol<InitFn>(h, "nvmlInit_v2");
  lib.shutdown = symbol<ShutdownFn>(h, "nvmlShutdown");
  lib.get_count = symbol<GetCountFn>(h, "nvmlDeviceGetCount_v2");
  lib.get_handle = symbol<GetHandleByIndexFn>(h, "nvmlDeviceGetHandleByIndex_v2");
  lib.get_name = symbol<GetStringFn>(h, "nvmlDeviceGetName");
  lib.get_uuid = symbol<GetStringFn>(h, "nvmlDeviceGetUUID");
  lib.get_pci = symbol<GetPciInfoFn>(h, "nvmlDeviceGetPciInfo_v3");
  lib.get_util = symbol<GetUtilizationFn>(h, "nvmlDeviceGetUtilizationRates");
  lib.get_mem_v1 = symbol<GetMemoryV1Fn>(h, "nvmlDeviceGetMemoryInfo");
  lib.get_mem_v2 = symbol<GetMemoryV2Fn>(h, "nvmlDeviceGetMemoryInfo_v2");
  lib.get_power = symbol<GetUintFn>(h, "nvmlDeviceGetPowerUsage");
  lib.get_energy = symbol<GetUllFn>(h, "nvmlDeviceGetTotalEnergyConsumption");
  lib.get_temp = symbol<GetTemperatureFn>(h, "nvmlDeviceGetTemperature");
  lib.get_temp_v = symbol<GetTemperatureVFn>(h, "nvmlDeviceGetTemperatureV");
  lib.get_clock = symbol<GetClockFn>(h, "nvmlDeviceGetClockInfo");
  lib.get_fields = symbol<GetFieldValuesFn>(h, "nvmlDeviceGetFieldValues");
  lib.get_pcie_tput = symbol<GetClockFn>(h, "nvmlDeviceGetPcieThroughput");
  lib.event_set_create = symbol<EventSetCreateFn>(h, "nvmlEventSetCreate");
  lib.register_events = symbol<RegisterEventsFn>(h, "nvmlDeviceRegisterEvents");
  lib.event_set_wait = symbol<EventSetWaitFn>(h, "nvmlEventSetWait_v2");
  lib.event_set_free = symbol<EventSetFreeFn>(h, "nvmlEventSetFree");
  // Throttling and health (issue 13, item 2).
  lib.get_clk_events = symbol<GetReasonsFn>(h, "nvmlDeviceGetCurrentClocksEventReasons");
  lib.get_clk_throttle = symbol<GetReasonsFn>(h, "nvmlDeviceGetCurrentClocksThrottleReasons");
  lib.get_violation = symbol<GetViolationFn>(h, "nvmlDeviceGetViolationStatus");
  lib.get_ecc = symbol<GetEccFn>(h, "nvmlDeviceGetTotalEccErrors");
  lib.get_remapped = symbol<GetRemappedRowsFn>(h, "nvmlDeviceGetRemappedRows");
  lib.get_pcie_replay = symbol<GetUintFn>(h, "nvmlDeviceGetPcieReplayCounter");
  lib.get_power_limit = symbol<GetUintFn>(h, "nvmlDeviceGetEnforcedPowerLimit");
  lib.get_pcie_gen = symbol<GetUintFn>(h, "nvmlDeviceGetCurrPcieLinkGeneration");
  lib.get_pcie_width = symbol<GetUintFn>(h, "nvmlDeviceGetCurrPcieLinkWidth");
  // GPM (issue 13, item 1).
  lib.gpm_support = symbol<GpmQueryDeviceSupportFn>(h, "nvmlGpmQueryDeviceSupport");
  lib.gpm_alloc = symbol<GpmSampleAllocFn>(h, "nvmlGpmSampleAlloc");
  lib.gpm_free = symbol<GpmSampleFreeFn>(h, "nvmlGpmSampleFree");
  lib.gpm_sample = symbol<GpmSampleGetFn>(h, "nvmlGpmSampleGet");
  lib.gpm_metrics = symbol<GpmMetricsGetFn>(h, "nvmlGpmMetricsGet");
  lib.get_samples = symbol<GetSamplesFn>(h, "nvmlDeviceGetSamples");
  // MIG (issue 13, item 5).
  lib.get_mig_mode = symbol<GetMigModeFn>(h, "nvmlDeviceGetMigMode");
  lib.get_max_mig = symbol<GetUintFn>(h, "nvmlDeviceGetMaxMigDeviceCount");
  lib.get_mig_handle = symbol<GetMigDeviceHandleFn>(h, "nvmlDeviceGetMigDeviceHandleByIndex");
  return lib.init && lib.shutdown && lib.get_count && lib.get_handle;
}

}  // namespace

std::string library_path(bool& from_env) {
  const char* env = std::getenv("SYSPROF_NVML_LIBRARY");
  from_env = env && *env;
  return from_env ? env : kDefaultLibrary;
}

bool load_library(Library& lib, std::string& err) {
  bool from_env;
  std::string path = library_path(from_env);
  lib.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib.handle) {
    const char* why = dlerror();
    err = "NVML library not loadable (" + path + "): " + (why ? why : "dlopen failed") +
          (from_env ? "" : "; no NVIDIA driver installed? SYSPROF_NVML_LIBRARY names another path");
    return false;
  }
  if (!resolve(lib)) {
    err = path + " lacks nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2 or nvmlDeviceGetHandleByIndex_v2 "
          "(driver too old)";
    return false;
  }
  return true;
}

void unload_library(Library& lib) {
  if (lib.handle) dlclose(lib.handle);
  lib.handle = nullptr;
}

const char* init_hint(Return r) {
  switch (r) {
    case kErrorDriverNotLoaded: return " (the NVIDIA kernel driver is not loaded)";
    case kErrorLibRmVersionMismatch:
      return " (libnvidia-ml and the kernel driver are different versions; e.g. the driver was upgraded "
             "without a reboot)";
    case kErrorNoPermission: return " (no permission to open the /dev/nvidia* device files)";
    default: return "";
  }
}

}  // namespace nvml
}  // namespace sysprof
