// process_tree: a process and all its descendants (e.g. PyTorch DataLoader workers), summed, and per member
// in stable slots.
//
// Members are found from the followed process down through /proc/<pid>/task/<tid>/children
// (CONFIG_PROC_CHILDREN; without it, by scanning /proc/*/stat for parent pids), at most every
// kDiscoverNs, a few files per tick, and never more than kMaxMembers. Each member's /proc/<pid>/stat stays open between
// ticks (opened on discovery, closed once it exits or leaves the tree), so a tick without discovery
// is one pread per member and no allocation. CPU time is summed as per-member deltas into a
// monotonic total, so a member that exits (or leaves) takes nothing away from the rate.
//
// Slots (option process_tree_slots=N, default kDefaultSlots): slot 0 is the root; a member found by a
// discovery takes the lowest free slot and keeps it while it lives. A member that exits (or leaves the tree)
// frees its slot: the slot reads NaN from the next row on, and is handed to a member without one (breadth
// first) at the next discovery after that row, so every change of hands shows at least one NaN row. Members
// without a slot are summed into the totals and counted in num_unslotted. Who held which slot when, with its
// comm, is process_tree_members.hpp's log (devices()).
//
// Proportional memory: each member's /proc/<pid>/smaps_rollup (Linux 4.14+), re-read every 100 ms on a helper
// thread (process_tree_smaps.hpp: the kernel walks the member's page tables, milliseconds for a large one);
// between reads its Pss and USS hold. Unreadable (another user's process: EACCES; no file before 4.14): that
// member's pss_bytes/uss_bytes, and the totals, read NaN, with one errors entry.
//
// Run delay: the time the members' threads were runnable but waited for a CPU, the second field of each thread's
// /proc/<pid>/task/<tid>/schedstat (Documentation/scheduler/sched-stats.rst; /proc/<pid>/schedstat is the main
// thread's only). The threads are listed by the discovery (the task directories it walks anyway), at most
// kMaxThreads; each one's file stays open. A tick reads at most thread_reads_per_tick_ of them, round robin
// (about 1 % of the interval at ~1.25 us a read: 80 at 10 ms, at least 8), so a tree with more threads than
// that reads each thread every few ticks and its total lags by as many intervals. Per-thread increases are
// summed into a monotonic total, as CPU time is: a thread that exits takes nothing away, a thread's first
// reading is its baseline. The kernel adds a wait when it ends (the thread gets a CPU), and no thread can
// add more than the time since its first reading (plus kPendingNs for a wait under way then): a corrupt value
// cannot push the total past what the threads could have waited. A kernel without schedstat (no
// CONFIG_SCHED_INFO), or one printing "0 0 0" (no CONFIG_SCHEDSTATS, delay accounting off): NaN and one
// errors entry.
//
// procs_blocked and procs_sleeping: the members whose main thread is in uninterruptible sleep (state D, mostly
// waiting for disk I/O) or asleep waiting for an event (state S) at the reading, from the stat file already read;
// their time-weighted means are the average counts, their ratio how a member's sleep splits. majflt: the
// members' major faults (pages read back from disk), summed as per-member increases like CPU time.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <memory>
#include <time.h>
#include <unistd.h>

#include "io/proc_file.hpp"
#include "parse/pid_stat.hpp"
#include "sources/process_tree_members.hpp"
#include "sources/process_tree_smaps.hpp"
#include "sources/registry.hpp"
#include "sources/source.hpp"

