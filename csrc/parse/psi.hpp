// /proc/pressure/{cpu,memory,io} lines (Documentation/accounting/psi.rst):
//   some avg10=0.00 avg60=0.00 avg300=0.00 total=0
#pragma once
#include <cstdint>
#include <string_view>

#include "io/scan.hpp"

namespace sysprof {

struct PsiLine {
  int kind;        // 0 "some", 1 "full"; -1 unless 1 is returned
  double avg[3];   // avg10, avg60, avg300: percents as printed
  uint64_t total_us;  // cumulative stall time, microseconds
};

// Fields are matched by key, so that a key added later is skipped, not misread; all four are required.
// Returns 1, 0 (an empty line) or -1 (not "some"/"full", a missing key, a malformed value).
inline int parse_psi_line(Cursor c, PsiLine& l) {
  l.kind = -1;
  std::string_view kind = next_token(c);
  if (kind.empty() && c.done()) return 0;
  int k = kind == "some" ? 0 : kind == "full" ? 1 : -1;
  if (k < 0) return -1;
  unsigned found = 0;
  for (std::string_view tok = next_token(c); !tok.empty(); tok = next_token(c)) {
    size_t eq = tok.find('=');
    if (eq == std::string_view::npos) return -1;
    std::string_view key = tok.substr(0, eq);
    Cursor v{tok.data() + eq + 1, tok.data() + tok.size()};
    int f = key == "avg10" ? 0 : key == "avg60" ? 1 : key == "avg300" ? 2 : key == "total" ? 3 : -1;
    if (f < 0) continue;  // a key of a later kernel
    bool ok = f < 3 ? parse_decimal(v, l.avg[f]) : parse_u64(v, l.total_us);
    if (!ok || !v.done()) return -1;
    found |= 1u << f;
  }
  if (found != 0xF) return -1;
  l.kind = k;
  return 1;
}

}  // namespace sysprof
