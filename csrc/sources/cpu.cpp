// /proc/stat: aggregate and per-CPU busy percent from tick deltas, and the ticks themselves by mode as seconds
// (cpu/<mode>_seconds_total: node_exporter's node_cpu_seconds_total; shares over a span come from their
// increases, Documentation/filesystems/proc.rst, 1.8).
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>

#include "parse/stat.hpp"
#include "sources/file_source.hpp"
#include "sources/registry.hpp"

namespace sysprof {
namespace {

constexpr const char* kModeNames[kModes] = {"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"};

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
    CpuLine l;
    while (lines.next(c))
      if (parse_cpu_line(c, l) != 0 && l.id >= 0) ids.push_back(l.id);
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

  // cpu/percent, cpu/<mode>_percent, cpu/<mode>_seconds_total; per CPU: cpu/<id>/percent for each, then
  // cpu/<id>/<mode>_seconds_total for each.
  void layout(std::vector<std::string>& channels) override {
    channels.push_back("cpu/percent");
    for (auto m : kModeNames) channels.push_back(std::string("cpu/") + m + "_percent");
    for (auto m : kModeNames) channels.push_back(std::string("cpu/") + m + "_seconds_total");
    long max_id = -1;
    for (long id : ids_) {
      channels.push_back("cpu/" + std::to_string(id) + "/percent");
      max_id = std::max(max_id, id);
    }
    for (long id : ids_)
      for (auto m : kModeNames) channels.push_back("cpu/" + std::to_string(id) + "/" + m + "_seconds_total");
    slot_of_.assign(size_t(max_id + 1), -1);
    for (size_t k = 0; k < ids_.size(); ++k) slot_of_[size_t(ids_[k])] = int(k);
    per_.assign(ids_.size(), TickState());
    seen_.assign(ids_.size(), 0);
    lines_.assign(ids_.size() + 1, Line{});  // the aggregate and one per CPU: no allocation per tick
    width_ = 2 * kModes + 1 + ids_.size() * (1 + kModes);
  }

  std::unique_ptr<FileSource> fresh() const override {
    auto s = std::make_unique<CpuSource>();
    s->per_cpu_ = per_cpu_;
    s->ids_ = ids_;
    return s;
  }

  // Per-CPU lines are matched by id; absent ones are offline.
  // A cpu line's counters advance in USER_HZ ticks (every 10 ms at most, per CPU), so at 1 kHz most lines are the
  // same bytes as the line in the same place the read before: such a line (its hash and length equal) is not
  // parsed again. Its ticks are the ones its last parse gave, whose deltas would all be 0, and TickState::update
  // leaves everything as it is on a zero delta: the line only counts as seen.
  bool parse(int64_t, double* out, std::string& err) override {
    std::fill(seen_.begin(), seen_.end(), 0);
    bool have_aggregate = false;
    std::string_view bad;
    LineReader lines(file_.data(), file_.size());
    Cursor c;
    CpuLine l;
    size_t j = 0;  // the place of this cpu line among the cpu lines of this read
    while (lines.next(c)) {
      size_t len = size_t(c.end - c.p);
      uint64_t h = 0;
      if (j < lines_.size() && lines_[j].len == len && len) {
        h = line_hash(c.p, len);
        if (h == lines_[j].hash) {  // the same line as in this place last time
          int k = lines_[j++].slot;
          if (k == kAggregate) {
            have_aggregate = true;
            if (!per_cpu_) break;
          } else if (k >= 0) {
            seen_[size_t(k)] = 1;
          }
          continue;
        }
      }
      int r = parse_cpu_line(c, l);
      if (r == 0) {
        if (have_aggregate) break;  // cpu lines come first; the rest (intr, ctxt, ...) is not ours
        continue;
      }
      int k = kNoSlot;  // a malformed line, or a CPU without a channel
      if (r < 0) {
        bad = std::string_view(c.p, len);
      } else if (l.id < 0) {
        total_.update(l.ticks);
        have_aggregate = true;
        k = kAggregate;
      } else if (size_t(l.id) < slot_of_.size() && slot_of_[size_t(l.id)] >= 0) {
        k = slot_of_[size_t(l.id)];
        per_[size_t(k)].update(l.ticks);
        seen_[size_t(k)] = 1;
      }
      if (j < lines_.size())  // a malformed line is never matched (length 0): it is parsed, and reported, each time
        lines_[j++] = Line{r < 0 ? 0 : h ? h : line_hash(c.p, len), uint32_t(r < 0 ? 0 : len), k};
      if (k == kAggregate && !per_cpu_) break;
    }
    for (size_t i = j; i < lines_.size(); ++i) lines_[i].len = 0;  // places this read did not reach
    for (size_t k = 0; k < per_.size(); ++k)
      if (!seen_[k]) per_[k].invalidate();  // offline: re-prime when it comes back
    if (__builtin_expect(!bad.empty(), 0)) malformed(file_, bad, err);
    if (__builtin_expect(!have_aggregate, 0)) return no_aggregate(bad.empty(), err);
    if (out) {
      for (size_t i = 0; i < kModes + 1; ++i) out[i] = total_.last[i];
      seconds(total_, out + kModes + 1);
      double* cpus = out + 2 * kModes + 1;
      double* cpu_seconds = cpus + per_.size();
      for (size_t k = 0; k < per_.size(); ++k) {
        cpus[k] = seen_[k] ? per_[k].last[0] : kNaN;
        seconds(per_[k], cpu_seconds + k * kModes);  // offline: invalidated, NaN
      }
    }
    return true;
  }

 private:
  // A line's ticks by mode in seconds (USER_HZ), as last read; NaN before its first read. A field that went
  // backwards reads its new value (a counter reset, as Prometheus takes it).
  void seconds(const TickState& t, double* out) const {
    for (size_t i = 0; i < kModes; ++i) out[i] = t.valid ? double(t.prev[i]) / tick_hz_ : kNaN;
  }

  __attribute__((cold, noinline)) bool no_aggregate(bool say, std::string& err) const {
    if (say) err = file_.path() + ": no aggregate 'cpu' line";
    return false;
  }

  // The cpu line last read in each place (0: the aggregate's): its hash and length (0: none, or malformed) and the
  // slot it fed (kAggregate, a per_ index, kNoSlot).
  static constexpr int kAggregate = -1, kNoSlot = -2;
  struct Line {
    uint64_t hash = 0;
    uint32_t len = 0;
    int slot = kNoSlot;
  };
  std::vector<Line> lines_;
  bool per_cpu_ = false;
  std::vector<long> ids_;
  std::vector<int> slot_of_;
  double tick_hz_ = double(sysconf(_SC_CLK_TCK) > 0 ? sysconf(_SC_CLK_TCK) : 100);
  TickState total_;
  std::vector<TickState> per_;
  std::vector<char> seen_;
};

std::unique_ptr<Source> make_cpu_source() { return std::make_unique<CpuSource>(); }

}  // namespace

SYSPROF_SOURCE(cpu, make_cpu_source);

}  // namespace sysprof