namespace sysprof {
namespace {

// Row layout: the totals, then kPerSlot channels per slot (process_tree/<slot>/<name>).
constexpr const char* kTotals[] = {"num_processes", "rss_bytes", "cpu_percent", "cpu_seconds_total",
                                   "num_threads", "pss_bytes", "uss_bytes", "num_unslotted",
                                   "run_delay_seconds_total", "run_delay_seconds_per_second", "procs_blocked",
                                   "procs_sleeping", "majflt_total", "majflt_per_second"};
constexpr const char* kPerSlot[] = {"pid", "rss_bytes", "pss_bytes", "uss_bytes", "cpu_percent",
                                    "cpu_seconds_total", "num_threads"};
constexpr size_t kNumTotals = sizeof kTotals / sizeof *kTotals, kSlotWidth = sizeof kPerSlot / sizeof *kPerSlot;

bool all_digits(const char* s) {
  if (!*s) return false;
  for (; *s; ++s)
    if (!is_digit(*s)) return false;
  return true;
}

class ProcessTreeSource final : public Source {
 public:
  static constexpr size_t kMaxMembers = 256;
  static constexpr int64_t kDiscoverNs = 100000000;  // 100 ms from one discovery's start to the next
  static constexpr int64_t kDefaultSlots = 8, kMaxSlots = 64;
  static constexpr size_t kMaxThreads = 1024;        // threads whose run delay is read
  static constexpr uint64_t kPendingNs = 1000000000;  // a wait under way at a thread's first reading, at most

  ProcessTreeSource() = default;
  ~ProcessTreeSource() override {
    if (dir_) ::closedir(dir_);
  }
  ProcessTreeSource(const ProcessTreeSource&) = delete;
  ProcessTreeSource& operator=(const ProcessTreeSource&) = delete;
  const char* name() const override { return "process_tree"; }

  bool open(const Config& cfg, std::vector<std::string>& channels, std::string& err) override {
    threaded_smaps_ = true;  // the sampling thread's source; sample()'s (a clone) reads inline
    if (!setup(cfg, err)) return false;
    for (auto c : kTotals) channels.push_back(std::string("process_tree/") + c);
    for (size_t k = 0; k < nslots_; ++k)
      for (auto c : kPerSlot) channels.push_back("process_tree/" + std::to_string(k) + "/" + c);
    return true;
  }

  std::unique_ptr<Source> clone(const Config& cfg, std::string& err) const override {
    auto s = std::make_unique<ProcessTreeSource>();
    if (!s->setup(cfg, err)) return nullptr;
    return s;
  }

  bool sample(int64_t mono_ns, double* out, std::string& err) override { return tick(mono_ns, out, err); }

  std::vector<std::map<std::string, std::string>> devices() const override { return log_.describe(); }
  // The smaps reader's thread: its own pace (every 100 ms, at most 5 % of a core), whatever the interval.
  int64_t helper_cpu_ns() const override { return smaps_ ? smaps_->cpu_ns() : 0; }

 private:
  struct Member {
    int64_t pid = 0;
    int slot = -1;  // -1: summed into the totals only
    bool active = false, seen = false, use_clock = false, primed = false;
    clockid_t clock = CLOCK_PROCESS_CPUTIME_ID;
    uint64_t last_cpu_ns = 0, last_majflt = 0;
    int64_t threads = 0;  // num_threads at the last reading
    unsigned cpus = 1;  // the CPUs it may run on (cpu_bound())
    int64_t next_affinity_ns = 0;
    std::string comm;  // from the stat file, at discovery
    ProcFile file;
  };
  struct Thread {
    int64_t tid = 0;
    bool active = false;
    uint64_t last_ns = 0;     // run delay at the last reading
    uint64_t counted_ns = 0;  // what it added to the total
    int64_t since_ns = 0;     // its first reading
    ProcFile file;
  };
  enum class SlotState : uint8_t { kFree, kBusy, kVacated };
  struct Slot {
    SlotState state = SlotState::kFree;
    bool have = false;  // this tick read its member's CPU time
    uint64_t cpu_ns = 0;
    unsigned cores = 1;  // what its member could run at once: the bound of its cpu_percent
    TrailingRate rate;
  };

