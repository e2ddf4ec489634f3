// Python bindings. Every call that waits or copies releases the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <structmember.h>

#include <algorithm>
#include <exception>
#include <map>
#include <type_traits>
#include <vector>

#include "engine/sampler.hpp"
#include "gpu/nvml_bindings.hpp"
#include "markers/marker_ring.hpp"
#include "py_text.hpp"
#include "sources/registry.hpp"

namespace py = pybind11;
using sysprof::Config;
using sysprof::Sampler;

namespace {

// Retakes the GIL. Not a destructor, and not noexcept, on purpose: while the interpreter finalizes,
// CPython ends a daemon thread that asks for the GIL with pthread_exit(), whose forced unwind must
// pass through every frame up to the thread's start. Started in a noexcept frame (such as
// gil_scoped_release's destructor) it calls std::terminate: SIGABRT at the exit of the host program.
// The frames it unwinds own no Python object (see without_gil's callers), so nothing is released
// without the GIL on the way.
void retake_gil(PyThreadState* ts) { PyEval_RestoreThread(ts); }

// Runs f() with the GIL released; its exception, if any, is rethrown once the GIL is back.
template <class F>
auto without_gil(F&& f) -> decltype(f()) {
  using R = decltype(f());
  PyThreadState* ts = PyEval_SaveThread();
  std::exception_ptr error;
  if constexpr (std::is_void_v<R>) {
    try {
      f();
    } catch (...) {
      error = std::current_exception();
    }
    retake_gil(ts);
    if (error) std::rethrow_exception(error);
  } else {
    R result{};
    try {
      result = f();
    } catch (...) {
      error = std::current_exception();
    }
    retake_gil(ts);
    if (error) std::rethrow_exception(error);
    return result;
  }
}

// A new array owned by a raw reference across a GIL-free section: if the thread is ended while it
// waits for the GIL, the array leaks instead of being released without the GIL.
template <class T>
PyObject* new_array(std::initializer_list<py::ssize_t> shape, T*& data) {
  py::array_t<T> a{std::vector<py::ssize_t>(shape)};
  data = a.mutable_data();
  return a.release().ptr();
}

// The newest row's values as a new bytes object (nullptr and no error before the first row; nullptr with
// MemoryError set when out of memory), its number and wall time. The GIL stays held: the copy is a few
// hundred bytes and never waits on the sampling thread (engine/latest.hpp). Bytes, not an array: an
// array costs more to make than the rest of the call (sampler.py's Row makes one on demand).
PyObject* copy_latest(const Sampler& s, uint64_t& n, int64_t& wall) {
  n = 0;
  if (s.latest_number() == 0) return nullptr;
  PyObject* raw = PyBytes_FromStringAndSize(nullptr, py::ssize_t(s.channels().size() * sizeof(double)));
  if (raw) n = s.latest(wall, PyBytes_AS_STRING(raw));  // filled before anyone sees it
  return raw;
}

// Sampler::latest() as None or (number, wall ns, bytes), for wait_next and the psutil-shaped path.
py::object latest_tuple(const Sampler& s) {
  uint64_t n;
  int64_t wall = 0;
  PyObject* raw = copy_latest(s, n, wall);
  if (!raw) {
    if (PyErr_Occurred()) throw py::error_already_set();
    return py::none();
  }
  return py::make_tuple(n, wall, py::reinterpret_steal<py::bytes>(raw));
}

// _native.RowData: the fields of sampler.py's Row (a Python subclass adds the Mapping methods), made by
// the reader below without running Python code: seq, timestamp_ns (read-only), _raw (the values'
// bytes), _layout (sampler.py's (channels, index)). Holds no container that can point back: no GC.
struct RowData {
  PyObject_HEAD
  unsigned long long seq;
  long long timestamp_ns;
  PyObject* raw;
  PyObject* layout;
};

void row_dealloc(PyObject* self) {
  RowData* r = reinterpret_cast<RowData*>(self);
  Py_XDECREF(r->raw);
  Py_XDECREF(r->layout);
  Py_TYPE(self)->tp_free(self);
}

PyObject* row_new(PyTypeObject* type, PyObject* args, PyObject* kwds) {  // RowData(seq, ts, raw, layout)
  static const char* names[] = {"seq", "timestamp_ns", "raw", "layout", nullptr};
  unsigned long long seq;
  long long ts;
  PyObject *raw, *layout;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "KLSO", const_cast<char**>(names), &seq, &ts, &raw, &layout))
    return nullptr;
  PyObject* self = type->tp_alloc(type, 0);
  if (!self) return nullptr;
  RowData* r = reinterpret_cast<RowData*>(self);
  r->seq = seq;
  r->timestamp_ns = ts;
  Py_INCREF(raw);
  r->raw = raw;
  Py_INCREF(layout);
  r->layout = layout;
  return self;
}

