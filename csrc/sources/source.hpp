// A source reads one /proc file (or NVML) and fills a fixed slice of each sample row.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <time.h>
#include <vector>

#include "derive/rules.hpp"
#include "io/scan.hpp"

namespace sysprof {

struct Config {
  int64_t interval_ns = 1000000;
  size_t capacity = 65536;  // ring rows
  size_t max_ring_bytes = 0;  // non-zero: fewer rows where `capacity` of them would hold more bytes (at least 2)
  // Registered source names (sources/registry.hpp), in construction order = row order.
  std::vector<std::string> sources = {"cpu", "memory", "disk", "net"};
  // Per-source intervals, aligned with `sources` (shorter, or 0: that source reads at interval_ns).
  // Each is at least interval_ns and is rounded to the nearest whole number of intervals; a source not
  // due at a tick keeps its slice of the previous row (engine/Collector). A source's open() and
  // clone() see its own (rounded) interval as interval_ns.
  std::vector<int64_t> intervals_ns;
  // Per source, aligned with `sources`: 1 where the user gave its interval (the budget stretches it last).
  std::vector<char> intervals_given;
  // The CPU budget of sysprof's sampling threads, a fraction of one core (engine/budget.hpp); 0: none.
  double budget = 0;
  // Tests: per source, a fixed CPU per read (ns) the budget decides by instead of what it measures; empty: measured.
  std::vector<int64_t> budget_test_cost_ns;
  // Boolean options of the sources that are on (e.g. "per_cpu").
  std::vector<std::string> options;
  bool option(const char* name) const {
    for (const auto& o : options)
      if (o == name) return true;
    return false;
  }
  int64_t pid = -1;  // -1: this process (/proc/self); the process_tree root; whose cgroup the cgroup source reads
  std::string proc_root = "/proc";
  std::string sys_root = "/sys";
};

class Source {
 public:
  virtual ~Source() = default;
  virtual const char* name() const = 0;
  // Opens files and discovers devices; appends this source's channel names. False: source unusable.
  virtual bool open(const Config& cfg, std::vector<std::string>& channels, std::string& err) = 0;
  // A fresh instance with the same device layout (same channels), its own files and baselines.
  virtual std::unique_ptr<Source> clone(const Config& cfg, std::string& err) const = 0;
  // Reads and fills out[0, width()). mono_ns: CLOCK_MONOTONIC of this tick, for rates.
  // On failure fills NaN, sets err and returns false. Must not allocate on success.
  virtual bool sample(int64_t mono_ns, double* out, std::string& err) = 0;
  size_t width() const { return width_; }
  // Set by the Collector before each sample(): `out` holds what this source's previous sample() wrote (the
  // sampling thread's one row buffer). A source may then leave values that have not changed as they are;
  // false (the first row of a run, sample_now()'s fresh buffers): write every value.
  bool row_kept = false;
  // Static facts about discovered devices (e.g. GPU name and UUID); empty for most sources.
  virtual std::vector<std::map<std::string, std::string>> devices() const { return {}; }
  // Called before the sampler thread is joined (e.g. to stop waiting on a hung driver call).
  virtual void shutdown() {}
  // The CPU time (ns) of the threads this source runs besides the sampling thread (the NVML reader, process_tree's
  // smaps reader), for the budget (engine/budget.hpp); 0: none. Any thread.
  virtual int64_t helper_cpu_ns() const { return 0; }
  // Whether that helper reads at the source's interval, following retime(): its work then shrinks as the interval
  // grows. Otherwise the budget counts it as a cost no interval reduces.
  virtual bool helper_follows() const { return false; }
  // The source's interval is now interval_ns (the budget stretched or relaxed it); the sampling thread.
  virtual void retime(int64_t interval_ns) { (void)interval_ns; }

 protected:
  size_t width_ = 0;
};

inline int64_t clock_ns(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
inline int64_t mono_now_ns() { return clock_ns(CLOCK_MONOTONIC); }
// A thread's CPU time (pthread_getcpuclockid's clock), or `otherwise` where it cannot be read (the thread ended).
inline int64_t cpu_clock_ns(clockid_t id, int64_t otherwise) {
  timespec ts;
  if (clock_gettime(id, &ts) != 0) return otherwise;
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
inline int64_t wall_now_ns() { return clock_ns(CLOCK_REALTIME); }

// Online CPUs: <sys_root>/devices/system/cpu/online when readable, else the cpuN lines of
// <proc_root>/stat, else sysconf(_SC_NPROCESSORS_ONLN); at least 1. Read once per call (at open),
// never per tick. The bound of every percent-of-one-core channel is 100 x a count of this kind.
unsigned online_cpus(const Config& cfg);
// The CPUs process `pid` may run on: its affinity (sched_getaffinity) where fewer than `online`, else
// `online`. A syscall: re-read about once a second, never every tick.
unsigned affinity_cpus(int64_t pid, unsigned online);

// How many fork()s separate this process from the one that loaded the extension (pthread_atfork):
// an object made in an earlier generation was inherited, and the threads it owned are not here.
uint64_t fork_generation();

inline void fill_nan(double* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = kNaN;
}

// Finds a named device among those discovered at open. /proc lists devices in a stable order, so
// the one after the previous match is tried first: O(1) per line in the steady state.
template <class Device>
Device* find_device(std::vector<Device>& devices, std::string_view name, size_t& hint) {
  if (hint < devices.size() && devices[hint].name == name) return &devices[hint++];
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].name == name) {
      hint = i + 1;
      return &devices[i];
    }
  return nullptr;
}

// Path under a root: root + "/" + rel, without doubling the slash.
inline std::string join(const std::string& root, const char* rel) {
  if (!root.empty() && root.back() == '/') return root + rel;
  return root + "/" + rel;
}

}  // namespace sysprof
