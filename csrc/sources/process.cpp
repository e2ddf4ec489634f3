// /proc/<pid>/stat of one process (this one by default): RSS, CPU time and threads.
#include <cstring>
#include <time.h>
#include <unistd.h>

#include "sources/file_source.hpp"
#include "sources/registry.hpp"
#include "parse/pid_stat.hpp"

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
    live_ = cfg.proc_root == "/proc";
    use_clock_ = live_ && (cfg.pid < 0 ? (clock_ = CLOCK_PROCESS_CPUTIME_ID, true)
                                       : clock_getcpuclockid(pid_t(cfg.pid), &clock_) == 0);
    affinity_pid_ = cfg.pid < 0 ? pid_t(getpid()) : pid_t(cfg.pid);
    online_ = online_cpus(cfg);
    cpus_ = online_;
    return true;
  }
  void layout(std::vector<std::string>& channels) override {
    for (auto c : kChannels) channels.push_back(c);
  }
  std::unique_ptr<FileSource> fresh() const override {
    auto s = std::make_unique<ProcessSource>();
    s->use_clock_ = use_clock_;
    s->clock_ = clock_;
    s->live_ = live_;
    s->affinity_pid_ = affinity_pid_;
    s->online_ = s->cpus_ = online_;
    return s;
  }

  bool parse(int64_t mono_ns, double* out, std::string& err) override {
    ProcStat s;
    if (!parse_pid_stat(file_.data(), file_.size(), s)) {
      err = file_.path() + ": malformed";
      return false;
    }
    // CPU time in ns: the clock where available, else ticks (in integer arithmetic, saturating).
    timespec ts;
    bool clock_ok = use_clock_ && clock_gettime(clock_, &ts) == 0;
    // Pair the CPU clock with a wall reading taken right beside it, not the tick's start: a thread
    // preempted in between would otherwise see more CPU time than wall time.
    if (clock_ok) mono_ns = mono_now_ns();
    uint64_t cpu_ns = clock_ok ? uint64_t(ts.tv_sec) * 1000000000 + uint64_t(ts.tv_nsec)
                               : ticks_to_ns(s.cpu_ticks(), tick_hz_);
    // An exiting process drops its memory map before it turns zombie (vsize 0; only kernel threads
    // have none otherwise): its memory and CPU read NaN then, never 0.
    bool gone = s.gone();
    double cpu_rate = cpu_.update(mono_ns, cpu_ns);  // ns of CPU per s
    if (live_ && mono_ns >= next_affinity_ns_) refresh_cpus(mono_ns);
    if (out) {
      out[0] = gone || s.rss < 0 ? kNaN : double(s.rss) * page_bytes_;
      out[1] = gone ? kNaN : double(s.vsize);
      out[2] = gone ? kNaN : cap_core_percent(cpu_rate / 1e7, cpus_);  // percent of one core
      out[3] = clock_ok ? double(cpu_ns) / 1e9 : double(s.cpu_ticks()) / double(tick_hz_);
      out[4] = gone ? kNaN : count_or_nan(s.num_threads);
    }
    return true;
  }

 private:
  bool use_clock_ = false;
  clockid_t clock_ = CLOCK_PROCESS_CPUTIME_ID;
  // The CPUs it can run on: the online ones, and on the live /proc its affinity where fewer (re-read
  // once a second: taskset and numactl change it at run time). They bound cpu_percent.
  void refresh_cpus(int64_t mono_ns) {
    next_affinity_ns_ = mono_ns + 1000000000;
    cpus_ = affinity_cpus(affinity_pid_, online_);
  }

  bool live_ = false;
  pid_t affinity_pid_ = 0;
  unsigned online_ = 1, cpus_ = 1;
  int64_t next_affinity_ns_ = 0;
  TrailingRate cpu_;
  uint64_t tick_hz_ = uint64_t(sysconf(_SC_CLK_TCK));
  double page_bytes_ = double(sysconf(_SC_PAGESIZE));
};

std::unique_ptr<Source> make_process_source() { return std::make_unique<ProcessSource>(); }

}  // namespace

SYSPROF_SOURCE(process, make_process_source);

}  // namespace sysprof
