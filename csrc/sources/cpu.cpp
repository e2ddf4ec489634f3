// /proc/stat: aggregate and per-CPU busy percent from tick deltas (Documentation/filesystems/proc.rst, 1.8).
#include <algorithm>
#include <array>
#include <cstdio>

#include "sources/file_source.hpp"
#include "sources/registry.hpp"

namespace sysprof {
namespace {

constexpr const char* kModeNames[kModes] = {"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"};

// Parses the numbers after "cpu" / "cpuN". Kernels before 2.6 give 4 fields, later 7, 8, 9 or 10;
// a line with more (a future kernel, a virtualization layer) keeps the 8 whose positions proc.rst fixes.
bool parse_ticks(Cursor& c, Ticks& t) {
  int n = 0;
  uint64_t v;
  while (n < 10 && parse_u64(c, v)) {
    if (n < kModes) t[size_t(n)] = v;
    ++n;
  }
  if (n < 4) return false;
  for (int i = std::min(n, kModes); i < kModes; ++i) t[size_t(i)] = 0;
  return true;
}

// Splits a "cpu..." line: id -1 for the aggregate line, else N of "cpuN". False if not a cpu line.
bool cpu_line_id(Cursor& c, long& id) {
  if (c.end - c.p < 3 || std::memcmp(c.p, "cpu", 3) != 0) return false;
  c.p += 3;
  if (c.p < c.end && is_blank(*c.p)) {
    id = -1;
    return true;
  }
  uint64_t v;
  if (!parse_u64(c, v) || v >= kMaxCpus) return false;
  id = long(v);
  return true;
}


class CpuSource final : public FileSource {
 public:
  const char* name() const override { return "cpu"; }

 protected:
  std::string path(const Config& cfg) const override { return join(cfg.proc_root, "stat"); }

  bool discover(const Config& cfg, std::string& warning) override {
    per_cpu_ = cfg.option("per_cpu");
    if (!per_cpu_) return true;
    std::vector<long> ids;
    LineReader lines(file_.data(), file_.size());
    Cursor c;
    while (lines.next(c)) {
      long id;
      if (cpu_line_id(c, id) && id >= 0) ids.push_back(id);
    }
    // CPUs offline now still get a channel if sysfs says they are possible.
    std::string possible, ignored;  // absent or unreadable: the ids of /proc/stat alone
    if (read_small_file(join(cfg.sys_root, "devices/system/cpu/possible"), possible, ignored))
      for_each_cpu_in_list(possible.data(), possible.size(), [&](long id) { ids.push_back(id); });
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    ids_ = ids;
    (void)warning;
    return true;
  }

  void layout(std::vector<std::string>& channels) override {
    channels.push_back("cpu/percent");
    for (auto m : kModeNames) channels.push_back(std::string("cpu/") + m + "_percent");
    long max_id = -1;
    for (long id : ids_) {
      channels.push_back("cpu/" + std::to_string(id) + "/percent");
      max_id = std::max(max_id, id);
    }
    slot_of_.assign(size_t(max_id + 1), -1);
    for (size_t k = 0; k < ids_.size(); ++k) slot_of_[size_t(ids_[k])] = int(k);
    per_.assign(ids_.size(), TickState());
    seen_.assign(ids_.size(), 0);
    width_ = kModes + 1 + ids_.size();
  }

  std::unique_ptr<FileSource> fresh() const override {
    auto s = std::make_unique<CpuSource>();
    s->per_cpu_ = per_cpu_;
    s->ids_ = ids_;
    return s;
  }

  // Per-CPU lines are matched by id; absent ones are offline.
  bool parse(int64_t, double* out, std::string& err) override {
    std::fill(seen_.begin(), seen_.end(), 0);
    bool have_aggregate = false;
    std::string_view bad;
    LineReader lines(file_.data(), file_.size());
    Cursor c;
    while (lines.next(c)) {
      Cursor line = c;
      long id;
      if (!cpu_line_id(c, id)) {
        if (have_aggregate) break;  // cpu lines come first; the rest (intr, ctxt, ...) is not ours
        continue;
      }
      Ticks t;
      if (!parse_ticks(c, t)) {
        bad = std::string_view(line.p, size_t(line.end - line.p));
        continue;
      }
      if (id < 0) {
        total_.update(t);
        have_aggregate = true;
        if (!per_cpu_) break;
      } else if (size_t(id) < slot_of_.size() && slot_of_[size_t(id)] >= 0) {
        size_t k = size_t(slot_of_[size_t(id)]);
        per_[k].update(t);
        seen_[k] = 1;
      }
    }
    for (size_t k = 0; k < per_.size(); ++k)
      if (!seen_[k]) per_[k].invalidate();  // offline: re-prime when it comes back
    if (!bad.empty()) malformed(file_, bad, err);
    if (!have_aggregate) {
      if (bad.empty()) err = file_.path() + ": no aggregate 'cpu' line";
      return false;
    }
    if (out) {
      for (size_t i = 0; i < kModes + 1; ++i) out[i] = total_.last[i];
      for (size_t k = 0; k < per_.size(); ++k) out[kModes + 1 + k] = seen_[k] ? per_[k].last[0] : kNaN;
    }
    return true;
  }

 private:
  bool per_cpu_ = false;
  std::vector<long> ids_;
  std::vector<int> slot_of_;
  TickState total_;
  std::vector<TickState> per_;
  std::vector<char> seen_;
};

std::unique_ptr<Source> make_cpu_source() { return std::make_unique<CpuSource>(); }

}  // namespace

SYSPROF_SOURCE(cpu, make_cpu_source);

}  // namespace sysprof
