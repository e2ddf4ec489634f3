// Single-producer single-consumer ring of fixed-width rows: an int64 timestamp and `width` doubles.
// The producer (sampler thread) never blocks: when the ring is full the new row is dropped and counted.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

namespace sysprof {

class Ring {
 public:
  // Up to this size the ring is written once at construction, so that the sampling thread never takes a
  // first-touch page fault (with its page zeroing and memory-cgroup charge: ~0.5 µs per row at 1 kHz on the
  // host set, measured in benchmarks/bench_paced.py). A larger ring (an explicit capacity) is left untouched:
  // its pages become resident only as rows are written, so it costs no memory until used.
  static constexpr size_t kPrefaultBytes = size_t(16) << 20;

  Ring(size_t capacity, size_t width)
      : capacity_(checked(capacity, width)), width_(width), ts_(new int64_t[capacity]),
        values_(new double[capacity * width]) {
    if (capacity * (width + 1) * sizeof(double) <= kPrefaultBytes) {
      std::memset(ts_.get(), 0, capacity * sizeof(int64_t));
      std::memset(values_.get(), 0, capacity * width * sizeof(double));
    }
  }

  size_t capacity() const { return capacity_; }

  // capacity * width must not overflow size_t (new[] would then allocate a wrapped, small size).
  static size_t checked(size_t capacity, size_t width) {
    if (capacity == 0 || (width && capacity > SIZE_MAX / sizeof(double) / width)) throw std::bad_alloc();
    return capacity;
  }
  size_t width() const { return width_; }

  // Producer only.
  bool push(int64_t ts, const double* row) {
    uint64_t h = head_.load(std::memory_order_relaxed);
    uint64_t t = tail_.load(std::memory_order_acquire);
    if (h - t >= capacity_) {
      dropped_.fetch_add(1, std::memory_order_release);
      return false;
    }
    size_t i = size_t(h % capacity_);
    ts_[i] = ts;
    if (width_) std::memcpy(&values_[i * width_], row, width_ * sizeof(double));
    head_.store(h + 1, std::memory_order_release);  // publishes the row
    return true;
  }

  // Consumer only. Copies up to max_rows of the oldest rows out; returns how many.
  size_t pop(size_t max_rows, int64_t* ts_out, double* values_out) {
    uint64_t t = tail_.load(std::memory_order_relaxed);
    uint64_t h = head_.load(std::memory_order_acquire);
    size_t n = size_t(std::min<uint64_t>(h - t, max_rows));
    size_t start = size_t(t % capacity_);
    size_t first = std::min(n, capacity_ - start);  // rows before the wrap
    std::memcpy(ts_out, &ts_[start], first * sizeof(int64_t));
    std::memcpy(ts_out + first, &ts_[0], (n - first) * sizeof(int64_t));
    if (width_) {
      std::memcpy(values_out, &values_[start * width_], first * width_ * sizeof(double));
      std::memcpy(values_out + first * width_, &values_[0], (n - first) * width_ * sizeof(double));
    }
    tail_.store(t + n, std::memory_order_release);  // frees the slots
    return n;
  }

  // One consistent snapshot of the ring's accounting.
  struct Counts {
    uint64_t drained, dropped, buffered;
  };
  Counts counts() const {
    uint64_t t = tail_.load(std::memory_order_acquire);
    uint64_t d = dropped_.load(std::memory_order_acquire);
    uint64_t h = head_.load(std::memory_order_acquire);
    return Counts{t, d, h - t};
  }

 private:
  const size_t capacity_;
  const size_t width_;
  std::unique_ptr<int64_t[]> ts_;
  std::unique_ptr<double[]> values_;
  alignas(64) std::atomic<uint64_t> head_{0};  // written by the producer only
  alignas(64) std::atomic<uint64_t> tail_{0};  // written by the consumer only
  alignas(64) std::atomic<uint64_t> dropped_{0};
};

}  // namespace sysprof