  // Finds the root, chooses the discovery method, discovers and primes the baselines.
  bool setup(const Config& cfg, std::string& err) {
    proc_root_ = cfg.proc_root;
    cpus_ = online_cpus(cfg);
    nslots_ = size_t(option_int(cfg, "process_tree_slots", kDefaultSlots, 0, kMaxSlots));
    width_ = kNumTotals + nslots_ * kSlotWidth;
    slots_.reset(new Slot[nslots_ ? nslots_ : 1]);
    smaps_.reset(new SmapsReader(proc_root_, threaded_smaps_));
    // Discovery reads cost ~25 us each (open, read, close): about a tenth of the interval per tick,
    // at least 8 (~0.2 ms at 1 kHz).
    files_per_tick_ = size_t(std::min<int64_t>(1024, std::max<int64_t>(8, cfg.interval_ns / 250000)));
    thread_reads_per_tick_ = size_t(std::min<int64_t>(int64_t(kMaxThreads), std::max<int64_t>(8, cfg.interval_ns / 125000)));
    live_ = proc_root_ == "/proc";
    root_pid_ = cfg.pid;
    if (root_pid_ < 0) {
      if (live_) {
        root_pid_ = int64_t(getpid());
      } else {  // a fixture tree: proc/self/stat names the pid in its first field
        std::string buf, ignored;
        Cursor c{nullptr, nullptr};
        if (read_small_file(join(proc_root_, "self/stat"), buf, ignored)) c = Cursor{buf.data(), buf.data() + buf.size()};
        if (!c.p || !parse_i64(c, root_pid_) || root_pid_ <= 0) {
          err = join(proc_root_, "self/stat") + ": no pid";
          return false;
        }
      }
    }
    std::string stat = pid_path(root_pid_, "stat");
    if (::access(stat.c_str(), R_OK) != 0) {
      err = stat + ": " + std::strerror(errno);
      return false;
    }
    std::string children = pid_path(root_pid_, "task/") + std::to_string(root_pid_) + "/children";
    scan_ = ::access(children.c_str(), R_OK) != 0;
    std::string delay_err = check_schedstat();
    if (rd_ok_) {
      threads_.reset(new Thread[kMaxThreads]);
      found_tids_.reserve(kMaxThreads);
      active_tids_.reserve(kMaxThreads);
    }
    members_.reset(new Member[kMaxMembers]);
    found_.reserve(kMaxMembers);
    int64_t now = mono_now_ns();
    start_discovery(now);
    step_discovery(SIZE_MAX, err);  // the first discovery in full
    std::string ignored;
    tick(now, nullptr, ignored);  // primes the per-member baselines
    if (scan_ && err.empty())
      err = children + " missing (kernel without CONFIG_PROC_CHILDREN): descendants found by scanning " +
            join(proc_root_, "*/stat");
    if (err.empty()) err = delay_err;
    return true;
  }

  // Whether the root's main thread has a schedstat and the kernel counts it (rd_ok_); else the errors entry. A
  // kernel that counts nothing prints "0 0 0" for every thread; a command just started may not have been charged
  // its first CPU time yet, so on the live /proc the calling thread's own (it has run) decides.
  std::string check_schedstat() {
    std::string path = pid_path(root_pid_, "task/") + std::to_string(root_pid_) + "/schedstat", buf, why;
    SchedStat s;
    rd_ok_ = false;
    if (!read_small_file(path, buf, why)) return why + ": the run delay reads NaN";
    if (!parse_schedstat(buf.data(), buf.size(), s)) return path + ": malformed: the run delay reads NaN";
    SchedStat mine;
    if (s.on_cpu_ns == 0 && live_ && read_small_file(join(proc_root_, "thread-self/schedstat"), buf, why) &&
        parse_schedstat(buf.data(), buf.size(), mine))
      s = mine;
    if (s.on_cpu_ns == 0)
      return path + ": all zero (kernel without CONFIG_SCHEDSTATS, delay accounting off): the run delay reads NaN";
    rd_ok_ = true;
    return {};
  }

  std::string pid_path(int64_t pid, const char* rel) const {
    std::string r = std::to_string(pid) + "/" + rel;
    return join(proc_root_, r.c_str());
  }

