// Python bindings. Every call that waits or copies releases the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "sampler.hpp"

namespace py = pybind11;
using sysprof::Config;
using sysprof::Sampler;

PYBIND11_MODULE(_native, m) {
  m.doc() = "sysprof native sampler: /proc readers, SPSC ring buffer and sampling thread";

  py::class_<Sampler>(m, "NativeSampler")
      .def(py::init([](int64_t interval_ns, size_t capacity, bool cpu, bool per_cpu, bool memory, bool disk, bool net,
                       bool load, bool process, int64_t pid, std::string proc_root, std::string sys_root, bool gpu,
                       bool pressure, bool cgroup, bool process_tree) {
             Config c;
             c.interval_ns = interval_ns;
             c.capacity = capacity;
             c.cpu = cpu, c.per_cpu = per_cpu, c.memory = memory, c.disk = disk, c.net = net;
             c.load = load, c.process = process, c.gpu = gpu;
             c.pressure = pressure, c.cgroup = cgroup, c.process_tree = process_tree;
             c.pid = pid;
             c.proc_root = std::move(proc_root);
             c.sys_root = std::move(sys_root);
             py::gil_scoped_release nogil;
             return new Sampler(c);
           }),
           py::arg("interval_ns"), py::arg("capacity"), py::arg("cpu"), py::arg("per_cpu"), py::arg("memory"),
           py::arg("disk"), py::arg("net"), py::arg("load"), py::arg("process"), py::arg("pid"),
           py::arg("proc_root"), py::arg("sys_root"), py::arg("gpu"), py::arg("pressure") = false,
           py::arg("cgroup") = false, py::arg("process_tree") = false)
      .def_property_readonly("channels", [](const Sampler& s) { return s.channels(); })
      .def_property_readonly("errors", &Sampler::errors)
      .def_property_readonly("devices", &Sampler::devices)
      .def_property_readonly("running", &Sampler::running)
      .def("start", &Sampler::start, py::call_guard<py::gil_scoped_release>())
      .def("stop", &Sampler::stop, py::call_guard<py::gil_scoped_release>())
      .def("sample",
           [](Sampler& s) {
             py::array_t<double> row{py::ssize_t(s.channels().size())};
             double* p = row.mutable_data();
             int64_t ts;
             {
               py::gil_scoped_release nogil;
               ts = s.sample_now(p);
             }
             return py::make_tuple(ts, row);
           })
      .def(
          "drain",
          [](Sampler& s, py::ssize_t max_rows) -> py::tuple {
            size_t n = s.buffered();
            if (max_rows >= 0) n = std::min(n, size_t(max_rows));
            size_t w = s.channels().size();
            py::array_t<int64_t> ts{py::ssize_t(n)};
            py::array_t<double> values({py::ssize_t(n), py::ssize_t(w)});
            int64_t* tp = ts.mutable_data();
            double* vp = values.mutable_data();
            size_t got;
            {
              // The consumer lock is taken without the GIL, so no thread waits on one holding the other.
              py::gil_scoped_release nogil;
              std::lock_guard<std::mutex> g(s.drain_mutex());
              got = s.drain(n, tp, vp);
            }
            if (got < n) {  // another thread drained in between
              py::slice rows(0, py::ssize_t(got), 1);
              return py::make_tuple(ts[rows], values[py::make_tuple(rows, py::slice(0, py::ssize_t(w), 1))]);
            }
            return py::make_tuple(ts, values);
          },
          py::arg("max_rows") = -1)
      .def_property_readonly("stats", [](const Sampler& s) {
        Sampler::Stats st = s.stats();
        py::dict d;
        d["taken"] = st.taken;
        d["dropped"] = st.dropped;
        d["drained"] = st.drained;
        d["buffered"] = st.buffered;
        d["missed_deadlines"] = st.missed_deadlines;
        d["sample_ns_mean"] = st.sample_ns_mean;
        d["sample_ns_p99"] = st.sample_ns_p99;
        d["sample_ns_max"] = st.sample_ns_max;
        return d;
      });

  // Test hook for tests/test_ranges.py: (rule names, violation or None per value, enforced values).
  m.def("_check_ranges", [](const std::vector<std::string>& channels, double max_cores, std::vector<double> values) {
    sysprof::RangeRules rules(channels, max_cores);
    if (values.size() != rules.size()) throw std::invalid_argument("one value per channel");
    py::list names, why;
    for (size_t i = 0; i < rules.size(); ++i) {
      names.append(sysprof::range_name(rules.rule(i)));
      const char* v = rules.violation(i, values[i]);
      why.append(v ? py::object(py::str(v)) : py::object(py::none()));
    }
    size_t n = rules.enforce(values.data());
    return py::make_tuple(names, why, values, n);
  });
}
