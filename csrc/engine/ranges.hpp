// The physical range of every channel: the bounds of each rule here, each channel's rule declared in the
// registry (sysprof/sampling/registry.py, ChannelSpec.range) and generated into gen/channels.hpp at build time
// (csrc/gen/gen_channels.py). Every value is NaN or inside its range; only limits may be +inf (no limit).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sources/source.hpp"

namespace sysprof {

// The registry's RANGES, by the same names (finite, percent, core_percent, ...).
enum class Range : uint8_t {
  kFinite,       // any finite value (and a name the registry does not declare)
  kPercent,      // [0, 100]
  kCorePercent,  // percent of one core: [0, 100 x online CPUs]
  kShare,        // [0, 1] (busy or stalled seconds per second)
  kNonNegative,  // finite >= 0: bytes, counts, totals, seconds, rates, watts, joules, hertz
  kLimit,        // >= 0 or +inf ("max": no limit)
  kCelsius,      // [-273.15, 1000]
};

// The rule the registry declares for a channel name, e.g. "cpu/3/percent" -> kPercent (the first pattern
// that matches, a <placeholder> standing for one path component); kFinite for a name it does not declare.
Range classify_channel(std::string_view name);
// "percent [0, 100]" etc.
const char* range_name(Range r);

class RangeRules {
 public:
  RangeRules() = default;
  RangeRules(const std::vector<std::string>& channels, double max_cores);
  size_t size() const { return rule_.size(); }
  Range rule(size_t i) const { return rule_[i]; }
  double lower(size_t i) const { return lo_[size_t(rule_[i])]; }
  double upper(size_t i) const { return hi_[size_t(rule_[i])]; }
  // nullptr if v is NaN or inside channel i's range, else the rule's name. (NaN compares false.)
  const char* violation(size_t i, double v) const {
    return v < lower(i) || v > upper(i) ? range_name(rule_[i]) : nullptr;
  }
  // Number of values of row[0, size()) outside their range; reads only. Each channel keeps one byte (its
  // rule) and the bounds are a table of kRules pairs, so the pass touches width bytes of rules and two
  // cache lines of bounds: on a cold cache (a tick after a 1 ms sleep) that is ~3 lines for 189 channels,
  // where a pair of doubles per channel was ~48. The double count keeps the loop branch-free.
  size_t count(const double* row) const {
    const Range* r = rule_.data();
    double n = 0;
    for (size_t i = 0, w = rule_.size(); i < w; ++i) {
      size_t k = size_t(r[i]);
      n += ((row[i] < lo_[k]) | (row[i] > hi_[k])) ? 1.0 : 0.0;
    }
    return size_t(n);
  }
  // Sets every out-of-range value of row[0, size()) to NaN; returns how many.
  size_t enforce(double* row) const;

 private:
  static constexpr size_t kRules = size_t(Range::kCelsius) + 1;
  std::vector<Range> rule_;
  double lo_[kRules] = {}, hi_[kRules] = {};  // inclusive bounds per rule; hi_ is +inf only for limits
};

}  // namespace sysprof
