// gpu: NVML read on the sampler thread, loaded with dlopen so that nothing links against NVIDIA.
//
// Per device and tick: one nvmlDeviceGetFieldValues call for everything it can serve (instant power,
// energy, PCIe and NVLink byte counters; each entry's own return code checked), then the getters
// that have no field id (utilization, memory, temperature, clocks) and the fallbacks of fields a
// device refused. NOT_SUPPORTED, NO_PERMISSION and FUNCTION_NOT_FOUND are permanent answers: they
// are remembered per (device, metric), shared with clones, and never asked again. GPU_IS_LOST
// retires the device (NaN from then on) without touching the others.
#include <dlfcn.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "nvml_abi.hpp"
#include "source.hpp"

namespace sysprof {
namespace {

using namespace nvml;

constexpr const char* kDefaultLibrary = "libnvidia-ml.so.1";

// Channels per device, in this order.
enum Channel {
  kUtil,
  kMemUtil,
  kMemUsed,
  kMemTotal,
  kMemFree,
  kMemReserved,
  kPower,
  kEnergy,
  kEnergyPower,
  kTemp,
  kSmClock,
  kMemClock,
  kPcieTx,
  kPcieRx,
  kNvlinkTx,
  kNvlinkRx,
  kPerDevice
};
constexpr const char* kChannelNames[kPerDevice] = {
    "utilization_percent", "memory_utilization_percent", "memory_used_bytes",       "memory_total_bytes",
    "memory_free_bytes",   "memory_reserved_bytes",      "power_watts",             "energy_joules",
    "energy_power_watts",  "temperature_celsius",        "sm_clock_hz",             "memory_clock_hz",
    "pcie_tx_bytes_per_second", "pcie_rx_bytes_per_second", "nvlink_tx_bytes_per_second",
    "nvlink_rx_bytes_per_second"};

// What is asked of NVML. Each can be refused per device; a refused one with a fallback hands over to it.
enum Metric {
  mUtil,
  mMemV2,
  mMemV1,
  mPowerField,
  mPowerUsage,
  mEnergyField,
  mEnergyFn,
  mTempV,
  mTemp,
  mSmClock,
  mMemClock,
  mPcieTx,
  mPcieRx,
  mNvlinkTx,
  mNvlinkRx,
  kMetrics
};
struct MetricInfo {
  const char* what;  // the NVML function or field, for messages
  int fallback;  // metric asked instead once this one is refused, or -1
  const char* channels;  // what reads NaN when this (and its fallback) is refused
};
constexpr MetricInfo kMetricInfo[kMetrics] = {
    {"nvmlDeviceGetUtilizationRates", -1, "utilization_percent, memory_utilization_percent"},
    {"nvmlDeviceGetMemoryInfo_v2", mMemV1, "memory_*_bytes"},
    {"nvmlDeviceGetMemoryInfo", -1, "memory_*_bytes"},
    {"NVML_FI_DEV_POWER_INSTANT", mPowerUsage, "power_watts"},
    {"nvmlDeviceGetPowerUsage", -1, "power_watts"},
    {"NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION", mEnergyFn, "energy_joules, energy_power_watts"},
    {"nvmlDeviceGetTotalEnergyConsumption", -1, "energy_joules, energy_power_watts"},
    {"nvmlDeviceGetTemperatureV", mTemp, "temperature_celsius"},
    {"nvmlDeviceGetTemperature", -1, "temperature_celsius"},
    {"nvmlDeviceGetClockInfo(NVML_CLOCK_SM)", -1, "sm_clock_hz"},
    {"nvmlDeviceGetClockInfo(NVML_CLOCK_MEM)", -1, "memory_clock_hz"},
    {"NVML_FI_DEV_PCIE_COUNT_TX_BYTES", -1, "pcie_tx_bytes_per_second"},
    {"NVML_FI_DEV_PCIE_COUNT_RX_BYTES", -1, "pcie_rx_bytes_per_second"},
    {"NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", -1, "nvlink_tx_bytes_per_second"},
    {"NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", -1, "nvlink_rx_bytes_per_second"},
};

// What the batched nvmlDeviceGetFieldValues call asks for.
struct FieldSpec {
  Metric metric;
  unsigned id;
  unsigned scope;
};
constexpr FieldSpec kFields[] = {
    {mPowerField, kFiPowerInstant, 0},  // scope 0: the GPU alone, not the module
    {mEnergyField, kFiTotalEnergyConsumption, 0},
    {mPcieTx, kFiPcieCountTxBytes, 0},
    {mPcieRx, kFiPcieCountRxBytes, 0},
    {mNvlinkTx, kFiNvlinkThroughputDataTx, kScopeAllLinks},  // scope 0 would be link 0 alone
    {mNvlinkRx, kFiNvlinkThroughputDataRx, kScopeAllLinks},
};
constexpr int kNumFields = int(sizeof(kFields) / sizeof(kFields[0]));
constexpr uint32_t bit(int m) { return uint32_t(1) << m; }
constexpr uint32_t kFieldMetrics = bit(mPowerField) | bit(mEnergyField) | bit(mPcieTx) | bit(mPcieRx) |
                                   bit(mNvlinkTx) | bit(mNvlinkRx);

// Answers that will not change while the driver is loaded.
bool permanent(Return r) {
  return r == kErrorNotSupported || r == kErrorNoPermission || r == kErrorFunctionNotFound ||
         r == kErrorArgumentVersionMismatch;
}
bool lost(Return r) { return r == kErrorGpuIsLost || r == kErrorResetRequired; }

// The loaded library and what every source sharing it has learnt. The last owner (a source or a
// clone, on whichever thread drops it) calls nvmlShutdown: owners only let go between calls, so
// shutdown never overlaps a call of theirs, even one that hung past Sampler::stop().
struct Library {
  void* handle = nullptr;
  bool initialized = false;
  ShutdownFn shutdown = nullptr;
  GetCountFn get_count = nullptr;
  GetHandleByIndexFn get_handle = nullptr;
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

