// Unit tests of the pure parsers (csrc/parse/) on string literals: exact fields of valid inputs, and
// too few fields, garbage, huge numbers and missing keys, which must give an error or an absent field,
// never a zero. Self-contained: g++ -std=c++17 -O1 -Icsrc csrc/tests/parse_test.cpp (tests/test_parsers.py
// builds and runs it). Exit status 0 when every CHECK holds; each failure prints its line.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "parse/cgroup.hpp"
#include "parse/diskstats.hpp"
#include "parse/loadavg.hpp"
#include "parse/meminfo.hpp"
#include "parse/net_dev.hpp"
#include "parse/pid_stat.hpp"
#include "parse/psi.hpp"
#include "parse/smaps_rollup.hpp"
#include "parse/stat.hpp"
#include "parse/vmstat.hpp"

namespace {

int g_checks = 0, g_failures = 0;

#define CHECK(cond)                                                          \
  do {                                                                       \
    ++g_checks;                                                              \
    if (!(cond)) {                                                           \
      ++g_failures;                                                          \
      std::printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);            \
    }                                                                        \
  } while (0)
#define CHECK_EQ(a, b)                                                                      \
  do {                                                                                      \
    ++g_checks;                                                                             \
    auto va = (a);                                                                          \
    auto vb = (b);                                                                          \
    if (!(va == vb)) {                                                                      \
      ++g_failures;                                                                         \
      std::printf("FAIL %s:%d: %s == %s (%.17g vs %.17g)\n", __FILE__, __LINE__, #a, #b,    \
                  double(va), double(vb));                                                  \
    }                                                                                       \
  } while (0)

using namespace sysprof;

Cursor cur(const char* s) { return Cursor{s, s + std::strlen(s)}; }
constexpr uint64_t kMax = UINT64_MAX;

void test_stat() {
  CpuLine l;
  CHECK_EQ(parse_cpu_line(cur("cpu  10 20 30 40 50 60 70 80 90 100"), l), 1);
  CHECK_EQ(l.id, -1);
  CHECK_EQ(l.ticks[0], 10u);
  CHECK_EQ(l.ticks[7], 80u);  // steal; guest and guest_nice are read past
  CHECK_EQ(parse_cpu_line(cur("cpu12 1 2 3 4"), l), 1);  // a 2.4 kernel: 4 modes, the rest 0
  CHECK_EQ(l.id, 12);
  CHECK_EQ(l.ticks[3], 4u);
  CHECK_EQ(l.ticks[4], 0u);
  CHECK_EQ(parse_cpu_line(cur("cpu3 1 2 3"), l), -1);  // too few fields
  CHECK_EQ(l.id, 3);
  CHECK_EQ(parse_cpu_line(cur("cpu 1 2 x 4"), l), -1);  // garbage
  CHECK_EQ(parse_cpu_line(cur("intr 1 2 3 4 5"), l), 0);
  CHECK_EQ(parse_cpu_line(cur("cpu8192 1 2 3 4"), l), 0);  // id past NR_CPUS: not a cpu line
  CHECK_EQ(parse_cpu_line(cur("cpu 99999999999999999999999 2 3 4"), l), 1);
  CHECK_EQ(l.ticks[0], kMax);  // saturates, never wraps to a small value
  CHECK_EQ(parse_cpu_line(cur("cpu 1 2 3 4 5 6 7 8 9 10 11 12"), l), 1);  // 12 fields: first 8 kept
  CHECK_EQ(l.ticks[7], 8u);
}

