// gpu: the metric tables as built (gen/gpu_metrics.hpp, from sysprof/sampling/gpu_metrics.py) for Python, as
// _native.nvml_metrics() and nvml_gpm_metrics(): benchmarks/gpu_check.py walks them; tests/test_gpu_health.py
// checks that the extension carries the table as it is now.
// A header, included by csrc/bindings.cpp only: the C++ sources build without pybind11.
#pragma once
#include <pybind11/pybind11.h>

#include "gpu/nvml_gpm.hpp"
#include "gpu/nvml_query.hpp"
#include "gpu/nvml_samples.hpp"
#include "py_text.hpp"

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
          d["rule"] = nvml::kRuleNames[s.rule];
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
  m.def(
      "nvml_drain_samples",
      [](uint64_t token) {
        std::shared_ptr<nvml::SampleBuffer> b = nvml::find_samples(token);
        py::dict out;
        if (!b) return out;
        std::vector<nvml::DriverSample> got;
        uint64_t dropped = 0;
        {
          py::gil_scoped_release unlocked;
          b->take(got, dropped);
        }
        py::list series, index, t_ns, values;
        for (const std::string& s : b->series()) series.append(py_text(s));
        for (const nvml::DriverSample& x : got) {
          index.append(x.series);
          t_ns.append(x.t_ns);
          values.append(x.value);
        }
        py::dict absent;
        for (const auto& kv : b->absent()) absent[py_text(kv.first)] = py_text(kv.second);
        out["series"] = series;
        out["index"] = index;
        out["t_ns"] = t_ns;
        out["values"] = values;
        out["dropped"] = dropped;
        out["absent"] = absent;
        int64_t cpu_ns = 0;
        uint64_t device_reads = 0;
        b->cost(cpu_ns, device_reads);
        out["read_cpu_ns"] = cpu_ns;
        out["device_reads"] = device_reads;
        return out;
      },
      "The driver samples buffered since the last call by the reader whose devices carry `driver_samples` == "
      "token (csrc/gpu/nvml_samples.hpp): series names, and per sample its series index, wall-clock ns and value "
      "in base units; dropped (oldest, the buffer was full) since the last call; absent: series -> why; "
      "read_cpu_ns and device_reads: the reader thread's CPU in samples reads so far, and the device reads it made. "
      "{} once the reader is gone.", py::arg("token"));
}

}  // namespace sysprof
