#include "sources/registry.hpp"

#include <algorithm>

namespace sysprof {

std::vector<std::pair<std::string, SourceFactory>>& source_registry() {
  static std::vector<std::pair<std::string, SourceFactory>> registry;  // built before first use
  return registry;
}

SourceFactory find_source(const std::string& name) {
  for (const auto& [n, f] : source_registry())
    if (n == name) return f;
  return nullptr;
}

std::vector<std::string> source_names() {
  std::vector<std::string> names;
  for (const auto& entry : source_registry()) names.push_back(entry.first);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace sysprof
