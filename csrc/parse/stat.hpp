// /proc/stat cpu lines (Documentation/filesystems/proc.rst, 1.8): "cpu" (all CPUs) or "cpuN", then ticks.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include "io/scan.hpp"

namespace sysprof {

// Ticks by mode: user nice system idle iowait irq softirq steal. guest and guest_nice (fields 9, 10) are
// already counted inside user and nice, so they are read past but never added.
constexpr int kModes = 8;
constexpr int kIdle = 3, kIowait = 4;
using Ticks = std::array<uint64_t, kModes>;

struct CpuLine {
  long id;  // -1: the aggregate "cpu" line
  Ticks ticks;  // modes a kernel does not print (before 2.6: only 4) read 0
};

// Kernels before 2.6 give 4 fields, later 7, 8, 9 or 10; a line with more (a future kernel, a
// virtualization layer) keeps the 8 whose positions proc.rst fixes. CPU ids of kMaxCpus and above are
// not cpu lines. Returns 1, 0 (not a cpu line) or -1 (a cpu line with fewer than 4 numbers; id is set).
inline int parse_cpu_line(Cursor c, CpuLine& l) {
  if (c.end - c.p < 3 || std::memcmp(c.p, "cpu", 3) != 0) return 0;
  c.p += 3;
  if (c.p < c.end && is_blank(*c.p)) {
    l.id = -1;
  } else {
    uint64_t v;
    if (!parse_u64(c, v) || v >= kMaxCpus) return 0;
    l.id = long(v);
  }
  int n = 0;
  uint64_t v;
  while (n < 10 && parse_u64(c, v)) {
    if (n < kModes) l.ticks[size_t(n)] = v;
    ++n;
  }
  if (n < 4) return -1;
  for (int i = std::min(n, kModes); i < kModes; ++i) l.ticks[size_t(i)] = 0;
  return 1;
}

}  // namespace sysprof
