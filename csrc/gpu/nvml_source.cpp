// gpu: NVML on a reader thread of its own, loaded with dlopen so that nothing links against NVIDIA.
//
// A driver in a bad state can block an NVML call for seconds. So every NVML call (dlopen, nvmlInit,
// discovery, the reads, nvmlShutdown) runs on one reader thread, owned by the source and shared with
// its clones; sample() on the sampler's thread only copies the latest reading the reader published
// (two slots, each with a sequence number: no lock) and never waits for NVML. Rules:
// - open() waits at most kOpenWaitNs for the device layout (count and handles); without it the source
//   is left out, naming the call that is blocked. With the layout but no first reading yet, the
//   channels are laid out and read NaN until the reader catches up.
// - A reading older than the interval + kLateNs reads NaN; a call in flight for longer than kLateNs
//   is named in err (with how long), and the call's return once it comes back.
// - The reader reads every interval while the sampler thread asked within the last 2 intervals +
//   kLateNs, and sleeps otherwise; a clone's sample() (Sampler::sample_now) asks for one fresh
//   reading and waits at most kSyncWaitNs for it, not at all while a call is blocked.
// - The last owner stops the reader and waits at most kExitWaitNs (0 while a call is blocked), then
//   abandons it; the reader calls nvmlShutdown itself after its last call returned, so shutdown never
//   overlaps a call.
//
// Per device and reading: one nvmlDeviceGetFieldValues call for everything it can serve (instant
// power, energy, PCIe and NVLink byte counters; each entry's own return code checked), then the
// getters that have no field id (utilization, memory, temperature, clocks) and the fallbacks of fields
// a device refused. NOT_SUPPORTED, NO_PERMISSION and FUNCTION_NOT_FOUND are permanent answers: they
// are remembered per (device, metric) and never asked again. GPU_IS_LOST retires the device (NaN from
// then on) without touching the others.
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "gpu/nvml_abi.hpp"
#include "derive/rules.hpp"
#include "sources/registry.hpp"
#include "sources/source.hpp"