void test_meminfo() {
  std::string err;
  MeminfoSnapshot m;
  const char* ok = "MemTotal:       16384 kB\nMemFree:  1024 kB\nBuffers: 0 kB\nHugePages_Total: 4\nSwapFree: 7 kB\n";
  CHECK(parse_meminfo(ok, std::strlen(ok), m, err));
  CHECK_EQ(m.bytes[kMemTotal], 16384.0 * 1024);
  CHECK_EQ(m.bytes[kMemFree], 1024.0 * 1024);
  CHECK(m.has(kBuffers));
  CHECK_EQ(m.bytes[kBuffers], 0.0);
  CHECK(!m.has(kMemAvailable));  // absent (before 3.14), not 0
  CHECK(!m.has(kSwapTotal));
  CHECK_EQ(m.bytes[kSwapFree], 7.0 * 1024);
  CHECK(m.bad.empty());
  const char* no_free = "MemTotal: 5 kB\nCached: 3 kB\n";
  CHECK(!parse_meminfo(no_free, std::strlen(no_free), m, err));
  CHECK(err == "no MemTotal/MemFree");
  const char* garbage = "MemTotal: 5 kB\nMemFree: lots kB\n";
  CHECK(!parse_meminfo(garbage, std::strlen(garbage), m, err));
  CHECK(err.find("MemFree: lots") != std::string::npos);
  const char* skipped = "MemTotal: 5 kB\nMemFree: 1 kB\nbroken line\nDirty: x\n";
  CHECK(parse_meminfo(skipped, std::strlen(skipped), m, err));
  CHECK(m.bad == "Dirty: x");
  CHECK(!m.has(kDirty));
  std::string huge = "MemTotal: 5 kB\nMemFree: 1 kB\nWriteback: 1" + std::string(307, '0') + " kB\n";
  CHECK(parse_meminfo(huge.data(), huge.size(), m, err));  // past the largest double once scaled
  CHECK(!m.has(kWriteback));
  CHECK(!m.bad.empty());
  CHECK(!parse_meminfo("", 0, m, err));
}

void test_diskstats() {
  DiskstatsLine l;
  CHECK_EQ(parse_diskstats_line(cur("   8       0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17"), l), 1);
  CHECK(l.name == "sda");
  CHECK_EQ(l.v[kReads], 1u);
  CHECK_EQ(l.v[kSectorsRead], 3u);
  CHECK_EQ(l.v[kReadTicks], 4u);
  CHECK_EQ(l.v[kWrites], 5u);
  CHECK_EQ(l.v[kSectorsWritten], 7u);
  CHECK_EQ(l.v[kWriteTicks], 8u);
  CHECK_EQ(l.v[kIoTicks], 10u);
  CHECK(l.has_times);
  CHECK_EQ(parse_diskstats_line(cur("3 1 hda1 10 20 30 40"), l), 1);  // 2.6 partition: 4 statistics
  CHECK_EQ(l.v[kSectorsRead], 20u);
  CHECK_EQ(l.v[kWrites], 30u);
  CHECK(!l.has_times);
  CHECK_EQ(parse_diskstats_line(cur("8 0 sda 1 2 3 4 5 6 7 8"), l), -1);  // 8 statistics
  CHECK_EQ(parse_diskstats_line(cur("8 0 sda 1 2 3 4 5 6 7 8 9 10 11 junk"), l), -1);
  CHECK_EQ(parse_diskstats_line(cur("x y sda"), l), -1);
  CHECK_EQ(parse_diskstats_line(cur("8 0"), l), -1);  // no name
  CHECK_EQ(parse_diskstats_line(cur("   "), l), 0);
  CHECK_EQ(parse_diskstats_line(cur("8 0 sda 99999999999999999999 2 3 4 5 6 7 8 9 10 11"), l), 1);
  CHECK_EQ(l.v[kReads], kMax);
  // /sys/block/<disk>/stat: the same statistics, without "major minor name", in %8lu columns
  l.name = "kept";
  CHECK_EQ(parse_diskstats_values(cur("       1        2        3        4        5        6        7        8"
                                      "        9       10       11       12       13       14       15       16"
                                      "       17"), l), 1);
  CHECK(l.name == "kept");  // no name in the file: left as it was
  CHECK_EQ(l.v[kReads], 1u);
  CHECK_EQ(l.v[kSectorsRead], 3u);
  CHECK_EQ(l.v[kWriteTicks], 8u);
  CHECK_EQ(l.v[kIoTicks], 10u);
  CHECK(l.has_times);
  CHECK_EQ(parse_diskstats_values(cur("1 2 3 4 5 6 7 8 9 10 11"), l), 1);  // 2.6 to 4.17: 11 statistics
  CHECK_EQ(parse_diskstats_values(cur("1 2 3"), l), -1);
  CHECK_EQ(parse_diskstats_values(cur("   "), l), -1);  // no statistics
  CHECK_EQ(parse_diskstats_values(cur("8 0 sda 1 2 3 4 5 6 7 8 9 10 11"), l), -1);  // a diskstats line is not one
}

