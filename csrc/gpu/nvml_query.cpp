// gpu: the NVML call of each metric and the one query path (see nvml_query.hpp).
#include "gpu/nvml_query.hpp"

#include <climits>
#include <cstring>

#include "gpu/nvml_events.hpp"
#include "gpu/nvml_gpm.hpp"
#include "sources/source.hpp"

namespace sysprof {
namespace nvml {

// The per-device channels in Channel's order are the registry's first kPerDevice gpu rows (gen/gpu_metrics.hpp
// and gen/channels.hpp, both generated from the registry).
static_assert(kPerDevice + kEventChannels + 1 == kGpuChannels,
              "Channel, the XID channels and the reading time are the registry's gpu rows (registry.py, _gpu())");

namespace {

// ---- the getters: one NVML call each, the answer as raw values
Return get_util(const Library& l, Device h, Raw& r) {
  Utilization u{};
  Return e = l.get_util(h, &u);
  r.v[0] = u.gpu, r.v[1] = u.memory;
  return e;
}
Return get_mem_v2(const Library& l, Device h, Raw& r) {
  MemoryV2 m;
  std::memset(&m, 0, sizeof m);
  m.version = kMemoryV2Version;
  Return e = l.get_mem_v2(h, &m);
  r.v[0] = double(m.used), r.v[1] = double(m.total), r.v[2] = double(m.free), r.v[3] = double(m.reserved);
  return e;
}
Return get_mem_v1(const Library& l, Device h, Raw& r) {
  MemoryV1 m{};
  Return e = l.get_mem_v1(h, &m);
  r.v[0] = double(m.used), r.v[1] = double(m.total), r.v[2] = double(m.free);
  return e;
}
Return get_power(const Library& l, Device h, Raw& r) {
  unsigned mw = 0;
  Return e = l.get_power(h, &mw);
  r.v[0] = mw;
  return e;
}
Return get_energy(const Library& l, Device h, Raw& r) {
  unsigned long long mj = 0;
  Return e = l.get_energy(h, &mj);
  r.count = mj, r.counted = true;
  return e;
}
Return get_temp_v(const Library& l, Device h, Raw& r) {
  TemperatureV1 t;
  std::memset(&t, 0, sizeof t);
  t.version = kTemperatureV1Version;
  t.sensorType = kTemperatureGpu;
  Return e = l.get_temp_v(h, &t);
  r.v[0] = t.temperature;
  return e;
}
// nvmlDeviceGetTemperature and nvmlDeviceGetClockInfo: (device, which, unsigned*).
template <GetClockFn Library::*kFn, int kWhich>
Return get_uint_of(const Library& l, Device h, Raw& r) {
  unsigned v = 0;
  Return e = (l.*kFn)(h, kWhich, &v);
  r.v[0] = v;
  return e;
}
constexpr Getter get_temp = get_uint_of<&Library::get_temp, kTemperatureGpu>;
constexpr Getter get_sm_clock = get_uint_of<&Library::get_clock, kClockSm>;
constexpr Getter get_mem_clock = get_uint_of<&Library::get_clock, kClockMem>;
// nvmlDeviceGetPcieThroughput: KB/s over the driver's last 20 ms (drivers without the PCIe count fields).
constexpr Getter get_pcie_tx_tput = get_uint_of<&Library::get_pcie_tput, kPcieUtilTxBytes>;
constexpr Getter get_pcie_rx_tput = get_uint_of<&Library::get_pcie_tput, kPcieUtilRxBytes>;

// ---- throttling and health
template <GetReasonsFn Library::*kFn>
Return get_reasons(const Library& l, Device h, Raw& r) {
  unsigned long long mask = 0;
  Return e = (l.*kFn)(h, &mask);
  r.v[0] = double(mask);  // the defined bits are all below 2^53: exact
  return e;
}
template <int kPolicy>
Return get_violation(const Library& l, Device h, Raw& r) {
  ViolationTime t{};
  Return e = l.get_violation(h, kPolicy, &t);
  r.count = t.violationTime, r.counted = true;
  return e;
}
template <int kType>
Return get_ecc(const Library& l, Device h, Raw& r) {
  unsigned long long n = 0;
  Return e = l.get_ecc(h, kType, kVolatileEcc, &n);
  r.v[0] = double(n);
  return e;
}
Return get_remapped(const Library& l, Device h, Raw& r) {
  unsigned corr = 0, unc = 0, pending = 0, failed = 0;
  Return e = l.get_remapped(h, &corr, &unc, &pending, &failed);
  r.v[0] = corr, r.v[1] = unc, r.v[2] = pending;
  return e;
}
// (device, unsigned*) getters.
template <GetUintFn Library::*kFn>
Return get_uint(const Library& l, Device h, Raw& r) {
  unsigned v = 0;
  Return e = (l.*kFn)(h, &v);
  r.v[0] = v;
  return e;
}

// The library exports the function a metric needs.
template <auto kFn>
bool has(const Library& l) {
  return l.*kFn != nullptr;
}

// The NVML call behind each getter row, and whether the library exports what it needs. A field row
// (field_id set) needs nvmlDeviceGetFieldValues alone.
struct Ask {
  Available available;
  Getter get;  // nullptr for a field row
  bool getter;
};
constexpr Ask asked_with(Available available, Getter get) { return {available, get, true}; }
constexpr Ask ask_of(int m) {
  switch (m) {
    case mUtil: return asked_with(has<&Library::get_util>, get_util);
    case mMemV2: return asked_with(has<&Library::get_mem_v2>, get_mem_v2);
    case mMemV1: return asked_with(has<&Library::get_mem_v1>, get_mem_v1);
    case mPowerUsage: return asked_with(has<&Library::get_power>, get_power);
    case mEnergyFn: return asked_with(has<&Library::get_energy>, get_energy);
    case mTempV: return asked_with(has<&Library::get_temp_v>, get_temp_v);
    case mTemp: return asked_with(has<&Library::get_temp>, get_temp);
    case mSmClock: return asked_with(has<&Library::get_clock>, get_sm_clock);
    case mMemClock: return asked_with(has<&Library::get_clock>, get_mem_clock);
    case mPcieTxTput: return asked_with(has<&Library::get_pcie_tput>, get_pcie_tx_tput);
    case mPcieRxTput: return asked_with(has<&Library::get_pcie_tput>, get_pcie_rx_tput);
    case mClkEvents: return asked_with(has<&Library::get_clk_events>, get_reasons<&Library::get_clk_events>);
    case mClkThrottle: return asked_with(has<&Library::get_clk_throttle>, get_reasons<&Library::get_clk_throttle>);
    case mViolPower: return asked_with(has<&Library::get_violation>, get_violation<kPerfPolicyPower>);
    case mViolThermal: return asked_with(has<&Library::get_violation>, get_violation<kPerfPolicyThermal>);
    case mEccCorrected: return asked_with(has<&Library::get_ecc>, get_ecc<kMemoryErrorCorrected>);
    case mEccUncorrected: return asked_with(has<&Library::get_ecc>, get_ecc<kMemoryErrorUncorrected>);
    case mRemappedRows: return asked_with(has<&Library::get_remapped>, get_remapped);
    case mPcieReplay: return asked_with(has<&Library::get_pcie_replay>, get_uint<&Library::get_pcie_replay>);
    case mPowerLimit: return asked_with(has<&Library::get_power_limit>, get_uint<&Library::get_power_limit>);
    case mPcieGen: return asked_with(has<&Library::get_pcie_gen>, get_uint<&Library::get_pcie_gen>);
    case mPcieWidth: return asked_with(has<&Library::get_pcie_width>, get_uint<&Library::get_pcie_width>);
    default: return {has<&Library::get_fields>, nullptr, false};  // a field row
  }
}
constexpr std::array<Ask, kMetrics> asks() {
  std::array<Ask, kMetrics> a{};
  for (int m = 0; m < kMetrics; ++m) a[m] = ask_of(m);
  return a;
}
constexpr std::array<Ask, kMetrics> kAsk = asks();
// Every getter row has its call here, and only those: a row added to the table without one stops the build.
constexpr bool getters_complete() {
  for (int m = 0; m < kMetrics; ++m)
    if ((kMetricTable[m].field_id == 0) != kAsk[m].getter) return false;
  return true;
}
static_assert(getters_complete(), "a getter row of sysprof/sampling/gpu_metrics.py without its call in ask_of()");

constexpr uint32_t bit(int m) { return uint32_t(1) << m; }

// Facts read off the table at compile time.
constexpr std::array<int, kMetrics> primaries() {
  std::array<int, kMetrics> p{};
  for (int m = 0; m < kMetrics; ++m) p[m] = -1;
  for (int m = 0; m < kMetrics; ++m)
    if (kMetricTable[m].fallback >= 0) p[kMetricTable[m].fallback] = m;
  return p;
}
constexpr uint32_t field_bits() {
  uint32_t b = 0;
  for (int m = 0; m < kMetrics; ++m)
    if (kMetricTable[m].field_id) b |= bit(m);
  return b;
}
constexpr std::array<int, kMetrics> kPrimary = primaries();
constexpr uint32_t kFieldBits = field_bits();
static_assert(kMetrics <= 32, "Metric bits fit a uint32_t");

bool is_field(int m) { return kMetricTable[m].field_id != 0; }

// Asked now: not refused, and when it is a fallback, the metric it stands in for is refused.
bool wanted(const Gpu& g, int m) {
  if (g.refused & bit(m)) return false;
  int p = kPrimary[m];
  return p < 0 || (g.refused & bit(p));
}

std::string device(const Gpu& g) { return device_label(g); }

// Remembers a permanent refusal; notes it when a channel is left without a source.
void refuse(Gpu& g, int m, Return r, Calls& calls) {
  if (g.refused & bit(m)) return;
  g.refused |= bit(m);
  const MetricSpec& s = kMetricTable[m];
  if (s.fallback >= 0 && !(g.refused & bit(s.fallback))) return;
  calls.note(device(g) + s.nan_note + " read NaN (" + s.call + ": " + return_name(r) + ")");
}

// Sorts out one answer about (device, metric). True: use the value. A lost device and a permanent
// refusal are remembered; other errors (timeouts, ...) give NaN for this reading and, the first, err.
bool classify(Gpu& g, int m, Return r, std::string& err, Calls& calls) {
  if (r == kSuccess) return true;
  if (lost(r)) {
    mark_lost(g, kMetricTable[m].call, calls);
  } else if (permanent(r) || (r == kErrorInvalidArgument && is_field(m))) {
    refuse(g, m, r, calls);  // an unknown field id (older driver) is refused as INVALID_ARGUMENT
  } else if (err.empty()) {
    err = device(g) + kMetricTable[m].call + ": " + return_name(r);
  }
  return false;
}

// Writes a metric's channels from its raw answer, by the row's rule.
void store(Gpu& g, int m, const Raw& raw, int64_t now, double* o) {
  const MetricSpec& s = kMetricTable[m];
  const auto& ch = s.channels;
  switch (s.rule) {
    case kLevel:
      for (int k = 0; k < 4 && ch[k] != kNoChannel; ++k) o[ch[k]] = raw.v[k];
      break;
    case kMilli: o[ch[0]] = raw.v[0] / 1000.0; break;
    case kMega: o[ch[0]] = raw.v[0] * 1e6; break;
    case kKilo: o[ch[0]] = raw.v[0] * 1000.0; break;
    case kEnergyMj:
      if (raw.counted) o[ch[0]] = double(raw.count) / 1000.0, o[ch[1]] = g.energy.update(raw.count, now);
      break;
    case kByteRate:
      if (raw.counted) o[ch[0]] = g.rate[m].update(raw.count, now);
      break;
    case kKibRate:
      if (raw.counted) o[ch[0]] = g.rate[m].update(raw.count * 1024, now);
      break;
    case kNsTotal:
      if (raw.counted) o[ch[0]] = double(raw.count) * 1e-9, o[ch[1]] = g.rate[m].update(raw.count, now) * 1e-9;
      break;
  }
}

// A field value as a double / as an unsigned counter, whatever type the driver chose to report.
double as_double(const FieldValue& f) { return value_as_double(f.valueType, f.value); }
// False when the value is not a usable counter reading (negative, NaN, the "not available" marker).
bool as_counter(const FieldValue& f, uint64_t& v) {
  switch (f.valueType) {
    case kValueUnsignedInt: v = f.value.uiVal; return f.value.uiVal != UINT_MAX;
    case kValueUnsignedLong: v = f.value.ulVal; return true;
    case kValueUnsignedLongLong: v = f.value.ullVal; return f.value.ullVal != ULLONG_MAX;
    case kValueSignedLongLong: v = uint64_t(f.value.sllVal); return f.value.sllVal >= 0;
    case kValueSignedInt: v = uint64_t(f.value.siVal); return f.value.siVal >= 0;
    case kValueUnsignedShort: v = f.value.usVal; return true;
    case kValueDouble: v = uint64_t(f.value.dVal); return f.value.dVal >= 0;
    default: return false;
  }
}
Raw raw_of(const FieldValue& f, Rule rule) {
  Raw raw;
  if (rule == kLevel || rule == kMilli || rule == kMega || rule == kKilo)
    raw.v[0] = as_double(f);
  else
    raw.counted = as_counter(f, raw.count);
  return raw;
}

// The field request for the metrics still asked, reset: the driver writes into its entries.
void prepare_request(Gpu& g) {
  if ((g.refused & kFieldBits) != g.req_mask) {
    g.nreq = 0;
    for (int m = 0; m < kMetrics; ++m)
      if (is_field(m) && wanted(g, m)) g.req_metric[g.nreq++] = m;
    g.req_mask = g.refused & kFieldBits;
  }
  for (int i = 0; i < g.nreq; ++i) {
    std::memset(&g.req[i], 0, sizeof(FieldValue));
    g.req[i].fieldId = kMetricTable[g.req_metric[i]].field_id;
    g.req[i].scopeId = kMetricTable[g.req_metric[i]].scope;
  }
}

// 1. Everything field values can serve, in one call. False: the device is lost.
bool read_fields(const Library& lib, Gpu& g, int64_t now, double* o, std::string& err, Calls& calls) {
  prepare_request(g);
  if (g.nreq == 0) return true;
  auto fn = [&] { return lib.get_fields(g.handle, g.nreq, g.req); };
  Return r = calls.call("nvmlDeviceGetFieldValues", int(g.index), make_call(fn));
  if (lost(r)) {
    mark_lost(g, "nvmlDeviceGetFieldValues", calls);
    return false;
  }
  if (permanent(r)) {  // the call itself is refused: each field falls back or reads NaN
    for (int i = 0; i < g.nreq; ++i) refuse(g, g.req_metric[i], r, calls);
  } else if (r != kSuccess) {
    if (err.empty()) err = device(g) + "nvmlDeviceGetFieldValues: " + return_name(r);
  } else {
    for (int i = 0; i < g.nreq; ++i) {
      int m = g.req_metric[i];
      if (classify(g, m, g.req[i].nvmlReturn, err, calls)) store(g, m, raw_of(g.req[i], kMetricTable[m].rule), now, o);
    }
  }
  return !g.lost;
}

// 2. The getters, each asked once its turn comes: call, classify, remember. False: the device is lost.
bool read_getters(const Library& lib, Gpu& g, int64_t now, bool slow, double* o, std::string& err, Calls& calls) {
  for (int m = 0; m < kMetrics; ++m) {
    const MetricSpec& s = kMetricTable[m];
    if (is_field(m) || (s.slow && !slow) || !wanted(g, m)) continue;
    Raw raw;
    auto fn = [&] { return kAsk[m].get(lib, g.handle, raw); };
    if (classify(g, m, calls.call(s.call, int(g.index), make_call(fn)), err, calls)) store(g, m, raw, now, o);
    if (g.lost) return false;
  }
  return true;
}

// The channels the slow rows write, as a mask over Channel.
constexpr uint64_t slow_channels() {
  uint64_t b = 0;
  for (int m = 0; m < kMetrics; ++m)
    if (kMetricTable[m].slow)
      for (int c : kMetricTable[m].channels)
        if (c != kNoChannel) b |= uint64_t(1) << c;
  return b;
}
constexpr uint64_t kSlowChannels = slow_channels();
static_assert(kPerDevice <= 64, "Channel bits fit a uint64_t");

// Slow channels: kept when read now, else the values last read.
void hold_slow(Gpu& g, bool slow, double* o) {
  for (int c = 0; c < kPerDevice; ++c)
    if (kSlowChannels >> c & 1) {
      if (slow)
        g.held[c] = o[c];
      else
        o[c] = g.held[c];
    }
}

}  // namespace

std::string device_label(const Gpu& g) { return "gpu/" + std::to_string(g.index) + ": "; }

void mark_lost(Gpu& g, const char* what, Calls& calls) {
  if (g.lost) return;
  g.lost = true;
  calls.note(device_label(g) + "lost (" + what + ": NVML_ERROR_GPU_IS_LOST or RESET_REQUIRED); its channels read NaN");
}

int primary_of(int m) { return m >= 0 && m < kMetrics ? kPrimary[m] : -1; }

void refuse_missing(const Library& lib, Gpu& g, Calls& calls) {
  for (int m = 0; m < kMetrics; ++m)
    if (!kAsk[m].available(lib)) refuse(g, m, kErrorFunctionNotFound, calls);
}

void read_device(const Library& lib, Gpu& g, int64_t now, double* o, std::string& err, Calls& calls) {
  fill_nan(o, kPerDevice);
  if (g.lost) return;
  bool slow = now - g.slow_at >= kSlowNs;
  if (slow) g.slow_at = now;
  if (!read_fields(lib, g, now, o, err, calls) || !read_getters(lib, g, now, slow, o, err, calls) ||
      (g.gpm && !gpm_read(lib, g, now, o, err, calls))) {
    fill_nan(o, kPerDevice);
    return;
  }
  hold_slow(g, slow, o);
}

double value_as_double(int type, const Value& v) {
  switch (type) {
    case kValueDouble: return v.dVal;
    case kValueUnsignedInt: return v.uiVal == UINT_MAX ? kNaN : double(v.uiVal);
    case kValueUnsignedLong: return double(v.ulVal);
    case kValueUnsignedLongLong: return v.ullVal == ULLONG_MAX ? kNaN : double(v.ullVal);
    case kValueSignedLongLong: return double(v.sllVal);
    case kValueSignedInt: return double(v.siVal);
    case kValueUnsignedShort: return double(v.usVal);
    default: return kNaN;
  }
}

}  // namespace nvml
}  // namespace sysprof