namespace sysprof {
namespace {

using namespace nvml;

constexpr const char* kDefaultLibrary = "libnvidia-ml.so.1";
constexpr int64_t kOpenWaitNs = 1500000000;  // open() waits this long for the device layout
constexpr int64_t kLateNs = 250000000;  // a call in flight longer is "blocked"; readings older than interval + this read NaN
constexpr int64_t kSyncWaitNs = 2000000000;  // a clone's sample() waits at most this long for a fresh reading
constexpr int64_t kExitWaitNs = 1000000000;  // the last owner waits at most this long for the reader to end
constexpr int64_t kNever = INT64_MIN / 4;  // a time long past, safe to subtract from

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

// The loaded library. Used by the reader thread only.
struct Library {
  void* handle = nullptr;
  InitFn init = nullptr;
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

// dlopen and dlsym; nvmlInit_v2 is left to the caller (so that it can be timed).
bool load_library(Library& lib, std::string& err) {
  const char* env = std::getenv("SYSPROF_NVML_LIBRARY");
  std::string path = env && *env ? env : kDefaultLibrary;
  lib.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib.handle) {
    const char* why = dlerror();
    err = "NVML library not loadable (" + path + "): " + (why ? why : "dlopen failed") +
          (env && *env ? "" : "; no NVIDIA driver installed? SYSPROF_NVML_LIBRARY names another path");
    return false;
  }
  void* h = lib.handle;
  lib.init = symbol<InitFn>(h, "nvmlInit_v2");
  lib.shutdown = symbol<ShutdownFn>(h, "nvmlShutdown");
  lib.get_count = symbol<GetCountFn>(h, "nvmlDeviceGetCount_v2");
  lib.get_handle = symbol<GetHandleByIndexFn>(h, "nvmlDeviceGetHandleByIndex_v2");
  if (!lib.init || !lib.shutdown || !lib.get_count || !lib.get_handle) {
    err = path + " lacks nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2 or nvmlDeviceGetHandleByIndex_v2 "
          "(driver too old)";
    return false;
  }
  // Optional: a missing one disables its metric only.
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
  return true;
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

struct Gpu {
  unsigned index = 0;
  Device handle = nullptr;
  uint32_t refused = 0;  // Metric bits answered permanently
  bool lost = false;
  std::map<std::string, std::string> info;
  // The field request, rebuilt (in place) when a field is refused.
  FieldValue req[kNumFields];
  int req_field[kNumFields];  // index into kFields
  int nreq = 0;
  uint32_t req_mask = ~uint32_t(0);  // refused bits the request was built for; ~0: not built
  RateCounter pcie_tx, pcie_rx, nvlink_tx, nvlink_rx;
  EnergyPower energy;
};

// The latest reading in two slots: the writer fills the unpublished one, then publishes it. A slot's
// sequence number is odd while it is written; a copy that saw it change is retried. No lock: the
// writer never waits, and a copy only retries when the writer lapped it (twice in one copy).
class Published {
 public:
  void init(size_t width) {
    for (Slot& s : slots_) s.v.reset(new std::atomic<double>[width]());
    width_ = width;
  }
  void publish(int64_t t, const double* v) {  // one writer
    int w = latest_.load(std::memory_order_relaxed) ^ 1;
    Slot& s = slots_[w];
    uint64_t q = s.seq.load(std::memory_order_relaxed);
    s.seq.store(q + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    s.t.store(t, std::memory_order_relaxed);
    for (size_t i = 0; i < width_; ++i) s.v[i].store(v[i], std::memory_order_relaxed);
    s.seq.store(q + 2, std::memory_order_release);
    latest_.store(w, std::memory_order_release);
  }
  // The latest reading and the time it was begun; false when none could be copied.
  bool copy(double* out, int64_t& t) const {
    for (int attempt = 0; attempt < 4; ++attempt) {
      const Slot& s = slots_[latest_.load(std::memory_order_acquire)];
      uint64_t q = s.seq.load(std::memory_order_acquire);
      if (q & 1) continue;
      t = s.t.load(std::memory_order_relaxed);
      for (size_t i = 0; i < width_; ++i) out[i] = s.v[i].load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (s.seq.load(std::memory_order_relaxed) == q) return true;
    }
    return false;
  }
  int64_t time() const { return slots_[latest_.load(std::memory_order_acquire)].t.load(std::memory_order_acquire); }

 private:
  struct Slot {
    std::atomic<uint64_t> seq{0};
    std::atomic<int64_t> t{kNever};
    std::unique_ptr<std::atomic<double>[]> v;
  };
  Slot slots_[2];
  std::atomic<int> latest_{0};
  size_t width_ = 0;
};

enum Phase { kLoading, kLayout, kReady, kFailed };

// "gpu/<dev>: <what>" or "<what>" for a call that concerns no device.
void label(char* buf, size_t cap, const char* what, int dev) {
  if (dev >= 0)
    std::snprintf(buf, cap, "gpu/%d: %s", dev, what);
  else
    std::snprintf(buf, cap, "%s", what);
}

// The reader thread's state: the library, the devices, the published reading, the call in flight.
// NVML is called from main() only, that is from the reader thread.
class Reader {
 public:
  explicit Reader(int64_t interval_ns)
      : interval_(std::max<int64_t>(interval_ns, 1)), keep_(2 * interval_ + kLateNs) {}

  // ---- the reader thread
  void main() {
    sigset_t all;  // process signals go to other threads, not to one that may sit in the driver
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    pthread_setname_np(pthread_self(), "sysprof-nvml");
    try {
      if (discover() && describe()) {
        read_all(mono_now_ns());  // rates and the energy power start from here
        set_phase(kReady);
        loop();
      }
    } catch (const std::exception& e) {
      fail(std::string("GPU reader stopped: ") + e.what());
    } catch (...) {
      fail("GPU reader stopped by an unknown exception");
    }
    if (lib_.initialized) timed("nvmlShutdown", -1, [&] { return lib_.shutdown(); });  // no other call can be in flight
    if (lib_.handle) dlclose(lib_.handle);
    std::lock_guard<std::mutex> g(mu_);
    done_ = true;
    state_cv_.notify_all();
    published_cv_.notify_all();
  }

