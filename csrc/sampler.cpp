#include "sampler.hpp"

#include <chrono>
#include <pthread.h>
#include <sys/prctl.h>

namespace sysprof {

void ErrorLog::set(const char* source, const std::string& msg) {
  std::lock_guard<std::mutex> g(mu_);
  errors_[source] = msg;
}

std::map<std::string, std::string> ErrorLog::snapshot() const {
  std::lock_guard<std::mutex> g(mu_);
  return errors_;
}

namespace {

std::unique_ptr<Source> make_source(const std::string& name) {
  if (name == "cpu") return make_cpu_source();
  if (name == "memory") return make_meminfo_source();
  if (name == "disk") return make_diskstats_source();
  if (name == "net") return make_netdev_source();
  if (name == "load") return make_loadavg_source();
  if (name == "process") return make_process_source();
  if (name == "gpu") return make_nvml_source();
  return nullptr;
}

std::vector<std::string> enabled_sources(const Config& cfg) {
  std::vector<std::string> names;
  if (cfg.cpu) names.push_back("cpu");
  if (cfg.memory) names.push_back("memory");
  if (cfg.disk) names.push_back("disk");
  if (cfg.net) names.push_back("net");
  if (cfg.load) names.push_back("load");
  if (cfg.process) names.push_back("process");
  if (cfg.gpu) names.push_back("gpu");
  return names;
}

}  // namespace

Collector::Collector(const Config& cfg, std::vector<std::string>& channels, ErrorLog& log) : log_(&log) {
  for (const auto& name : enabled_sources(cfg)) {
    auto src = make_source(name);
    std::string err;
    size_t before = channels.size();
    if (!src->open(cfg, channels, err)) {
      channels.resize(before);
      log.set(src->name(), err.empty() ? "unavailable" : err);
      continue;
    }
    if (!err.empty()) log.set(src->name(), err);  // usable, with a warning (e.g. a skipped line)
    slots_.push_back(Slot{std::move(src), width_, {}, err});
    width_ += slots_.back().src->width();
  }
}

Collector::Collector(const Collector& other, const Config& cfg, ErrorLog& log) : log_(&log) {
  for (const auto& s : other.slots_) {
    std::string err;
    auto src = s.src->clone(cfg, err);
    if (!src) {
      // Cannot happen unless the file vanished in between; keep the layout with a NaN-only slot.
      log.set(s.src->name(), err);
      src = nullptr;
    }
    slots_.push_back(Slot{std::move(src), width_, {}, {}});
    width_ += s.src->width();
  }
  // Widths must match the original's even for a failed clone.
  width_ = other.width_;
}

void Collector::sample(int64_t mono_ns, double* row) {
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    size_t w = (i + 1 < slots_.size() ? slots_[i + 1].offset : width_) - s.offset;
    if (!s.src) {
      fill_nan(row + s.offset, w);
      continue;
    }
    s.err.clear();
    s.src->sample(mono_ns, row + s.offset, s.err);
    if (!s.err.empty() && s.err != s.last_logged) {  // log changes only, so a stuck error costs no lock
      s.last_logged = s.err;
      log_->set(s.src->name(), s.err);
    }
  }
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
  buckets_[size_t(b)].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(ns, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

double CostHistogram::mean() const {
  uint64_t n = count();
  return n ? double(sum_.load(std::memory_order_relaxed)) / double(n) : kNaN;
}

double CostHistogram::quantile(double q) const {
  uint64_t n = count();
  if (!n) return kNaN;
  uint64_t rank = uint64_t(q * double(n - 1)) + 1, seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += buckets_[size_t(b)].load(std::memory_order_relaxed);
    if (seen >= rank) {
      if (b < 16) return double(b);
      int msb = (b - 16) / 16 + 4, sub = (b - 16) % 16;
      double lo = double((uint64_t(16 + sub)) << (msb - 4));
      return lo + double(uint64_t(1) << (msb - 4)) / 2;  // bucket middle
    }
  }
  return kNaN;
}

Sampler::Sampler(const Config& cfg)
    : cfg_(cfg),
      collector_(cfg_, channels_, log_),
      sync_collector_(std::make_unique<Collector>(collector_, cfg_, log_)),
      ring_(cfg.capacity, collector_.width()),
      row_(collector_.width()) {}

Sampler::~Sampler() { stop(); }

void Sampler::start() {
  if (thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { run(); });
}

void Sampler::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

int64_t Sampler::sample_now(double* row) {
  std::lock_guard<std::mutex> g(sync_mu_);
  int64_t wall = wall_now_ns();
  sync_collector_->sample(mono_now_ns(), row);
  return wall;
}

Sampler::Stats Sampler::stats() const {
  Ring::Counts c = ring_.counts();
  return Stats{c.taken,
               c.dropped,
               c.drained,
               c.buffered,
               missed_.load(std::memory_order_relaxed),
               cost_.mean(),
               cost_.quantile(0.99),
               double(max_ns_.load(std::memory_order_relaxed))};
}

void Sampler::run() {
  prctl(PR_SET_TIMERSLACK, 1UL);  // wake within microseconds of a deadline, not the default 50 us
  pthread_setname_np(pthread_self(), "sysprof");
  const int64_t interval = cfg_.interval_ns;
  // Re-prime: baselines may be stale from an earlier start/stop, and the first row's rates
  // should cover one interval.
  collector_.sample(mono_now_ns(), row_.data());
  int64_t next = mono_now_ns() + interval;
  std::unique_lock<std::mutex> lk(mu_, std::defer_lock);
  for (;;) {
    lk.lock();
    // Absolute deadlines: the period stays `interval` whatever each sample costs.
    auto deadline = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(next));
    if (cv_.wait_until(lk, deadline, [this] { return stop_; })) break;
    lk.unlock();
    int64_t t0 = mono_now_ns();
    int64_t wall = wall_now_ns();
    collector_.sample(t0, row_.data());
    ring_.push(wall, row_.data());
    int64_t t1 = mono_now_ns();
    uint64_t cost = uint64_t(t1 - t0);
    cost_.record(cost);
    if (cost > max_ns_.load(std::memory_order_relaxed)) max_ns_.store(cost, std::memory_order_relaxed);
    next += interval;
    if (t1 >= next) {  // overran (slow sample or late wake-up): skip the passed deadlines, no burst
      int64_t skipped = (t1 - next) / interval + 1;
      missed_.fetch_add(uint64_t(skipped), std::memory_order_relaxed);
      next += skipped * interval;
    }
  }
}

}  // namespace sysprof
