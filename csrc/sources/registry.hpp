// The native half of the source registry: each source file registers its factory under the source's
// name with one line, SYSPROF_SOURCE(name, factory). The list of sources, their options, channels
// and units is sysprof/sampling/registry.py; a test checks that both name the same sources.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sources/source.hpp"

namespace sysprof {

using SourceFactory = std::unique_ptr<Source> (*)();

// Registered sources, in registration order (static initialization: the order is unspecified).
std::vector<std::pair<std::string, SourceFactory>>& source_registry();
// The factory of a registered source, or nullptr.
SourceFactory find_source(const std::string& name);
// The registered names, sorted.
std::vector<std::string> source_names();

struct SourceRegistration {
  SourceRegistration(const char* name, SourceFactory factory) { source_registry().emplace_back(name, factory); }
};

}  // namespace sysprof

#define SYSPROF_SOURCE(name, factory) \
  static const ::sysprof::SourceRegistration sysprof_source_registration_##name(#name, factory)