  // ---- any thread
  // Waits until the reader is ready or failed, or the deadline; returns the phase.
  int wait_phase(int64_t deadline) {
    std::unique_lock<std::mutex> lk(mu_);
    state_cv_.wait_until(lk, time_point(deadline), [&] {
      int p = phase_.load(std::memory_order_relaxed);
      return p == kReady || p == kFailed;
    });
    return phase_.load(std::memory_order_relaxed);
  }
  std::string failure() {
    std::lock_guard<std::mutex> g(mu_);
    return failure_;
  }
  int phase() const { return phase_.load(std::memory_order_acquire); }
  // NVML indices of the devices; valid from kLayout on (the list never changes after).
  std::vector<unsigned> indices() const {
    std::vector<unsigned> v;
    for (const Gpu& g : gpus_) v.push_back(g.index);
    return v;
  }
  std::vector<std::map<std::string, std::string>> devices() const {
    std::vector<std::map<std::string, std::string>> out;
    bool described = phase() == kReady;
    for (const Gpu& g : gpus_) {
      if (described) {
        out.push_back(g.info);
      } else {
        out.push_back({{"index", std::to_string(g.index)}, {"name", ""}, {"uuid", ""}, {"pci_bus_id", ""}});
      }
    }
    return out;
  }

  // The call in flight: what, device (-1: none) and since when (CLOCK_MONOTONIC). False: none.
  bool in_flight(const char*& what, int& dev, int64_t& since) const {
    since = call_since_.load(std::memory_order_acquire);
    if (!since) return false;
    what = call_what_.load(std::memory_order_relaxed);
    dev = call_dev_.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    return what && call_since_.load(std::memory_order_relaxed) == since;
  }
  int64_t blocked_ns(int64_t now) const {
    const char* what;
    int dev;
    int64_t since;
    return in_flight(what, dev, since) ? now - since : 0;
  }
  // "gpu/0: nvmlDeviceGetName blocked for 1.5 s<tail>", or a generic message when no call is in flight.
  std::string blocked_message(int64_t now, const char* tail) const {
    const char* what;
    int dev;
    int64_t since;
    char buf[160];
    if (!in_flight(what, dev, since)) return std::string("GPU discovery did not finish within 1.5 s") + tail;
    label(buf, sizeof buf, what, dev);
    char secs[32];
    std::snprintf(secs, sizeof secs, " blocked for %.1f s", double((now - since) / 100000000) / 10.0);
    return std::string(buf) + secs + tail;
  }

  // The sampler thread wants readings: read every interval from now on (wakes an idle reader).
  void want(int64_t mono_ns) {
    demand_.store(mono_ns, std::memory_order_seq_cst);
    if (idle_.load(std::memory_order_seq_cst)) {  // rare: the first tick after an idle spell
      std::lock_guard<std::mutex> g(mu_);
      cv_.notify_one();
    }
  }
  // Asks for a reading begun at or after `since` and waits for it: at most kSyncWaitNs, and not
  // while a call is blocked.
  void request(int64_t since) {
    std::unique_lock<std::mutex> lk(mu_);
    sync_want_ = std::max(sync_want_, since);
    cv_.notify_one();
    ++waiters_;
    for (;;) {
      if (published_.time() >= since || done_) break;
      int64_t now = mono_now_ns();
      if (now - since >= kSyncWaitNs || blocked_ns(now) > kLateNs) break;
      published_cv_.wait_for(lk, std::chrono::milliseconds(10));
    }
    --waiters_;
  }
  bool copy(double* out, int64_t& t) const { return published_.copy(out, t); }

  // Lets the reader go; waits at most wait_ns for it to end (not at all while a call is blocked).
  bool stop(int64_t wait_ns) {
    std::unique_lock<std::mutex> lk(mu_);
    quit_.store(true, std::memory_order_relaxed);
    cv_.notify_all();
    if (blocked_ns(mono_now_ns()) > kLateNs) wait_ns = 0;
    return state_cv_.wait_for(lk, std::chrono::nanoseconds(wait_ns), [&] { return done_; });
  }

