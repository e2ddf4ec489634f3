// /proc/meminfo (Documentation/filesystems/proc.rst, "meminfo"): "Key:   value kB" lines, by key.
#pragma once
#include <cstring>
#include <limits>
#include <string>
#include <string_view>

#include "io/scan.hpp"

namespace sysprof {

enum MeminfoKey { kMemTotal, kMemFree, kMemAvailable, kBuffers, kCached, kDirty, kWriteback, kSwapTotal, kSwapFree,
                  kMeminfoKeys };
constexpr std::string_view kMeminfoKeyNames[kMeminfoKeys] = {"MemTotal", "MemFree", "MemAvailable", "Buffers", "Cached",
                                                        "Dirty", "Writeback", "SwapTotal", "SwapFree"};

struct MeminfoSnapshot {
  double bytes[kMeminfoKeys];  // values with a "kB" unit scaled by 1024 (kB is KiB here); set where present
  unsigned present;            // bit k: key k was read
  std::string_view bad;        // the last malformed line skipped (empty: none)
  bool has(int k) const { return (present >> k) & 1u; }
};

inline int meminfo_key(const char* k, size_t n) {
  // Length and first letter first: most of meminfo's ~50 keys are then turned away without a memcmp call.
  for (int i = 0; i < kMeminfoKeys; ++i) {
    std::string_view name = kMeminfoKeyNames[i];
    if (name.size() == n && name[0] == k[0] && std::memcmp(name.data(), k, n) == 0) return i;
  }
  return -1;
}

// The message of a meminfo without MemTotal and MemFree: out of line (and cold), off the tick's code.
__attribute__((cold, noinline)) inline bool meminfo_failed(std::string_view bad, std::string& err) {
  err = bad.empty() ? std::string("no MemTotal/MemFree") : "malformed line: '" + std::string(bad) + "'";
  return false;
}

// Stops once every key is read. A value that is not a number, or too large for a double (once
// scaled: never inf), is a malformed line. False without MemTotal and MemFree.
inline bool parse_meminfo(const char* p, size_t n, MeminfoSnapshot& out, std::string& err) {
  out.present = 0;
  out.bad = {};
  LineReader lines(p, n);
  Cursor c;
  while (out.present != (1u << kMeminfoKeys) - 1 && lines.next(c)) {
    std::string_view line(c.p, size_t(c.end - c.p));
    const char* colon = static_cast<const char*>(std::memchr(c.p, ':', size_t(c.end - c.p)));
    if (!colon) {
      if (!line.empty()) out.bad = line;
      continue;
    }
    int k = meminfo_key(c.p, size_t(colon - c.p));
    if (k < 0) continue;
    Cursor val{colon + 1, c.end};
    double x;
    if (!parse_digits_double(val, x)) {
      out.bad = line;
      continue;
    }
    skip_blanks(val);
    if (val.end - val.p >= 2 && val.p[0] == 'k' && val.p[1] == 'B') x *= 1024.0;
    if (!(x <= std::numeric_limits<double>::max())) {
      out.bad = line;
      continue;
    }
    out.bytes[k] = x;
    out.present |= 1u << k;
  }
  if (__builtin_expect(out.has(kMemTotal) && out.has(kMemFree), 1)) return true;
  return meminfo_failed(out.bad, err);
}

}  // namespace sysprof
