// /proc/<pid>/stat of one process (this one by default): RSS, CPU time and threads.
// Field numbers are proc.rst's Table 1-4 (1-based; comm is field 2, state field 3).
#include <cstring>
#include <unistd.h>

#include "file_source.hpp"

namespace sysprof {
namespace {

constexpr const char* kChannels[] = {"process/rss_bytes", "process/vms_bytes", "process/cpu_percent",
                                     "process/cpu_seconds_total", "process/num_threads"};

struct Stat {
  uint64_t utime, stime, vsize, rss;
  int64_t num_threads;
};

bool parse_stat(const char* p, size_t n, Stat& s) {
  // comm may itself hold ") " and blanks: the fields resume after the LAST ')'.
  const char* close = nullptr;
  for (const char* q = p + n; q > p;)
    if (*--q == ')') {
      close = q;
      break;
    }
  if (!close) return false;
  Cursor c{close + 1, p + n};
  if (next_token(c).empty()) return false;  // field 3, state
  int64_t i;
  for (int field = 4; field <= 24; ++field) {
    switch (field) {
      case 14: if (!parse_u64(c, s.utime)) return false; break;
      case 15: if (!parse_u64(c, s.stime)) return false; break;
      case 20: if (!parse_i64(c, s.num_threads)) return false; break;
      case 23: if (!parse_u64(c, s.vsize)) return false; break;
      case 24: if (!parse_i64(c, i)) return false; s.rss = i > 0 ? uint64_t(i) : 0; break;
      default: if (!parse_i64(c, i)) return false;
    }
  }
  return true;
}

class ProcessSource final : public FileSource {
 public:
  ProcessSource() { width_ = 5; }
  const char* name() const override { return "process"; }

 protected:
  std::string path(const Config& cfg) const override {
    std::string rel = cfg.pid < 0 ? "self/stat" : std::to_string(cfg.pid) + "/stat";
    return join(cfg.proc_root, rel.c_str());
  }
  void layout(std::vector<std::string>& channels) override {
    for (auto c : kChannels) channels.push_back(c);
  }
  std::unique_ptr<FileSource> fresh() const override { return std::make_unique<ProcessSource>(); }

  bool parse(int64_t mono_ns, double* out, std::string& err) override {
    Stat s;
    if (!parse_stat(file_.data(), file_.size(), s)) {
      err = file_.path() + ": malformed";
      return false;
    }
    uint64_t ticks = s.utime + s.stime;
    if (out) {
      double dt = double(mono_ns - prev_ns_) * 1e-9;
      uint64_t d = ticks >= prev_ticks_ ? ticks - prev_ticks_ : 0;
      out[0] = double(s.rss) * page_bytes_;
      out[1] = double(s.vsize);
      out[2] = dt > 0 && prev_ns_ ? 100.0 * double(d) / tick_hz_ / dt : kNaN;
      out[3] = double(ticks) / tick_hz_;
      out[4] = double(s.num_threads);
    }
    prev_ticks_ = ticks;
    prev_ns_ = mono_ns;
    return true;
  }

 private:
  uint64_t prev_ticks_ = 0;
  int64_t prev_ns_ = 0;
  double tick_hz_ = double(sysconf(_SC_CLK_TCK));
  double page_bytes_ = double(sysconf(_SC_PAGESIZE));
};

}  // namespace

std::unique_ptr<Source> make_process_source() { return std::make_unique<ProcessSource>(); }

}  // namespace sysprof