  void add_found(int64_t pid) {
    for (int64_t f : found_)
      if (f == pid) return;
    if (found_.size() < kMaxMembers)
      found_.push_back(pid);
    else
      overflow_ = true;
  }
  // Discovery is spread over ticks: each reads at most files_per_tick_ files (children or stat
  // files), so a big tree (or the /proc scan) costs a few cheap ticks, never one long one. found_
  // collects the root and its descendants, breadth first; at the end the members are reconciled.
  void start_discovery(int64_t mono_ns) {
    next_discover_ns_ = mono_ns + kDiscoverNs;
    discovering_ = true;
    found_.clear();
    links_.clear();
    found_tids_.clear();
    overflow_ = thread_overflow_ = false;
    found_.push_back(root_pid_);
    next_ = 0;
    scanning_ = scan_;
    if (scan_) dir_ = ::opendir(proc_root_.c_str());
  }

  void add_tid(const char* name) {
    if (!rd_ok_) return;
    if (found_tids_.size() < kMaxThreads)
      found_tids_.emplace_back(std::strtoll(name, nullptr, 10), found_[next_ - 1]);
    else
      thread_overflow_ = true;
  }

  // Advances the discovery by at most `budget` file reads; reconciles when it is complete. The task directories
  // of the processes found are walked for their children files and their threads' ids (after a scan: the ids).
  void step_discovery(size_t budget, std::string& err) {
    while (discovering_ && budget > 0) {
      if (scanning_) {  // no children files: every process's parent from its stat
        dirent* e = dir_ ? ::readdir(dir_) : nullptr;
        if (!e) {
          for (size_t i = 0; i < found_.size(); ++i)
            for (const auto& l : links_)
              if (l.second == found_[i] && l.first != found_[i]) add_found(l.first);
          if (dir_) ::closedir(dir_);
          dir_ = nullptr;
          scanning_ = false;
          if (!rd_ok_) {
            finish_discovery(err);
            return;
          }
          continue;  // the found processes' threads
        }
        if (!all_digits(e->d_name)) continue;
        --budget;
        ProcStat s;
        if (read_small_file(join(proc_root_, e->d_name) + "/stat", buf_, scratch_) &&
            parse_pid_stat(buf_.data(), buf_.size(), s))
          links_.emplace_back(std::strtoll(e->d_name, nullptr, 10), s.ppid);
        continue;
      }
      if (!dir_) {  // the next found process's threads
        if (next_ >= found_.size()) {
          finish_discovery(err);
          return;
        }
        task_ = pid_path(found_[next_++], "task");
        dir_ = ::opendir(task_.c_str());  // NULL: exited meanwhile
        --budget;
        continue;
      }
      dirent* e = ::readdir(dir_);
      if (!e) {
        ::closedir(dir_);
        dir_ = nullptr;
        continue;
      }
      if (!all_digits(e->d_name)) continue;
      add_tid(e->d_name);
      if (scan_) continue;  // the ids only: the directory was the read
      --budget;
      if (!read_small_file(task_ + "/" + e->d_name + "/children", buf_, scratch_)) continue;
      Cursor c{buf_.data(), buf_.data() + buf_.size()};
      int64_t child;
      while (parse_i64(c, child))
        if (child > 0) add_found(child);
    }
  }

