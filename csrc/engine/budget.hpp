// The CPU budget of sysprof's sampling threads (Config::budget, Sampler(budget=...)): what the threads cost is
// measured as they run, and where it exceeds the budget the costliest sources are read less often.
//
// Measuring (the sampling thread, cheap enough to run always):
// - the threads' CPU: the sampling thread's own CPU-time clock, and that of each source's helper thread (the NVML
//   reader, process_tree's smaps reader; Source::threads_cpu_ns), read once per evaluation (every kEvalNs). A
//   thread CPU clock is a system call on many kernels (3-6 us on a VM), so it is never read per source read;
// - each source's cost per read: the wall time of its reads in every 16th row (one clock read after each: a vDSO
//   call where there is one, a system call on some VMs), times the thread's CPU per wall second inside sample(),
//   probed every 64th row (a preempted read's wall time is not its CPU);
// - what no stretch reduces (the wake-up, the ring, a helper that does not follow its source's interval): the
//   rest of the measured CPU.
// Deciding (plan_stretch, plan_relax: pure functions of the estimates, bound for the tests):
// - over the budget in the last second (kWindowEvals evaluations; fewer right after a change or the start): the
//   source whose reads cost the most per row has its interval doubled, again and again, until the model says the
//   threads are at kStretchTo of the budget; a source whose interval the user gave is stretched only when every
//   other one is at its longest (kMaxStretchNs). Where even that does not fit (the rows themselves cost more than
//   the budget), the sources are stretched until they take kMinSourceShare of it, and errors say why;
// - under kRelaxBelow of the budget for kRelaxAfterEvals evaluations since the last change: one interval is
//   halved (the given ones first, then the one adding least), never below what it started at, and only where the
//   model stays under kRelaxTo. The gap between kStretchTo and kRelaxBelow/kRelaxTo is the hysteresis: an
//   estimate off by under ~40 % does not make it oscillate.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace sysprof {

class Collector;
class ErrorLog;

namespace budget {

constexpr int64_t kEvalNs = 250000000;  // an evaluation every 250 ms ...
constexpr int kWindowEvals = 4;  // ... over the last second
constexpr int kRelaxAfterEvals = 8;  // 2 s without a change before an interval is halved
constexpr double kStretchTo = 0.8;  // a stretch aims at this share of the budget
constexpr double kRelaxBelow = 0.5;  // a relax needs the measured CPU under this share ...
constexpr double kRelaxTo = 0.7;  // ... and the model after it under this one
constexpr double kMinSourceShare = 0.2;  // the sources keep this share of the budget where the rows alone exceed it
constexpr int64_t kMaxStretchNs = 10000000000;  // no source is stretched past 10 s (or its own interval if longer)
constexpr unsigned kTimeEvery = 16;  // the reads of one row in 16 are timed
constexpr unsigned kProbeEvery = 64;  // one row in 64 reads the thread's CPU clock around sample()

// What the planner knows: per source, its CPU per read (with its helper's work per read where the helper follows
// the source's interval), the least period (what it started at, the user's or the default) and the most, the
// period now and whether the user gave it; the CPU per row that no stretch reduces.
struct Plan {
  double budget = 0;  // fraction of one core
  int64_t interval_ns = 1;
  double fixed_ns = 0;  // per row
  std::vector<double> cost_ns;  // per read
  std::vector<uint64_t> floor, cap, period;
  std::vector<char> given;
  // The threads' CPU per row (ns) at these periods.
  double cost(const std::vector<uint64_t>& periods) const;
};

// The periods after a stretch (equal to plan.period where nothing can be stretched); `fits`: the model reaches
// kStretchTo of the budget.
std::vector<uint64_t> plan_stretch(const Plan& plan, bool& fits);
// The periods after one relax step, or plan.period unchanged.
std::vector<uint64_t> plan_relax(const Plan& plan);

// One change of a source's interval, as Sampler::interval_changes() lists it.
struct Change {
  int64_t wall_ns;
  std::string source;
  int64_t interval_ns, previous_ns;
  bool given;  // the user gave the interval it had
  double measured;  // the threads' CPU (fraction of a core) that led to it
};

// The measuring and deciding, run by the sampling thread (tick(), probe(), finish()); stats and changes are read
// from any thread.
class Controller {
 public:
  // given: per collector slot, whether the user gave its interval; test_cost_ns: per slot, a fixed CPU per read
  // (tests: the decisions then follow these costs alone, exactly; empty: measured).
  Controller(double budget, int64_t interval_ns, std::vector<char> given, std::vector<int64_t> test_cost_ns);

  bool timing() const { return budget_ > 0; }  // the collector times its reads
  static bool probe_row(uint64_t tick) { return tick % kProbeEvery == 0; }
  void probe(int64_t cpu_ns, int64_t wall_ns) {
    probe_cpu_ += cpu_ns;
    probe_wall_ += wall_ns;
  }
  // After each row: evaluates every kEvalNs (mono_ns: now).
  void tick(Collector& col, ErrorLog& log, int64_t mono_ns) {
    if (mono_ns >= next_eval_) evaluate(col, log, mono_ns, false);
  }
  void start(Collector& col, int64_t mono_ns);  // a run begins
  void finish(Collector& col, ErrorLog& log, int64_t mono_ns);  // a run ends: its CPU counted
  // Tests: the fixed cost per read of slot i from now on (test mode only).
  void set_test_cost(size_t i, int64_t ns);

  // Any thread.
  double cpu_seconds() const { return double(cpu_total_ns_.load(std::memory_order_relaxed)) / 1e9; }
  double cpu_fraction() const { return last_fraction_.load(std::memory_order_relaxed); }
  double budget() const { return budget_; }
  std::vector<Change> changes() const;

  static int64_t thread_cpu_ns();

 private:
  struct Window {  // one evaluation's measurements
    int64_t span_ns = 0, cpu_ns = 0;
    std::vector<int64_t> helper_ns;
    std::vector<uint64_t> reads, timed, timed_ns;
    int64_t probe_cpu = 0, probe_wall = 0;
  };
  void evaluate(Collector& col, ErrorLog& log, int64_t mono_ns, bool last);
  void decide(Collector& col, ErrorLog& log, double measured);
  // Sets the periods `to`, lists the changes; the message saying them (empty: none).
  std::string apply(Collector& col, const std::vector<uint64_t>& to, double measured, const char* why);

  const double budget_;
  const int64_t interval_;
  const std::vector<char> given_;
  const bool test_;
  std::unique_ptr<std::atomic<int64_t>[]> test_cost_;
  std::vector<uint64_t> floor_, cap_;
  std::vector<double> cost_ns_;  // the latest estimate per read (kept while a source is not timed)
  std::vector<int64_t> helper_fixed_;  // per slot: 1 where its helper does not follow its interval
  // the current evaluation's start
  int64_t next_eval_ = INT64_MAX, eval_start_ = 0, cpu_at_ = 0;
  std::vector<int64_t> helper_at_;
  std::vector<uint64_t> reads_at_, timed_at_, timed_ns_at_;
  int64_t probe_cpu_ = 0, probe_wall_ = 0;
  std::vector<Window> windows_;  // the last kWindowEvals, since the last change
  int since_change_ = 0;
  bool said_unfit_ = false;
  std::atomic<int64_t> cpu_total_ns_{0};
  std::atomic<double> last_fraction_;
  mutable std::mutex mu_;
  std::vector<Change> changes_;
};

}  // namespace budget
}  // namespace sysprof
