/* The floor: what reading the same /proc files costs with nothing else done.
 *
 * usage: floor [-p INTERVAL_NS [-P PHASE_NS] [-s | -w]] ITERATIONS FILE:MODE [FILE:MODE ...]
 *   MODE "1": one pread at offset 0 (single_open seq files: /proc/stat, meminfo, loadavg, <pid>/stat)
 *   MODE "e": pread until EOF (record seq files: /proc/diskstats, /proc/net/dev, /proc/vmstat), a read shorter
 *             than 4096 - 512 bytes being the end, as for sysprof's reader (csrc/io/proc_file.hpp, kSeqShortRead)
 * Files are opened once and re-read from offset 0 each iteration into a 64 KiB buffer, as sysprof's
 * native reader does; nothing is parsed. Prints one line per iteration: the iteration's cost in ns
 * (CLOCK_MONOTONIC), after one untimed warm-up iteration.
 * With -p, iterations are paced at absolute deadlines INTERVAL_NS apart (clock_nanosleep TIMER_ABSTIME, timer
 * slack 1 ns, a missed deadline skipped as sysprof's thread does) and each line is "COST_NS PERIOD_NS", the period
 * being the time between this iteration's start and the previous one's (0 on the first line): the reference for
 * the sampling thread's cost and timing quality.
 * With -P PHASE_NS (after -p), the deadlines are the CLOCK_MONOTONIC instants congruent to PHASE_NS modulo INTERVAL_NS
 * (the first at least one interval away): a known offset from another paced loop's deadlines, so that loops sharing
 * one CPU take their turns at fixed fractions of the period (benchmarks/bench_paced.py, "same core").
 * With -s (after -p), one summary line instead: "ITERATIONS THREAD_CPU_NS IN_TICK_NS", the thread's CPU time over
 * the paced loop (CLOCK_THREAD_CPUTIME_ID: the same sum_exec_runtime as /proc/<tid>/schedstat's first field, so
 * wake-ups and sleeps are included) and the sum of the iterations' own costs: the paced floor of the sampling
 * thread's CPU per sample.
 * With -w (after -p), the wake-up comparison instead: the iterations alternate (A B B A ...) between the two ways the
 * sampling thread sleeps, clock_nanosleep (TIMER_ABSTIME) and a FUTEX_WAIT_BITSET with an absolute timeout on a word
 * nobody wakes (csrc/engine/sampler.cpp, Sampler::sleep_until), and one line is printed per way: "WAY N MEDIAN_NS
 * MEAN_NS", the thread's CPU time spent inside the sleep call (entry, timer set-up, the switch out and back in,
 * tear-down), the files read between sleeps as above. Compiled by benchmarks/run.py at run time.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BUF (1 << 16)
static char buf[BUF];

static long long cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp_ll(const void* a, const void* b) {
  long long x = *(const long long*)a, y = *(const long long*)b;
  return x < y ? -1 : x > y;
}

static unsigned futex_word = 0;

/* Sleeps until the absolute CLOCK_MONOTONIC time in ts, one way or the other. */
static void sleep_until(const struct timespec* ts, int futex) {
  if (!futex) {
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, ts, NULL) != 0) {
    }
    return;
  }
  for (;;) {
    long r = syscall(SYS_futex, &futex_word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, 0u, ts, NULL,
                     FUTEX_BITSET_MATCH_ANY);
    if (r != 0 && errno == ETIMEDOUT) return;
  }
}

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char** argv) {
  long long interval = 0;
  if (argc > 2 && strcmp(argv[1], "-p") == 0) {
    interval = atoll(argv[2]);
    argv += 2;
    argc -= 2;
  }
  long long phase = -1;
  if (interval > 0 && argc > 2 && strcmp(argv[1], "-P") == 0) {
    phase = atoll(argv[2]) % interval;
    argv += 2;
    argc -= 2;
  }
  int summary = 0, wake = 0;
  if (interval > 0 && argc > 1 && strcmp(argv[1], "-s") == 0) {
    summary = 1;
    argv += 1;
    argc -= 1;
  } else if (interval > 0 && argc > 1 && strcmp(argv[1], "-w") == 0) {
    wake = 1;
    argv += 1;
    argc -= 1;
  }
  if (argc < 3) {
    fprintf(stderr, "usage: floor [-p INTERVAL_NS [-P PHASE_NS] [-s | -w]] ITERATIONS FILE:MODE...\n");
    return 2;
  }
  long iters = atol(argv[1]);
  int nf = argc - 2;
  int* fds = calloc((size_t)nf, sizeof(int));
  int* until_eof = calloc((size_t)nf, sizeof(int));
  long long* cost = calloc((size_t)(iters > 0 ? iters : 1), sizeof(long long));
  long long* period = calloc((size_t)(iters > 0 ? iters : 1), sizeof(long long));
  unsigned char* ways = calloc((size_t)(iters > 0 ? iters : 1), 1); /* -w: each iteration's way of sleeping */
  volatile size_t sink = 0;
  for (int i = 0; i < nf; ++i) {
    char* spec = argv[i + 2];
    char* colon = strrchr(spec, ':');
    if (!colon) { fprintf(stderr, "bad spec %s\n", spec); return 2; }
    *colon = '\0';
    until_eof[i] = colon[1] == 'e';
    fds[i] = open(spec, O_RDONLY | O_CLOEXEC);
    if (fds[i] < 0) { perror(spec); return 1; }
  }
  if (interval > 0) prctl(PR_SET_TIMERSLACK, 1UL);
  long long next = now_ns() + interval, prev_t0 = 0, cpu0 = 0, in_tick = 0;
  if (phase >= 0) next += ((phase - next) % interval + interval) % interval;
  for (long it = -1; it < iters; ++it) {
    if (it == 0) cpu0 = cpu_ns(); /* after the warm-up iteration's wake-up, as the sampler's window starts */
    long long slept = 0;
    int way = wake && it >= 0 && ((it & 1) ^ ((it >> 1) & 1)); /* A B B A ...: 0 clock_nanosleep, 1 futex */
    if (interval > 0) {
      struct timespec ts = {(time_t)(next / 1000000000LL), (long)(next % 1000000000LL)};
      long long c0 = wake ? cpu_ns() : 0;
      sleep_until(&ts, way);
      if (wake) slept = cpu_ns() - c0;
    }
    long long t0 = now_ns();
    for (int i = 0; i < nf; ++i) {
      size_t off = 0;
      for (;;) {
        ssize_t n = pread(fds[i], buf + off, BUF - off, (off_t)off);
        if (n <= 0) break;
        off += (size_t)n;
        if (!until_eof[i] || off >= BUF || n < 4096 - 512) break;
      }
      sink += off;
    }
    long long t1 = now_ns();
    if (it >= 0) {
      in_tick += t1 - t0;
      cost[it] = wake ? slept : t1 - t0;
      period[it] = it > 0 ? t0 - prev_t0 : 0;
      ways[it] = (unsigned char)way;
    }
    prev_t0 = t0;
    if (interval > 0) {
      next += interval;
      if (t1 >= next) next += ((t1 - next) / interval + 1) * interval; /* skip missed deadlines, no burst */
    }
  }
  if (wake) {
    static const char* names[2] = {"clock_nanosleep", "futex"};
    long long* by = calloc((size_t)(iters > 0 ? iters : 1), sizeof(long long));
    for (int w = 0; w < 2; ++w) {
      long n = 0;
      double sum = 0;
      for (long it = 0; it < iters; ++it)
        if (ways[it] == w) sum += (double)(by[n++] = cost[it]);
      if (n == 0) continue;
      qsort(by, (size_t)n, sizeof(long long), cmp_ll);
      printf("%s %ld %lld %.0f\n", names[w], n, by[n / 2], sum / (double)n);
    }
    return 0;
  }
  if (summary) {
    printf("%ld %lld %lld\n", iters, cpu_ns() - cpu0, in_tick);
    return 0;
  }
  for (long it = 0; it < iters; ++it) {
    if (interval > 0) printf("%lld %lld\n", cost[it], period[it]);
    else printf("%lld\n", cost[it]);
  }
  (void)sink;
  return 0;
}