void test_net_dev() {
  NetDevLine l;
  CHECK_EQ(parse_net_dev_line(cur("Inter-|   Receive                            |  Transmit"), l), 0);
  CHECK_EQ(parse_net_dev_line(cur("  eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16"), l), 1);
  CHECK(l.name == "eth0");
  CHECK_EQ(l.v[kBytesRecv], 1u);
  CHECK_EQ(l.v[kPacketsRecv], 2u);
  CHECK_EQ(l.v[kErrIn], 3u);
  CHECK_EQ(l.v[kDropIn], 4u);
  CHECK_EQ(l.v[kBytesSent], 9u);
  CHECK_EQ(l.v[kPacketsSent], 10u);
  CHECK_EQ(l.v[kErrOut], 11u);
  CHECK_EQ(l.v[kDropOut], 12u);
  CHECK_EQ(parse_net_dev_line(cur("eth0:1:12345678 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16"), l), 1);  // alias, no blank
  CHECK(l.name == "eth0:1");
  CHECK_EQ(l.v[kBytesRecv], 12345678u);
  CHECK_EQ(parse_net_dev_line(cur("lo: 1 2 3"), l), -1);  // too few columns
  CHECK_EQ(parse_net_dev_line(cur("garbage"), l), -1);
  CHECK_EQ(parse_net_dev_line(cur(": 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16"), l), -1);  // no name
}

void test_loadavg() {
  std::string err;
  LoadavgSnapshot l;
  const char* ok = "0.12 2.72 10.00 3/456 7890\n";
  CHECK(parse_loadavg(ok, std::strlen(ok), l, err));
  CHECK_EQ(l.avg[0], 0.12);
  CHECK_EQ(l.avg[1], 2.72);
  CHECK_EQ(l.avg[2], 10.0);
  CHECK_EQ(l.running, 3.0);
  CHECK_EQ(l.total, 456.0);
  const char* few = "0.12 2.72 10.00\n";
  CHECK(!parse_loadavg(few, std::strlen(few), l, err));
  CHECK(err.find("malformed") == 0);
  const char* noslash = "0.12 2.72 10.00 3 456\n";
  CHECK(!parse_loadavg(noslash, std::strlen(noslash), l, err));
  std::string huge = "1" + std::string(400, '0') + " 1 1 1/1 1";
  CHECK(!parse_loadavg(huge.data(), huge.size(), l, err));  // too large for a double: refused, never inf
}

void test_pid_stat() {
  ProcStat s;
  const char* ok = "42 (a (weird) name) S 7 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 1234 8192000 512 "
                   "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0";
  CHECK(parse_pid_stat(ok, std::strlen(ok), s));
  CHECK_EQ(s.state, 'S');
  CHECK_EQ(s.ppid, 7);
  CHECK_EQ(s.utime, 250u);
  CHECK_EQ(s.stime, 50u);
  CHECK_EQ(s.num_threads, 3);
  CHECK_EQ(s.vsize, 8192000u);
  CHECK_EQ(s.rss, 512);
  CHECK(!s.gone());
  const char* few = "42 (x) S 7 42 42 0 -1 4194560 100 0 0 0 250 50";
  CHECK(!parse_pid_stat(few, std::strlen(few), s));
  const char* noparen = "42 x S 7";
  CHECK(!parse_pid_stat(noparen, std::strlen(noparen), s));
  const char* zombie = "42 (x) Z 7 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 1234 0 0";
  CHECK(parse_pid_stat(zombie, std::strlen(zombie), s));
  CHECK(s.gone());
  const char* huge = "42 (x) R 7 42 42 0 -1 4194560 100 0 0 0 99999999999999999999999 50 0 0 20 0 -5 0 1 1 -3";
  CHECK(parse_pid_stat(huge, std::strlen(huge), s));
  CHECK_EQ(s.utime, kMax);
  CHECK_EQ(s.num_threads, -5);  // signed in the format: the source turns a negative into NaN
}

