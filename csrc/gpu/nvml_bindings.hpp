// gpu: the metric table (csrc/gpu/nvml_query.hpp) for Python, as _native.nvml_metrics(), so that
// tests/test_gpu.py can pin the pynvml twin (sysprof/sampling/portable/nvml_table.py) to it.
// A header, included by csrc/bindings.cpp only: the C++ sources build without pybind11.
#pragma once
#include <pybind11/pybind11.h>

#include "gpu/nvml_gpm.hpp"
#include "gpu/nvml_query.hpp"

namespace sysprof {

inline void bind_nvml(pybind11::module_& m) {
  namespace py = pybind11;
  m.def(
      "nvml_metrics",
      [] {
        py::list out;
        for (const nvml::MetricSpec& s : nvml::kMetricTable) {
          py::dict d;
          d["metric"] = s.key;
          d["call"] = s.call;
          d["field_id"] = s.field_id ? py::object(py::int_(s.field_id)) : py::object(py::none());
          d["scope"] = s.field_id ? py::object(py::int_(s.scope)) : py::object(py::none());
          d["fallback"] = s.fallback >= 0 ? py::object(py::str(nvml::kMetricTable[s.fallback].key)) : py::object(py::none());
          d["rule"] = nvml::rule_name(s.rule);
          py::list channels;
          for (int c : s.channels)
            if (c != nvml::kNoChannel) channels.append(nvml::kChannelNames[c]);
          d["channels"] = py::tuple(channels);
          d["nan_note"] = s.nan_note;
          d["slow"] = s.slow;
          out.append(d);
        }
        return out;
      },
      "The NVML metric table, in the order a reading asks: metric, call (NVML function or field), field_id "
      "and scope (None for a getter), fallback (the metric asked once this one is refused), rule, channels "
      "written, nan_note (what reads NaN once it and its fallback are refused), slow (read every kSlowNs, held "
      "in between).");
  m.def(
      "nvml_gpm_metrics",
      [] {
        py::list out;
        for (const nvml::GpmSpec& s : nvml::kGpmTable) {
          py::dict d;
          d["name"] = s.name;
          d["id"] = s.id;
          d["channel"] = nvml::kChannelNames[s.channel];
          d["scale"] = s.scale;
          d["stands_in_for"] =
              s.stands_in_for >= 0 ? py::object(py::str(nvml::kMetricTable[s.stands_in_for].key)) : py::object(py::none());
          out.append(d);
        }
        return out;
      },
      "The GPM metric table (csrc/gpu/nvml_gpm.cpp): name and id (NVML_GPM_METRIC_*), channel, scale, "
      "stands_in_for (the metric whose refusal makes it asked, or None).");
}

}  // namespace sysprof
