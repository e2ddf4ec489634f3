// gpu: what is asked of NVML per device, as one table, and the one path every question takes.
//
// Each row of kMetricTable is a metric: the NVML getter or field id that answers it, the metric asked
// instead once it is refused (the older form of a versioned call, or the getter of a field), the rule
// that turns its raw answer into channel values and the channels it writes. The rows are written once, in
// sysprof/sampling/gpu_metrics.py, for both backends: the build generates them (gen/gpu_metrics.hpp); the
// NVML call of each getter row is ask_of() in nvml_query.cpp, keyed by Metric. A reading of a device is
// one nvmlDeviceGetFieldValues call for every field metric still asked (each entry's own return code
// checked), then a loop over the getter rows. Every answer goes through classify(): NOT_SUPPORTED,
// NO_PERMISSION, FUNCTION_NOT_FOUND (and ARGUMENT_VERSION_MISMATCH; INVALID_ARGUMENT for a field id an
// older driver does not know) are remembered per (device, metric) and never asked again; GPU_IS_LOST
// and RESET_REQUIRED retire the device (NaN from then on); anything else is NaN for this reading.
// The clock event reasons are read at every reading (a cheap call; a power cap of 300 ms in each second must
// show in 30 % of the rows). Slow rows (health: violation times, ECC, remapped rows, PCIe replays and link,
// the power limit) are asked once every kSlowNs and their channels hold the last answer in between, so at
// 1 kHz they cost one compare per row per reading. GPM (csrc/gpu/nvml_gpm.hpp) follows the
// getters. The table is exported to Python as _native.nvml_metrics() (csrc/gpu/nvml_bindings.hpp):
// tests/test_gpu_health.py checks that the built extension carries the table as it is now.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "derive/rules.hpp"
#include "gen/channels.hpp"
#include "gen/gpu_metrics.hpp"
#include "gpu/nvml_library.hpp"

namespace sysprof {
namespace nvml {

// The channel and metric enums, the rules, kMetricTable (MetricSpec rows) and kGpmTable are generated from the
// GPU metric table (sysprof/sampling/gpu_metrics.py) by csrc/gen/gen_gpu_metrics.py at build time.
inline constexpr const char* const* kChannelNames = kGpuChannelNames;

// A getter's raw answer: levels, or a counter.
struct Raw {
  double v[4] = {kNaN, kNaN, kNaN, kNaN};
  uint64_t count = 0;
  bool counted = false;  // count holds a usable counter reading
};
using Getter = Return (*)(const Library&, Device, Raw&);
using Available = bool (*)(const Library&);

// The metric whose fallback m is (asked only once that one is refused), or -1.
int primary_of(int m);

// One NVML call, made by whoever times it: fn(ctx). Two pointers: nothing is allocated.
struct Call {
  Return (*fn)(void*);
  void* ctx;
};
template <class F>
Call make_call(F& f) {
  return Call{[](void* p) -> Return { return (*static_cast<F*>(p))(); }, &f};
}

// What a reading needs from the thread that reads (csrc/gpu/nvml_reader.hpp).
class Calls {
 public:
  // Makes an NVML call; what and dev (-1: none) name it while it is in flight.
  virtual Return call(const char* what, int dev, Call c) = 0;
  // Records a permanent condition (a refused metric, a lost device).
  virtual void note(const std::string& msg) = 0;

 protected:
  ~Calls() = default;
};

struct GpmState;  // csrc/gpu/nvml_gpm.hpp

struct Gpu {
  unsigned index = 0;
  Device handle = nullptr;
  uint32_t refused = 0;  // Metric bits answered permanently
  bool lost = false;
  std::map<std::string, std::string> info;
  // The field request, rebuilt (in place) when a field is refused.
  FieldValue req[kMaxFields];
  int req_metric[kMaxFields];
  int nreq = 0;
  uint32_t req_mask = ~uint32_t(0);  // refused bits the request was built for; ~0: not built
  RateCounter rate[kMetrics];  // kByteRate and kKibRate rows
  EnergyPower energy;  // kEnergyMj rows (one of the two is asked)
  int64_t slow_at = INT64_MIN / 4;  // when the slow rows were last read
  double held[kPerDevice];  // the slow rows' channels as last read
  double full[kPerDevice];  // the reading being taken, every channel
  std::vector<int> chans;  // the Channels laid out for this device, in order
  std::shared_ptr<GpmState> gpm;  // set when the device supports GPM
};

// An nvmlValue_t of nvmlValueType_t `type` as a double (NaN for the "not available" markers, an unknown type).
double value_as_double(int type, const Value& v);

// Notes a lost device once; its channels read NaN from then on.
void mark_lost(Gpu& g, const char* what, Calls& calls);
// "gpu/<index>: "
std::string device_label(const Gpu& g);

// Refuses, as FUNCTION_NOT_FOUND, every metric the library cannot serve (at discovery).
void refuse_missing(const Library& lib, Gpu& g, Calls& calls);

// One reading of a device into o[0, kPerDevice), NaN where unknown. err: the first transient error
// of this reading (kept when already set). Allocates nothing unless a note is new.
void read_device(const Library& lib, Gpu& g, int64_t now, double* o, std::string& err, Calls& calls);

}  // namespace nvml
}  // namespace sysprof
