// /proc/vmstat (mm/vmstat.c, vmstat_text): "key value" lines of 64-bit event counters, read by key
// because keys come and go between kernels:
//   pgscan_/pgsteal_{kswapd,direct}: one key since 4.8 (node-based reclaim); per zone before, as
//     pgscan_kswapd_normal, _dma, _dma32, _high, _movable (and _device), which are summed here.
//     pgscan_direct_throttle is another counter, never summed. pgscan_/pgsteal_khugepaged (6.0+,
//     counted as direct before) are not read.
//   workingset_refault_{anon,file}: 5.9+; before, one workingset_refault key, of file pages only
//     (anon pages had no refault detection): read as the file count, anon absent.
//   oom_kill: 4.13+.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "io/scan.hpp"

namespace sysprof {

enum VmstatField {
  kPgfault, kPgmajfault, kPswpin, kPswpout, kPgscanKswapd, kPgscanDirect, kPgstealKswapd, kPgstealDirect,
  kOomKill, kRefaultAnon, kRefaultFile, kVmstatFields
};

struct VmstatSnapshot {
  uint64_t v[kVmstatFields];  // saturating at UINT64_MAX (a per-zone sum too); set where present
  unsigned present;           // bit f: field f was read (for a per-zone field: at least one zone)
  std::string_view bad;       // the last line of a known key whose value is not a number
  bool has(int f) const { return (present >> f) & 1u; }
};

namespace vmstat_detail {

struct Key {
  std::string_view name;
  int field;
  bool zoned;  // also "<name>_<zone>" (kernels before 4.8), summed
};
constexpr Key kKeys[] = {
    {"pgfault", kPgfault, false},          {"pgmajfault", kPgmajfault, false},
    {"pswpin", kPswpin, false},            {"pswpout", kPswpout, false},
    {"pgscan_kswapd", kPgscanKswapd, true}, {"pgscan_direct", kPgscanDirect, true},
    {"pgsteal_kswapd", kPgstealKswapd, true}, {"pgsteal_direct", kPgstealDirect, true},
    {"oom_kill", kOomKill, false},         {"workingset_refault_anon", kRefaultAnon, false},
    {"workingset_refault_file", kRefaultFile, false}, {"workingset_refault", kRefaultFile, false},
};
constexpr std::string_view kZones[] = {"dma", "dma32", "normal", "high", "movable", "device"};

// The field of a key, or -1; zoned: the key was one zone's.
inline int field_of(std::string_view key, bool& zoned) {
  if (key.empty() || (key[0] != 'p' && key[0] != 'o' && key[0] != 'w')) return -1;  // most keys: one compare
  for (const Key& k : kKeys) {
    if (key.size() < k.name.size() || key.compare(0, k.name.size(), k.name) != 0) continue;
    if (key.size() == k.name.size()) {
      zoned = false;
      return k.field;
    }
    if (!k.zoned || key[k.name.size()] != '_') continue;
    std::string_view zone = key.substr(k.name.size() + 1);
    for (std::string_view z : kZones)
      if (zone == z) {
        zoned = true;
        return k.field;
      }
  }
  return -1;
}

}  // namespace vmstat_detail

// False (err set) if no key sysprof reads is present: not a vmstat file.
inline bool parse_vmstat(const char* p, size_t n, VmstatSnapshot& out, std::string& err) {
  out.present = 0;
  out.bad = {};
  LineReader lines(p, n);
  Cursor c;
  while (lines.next(c)) {
    Cursor line = c;
    bool zoned = false;
    int f = vmstat_detail::field_of(next_token(c), zoned);
    if (f < 0) continue;
    uint64_t x;
    skip_blanks(c);
    if (!parse_u64(c, x) || (skip_blanks(c), !c.done())) {
      out.bad = std::string_view(line.p, size_t(line.end - line.p));
      continue;
    }
    bool had = out.has(f);
    out.v[f] = zoned && had ? sat_add(out.v[f], x) : x;
    out.present |= 1u << f;
  }
  if (out.present) return true;
  err = out.bad.empty() ? std::string("none of pgfault, pgmajfault, pswpin, ... (not a vmstat file)")
                        : "malformed line: '" + std::string(out.bad) + "'";
  return false;
}

}  // namespace sysprof