  // Messages, each with a version that changes when it does.
  uint64_t notes_version() const { return notes_version_.load(std::memory_order_acquire); }
  uint64_t slow_version() const { return slow_version_.load(std::memory_order_acquire); }
  uint64_t error_version() const { return error_version_.load(std::memory_order_acquire); }
  std::string notes() const {
    std::lock_guard<std::mutex> g(msg_mu_);
    return notes_;
  }
  std::string slow() const {
    std::lock_guard<std::mutex> g(msg_mu_);
    return slow_;
  }
  std::string error() const {
    std::lock_guard<std::mutex> g(msg_mu_);
    return error_;
  }

 private:
  static std::chrono::steady_clock::time_point time_point(int64_t mono_ns) {
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(mono_ns));
  }

  void set_phase(int p) {
    std::lock_guard<std::mutex> g(mu_);
    phase_.store(p, std::memory_order_release);
    state_cv_.notify_all();
  }
  // Before the layout: open() reports `msg` and leaves the source out. After: a note.
  void fail(const std::string& msg) {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (phase_.load(std::memory_order_relaxed) == kLoading) {
        failure_ = msg;
        phase_.store(kFailed, std::memory_order_release);
        state_cv_.notify_all();
        return;
      }
    }
    note(msg);
  }
  void note(const std::string& msg) {
    std::lock_guard<std::mutex> g(msg_mu_);
    if (!notes_.empty()) notes_ += "; ";
    notes_ += msg;
    notes_version_.fetch_add(1, std::memory_order_release);
  }

  // Every NVML call goes through here, so that the other threads can see what is in flight.
  template <class F>
  Return timed(const char* what, int dev, F&& f) {
    std::atomic_thread_fence(std::memory_order_release);  // see in_flight(): call_since_ is the sequence
    call_what_.store(what, std::memory_order_relaxed);
    call_dev_.store(dev, std::memory_order_relaxed);
    int64_t since = mono_now_ns();
    call_since_.store(since, std::memory_order_release);
    Return r = f();
    int64_t took = mono_now_ns() - since;
    call_since_.store(0, std::memory_order_release);
    if (took > kLateNs) {  // rare: say that it came back, and after how long
      char buf[160], secs[48];
      label(buf, sizeof buf, what, dev);
      std::snprintf(secs, sizeof secs, " returned after %.1f s", double(took / 100000000) / 10.0);
      std::lock_guard<std::mutex> g(msg_mu_);
      slow_ = std::string(buf) + secs;
      slow_version_.fetch_add(1, std::memory_order_release);
    }
    return r;
  }

  bool discover() {
    std::string err;
    bool loaded = false;
    timed("dlopen", -1, [&] {
      loaded = load_library(lib_, err);
      return kSuccess;
    });
    if (!loaded) return fail(err), false;
    Return r = timed("nvmlInit_v2", -1, [&] { return lib_.init(); });
    if (r != kSuccess) return fail(std::string("nvmlInit_v2 failed: ") + return_name(r) + init_hint(r)), false;
    lib_.initialized = true;
    unsigned count = 0;
    r = timed("nvmlDeviceGetCount_v2", -1, [&] { return lib_.get_count(&count); });
    if (r != kSuccess) return fail(std::string("nvmlDeviceGetCount_v2 failed: ") + return_name(r)), false;
    if (count == 0) return fail("NVML found no GPU"), false;
    gpus_.reserve(count);  // never reallocated: other threads read the indices from kLayout on
    std::string skipped;
    for (unsigned i = 0; i < count; ++i) {
      if (quit_.load(std::memory_order_relaxed)) return false;
      Device h = nullptr;
      r = timed("nvmlDeviceGetHandleByIndex_v2", int(i), [&] { return lib_.get_handle(i, &h); });
      if (r != kSuccess) {  // e.g. NO_PERMISSION for a GPU this container may not see
        skipped += (skipped.empty() ? "" : "; ") + std::string("gpu/") + std::to_string(i) +
                   ": nvmlDeviceGetHandleByIndex_v2 " + return_name(r) + "; left out";
        continue;
      }
      gpus_.emplace_back();
      Gpu& g = gpus_.back();
      g.index = i;
      g.handle = h;
      for (int m = 0; m < kMetrics; ++m)
        if (!available(Metric(m))) refuse(g, Metric(m), kErrorFunctionNotFound);
    }
    if (gpus_.empty()) return fail(skipped.empty() ? "NVML found no usable GPU" : skipped), false;
    if (!skipped.empty()) note(skipped);
    published_.init(gpus_.size() * kPerDevice);
    scratch_.assign(gpus_.size() * kPerDevice, kNaN);
    error_.reserve(256);
    tick_error_.reserve(256);
    set_phase(kLayout);
    return true;
  }

