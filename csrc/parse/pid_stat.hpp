// /proc/<pid>/stat, shared by the process and process_tree sources (a single line: false = malformed).
// Field numbers are proc.rst's Table 1-4 (1-based; comm is field 2, state field 3).
// /proc/<pid>/task/<tid>/schedstat, process_tree's run delay (Documentation/scheduler/sched-stats.rst).
#pragma once
#include <cstdint>
#include <string_view>

#include "io/scan.hpp"

namespace sysprof {

struct ProcStat {
  char state;
  int64_t ppid;
  uint64_t majflt, utime, stime, vsize;  // majflt: major faults (pages read back from disk)
  int64_t rss, num_threads;  // signed in the kernel's format: a negative one is corrupt
  uint64_t cpu_ticks() const { return sat_add(utime, stime); }
  // Exiting (the memory map is dropped before it turns zombie; only kernel threads have none
  // otherwise), zombie or dead: no memory, CPU or threads to report.
  bool gone() const { return state == 'Z' || state == 'X' || state == 'x' || vsize == 0; }
};

inline bool parse_pid_stat(const char* p, size_t n, ProcStat& s) {
  // comm may itself hold ") " and blanks: the fields resume after the LAST ')'.
  const char* close = nullptr;
  for (const char* q = p + n; q > p;)
    if (*--q == ')') {
      close = q;
      break;
    }
  if (!close) return false;
  Cursor c{close + 1, p + n};
  std::string_view state = next_token(c);  // field 3
  if (state.empty()) return false;
  s.state = state[0];
  int64_t i;
  for (int field = 4; field <= 24; ++field) {
    switch (field) {
      case 4: if (!parse_i64(c, s.ppid)) return false; break;
      case 12: if (!parse_u64(c, s.majflt)) return false; break;
      case 14: if (!parse_u64(c, s.utime)) return false; break;
      case 15: if (!parse_u64(c, s.stime)) return false; break;
      case 20: if (!parse_i64(c, s.num_threads)) return false; break;
      case 23: if (!parse_u64(c, s.vsize)) return false; break;
      case 24: if (!parse_i64(c, s.rss)) return false; break;
      default: if (!parse_i64(c, i)) return false;
    }
  }
  return true;
}

// schedstat: "time spent on the cpu (ns), time spent waiting on a runqueue (ns), timeslices run on this cpu".
// A kernel without CONFIG_SCHEDSTATS whose delay accounting is off prints "0 0 0" (nothing is counted): the
// caller tells that by on_cpu_ns staying 0 for a thread that has run.
struct SchedStat {
  uint64_t on_cpu_ns, run_delay_ns, timeslices;
};

inline bool parse_schedstat(const char* p, size_t n, SchedStat& s) {
  Cursor c{p, p + n};
  return parse_u64(c, s.on_cpu_ns) && parse_u64(c, s.run_delay_ns) && parse_u64(c, s.timeslices);
}

}  // namespace sysprof