  struct DeviceState {
    std::atomic<uint32_t> refused{0};  // Metric bits answered permanently
    std::atomic<bool> lost{false};
  };
  std::unique_ptr<DeviceState[]> state;  // by NVML index

  // Accumulated permanent conditions, reported through the source's err on change.
  std::mutex notes_mu;
  std::string notes;
  std::atomic<uint64_t> notes_version{0};

  ~Library() {
    if (initialized && shutdown) shutdown();
    if (handle) dlclose(handle);
  }

  void note(const std::string& msg) {
    std::lock_guard<std::mutex> g(notes_mu);
    if (!notes.empty()) notes += "; ";
    notes += msg;
    notes_version.fetch_add(1, std::memory_order_release);
  }
};

template <class Fn>
Fn symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
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

std::shared_ptr<Library> load_library(std::string& err) {
  const char* env = std::getenv("SYSPROF_NVML_LIBRARY");
  std::string path = env && *env ? env : kDefaultLibrary;
  auto lib = std::make_shared<Library>();
  lib->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib->handle) {
    const char* why = dlerror();
    err = "NVML library not loadable (" + path + "): " + (why ? why : "dlopen failed") +
          (env && *env ? "" : "; no NVIDIA driver installed? SYSPROF_NVML_LIBRARY names another path");
    return nullptr;
  }
  void* h = lib->handle;
  auto init = symbol<InitFn>(h, "nvmlInit_v2");
  lib->shutdown = symbol<ShutdownFn>(h, "nvmlShutdown");
  lib->get_count = symbol<GetCountFn>(h, "nvmlDeviceGetCount_v2");
  lib->get_handle = symbol<GetHandleByIndexFn>(h, "nvmlDeviceGetHandleByIndex_v2");
  if (!init || !lib->shutdown || !lib->get_count || !lib->get_handle) {
    err = path + " lacks nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2 or nvmlDeviceGetHandleByIndex_v2 "
          "(driver too old)";
    return nullptr;
  }
  // Optional: a missing one disables its metric only.
  lib->get_name = symbol<GetStringFn>(h, "nvmlDeviceGetName");
  lib->get_uuid = symbol<GetStringFn>(h, "nvmlDeviceGetUUID");
  lib->get_pci = symbol<GetPciInfoFn>(h, "nvmlDeviceGetPciInfo_v3");
  lib->get_util = symbol<GetUtilizationFn>(h, "nvmlDeviceGetUtilizationRates");
  lib->get_mem_v1 = symbol<GetMemoryV1Fn>(h, "nvmlDeviceGetMemoryInfo");
  lib->get_mem_v2 = symbol<GetMemoryV2Fn>(h, "nvmlDeviceGetMemoryInfo_v2");
  lib->get_power = symbol<GetUintFn>(h, "nvmlDeviceGetPowerUsage");
  lib->get_energy = symbol<GetUllFn>(h, "nvmlDeviceGetTotalEnergyConsumption");
  lib->get_temp = symbol<GetTemperatureFn>(h, "nvmlDeviceGetTemperature");
  lib->get_temp_v = symbol<GetTemperatureVFn>(h, "nvmlDeviceGetTemperatureV");
  lib->get_clock = symbol<GetClockFn>(h, "nvmlDeviceGetClockInfo");
  lib->get_fields = symbol<GetFieldValuesFn>(h, "nvmlDeviceGetFieldValues");

