// gpu: GPM, two samples per device, alternated (see nvml_gpm.hpp).
#include "gpu/nvml_gpm.hpp"

#include <cstring>

#include "sources/source.hpp"

namespace sysprof {
namespace nvml {

namespace {
constexpr uint32_t bit(int k) { return uint32_t(1) << k; }
}  // namespace

void gpm_open(const Library& lib, Gpu& g, Calls& calls) {
  const int dev = int(g.index);
  auto absent = [&](const std::string& why) {
    calls.note(device_label(g) + "GPM metrics absent (" + why + ")");
  };
  if (!lib.gpm_support || !lib.gpm_alloc || !lib.gpm_free || !lib.gpm_sample || !lib.gpm_metrics)
    return absent("nvmlGpmQueryDeviceSupport: NVML_ERROR_FUNCTION_NOT_FOUND");
  GpmSupport sup{kGpmSupportVersion, 0};
  auto query = [&] { return lib.gpm_support(g.handle, &sup); };
  Return r = calls.call("nvmlGpmQueryDeviceSupport", dev, make_call(query));
  if (lost(r)) return mark_lost(g, "nvmlGpmQueryDeviceSupport", calls);
  if (r != kSuccess) return absent(std::string("nvmlGpmQueryDeviceSupport: ") + return_name(r));
  if (!sup.isSupportedDevice) return absent("nvmlGpmQueryDeviceSupport: not supported on this device");
  auto st = std::make_shared<GpmState>();
  for (GpmSample& s : st->sample) {
    auto alloc = [&] { return lib.gpm_alloc(&s); };
    r = calls.call("nvmlGpmSampleAlloc", dev, make_call(alloc));
    if (r != kSuccess || !s) {
      g.gpm = st;  // frees what was allocated
      gpm_close(lib, g, calls);
      return absent(std::string("nvmlGpmSampleAlloc: ") + return_name(r));
    }
  }
  st->req.reset(new GpmMetricsGet);
  std::memset(st->req.get(), 0, sizeof(GpmMetricsGet));
  g.gpm = std::move(st);
  // Where GPM stands in for a field, the field's older fallback (nvmlDeviceGetPcieThroughput) is never asked.
  for (const GpmSpec& s : kGpmTable)
    if (s.stands_in_for >= 0 && kMetricTable[s.stands_in_for].fallback >= 0)
      g.refused |= uint32_t(1) << kMetricTable[s.stands_in_for].fallback;
}

void gpm_close(const Library& lib, Gpu& g, Calls& calls) {
  if (!g.gpm) return;
  for (GpmSample& s : g.gpm->sample) {
    if (!s) continue;
    auto f = [&] { return lib.gpm_free(s); };
    calls.call("nvmlGpmSampleFree", int(g.index), make_call(f));
    s = nullptr;
  }
  g.gpm.reset();
}

namespace {

// The rows asked now: not refused, and a stand-in only while the field it stands in for is refused.
uint32_t wanted_rows(const Gpu& g, const GpmState& st) {
  uint32_t b = 0;
  for (int k = 0; k < kGpmMetrics; ++k) {
    int f = kGpmTable[k].stands_in_for;
    if (!(st.refused & bit(k)) && (f < 0 || (g.refused >> f & 1))) b |= bit(k);
  }
  return b;
}

void prepare(const Gpu& g, GpmState& st) {
  uint32_t want = wanted_rows(g, st);
  if (want != st.asked) {
    st.n = 0;
    for (int k = 0; k < kGpmMetrics; ++k)
      if (want & bit(k)) st.slot[st.n++] = k;
    st.asked = want;
  }
  GpmMetricsGet& q = *st.req;
  q.version = kGpmMetricsGetVersion;
  q.numMetrics = unsigned(st.n);
  q.sample1 = st.sample[st.next ^ 1];
  q.sample2 = st.sample[st.next];
  for (int i = 0; i < st.n; ++i) {
    std::memset(&q.metrics[i], 0, sizeof(GpmMetric));
    q.metrics[i].metricId = kGpmTable[st.slot[i]].id;
  }
}

}  // namespace

bool gpm_read(const Library& lib, Gpu& g, int64_t, double* o, std::string& err, Calls& calls) {
  GpmState& st = *g.gpm;
  const int dev = int(g.index);
  GpmSample s = st.sample[st.next];
  auto take = [&] { return lib.gpm_sample(g.handle, s); };
  Return r = calls.call("nvmlGpmSampleGet", dev, make_call(take));
  if (lost(r)) return mark_lost(g, "nvmlGpmSampleGet", calls), false;
  if (r != kSuccess) {  // this interval has no end: the next sample starts a new one
    st.primed = false;
    if (permanent(r)) {
      calls.note(device_label(g) + "GPM metrics read NaN (nvmlGpmSampleGet: " + return_name(r) + ")");
      gpm_close(lib, g, calls);
    } else if (err.empty()) {
      err = device_label(g) + "nvmlGpmSampleGet: " + return_name(r);
    }
    return true;
  }
  bool ask = st.primed;
  st.primed = true;
  if (ask) {
    prepare(g, st);
    auto get = [&] { return lib.gpm_metrics(st.req.get()); };
    r = st.n ? calls.call("nvmlGpmMetricsGet", dev, make_call(get)) : kSuccess;
    if (lost(r)) return mark_lost(g, "nvmlGpmMetricsGet", calls), false;
    if (r != kSuccess) {
      if (err.empty()) err = device_label(g) + "nvmlGpmMetricsGet: " + return_name(r);
    } else {
      for (int i = 0; i < st.n; ++i) {
        const GpmMetric& m = st.req->metrics[i];
        const GpmSpec& spec = kGpmTable[st.slot[i]];
        const uint32_t b = bit(st.slot[i]);
        if (m.nvmlReturn == kSuccess) {
          o[spec.channel] = m.value * spec.scale;
          if (spec.stands_in_for >= 0 && !(st.served & b)) {  // the field's note said NaN: say who answers
            st.served |= b;
            calls.note(device_label(g) + kChannelNames[spec.channel] + " from GPM (" + spec.name + ")");
          }
        } else if (permanent(m.nvmlReturn) && !(st.refused & b)) {
          st.refused |= b;
          if (spec.stands_in_for < 0)  // a stand-in's channel was noted as NaN with its field already
            calls.note(device_label(g) + kChannelNames[spec.channel] + " read NaN (nvmlGpmMetricsGet " + spec.name +
                       ": " + return_name(m.nvmlReturn) + ")");
        }
      }
    }
  }
  st.next ^= 1;
  return true;
}

}  // namespace nvml
}  // namespace sysprof
