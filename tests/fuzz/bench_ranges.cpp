// Cost of the Collector's range pass on the host set (cpu + per-cpu + memory + disk + net + load),
// on this machine's /proc: CPU ns per row of RangeRules::count() alone, and wall ns of Collector::sample() with
// enforcement on and off, interleaved. Build and run (release flags, as the extension):
//   python3 csrc/gen/gen_channels.py build/generated/gen/channels.hpp &&
//   g++ -std=c++17 -O3 -pthread -Icsrc -Ibuild/generated tests/fuzz/bench_ranges.cpp $(find csrc -name '*.cpp' ! -name bindings.cpp ! -path 'csrc/tests/*') -ldl -o build/bench_ranges && build/bench_ranges
#include <algorithm>
#include <cstdio>
#include <vector>

#include "engine/sampler.hpp"

using namespace sysprof;

int main() {
  Config cfg;
  cfg.sources.push_back("load");
  cfg.options = {"per_cpu"};
  ErrorLog log;
  std::vector<std::string> channels;
  Collector on(cfg, channels, log), off(on, cfg, log);
  off.set_range_enforcement(false);
  std::vector<double> row(on.width());
  on.sample(mono_now_ns(), row.data());
  const RangeRules& rules = on.range_rules();
  const int kReps = 1000000;
  size_t sink = 0;
  int64_t t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);  // CPU time: other load on the machine does not count
  for (int i = 0; i < kReps; ++i) {
    sink += rules.count(row.data());
    asm volatile("" : : "r"(row.data()) : "memory");
  }
  double pass_ns = double(clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0) / kReps;
  std::vector<double> with, without;
  for (int r = 0; r < 20000; ++r) {
    int64_t a = mono_now_ns();
    on.sample(a, row.data());
    int64_t b = mono_now_ns();
    off.sample(b, row.data());
    int64_t c = mono_now_ns();
    with.push_back(double(b - a));
    without.push_back(double(c - b));
  }
  std::sort(with.begin(), with.end());
  std::sort(without.begin(), without.end());
  std::printf("%zu channels: range pass %.1f ns/row (%zu violations); sample() median %.0f ns with, %.0f ns without\n",
              on.width(), pass_ns, sink / kReps, with[with.size() / 2], without[without.size() / 2]);
  return 0;
}