PyMemberDef row_members[] = {
    {"seq", T_ULONGLONG, offsetof(RowData, seq), READONLY, "the row's number (1 for the first row taken)"},
    {"timestamp_ns", T_LONGLONG, offsetof(RowData, timestamp_ns), READONLY, "wall-clock ns since the epoch"},
    {"_raw", T_OBJECT_EX, offsetof(RowData, raw), READONLY, "the values, float64 in native byte order"},
    {"_layout", T_OBJECT_EX, offsetof(RowData, layout), READONLY, "(channels, channel -> column)"},
    {nullptr, 0, 0, 0, nullptr}};

PyTypeObject row_type = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "sysprof._native.RowData";
  t.tp_basicsize = sizeof(RowData);
  t.tp_dealloc = row_dealloc;
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  t.tp_doc = "the fields of one published row (sysprof.sampling.sampler.Row adds the mapping)";
  t.tp_members = row_members;
  t.tp_new = row_new;
  return t;
}();

// The reader a Sampler's latest() calls: a builtin function (METH_NOARGS, no pybind dispatch) bound to
// (capsule of the Sampler*, the NativeSampler keeping it alive, the Row type, the layout).
PyObject* read_latest(PyObject* bound, PyObject*) {
  auto* s = static_cast<const Sampler*>(PyCapsule_GetPointer(PyTuple_GET_ITEM(bound, 0), nullptr));
  uint64_t n;
  int64_t wall = 0;
  PyObject* raw = copy_latest(*s, n, wall);
  if (!raw) {
    if (PyErr_Occurred()) return nullptr;
    Py_RETURN_NONE;
  }
  auto* type = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(bound, 2));
  PyObject* self = type->tp_alloc(type, 0);
  if (!self) {
    Py_DECREF(raw);
    return nullptr;
  }
  RowData* r = reinterpret_cast<RowData*>(self);
  r->seq = n;
  r->timestamp_ns = wall;
  r->raw = raw;
  r->layout = PyTuple_GET_ITEM(bound, 3);
  Py_INCREF(r->layout);
  return self;
}
PyMethodDef read_latest_def = {"latest", read_latest, METH_NOARGS, "the newest row as a Row, or None"};

py::object latest_reader(py::object impl, py::object type, py::object layout) {
  if (!PyType_Check(type.ptr()) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(type.ptr()), &row_type))
    throw py::type_error("the row type must be a subclass of _native.RowData");
  Sampler* s = impl.cast<Sampler*>();
  py::tuple bound = py::make_tuple(py::capsule(static_cast<void*>(s)), impl, type, layout);
  PyObject* f = PyCFunction_New(&read_latest_def, bound.ptr());
  if (!f) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(f);
}

// sysprof.mark's native writer: a builtin function put(word, pack, payload) -> bool (METH_FASTCALL, no pybind
// dispatch; the signature of the Python Ring.put, pack unused) bound to a capsule holding the ring's exported
// buffer, which keeps the mapping alive. The GIL stays held: a put is a few stores, less than releasing it.
void marker_buffer_free(PyObject* capsule) {
  auto* view = static_cast<Py_buffer*>(PyCapsule_GetPointer(capsule, "sysprof.marker_ring"));
  if (view) {
    PyBuffer_Release(view);
    delete view;
  }
}

