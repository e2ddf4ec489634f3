#include "engine/sampler.hpp"

#include "sources/registry.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <pthread.h>
#ifdef __linux__
#include <cerrno>
#include <climits>
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace sysprof {

void ErrorLog::set(const char* source, const std::string& msg) noexcept {
  try {
    std::lock_guard<std::mutex> g(mu_);
    errors_[source] = msg;
  } catch (...) {  // out of memory for a message: losing the message beats losing the sampler
  }
}

std::map<std::string, std::string> ErrorLog::snapshot() const {
  std::lock_guard<std::mutex> g(mu_);
  return errors_;
}

// Ticks between two reads of source i: its interval over the sampler's, rounded to the nearest whole number.
uint64_t Collector::period_of(const Config& cfg, size_t i) {
  int64_t base = cfg.interval_ns;
  int64_t own = i < cfg.intervals_ns.size() && cfg.intervals_ns[i] > 0 ? cfg.intervals_ns[i] : base;
  if (own < base)
    throw std::invalid_argument("the interval of source '" + cfg.sources[i] + "' (" + std::to_string(own) +
                                " ns) is shorter than the sampler's (" + std::to_string(base) + " ns)");
  int64_t q = own / base, r = own % base;
  return uint64_t(q + (r >= base - r ? 1 : 0));
}

Collector::Collector(const Config& cfg, std::vector<std::string>& channels, ErrorLog& log) : log_(&log) {
  size_t first = channels.size();
  if (cfg.interval_ns <= 0) throw std::invalid_argument("interval_ns must be positive");
  if (cfg.intervals_ns.size() > cfg.sources.size())
    throw std::invalid_argument("more intervals than sources");
  std::vector<SourceFactory> factories;  // every name is checked before any source opens
  std::vector<uint64_t> periods;
  for (size_t i = 0; i < cfg.sources.size(); ++i) {
    const std::string& name = cfg.sources[i];
    SourceFactory f = find_source(name);
    if (!f) {
      std::string known;
      for (const auto& n : source_names()) known += (known.empty() ? "" : ", ") + n;
      throw std::invalid_argument("unknown source '" + name + "' (registered: " + known + ")");
    }
    if (std::find(cfg.sources.begin(), cfg.sources.begin() + long(i), name) != cfg.sources.begin() + long(i))
      throw std::invalid_argument("source '" + name + "' given twice");
    factories.push_back(f);
    periods.push_back(period_of(cfg, i));
  }
  Config own = cfg;  // what each source sees: its own interval
  for (size_t i = 0; i < factories.size(); ++i) {
    auto src = factories[i]();
    std::string err;
    size_t before = channels.size();
    own.interval_ns = int64_t(periods[i]) * cfg.interval_ns;
    if (!src->open(own, channels, err)) {
      channels.resize(before);
      log.set(src->name(), err.empty() ? "unavailable" : err);
      continue;
    }
    if (!err.empty()) log.set(src->name(), err);  // usable, with a warning (e.g. a skipped line)
    slots_.push_back(Slot{std::move(src), width_, periods[i], {}});
    slots_.back().config_index = i;
    last_logged_.push_back(err);
    slots_.back().name = slots_.back().src->name();
    width_ += slots_.back().src->width();
  }
  reads_.reset(new std::atomic<uint64_t>[slots_.size()]());
  publish_periods(cfg.interval_ns);
  names_.assign(channels.begin() + long(first), channels.end());
  rules_ = RangeRules(names_, online_cpus(cfg));
  range_logged_.assign(width_, 0);
}

Collector::Collector(const Collector& other, const Config& cfg, ErrorLog& log)
    : log_(&log), rules_(other.rules_), enforce_(other.enforce_), names_(other.names_),
      range_logged_(other.width_, 0) {
  Config own = cfg;
  for (const auto& s : other.slots_) {
    std::string err;
    own.interval_ns = int64_t(s.period) * cfg.interval_ns;
    auto src = s.src->clone(own, err);
    // A failed clone (the file vanished in between) keeps its place as a NaN-only slot, so the
    // layout stays the original's.
    if (!src) log.set(s.src->name(), err);
    slots_.push_back(Slot{std::move(src), width_, s.period, {}});
    last_logged_.emplace_back();
    slots_.back().name = s.name;
    slots_.back().config_index = s.config_index;
    width_ += s.src->width();
  }
  reads_.reset(new std::atomic<uint64_t>[slots_.size()]());
  publish_periods(cfg.interval_ns);
}

void Collector::publish_periods(int64_t interval_ns) {
  interval_ns_ = interval_ns;
  periods_.reset(new std::atomic<uint64_t>[slots_.size()]());
  for (size_t i = 0; i < slots_.size(); ++i) periods_[i].store(slots_[i].period, std::memory_order_relaxed);
}

void Collector::set_period(size_t i, uint64_t period) {
  Slot& s = slots_[i];
  if (period < 1 || period == s.period) return;
  // The read already due stays where it is; the ones after it follow the new period (the grid of multiples of
  // the period, as at the start, from the next read on).
  s.period = period;
  periods_[i].store(period, std::memory_order_relaxed);
  if (s.src) s.src->retime(int64_t(period) * interval_ns_);
}

void Collector::sample(int64_t mono_ns, double* row, uint64_t tick) {
  const bool every = tick == kEvery;
  if (tick == 0)  // a new run: its first row reads every source
    for (Slot& s : slots_) s.next_due = 0;
  // The budget's timing: on one row in budget::kTimeEvery, each read's wall time, one clock read after each (a
  // system call where the clock has no vDSO: 0.2-0.5 us on a VM).
  const bool timing = time_reads_ && !every && tick % budget::kTimeEvery == 0;
  int64_t mark = timing ? mono_now_ns() : 0;
  bool read = every;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (!every) {
      if (tick < s.next_due) continue;  // not due: its slice keeps the previous row's values
      // The next multiple of the period: one addition, a division only after missed deadlines.
      s.next_due += s.period;
      if (s.next_due <= tick) s.next_due = (tick / s.period + 1) * s.period;
    }
    size_t w = (i + 1 < slots_.size() ? slots_[i + 1].offset : width_) - s.offset;
    if (!s.src) {
      fill_nan(row + s.offset, w);
      continue;
    }
    read = true;
    reads_[i].store(reads_[i].load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    current_.store(s.name, std::memory_order_relaxed);
    s.src->row_kept = keep_rows_ && tick != 0;
    s.err.clear();
    s.src->sample(mono_ns, row + s.offset, s.err);
    if (timing) {
      int64_t now = mono_now_ns();
      s.timed_ns += uint64_t(std::max<int64_t>(0, now - mark));
      ++s.timed;
      mark = now;
    }
    if (__builtin_expect(!s.err.empty(), 0)) log_change(i);
  }
  current_.store(nullptr, std::memory_order_relaxed);
  // A last safety net: one read-only pass. A row no source read is the previous row, checked then (keep_rows_: the
  // same buffer; otherwise every call reads at least tick 0's sources).
  if (enforce_ && (read || !keep_rows_) && __builtin_expect(rules_.count(row) != 0, 0)) report_ranges(row);
}

// Logs a source's message if it is not the one logged last: a stuck error costs no lock. Out of line (and cold):
// the tick's loop stays short.
void Collector::log_change(size_t i) {
  Slot& s = slots_[i];
  if (s.err == last_logged_[i]) return;
  last_logged_[i] = s.err;
  log_->set(s.name, s.err);
}

// Writes NaN over each out-of-range value; logs the first one of each channel (allocates only then).
void Collector::report_ranges(double* row) {
  size_t slot = 0;
  for (size_t i = 0; i < width_; ++i) {
    const char* why = rules_.violation(i, row[i]);
    if (!why) continue;
    double v = row[i];
    row[i] = kNaN;
    if (range_logged_[i]) continue;
    range_logged_[i] = 1;
    while (slot + 1 < slots_.size() && slots_[slot + 1].offset <= i) ++slot;
    Slot& s = slots_[slot];
    if (!s.src) continue;
    char num[32];
    std::snprintf(num, sizeof num, "%.17g", v);
    try {
      log_->set(s.src->name(), names_[i] + " read " + num + ", outside its range (" + why + "): NaN written");
    } catch (...) {  // no memory for the message: the NaN is what matters
    }
    last_logged_[slot].clear();  // the source's own next message is logged again
  }
}

void Collector::shutdown() {
  for (Slot& s : slots_)
    if (s.src) s.src->shutdown();
}

std::vector<std::pair<std::string, uint64_t>> Collector::reads() const {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].src) out.emplace_back(slots_[i].src->name(), reads_[i].load(std::memory_order_relaxed));
  return out;
}