  Return r = init();
  if (r != kSuccess) {
    err = std::string("nvmlInit_v2 failed: ") + return_name(r) + init_hint(r);
    return nullptr;
  }
  lib->initialized = true;
  return lib;
}

// A field value as a double / as an unsigned counter, whatever type the driver chose to report.
double as_double(const FieldValue& f) {
  switch (f.valueType) {
    case kValueDouble: return f.value.dVal;
    case kValueUnsignedInt: return f.value.uiVal == UINT_MAX ? kNaN : double(f.value.uiVal);
    case kValueUnsignedLong: return double(f.value.ulVal);
    case kValueUnsignedLongLong: return f.value.ullVal == ULLONG_MAX ? kNaN : double(f.value.ullVal);
    case kValueSignedLongLong: return double(f.value.sllVal);
    case kValueSignedInt: return double(f.value.siVal);
    case kValueUnsignedShort: return double(f.value.usVal);
    default: return kNaN;
  }
}
// False when the value is not a usable counter reading (negative, NaN, the "not available" marker).
bool as_counter(const FieldValue& f, uint64_t& v) {
  switch (f.valueType) {
    case kValueUnsignedInt:
      v = f.value.uiVal;
      return f.value.uiVal != UINT_MAX;
    case kValueUnsignedLong: v = f.value.ulVal; return true;
    case kValueUnsignedLongLong: v = f.value.ullVal; return f.value.ullVal != ULLONG_MAX;
    case kValueSignedLongLong: v = uint64_t(f.value.sllVal); return f.value.sllVal >= 0;
    case kValueSignedInt: v = uint64_t(f.value.siVal); return f.value.siVal >= 0;
    case kValueUnsignedShort: v = f.value.usVal; return true;
    case kValueDouble: v = uint64_t(f.value.dVal); return f.value.dVal >= 0;
    default: return false;
  }
}

// A byte counter turned into a rate over the time since its previous successful read.
struct RateCounter {
  Counter c;
  int64_t t = 0;
  double update(uint64_t raw, int64_t now_ns) {
    bool had = c.valid;
    uint64_t d = c.update(raw);
    double r = had ? rate(d, double(now_ns - t) * 1e-9) : kNaN;
    t = now_ns;
    return r;
  }
};

// Power from the energy counter. The driver refreshes the counter more slowly than we poll, so a
// per-tick delta would be mostly 0 with spikes: the power is the energy between the two latest ticks
// at which the counter moved over the time between them, held until it moves again. The first
// movement has no start (the counter may have moved just before the first read) and gives NaN.
struct EnergyPower {
  uint64_t ref = 0;
  int64_t t_ref = 0;
  bool valid = false, ref_moved = false;
  double watts = kNaN;
  double update(uint64_t mj, int64_t now_ns) {
    if (!valid || mj < ref) {  // first read, or the driver was reloaded
      ref = mj, t_ref = now_ns, valid = true, ref_moved = false, watts = kNaN;
    } else if (mj != ref) {
      if (ref_moved && now_ns > t_ref) watts = double(mj - ref) / 1000.0 / (double(now_ns - t_ref) * 1e-9);
      ref = mj, t_ref = now_ns, ref_moved = true;
    }
    return watts;
  }
};

struct Gpu {
  unsigned index = 0;
  Device handle = nullptr;
  Library::DeviceState* state = nullptr;
  std::map<std::string, std::string> info;
  // The field request, rebuilt (in place) when a field is refused.
  FieldValue req[kNumFields];
  int req_field[kNumFields];  // index into kFields
  int nreq = 0;
  uint32_t req_mask = ~uint32_t(0);  // refused bits the request was built for; ~0: not built
  RateCounter pcie_tx, pcie_rx, nvlink_tx, nvlink_rx;
  EnergyPower energy;
};

class NvmlSource final : public Source {
 public:
  const char* name() const override { return "gpu"; }