PyObject* marker_put(PyObject* bound, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3 || !PyBytes_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "put(word: int, pack, payload: bytes)");
    return nullptr;
  }
  uint64_t word = PyLong_AsUnsignedLongLong(args[0]);
  if (word == uint64_t(-1) && PyErr_Occurred()) return nullptr;
  auto* view = static_cast<Py_buffer*>(PyCapsule_GetPointer(bound, "sysprof.marker_ring"));
  if (!view) return nullptr;
  bool ok = sysprof::markers::put(static_cast<unsigned char*>(view->buf), word, PyBytes_AS_STRING(args[2]),
                                  size_t(PyBytes_GET_SIZE(args[2])));
  return PyBool_FromLong(ok);
}
PyMethodDef marker_put_def = {"put", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(marker_put)),
                              METH_FASTCALL, "write one marker record (sysprof/markers/ring.py Ring.put)"};

// drop(ring): one marker dropped, counted with an atomic add (the producer's threads may drop at once; a Python
// read-then-write of the count loses some), for the rings written in Python (a stub, SYSPROF_MARKERS_NATIVE=0).
PyObject* marker_drop(PyObject*, PyObject* ring) {
  Py_buffer view;
  if (PyObject_GetBuffer(ring, &view, PyBUF_WRITABLE) != 0) return nullptr;
  bool ok = view.len >= Py_ssize_t(sysprof::markers::kDroppedAt + 8) && (reinterpret_cast<uintptr_t>(view.buf) & 7) == 0;
  if (ok)
    __atomic_fetch_add(reinterpret_cast<uint64_t*>(static_cast<unsigned char*>(view.buf) + sysprof::markers::kDroppedAt),
                       uint64_t(1), __ATOMIC_RELAXED);
  PyBuffer_Release(&view);
  if (!ok) {
    PyErr_SetString(PyExc_ValueError, "not a marker ring mapping (size or alignment)");
    return nullptr;
  }
  Py_RETURN_NONE;
}
PyMethodDef marker_drop_def = {"marker_drop", marker_drop, METH_O,
                               "count one dropped marker in a ring's mapping, atomically (sysprof/markers/ring.py)"};

py::object marker_writer(py::object ring) {
  auto* view = new Py_buffer;
  if (PyObject_GetBuffer(ring.ptr(), view, PyBUF_WRITABLE) != 0) {
    delete view;
    throw py::error_already_set();
  }
  if (size_t(view->len) != sysprof::markers::kRingSize || (reinterpret_cast<uintptr_t>(view->buf) & 7) != 0) {
    PyBuffer_Release(view);
    delete view;
    throw py::value_error("not a marker ring mapping (size or alignment)");
  }
  PyObject* capsule = PyCapsule_New(view, "sysprof.marker_ring", marker_buffer_free);
  if (!capsule) {
    PyBuffer_Release(view);
    delete view;
    throw py::error_already_set();
  }
  PyObject* f = PyCFunction_New(&marker_put_def, capsule);
  Py_DECREF(capsule);
  if (!f) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(f);
}

// sysprof.mark when not under a recorder, in C so that `with mark(name):` costs three C calls: NO_MARK (one
// object; `with` does nothing, as a decorator it returns the function), no_mark(name) -> NO_MARK, and
// no_mark_instant(name, **args) -> None.
PyObject* no_mark_enter(PyObject* self, PyObject*) {
  Py_INCREF(self);
  return self;
}
PyObject* no_mark_exit(PyObject*, PyObject* const*, Py_ssize_t) { Py_RETURN_FALSE; }
PyObject* no_mark_call(PyObject*, PyObject* args, PyObject* kwargs) {
  if (PyTuple_GET_SIZE(args) != 1 || (kwargs && PyDict_GET_SIZE(kwargs) != 0)) {
    PyErr_SetString(PyExc_TypeError, "mark(name) decorates one function");
    return nullptr;
  }
  PyObject* f = PyTuple_GET_ITEM(args, 0);
  Py_INCREF(f);
  return f;
}
PyObject* no_mark_repr(PyObject*) { return PyUnicode_FromString("sysprof.mark(<not recording>)"); }
PyMethodDef no_mark_methods[] = {
    {"__enter__", no_mark_enter, METH_NOARGS, "nothing (not recording)"},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(no_mark_exit)), METH_FASTCALL,
     "nothing (not recording)"},
    {nullptr, nullptr, 0, nullptr}};