std::vector<std::pair<std::string, uint64_t>> Collector::periods() const {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].src) out.emplace_back(slots_[i].name, periods_[i].load(std::memory_order_relaxed));
  return out;
}

std::vector<std::map<std::string, std::string>> Collector::devices() const {
  std::vector<std::map<std::string, std::string>> out;
  for (const Slot& s : slots_)
    if (s.src)
      for (auto& d : s.src->devices()) out.push_back(std::move(d));
  return out;
}

void CostHistogram::record(uint64_t ns) {
  int b;
  if (ns < 16) {
    b = int(ns);
  } else {
    int msb = 63 - __builtin_clzll(ns);
    b = 16 + (msb - 4) * 16 + int((ns >> (msb - 4)) & 15);
  }
  if (b >= kBuckets) b = kBuckets - 1;
  // One writer (the sampling thread): plain loads and stores, no locked read-modify-write; readers see each
  // word whole (relaxed atomics), a snapshot that may be a row behind.
  auto bump = [](std::atomic<uint64_t>& a, uint64_t by) {
    a.store(a.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  };
  bump(buckets_[size_t(b)], 1);
  bump(sum_, ns);
  if (ns > max_.load(std::memory_order_relaxed)) max_.store(ns, std::memory_order_relaxed);
  bump(count_, 1);
}

double CostHistogram::mean() const {
  uint64_t n = count();
  return n ? double(sum_.load(std::memory_order_relaxed)) / double(n) : kNaN;
}

double CostHistogram::quantile(double q) const {
  uint64_t n = count();
  if (!n) return kNaN;
  // Nearest rank: the smallest value with at least q*n values at or below it.
  uint64_t rank = std::max<uint64_t>(1, uint64_t(std::ceil(q * double(n)))), seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += buckets_[size_t(b)].load(std::memory_order_relaxed);
    if (seen >= rank) {
      if (b < 16) return double(b);
      int msb = (b - 16) / 16 + 4, sub = (b - 16) % 16;
      double lo = double((uint64_t(16 + sub)) << (msb - 4));
      return std::min(lo + double(uint64_t(1) << (msb - 4)) / 2, max());  // bucket middle, never above the max
    }
  }
  return kNaN;
}

