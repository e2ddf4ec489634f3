// The sampling thread's tick on a cold cache, for benchmarks/bench_cold.py: evict the caches (write a buffer
// larger than L2), then run one tick as the thread does (Collector::sample, Ring::push, Latest::offer) on the
// default sources of this machine's /proc, with a default Sampler's device rules. Run under cachegrind, the tick's own functions' cache misses per
// tick count the cache lines the tick touches: what a tick after a 1 ms sleep pays, counted the same way on
// any machine, however loaded (evict() clears the code caches too: the code lines counted are the distinct ones
// the tick runs). The kernel's copy of each read into its buffer leaves those lines hot, which
// cachegrind cannot see; pread is wrapped to touch them in a function of its own (left out of the counts).
//   tick_cold TICKS EVICT_KIB
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "engine/sampler.hpp"

using namespace sysprof;

namespace {
std::vector<char> junk;

// Code first (64 KiB of straight-line nops: every way of a 32 KiB I1 refilled), then data (the buffer: every
// line of the 1 MiB LL and the 32 KiB D1). The tick then starts with nothing of its own cached, code or data.
__attribute__((noinline)) void evict() {
  asm volatile(".rept 65536\n\tnop\n\t.endr" ::: "memory");
  for (size_t i = 0; i < junk.size(); i += 64) junk[i] = char(junk[i] + 1);
}

__attribute__((noinline)) void kernel_copy_model(void* p, ssize_t n) {
  volatile char* c = static_cast<volatile char*>(p);
  for (ssize_t i = 0; i < n; i += 64) c[i] = c[i];
}

// The body of Sampler::run's loop (engine/sampler.cpp) between its clock reads: no reader has asked for latest(),
// so offer() copies a row every Latest::kIdleCopyNs (and the first), as the thread does.
__attribute__((noinline)) void tick(Collector& col, Ring& ring, Latest& latest, double* row, int64_t t, uint64_t i) {
  col.sample(t, row, i);
  ring.push(t, row);
  latest.offer(t, t, row, i == 0);
}
}  // namespace

extern "C" ssize_t pread(int fd, void* buf, size_t n, off_t off) {
  ssize_t r = syscall(SYS_pread64, fd, buf, n, off);
  kernel_copy_model(buf, r);
  return r;
}

int main(int argc, char** argv) {
  int ticks = argc > 1 ? atoi(argv[1]) : 300;
  junk.assign(size_t(argc > 2 ? atoi(argv[2]) : 4096) << 10, 0);
  Config cfg;  // the default sources: cpu, memory, disk, net
  // The device rules a default Sampler passes (sysprof/sampling/devices.py, DEFAULT_EXCLUDED): loop, RAM and zram
  // disks and lo are left out, their lines skipped by name each tick.
  cfg.options = {"device:disk:-loop*", "device:disk:-ram*", "device:disk:-zram*", "device:net:-lo"};
  cfg.capacity = size_t(ticks) + 1;  // every row fits: no drain (the consumer's copies are not the tick's)
  std::vector<std::string> channels;
  ErrorLog log;
  Collector col(cfg, channels, log);
  col.keep_rows(true);  // as the thread's collector
  Ring ring(cfg.capacity, col.width());
  Latest latest(col.width());
  std::vector<double> row(col.width());
  for (int i = 0; i < ticks; ++i) {
    evict();
    tick(col, ring, latest, row.data(), mono_now_ns(), uint64_t(i));
  }
  std::printf("%zu channels, %d ticks\n", col.width(), ticks);
  return 0;
}
