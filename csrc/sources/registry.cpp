#include "sources/registry.hpp"

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

}  // namespace sysprof
