// The one way a string from the kernel, a file or the driver becomes a Python str: decoded as UTF-8 with every
// invalid byte replaced by U+FFFD. The kernel cuts a comm at 15 bytes, mid-character for a name of 8 or more
// Cyrillic, Greek or accented letters; interface, disk and driver names are bytes, not text. pybind11's own
// std::string caster decodes strictly (a UnicodeDecodeError), so the bindings return these instead.
// A header for csrc/bindings.cpp and csrc/gpu/nvml_bindings.hpp only: the C++ sources build without pybind11.
#pragma once
#include <pybind11/pybind11.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace sysprof {

inline pybind11::str py_text(std::string_view s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "replace");
  if (o == nullptr) throw pybind11::error_already_set();
  return pybind11::reinterpret_steal<pybind11::str>(o);
}

inline pybind11::list py_texts(const std::vector<std::string>& v) {
  pybind11::list out;
  for (const std::string& s : v) out.append(py_text(s));
  return out;
}

inline pybind11::dict py_text_map(const std::map<std::string, std::string>& m) {
  pybind11::dict out;
  for (const auto& [k, v] : m) out[py_text(k)] = py_text(v);
  return out;
}

}  // namespace sysprof
