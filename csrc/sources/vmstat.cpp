// /proc/vmstat: page faults, swapping, reclaim, OOM kills and workingset refaults (parse/vmstat.hpp).
// The channels are fixed; one whose key this kernel lacks (or that is absent from a read) is NaN.
#include "parse/vmstat.hpp"
#include "sources/file_source.hpp"
#include "sources/registry.hpp"

namespace sysprof {
namespace {

struct Channel {
  const char* name;
  int field;
  bool rate;  // per second between two reads, else the kernel's total
};
constexpr Channel kChannels[] = {
    {"vmstat/pgfault_total", kPgfault, false},
    {"vmstat/pgmajfault_total", kPgmajfault, false},
    {"vmstat/pgfault_per_second", kPgfault, true},
    {"vmstat/pgmajfault_per_second", kPgmajfault, true},
    {"vmstat/pswpin_total", kPswpin, false},
    {"vmstat/pswpout_total", kPswpout, false},
    {"vmstat/pgscan_kswapd_total", kPgscanKswapd, false},
    {"vmstat/pgscan_direct_total", kPgscanDirect, false},
    {"vmstat/pgsteal_kswapd_total", kPgstealKswapd, false},
    {"vmstat/pgsteal_direct_total", kPgstealDirect, false},
    {"vmstat/oom_kill_total", kOomKill, false},
    {"vmstat/workingset_refault_anon_total", kRefaultAnon, false},
    {"vmstat/workingset_refault_file_total", kRefaultFile, false},
};
constexpr size_t kWidth = sizeof(kChannels) / sizeof(kChannels[0]);

class VmstatSource final : public FileSource {
 public:
  VmstatSource() { width_ = kWidth; }
  const char* name() const override { return "vmstat"; }

 protected:
  std::string path(const Config& cfg) const override { return join(cfg.proc_root, "vmstat"); }
  bool single_shot() const override { return false; }  // one seq_file record per line
  void layout(std::vector<std::string>& channels) override {
    for (const auto& c : kChannels) channels.push_back(c.name);
  }
  std::unique_ptr<FileSource> fresh() const override { return std::make_unique<VmstatSource>(); }

  bool parse(int64_t mono_ns, double* out, std::string& err) override {
    VmstatSnapshot s;
    if (!parse_vmstat(file_.data(), file_.size(), s, err)) {
      err = file_.path() + ": " + err;
      return false;
    }
    double dt = double(mono_ns - last_ns_) * 1e-9;
    last_ns_ = mono_ns;
    uint64_t delta[kVmstatFields] = {};
    bool had[kVmstatFields];
    for (int f = 0; f < kVmstatFields; ++f) {
      had[f] = counters_[f].valid;
      if (s.has(f)) {
        delta[f] = counters_[f].update(s.v[f]);  // 64-bit: a decrease is a reset, delta 0
      } else {
        counters_[f].valid = false;  // absent: no rate until two reads in a row have it
        had[f] = false;
      }
    }
    if (!s.bad.empty()) malformed(file_, s.bad, err);
    if (!out) return true;
    for (size_t i = 0; i < kWidth; ++i) {
      const Channel& c = kChannels[i];
      if (!s.has(c.field)) out[i] = kNaN;
      else out[i] = c.rate ? (had[c.field] ? rate(delta[c.field], dt) : kNaN) : double(s.v[c.field]);
    }
    return true;
  }

 private:
  Total64 counters_[kVmstatFields];
  int64_t last_ns_ = 0;
};

std::unique_ptr<Source> make_vmstat_source() { return std::make_unique<VmstatSource>(); }

}  // namespace

SYSPROF_SOURCE(vmstat, make_vmstat_source);

}  // namespace sysprof