  bool open(const Config&, std::vector<std::string>& channels, std::string& err) override {
    lib_ = load_library(err);
    if (!lib_) return false;
    unsigned count = 0;
    Return r = lib_->get_count(&count);
    if (r != kSuccess) {
      err = std::string("nvmlDeviceGetCount_v2 failed: ") + return_name(r);
      return false;
    }
    if (count == 0) {
      err = "NVML found no GPU";
      return false;
    }
    lib_->state.reset(new Library::DeviceState[count]);
    std::string skipped;
    for (unsigned i = 0; i < count; ++i) {
      Device h = nullptr;
      r = lib_->get_handle(i, &h);
      if (r != kSuccess) {  // e.g. NO_PERMISSION for a GPU this container may not see
        skipped += (skipped.empty() ? "" : "; ") + std::string("gpu/") + std::to_string(i) +
                   ": nvmlDeviceGetHandleByIndex_v2 " + return_name(r) + "; left out";
        continue;
      }
      gpus_.emplace_back();
      Gpu& g = gpus_.back();
      g.index = i;
      g.handle = h;
      g.state = &lib_->state[i];
      g.info = describe(i, h);
      for (int m = 0; m < kMetrics; ++m)
        if (!available(Metric(m))) refuse(g, Metric(m), kErrorFunctionNotFound);
    }
    if (gpus_.empty()) {
      err = skipped.empty() ? "NVML found no usable GPU" : skipped;
      return false;
    }
    for (const Gpu& g : gpus_)
      for (const char* c : kChannelNames) channels.push_back("gpu/" + std::to_string(g.index) + "/" + c);
    width_ = gpus_.size() * kPerDevice;
    if (!skipped.empty()) lib_->note(skipped);
    prime();
    err = notes();
    return true;
  }

  std::unique_ptr<Source> clone(const Config&, std::string& err) const override {
    if (!lib_) {
      err = "gpu source was not opened";
      return nullptr;
    }
    auto s = std::make_unique<NvmlSource>();
    s->lib_ = lib_;
    s->width_ = width_;
    for (const Gpu& g : gpus_) {
      s->gpus_.emplace_back();
      Gpu& c = s->gpus_.back();
      c.index = g.index, c.handle = g.handle, c.state = g.state, c.info = g.info;
    }
    s->prime();
    return s;
  }