void test_psi() {
  PsiLine l;
  CHECK_EQ(parse_psi_line(cur("some avg10=1.50 avg60=0.25 avg300=100.00 total=123456"), l), 1);
  CHECK_EQ(l.kind, 0);
  CHECK_EQ(l.avg[0], 1.5);
  CHECK_EQ(l.avg[1], 0.25);
  CHECK_EQ(l.avg[2], 100.0);
  CHECK_EQ(l.total_us, 123456u);
  CHECK_EQ(parse_psi_line(cur("full total=7 avg300=0.00 avg60=0.00 avg10=0.00 future=9"), l), 1);  // by key
  CHECK_EQ(l.kind, 1);
  CHECK_EQ(l.total_us, 7u);
  CHECK_EQ(parse_psi_line(cur("some avg10=0.00 avg60=0.00 avg300=0.00"), l), -1);  // no total
  CHECK_EQ(l.kind, -1);
  CHECK_EQ(parse_psi_line(cur("other avg10=0.00 avg60=0.00 avg300=0.00 total=1"), l), -1);
  CHECK_EQ(parse_psi_line(cur("some avg10=x avg60=0.00 avg300=0.00 total=1"), l), -1);
  CHECK_EQ(parse_psi_line(cur("some avg10 avg60=0.00 avg300=0.00 total=1"), l), -1);
  CHECK_EQ(parse_psi_line(cur(""), l), 0);
  CHECK_EQ(parse_psi_line(cur("some avg10=0.00 avg60=0.00 avg300=0.00 total=18446744073709551616"), l), 1);
  CHECK_EQ(l.total_us, kMax);
}

void test_cgroup() {
  double v;
  CHECK(parse_cgroup_value("1073741824\n", 11, false, v));
  CHECK_EQ(v, 1073741824.0);
  CHECK(parse_cgroup_value("max\n", 4, true, v));
  CHECK(std::isinf(v) && v > 0);
  CHECK(!parse_cgroup_value("max\n", 4, false, v));  // only a limit may read "max"
  CHECK(!parse_cgroup_value("12x\n", 4, false, v));
  CHECK(!parse_cgroup_value("", 0, false, v));
  static constexpr const char* kKeys[] = {"usage_usec", "nr_periods", "throttled_usec"};
  uint64_t vals[3];
  std::string_view bad;
  const char* stat = "usage_usec 500\nuser_usec 300\nthrottled_usec x\n";
  unsigned found = parse_flat_keyed(stat, std::strlen(stat), kKeys, vals, bad);
  CHECK_EQ(found, 1u);  // nr_periods absent, throttled_usec malformed: both absent, never 0
  CHECK_EQ(vals[0], 500u);
  CHECK(bad == "throttled_usec x");
  double max, period;
  CHECK(parse_cpu_max("150000 100000\n", 14, max, period));
  CHECK_EQ(max, 150000.0);
  CHECK_EQ(period, 100000.0);
  CHECK(parse_cpu_max("max 100000\n", 11, max, period));
  CHECK(std::isinf(max));
  CHECK(!parse_cpu_max("max 0\n", 6, max, period));
  CHECK(!parse_cpu_max("150000\n", 7, max, period));
  uint64_t r, w;
  CHECK_EQ(parse_io_stat_line(cur("8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0"), r, w), 1);
  CHECK_EQ(r, 4096u);
  CHECK_EQ(w, 8192u);
  CHECK_EQ(parse_io_stat_line(cur("8:0 rbytes=4096 rios=1"), r, w), -1);
  CHECK_EQ(parse_io_stat_line(cur("8:0 rbytes=4096 wbytes=x"), r, w), -1);
  CHECK_EQ(parse_io_stat_line(cur(""), r, w), 0);
}

