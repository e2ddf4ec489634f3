#include "engine/ranges.hpp"

#include <cfloat>
#include <limits>
#include <unistd.h>

#include "io/scan.hpp"

namespace sysprof {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace

// Names are "<source>/<device...>/<field>"; the rules read the field (the part after the last '/'),
// so a device name (a disk "foo_percent", "cciss/c0d0") never decides a rule. Most specific first.
Range classify_channel(std::string_view name) {
  size_t slash = name.rfind('/');
  std::string_view field = slash == std::string_view::npos ? name : name.substr(slash + 1);
  std::string_view source = slash == std::string_view::npos ? std::string_view() : name.substr(0, name.find('/'));
  // cgroup memory.max and cpu.max: "max" reads +inf
  if (ends_with(field, "_max_bytes") || ends_with(field, "_limit_cores")) return Range::kLimit;
  if (ends_with(field, "_celsius")) return Range::kCelsius;
  // a process tree's run delay per second is summed over its threads: up to their number
  if (field == "run_delay_seconds_per_second") return Range::kNonNegative;
  // disk busy_time and PSI stall seconds per second of wall time
  if (ends_with(field, "_seconds_per_second")) return Range::kShare;
  // percent of one core: the CPU time of a process, a process tree or a cgroup, which may run on every
  // online CPU (every such channel is named cpu_percent; the CPUs' own share is cpu/percent)
  if (field == "cpu_percent") return Range::kCorePercent;
  if (field == "percent" || ends_with(field, "_percent")) return Range::kPercent;
  for (std::string_view unit : {"_bytes", "_count", "_total", "_seconds", "_per_second", "_watts", "_joules", "_hz"})
    if (ends_with(field, unit)) return Range::kNonNegative;
  // net/<nic>/{bytes,packets}_{recv,sent}, {errors,drops}_{in,out}; load averages and task counts;
  // num_threads, num_processes, num_unslotted, procs_blocked; a process_tree slot's pid
  if (source == "net" || source == "load" || starts_with(field, "num_") || starts_with(field, "procs_") ||
      field == "pid")
    return Range::kNonNegative;
  return Range::kFinite;
}

const char* range_name(Range r) {
  switch (r) {
    case Range::kPercent: return "percent [0, 100]";
    case Range::kCorePercent: return "percent of one core [0, 100 x online CPUs]";
    case Range::kShare: return "share [0, 1]";
    case Range::kNonNegative: return "non-negative finite";
    case Range::kLimit: return "limit (>= 0 or +inf)";
    case Range::kCelsius: return "celsius [-273.15, 1000]";
    case Range::kFinite: break;
  }
  return "finite";
}

RangeRules::RangeRules(const std::vector<std::string>& channels, double max_cores) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < kRules; ++k) {
    double lo = 0, hi = DBL_MAX;
    switch (Range(k)) {
      case Range::kFinite: lo = -DBL_MAX; break;
      case Range::kPercent: hi = 100; break;
      case Range::kCorePercent: hi = 100 * (max_cores >= 1 ? max_cores : 1); break;
      case Range::kShare: hi = 1; break;
      case Range::kNonNegative: break;
      case Range::kLimit: hi = kInf; break;
      case Range::kCelsius: lo = -273.15, hi = 1000; break;
    }
    lo_[k] = lo;
    hi_[k] = hi;
  }
  rule_.reserve(channels.size());
  for (const auto& name : channels) rule_.push_back(classify_channel(name));
}

size_t RangeRules::enforce(double* row) const {
  size_t n = 0;
  for (size_t i = 0; i < rule_.size(); ++i)
    if (row[i] < lower(i) || row[i] > upper(i)) {
      row[i] = std::numeric_limits<double>::quiet_NaN();
      ++n;
    }
  return n;
}

}  // namespace sysprof