  bool sample(int64_t mono_ns, double* out, std::string& err) override {
    const uint64_t gen = stop_gen_.load(std::memory_order_acquire);
    for (size_t i = 0; i < gpus_.size(); ++i) {
      double* o = out + i * kPerDevice;
      if (stop_gen_.load(std::memory_order_acquire) != gen) {  // stop() is waiting: skip the rest
        fill_nan(o, (gpus_.size() - i) * kPerDevice);
        break;
      }
      read(gpus_[i], mono_ns, o, err);
    }
    uint64_t v = lib_->notes_version.load(std::memory_order_acquire);
    if (v != seen_notes_ && err.empty()) {  // a new permanent condition: report the full list once
      seen_notes_ = v;
      err = notes();
    }
    return err.empty();
  }

  std::vector<std::map<std::string, std::string>> devices() const override {
    std::vector<std::map<std::string, std::string>> out;
    for (const Gpu& g : gpus_) out.push_back(g.info);
    return out;
  }

  // Lets a tick in progress skip its remaining devices; a call already in flight cannot be interrupted.
  void shutdown() override { stop_gen_.fetch_add(1, std::memory_order_acq_rel); }

 private:
  std::map<std::string, std::string> describe(unsigned i, Device h) const {
    std::map<std::string, std::string> d{{"index", std::to_string(i)}, {"name", ""}, {"uuid", ""}, {"pci_bus_id", ""}};
    char buf[kNameBufferSize > kUuidBufferSize ? kNameBufferSize : kUuidBufferSize];
    if (lib_->get_name && lib_->get_name(h, buf, kNameBufferSize) == kSuccess) d["name"] = cstr(buf, kNameBufferSize);
    if (lib_->get_uuid && lib_->get_uuid(h, buf, kUuidBufferSize) == kSuccess) d["uuid"] = cstr(buf, kUuidBufferSize);
    PciInfo pci;
    std::memset(&pci, 0, sizeof pci);
    if (lib_->get_pci && lib_->get_pci(h, &pci) == kSuccess) d["pci_bus_id"] = cstr(pci.busId, sizeof pci.busId);
    return d;
  }
  static std::string cstr(const char* p, size_t cap) { return std::string(p, strnlen(p, cap)); }

  bool available(Metric m) const {
    const Library& l = *lib_;
    switch (m) {
      case mUtil: return l.get_util;
      case mMemV2: return l.get_mem_v2;
      case mMemV1: return l.get_mem_v1;
      case mPowerUsage: return l.get_power;
      case mEnergyFn: return l.get_energy;
      case mTempV: return l.get_temp_v;
      case mTemp: return l.get_temp;
      case mSmClock:
      case mMemClock: return l.get_clock;
      default: return l.get_fields;  // the field metrics
    }
  }

  // Rates and the energy power start from here: the first sample() covers the time since.
  void prime() {
    std::vector<double> scratch(width_);
    std::string unused;
    int64_t now = mono_now_ns();
    for (size_t i = 0; i < gpus_.size(); ++i) read(gpus_[i], now, scratch.data() + i * kPerDevice, unused);
    seen_notes_ = lib_->notes_version.load(std::memory_order_acquire);
  }

  std::string notes() const {
    std::lock_guard<std::mutex> g(lib_->notes_mu);
    return lib_->notes;
  }

  // Remembers a permanent refusal; notes it when a channel is left without a source.
  void refuse(Gpu& g, Metric m, Return r) {
    uint32_t old = g.state->refused.fetch_or(bit(m), std::memory_order_acq_rel);
    if (old & bit(m)) return;
    const MetricInfo& mi = kMetricInfo[m];
    if (mi.fallback >= 0 && !(g.state->refused.load(std::memory_order_acquire) & bit(mi.fallback))) return;
    lib_->note("gpu/" + std::to_string(g.index) + ": " + mi.channels + " read NaN (" + mi.what + ": " +
               return_name(r) + ")");
  }