void test_vmstat() {
  std::string err;
  VmstatSnapshot s;
  const char* modern =
      "nr_free_pages 123\npgfault 1000\npgmajfault 20\npswpin 3\npswpout 4\npgscan_kswapd 500\n"
      "pgscan_direct 60\npgscan_khugepaged 99\npgscan_direct_throttle 7\npgsteal_kswapd 400\npgsteal_direct 50\n"
      "oom_kill 2\nworkingset_refault_anon 11\nworkingset_refault_file 12\n";
  CHECK(parse_vmstat(modern, std::strlen(modern), s, err));
  CHECK_EQ(s.v[kPgfault], 1000u);
  CHECK_EQ(s.v[kPgmajfault], 20u);
  CHECK_EQ(s.v[kPswpin], 3u);
  CHECK_EQ(s.v[kPswpout], 4u);
  CHECK_EQ(s.v[kPgscanKswapd], 500u);
  CHECK_EQ(s.v[kPgscanDirect], 60u);  // neither khugepaged's scans nor the throttle count
  CHECK_EQ(s.v[kPgstealKswapd], 400u);
  CHECK_EQ(s.v[kPgstealDirect], 50u);
  CHECK_EQ(s.v[kOomKill], 2u);
  CHECK_EQ(s.v[kRefaultAnon], 11u);
  CHECK_EQ(s.v[kRefaultFile], 12u);
  CHECK_EQ(s.present, (1u << kVmstatFields) - 1);
  const char* zoned =  // 4.4: per-zone reclaim keys, one workingset_refault, no oom_kill
      "pgfault 5\npgscan_kswapd_dma 1\npgscan_kswapd_dma32 10\npgscan_kswapd_normal 100\npgscan_kswapd_movable 1000\n"
      "pgscan_direct_normal 7\npgscan_direct_throttle 3\npgsteal_kswapd_normal 8\npgsteal_direct_dma32 9\n"
      "pgscan_kswapd_bogus 5000\nworkingset_refault 42\n";
  CHECK(parse_vmstat(zoned, std::strlen(zoned), s, err));
  CHECK_EQ(s.v[kPgscanKswapd], 1111u);
  CHECK_EQ(s.v[kPgscanDirect], 7u);
  CHECK_EQ(s.v[kPgstealKswapd], 8u);
  CHECK_EQ(s.v[kPgstealDirect], 9u);
  CHECK_EQ(s.v[kRefaultFile], 42u);  // file pages only before 5.9
  CHECK(!s.has(kRefaultAnon));
  CHECK(!s.has(kOomKill));  // absent, never 0
  CHECK(!s.has(kPswpin));
  const char* bad = "pgfault 12x\npgmajfault 3\noom_kill\n";
  CHECK(parse_vmstat(bad, std::strlen(bad), s, err));
  CHECK(!s.has(kPgfault));
  CHECK(!s.has(kOomKill));
  CHECK(s.bad == "oom_kill");
  CHECK_EQ(s.v[kPgmajfault], 3u);
  const char* huge = "pgscan_kswapd_normal 18446744073709551615\npgscan_kswapd_dma32 5\npgfault 99999999999999999999\n";
  CHECK(parse_vmstat(huge, std::strlen(huge), s, err));
  CHECK_EQ(s.v[kPgscanKswapd], kMax);  // the sum saturates
  CHECK_EQ(s.v[kPgfault], kMax);
  const char* none = "nr_free_pages 1\nnr_zone_active_anon 2\n";
  CHECK(!parse_vmstat(none, std::strlen(none), s, err));
  CHECK(!err.empty());
  CHECK(!parse_vmstat("", 0, s, err));
}

}  // namespace

