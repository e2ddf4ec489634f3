// /proc/<pid>/smaps_rollup (Linux 4.14+; Documentation/filesystems/proc.rst, "smaps_rollup"): one header line
// (the address range and "[rollup]"), then "Key:   value kB" lines summing /proc/<pid>/smaps over every mapping.
// Pss ("proportional set size") divides each shared page by the number of processes mapping it, so the Pss of
// a set of processes sums to what they hold together; Private_Clean + Private_Dirty is the USS (what the
// process alone holds: freed when it exits).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "io/scan.hpp"

namespace sysprof {

enum SmapsKey { kSmRss, kSmPss, kSmPssAnon, kSmPssFile, kSmPssShmem, kSmSharedClean, kSmSharedDirty,
                kSmPrivateClean, kSmPrivateDirty, kSmSwap, kSmSwapPss, kSmapsKeys };
constexpr std::string_view kSmapsKeyNames[kSmapsKeys] = {
    "Rss", "Pss", "Pss_Anon", "Pss_File", "Pss_Shmem", "Shared_Clean", "Shared_Dirty", "Private_Clean",
    "Private_Dirty", "Swap", "SwapPss"};

struct SmapsRollup {
  uint64_t bytes[kSmapsKeys];  // kB x 1024 (saturating); set where present
  unsigned present;            // bit k: key k was read
  std::string_view bad;        // the last malformed line skipped (empty: none)
  bool has(int k) const { return (present >> k) & 1u; }
  // Private_Clean + Private_Dirty, or -1 where either is missing.
  int64_t uss() const {
    if (!has(kSmPrivateClean) || !has(kSmPrivateDirty)) return -1;
    uint64_t u = sat_add(bytes[kSmPrivateClean], bytes[kSmPrivateDirty]);
    return u > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(u);
  }
};

// Parses every line; keys it does not know (Referenced, Anonymous, LazyFree, ...) are skipped, and so is the
// header (its first colon, in "00:00", leaves no known key before it). A known key whose value is not a number
// followed by "kB" is a malformed line. False without Rss and Pss.
inline bool parse_smaps_rollup(const char* p, size_t n, SmapsRollup& out, std::string& err) {
  out.present = 0;
  out.bad = {};
  LineReader lines(p, n);
  Cursor c;
  while (lines.next(c)) {
    const char* colon = static_cast<const char*>(std::memchr(c.p, ':', size_t(c.end - c.p)));
    if (!colon) continue;
    std::string_view key(c.p, size_t(colon - c.p));
    int k = -1;
    for (int i = 0; i < kSmapsKeys && k < 0; ++i)
      if (kSmapsKeyNames[i] == key) k = i;
    if (k < 0) continue;
    Cursor val{colon + 1, c.end};
    uint64_t kb;
    bool ok = parse_u64(val, kb);
    skip_blanks(val);
    if (!ok || val.end - val.p < 2 || val.p[0] != 'k' || val.p[1] != 'B') {
      out.bad = std::string_view(c.p, size_t(c.end - c.p));
      continue;
    }
    out.bytes[k] = sat_mul(kb, 1024);
    out.present |= 1u << k;
  }
  if (out.has(kSmRss) && out.has(kSmPss)) return true;
  err = out.bad.empty() ? std::string("no Rss/Pss") : "malformed line: '" + std::string(out.bad) + "'";
  return false;
}

}  // namespace sysprof