PyTypeObject no_mark_type = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "sysprof._native.NoMark";
  t.tp_basicsize = sizeof(PyObject);
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "sysprof.mark(name) when not under a recorder: a no-op context manager and decorator";
  t.tp_methods = no_mark_methods;
  t.tp_call = no_mark_call;
  t.tp_repr = no_mark_repr;
  return t;
}();
PyObject* no_mark_get(PyObject* self, PyObject*) {
  Py_INCREF(self);
  return self;
}
PyObject* no_mark_instant(PyObject*, PyObject*, PyObject*) { Py_RETURN_NONE; }
PyMethodDef no_mark_get_def = {"mark", no_mark_get, METH_O,
                               "mark(name): a span around a with block or a decorated function's calls (not "
                               "recording now: a no-op; see sysprof.markers)"};
PyMethodDef no_mark_instant_def = {
    "mark_instant", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(no_mark_instant)),
    METH_VARARGS | METH_KEYWORDS, "mark_instant(name, **args): an instant event (not recording now: a no-op)"};

// Sampler::wait_next() in slices with the GIL released, checking for signals (Ctrl-C) in between.
// after < 0: the newest row's number now; timeout_s < 0: no limit. Plain C++ arguments: the frames a
// thread ended at interpreter exit unwinds (see retake_gil) then own no Python object.
py::object wait_next_row(Sampler& s, int64_t after, double timeout_s) {
  uint64_t a = after < 0 ? s.latest_number() : uint64_t(after);
  const int64_t kSliceNs = 100000000;
  bool forever = timeout_s < 0;
  int64_t left = forever ? 0 : int64_t(std::min(timeout_s, 1e9) * 1e9);
  for (;;) {
    int64_t slice = forever ? kSliceNs : std::min(left, kSliceNs);
    auto r = without_gil([&s, a, slice] { return s.wait_next(a, slice); });
    if (r == sysprof::Latest::Wait::row) return latest_tuple(s);
    if (r == sysprof::Latest::Wait::stopped) return py::none();
    if (!forever && (left -= slice) <= 0) return py::none();
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "sysprof native sampler: /proc readers, SPSC ring buffer and sampling thread";

  py::class_<Sampler>(m, "NativeSampler")
      .def(py::init([](int64_t interval_ns, size_t capacity, std::vector<std::string> sources,
                       std::vector<std::string> options, int64_t pid, std::string proc_root, std::string sys_root,
                       std::map<std::string, int64_t> intervals_ns, size_t max_ring_bytes, double budget,
                       std::vector<std::string> intervals_given, std::map<std::string, int64_t> budget_test_cost_ns) {
             Config c;
             c.interval_ns = interval_ns;
             c.capacity = capacity;
             c.max_ring_bytes = max_ring_bytes;
             if (!(budget >= 0 && budget <= 1)) throw std::invalid_argument("budget must be in [0, 1] (0: none)");
             c.budget = budget;
             // Per-source settings by name, aligned with the sources.
             auto place = [&sources](const std::string& name, const char* what) {
               auto at = std::find(sources.begin(), sources.end(), name);
               if (at == sources.end())
                 throw std::invalid_argument(std::string(what) + " is given for source '" + name +
                                             "', which is not sampled");
               return size_t(at - sources.begin());
             };
             c.intervals_ns.assign(sources.size(), 0);  // 0: the sampler's interval
             for (const auto& [name, ns] : intervals_ns) c.intervals_ns[place(name, "an interval")] = ns;
             c.intervals_given.assign(sources.size(), 0);
             for (const auto& name : intervals_given) c.intervals_given[place(name, "a given interval")] = 1;
             if (!budget_test_cost_ns.empty()) {
               c.budget_test_cost_ns.assign(sources.size(), 0);
               for (const auto& [name, ns] : budget_test_cost_ns) c.budget_test_cost_ns[place(name, "a test cost")] = ns;
             }
             c.sources = std::move(sources);
             c.options = std::move(options);
             c.pid = pid;
             c.proc_root = std::move(proc_root);
             c.sys_root = std::move(sys_root);
             return without_gil([&c] { return new Sampler(c); });  // an unknown source: ValueError
           }),
           py::arg("interval_ns"), py::arg("capacity"), py::arg("sources"),
           py::arg("options") = std::vector<std::string>(), py::arg("pid") = -1, py::arg("proc_root") = "/proc",
           py::arg("sys_root") = "/sys", py::arg("intervals_ns") = std::map<std::string, int64_t>(),
           py::arg("max_ring_bytes") = 0, py::arg("budget") = 0.0,
           py::arg("intervals_given") = std::vector<std::string>(),
           py::arg("budget_test_cost_ns") = std::map<std::string, int64_t>())
      .def_property_readonly("channels", [](const Sampler& s) { return sysprof::py_texts(s.channels()); })
      .def_property_readonly("errors", [](const Sampler& s) { return sysprof::py_text_map(s.errors()); })
      .def_property_readonly("devices",
                             [](const Sampler& s) {
                               py::list out;
                               for (const auto& d : s.devices()) out.append(sysprof::py_text_map(d));
                               return out;
                             })
      .def_property_readonly("running", &Sampler::running)
      .def_property_readonly("capacity", &Sampler::capacity)
      .def_property_readonly("inherited", &Sampler::inherited)
      .def("start", [](Sampler& s) { without_gil([&s] { s.start(); }); })
      .def("stop", [](Sampler& s) { without_gil([&s] { s.stop(); }); })
      .def("sample",
           [](Sampler& s) {
             double* p;
             PyObject* raw = new_array<double>({py::ssize_t(s.channels().size())}, p);
             int64_t ts;
             try {
               ts = without_gil([&s, p] { return s.sample_now(p); });
             } catch (const std::exception&) {  // rethrown by without_gil with the GIL back
               Py_DECREF(raw);
               throw;
             }  // not catch (...): the forced unwind of a thread ended at exit (retake_gil) has no GIL, and
                // Py_DECREF without it crashed Python 3.12+ (its allocator needs the thread state): raw leaks
             return py::make_tuple(ts, py::reinterpret_steal<py::object>(raw));
           })
      .def(
          "drain",
          [](Sampler& s, py::ssize_t max_rows) -> py::tuple {
            size_t n = s.buffered();
            if (max_rows >= 0) n = std::min(n, size_t(max_rows));
            size_t w = s.channels().size();
            int64_t* tp;
            double* vp;
            PyObject* raw_ts = new_array<int64_t>({py::ssize_t(n)}, tp);
            PyObject* raw_values = new_array<double>({py::ssize_t(n), py::ssize_t(w)}, vp);
            // The consumer lock is taken without the GIL, so no thread waits on one holding the other.
            size_t got = without_gil([&s, n, tp, vp] { return s.drain(n, tp, vp); });  // does not throw
            auto ts = py::reinterpret_steal<py::array_t<int64_t>>(raw_ts);
            auto values = py::reinterpret_steal<py::array_t<double>>(raw_values);
            if (got < n) {  // another thread drained in between
              py::slice rows(0, py::ssize_t(got), 1);
              return py::make_tuple(ts[rows], values[py::make_tuple(rows, py::slice(0, py::ssize_t(w), 1))]);
            }
            return py::make_tuple(ts, values);
          },
          py::arg("max_rows") = -1)
      .def("latest", &latest_tuple)
      .def("latest_reader", &latest_reader, py::arg("row_type"), py::arg("layout"))
      .def("wait_next", &wait_next_row, py::arg("after") = -1, py::arg("timeout") = -1.0)
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
        py::dict reads;
        for (const auto& [name, n] : st.reads) reads[sysprof::py_text(name)] = n;
        d["reads"] = reads;
        d["cpu_seconds_total"] = st.cpu_seconds;
        d["cpu_percent"] = 100 * st.cpu_fraction;
        d["budget_percent"] = st.budget > 0 ? 100 * st.budget : sysprof::kNaN;
        return d;
      })
      .def_property_readonly("intervals_ns",
                             [](const Sampler& s) {
                               py::dict out;
                               for (const auto& [name, ns] : s.intervals()) out[sysprof::py_text(name)] = ns;
                               return out;
                             })
      .def_property_readonly("interval_changes",
                             [](const Sampler& s) {
                               py::list out;
                               for (const auto& c : s.interval_changes()) {
                                 py::dict d;
                                 d["time_ns"] = c.wall_ns;
                                 d["source"] = sysprof::py_text(c.source);
                                 d["interval_ns"] = c.interval_ns;
                                 d["previous_ns"] = c.previous_ns;
                                 d["given"] = c.given;
                                 d["cpu_percent"] = 100 * c.measured;
                                 out.append(d);
                               }
                               return out;
                             })
      .def("_set_test_cost", &Sampler::set_test_cost, py::arg("source"), py::arg("ns"),
           "tests: a source's fixed CPU per read for the budget (budget_test_cost_ns given)");

  if (PyType_Ready(&row_type) < 0) throw py::error_already_set();
  m.add_object("RowData", py::handle(reinterpret_cast<PyObject*>(&row_type)));
  m.def("source_names", &sysprof::source_names, "the registered native sources (SYSPROF_SOURCE), sorted");
  if (PyType_Ready(&no_mark_type) < 0) throw py::error_already_set();
  {
    PyObject* no_mark = PyType_GenericAlloc(&no_mark_type, 0);
    if (!no_mark) throw py::error_already_set();
    m.add_object("NO_MARK", py::reinterpret_steal<py::object>(no_mark));
    PyObject* get = PyCFunction_New(&no_mark_get_def, no_mark);
    PyObject* instant = PyCFunction_New(&no_mark_instant_def, nullptr);
    if (!get || !instant) throw py::error_already_set();
    m.add_object("no_mark", py::reinterpret_steal<py::object>(get));
    m.add_object("no_mark_instant", py::reinterpret_steal<py::object>(instant));
  }
  {
    PyObject* drop = PyCFunction_New(&marker_drop_def, nullptr);
    if (!drop) throw py::error_already_set();
    m.add_object("marker_drop", py::reinterpret_steal<py::object>(drop));
  }
  m.def("marker_writer", &marker_writer, py::arg("ring"),
        "put(word, pack, payload) writing into a marker ring's writable mapping (sysprof/markers/ring.py)");

  // Test hook for tests/test_budget.py: the budget's planner (engine/budget.hpp) on given estimates: the periods
  // after a stretch (and whether they fit) or after one relax step.
  m.def("_budget_plan", [](const std::string& step, double budget, int64_t interval_ns, double fixed_ns,
                           std::vector<double> cost_ns, std::vector<uint64_t> floor, std::vector<uint64_t> cap,
                           std::vector<uint64_t> period, std::vector<bool> given) {
    size_t n = cost_ns.size();
    if (floor.size() != n || cap.size() != n || period.size() != n || given.size() != n)
      throw std::invalid_argument("one floor, cap, period and given per cost");
    sysprof::budget::Plan p;
    p.budget = budget, p.interval_ns = interval_ns, p.fixed_ns = fixed_ns, p.cost_ns = std::move(cost_ns);
    p.floor = std::move(floor), p.cap = std::move(cap), p.period = std::move(period);
    p.given.assign(given.begin(), given.end());
    bool fits = p.cost(p.period) <= sysprof::budget::kStretchTo * budget * double(interval_ns);
    std::vector<uint64_t> out;
    if (step == "stretch")
      out = sysprof::budget::plan_stretch(p, fits);
    else if (step == "relax")
      out = sysprof::budget::plan_relax(p);
    else
      throw std::invalid_argument("step: 'stretch' or 'relax'");
    return py::make_tuple(out, fits);
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
  sysprof::bind_nvml(m);
}