namespace {

// Bumped in the child of every fork(). pthread_atfork handlers run in the forking thread only, with
// the other threads gone from the child: this one writes an atomic and takes no lock.
std::atomic<uint64_t> forks{0};
void on_fork_child() { forks.fetch_add(1, std::memory_order_relaxed); }
const int atfork_registered = pthread_atfork(nullptr, nullptr, on_fork_child);

const char* kInheritedStart =
    "this Sampler was made before fork() and its thread is in the parent process; make a new Sampler in this "
    "process";

}  // namespace

uint64_t fork_generation() { return forks.load(std::memory_order_relaxed); }

Sampler::Sampler(const Config& cfg)
    : core_(std::make_shared<Core>(cfg, channels_)),
      devices_(core_->collector.devices()),
      sync_collector_(std::make_unique<Collector>(core_->collector, core_->cfg, core_->log)),
      sync_row_(sync_collector_->width()),
      generation_(fork_generation()) {
  (void)atfork_registered;
  sync_collector_->keep_rows(true);  // its row is sync_row_, copied out: the same rules as the thread's
}

bool Sampler::inherited() const { return generation_ != fork_generation(); }

Sampler::~Sampler() {
  if (inherited()) {
    // The parent's threads may hold these locks or use the core; none of them exists here. Leaked
    // on purpose: no destructor may wait on them, and the NVML library must not be shut down here.
    (void)thread_.release();
    (void)sync_collector_.release();
    (void)new std::shared_ptr<Core>(std::move(core_));
    return;
  }
  stop();
}

std::map<std::string, std::string> Sampler::errors() const {
  if (inherited()) return {{"sampler", "inherited through fork(): not running in this process"}};
  return core_->log.snapshot();
}

size_t Sampler::drain(size_t max_rows, int64_t* ts, double* values) {
  if (inherited()) return 0;
  std::lock_guard<std::mutex> g(drain_mu_);
  return core_->ring.pop(max_rows, ts, values);
}

void Sampler::start() {
  if (inherited()) throw std::runtime_error(kInheritedStart);
  std::lock_guard<std::mutex> life(life_mu_);
  if (thread_) return;
  {
    std::lock_guard<std::mutex> g(core_->mu);
    if (!core_->done)
      throw std::runtime_error(
          "the sampling thread abandoned by stop() is still blocked in a source call; see errors");
    core_->stop.store(0, std::memory_order_relaxed);
    core_->done = false;
  }
  std::shared_ptr<Core> core = core_;
  try {
    thread_ = std::make_unique<std::thread>([core] {
      // An exception must not escape a thread (std::terminate would end the host process), and
      // `done` must be set whatever happens so that stop() and a later start() work.
      try {
        run(*core);
      } catch (const std::exception& e) {
        core->log.set("sampler", std::string("sampling thread stopped: ") + e.what());
      } catch (...) {
        core->log.set("sampler", "sampling thread stopped by an unknown exception");
      }
      std::lock_guard<std::mutex> g(core->mu);
      core->done = true;
      core->done_cv.notify_all();
    });
  } catch (...) {  // no thread (e.g. EAGAIN): undo, so the next start() is not refused
    std::lock_guard<std::mutex> g(core_->mu);
    core_->done = true;
    throw;
  }
  running_.store(true, std::memory_order_release);
}

