// The most recent row, for readers that want "now" without draining the ring: one writer (the sampling
// thread) publishes every row it takes; any number of readers copy the latest one; waiters sleep until
// a newer one comes. The writer never blocks, never allocates and makes no syscall unless someone waits.
//
// Layout: two slots, each a seqlock over 64-bit words [row number, wall ns, value bits...]. The writer
// fills the slot the last published row is not in, then publishes its number and slot in `published_`. A reader
// copies the slot of the newest row; it collides with the writer only if the writer has lapped it (begun
// a second row since the reader loaded `published_`), and then it retries on the newer row. So a reader
// never waits on a writer that was preempted mid-row: the other slot is complete.
//
// Memory ordering (H.-J. Boehm, "Can seqlocks get along with programming language memory models?",
// MSPC 2012, section 5): every payload word is a std::atomic<uint64_t>, so the copy has no data race
// under the C++ memory model, and there is no fence: ThreadSanitizer models every step.
//  writer: seq.store(q+1, relaxed); words.store(release)...; seq.store(q+2, release)
//  reader: q0 = seq.load(acquire) (even); words.load(acquire)...; seq.load(relaxed) == q0
// If a word the reader loaded was written by a later row, that acquire load synchronises with its
// release store, which seq=q+1 (or a later value) precedes in the writer: so the reader's last seq load,
// after its word loads, cannot read q0, and the copy is discarded. If both seq loads read q0, every word
// is the one row q0 wrote (the acquire load of q0 synchronises with the release store of q0, and no later
// row's word was read). On x86-64 these are plain loads and stores; on AArch64, ldar/stlr per word.
//
// Waiting: a Dekker handshake between `published_` and `waiters_`, both seq_cst. The writer stores
// published_ then loads waiters_; a waiter increments waiters_ then loads published_. In the single total
// order either the writer sees the waiter (and bumps wake_ and wakes it) or the waiter sees the new row
// (and does not sleep). The futex word is wake_, not the seqlock: it changes on every publish that has a
// waiter and on wake_all() (stop), so stop() also reaches a waiter between its check and its sleep: the
// kernel's FUTEX_WAIT compares wake_ with the value read before the check and returns at once if it moved.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <climits>
#ifdef __linux__
#include <ctime>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace sysprof {

class Latest {
 public:
  explicit Latest(size_t width) : width_(width) {
    for (Slot& s : slots_) s.words.reset(new std::atomic<uint64_t>[kHead + width]);  // NOLINT: value-init
    for (Slot& s : slots_)
      for (size_t i = 0; i < kHead + width; ++i) s.words[i].store(0, std::memory_order_relaxed);
  }
  size_t width() const { return width_; }

  // Writer only (one thread at a time). Wait-free; a syscall only when a waiter sleeps. Publishes the next
  // row number (1, 2, ...).
  void publish(int64_t wall_ns, const double* row) noexcept { write(++rows_, wall_ns, row); }

  // The sampling thread's call, once per row taken: every row is numbered, and copied (published) when a
  // reader or waiter has ever asked (read() or wait()), when `force` (a run's first and last rows), or when
  // the last copy is kIdleCopyNs old. So until someone asks, the copy costs ~1/10 of the rows at 1 kHz, and
  // the first read finds a row at most kIdleCopyNs (+ one interval) old; from then on every row.
  void offer(int64_t mono_ns, int64_t wall_ns, const double* row, bool force) noexcept {
    uint64_t n = ++rows_;
    if (!force && !wanted_.load(std::memory_order_relaxed) && mono_ns - copied_ns_ < kIdleCopyNs) return;
    copied_ns_ = mono_ns;
    write(n, wall_ns, row);
  }
  static constexpr int64_t kIdleCopyNs = 10000000;  // 10 ms
  // The end of a run: the newest row numbered (wall_ns, row: its time and values) is published if offer()
  // left it out, so after stop() latest() is the last row taken.
  void settle(int64_t wall_ns, const double* row) noexcept {
    if (rows_ != written_) write(rows_, wall_ns, row);
  }

  // The number of the newest row (1 for the first published; 0 before any).
  uint64_t count() const { return published_.load(std::memory_order_seq_cst) >> 1; }

  // Copies the newest row: its number (0, and nothing copied, before the first), wall time and values
  // (width doubles to `out`, which needs no alignment).
  uint64_t read(int64_t& wall_ns, void* out) const noexcept {
    char* dst = static_cast<char*>(out);
    want();
    for (;;) {
      uint64_t p = published_.load(std::memory_order_acquire);  // (row number << 1) | its slot
      if (p == 0) return 0;
      uint64_t n = p >> 1;
      const Slot& s = slots_[p & 1];
      uint64_t q0 = s.seq.load(std::memory_order_acquire);
      if (q0 & 1) continue;  // lapped: the writer is on this slot again; the other one is complete
      const std::atomic<uint64_t>* w = s.words.get();
      uint64_t got = w[0].load(std::memory_order_acquire);
      uint64_t wall = w[1].load(std::memory_order_acquire);
      for (size_t i = 0, end = width_; i < end; ++i) {
        uint64_t bits = w[kHead + i].load(std::memory_order_acquire);
        std::memcpy(dst + i * sizeof bits, &bits, sizeof bits);
      }
      if (s.seq.load(std::memory_order_relaxed) != q0) continue;  // torn: retry on the newest
      // A whole row, but a newer one than published_ named (the writer rewrote this slot after the load of
      // n and has not yet published it): returning it would let the next call, which may still load the
      // row in between, go backwards. Retry: published_ moves on within the writer's next two stores.
      if (got != n) continue;
      wall_ns = int64_t(wall);
      return got;
    }
  }

