// The sampling thread's tick on a cold cache, for benchmarks/bench_cold.py: evict the caches (write a buffer
// larger than L2), then run one tick as the thread does (Collector::sample, Ring::push, Latest::offer) on the
// default sources, on a copy of this machine's /proc files whose counters advance at fixed rates (Fixture), with a
// default Sampler's device rules. Run under cachegrind, the tick's own functions' cache misses per
// tick count the cache lines the tick touches: what a tick after a 1 ms sleep pays, counted the same way on
// any machine, however loaded (evict() clears the code caches too: the code lines counted are the distinct ones
// the tick runs). The kernel's copy of each read into its buffer leaves those lines hot, which
// cachegrind cannot see; pread is wrapped to touch them in a function of its own (left out of the counts).
//   tick_cold TICKS EVICT_KIB
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
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
  if (n > 0) c[n - 1] = c[n - 1];  // the last line too, where the buffer does not start on a line
}

// The body of Sampler::run's loop (engine/sampler.cpp) between its clock reads: no reader has asked for latest(),
// so offer() copies a row every Latest::kIdleCopyNs (and the first), as the thread does at 1 kHz.
__attribute__((noinline)) void tick(Collector& col, Ring& ring, Latest& latest, double* row, int64_t t, uint64_t i) {
  col.sample(t, row, i);
  ring.push(t, row);
  latest.offer(int64_t(i) * 1000000, t, row, i == 0);  // on the 1 kHz grid: a copy every 10th tick, however slow
}
}  // namespace

// This machine's four files, copied once, with counters that advance at fixed rates, the same in every run
// (under valgrind a tick takes milliseconds, and /proc would change more often, and by how much the load
// decides): the aggregate cpu line every 5th tick (a USER_HZ tick on one of a few CPUs), MemFree every tick,
// each disk that has done I/O every 10th tick, each interface that has carried bytes every tick. Every other
// line (idle loop disks, idle interfaces) stays as it was.
struct Fixture {
  struct Number {
    size_t at, end;  // offsets of its digits in the copy
    uint64_t base;
    int every;
    char digits[24];
  };
  struct File {
    std::string text;
    std::vector<Number> numbers;
    int fd = -1;
  };
  std::string dir;
  std::vector<File> files;

  // The first number after `from` on the line at `line`, if non-zero, advances every `every` ticks.
  static void advance(File& f, size_t line, size_t from, int every) {
    size_t at = f.text.find_first_of("0123456789", from);
    if (at == std::string::npos || at >= f.text.find('\n', line)) return;
    uint64_t v = std::strtoull(f.text.c_str() + at, nullptr, 10);
    if (v) f.numbers.push_back(Number{at, f.text.find_first_not_of("0123456789", at), v, every, {}});
  }

  bool make(const char* name, const std::string& text) {
    File f;
    f.text = text;
    std::istringstream in(text);
    std::string l;
    for (size_t line = 0; std::getline(in, l); line += l.size() + 1) {
      std::istringstream w(l);
      std::string a, b, c;
      w >> a >> b >> c;
      if (!std::strcmp(name, "stat") && a == "cpu") advance(f, line, line + 3, 5);
      if (!std::strcmp(name, "meminfo") && a == "MemFree:") advance(f, line, line + l.find(':'), 1);
      if (!std::strcmp(name, "diskstats") && !c.empty()) advance(f, line, line + l.find(c) + c.size(), 10);
      if (!std::strcmp(name, "net/dev") && l.find(':') != std::string::npos) advance(f, line, line + l.rfind(':'), 1);
    }
    std::string path = dir + "/" + name;
    f.fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    files.push_back(std::move(f));
    return files.back().fd >= 0;
  }

  // The files as at tick i (numbers only grow, so a file never shrinks). No libc call but pwritev, and none that
  // the tick makes: the counts leave this function out by name.
  __attribute__((noinline)) void write(int i) {
    for (File& f : files) {
      iovec iov[64];
      int n = 0;
      size_t done = 0;
      for (Number& x : f.numbers) {
        if (n + 3 > 64) break;
        iov[n++] = iovec{const_cast<char*>(f.text.data()) + done, x.at - done};
        uint64_t v = x.base + uint64_t(i / x.every);
        int k = sizeof x.digits;
        do x.digits[--k] = char('0' + v % 10); while ((v /= 10) != 0);
        iov[n++] = iovec{x.digits + k, sizeof x.digits - size_t(k)};
        done = x.end;
      }
      iov[n++] = iovec{const_cast<char*>(f.text.data()) + done, f.text.size() - done};
      if (::pwritev(f.fd, iov, n, 0) < 0) std::abort();
    }
  }
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

extern "C" ssize_t pread(int fd, void* buf, size_t n, off_t off) {
  ssize_t r = syscall(SYS_pread64, fd, buf, n, off);
  kernel_copy_model(buf, r);
  return r;
}

int main(int argc, char** argv) {
  int ticks = argc > 1 ? atoi(argv[1]) : 300;
  junk.assign(size_t(argc > 2 ? atoi(argv[2]) : 4096) << 10, 0);
  Fixture fx;
  char dir[] = "/tmp/tick-cold-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  fx.dir = dir;
  ::mkdir((fx.dir + "/net").c_str(), 0700);
  for (const char* f : {"stat", "meminfo", "diskstats", "net/dev"})
    if (!fx.make(f, slurp(std::string("/proc/") + f))) return 1;
  fx.write(0);
  Config cfg;  // the default sources: cpu, memory, disk, net
  cfg.proc_root = fx.dir;
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
  int64_t t0 = mono_now_ns();
  for (int i = 0; i < ticks; ++i) {
    fx.write(i + 1);
    evict();
    tick(col, ring, latest, row.data(), t0 + int64_t(i + 1) * 1000000, uint64_t(i));  // 1 kHz
  }
  std::printf("%zu channels, %d ticks\n", col.width(), ticks);
  for (const char* f : {"stat", "meminfo", "diskstats", "net/dev"}) ::unlink((fx.dir + "/" + f).c_str());
  ::rmdir((fx.dir + "/net").c_str());
  ::rmdir(fx.dir.c_str());
  return 0;
}