void Sampler::stop() {
  if (inherited()) {
    (void)thread_.release();  // the parent's thread: neither joined nor detached here
    return;
  }
  std::lock_guard<std::mutex> life(life_mu_);
  if (!thread_) return;
  running_.store(false, std::memory_order_release);
  core_->latest.wake_all();  // wait_next() callers return: not running
  Core& c = *core_;
  wake(c);
  c.collector.shutdown();  // e.g. NVML skips the devices left in this tick
  bool done;
  {
    std::unique_lock<std::mutex> lk(c.mu);
    done = c.done_cv.wait_for(lk, std::chrono::nanoseconds(kStopTimeoutNs), [&c] { return c.done; });
  }
  if (done) {
    thread_->join();
    thread_.reset();
    return;
  }
  // Stuck in a call that cannot be interrupted (a hung driver). The thread holds its own reference
  // to the core: it finishes the call, sees stop, and releases the sources (NVML shutdown included).
  const char* where = c.collector.current();
  c.log.set(where ? where : "sampler",
            "sampling thread blocked in this source for over " + std::to_string(kStopTimeoutNs / 1000000) +
                " ms at stop(); abandoned (it exits when the call returns)");
  thread_->detach();
  thread_.reset();
}

int64_t Sampler::sample_now(double* row) {
  if (inherited()) throw std::runtime_error(kInheritedStart);
  std::lock_guard<std::mutex> g(sync_mu_);
  int64_t wall = wall_now_ns();
  sync_collector_->sample(mono_now_ns(), sync_row_.data());
  std::copy(sync_row_.begin(), sync_row_.end(), row);
  return wall;
}

Sampler::Stats Sampler::stats() const {
  const Core& c = *core_;
  Ring::Counts n = c.ring.counts();
  // taken counts the thread's samples, independently of the ring's own accounting, so that
  // taken == drained + dropped + buffered is a real check (exact once stopped; while running a row
  // can be in the ring a moment before its sample is counted).
  return Stats{c.cost.count(),
               n.dropped,
               n.drained,
               n.buffered,
               c.missed.load(std::memory_order_relaxed),
               c.cost.mean(),
               c.cost.quantile(0.99),
               c.cost.max(),
               c.collector.reads(),
               c.budget.cpu_seconds(),
               c.budget.cpu_fraction(),
               c.budget.budget()};
}

std::vector<std::pair<std::string, int64_t>> Sampler::intervals() const {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& [name, period] : core_->collector.periods())
    out.emplace_back(name, int64_t(period) * core_->cfg.interval_ns);
  return out;
}

bool Sampler::set_test_cost(const std::string& name, int64_t ns) {
  const auto& names = core_->cfg.sources;
  auto at = std::find(names.begin(), names.end(), name);
  if (at == names.end()) return false;
  core_->budget.set_test_cost(size_t(at - names.begin()), ns);
  return true;
}

void Sampler::wake(Core& c) {
#ifdef __linux__
  c.stop.store(1, std::memory_order_release);
  syscall(SYS_futex, &c.stop, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, nullptr, nullptr, 0);
#else
  {
    std::lock_guard<std::mutex> g(c.mu);  // the sleeper checks stop under mu: no lost wake-up
    c.stop.store(1, std::memory_order_release);
  }
  c.cv.notify_all();
#endif
}

