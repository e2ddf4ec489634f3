// process_tree's Pss and USS: each member's /proc/<pid>/smaps_rollup, read off the sampling thread.
//
// A read makes the kernel walk the member's page tables: ~50 us for a small process, but ~1-30 ms for one of a
// few hundred MiB (benchmarks/bench_smaps.py; a forked worker maps its parent's pages too), which would stall
// every source's row at millisecond intervals. So the thread's source (threaded) hands the reads to a helper
// thread of its own: every kPeriodNs it re-reads every watched member (a new one at once; where a pass takes
// over kPeriodNs / kBudget, kBudget passes' time apart instead: at most 5 % of a core), and the sampling
// thread only loads the latest values (two atomics per member, no lock, no syscall). sample()'s source
// (inline, a clone) reads on the calling thread at each call, as sample() reads every file.
//
// watch() opens the file once on the sampling thread to learn whether it is readable at all (the permission
// check is at open: another user's process gives EACCES; Linux < 4.14 has no file): such a member reads NaN,
// and the first such failure is returned as one message.
#pragma once
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <pthread.h>
#include <string>
#include <thread>
#include <unistd.h>

#include "io/proc_file.hpp"
#include "parse/smaps_rollup.hpp"
#include "sources/source.hpp"

namespace sysprof {

class SmapsReader {
 public:
  static constexpr size_t kCells = 256;              // process_tree's kMaxMembers
  static constexpr int64_t kPeriodNs = 100000000;    // every member's smaps_rollup every 100 ms ...
  static constexpr int kBudget = 20;                 // ... or 20 passes' time, where a pass takes over 5 ms

  SmapsReader(std::string proc_root, bool threaded) : root_(std::move(proc_root)), threaded_(threaded) {
    if (threaded_) {
      worker_ = std::thread([this] { run(); });
      have_clock_ = pthread_getcpuclockid(worker_.native_handle(), &clock_) == 0;
    }
  }
  ~SmapsReader() {
    if (!threaded_) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    worker_.join();
  }
  SmapsReader(const SmapsReader&) = delete;
  SmapsReader& operator=(const SmapsReader&) = delete;

  // Sampling thread, on membership changes: member k is pid now (0: none). False (with err, once per
  // reader) where its smaps_rollup cannot be opened; the member then reads NaN.
  bool watch(size_t k, int64_t pid, std::string& err) {
    Cell& c = cells_[k];
    c.have.store(0, std::memory_order_relaxed);
    c.want.store(0, std::memory_order_release);
    if (pid <= 0) return true;
    c.path = join(root_, (std::to_string(pid) + "/smaps_rollup").c_str());
    int fd = ::open(c.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (!warned_) {
        warned_ = true;
        err = c.path + ": " + std::strerror(errno) + ": pss_bytes and uss_bytes of pid " + std::to_string(pid) +
              " (and their totals) read NaN";
      }
      return false;
    }
    ::close(fd);
    c.want.store(pid, std::memory_order_release);
    if (threaded_) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        pending_ = true;
      }
      cv_.notify_one();
    }
    return true;
  }

  // The helper thread's CPU time (ns; 0: none), for the budget (engine/budget.hpp); any thread.
  int64_t cpu_ns() const {
    if (!have_clock_) return 0;
    int64_t ns = cpu_clock_ns(clock_, cpu_ns_.load(std::memory_order_relaxed));
    cpu_ns_.store(ns, std::memory_order_relaxed);
    return ns;
  }

  // Sampling thread, once per row: the helper thread's full passes run only while rows are taken (a stopped
  // Sampler costs nothing).
  void touch(int64_t mono_ns) { last_use_ns_.store(mono_ns, std::memory_order_relaxed); }

  // Sampling thread, each row: member k's latest Pss and USS in bytes, NaN until read (or unreadable).
  void get(size_t k, int64_t pid, double& pss, double& uss) {
    Cell& c = cells_[k];
    if (!threaded_ && c.want.load(std::memory_order_relaxed) == pid) read_cell(c, pid, c.path, buf_, scratch_);
    pss = uss = kNaN;
    if (c.have.load(std::memory_order_acquire) != pid) return;
    pss = c.pss.load(std::memory_order_relaxed);
    uss = c.uss.load(std::memory_order_relaxed);
  }

 private:
  struct Cell {
    std::atomic<int64_t> want{0};  // the member's pid (0: none, or unreadable)
    std::atomic<int64_t> have{0};  // whose values pss and uss are (0: none yet)
    std::atomic<double> pss{kNaN}, uss{kNaN};
    std::string path;  // inline reads only (the worker builds its own)
  };

  static void read_cell(Cell& c, int64_t pid, const std::string& path, std::string& buf, std::string& err) {
    SmapsRollup r;
    double pss = kNaN, uss = kNaN;
    if (read_small_file(path, buf, err) && parse_smaps_rollup(buf.data(), buf.size(), r, err)) {
      pss = double(r.bytes[kSmPss]);
      int64_t u = r.uss();
      uss = u < 0 ? kNaN : double(u);
    }
    c.pss.store(pss, std::memory_order_relaxed);
    c.uss.store(uss, std::memory_order_relaxed);
    c.have.store(pid, std::memory_order_release);
  }

  // The helper thread: a pass over the watched members every kPeriodNs, and one over the new ones on watch().
  void run() {
    std::string buf, err, path;
    auto next = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      auto start = std::chrono::steady_clock::now();
      bool full = start >= next && mono_now_ns() - last_use_ns_.load(std::memory_order_relaxed) < 2 * kPeriodNs;
      pending_ = false;
      lock.unlock();
      for (Cell& c : cells_) {
        int64_t pid = c.want.load(std::memory_order_acquire);
        if (!pid || (!full && c.have.load(std::memory_order_relaxed) == pid)) continue;
        path = join(root_, (std::to_string(pid) + "/smaps_rollup").c_str());
        read_cell(c, pid, path, buf, err);
        if (c.want.load(std::memory_order_acquire) != pid) c.have.store(0, std::memory_order_release);  // moved on
      }
      // The next full pass kPeriodNs after this one began, or kBudget passes' time later where passes are slow
      // (large members): the helper thread stays under 1/kBudget of a core.
      auto now = std::chrono::steady_clock::now();
      if (full) next = start + std::max<std::chrono::nanoseconds>(std::chrono::nanoseconds(kPeriodNs), kBudget * (now - start));
      else if (now >= next) next = now + std::chrono::nanoseconds(kPeriodNs);
      lock.lock();
      cv_.wait_until(lock, next, [this] { return stop_ || pending_; });
    }
  }

  std::string root_;
  bool threaded_;
  bool warned_ = false;  // sampling thread only
  Cell cells_[kCells];
  std::string buf_, scratch_;  // inline reads
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, pending_ = false;  // guarded by mu_
  std::atomic<int64_t> last_use_ns_{0};
  std::thread worker_;
  clockid_t clock_{};
  bool have_clock_ = false;
  mutable std::atomic<int64_t> cpu_ns_{0};
};

}  // namespace sysprof