  void mark_lost(Gpu& g, const char* what) {
    if (g.state->lost.exchange(true, std::memory_order_acq_rel)) return;
    lib_->note("gpu/" + std::to_string(g.index) + ": lost (" + what + ": NVML_ERROR_GPU_IS_LOST or RESET_REQUIRED); " +
               "its channels read NaN");
  }

  // Sorts out one answer. True: use the value. Lost devices and refused metrics are recorded;
  // other errors (timeouts, ...) give NaN for this tick only.
  bool ok(Gpu& g, Metric m, Return r, bool& gone, std::string& err) {
    if (r == kSuccess) return true;
    if (lost(r)) {
      mark_lost(g, kMetricInfo[m].what);
      gone = true;
    } else if (permanent(r) || (r == kErrorInvalidArgument && (bit(m) & kFieldMetrics))) {
      refuse(g, m, r);  // an unknown field id (older driver) is refused as INVALID_ARGUMENT
    } else if (err.empty()) {
      err = "gpu/" + std::to_string(g.index) + ": " + kMetricInfo[m].what + ": " + return_name(r);
    }
    return false;
  }

  void build_request(Gpu& g, uint32_t refused) {
    g.nreq = 0;
    for (int i = 0; i < kNumFields; ++i)
      if (!(refused & bit(kFields[i].metric))) g.req_field[g.nreq++] = i;
    g.req_mask = refused & kFieldMetrics;
  }

