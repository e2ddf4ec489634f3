// The derivation rules, once: how raw kernel and NVML readings become totals, rates and percents.
// Every native source uses these; the portable backend states the same rules in Python
// (sysprof/sampling/portable/rules.py, each class naming its twin here). Each rule keeps its own baseline and
// never allocates.
#pragma once
#include <array>
#include <cstdint>
#include <limits>

#include "io/scan.hpp"
#include "parse/stat.hpp"  // Ticks

namespace sysprof {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A monotonically increasing kernel counter. Unwraps 32-bit wrap-around (value before < 2^32,
// value after < before); any other decrease is a reset and gives a delta of 0.
struct Counter {
  uint64_t prev = 0;
  uint64_t offset = 0;  // added by unwrapping, keeps the total monotonic
  bool valid = false;

  // Returns the delta since the previous update (0 on the first one).
  uint64_t update(uint64_t raw) {
    if (!valid) {
      prev = raw;
      valid = true;
      return 0;
    }
    uint64_t d = 0;
    if (raw >= prev) {
      d = raw - prev;
    } else if (prev < (uint64_t(1) << 32)) {
      d = raw + (uint64_t(1) << 32) - prev;
      offset += uint64_t(1) << 32;
    }
    prev = raw;
    return d;
  }
  double total() const { return double(sat_add(prev, offset)); }
};

// A 64-bit kernel total that never wraps (PSI stall time, cgroup usage and bytes): a decrease can
// only be a reset (or a device leaving a sum) and gives a delta of 0, never a 2^32 unwrap.
struct Total64 {
  uint64_t prev = 0;
  bool valid = false;
  uint64_t update(uint64_t raw) {
    uint64_t d = valid && raw >= prev ? raw - prev : 0;
    prev = raw;
    valid = true;
    return d;
  }
};

inline double rate(uint64_t delta, double dt_s) { return dt_s > 0 ? double(delta) / dt_s : kNaN; }

// Per-second rate of a cumulative time counter that the kernel advances in scheduler-tick steps
// (process and cgroup CPU time, PSI stall time): taken over the trailing kWindowNs, or the last
// interval when that is longer, so those steps do not read as 0 % then 1000 % at millisecond
// intervals. NaN until the history spans the window. Unsigned end to end: a value that went down
// (a reset) gives 0, and no value, however corrupt, can overflow. Fixed storage: no allocation.
class TrailingRate {
 public:
  static constexpr int64_t kWindowNs = 20000000;
  double update(int64_t mono_ns, uint64_t value) {
    const Reading* then = nullptr;
    for (size_t k = 0; k < n_; ++k) {
      const Reading& r = hist_[(head_ + kHist - 1 - k) % kHist];
      if (mono_ns - r.mono_ns >= kWindowNs) {
        then = &r;
        break;
      }
    }
    if (!then && n_ == kHist) then = &hist_[head_];  // history shorter than the window: use it all
    double out = kNaN;
    if (then && mono_ns > then->mono_ns)
      out = double(value >= then->value ? value - then->value : 0) * 1e9 / double(mono_ns - then->mono_ns);
    hist_[head_] = Reading{mono_ns, value};
    head_ = (head_ + 1) % kHist;
    if (n_ < kHist) ++n_;
    return out;
  }
  void reset() { n_ = 0; }

 private:
  struct Reading {
    int64_t mono_ns = 0;
    uint64_t value = 0;
  };
  static constexpr size_t kHist = 256;  // spans the window down to ~80 us intervals
  Reading hist_[kHist];
  size_t head_ = 0, n_ = 0;
};

// A percent of one core, bounded by what `cpus` cores can do: the kernel adds CPU time in
// scheduler-tick steps, so a short window can see more than the cores could run. NaN stays NaN.
inline double cap_core_percent(double pct, unsigned cpus) {
  double cap = 100.0 * double(cpus);
  return pct > cap ? cap : pct;
}

// 100 * part / whole for 0 <= part <= whole: in [0, 100] even where the two roundings of the double
// arithmetic would land a hair above 100 (parts near 2^64, or 53-bit rounding of large totals).
inline double percent_of(double part, double whole) {
  if (!(whole > 0)) return kNaN;
  double p = 100.0 * part / whole;
  return p > 100.0 ? 100.0 : p < 0.0 ? 0.0 : p;
}

// A count the kernel prints as signed: negative is corrupt, NaN.
inline double count_or_nan(int64_t v) { return v < 0 ? kNaN : double(v); }



// One CPU (or the aggregate): hold-last percent, because at sub-tick intervals most reads see no
// new tick, and "no tick elapsed" carries no information.
struct TickState {
  Ticks prev{};
  bool valid = false;
  std::array<double, kModes + 1> last;  // busy, then the 8 modes
  TickState() { last.fill(kNaN); }

  void update(const Ticks& now) {
    if (!valid) {
      prev = now;
      valid = true;
      return;
    }
    Ticks d;
    unsigned __int128 total = 0;  // 8 deltas of up to 2^64-1 each: a uint64 sum could wrap
    for (size_t i = 0; i < kModes; ++i) {
      d[i] = now[i] >= prev[i] ? now[i] - prev[i] : 0;  // backwards counter: delta 0,
      if (now[i] < prev[i]) prev[i] = now[i];             // and counting resumes from the new value
      total += d[i];
    }
    if (total == 0) return;
    // 100*x/total, not x*(100/total): a fully busy CPU must read exactly 100. The double roundings of
    // totals near 2^64 can still land a hair above 100: percent_of clamps (found by the fuzzer).
    // A total that fits 64 bits (every real one) converts as a uint64, the same double without libgcc's
    // 128-bit conversion call.
    unsigned __int128 busy = total - d[kIdle] - d[kIowait];
    double whole = total >> 64 ? double(total) : double(uint64_t(total));
    last[0] = percent_of(total >> 64 ? double(busy) : double(uint64_t(busy)), whole);
    for (size_t i = 0; i < kModes; ++i) last[i + 1] = percent_of(double(d[i]), whole);
    prev = now;
  }
  void invalidate() {
    valid = false;
    last.fill(kNaN);
  }
};

// USER_HZ ticks to nanoseconds in integer arithmetic, saturating at UINT64_MAX (a double product
// cast to an integer is undefined once it passes 2^63).
inline uint64_t ticks_to_ns(uint64_t ticks, uint64_t hz) {
  if (hz == 0) return 0;
  constexpr uint64_t kNs = 1000000000;
  return sat_add(sat_mul(ticks / hz, kNs), (ticks % hz) * kNs / hz);  // (ticks % hz) * 1e9 < 2^64 for hz < 1.8e10
}

// A byte counter turned into a rate over the time since its previous successful read.
struct RateCounter {
  Counter c;
  int64_t t = 0;
  double update(uint64_t raw, int64_t now_ns) {
    bool had = c.valid;
    uint64_t d = c.update(raw);
    double r = had ? rate(d, double(now_ns - t) * 1e-9) : kNaN;
    t = now_ns;
    return r;
  }
};

// Power from the energy counter. The driver refreshes the counter more slowly than we poll, so a
// per-tick delta would be mostly 0 with spikes: the power is the energy between the two latest ticks
// at which the counter moved over the time between them, held until it moves again. The first
// movement has no start (the counter may have moved just before the first read) and gives NaN.
struct EnergyPower {
  uint64_t ref = 0;
  int64_t t_ref = 0;
  bool valid = false, ref_moved = false;
  double watts = kNaN;
  double update(uint64_t mj, int64_t now_ns) {
    if (!valid || mj < ref) {  // first read, or the driver was reloaded
      ref = mj, t_ref = now_ns, valid = true, ref_moved = false, watts = kNaN;
    } else if (mj != ref) {
      if (ref_moved && now_ns > t_ref) watts = double(mj - ref) / 1000.0 / (double(now_ns - t_ref) * 1e-9);
      ref = mj, t_ref = now_ns, ref_moved = true;
    }
    return watts;
  }
};

}  // namespace sysprof
