// The sampling engine: sources -> row -> ring, on one background thread that never touches Python.
#pragma once
#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/budget.hpp"
#include "engine/latest.hpp"
#include "engine/ranges.hpp"
#include "engine/ring.hpp"
#include "sources/source.hpp"

namespace sysprof {

// Records the latest message per source; written on error paths only.
class ErrorLog {
 public:
  void set(const char* source, const std::string& msg) noexcept;
  std::map<std::string, std::string> snapshot() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::string> errors_;
};

// An ordered set of sources filling one row. Not thread-safe: each thread owns its own collector.
class Collector {
 public:
  // Opens every enabled source; one that fails is left out and its reason logged.
  Collector(const Config& cfg, std::vector<std::string>& channels, ErrorLog& log);
  // Same sources and layout, own files and baselines.
  Collector(const Collector& other, const Config& cfg, ErrorLog& log);
  // Fills row[0, width()); a failing source gives NaN and logs why; the others are unaffected.
  // Then every value outside its channel's range (ranges.hpp) becomes NaN, and the first such value
  // of each channel is logged under its source.
  // tick: the deadline's index since the thread started (0 = its first row). A source whose interval is
  // k intervals (Config::intervals_ns) is read at the first tick at or after each multiple of k, so a
  // missed deadline delays its read to the next tick and never skips it; a source not due leaves its
  // slice of `row` untouched: row must hold the previous call's output (NaN stays NaN). Tick 0 and
  // kEvery read every source (kEvery: sample_now, the row at stop).
  static constexpr uint64_t kEvery = ~uint64_t(0);
  void sample(int64_t mono_ns, double* row, uint64_t tick = kEvery);
  // On: every call's row is the same buffer, holding the previous call's output (the sampling thread's), so a
  // source may leave values that did not change (Source::row_kept). Off (the default, and in copies): each
  // call may pass a fresh buffer and every due source writes its whole slice.
  void keep_rows(bool on) { keep_rows_ = on; }
  // Off: rows are the sources' raw output (the fuzz targets check that with the same rules).
  void set_range_enforcement(bool on) { enforce_ = on; }
  const RangeRules& range_rules() const { return rules_; }
  size_t width() const { return width_; }
  // Source::shutdown() of every source; callable from another thread while sample() runs.
  void shutdown();
  // Name of the source sample() is in now (nullptr between sources); readable from any thread.
  const char* current() const { return current_.load(std::memory_order_relaxed); }
  std::vector<std::map<std::string, std::string>> devices() const;
  // (source name, times sample() read it), in row order, for the sources that opened; any thread.
  std::vector<std::pair<std::string, uint64_t>> reads() const;
  // (source name, its period in intervals now), in row order; any thread.
  std::vector<std::pair<std::string, uint64_t>> periods() const;

  // For the budget (engine/budget.hpp), slot by slot (the sources that opened, in row order); the thread that
  // calls sample() unless said otherwise.
  size_t size() const { return slots_.size(); }
  const char* slot_name(size_t i) const { return slots_[i].name; }
  size_t config_index(size_t i) const { return slots_[i].config_index; }  // its place in Config::sources
  uint64_t period(size_t i) const { return slots_[i].period; }
  // A new period from the next read on (the source's helper follows: Source::retime).
  void set_period(size_t i, uint64_t period);
  uint64_t reads_of(size_t i) const { return reads_[i].load(std::memory_order_relaxed); }
  // On: the reads of one row in budget::kTimeEvery are timed (wall ns), summed in timed_ns_of.
  void time_reads(bool on) { time_reads_ = on; }
  uint64_t timed_of(size_t i) const { return slots_[i].timed; }
  uint64_t timed_ns_of(size_t i) const { return slots_[i].timed_ns; }
  int64_t helper_cpu_ns(size_t i) const { return slots_[i].src ? slots_[i].src->helper_cpu_ns() : 0; }
  bool helper_follows(size_t i) const { return slots_[i].src && slots_[i].src->helper_follows(); }

