// /proc/net/dev lines (net/core/net-procfs.c): "name: " then 8 receive and 8 transmit columns.
#pragma once
#include <cstdint>
#include <cstring>
#include <string.h>  // memrchr (glibc)
#include <string_view>

#include "io/scan.hpp"

namespace sysprof {

// Columns: receive bytes packets errs drop fifo frame compressed multicast, then transmit bytes
// packets errs drop fifo colls carrier compressed.
enum { kBytesRecv, kBytesSent, kPacketsRecv, kPacketsSent, kErrIn, kErrOut, kDropIn, kDropOut, kNetCounters };
constexpr int kNetDevColumn[kNetCounters] = {0, 8, 1, 9, 2, 10, 3, 11};

struct NetDevLine {
  std::string_view name;
  uint64_t v[kNetCounters];
};

// The last ':' of [c.p, c.end), or nullptr.
inline const char* last_colon(Cursor c) {
#ifdef __GLIBC__
  return static_cast<const char*>(memrchr(c.p, ':', size_t(c.end - c.p)));
#else  // memrchr is a GNU extension
  for (const char* q = c.end; q > c.p;)
    if (*--q == ':') return q;
  return nullptr;
#endif
}

// The name is everything before the LAST ':' (aliases such as "eth0:1" contain one, and long
// names run into the numbers with no blank after the colon). The two header lines have no ':'
// but a '|'.
inline int parse_net_dev_line(Cursor c, NetDevLine& l) {
  if (c.done()) return 0;
  const char* colon = last_colon(c);
  if (!colon) return std::memchr(c.p, '|', size_t(c.end - c.p)) ? 0 : -1;
  Cursor n{c.p, colon};
  skip_blanks(n);
  if (n.p == colon) return -1;
  l.name = std::string_view(n.p, size_t(colon - n.p));
  Cursor v{colon + 1, c.end};
  uint64_t s[16];  // the 16 columns net-procfs.c prints; any past them (a future kernel) are not read
  for (int i = 0; i < 16; ++i)
    if (!parse_u64(v, s[i])) return -1;
  for (int i = 0; i < kNetCounters; ++i) l.v[i] = s[kNetDevColumn[i]];
  return 1;
}

}  // namespace sysprof
