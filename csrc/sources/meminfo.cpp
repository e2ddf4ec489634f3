// /proc/meminfo: memory and swap in bytes (Documentation/filesystems/proc.rst, "meminfo").
#include <algorithm>
#include <cstring>
#include <limits>

#include "parse/meminfo.hpp"
#include "sources/file_source.hpp"
#include "sources/registry.hpp"

namespace sysprof {
namespace {

constexpr const char* kChannels[] = {
    "memory/total_bytes",   "memory/available_bytes", "memory/used_bytes",      "memory/free_bytes",
    "memory/buffers_bytes", "memory/cached_bytes",    "memory/dirty_bytes",     "memory/writeback_bytes",
    "memory/used_percent",  "swap/total_bytes",       "swap/used_bytes",        "swap/free_bytes"};
constexpr size_t kWidth = sizeof(kChannels) / sizeof(kChannels[0]);

class MeminfoSource final : public FileSource {
 public:
  MeminfoSource() { width_ = kWidth; }
  const char* name() const override { return "memory"; }

 protected:
  std::string path(const Config& cfg) const override { return join(cfg.proc_root, "meminfo"); }
  void layout(std::vector<std::string>& channels) override {
    for (auto c : kChannels) channels.push_back(c);
  }
  std::unique_ptr<FileSource> fresh() const override { return std::make_unique<MeminfoSource>(); }

  bool parse(int64_t, double* out, std::string& err) override {
    double scratch[kWidth];
    if (!out) out = scratch;
    MeminfoSnapshot m;
    if (__builtin_expect(!parse_meminfo(file_.data(), file_.size(), m, err), 0)) return failed(err);
    const double* v = m.bytes;
    auto has = [&](int k) { return m.has(k); };
    auto get = [&](int k) { return has(k) ? v[k] : kNaN; };
    // Virtualization layers have reported wrapped negatives as huge free counts: free and available
    // are at most the total, so used is never negative and used_percent lies in [0, 100].
    double total = v[kMemTotal], free = std::min(v[kMemFree], total);
    // MemAvailable appeared in 3.14; before it, free + buffers + page cache is the usual estimate.
    double avail = has(kMemAvailable) ? v[kMemAvailable]
                                      : free + (has(kBuffers) ? v[kBuffers] : 0) + (has(kCached) ? v[kCached] : 0);
    avail = std::min(avail, total);
    double used = total - avail;
    out[0] = total;
    out[1] = avail;
    out[2] = used;
    out[3] = free;
    out[4] = get(kBuffers);
    out[5] = get(kCached);
    out[6] = get(kDirty);
    out[7] = get(kWriteback);
    out[8] = percent_of(used, total);
    double st = get(kSwapTotal), sf = get(kSwapFree);
    if (st == st) sf = std::min(sf, st);  // a NaN SwapFree stays NaN
    out[9] = st;
    out[10] = st - sf;  // NaN if either is unknown
    out[11] = sf;
    if (!m.bad.empty()) malformed(file_, m.bad, err);
    return true;
  }

 private:
  __attribute__((cold, noinline)) bool failed(std::string& err) const {
    err = file_.path() + ": " + err;
    return false;
  }
};

std::unique_ptr<Source> make_meminfo_source() { return std::make_unique<MeminfoSource>(); }

}  // namespace

SYSPROF_SOURCE(memory, make_meminfo_source);

}  // namespace sysprof