  void read(Gpu& g, int64_t now, double* o, std::string& err) {
    fill_nan(o, kPerDevice);
    if (g.state->lost.load(std::memory_order_acquire)) return;
    const Library& l = *lib_;
    uint32_t refused = g.state->refused.load(std::memory_order_acquire);
    bool gone = false;
    auto asked = [&](Metric m) { return !(refused & bit(m)); };
    auto refresh = [&] { refused = g.state->refused.load(std::memory_order_acquire); };

    // 1. Everything field values can serve, in one call.
    if ((refused & kFieldMetrics) != g.req_mask) build_request(g, refused);
    if (g.nreq > 0) {
      for (int i = 0; i < g.nreq; ++i) {  // the driver writes into the entries: reset them
        std::memset(&g.req[i], 0, sizeof(FieldValue));
        g.req[i].fieldId = kFields[g.req_field[i]].id;
        g.req[i].scopeId = kFields[g.req_field[i]].scope;
      }
      Return r = l.get_fields(g.handle, g.nreq, g.req);
      if (lost(r)) {
        mark_lost(g, "nvmlDeviceGetFieldValues");
        return fill_nan(o, kPerDevice);
      }
      if (permanent(r)) {  // the call itself is refused: each field falls back or reads NaN
        for (int i = 0; i < g.nreq; ++i) refuse(g, kFields[g.req_field[i]].metric, r);
      } else if (r != kSuccess) {
        if (err.empty()) err = "gpu/" + std::to_string(g.index) + ": nvmlDeviceGetFieldValues: " + return_name(r);
      } else {
        for (int i = 0; i < g.nreq; ++i) {
          const FieldValue& f = g.req[i];
          Metric m = kFields[g.req_field[i]].metric;
          if (!ok(g, m, f.nvmlReturn, gone, err)) continue;
          uint64_t v = 0;
          switch (m) {
            case mPowerField: o[kPower] = as_double(f) / 1000.0; break;
            case mEnergyField:
              if (as_counter(f, v)) o[kEnergy] = double(v) / 1000.0, o[kEnergyPower] = g.energy.update(v, now);
              break;
            case mPcieTx: if (as_counter(f, v)) o[kPcieTx] = g.pcie_tx.update(v, now); break;
            case mPcieRx: if (as_counter(f, v)) o[kPcieRx] = g.pcie_rx.update(v, now); break;
            case mNvlinkTx: if (as_counter(f, v)) o[kNvlinkTx] = g.nvlink_tx.update(v * 1024, now); break;
            case mNvlinkRx: if (as_counter(f, v)) o[kNvlinkRx] = g.nvlink_rx.update(v * 1024, now); break;
            default: break;
          }
        }
        if (gone) return fill_nan(o, kPerDevice);
      }
      refresh();
    }

    // 2. Getters without a field id, and the fallbacks of refused fields.
    if (asked(mUtil)) {
      Utilization u;
      if (ok(g, mUtil, l.get_util(g.handle, &u), gone, err)) o[kUtil] = u.gpu, o[kMemUtil] = u.memory;
      if (gone) return fill_nan(o, kPerDevice);
    }
    bool mem = false;
    if (asked(mMemV2)) {
      MemoryV2 m;
      std::memset(&m, 0, sizeof m);
      m.version = kMemoryV2Version;
      if (ok(g, mMemV2, l.get_mem_v2(g.handle, &m), gone, err)) {
        o[kMemUsed] = double(m.used), o[kMemTotal] = double(m.total), o[kMemFree] = double(m.free);
        o[kMemReserved] = double(m.reserved);
        mem = true;
      }
      if (gone) return fill_nan(o, kPerDevice);
      refresh();
    }
    if (!mem && !asked(mMemV2) && asked(mMemV1)) {
      MemoryV1 m;
      if (ok(g, mMemV1, l.get_mem_v1(g.handle, &m), gone, err))
        o[kMemUsed] = double(m.used), o[kMemTotal] = double(m.total), o[kMemFree] = double(m.free);
      if (gone) return fill_nan(o, kPerDevice);
    }
    if (!asked(mPowerField) && asked(mPowerUsage)) {
      unsigned mw;
      if (ok(g, mPowerUsage, l.get_power(g.handle, &mw), gone, err)) o[kPower] = mw / 1000.0;
      if (gone) return fill_nan(o, kPerDevice);
    }
    if (!asked(mEnergyField) && asked(mEnergyFn)) {
      unsigned long long mj;
      if (ok(g, mEnergyFn, l.get_energy(g.handle, &mj), gone, err))
        o[kEnergy] = double(mj) / 1000.0, o[kEnergyPower] = g.energy.update(mj, now);
      if (gone) return fill_nan(o, kPerDevice);
    }
    bool temp = false;
    if (asked(mTempV)) {
      TemperatureV1 t;
      std::memset(&t, 0, sizeof t);
      t.version = kTemperatureV1Version;
      t.sensorType = kTemperatureGpu;
      if (ok(g, mTempV, l.get_temp_v(g.handle, &t), gone, err)) o[kTemp] = t.temperature, temp = true;
      if (gone) return fill_nan(o, kPerDevice);
      refresh();
    }
    if (!temp && !asked(mTempV) && asked(mTemp)) {
      unsigned c;
      if (ok(g, mTemp, l.get_temp(g.handle, kTemperatureGpu, &c), gone, err)) o[kTemp] = c;
      if (gone) return fill_nan(o, kPerDevice);
    }
    if (asked(mSmClock)) {
      unsigned mhz;
      if (ok(g, mSmClock, l.get_clock(g.handle, kClockSm, &mhz), gone, err)) o[kSmClock] = mhz * 1e6;
      if (gone) return fill_nan(o, kPerDevice);
    }
    if (asked(mMemClock)) {
      unsigned mhz;
      if (ok(g, mMemClock, l.get_clock(g.handle, kClockMem, &mhz), gone, err)) o[kMemClock] = mhz * 1e6;
      if (gone) return fill_nan(o, kPerDevice);
    }
  }

  std::shared_ptr<Library> lib_;
  std::vector<Gpu> gpus_;
  std::atomic<uint64_t> stop_gen_{0};
  uint64_t seen_notes_ = 0;
};

}  // namespace

std::unique_ptr<Source> make_nvml_source() { return std::make_unique<NvmlSource>(); }

}  // namespace sysprof