bool Sampler::sleep_until(Core& c, int64_t deadline_ns, int64_t now_ns) {
#ifdef __linux__
  static_assert(sizeof(c.stop) == 4 && std::atomic<uint32_t>::is_always_lock_free, "a futex is a plain 32-bit word");
  // A short wait (the high rates, where the cost of a wake-up is paid a thousand times a second): clock_nanosleep,
  // as cheap as the futex wait on a quiet machine and 1-3 us of CPU cheaper per wake beside other load (no hash
  // bucket to lock, no futex queue; benchmarks/bench_paced.py, "the wake-up"). stop() does not interrupt it: the
  // thread sees stop at the deadline, at most kNanosleepNs after wake(), and takes the last row then, as at any
  // deadline.
  if (deadline_ns - now_ns <= kNanosleepNs) {
    timespec ts{time_t(deadline_ns / 1000000000), long(deadline_ns % 1000000000)};
    while (!c.stop.load(std::memory_order_acquire) &&
           clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
    return c.stop.load(std::memory_order_acquire) != 0;
  }
  // FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC timeout: the same clock as the deadlines, so the
  // period does not drift. It returns at once if stop is already set (EAGAIN), on wake() (0) and at the
  // deadline (ETIMEDOUT); anything else (EINTR, a spurious return) goes round again to the same deadline.
  timespec ts{time_t(deadline_ns / 1000000000), long(deadline_ns % 1000000000)};
  for (;;) {
    if (c.stop.load(std::memory_order_acquire)) return true;
    long r = syscall(SYS_futex, &c.stop, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, 0u, &ts, nullptr,
                     FUTEX_BITSET_MATCH_ANY);
    if (r != 0 && errno == ETIMEDOUT) return c.stop.load(std::memory_order_acquire) != 0;
    if (r != 0 && errno != EAGAIN && errno != EINTR) {  // no futex (a seccomp filter): 10 ms naps
      for (int64_t now; !c.stop.load(std::memory_order_acquire) && (now = mono_now_ns()) < deadline_ns;) {
        int64_t until = std::min(deadline_ns, now + 10000000);
        timespec nap{time_t(until / 1000000000), long(until % 1000000000)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &nap, nullptr);
      }
      return c.stop.load(std::memory_order_acquire) != 0;
    }
  }
#else
  (void)now_ns;
  std::unique_lock<std::mutex> lk(c.mu);
  auto deadline = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(deadline_ns));
  return c.cv.wait_until(lk, deadline, [&c] { return c.stop.load(std::memory_order_acquire) != 0; });
#endif
}

void Sampler::run(Core& c) {
#ifdef __linux__
  prctl(PR_SET_TIMERSLACK, 1UL);  // wake within microseconds of a deadline, not the default 50 us
  pthread_setname_np(pthread_self(), "sysprof");  // glibc's two-argument form (macOS names only itself)
#endif
  const int64_t interval = c.cfg.interval_ns;
  // The first deadline is now: a row at start, whose rates cover the time since construction (or
  // the previous stop). stop() adds a last row, so even a run shorter than one interval has both ends.
  int64_t next = mono_now_ns(), last = 0, last_wall = 0, t1 = next;
  uint64_t tick = 0;  // deadline number since start (skipped deadlines counted): the sources' due grid
  const bool probing = c.budget.timing();
  c.budget.start(c.collector, next);
  for (;;) {
    // Absolute deadlines: the period stays `interval` whatever each sample costs.
    bool stopping = sleep_until(c, next, t1);
    int64_t t0 = mono_now_ns();
    if (stopping && last && t0 - last < std::min<int64_t>(interval / 2, 1000000)) break;  // a row just taken
    int64_t wall = wall_now_ns();
    // The budget's probe: the thread's CPU inside sample(), one row in budget::kProbeEvery.
    bool probe = probing && budget::Controller::probe_row(tick);
    int64_t cpu0 = probe ? budget::Controller::thread_cpu_ns() : 0;
    c.collector.sample(t0, c.row.data(), stopping ? Collector::kEvery : tick);
    if (probe) c.budget.probe(budget::Controller::thread_cpu_ns() - cpu0, mono_now_ns() - t0);
    c.ring.push(wall, c.row.data());
    c.latest.offer(t0, wall, c.row.data(), stopping || tick == 0);
    last_wall = wall;
    t1 = mono_now_ns();
    c.cost.record(uint64_t(t1 - t0));
    last = t0;
    if (stopping) break;
    c.budget.tick(c.collector, c.log, t1);
    next += interval;
    ++tick;
    if (t1 >= next) {  // overran (slow sample or late wake-up): skip the passed deadlines, no burst
      int64_t skipped = (t1 - next) / interval + 1;
      c.missed.fetch_add(uint64_t(skipped), std::memory_order_relaxed);
      next += skipped * interval;
      tick += uint64_t(skipped);
    }
  }
  c.budget.finish(c.collector, c.log, mono_now_ns());  // the run's last CPU counted
  c.latest.settle(last_wall, c.row.data());  // the last row taken, if offer() left it out: latest() after stop
}

}  // namespace sysprof
