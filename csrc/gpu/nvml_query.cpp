// gpu: the metric table and the one query path (see nvml_query.hpp).
#include "gpu/nvml_query.hpp"

#include <climits>
#include <cstring>

#include "sources/source.hpp"

namespace sysprof {
namespace nvml {

const char* const kChannelNames[kPerDevice] = {
    "utilization_percent", "memory_utilization_percent", "memory_used_bytes",       "memory_total_bytes",
    "memory_free_bytes",   "memory_reserved_bytes",      "power_watts",             "energy_joules",
    "energy_power_watts",  "temperature_celsius",        "sm_clock_hz",             "memory_clock_hz",
    "pcie_tx_bytes_per_second", "pcie_rx_bytes_per_second", "nvlink_tx_bytes_per_second",
    "nvlink_rx_bytes_per_second"};

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

// The library exports the function a metric needs.
template <auto kFn>
bool has(const Library& l) {
  return l.*kFn != nullptr;
}

constexpr int N = kNoChannel;

}  // namespace

// clang-format off
constexpr MetricSpec kMetricTable[kMetrics] = {
  {"util", "nvmlDeviceGetUtilizationRates", 0, 0, -1, kLevel, {kUtil, kMemUtil, N, N},
   "utilization_percent, memory_utilization_percent", has<&Library::get_util>, get_util},
  {"mem_v2", "nvmlDeviceGetMemoryInfo_v2", 0, 0, mMemV1, kLevel, {kMemUsed, kMemTotal, kMemFree, kMemReserved},
   "memory_*_bytes", has<&Library::get_mem_v2>, get_mem_v2},
  {"mem_v1", "nvmlDeviceGetMemoryInfo", 0, 0, -1, kLevel, {kMemUsed, kMemTotal, kMemFree, N},
   "memory_*_bytes", has<&Library::get_mem_v1>, get_mem_v1},
  {"power_field", "NVML_FI_DEV_POWER_INSTANT", kFiPowerInstant, 0, mPowerUsage, kFromMilli, {kPower, N, N, N},
   "power_watts", has<&Library::get_fields>, nullptr},  // scope 0: the GPU, not the module
  {"power_usage", "nvmlDeviceGetPowerUsage", 0, 0, -1, kFromMilli, {kPower, N, N, N},
   "power_watts", has<&Library::get_power>, get_power},
  {"energy_field", "NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION", kFiTotalEnergyConsumption, 0, mEnergyFn, kEnergyMj,
   {kEnergy, kEnergyPower, N, N}, "energy_joules, energy_power_watts",
   has<&Library::get_fields>, nullptr},
  {"energy_fn", "nvmlDeviceGetTotalEnergyConsumption", 0, 0, -1, kEnergyMj, {kEnergy, kEnergyPower, N, N},
   "energy_joules, energy_power_watts", has<&Library::get_energy>, get_energy},
  {"temp_v", "nvmlDeviceGetTemperatureV", 0, 0, mTemp, kLevel, {kTemp, N, N, N},
   "temperature_celsius", has<&Library::get_temp_v>, get_temp_v},
  {"temp", "nvmlDeviceGetTemperature", 0, 0, -1, kLevel, {kTemp, N, N, N},
   "temperature_celsius", has<&Library::get_temp>, get_temp},
  {"sm_clock", "nvmlDeviceGetClockInfo(NVML_CLOCK_SM)", 0, 0, -1, kFromMega, {kSmClock, N, N, N},
   "sm_clock_hz", has<&Library::get_clock>, get_sm_clock},
  {"mem_clock", "nvmlDeviceGetClockInfo(NVML_CLOCK_MEM)", 0, 0, -1, kFromMega, {kMemClock, N, N, N},
   "memory_clock_hz", has<&Library::get_clock>, get_mem_clock},
  {"pcie_tx", "NVML_FI_DEV_PCIE_COUNT_TX_BYTES", kFiPcieCountTxBytes, 0, -1, kByteRate, {kPcieTx, N, N, N},
   "pcie_tx_bytes_per_second", has<&Library::get_fields>, nullptr},
  {"pcie_rx", "NVML_FI_DEV_PCIE_COUNT_RX_BYTES", kFiPcieCountRxBytes, 0, -1, kByteRate, {kPcieRx, N, N, N},
   "pcie_rx_bytes_per_second", has<&Library::get_fields>, nullptr},
  // scopeId UINT_MAX: the sum over all links (0 would be link 0 alone)
  {"nvlink_tx", "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", kFiNvlinkThroughputDataTx, kScopeAllLinks, -1, kKibRate,
   {kNvlinkTx, N, N, N}, "nvlink_tx_bytes_per_second", has<&Library::get_fields>, nullptr},
  {"nvlink_rx", "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", kFiNvlinkThroughputDataRx, kScopeAllLinks, -1, kKibRate,
   {kNvlinkRx, N, N, N}, "nvlink_rx_bytes_per_second", has<&Library::get_fields>, nullptr},
};
// clang-format on

const char* rule_name(Rule r) {
  switch (r) {
    case kLevel: return "level";
    case kFromMilli: return "milli";
    case kFromMega: return "mega";
    case kEnergyMj: return "energy_mj";
    case kByteRate: return "byte_rate";
    case kKibRate: return "kib_rate";
  }
  return "?";
}

namespace {

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
constexpr int count_bits(uint32_t b) { return b ? int(b & 1) + count_bits(b >> 1) : 0; }
constexpr std::array<int, kMetrics> kPrimary = primaries();
constexpr uint32_t kFieldBits = field_bits();
static_assert(count_bits(kFieldBits) == kMaxFields, "kMaxFields: the field rows of kMetricTable");
static_assert(kMetrics <= 32, "Metric bits fit a uint32_t");

bool is_field(int m) { return kMetricTable[m].field_id != 0; }

// Asked now: not refused, and when it is a fallback, the metric it stands in for is refused.
bool wanted(const Gpu& g, int m) {
  if (g.refused & bit(m)) return false;
  int p = kPrimary[m];
  return p < 0 || (g.refused & bit(p));
}

std::string device(const Gpu& g) { return "gpu/" + std::to_string(g.index) + ": "; }

// Remembers a permanent refusal; notes it when a channel is left without a source.
void refuse(Gpu& g, int m, Return r, Calls& calls) {
  if (g.refused & bit(m)) return;
  g.refused |= bit(m);
  const MetricSpec& s = kMetricTable[m];
  if (s.fallback >= 0 && !(g.refused & bit(s.fallback))) return;
  calls.note(device(g) + s.nan_note + " read NaN (" + s.call + ": " + return_name(r) + ")");
}

void mark_lost(Gpu& g, const char* what, Calls& calls) {
  if (g.lost) return;
  g.lost = true;
  calls.note(device(g) + "lost (" + what + ": NVML_ERROR_GPU_IS_LOST or RESET_REQUIRED); its channels read NaN");
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
    case kFromMilli: o[ch[0]] = raw.v[0] / 1000.0; break;
    case kFromMega: o[ch[0]] = raw.v[0] * 1e6; break;
    case kEnergyMj:
      if (raw.counted) o[ch[0]] = double(raw.count) / 1000.0, o[ch[1]] = g.energy.update(raw.count, now);
      break;
    case kByteRate:
      if (raw.counted) o[ch[0]] = g.rate[m].update(raw.count, now);
      break;
    case kKibRate:
      if (raw.counted) o[ch[0]] = g.rate[m].update(raw.count * 1024, now);
      break;
  }
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
  if (rule == kLevel || rule == kFromMilli || rule == kFromMega)
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
bool read_getters(const Library& lib, Gpu& g, int64_t now, double* o, std::string& err, Calls& calls) {
  for (int m = 0; m < kMetrics; ++m) {
    const MetricSpec& s = kMetricTable[m];
    if (is_field(m) || !wanted(g, m)) continue;
    Raw raw;
    auto fn = [&] { return s.get(lib, g.handle, raw); };
    if (classify(g, m, calls.call(s.call, int(g.index), make_call(fn)), err, calls)) store(g, m, raw, now, o);
    if (g.lost) return false;
  }
  return true;
}

}  // namespace

int primary_of(int m) { return m >= 0 && m < kMetrics ? kPrimary[m] : -1; }

void refuse_missing(const Library& lib, Gpu& g, Calls& calls) {
  for (int m = 0; m < kMetrics; ++m)
    if (!kMetricTable[m].available(lib)) refuse(g, m, kErrorFunctionNotFound, calls);
}

void read_device(const Library& lib, Gpu& g, int64_t now, double* o, std::string& err, Calls& calls) {
  fill_nan(o, kPerDevice);
  if (g.lost) return;
  if (!read_fields(lib, g, now, o, err, calls) || !read_getters(lib, g, now, o, err, calls)) fill_nan(o, kPerDevice);
}

}  // namespace nvml
}  // namespace sysprof
