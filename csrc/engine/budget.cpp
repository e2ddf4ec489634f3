#include "engine/budget.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <time.h>

#include "engine/sampler.hpp"

namespace sysprof {
namespace budget {

double Plan::cost(const std::vector<uint64_t>& periods) const {
  double c = fixed_ns;
  for (size_t i = 0; i < cost_ns.size(); ++i) c += cost_ns[i] / double(periods[i]);
  return c;
}

std::vector<uint64_t> plan_stretch(const Plan& plan, bool& fits) {
  std::vector<uint64_t> p = plan.period;
  const double target = kStretchTo * plan.budget * double(plan.interval_ns);
  // Where the rows alone (fixed) take the budget, the sources still keep kMinSourceShare of it: stretching
  // them further would lose their data for little.
  const double goal = std::max(target, plan.fixed_ns + kMinSourceShare * target);
  while (plan.cost(p) > goal) {
    size_t pick = p.size();
    for (int pass = 0; pass < 2 && pick == p.size(); ++pass) {  // the defaults first, then the given ones
      double most = 0;
      for (size_t i = 0; i < p.size(); ++i) {
        if (bool(plan.given[i]) != (pass == 1) || p[i] >= plan.cap[i]) continue;
        double per_row = plan.cost_ns[i] / double(p[i]);
        if (per_row > most) most = per_row, pick = i;
      }
    }
    if (pick == p.size()) break;  // every source at its longest
    p[pick] = std::min(plan.cap[pick], p[pick] * 2);
  }
  fits = plan.cost(p) <= target;
  return p;
}

std::vector<uint64_t> plan_relax(const Plan& plan) {
  const double limit = kRelaxTo * plan.budget * double(plan.interval_ns);
  // The candidates: the given ones first (stretched last, restored first), then by the least cost added.
  struct Candidate {
    bool default_;  // false (given) sorts first
    double added;
    size_t i;
  };
  std::vector<Candidate> order;
  for (size_t i = 0; i < plan.period.size(); ++i) {
    uint64_t p = plan.period[i];
    if (p <= plan.floor[i]) continue;
    uint64_t half = std::max(plan.floor[i], (p + 1) / 2);
    order.push_back({!plan.given[i], plan.cost_ns[i] / double(half) - plan.cost_ns[i] / double(p), i});
  }
  std::stable_sort(order.begin(), order.end(), [](const Candidate& a, const Candidate& b) {
    return a.default_ != b.default_ ? b.default_ : a.added < b.added;
  });
  for (const Candidate& c : order) {
    size_t i = c.i;
    std::vector<uint64_t> p = plan.period;
    p[i] = std::max(plan.floor[i], (p[i] + 1) / 2);
    if (plan.cost(p) <= limit) return p;
  }
  return plan.period;
}

namespace {

// "1 ms", "250 us", "2.5 s"
std::string duration(int64_t ns) {
  char b[32];
  if (ns < 1000000)
    std::snprintf(b, sizeof b, "%.3g us", double(ns) / 1e3);
  else if (ns < 1000000000)
    std::snprintf(b, sizeof b, "%.3g ms", double(ns) / 1e6);
  else
    std::snprintf(b, sizeof b, "%.3g s", double(ns) / 1e9);
  return b;
}

std::string percent(double fraction) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g %%", 100 * fraction);
  return b;
}

}  // namespace

Controller::Controller(double budget, int64_t interval_ns, std::vector<char> given, std::vector<int64_t> test_cost_ns)
    : budget_(budget), interval_(interval_ns), given_(std::move(given)), test_(!test_cost_ns.empty()),
      last_fraction_(std::nan("")) {
  test_cost_.reset(new std::atomic<int64_t>[given_.size()]());
  for (size_t i = 0; i < test_cost_ns.size() && i < given_.size(); ++i) test_cost_[i].store(test_cost_ns[i]);
}

int64_t Controller::thread_cpu_ns() { return cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID, 0); }

void Controller::set_test_cost(size_t i, int64_t ns) {
  if (i < given_.size()) test_cost_[i].store(ns, std::memory_order_relaxed);
}