 private:
  struct Slot {
    std::unique_ptr<Source> src;
    size_t offset;
    uint64_t period = 1;  // in ticks: the source's interval / Config::interval_ns, rounded
    std::string err;  // reused buffer: repeated errors do not allocate
    uint64_t next_due = 0;  // the tick of its next read
    const char* name = nullptr;  // src->name(), kept here: no virtual call per tick
    size_t config_index = 0;  // its place in Config::sources
    uint64_t timed = 0, timed_ns = 0;  // the reads timed for the budget, and their wall time
  };  // what every tick reads, 96 bytes a source; the last message logged is apart (last_logged_)
  static uint64_t period_of(const Config& cfg, size_t i);
  void publish_periods(int64_t interval_ns);
  __attribute__((cold, noinline)) void log_change(size_t i);
  __attribute__((cold, noinline)) void report_ranges(double* row);
  std::vector<Slot> slots_;
  std::vector<std::string> last_logged_;  // per slot: its message last logged (a repeat is not logged again)
  std::unique_ptr<std::atomic<uint64_t>[]> reads_;  // per slot; one writer (the sampling thread)
  std::unique_ptr<std::atomic<uint64_t>[]> periods_;  // per slot, its period, for other threads
  int64_t interval_ns_ = 1;
  bool time_reads_ = false;
  size_t width_ = 0;
  ErrorLog* log_;
  RangeRules rules_;
  bool enforce_ = true;
  bool keep_rows_ = false;
  std::vector<std::string> names_;  // channel names, for the range messages
  std::vector<char> range_logged_;  // per channel: a violation was logged
  std::atomic<const char*> current_{nullptr};
};

// Sample-cost histogram: log-linear buckets (16 per power of two, ~6 % resolution), lock-free, one writer.
class CostHistogram {
 public:
  void record(uint64_t ns);
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double mean() const;
  double quantile(double q) const;
  double max() const { return count() ? double(max_.load(std::memory_order_relaxed)) : kNaN; }

 private:
  static constexpr int kBuckets = 16 + 60 * 16;
  std::array<std::atomic<uint64_t>, kBuckets> buckets_{};
  std::atomic<uint64_t> count_{0}, sum_{0}, max_{0};
};

// fork(): a child process inherits a Sampler but not its threads, and its locks may be held by
// threads that do not exist there. In the child an inherited Sampler is inert: not running; stop()
// and the destructor are instant no-ops that touch no thread and no lock and free nothing the
// parent's threads share (it is leaked: a few objects, once per fork); start(), sample_now() throw;
// drain() returns no rows (they are the parent's). The child makes its own Samplers.
class Sampler {
 public:
  explicit Sampler(const Config& cfg);
  ~Sampler();
  // True in a process forked after this Sampler was made.
  bool inherited() const;

  const std::vector<std::string>& channels() const { return channels_; }
  std::map<std::string, std::string> errors() const;
  // Static facts about devices (GPU name, UUID, ...), from every source that has some.
  // Read live: a GPU's name and UUID may arrive after construction (NVML describes on its own thread).
  std::vector<std::map<std::string, std::string>> devices() const {
    return inherited() ? devices_ : core_->collector.devices();
  }
  // Starts the thread. Throws std::runtime_error while a thread abandoned by stop() is still stuck.
  void start();
  // Stops the thread: waits up to kStopTimeoutNs for it to finish its tick, then abandons it
  // (detaches) if it is stuck in a source call (a hung driver); it cleans up when the call returns.
  void stop();
  static constexpr int64_t kStopTimeoutNs = 2000000000;
  bool running() const { return !inherited() && running_.load(std::memory_order_acquire); }
  // Synchronous sample from a second collector; rates relative to the previous call.
  int64_t sample_now(double* row);
  // Consumer side of the ring: copies up to max_rows of the oldest rows out (none when inherited).
  // Thread-safe: concurrent callers are serialized.
  size_t drain(size_t max_rows, int64_t* ts, double* values);
  size_t buffered() const { return inherited() ? 0 : size_t(core_->ring.counts().buffered); }
  size_t capacity() const { return core_->ring.capacity(); }
  // The newest row the thread took, copied into values (width doubles, any alignment) with its wall
  // time: no lock, no syscall, independent of the ring. Returns its number (1 for the first row this
  // Sampler took, as stats().taken counts), or 0 before the first row and when inherited (no copy).
  uint64_t latest(int64_t& wall_ns, void* values) const {
    return inherited() ? 0 : core_->latest.read(wall_ns, values);
  }
  uint64_t latest_number() const { return inherited() ? 0 : core_->latest.count(); }
  // Waits (futex on Linux) for a row numbered above `after`: row; timeout after timeout_ns (< 0: none);
  // stopped, at once, when the Sampler is not running (inherited included) or stop() is called.
  Latest::Wait wait_next(uint64_t after, int64_t timeout_ns) {
    if (inherited()) return Latest::Wait::stopped;
    return core_->latest.wait(after, timeout_ns, [this] { return running_.load(std::memory_order_acquire); });
  }