void test_smaps_rollup() {
  // as Linux 6.x prints it (fs/proc/task_mmu.c, show_smaps_rollup): the header, then "Key: %8lu kB"
  const char* full =
      "55d0c5bb4000-7ffd3c5f5000 ---p 00000000 00:00 0                          [rollup]\n"
      "Rss:                1620 kB\nPss:                 173 kB\nPss_Dirty:           116 kB\n"
      "Pss_Anon:            116 kB\nPss_File:             57 kB\nPss_Shmem:             0 kB\n"
      "Shared_Clean:       1464 kB\nShared_Dirty:          0 kB\nPrivate_Clean:        40 kB\n"
      "Private_Dirty:       116 kB\nReferenced:         1620 kB\nAnonymous:           116 kB\n"
      "Swap:                  0 kB\nSwapPss:               0 kB\nLocked:                0 kB\n";
  SmapsRollup r;
  std::string err;
  CHECK(parse_smaps_rollup(full, std::strlen(full), r, err));
  CHECK_EQ(r.bytes[kSmRss], 1620u * 1024);
  CHECK_EQ(r.bytes[kSmPss], 173u * 1024);
  CHECK_EQ(r.bytes[kSmPssAnon], 116u * 1024);
  CHECK_EQ(r.bytes[kSmPssFile], 57u * 1024);
  CHECK_EQ(r.bytes[kSmSharedClean], 1464u * 1024);
  CHECK_EQ(r.uss(), int64_t(40 + 116) * 1024);  // Private_Clean + Private_Dirty
  CHECK(r.has(kSmSwapPss) && r.bad.empty());
  // 4.14: no Pss_Anon/File/Shmem (5.9+) nor Pss_Dirty: absent, not zero
  const char* old = "00400000-7fff0000 ---p 00000000 00:00 0 [rollup]\nRss: 800 kB\nPss: 400 kB\n"
                    "Private_Clean: 0 kB\nPrivate_Dirty: 100 kB\n";
  CHECK(parse_smaps_rollup(old, std::strlen(old), r, err));
  CHECK(!r.has(kSmPssAnon) && !r.has(kSmSwap));
  CHECK_EQ(r.uss(), int64_t(100) * 1024);
  // without Private_Dirty: no USS
  const char* no_priv = "Rss: 8 kB\nPss: 4 kB\nPrivate_Clean: 4 kB\n";
  CHECK(parse_smaps_rollup(no_priv, std::strlen(no_priv), r, err));
  CHECK_EQ(r.uss(), int64_t(-1));
  // a malformed known line is skipped and named; a huge value saturates, never wraps
  const char* bad = "Rss: lots kB\nRss: 99999999999999999999999 kB\nPss: 12 MB\nPss: 3 kB\n";
  CHECK(parse_smaps_rollup(bad, std::strlen(bad), r, err));
  CHECK_EQ(r.bytes[kSmRss], kMax);
  CHECK_EQ(r.bytes[kSmPss], 3u * 1024);
  CHECK(r.bad == "Pss: 12 MB");
  // no Pss (an empty file, a zombie's, garbage): false with the reason
  err.clear();
  CHECK(!parse_smaps_rollup("", 0, r, err));
  CHECK(err == "no Rss/Pss");
  const char* only_rss = "Rss: 8 kB\nPss: x kB\n";
  CHECK(!parse_smaps_rollup(only_rss, std::strlen(only_rss), r, err));
  CHECK(err == "malformed line: 'Pss: x kB'");
}

int main() {
  test_stat();
  test_meminfo();
  test_diskstats();
  test_net_dev();
  test_loadavg();
  test_pid_stat();
  test_psi();
  test_cgroup();
  test_vmstat();
  test_smaps_rollup();
  std::printf("%d checks, %d failed\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