std::vector<Change> Controller::changes() const {
  std::lock_guard<std::mutex> g(mu_);
  return changes_;
}

void Controller::start(Collector& col, int64_t mono_ns) {
  size_t n = col.size();
  if (floor_.size() != n) {  // the first run: the periods the sources started at are their floors
    floor_.resize(n);
    cap_.resize(n);
    cost_ns_.assign(n, 0);
    uint64_t longest = uint64_t((kMaxStretchNs + interval_ - 1) / interval_);
    for (size_t i = 0; i < n; ++i) {
      floor_[i] = col.period(i);
      cap_[i] = std::max(floor_[i], longest);
    }
  }
  eval_start_ = mono_ns;
  next_eval_ = mono_ns + kEvalNs;
  cpu_at_ = thread_cpu_ns();
  helper_at_.resize(n);
  reads_at_.resize(n);
  timed_at_.resize(n);
  timed_ns_at_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    helper_at_[i] = col.helper_cpu_ns(i);
    reads_at_[i] = col.reads_of(i);
    timed_at_[i] = col.timed_of(i);
    timed_ns_at_[i] = col.timed_ns_of(i);
  }
  probe_cpu_ = probe_wall_ = 0;
  windows_.clear();  // a new run: what the last one measured is past
}

void Controller::finish(Collector& col, ErrorLog& log, int64_t mono_ns) {
  if (next_eval_ != INT64_MAX) evaluate(col, log, mono_ns, true);
  next_eval_ = INT64_MAX;
}

void Controller::evaluate(Collector& col, ErrorLog& log, int64_t mono_ns, bool last) {
  size_t n = col.size();
  Window w;
  w.span_ns = std::max<int64_t>(1, mono_ns - eval_start_);
  int64_t cpu = thread_cpu_ns();
  w.cpu_ns = std::max<int64_t>(0, cpu - cpu_at_);
  cpu_at_ = cpu;
  w.helper_ns.resize(n);
  w.reads.resize(n);
  w.timed.resize(n);
  w.timed_ns.resize(n);
  int64_t helpers = 0;
  for (size_t i = 0; i < n; ++i) {
    int64_t h = col.helper_cpu_ns(i);
    w.helper_ns[i] = std::max<int64_t>(0, h - helper_at_[i]);
    helper_at_[i] = h;
    helpers += w.helper_ns[i];
    uint64_t r = col.reads_of(i), t = col.timed_of(i), tn = col.timed_ns_of(i);
    w.reads[i] = r - reads_at_[i], w.timed[i] = t - timed_at_[i], w.timed_ns[i] = tn - timed_ns_at_[i];
    reads_at_[i] = r, timed_at_[i] = t, timed_ns_at_[i] = tn;
  }
  w.probe_cpu = probe_cpu_, w.probe_wall = probe_wall_;
  probe_cpu_ = probe_wall_ = 0;
  eval_start_ = mono_ns;
  next_eval_ = mono_ns + kEvalNs;
  cpu_total_ns_.store(cpu_total_ns_.load(std::memory_order_relaxed) + w.cpu_ns + helpers, std::memory_order_relaxed);
  windows_.push_back(std::move(w));
  if (windows_.size() > size_t(kWindowEvals)) windows_.erase(windows_.begin());
  int64_t span = 0, used = 0;
  for (const Window& x : windows_) {
    span += x.span_ns;
    used += x.cpu_ns;
    for (int64_t h : x.helper_ns) used += h;
  }
  double measured = double(used) / double(span);
  last_fraction_.store(measured, std::memory_order_relaxed);
  ++since_change_;
  if (!last && budget_ > 0 && n) decide(col, log, measured);
}

