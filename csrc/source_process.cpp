// /proc/<pid>/stat of one process (this one by default): RSS, CPU time and threads.
#include <cstring>
#include <time.h>
#include <unistd.h>

#include "file_source.hpp"
#include "proc_stat.hpp"

namespace sysprof {
namespace {

constexpr const char* kChannels[] = {"process/rss_bytes", "process/vms_bytes", "process/cpu_percent",
                                     "process/cpu_seconds_total", "process/num_threads"};

class ProcessSource final : public FileSource {
 public:
  ProcessSource() { width_ = 5; }
  const char* name() const override { return "process"; }

 protected:
  std::string path(const Config& cfg) const override {
    std::string rel = cfg.pid < 0 ? "self/stat" : std::to_string(cfg.pid) + "/stat";
    return join(cfg.proc_root, rel.c_str());
  }

  // On the live /proc, CPU time comes from the process's CPU-time clock (nanoseconds, summed over
  // its threads by the kernel) instead of stat's utime+stime, which advance in whole USER_HZ ticks.
  // Fixture trees use the ticks.
  bool discover(const Config& cfg, std::string&) override {
    use_clock_ = cfg.proc_root == "/proc" &&
                 (cfg.pid < 0 ? (clock_ = CLOCK_PROCESS_CPUTIME_ID, true)
                              : clock_getcpuclockid(pid_t(cfg.pid), &clock_) == 0);
    return true;
  }
  void layout(std::vector<std::string>& channels) override {
    for (auto c : kChannels) channels.push_back(c);
  }
  std::unique_ptr<FileSource> fresh() const override {
    auto s = std::make_unique<ProcessSource>();
    s->use_clock_ = use_clock_;
    s->clock_ = clock_;
    return s;
  }

  bool parse(int64_t mono_ns, double* out, std::string& err) override {
    ProcStat s;
    if (!parse_stat(file_.data(), file_.size(), s)) {
      err = file_.path() + ": malformed";
      return false;
    }
    // CPU time in ns: the clock where available, else ticks.
    timespec ts;
    bool clock_ok = use_clock_ && clock_gettime(clock_, &ts) == 0;
    // Pair the CPU clock with a wall reading taken right beside it, not the tick's start: a thread
    // preempted in between would otherwise see more CPU time than wall time.
    if (clock_ok) mono_ns = mono_now_ns();
    int64_t cpu_ns = clock_ok ? int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec
                              : int64_t(double(s.utime + s.stime) * 1e9 / tick_hz_);
    // An exiting process drops its memory map before it turns zombie (vsize 0; only kernel threads
    // have none otherwise): its memory and CPU read NaN then, never 0.
    bool gone = s.gone();
    double cpu_rate = cpu_.update(mono_ns, cpu_ns);  // ns of CPU per s
    if (out) {
      out[0] = gone ? kNaN : double(s.rss) * page_bytes_;
      out[1] = gone ? kNaN : double(s.vsize);
      out[2] = gone ? kNaN : cpu_rate / 1e7;  // percent of one core
      out[3] = clock_ok ? double(cpu_ns) / 1e9 : double(s.utime + s.stime) / tick_hz_;
      out[4] = gone ? kNaN : double(s.num_threads);
    }
    return true;
  }

 private:
  bool use_clock_ = false;
  clockid_t clock_ = CLOCK_PROCESS_CPUTIME_ID;
  TrailingRate cpu_;
  double tick_hz_ = double(sysconf(_SC_CLK_TCK));
  double page_bytes_ = double(sysconf(_SC_PAGESIZE));
};

}  // namespace

std::unique_ptr<Source> make_process_source() { return std::make_unique<ProcessSource>(); }

}  // namespace sysprof
