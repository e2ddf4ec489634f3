// csrc/markers/: the writer side of the markers' shared-memory ring (sysprof.mark / sysprof.mark_instant),
// the native twin of the pure-Python writer in sysprof/markers/ring.py, which states the format (the layout
// constants below are the same numbers; tests/test_markers.py writes with both and reads with the one reader).
// One process writes its own ring; the recorder (sysprof record) reads it. No system call on the hot path
// (but a thread's first marker: gettid), no lock: a slot is claimed with a compare-and-swap on the claim
// cursor, written, then published by a release store of its seq.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sysprof::markers {

constexpr size_t kHeader = 256;
constexpr size_t kSlotShift = 8;
constexpr size_t kSlotSize = size_t(1) << kSlotShift;
constexpr uint64_t kSlots = 4096;
constexpr uint64_t kCapacity = kSlots - 64;  // unread records before a new one is dropped (ring.py CAPACITY)
constexpr size_t kDroppedAt = 64;
constexpr size_t kClaimAt = 72;  // the native writer's claim cursor (the Python writer counts in Python)
constexpr size_t kTailAt = 128;
constexpr size_t kPayloadAt = 24;
constexpr size_t kPayloadMax = kSlotSize - kPayloadAt;
constexpr size_t kRingSize = kHeader + kSlots * kSlotSize;

// The calling thread's kernel tid, cached per thread (refetched in a forked child).
uint32_t this_tid() noexcept;

// Writes one record (stamped now, CLOCK_REALTIME, on this thread's tid) into the ring at base (kRingSize
// bytes, 8-byte aligned). word: kind, flags and lengths as ring.py's word() gives, without the tid.
// false when the ring holds kCapacity unread records or the payload is too long (counted as dropped).
bool put(unsigned char* base, uint64_t word, const char* payload, size_t n) noexcept;

}  // namespace sysprof::markers
