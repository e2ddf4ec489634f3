// /proc/<pid>/stat, shared by the process and process_tree sources (a single line: false = malformed).
// Field numbers are proc.rst's Table 1-4 (1-based; comm is field 2, state field 3).
#pragma once
#include <cstdint>
#include <string_view>

#include "io/scan.hpp"

namespace sysprof {

struct ProcStat {
  char state;
  int64_t ppid;
  uint64_t utime, stime, vsize;
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

}  // namespace sysprof