  enum class Wait { row, timeout, stopped };
  // Until `open()` is false (stopped: checked first, so a stopped writer's rows are never waited for,
  // and re-checked after every wake_all()), a row numbered above `after` is published (row), or
  // timeout_ns passes (negative: no limit). Never touches the writer's path.
  template <class Open>
  Wait wait(uint64_t after, int64_t timeout_ns, Open open) {
    auto start = std::chrono::steady_clock::now();
    want();
    for (;;) {
      if (!open()) return Wait::stopped;
      if (count() > after) return Wait::row;
      int64_t left = kForever;
      if (timeout_ns >= 0) {
        auto spent = std::chrono::steady_clock::now() - start;
        left = timeout_ns - int64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(spent).count());
        if (left <= 0) return Wait::timeout;
      }
      waiters_.fetch_add(1, std::memory_order_seq_cst);
      uint32_t w = wake_.load(std::memory_order_acquire);
      if (open() && count() <= after) sleep(w, left);
      waiters_.fetch_sub(1, std::memory_order_relaxed);
    }
  }

  // Wakes every waiter (they re-check); stop() calls it after the sampler is marked not running.
  void wake_all() noexcept {
    wake_.fetch_add(1, std::memory_order_acq_rel);
#ifdef __linux__
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&wake_), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
#endif
  }

 private:
  static constexpr size_t kHead = 2;  // row number, wall ns
  static constexpr int64_t kForever = INT64_MAX;
  static_assert(sizeof(std::atomic<uint32_t>) == 4 && std::atomic<uint32_t>::is_always_lock_free,
                "the futex word must be a plain 32-bit word");

  // Sleeps until wake_ moves from w, a wake, a signal or `left` ns (each a reason to re-check).
  void sleep(uint32_t w, int64_t left) {
#ifdef __linux__
    timespec ts{};
    timespec* tp = nullptr;
    if (left != kForever) {
      ts.tv_sec = time_t(left / 1000000000);
      ts.tv_nsec = long(left % 1000000000);
      tp = &ts;
    }
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&wake_), FUTEX_WAIT_PRIVATE, w, tp, nullptr, 0);
#else
    // Elsewhere a short poll: the writer then owes a waiter nothing (no lock, no notify), and the native
    // backend needs /proc, so this path is rare. A new row is seen within kPollNs.
    (void)w;
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<int64_t>(left, kPollNs)));
#endif
  }
  static constexpr int64_t kPollNs = 200000;

  // Fills the slot the newest row is not in with row n, then publishes n and that slot.
  void write(uint64_t n, int64_t wall_ns, const double* row) noexcept {
    uint64_t slot = writes_++ & 1;
    written_ = n;
    Slot& s = slots_[slot];
    uint64_t q = s.seq.load(std::memory_order_relaxed);
    s.seq.store(q + 1, std::memory_order_relaxed);  // odd: being written
    std::atomic<uint64_t>* w = s.words.get();  // locals: atomics make the compiler reload members
    w[0].store(n, std::memory_order_release);
    w[1].store(uint64_t(wall_ns), std::memory_order_release);
    for (size_t i = 0, end = width_; i < end; ++i) {
      uint64_t bits;
      std::memcpy(&bits, &row[i], sizeof bits);
      w[kHead + i].store(bits, std::memory_order_release);
    }
    s.seq.store(q + 2, std::memory_order_release);
    published_.store((n << 1) | slot, std::memory_order_seq_cst);
    if (waiters_.load(std::memory_order_seq_cst) != 0) wake_all();
  }
  // A reader or waiter asks for rows: from now on the writer copies every row (offer()).
  void want() const noexcept {
    if (!wanted_.load(std::memory_order_relaxed)) wanted_.store(true, std::memory_order_relaxed);
  }

  struct Slot {
    std::atomic<uint64_t> seq{0};
    std::unique_ptr<std::atomic<uint64_t>[]> words;
  };
  const size_t width_;
  Slot slots_[2];
  alignas(64) std::atomic<uint64_t> published_{0};  // (newest row number << 1) | its slot; 0: none yet
  alignas(64) std::atomic<uint32_t> waiters_{0};
  std::atomic<uint32_t> wake_{0};
  mutable std::atomic<bool> wanted_{false};
  // The writer's own (never read elsewhere): rows numbered, slots written, when the last copy was made.
  alignas(64) uint64_t rows_ = 0;
  uint64_t written_ = 0;  // the number of the last row written
  uint64_t writes_ = 0;
  int64_t copied_ns_ = INT64_MIN / 2;
};

}  // namespace sysprof
