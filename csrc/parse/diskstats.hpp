// /proc/diskstats lines and /sys/block/<disk>/stat (Documentation/admin-guide/iostats.rst): "major minor name"
// then the statistics, or the statistics alone.
#pragma once
#include <cstdint>
#include <string_view>

#include "io/scan.hpp"

namespace sysprof {

// The statistics sysprof reads, in this order in DiskstatsLine::v.
enum { kReads, kWrites, kSectorsRead, kSectorsWritten, kIoTicks, kReadTicks, kWriteTicks, kDiskCounters };

struct DiskstatsLine {
  std::string_view name;
  uint64_t v[kDiskCounters];
  bool has_times;  // false on 4-statistic partition lines of kernels before 2.6.25
};

// The statistics of a disk after its name: 11 (2.6+), 15 (4.18+) or 17 (5.5+), or 4 on the partition lines
// of kernels before 2.6.25. iostats.rst fixes the positions of the first 11, so a line with any other count
// of 11 or more (a future kernel, a virtualization layer) keeps them. /sys/block/<disk>/stat is this part
// alone (the same statistics in the same order, without "major minor name"; iostats.rst): both ways of
// reading a disk go through here. Returns 1, or -1 for a malformed line (l.name is left as it is).
inline int parse_diskstats_values(Cursor c, DiskstatsLine& l) {
  uint64_t s[11], extra;
  int n = 0;
  while (n < 11 && parse_u64(c, s[n])) ++n;
  while (n == 11 && parse_u64(c, extra)) {}  // statistics past the 11th: not ours
  skip_blanks(c);
  if (!c.done()) return -1;  // trailing junk
  if (n == 4) {
    l.v[kReads] = s[0], l.v[kSectorsRead] = s[1], l.v[kWrites] = s[2], l.v[kSectorsWritten] = s[3];
    l.v[kIoTicks] = l.v[kReadTicks] = l.v[kWriteTicks] = 0;
    l.has_times = false;
    return 1;
  }
  if (n != 11) return -1;
  l.v[kReads] = s[0], l.v[kSectorsRead] = s[2], l.v[kReadTicks] = s[3];
  l.v[kWrites] = s[4], l.v[kSectorsWritten] = s[6], l.v[kWriteTicks] = s[7];
  l.v[kIoTicks] = s[9];
  l.has_times = true;
  return 1;
}

// A /proc/diskstats line: "major minor name" then the statistics. Returns 1, 0 (a blank line) or -1.
inline int parse_diskstats_line(Cursor c, DiskstatsLine& l) {
  skip_blanks(c);
  if (c.done()) return 0;
  uint64_t major, minor;
  if (!parse_u64(c, major) || !parse_u64(c, minor)) return -1;
  l.name = next_token(c);
  if (l.name.empty()) return -1;
  return parse_diskstats_values(c, l);
}

}  // namespace sysprof