  bool describe() {
    for (Gpu& g : gpus_) {
      if (quit_.load(std::memory_order_relaxed)) return false;
      const int i = int(g.index);
      std::map<std::string, std::string> d{{"index", std::to_string(i)}, {"name", ""}, {"uuid", ""}, {"pci_bus_id", ""}};
      char buf[kNameBufferSize > kUuidBufferSize ? kNameBufferSize : kUuidBufferSize];
      if (lib_.get_name && timed("nvmlDeviceGetName", i, [&] { return lib_.get_name(g.handle, buf, kNameBufferSize); }) == kSuccess)
        d["name"] = cstr(buf, kNameBufferSize);
      if (lib_.get_uuid && timed("nvmlDeviceGetUUID", i, [&] { return lib_.get_uuid(g.handle, buf, kUuidBufferSize); }) == kSuccess)
        d["uuid"] = cstr(buf, kUuidBufferSize);
      PciInfo pci;
      std::memset(&pci, 0, sizeof pci);
      if (lib_.get_pci && timed("nvmlDeviceGetPciInfo_v3", i, [&] { return lib_.get_pci(g.handle, &pci); }) == kSuccess)
        d["pci_bus_id"] = cstr(pci.busId, sizeof pci.busId);
      g.info = std::move(d);
    }
    return !quit_.load(std::memory_order_relaxed);
  }
  static std::string cstr(const char* p, size_t cap) { return std::string(p, strnlen(p, cap)); }

  // Reads every interval while the sampler thread wants readings, once per request(), else sleeps.
  void loop() {
    std::unique_lock<std::mutex> lk(mu_);
    int64_t next = kNever;
    for (;;) {
      if (quit_.load(std::memory_order_relaxed)) return;
      int64_t now = mono_now_ns();
      if (sync_want_ <= last_start_) {
        if (now - demand_.load(std::memory_order_seq_cst) < keep_) {
          if (now < next) {
            cv_.wait_until(lk, time_point(next));
            continue;
          }
        } else {  // nobody wants readings: sleep until want(), request() or stop()
          idle_.store(true, std::memory_order_seq_cst);
          if (mono_now_ns() - demand_.load(std::memory_order_seq_cst) >= keep_ && !quit_.load(std::memory_order_relaxed) &&
              sync_want_ <= last_start_)
            cv_.wait(lk);
          idle_.store(false, std::memory_order_seq_cst);
          continue;
        }
      }
      last_start_ = now;
      lk.unlock();
      read_all(now);
      lk.lock();
      if (waiters_) published_cv_.notify_all();
      next = next + interval_ > now ? next + interval_ : now + interval_;  // absolute deadlines; none made up
    }
  }

  // One reading of every device, published. Allocates nothing unless an error is new.
  void read_all(int64_t now) {
    tick_error_.clear();
    for (size_t i = 0; i < gpus_.size(); ++i) read(gpus_[i], now, scratch_.data() + i * kPerDevice, tick_error_);
    published_.publish(now, scratch_.data());
    if (tick_error_ != last_tick_error_) {
      last_tick_error_ = tick_error_;
      std::lock_guard<std::mutex> g(msg_mu_);
      error_ = tick_error_;
      error_version_.fetch_add(1, std::memory_order_release);
    }
  }

