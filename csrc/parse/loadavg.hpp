// /proc/loadavg: "1m 5m 15m running/total last_pid" (fs/proc/loadavg.c).
#pragma once
#include <string>

#include "io/scan.hpp"

namespace sysprof {

struct LoadavgSnapshot {
  double avg[3];  // 1, 5 and 15 minutes
  double running, total;  // runnable and existing scheduling entities
};

// last_pid is not read. False if any of the first four fields is missing or malformed.
inline bool parse_loadavg(const char* p, size_t n, LoadavgSnapshot& out, std::string& err) {
  Cursor c{p, p + n};
  bool ok = parse_decimal(c, out.avg[0]) && parse_decimal(c, out.avg[1]) && parse_decimal(c, out.avg[2]) &&
            parse_digits_double(c, out.running) && c.p < c.end && *c.p++ == '/' && parse_digits_double(c, out.total);
  if (!ok) err = "malformed: '" + std::string(p, n) + "'";
  return ok;
}

}  // namespace sysprof
