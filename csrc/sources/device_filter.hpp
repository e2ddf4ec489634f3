// Which devices a per-device source (disk, net) samples, and the cheap skip of the lines it does not.
//
// The rule lives in Python (sysprof/sampling/devices.py): it resolves the user's globs and the default exclusions
// (loop, ram, zram disks; lo) into an ordered list of (glob, keep) per source, first match wins, and passes it
// as Config options "device:<source>:+<glob>" / "device:<source>:-<glob>". No option: every device is kept.
#pragma once
#include <fnmatch.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sources/source.hpp"

namespace sysprof {

class DeviceRules {
 public:
  DeviceRules(const Config& cfg, const char* source) {
    std::string prefix = std::string("device:") + source + ":";
    for (const auto& o : cfg.options)
      if (o.size() > prefix.size() + 1 && o.compare(0, prefix.size(), prefix) == 0)
        rules_.emplace_back(o.substr(prefix.size() + 1), o[prefix.size()] == '+');
  }
  // Called at discovery only (fnmatch per rule), never per tick.
  bool keeps(const std::string& name) const {
    for (const auto& r : rules_)
      if (::fnmatch(r.first.c_str(), name.c_str(), 0) == 0) return r.second;
    return true;
  }

 private:
  std::vector<std::pair<std::string, bool>> rules_;
};

// The names of the device lines found at discovery that are not sampled (left out by the rules, partitions):
// each tick their lines are dropped once their name is read, before any number is parsed. /proc lists devices
// in a stable order, so the name after the previous match is tried first: one compare per skipped line.
class SkippedNames {
 public:
  void add(std::string_view name) { names_.emplace_back(name); }
  bool empty() const { return names_.empty(); }
  bool contains(std::string_view name) {
    size_t n = names_.size();
    if (n == 0) return false;
    if (hint_ < n && names_[hint_] == name) {
      hint_ = hint_ + 1 == n ? 0 : hint_ + 1;
      return true;
    }
    for (size_t i = 0; i < n; ++i)
      if (names_[i] == name) {
        hint_ = i + 1 == n ? 0 : i + 1;
        return true;
      }
    return false;
  }

 private:
  std::vector<std::string> names_;
  size_t hint_ = 0;
};

}  // namespace sysprof