  // Re-learns the members from found_: closes those that left the tree, opens the new ones, then hands the
  // free slots to members without one, in found_'s (breadth-first) order; slot 0 is the root's.
  void finish_discovery(std::string& err) {
    discovering_ = false;
    if (dir_) ::closedir(dir_);
    dir_ = nullptr;
    for (size_t k = 0; k < kMaxMembers; ++k) {
      Member& m = members_[k];
      if (!m.active) continue;
      m.seen = false;
      for (int64_t f : found_)
        if (f == m.pid) m.seen = true;
      if (!m.seen) leave(m);
    }
    size_t free_member = 0;
    for (int64_t pid : found_) {
      Member* m = find_member(pid);
      bool fresh = false;
      if (!m) {
        while (free_member < kMaxMembers && members_[free_member].active) ++free_member;
        if (free_member == kMaxMembers) break;  // cannot happen: found_ is capped at kMaxMembers
        m = &members_[free_member];
        if (!join_member(*m, free_member, pid, err)) continue;  // exited meanwhile
        fresh = true;
      }
      if (m->slot < 0 && take_slot(*m)) {
        if (!fresh) log_.end(pid);  // its unslotted tenure
        log_.begin(pid, m->slot, m->comm);
      } else if (fresh) {
        log_.begin(pid, -1, m->comm);
      }
    }
    if (rd_ok_) sync_threads();
    if (thread_overflow_ && !thread_overflow_said_) {
      thread_overflow_said_ = true;
      err = "process tree of " + std::to_string(root_pid_) + " has more than " + std::to_string(kMaxThreads) +
            " threads; the run delay of the first " + std::to_string(kMaxThreads) + " is summed";
    }
    if (overflow_)
      err = "process tree of " + std::to_string(root_pid_) + " has more than " + std::to_string(kMaxMembers) +
            " processes; only the first " + std::to_string(kMaxMembers) + " (breadth first) are summed";
  }

  // The threads found by this discovery: those gone close (what they added stays in the total), new ones open
  // with their first reading as the baseline. O(n log n) in the threads.
  void sync_threads() {
    std::sort(found_tids_.begin(), found_tids_.end());
    auto by_tid = [](const std::pair<int64_t, int64_t>& a, int64_t tid) { return a.first < tid; };
    active_tids_.clear();
    for (size_t k = 0; k < threads_used_; ++k) {
      Thread& t = threads_[k];
      if (!t.active) continue;
      auto it = std::lower_bound(found_tids_.begin(), found_tids_.end(), t.tid, by_tid);
      if (it != found_tids_.end() && it->first == t.tid) {
        active_tids_.push_back(t.tid);
      } else {
        t.file.close();
        t.active = false;
      }
    }
    std::sort(active_tids_.begin(), active_tids_.end());
    int64_t now = mono_now_ns();
    size_t free_k = 0;
    for (size_t i = 0; i < found_tids_.size(); ++i) {
      int64_t tid = found_tids_[i].first;
      if ((i > 0 && found_tids_[i - 1].first == tid) ||
          std::binary_search(active_tids_.begin(), active_tids_.end(), tid))
        continue;
      while (free_k < kMaxThreads && threads_[free_k].active) ++free_k;
      if (free_k == kMaxThreads) break;
      Thread& t = threads_[free_k];
      std::string path = pid_path(found_tids_[i].second, "task/") + std::to_string(tid) + "/schedstat", why;
      SchedStat s;
      if (!t.file.open(path, why, true) || !parse_schedstat(t.file.data(), t.file.size(), s)) {
        t.file.close();
        continue;  // exited meanwhile
      }
      t.tid = tid;
      t.active = true;
      t.last_ns = s.run_delay_ns;
      t.counted_ns = 0;
      t.since_ns = now;
      if (free_k >= threads_used_) threads_used_ = free_k + 1;
    }
    while (threads_used_ > 0 && !threads_[threads_used_ - 1].active) --threads_used_;
  }

  // Reads at most `budget` threads' schedstat, round robin from where the last call stopped, adding their
  // increases to the total.
  void read_threads(size_t budget, int64_t mono_ns) {
    size_t n = threads_used_;
    if (n == 0) return;
    size_t i = rr_ % n;
    for (size_t seen = 0; seen < n && budget > 0; ++seen, i = (i + 1) % n) {
      Thread& t = threads_[i];
      if (!t.active) continue;
      --budget;
      SchedStat s;
      if (!t.file.read(scratch_) || !parse_schedstat(t.file.data(), t.file.size(), s)) {
        t.file.close();  // exited (ESRCH): what it added stays
        t.active = false;
        continue;
      }
      uint64_t d = s.run_delay_ns > t.last_ns ? s.run_delay_ns - t.last_ns : 0;  // went down: a reset
      uint64_t bound = sat_add(uint64_t(std::max<int64_t>(0, mono_ns - t.since_ns)), kPendingNs);
      uint64_t room = bound > t.counted_ns ? bound - t.counted_ns : 0;
      if (d > room) d = room;
      t.counted_ns += d;
      t.last_ns = s.run_delay_ns;
      delay_acc_ns_ = sat_add(delay_acc_ns_, d);
    }
    rr_ = i;
  }