  bool available(Metric m) const {
    const Library& l = lib_;
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


  // Remembers a permanent refusal; notes it when a channel is left without a source.
  void refuse(Gpu& g, Metric m, Return r) {
    if (g.refused & bit(m)) return;
    g.refused |= bit(m);
    const MetricInfo& mi = kMetricInfo[m];
    if (mi.fallback >= 0 && !(g.refused & bit(mi.fallback))) return;
    note("gpu/" + std::to_string(g.index) + ": " + mi.channels + " read NaN (" + mi.what + ": " +
               return_name(r) + ")");
  }

  void mark_lost(Gpu& g, const char* what) {
    if (g.lost) return;
    g.lost = true;
    note("gpu/" + std::to_string(g.index) + ": lost (" + what + ": NVML_ERROR_GPU_IS_LOST or RESET_REQUIRED); " +
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

  template <class F>
  Return ask(const Gpu& g, Metric m, F&& f) {
    return timed(kMetricInfo[m].what, int(g.index), f);
  }

  void build_request(Gpu& g, uint32_t refused) {
    g.nreq = 0;
    for (int i = 0; i < kNumFields; ++i)
      if (!(refused & bit(kFields[i].metric))) g.req_field[g.nreq++] = i;
    g.req_mask = refused & kFieldMetrics;
  }

  void read(Gpu& g, int64_t now, double* o, std::string& err) {
    fill_nan(o, kPerDevice);
    if (g.lost) return;
    const Library& l = lib_;
    uint32_t refused = g.refused;
    bool gone = false;
    auto asked = [&](Metric m) { return !(refused & bit(m)); };
    auto refresh = [&] { refused = g.refused; };

    // 1. Everything field values can serve, in one call.
    if ((refused & kFieldMetrics) != g.req_mask) build_request(g, refused);
    if (g.nreq > 0) {
      for (int i = 0; i < g.nreq; ++i) {  // the driver writes into the entries: reset them
        std::memset(&g.req[i], 0, sizeof(FieldValue));
        g.req[i].fieldId = kFields[g.req_field[i]].id;
        g.req[i].scopeId = kFields[g.req_field[i]].scope;
      }
      Return r = timed("nvmlDeviceGetFieldValues", int(g.index), [&] { return l.get_fields(g.handle, g.nreq, g.req); });
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
      if (ok(g, mUtil, ask(g, mUtil, [&] { return l.get_util(g.handle, &u); }), gone, err)) o[kUtil] = u.gpu, o[kMemUtil] = u.memory;
      if (gone) return fill_nan(o, kPerDevice);
    }
    bool mem = false;
    if (asked(mMemV2)) {
      MemoryV2 m;
      std::memset(&m, 0, sizeof m);
      m.version = kMemoryV2Version;
      if (ok(g, mMemV2, ask(g, mMemV2, [&] { return l.get_mem_v2(g.handle, &m); }), gone, err)) {
        o[kMemUsed] = double(m.used), o[kMemTotal] = double(m.total), o[kMemFree] = double(m.free);
        o[kMemReserved] = double(m.reserved);
        mem = true;
      }
      if (gone) return fill_nan(o, kPerDevice);
      refresh();
    }
    if (!mem && !asked(mMemV2) && asked(mMemV1)) {
      MemoryV1 m;
      if (ok(g, mMemV1, ask(g, mMemV1, [&] { return l.get_mem_v1(g.handle, &m); }), gone, err))
        o[kMemUsed] = double(m.used), o[kMemTotal] = double(m.total), o[kMemFree] = double(m.free);
      if (gone) return fill_nan(o, kPerDevice);
    }
    if (!asked(mPowerField) && asked(mPowerUsage)) {
      unsigned mw;
      if (ok(g, mPowerUsage, ask(g, mPowerUsage, [&] { return l.get_power(g.handle, &mw); }), gone, err)) o[kPower] = mw / 1000.0;
      if (gone) return fill_nan(o, kPerDevice);
    }
    if (!asked(mEnergyField) && asked(mEnergyFn)) {
      unsigned long long mj;
      if (ok(g, mEnergyFn, ask(g, mEnergyFn, [&] { return l.get_energy(g.handle, &mj); }), gone, err))
        o[kEnergy] = double(mj) / 1000.0, o[kEnergyPower] = g.energy.update(mj, now);
      if (gone) return fill_nan(o, kPerDevice);
    }
    bool temp = false;
    if (asked(mTempV)) {
      TemperatureV1 t;
      std::memset(&t, 0, sizeof t);
      t.version = kTemperatureV1Version;
      t.sensorType = kTemperatureGpu;
      if (ok(g, mTempV, ask(g, mTempV, [&] { return l.get_temp_v(g.handle, &t); }), gone, err)) o[kTemp] = t.temperature, temp = true;
      if (gone) return fill_nan(o, kPerDevice);
      refresh();
    }
    if (!temp && !asked(mTempV) && asked(mTemp)) {
      unsigned c;
      if (ok(g, mTemp, ask(g, mTemp, [&] { return l.get_temp(g.handle, kTemperatureGpu, &c); }), gone, err)) o[kTemp] = c;
      if (gone) return fill_nan(o, kPerDevice);
    }
    if (asked(mSmClock)) {
      unsigned mhz;
      if (ok(g, mSmClock, ask(g, mSmClock, [&] { return l.get_clock(g.handle, kClockSm, &mhz); }), gone, err)) o[kSmClock] = mhz * 1e6;
      if (gone) return fill_nan(o, kPerDevice);
    }
    if (asked(mMemClock)) {
      unsigned mhz;
      if (ok(g, mMemClock, ask(g, mMemClock, [&] { return l.get_clock(g.handle, kClockMem, &mhz); }), gone, err)) o[kMemClock] = mhz * 1e6;
      if (gone) return fill_nan(o, kPerDevice);
    }
  }


  const int64_t interval_, keep_;
  Library lib_;
  std::vector<Gpu> gpus_;
  std::vector<double> scratch_;  // the reading being taken
  std::string tick_error_, last_tick_error_;
  Published published_;

  std::atomic<int> phase_{kLoading};
  std::atomic<bool> quit_{false};
  std::atomic<bool> idle_{false};
  std::atomic<int64_t> demand_{kNever};  // the sampler thread's latest tick
  std::atomic<const char*> call_what_{nullptr};
  std::atomic<int> call_dev_{-1};
  std::atomic<int64_t> call_since_{0};  // 0: no call in flight

  // Never held during an NVML call.
  mutable std::mutex mu_;
  std::condition_variable cv_;  // wakes the reader: want() after idling, request(), stop()
  std::condition_variable state_cv_;  // phase changes, done
  std::condition_variable published_cv_;  // a reading was published while request() waits
  std::string failure_;
  int64_t sync_want_ = kNever, last_start_ = kNever;
  int waiters_ = 0;
  bool done_ = false;

  mutable std::mutex msg_mu_;
  std::string notes_, slow_, error_;  // permanent conditions; the latest slow call; the latest reading's error
  std::atomic<uint64_t> notes_version_{0}, slow_version_{0}, error_version_{0};
};

// Owns the reader thread; shared by a source and its clones, the last of which lets it go.
struct ReaderOwner {
  std::shared_ptr<Reader> reader;
  std::unique_ptr<std::thread> thread;
  uint64_t generation = fork_generation();
  int64_t wait_ns = kExitWaitNs;

  ~ReaderOwner() {
    if (!thread) return;
    if (fork_generation() != generation) {  // a forked child: the thread is the parent's, not here
      (void)thread.release();
      return;
    }
    if (reader->stop(wait_ns))
      thread->join();
    else
      thread->detach();  // stuck in NVML: it shuts NVML down and ends when the call returns
  }
};

class NvmlSource final : public Source {
 public:
  const char* name() const override { return "gpu"; }

  bool open(const Config& cfg, std::vector<std::string>& channels, std::string& err) override {
    auto owner = std::make_shared<ReaderOwner>();
    owner->reader = std::make_shared<Reader>(cfg.interval_ns);
    std::shared_ptr<Reader> r = owner->reader;
    try {
      owner->thread.reset(new std::thread([r] { r->main(); }));
    } catch (const std::exception& e) {
      err = std::string("GPU reader thread not started: ") + e.what();
      return false;
    }
    owner_ = owner;
    r_ = r.get();
    int phase = r->wait_phase(mono_now_ns() + kOpenWaitNs);
    if (phase == kFailed) {
      err = r->failure();
      return false;
    }
    if (phase == kLoading) {
      err = r->blocked_message(mono_now_ns(), " at open; gpu source left out (its thread ends when the call returns)");
      owner->wait_ns = 0;
      return false;
    }
    std::vector<unsigned> idx = r->indices();
    for (unsigned i : idx)
      for (const char* c : kChannelNames) channels.push_back("gpu/" + std::to_string(i) + "/" + c);
    width_ = idx.size() * kPerDevice;
    late_ns_ = cfg.interval_ns + kLateNs;
    remember_versions();
    err = r->notes();
    if (phase == kLayout) {
      std::string b = r->blocked_message(mono_now_ns(), " at open; gpu channels read NaN until it returns");
      err = err.empty() ? b : b + "; " + err;
    }
    return true;
  }

  // Shares the reader: a clone never calls NVML. Its sample() asks for a fresh reading and waits
  // for it (bounded), where the original's only takes the latest.
  std::unique_ptr<Source> clone(const Config&, std::string& err) const override {
    if (!owner_) {
      err = "gpu source was not opened";
      return nullptr;
    }
    auto s = std::make_unique<NvmlSource>();
    s->owner_ = owner_;
    s->r_ = r_;
    s->width_ = width_;
    s->late_ns_ = late_ns_;
    s->sync_ = true;
    s->remember_versions();
    return s;
  }

  bool sample(int64_t mono_ns, double* out, std::string& err) override {
    int64_t now = mono_ns;
    if (sync_) {
      now = mono_now_ns();
      r_->request(now);
    } else {
      r_->want(mono_ns);
    }
    int64_t t;
    if (!r_->copy(out, t) || now - t > late_ns_) fill_nan(out, width_);  // late: NaN
    report(now, err);
    return err.empty();
  }

  std::vector<std::map<std::string, std::string>> devices() const override {
    return r_ ? r_->devices() : std::vector<std::map<std::string, std::string>>{};
  }

 private:
  void remember_versions() {
    seen_notes_ = r_->notes_version();
    seen_slow_ = r_->slow_version();
    seen_error_ = r_->error_version();
  }

  // err: the call blocked now (rebuilt in 0.1 s steps), else what changed: a slow call that
  // returned, the latest reading's error, the notes.
  void report(int64_t now, std::string& err) {
    const char* what;
    int dev;
    int64_t since;
    if (r_->in_flight(what, dev, since) && now - since > kLateNs) {
      int64_t step = (now - since) / 100000000;
      if (what != shown_what_ || dev != shown_dev_ || since != shown_since_ || step != shown_step_) {
        shown_what_ = what, shown_dev_ = dev, shown_since_ = since, shown_step_ = step;
        char who[160];
        label(who, sizeof who, what, dev);
        std::snprintf(msg_, sizeof msg_, "%s blocked for %.1f s; gpu readings older than %lld ms read NaN", who,
                      double(step) / 10.0, (long long)(late_ns_ / 1000000));
      }
      err.assign(msg_);
      return;
    }
    uint64_t v = r_->slow_version();
    if (v != seen_slow_) {
      seen_slow_ = v;
      err = r_->slow();
      std::string notes = r_->notes();
      if (!notes.empty()) err += "; " + notes;
      return;
    }
    v = r_->error_version();
    if (v != seen_error_) {
      seen_error_ = v;
      err = r_->error();
      if (!err.empty()) return;
    }
    v = r_->notes_version();
    if (v != seen_notes_) {
      seen_notes_ = v;
      err = r_->notes();
    }
  }

  std::shared_ptr<ReaderOwner> owner_;
  Reader* r_ = nullptr;
  bool sync_ = false;
  int64_t late_ns_ = kLateNs;
  uint64_t seen_notes_ = 0, seen_slow_ = 0, seen_error_ = 0;
  const char* shown_what_ = nullptr;
  int shown_dev_ = -1;
  int64_t shown_since_ = 0, shown_step_ = -1;
  char msg_[256] = {};
};

}  // namespace

std::unique_ptr<Source> make_nvml_source() { return std::make_unique<NvmlSource>(); }

SYSPROF_SOURCE(gpu, make_nvml_source);

}  // namespace sysprof
