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

#include "io/scan.hpp"

namespace sysprof {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Config {
  int64_t interval_ns = 1000000;
  size_t capacity = 65536;
  bool cpu = true, per_cpu = false, memory = true, disk = true, net = true;
  bool load = false, process = false, process_tree = false, pressure = false, cgroup = false, gpu = false;
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
  // Static facts about discovered devices (e.g. GPU name and UUID); empty for most sources.
  virtual std::vector<std::map<std::string, std::string>> devices() const { return {}; }
  // Called before the sampler thread is joined (e.g. to stop waiting on a hung driver call).
  virtual void shutdown() {}

 protected:
  size_t width_ = 0;
};

// Sources by name: cpu, memory (with swap), disk, net, load, process, process_tree, pressure, cgroup.
std::unique_ptr<Source> make_cpu_source();
std::unique_ptr<Source> make_meminfo_source();
std::unique_ptr<Source> make_diskstats_source();
std::unique_ptr<Source> make_netdev_source();
std::unique_ptr<Source> make_loadavg_source();
std::unique_ptr<Source> make_process_source();
std::unique_ptr<Source> make_process_tree_source();  // the process and its descendants, summed
std::unique_ptr<Source> make_pressure_source();  // /proc/pressure/{cpu,memory,io}
std::unique_ptr<Source> make_cgroup_source();    // cgroup v2 files of the sampled process
std::unique_ptr<Source> make_nvml_source();  // gpu: NVML loaded with dlopen at run time

// A monotonically increasing kernel counter. Unwraps 32-bit wrap-around (value before < 2^32,
// value after < before); any other decrease is a reset and gives a delta of 0.
struct Counter {
  uint64_t prev = 0;
  uint64_t offset = 0;  // added by unwrapping, keeps the total monotonic
  bool valid = false;

  // Returns the delta since the previous update (0 on the first one).
  uint64_t update(uint64_t raw) {
    if (!valid) {
      prev = raw;
      valid = true;
      return 0;
    }
    uint64_t d = 0;
    if (raw >= prev) {
      d = raw - prev;
    } else if (prev < (uint64_t(1) << 32)) {
      d = raw + (uint64_t(1) << 32) - prev;
      offset += uint64_t(1) << 32;
    }
    prev = raw;
    return d;
  }
  double total() const { return double(sat_add(prev, offset)); }
};

// A 64-bit kernel total that never wraps (PSI stall time, cgroup usage and bytes): a decrease can
// only be a reset (or a device leaving a sum) and gives a delta of 0, never a 2^32 unwrap.
struct Total64 {
  uint64_t prev = 0;
  bool valid = false;
  uint64_t update(uint64_t raw) {
    uint64_t d = valid && raw >= prev ? raw - prev : 0;
    prev = raw;
    valid = true;
    return d;
  }
};

inline int64_t clock_ns(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
inline int64_t mono_now_ns() { return clock_ns(CLOCK_MONOTONIC); }
inline int64_t wall_now_ns() { return clock_ns(CLOCK_REALTIME); }

inline double rate(uint64_t delta, double dt_s) { return dt_s > 0 ? double(delta) / dt_s : kNaN; }

// Per-second rate of a cumulative time counter that the kernel advances in scheduler-tick steps
// (process and cgroup CPU time, PSI stall time): taken over the trailing kWindowNs, or the last
// interval when that is longer, so those steps do not read as 0 % then 1000 % at millisecond
// intervals. NaN until the history spans the window. Unsigned end to end: a value that went down
// (a reset) gives 0, and no value, however corrupt, can overflow. Fixed storage: no allocation.
class TrailingRate {
 public:
  static constexpr int64_t kWindowNs = 20000000;
  double update(int64_t mono_ns, uint64_t value) {
    const Reading* then = nullptr;
    for (size_t k = 0; k < n_; ++k) {
      const Reading& r = hist_[(head_ + kHist - 1 - k) % kHist];
      if (mono_ns - r.mono_ns >= kWindowNs) {
        then = &r;
        break;
      }
    }
    if (!then && n_ == kHist) then = &hist_[head_];  // history shorter than the window: use it all
    double out = kNaN;
    if (then && mono_ns > then->mono_ns)
      out = double(value >= then->value ? value - then->value : 0) * 1e9 / double(mono_ns - then->mono_ns);
    hist_[head_] = Reading{mono_ns, value};
    head_ = (head_ + 1) % kHist;
    if (n_ < kHist) ++n_;
    return out;
  }
  void reset() { n_ = 0; }

 private:
  struct Reading {
    int64_t mono_ns = 0;
    uint64_t value = 0;
  };
  static constexpr size_t kHist = 256;  // spans the window down to ~80 us intervals
  Reading hist_[kHist];
  size_t head_ = 0, n_ = 0;
};

// Online CPUs: <sys_root>/devices/system/cpu/online when readable, else the cpuN lines of
// <proc_root>/stat, else sysconf(_SC_NPROCESSORS_ONLN); at least 1. Read once per call (at open),
// never per tick. The bound of every percent-of-one-core channel is 100 x a count of this kind.
unsigned online_cpus(const Config& cfg);

// A percent of one core, bounded by what `cpus` cores can do: the kernel adds CPU time in
// scheduler-tick steps, so a short window can see more than the cores could run. NaN stays NaN.
inline double cap_core_percent(double pct, unsigned cpus) {
  double cap = 100.0 * double(cpus);
  return pct > cap ? cap : pct;
}

// 100 * part / whole for 0 <= part <= whole: in [0, 100] even where the two roundings of the double
// arithmetic would land a hair above 100 (parts near 2^64, or 53-bit rounding of large totals).
inline double percent_of(double part, double whole) {
  if (!(whole > 0)) return kNaN;
  double p = 100.0 * part / whole;
  return p > 100.0 ? 100.0 : p < 0.0 ? 0.0 : p;
}

// A count the kernel prints as signed: negative is corrupt, NaN.
inline double count_or_nan(int64_t v) { return v < 0 ? kNaN : double(v); }

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