  Member* find_member(int64_t pid) {
    for (size_t k = 0; k < kMaxMembers; ++k)
      if (members_[k].active && members_[k].pid == pid) return &members_[k];
    return nullptr;
  }

  bool join_member(Member& m, size_t k, int64_t pid, std::string& err) {
    std::string why;
    if (!m.file.open(pid_path(pid, "stat"), why, true)) return false;
    m.pid = pid;
    m.active = true;
    m.primed = false;
    m.slot = -1;
    m.threads = 0;
    m.cpus = cpus_;
    m.next_affinity_ns = 0;
    m.comm.assign(stat_comm(m.file.data(), m.file.size()));
    m.use_clock = live_ && clock_getcpuclockid(pid_t(pid), &m.clock) == 0;
    smaps_->watch(k, pid, err);  // one errors entry: another user's process, or Linux < 4.14
    return true;
  }

  // Slot 0 to the root; else the lowest free one (a vacated slot is not free until its NaN row is out).
  bool take_slot(Member& m) {
    size_t k = 0;
    if (m.pid != root_pid_)
      for (k = 1; k < nslots_ && slots_[k].state != SlotState::kFree;) ++k;
    if (k >= nslots_ || slots_[k].state != SlotState::kFree) return false;
    m.slot = int(k);
    slots_[k].state = SlotState::kBusy;
    slots_[k].rate.reset();
    return true;
  }

  // The member exited or left the tree: its files close, its slot is vacated, its tenure ends.
  void leave(Member& m) {
    m.file.close();
    m.active = false;
    smaps_->watch(size_t(&m - members_.get()), 0, scratch_);
    if (m.slot >= 0) slots_[size_t(m.slot)].state = SlotState::kVacated;
    m.slot = -1;
    log_.end(m.pid);
  }

  // What a member could run at once, the bound of its cpu_percent: its threads (the more of this reading
  // and the last: one may have ended within the window), at most the CPUs it may run on: the online ones,
  // or on the live /proc its affinity where fewer, re-read once a second as the process source does. CPU
  // time is added in scheduler-tick steps, and each member's clock is read at its own moment in the tick,
  // so a short window can otherwise see a single-threaded member above 100 %.
  unsigned cpu_bound(Member& m, int64_t threads, int64_t mono_ns) {
    if (live_ && mono_ns >= m.next_affinity_ns) {
      m.next_affinity_ns = mono_ns + 1000000000;
      m.cpus = affinity_cpus(m.pid, cpus_);
    }
    int64_t t = std::max(threads, m.threads);
    return t > 0 && uint64_t(t) < m.cpus ? unsigned(t) : m.cpus;
  }

