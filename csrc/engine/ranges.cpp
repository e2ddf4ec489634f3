#include "engine/ranges.hpp"

#include <cfloat>
#include <limits>
#include <unistd.h>

#include "gen/channels.hpp"

namespace sysprof {
namespace {

// name matches pattern: as many path components, each equal, or any non-empty one for a <placeholder>.
bool matches(std::string_view pattern, std::string_view name) {
  for (;;) {
    size_t p = pattern.find('/'), n = name.find('/');
    std::string_view pc = pattern.substr(0, p), nc = name.substr(0, n);
    bool placeholder = !pc.empty() && pc.front() == '<';
    if (placeholder ? nc.empty() : pc != nc) return false;
    if (p == std::string_view::npos || n == std::string_view::npos) return p == n;
    pattern.remove_prefix(p + 1);
    name.remove_prefix(n + 1);
  }
}

}  // namespace

Range classify_channel(std::string_view name) {
  for (const ChannelRange& c : kChannelRanges)
    if (matches(c.pattern, name)) return c.range;
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
