// Stress test of engine/latest.hpp, built with -fsanitize=thread (or address) by tests/test_latest.py:
// one writer publishes rows whose every value is derived from the row's number; readers check that each
// copy is one whole row; waiters check that wait() returns newer rows and ends at wake_all().
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "engine/latest.hpp"

int main(int argc, char** argv) {
  const uint64_t rows = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 200000;
  const size_t width = 48;
  sysprof::Latest latest(width);
  std::atomic<bool> open{true}, failed{false};
  std::atomic<uint64_t> reads{0}, wakes{0};
  auto fail = [&](const char* what, uint64_t n) {
    if (!failed.exchange(true)) std::fprintf(stderr, "FAIL: %s (row %llu)\n", what, (unsigned long long)n);
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&] {
      std::vector<double> v(width);
      uint64_t last = 0;
      while (open.load(std::memory_order_relaxed)) {
        int64_t ts = -1;
        uint64_t n = latest.read(ts, v.data());
        if (n == 0) continue;
        if (n < last) fail("row number went backwards", n);
        last = n;
        if (ts != int64_t(n) * 10) fail("timestamp of another row", n);
        for (size_t i = 0; i < width; ++i)
          if (v[i] != double(n) + double(i) / 64) fail("torn row", n);
        reads.fetch_add(1, std::memory_order_relaxed);
      }
    });
  threads.emplace_back([&] {
    uint64_t after = 0;
    for (;;) {
      auto w = latest.wait(after, 50000000, [&] { return open.load(std::memory_order_acquire); });
      if (w == sysprof::Latest::Wait::stopped) return;
      if (w == sysprof::Latest::Wait::row) {
        uint64_t n = latest.count();
        if (n <= after) fail("wait returned no newer row", n);
        after = n;
        wakes.fetch_add(1, std::memory_order_relaxed);
      }
    }
  });
  std::vector<double> row(width);
  for (uint64_t n = 1; n <= rows; ++n) {
    for (size_t i = 0; i < width; ++i) row[i] = double(n) + double(i) / 64;
    latest.publish(int64_t(n) * 10, row.data());
    if (n % 64 == 0) std::this_thread::yield();  // let the waiter sleep now and then
  }
  open.store(false, std::memory_order_release);
  latest.wake_all();
  for (auto& t : threads) t.join();
  int64_t ts;
  if (latest.read(ts, row.data()) != rows) fail("last row not the newest", rows);
  std::printf("rows %llu reads %llu wakes %llu\n", (unsigned long long)rows, (unsigned long long)reads.load(),
              (unsigned long long)wakes.load());
  return failed ? 1 : 0;
}
