// cgroup v2 interface files (Documentation/admin-guide/cgroup-v2.rst, "Interface Files"): single values
// (memory.current, memory.max), flat keyed (memory.stat, cpu.stat), cpu.max and io.stat's nested keys.
#pragma once
#include <cstdint>
#include <limits>
#include <string_view>

#include "io/scan.hpp"

namespace sysprof {

// A single-value file: a number, or "max" (no limit: +inf) where allow_max. False: malformed.
inline bool parse_cgroup_value(const char* p, size_t n, bool allow_max, double& v) {
  Cursor c{p, p + n};
  std::string_view tok = next_token(c);
  Cursor num{tok.data(), tok.data() + tok.size()};
  if (tok == "max" && allow_max) {
    v = std::numeric_limits<double>::infinity();
    return true;
  }
  return parse_digits_double(num, v) && num.done();
}

// A flat keyed file ("key value" lines): sets v[i] and bit i of the result for each keys[i] present;
// stops once all are found (memory.stat has ~50 lines, anon/file lead). A key whose value is not a
// number is left out and its line put in bad.
template <size_t N>
unsigned parse_flat_keyed(const char* p, size_t n, const char* const (&keys)[N], uint64_t (&v)[N],
                          std::string_view& bad) {
  unsigned found = 0;
  LineReader lines(p, n);
  Cursor c;
  while (found != (1u << N) - 1 && lines.next(c)) {
    Cursor line = c;
    std::string_view key = next_token(c);
    for (size_t i = 0; i < N; ++i) {
      if (key != keys[i]) continue;
      if (parse_u64(c, v[i])) found |= 1u << i;
      else bad = std::string_view(line.p, size_t(line.end - line.p));
      break;
    }
  }
  return found;
}

// cpu.max: "$MAX $PERIOD" in microseconds; max is +inf for "max". False: malformed or period 0.
inline bool parse_cpu_max(const char* p, size_t n, double& max, double& period) {
  Cursor c{p, p + n};
  std::string_view quota = next_token(c);
  Cursor q{quota.data(), quota.data() + quota.size()};
  max = std::numeric_limits<double>::infinity();
  if (quota != "max" && (!parse_digits_double(q, max) || !q.done())) return false;
  return parse_digits_double(c, period) && period > 0;
}

// One io.stat line: "MAJ:MIN rbytes=.. wbytes=.. rios=.. wios=.. dbytes=.. dios=.." (and iocost's
// extra keys, skipped). Returns 1, 0 (an empty line: no I/O yet) or -1 (rbytes or wbytes missing).
inline int parse_io_stat_line(Cursor c, uint64_t& rbytes, uint64_t& wbytes) {
  if (next_token(c).empty()) return 0;
  unsigned found = 0;
  uint64_t v[2];
  for (std::string_view tok = next_token(c); !tok.empty(); tok = next_token(c)) {
    int k = tok.substr(0, 7) == "rbytes=" ? 0 : tok.substr(0, 7) == "wbytes=" ? 1 : -1;
    if (k < 0) continue;
    Cursor num{tok.data() + 7, tok.data() + tok.size()};
    if (parse_u64(num, v[k]) && num.done()) found |= 1u << k;
  }
  if (found != 3) return -1;
  rbytes = v[0], wbytes = v[1];
  return 1;
}

}  // namespace sysprof
