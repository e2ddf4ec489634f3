// gpu: which GPUs are read, and in which order (issue 13, item 5).
//
// Python (sysprof/sampling/gpus.py) turns Sampler(gpus=...) / --gpus, else CUDA_VISIBLE_DEVICES, into Config
// options "gpu:select:<kind>:<value>", one per entry in order (kinds: index = an NVML index, uuid = a "GPU-"
// UUID or its prefix, mig = a "MIG-" UUID or its prefix, pci = a PCI bus id "DDDDDDDD:BB:DD.F"), plus
// "gpu:select:cuda" when the list is CUDA_VISIBLE_DEVICES' (each device then has a cuda_index) and
// "gpu:select:none" for an empty list. Without any, every device is read in NVML order. A MIG entry selects
// its parent device (NVML reads a MIG-enabled GPU as a whole); an entry matching no device is noted.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "gpu/nvml_query.hpp"

namespace sysprof {
namespace nvml {

struct Selector {
  std::string kind, value;  // value upper-cased (uuid, mig, pci) or decimal (index)
};
struct Selection {
  bool active = false;  // some "gpu:select:" option was given
  bool cuda = false;  // the entries are CUDA_VISIBLE_DEVICES'
  std::vector<Selector> entries;
};
Selection parse_selection(const std::vector<std::string>& options);

// The positions in `all` ((NVML index, handle), NVML order) of the devices selected, in selection order,
// each once. Queries UUIDs and PCI bus ids (and MIG instances for a mig entry) where an entry needs them.
std::vector<size_t> select_devices(const Library& lib, const std::vector<std::pair<unsigned, Device>>& all,
                                   const Selection& sel, Calls& calls);

// The UUIDs of a MIG-enabled device's instances (nvmlDeviceGetMigMode, ...GetMaxMigDeviceCount,
// ...GetMigDeviceHandleByIndex, nvmlDeviceGetUUID). False: MIG is off, or not supported.
bool mig_instances(const Library& lib, Device h, int dev, Calls& calls, std::vector<std::string>& uuids);

}  // namespace nvml
}  // namespace sysprof