  // One read of every member. out == nullptr only advances the baselines.
  bool tick(int64_t mono_ns, double* out, std::string& err) {
    if (!discovering_ && mono_ns >= next_discover_ns_) start_discovery(mono_ns);
    if (discovering_) step_discovery(files_per_tick_, err);
    // Sums saturate: no member's value, however corrupt, can overflow them.
    uint64_t n = 0, threads = 0, rss_pages = 0, total_ns = 0, unslotted = 0, blocked = 0, sleeping = 0;
    double pss = 0, uss = 0;
    bool root_live = false, clocked = false, bad_threads = false, bad_rss = false;
    if (out) fill_nan(out + kNumTotals, nslots_ * kSlotWidth);
    for (size_t k = 0; k < nslots_; ++k) slots_[k].have = false;
    for (size_t k = 0; k < kMaxMembers; ++k) {
      Member& m = members_[k];
      if (!m.active) continue;
      ProcStat s;
      if (!m.file.read(scratch_) || !parse_pid_stat(m.file.data(), m.file.size(), s)) {
        leave(m);  // reaped (ESRCH) or unreadable: gone until a discovery finds it again
        continue;
      }
      double* slot = out && m.slot >= 0 ? out + kNumTotals + size_t(m.slot) * kSlotWidth : nullptr;
      if (slot) slot[0] = double(m.pid);
      if (s.gone()) continue;  // exiting or a zombie: nothing left to count
      blocked += s.state == 'D';
      sleeping += s.state == 'S';
      uint64_t cpu_ns;
      if (m.use_clock) {
        timespec ts;
        if (clock_gettime(m.clock, &ts) != 0) continue;  // reaped since the read
        cpu_ns = uint64_t(ts.tv_sec) * 1000000000 + uint64_t(ts.tv_nsec);
        clocked = true;
      } else {
        cpu_ns = ticks_to_ns(s.cpu_ticks(), tick_hz_);
      }
      // A member's first reading is its baseline: CPU time used before it joined is not a rate.
      if (m.primed && cpu_ns > m.last_cpu_ns) cpu_acc_ns_ = sat_add(cpu_acc_ns_, cpu_ns - m.last_cpu_ns);
      if (m.primed && s.majflt > m.last_majflt) majflt_acc_ = sat_add(majflt_acc_, s.majflt - m.last_majflt);
      m.last_cpu_ns = cpu_ns;
      m.last_majflt = s.majflt;
      m.primed = true;
      double m_pss = kNaN, m_uss = kNaN;
      if (out) smaps_->get(k, m.pid, m_pss, m_uss);
      ++n;
      bad_threads |= s.num_threads < 0;
      bad_rss |= s.rss < 0;
      if (s.num_threads > 0) threads = sat_add(threads, uint64_t(s.num_threads));
      if (s.rss > 0) rss_pages = sat_add(rss_pages, uint64_t(s.rss));
      total_ns = sat_add(total_ns, cpu_ns);
      pss += m_pss;  // NaN (unknown) stays NaN
      uss += m_uss;
      if (m.pid == root_pid_) root_live = true;
      if (m.slot < 0) {
        ++unslotted;
      } else {
        Slot& sl = slots_[size_t(m.slot)];
        sl.have = true;
        sl.cpu_ns = cpu_ns;
        sl.cores = cpu_bound(m, s.num_threads, mono_ns);
      }
      m.threads = s.num_threads;
      if (slot) {
        slot[1] = s.rss < 0 ? kNaN : double(s.rss) * page_bytes_;
        slot[2] = m_pss;
        slot[3] = m_uss;
        slot[5] = double(cpu_ns) / 1e9;
        slot[6] = count_or_nan(s.num_threads);
      }
    }
    // Pair the CPU clocks with a wall reading taken right after them, as the process source does.
    int64_t now = clocked ? mono_now_ns() : mono_ns;
    double cpu_rate = cpu_.update(now, cpu_acc_ns_);
    double majflt_rate = majflt_.update(now, majflt_acc_);
    double delay_rate = kNaN;
    uint64_t thread_bound = std::max(threads, last_threads_);  // a thread waits at most 1 s a second
    last_threads_ = threads;
    if (rd_ok_) {
      read_threads(out ? thread_reads_per_tick_ : SIZE_MAX, mono_ns);
      int64_t t = clocked ? mono_now_ns() : mono_ns;
      delay_rate = delay_.update(t, delay_acc_ns_) / 1e9;
      if (delay_rate > double(thread_bound)) delay_rate = double(thread_bound);
    }
    for (size_t k = 0; k < nslots_; ++k) {
      Slot& sl = slots_[k];
      double r = sl.have ? sl.rate.update(now, sl.cpu_ns) : kNaN;
      if (out && sl.have) out[kNumTotals + k * kSlotWidth + 4] = cap_core_percent(r / 1e7, sl.cores);
    }
    if (!out) return true;
    smaps_->touch(mono_ns);
    for (size_t k = 0; k < nslots_; ++k)  // their NaN row is out: free for the next discovery
      if (slots_[k].state == SlotState::kVacated) slots_[k].state = SlotState::kFree;
    if (!root_live) {  // the followed process has exited (or is exiting)
      fill_nan(out, width_);
      return true;
    }
    out[0] = double(n);
    out[1] = bad_rss ? kNaN : double(rss_pages) * page_bytes_;  // a negative member's RSS is corrupt
    out[2] = cap_core_percent(cpu_rate / 1e7, cpus_);          // percent of one core, at most the online CPUs
    out[3] = double(total_ns) / 1e9;
    out[4] = bad_threads ? kNaN : double(threads);
    out[5] = pss;
    out[6] = uss;
    out[7] = double(unslotted);
    out[8] = rd_ok_ ? double(delay_acc_ns_) / 1e9 : kNaN;
    out[9] = delay_rate;
    out[10] = double(blocked);
    out[11] = double(sleeping);
    out[12] = double(majflt_acc_);
    out[13] = majflt_rate;
    return true;
  }