void Controller::decide(Collector& col, ErrorLog& log, double measured) {
  size_t n = col.size();
  Plan plan;
  plan.budget = budget_;
  plan.interval_ns = interval_;
  plan.floor = floor_;
  plan.cap = cap_;
  plan.period.resize(n);
  plan.given.resize(n);
  plan.cost_ns.resize(n);
  for (size_t i = 0; i < n; ++i) {
    plan.period[i] = col.period(i);
    size_t k = col.config_index(i);
    plan.given[i] = k < given_.size() ? given_[k] : 0;
  }
  if (test_) {  // the injected costs alone: the model is the measure
    for (size_t i = 0; i < n; ++i) {
      size_t k = col.config_index(i);
      plan.cost_ns[i] = k < given_.size() ? double(std::max<int64_t>(0, test_cost_[k].load())) : 0;
    }
    measured = plan.cost(plan.period) / double(interval_);
  } else {
    int64_t span = 0, cpu = 0, pc = 0, pw = 0;
    std::vector<int64_t> helper(n, 0);
    std::vector<uint64_t> timed(n, 0), timed_ns(n, 0);
    for (const Window& x : windows_) {
      span += x.span_ns, cpu += x.cpu_ns, pc += x.probe_cpu, pw += x.probe_wall;
      for (size_t i = 0; i < n; ++i) helper[i] += x.helper_ns[i], timed[i] += x.timed[i], timed_ns[i] += x.timed_ns[i];
    }
    double rows = double(span) / double(interval_);  // the rows' grid over the window, missed ones included
    double scale = pw > 0 ? std::clamp(double(pc) / double(pw), 0.05, 1.0) : 1.0;
    double per_row = double(cpu) / rows, sources = 0;
    for (size_t i = 0; i < n; ++i) {
      if (timed[i]) cost_ns_[i] = scale * double(timed_ns[i]) / double(timed[i]);
      double c = cost_ns_[i];
      double h = double(helper[i]) / rows;  // the helper's CPU per row
      per_row += h;
      if (col.helper_follows(i))
        c += h * double(plan.period[i]);  // it follows the interval: its work per read of the source
      plan.cost_ns[i] = c;
      sources += c / double(plan.period[i]);
    }
    plan.fixed_ns = std::max(0.0, per_row - sources);
  }
  if (measured > budget_) {
    bool fits;
    std::vector<uint64_t> to = plan_stretch(plan, fits);
    std::string msg = apply(col, to, measured, "over");
    if (!fits && (!msg.empty() || !said_unfit_)) {  // with each change while it lasts: errors keep the latest
      said_unfit_ = true;
      msg += std::string(msg.empty() ? "" : "; ") + "the budget of " + percent(budget_) +
             " of a core cannot be met at this interval: the rows themselves cost " +
             percent(plan.fixed_ns / double(interval_)) + " (waking the thread, the ring, helper threads that do "
             "not follow their source's interval), which no source's interval reduces; a longer interval does";
    }
    if (!msg.empty()) log.set("budget", msg);
  } else if (measured < kRelaxBelow * budget_ && since_change_ >= kRelaxAfterEvals) {
    std::string msg = apply(col, plan_relax(plan), measured, "under");
    if (!msg.empty()) log.set("budget", msg);
  }
}

std::string Controller::apply(Collector& col, const std::vector<uint64_t>& to, double measured, const char* why) {
  std::string msg;
  int64_t wall = wall_now_ns();
  for (size_t i = 0; i < to.size(); ++i) {
    uint64_t from = col.period(i);
    if (to[i] == from) continue;
    size_t k = col.config_index(i);
    bool given = k < given_.size() && given_[k];
    col.set_period(i, to[i]);
    Change c{wall, col.slot_name(i), int64_t(to[i]) * interval_, int64_t(from) * interval_, given, measured};
    if (!msg.empty()) msg += "; ";
    msg += c.source + ": interval " + duration(c.previous_ns) + " -> " + duration(c.interval_ns);
    if (given && to[i] > from) msg += " (the interval given for it: every other source is at its longest)";
    {
      std::lock_guard<std::mutex> g(mu_);
      if (changes_.size() < 4096) changes_.push_back(std::move(c));
    }
  }
  if (msg.empty()) return msg;
  msg += std::string(": sysprof's sampling threads at ") + percent(measured) + " of a core over the last " +
         duration(kEvalNs * int64_t(std::max<size_t>(1, windows_.size()))) + ", " + why + " the budget of " +
         percent(budget_);
  windows_.clear();
  since_change_ = 0;
  return msg;
}

}  // namespace budget
}  // namespace sysprof