  struct Stats {
    uint64_t taken, dropped, drained, buffered, missed_deadlines;
    double sample_ns_mean, sample_ns_p99, sample_ns_max;
    std::vector<std::pair<std::string, uint64_t>> reads;  // per source: the thread's reads (Collector::reads)
    // The CPU of sysprof's sampling threads (the sampling thread and the sources' helpers) while running, and its
    // share of one core over the last second as of the latest evaluation (NaN before the first); the budget
    // (0: none).
    double cpu_seconds, cpu_fraction, budget;
  };
  Stats stats() const;
  // Each source's interval now (ns), in row order: the budget may have changed them.
  std::vector<std::pair<std::string, int64_t>> intervals() const;
  // Every change the budget made, oldest first (at most 4096).
  std::vector<budget::Change> interval_changes() const {
    return inherited() ? std::vector<budget::Change>{} : core_->budget.changes();  // its lock may be held in a child
  }
  // Tests (Config::budget_test_cost_ns set): source `name`'s fixed CPU per read from now on. False: no such source.
  bool set_test_cost(const std::string& name, int64_t ns);

 private:
  // Everything the sampling thread touches. Shared with the thread, so that a thread abandoned by
  // stop() (stuck in a driver call) keeps it alive, and releases it, with its sources, on return.
  struct Core {
    Core(const Config& c, std::vector<std::string>& channels)
        : cfg(c), collector(cfg, channels, log), ring(ring_rows(c, collector.width()), collector.width()),
          row(collector.width()), budget(c.budget, c.interval_ns, given(c), c.budget_test_cost_ns) {
      collector.keep_rows(true);  // the thread passes `row` to every call
      collector.time_reads(budget.timing());
    }
    static std::vector<char> given(const Config& c) {
      std::vector<char> g(c.sources.size(), 0);
      for (size_t i = 0; i < c.intervals_given.size() && i < g.size(); ++i) g[i] = c.intervals_given[i];
      return g;
    }
    // cfg.capacity rows, or fewer where they would take more than cfg.max_ring_bytes (never under 2).
    static size_t ring_rows(const Config& c, size_t width) {
      if (!c.max_ring_bytes) return c.capacity;
      size_t fit = c.max_ring_bytes / ((width + 1) * sizeof(double));
      return std::max<size_t>(2, std::min(c.capacity, fit));
    }
    Config cfg;
    ErrorLog log;
    Collector collector;  // used by the thread only, while it runs
    Ring ring;
    std::vector<double> row;
    Latest latest{collector.width()};  // the newest row, for latest() and wait_next()
    std::mutex mu;  // guards done (and, off Linux, the sleep on cv)
    std::condition_variable cv;  // off Linux: wakes the sleeping thread on stop
    std::condition_variable done_cv;  // the thread has returned from run()
    // Non-zero: stop. A 32-bit word so that the thread can sleep on it (Linux: one futex syscall per tick
    // that both times out at the deadline and wakes on stop; no mutex on the sampling path).
    std::atomic<uint32_t> stop{0};
    bool done = true;
    std::atomic<uint64_t> missed{0};
    CostHistogram cost;
    budget::Controller budget;  // the thread's CPU and the sources' intervals under the budget
  };
  static void run(Core& c);
  // Sleeps until the absolute CLOCK_MONOTONIC time deadline_ns or stop; true when stopping. now_ns: the caller's
  // last clock read (it picks the way to sleep).
  static bool sleep_until(Core& c, int64_t deadline_ns, int64_t now_ns);
  // Waits up to this long sleep in clock_nanosleep (stop() is seen at the deadline), longer ones on the futex.
  static constexpr int64_t kNanosleepNs = 2000000;
  static void wake(Core& c);

  std::vector<std::string> channels_;
  std::shared_ptr<Core> core_;
  std::vector<std::map<std::string, std::string>> devices_;
  std::unique_ptr<Collector> sync_collector_;
  std::vector<double> sync_row_;  // sample_now()'s row, kept between calls as the thread keeps its own
  std::mutex sync_mu_;
  std::mutex life_mu_;  // serializes start() and stop() (and so every use of thread_)
  std::unique_ptr<std::thread> thread_;  // a pointer, so that a child can forget it without detaching
  std::atomic<bool> running_{false};
  std::mutex drain_mu_;
  uint64_t generation_;  // fork generation of the process that made this Sampler
};

}  // namespace sysprof