  std::string proc_root_;
  bool live_ = false, scan_ = false, overflow_ = false, discovering_ = false, threaded_smaps_ = false;
  bool scanning_ = false;  // the discovery's /proc scan (scan_) is under way; then the task directories
  int64_t root_pid_ = -1;
  std::unique_ptr<Member[]> members_;
  size_t nslots_ = 0;
  std::unique_ptr<Slot[]> slots_;
  std::unique_ptr<SmapsReader> smaps_;  // Pss and USS per member index
  MemberLog log_;
  int64_t next_discover_ns_ = 0;
  uint64_t cpu_acc_ns_ = 0;  // sum of the members' CPU-time deltas: monotonic
  uint64_t majflt_acc_ = 0;  // and of their major faults
  TrailingRate majflt_;
  unsigned cpus_ = 1;        // online CPUs: the totals' bound (a member's: cpu_bound())
  TrailingRate cpu_;
  // run delay (rd_ok_: this kernel counts it)
  bool rd_ok_ = false, thread_overflow_ = false, thread_overflow_said_ = false;
  std::unique_ptr<Thread[]> threads_;
  size_t threads_used_ = 0;           // threads_[0, threads_used_) may be active
  size_t rr_ = 0;                     // the next thread to read
  size_t thread_reads_per_tick_ = 8;  // schedstat reads per tick
  uint64_t delay_acc_ns_ = 0;         // sum of the threads' run-delay increases: monotonic
  uint64_t last_threads_ = 0;         // the tree's threads at the last tick
  TrailingRate delay_;
  std::vector<std::pair<int64_t, int64_t>> found_tids_;  // (tid, pid) of the threads found by the discovery
  std::vector<int64_t> active_tids_;                     // scratch of sync_threads()
  // discovery state and scratch (allocates only on discovery ticks)
  std::vector<int64_t> found_;                      // root and descendants found so far, breadth first
  size_t files_per_tick_ = 8;                       // discovery reads per tick
  size_t next_ = 0;                                 // the next of found_ whose task directory to read
  DIR* dir_ = nullptr;                              // the task directory (or, scanning, proc_root) being read
  std::string task_;                                // its path
  std::vector<std::pair<int64_t, int64_t>> links_;  // scanning: (pid, ppid) of every process
  std::string buf_, scratch_;
  uint64_t tick_hz_ = uint64_t(sysconf(_SC_CLK_TCK));
  double page_bytes_ = double(sysconf(_SC_PAGESIZE));
};

std::unique_ptr<Source> make_process_tree_source() { return std::make_unique<ProcessTreeSource>(); }

}  // namespace

SYSPROF_SOURCE(process_tree, make_process_tree_source);

}  // namespace sysprof
