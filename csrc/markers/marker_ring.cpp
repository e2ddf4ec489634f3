// The native marker writer (see marker_ring.hpp).
#include "markers/marker_ring.hpp"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

#include "sources/source.hpp"

namespace sysprof::markers {

namespace {

uint64_t* word_at(unsigned char* base, size_t off) { return reinterpret_cast<uint64_t*>(base + off); }

struct TidCache {
  uint64_t generation = ~uint64_t(0);
  uint32_t tid = 0;
};
thread_local TidCache tid_cache;

}  // namespace

uint32_t this_tid() noexcept {
  uint64_t g = fork_generation();
  if (tid_cache.generation != g) {  // first call on this thread, or the forking thread in a child
    tid_cache.tid = uint32_t(syscall(SYS_gettid));
    tid_cache.generation = g;
  }
  return tid_cache.tid;
}

bool put(unsigned char* base, uint64_t word, const char* payload, size_t n) noexcept {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  int64_t ts = int64_t(now.tv_sec) * 1000000000 + now.tv_nsec;
  uint64_t tid = this_tid();
  uint64_t* claim = word_at(base, kClaimAt);
  if (n > kPayloadMax) {
    __atomic_fetch_add(word_at(base, kDroppedAt), 1, __ATOMIC_RELAXED);
    return false;
  }
  uint64_t i = __atomic_load_n(claim, __ATOMIC_RELAXED);
  for (;;) {
    if (i - __atomic_load_n(word_at(base, kTailAt), __ATOMIC_ACQUIRE) >= kCapacity) {
      __atomic_fetch_add(word_at(base, kDroppedAt), 1, __ATOMIC_RELAXED);
      return false;
    }
    if (__atomic_compare_exchange_n(claim, &i, i + 1, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) break;
  }
  unsigned char* slot = base + kHeader + ((i & (kSlots - 1)) << kSlotShift);
  uint64_t w = word | tid;
  std::memcpy(slot + 8, &ts, 8);
  std::memcpy(slot + 16, &w, 8);
  std::memcpy(slot + kPayloadAt, payload, n);
  __atomic_store_n(word_at(slot, 0), i + 1, __ATOMIC_RELEASE);  // published
  return true;
}

}  // namespace sysprof::markers
