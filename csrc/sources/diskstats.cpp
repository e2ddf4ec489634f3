// Per whole disk I/O counters (Documentation/admin-guide/iostats.rst): the disks are found in /proc/diskstats, and
// read each tick from it or from their own /sys/block/<disk>/stat, whichever costs the kernel less here.
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "parse/diskstats.hpp"
#include "sources/device_filter.hpp"
#include "sources/file_source.hpp"
#include "sources/registry.hpp"

namespace sysprof {
namespace {

constexpr double kSectorBytes = 512.0;  // diskstats sectors are 512 bytes whatever the device's block size

constexpr const char* kFields[] = {"read_bytes", "write_bytes", "read_count", "write_count", "busy_time_seconds",
                                   "read_time_seconds", "write_time_seconds", "read_bytes_per_second",
                                   "write_bytes_per_second", "read_count_per_second", "write_count_per_second",
                                   "busy_time_seconds_per_second"};
constexpr size_t kPerDisk = sizeof(kFields) / sizeof(kFields[0]);

// The name of a diskstats line ("major minor name ..."), without parsing its statistics; empty if none.
inline std::string_view diskstats_name(Cursor c) {
  uint64_t n;
  if (!parse_u64(c, n) || !parse_u64(c, n)) return {};
  return next_token(c);
}

class DiskstatsSource final : public FileSource {
 public:
  const char* name() const override { return "disk"; }

 protected:
  std::string path(const Config& cfg) const override { return join(cfg.proc_root, "diskstats"); }
  bool single_shot() const override { return false; }

  bool discover(const Config& cfg, std::string& warning) override {
    // Whole disks are the entries of /sys/block (with '/' in a name written as '!'); partitions are not.
    // A disk the device rules leave out (sampling/devices.py) is skipped like a partition.
    DeviceRules rules(cfg, "disk");
    std::string block = join(cfg.sys_root, "block");
    struct stat st;
    bool have_sys = ::stat(block.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    LineReader lines(file_.data(), file_.size());
    Cursor c;
    std::string_view bad;
    size_t good = 0;
    while (lines.next(c)) {
      DiskstatsLine l;
      int r = parse_diskstats_line(c, l);
      if (r < 0) bad = std::string_view(c.p, size_t(c.end - c.p));
      if (r <= 0) continue;
      ++good;
      std::string name(l.name), sysname(l.name);
      for (auto& ch : sysname)
        if (ch == '/') ch = '!';
      if (!rules.keeps(name) || (have_sys && ::stat((block + "/" + sysname).c_str(), &st) != 0)) {
        skipped_.add(l.name);
        continue;
      }
      disks_.push_back(CounterDevice<kDiskCounters, DiskstatsLine>(name));
      stat_paths_.push_back(block + "/" + sysname + "/stat");
    }
    if (!bad.empty()) malformed(file_, bad, warning);
    if (good == 0 && !bad.empty()) return false;
    if (!have_sys) warning += (warning.empty() ? "" : "; ") + block + " unreadable: partitions are not filtered out";
    choose_files(have_sys, warning);
    return true;
  }

  // In sysfs mode the disks' own files are read (in parse), not /proc/diskstats.
  bool sample(int64_t mono_ns, double* out, std::string& err) override {
    if (!sysfs_) return FileSource::sample(mono_ns, out, err);
    row_kept_ = row_kept && ok_;
    ok_ = parse(mono_ns, out, err);
    return ok_;
  }

  void layout(std::vector<std::string>& channels) override {
    for (auto& d : disks_)
      for (auto f : kFields) channels.push_back("disk/" + d.name + "/" + f);
    width_ = disks_.size() * kPerDisk;
  }

  std::unique_ptr<FileSource> fresh() const override {
    auto s = std::make_unique<DiskstatsSource>();
    s->sysfs_ = sysfs_;
    for (auto& d : disks_) s->disks_.push_back(CounterDevice<kDiskCounters, DiskstatsLine>(d.name));
    s->skipped_ = skipped_;
    s->stat_paths_ = stat_paths_;
    if (sysfs_) s->open_stat_files();  // one that fails to open is a disk gone: retried each tick
    return s;
  }

  bool parse(int64_t mono_ns, double* out, std::string& err) override {
    auto fill = [&](size_t k, const DiskstatsLine& l, const uint64_t* delta, double dt) {
      if (!out) return;
      const Counter* c = disks_[k].c;
      double* o = out + k * kPerDisk;
      double t = l.has_times ? 1.0 : kNaN;  // times are unknown on 4-statistic lines
      o[0] = c[kSectorsRead].total() * kSectorBytes;
      o[1] = c[kSectorsWritten].total() * kSectorBytes;
      o[2] = c[kReads].total();
      o[3] = c[kWrites].total();
      o[4] = t * c[kIoTicks].total() / 1000.0;
      o[5] = t * c[kReadTicks].total() / 1000.0;
      o[6] = t * c[kWriteTicks].total() / 1000.0;
      o[7] = rate(delta[kSectorsRead], dt) * kSectorBytes;
      o[8] = rate(delta[kSectorsWritten], dt) * kSectorBytes;
      o[9] = rate(delta[kReads], dt);
      o[10] = rate(delta[kWrites], dt);
      // Utilisation. io_ticks advances in whole jiffies, so a short window can over-count: cap at 1.
      double busy = rate(delta[kIoTicks], dt) / 1000.0;
      o[11] = t * (busy > 1.0 ? 1.0 : busy);
    };
    auto gone = [&](size_t k) {
      if (out) fill_nan(out + k * kPerDisk, kPerDisk);
    };
    if (sysfs_) {
      read_stat_files();
      size_t at = 0;
      std::string_view bad = scan_counter_texts<kDiskCounters, DiskstatsLine>(
          texts_.data(), disks_, mono_ns, row_kept_ && out, parse_diskstats_values, fill, gone, at);
      if (!bad.empty()) malformed(*stat_files_[at], bad, err);
      return true;
    }
    auto parse_line = [this](Cursor c, DiskstatsLine& l) {
      if (!skipped_.empty() && skipped_.contains(diskstats_name(c))) return 0;  // a partition or a disk left out: not parsed
      return parse_diskstats_line(c, l);
    };
    std::string_view bad =
        scan_counter_devices<kDiskCounters, DiskstatsLine>(file_, disks_, mono_ns, row_kept_ && out, parse_line, fill, gone);
    if (!bad.empty()) malformed(file_, bad, err);
    return true;
  }

 private:
  // Which file the kept disks are read from, decided once, here. /proc/diskstats makes the kernel render every
  // block device, partitions and loop and ram devices included (each line sums that device's per-CPU counters
  // over the possible CPUs), in one read per ~4 kB; /sys/block/<disk>/stat renders one disk, the same
  // statistics, at the fixed cost of a read per kept disk. Which is cheaper depends on the kernel and on how many
  // devices the kept disks are among (benchmarks/bench_node_model.py), so SYSPROF_DISK_FILES=diskstats or sysfs
  // picks one, and otherwise both are timed here (5 alternated rounds, the fastest of each) and the cheaper is
  // kept. The sysfs way needs every kept disk's file to open and parse now; the channels are the same either way.
  void choose_files(bool have_sys, std::string& warning) {
    const char* env = std::getenv("SYSPROF_DISK_FILES");
    std::string want = env ? env : "";
    if (!want.empty() && want != "auto" && want != "diskstats" && want != "sysfs") {
      warning += (warning.empty() ? "" : "; ") + std::string("SYSPROF_DISK_FILES='") + want +
                 "' is not diskstats, sysfs or auto: auto";
      want = "auto";
    }
    if (want == "diskstats" || !have_sys) return;
    open_stat_files();
    for (size_t k = 0; k < stat_files_.size(); ++k) {
      DiskstatsLine l;
      LineReader lines(stat_files_[k]->data(), stat_files_[k]->size());
      Cursor c;
      if (!stat_files_[k]->is_open() || !lines.next(c) || parse_diskstats_values(c, l) != 1) {
        if (want == "sysfs")
          warning += (warning.empty() ? "" : "; ") + stat_paths_[k] + " unreadable: /proc/diskstats is read";
        stat_files_.clear();
        return;
      }
    }
    sysfs_ = want == "sysfs" || sysfs_cheaper();
    if (!sysfs_) stat_files_.clear();
  }

  bool sysfs_cheaper() {
    int64_t proc = INT64_MAX, sys = INT64_MAX;
    std::string unused;
    for (int round = 0; round < 5; ++round) {
      int64_t t0 = mono_now_ns();
      file_.read(unused);
      int64_t t1 = mono_now_ns();
      for (auto& f : stat_files_) f->read(unused);
      int64_t t2 = mono_now_ns();
      proc = std::min(proc, t1 - t0);
      sys = std::min(sys, t2 - t1);
    }
    return sys < proc;
  }

  void open_stat_files() {
    stat_files_.clear();
    std::string unused;
    for (const auto& p : stat_paths_) {
      stat_files_.push_back(std::make_unique<ProcFile>());
      stat_files_.back()->open(p, unused, true);  // sysfs attributes render in one read
    }
    texts_.assign(stat_files_.size(), std::string_view());
  }

  // Each disk's own file, read again; texts_[k] stays empty for a disk not there. A removed disk's file reads
  // ENODEV for good (a re-created disk is a new file), and an empty read is no disk either: both are opened
  // again, one open() per tick while the disk is away (as cheap as the line /proc/diskstats would render).
  void read_stat_files() {
    for (size_t k = 0; k < stat_files_.size(); ++k) {
      ProcFile& f = *stat_files_[k];
      bool ok = f.is_open() && f.read(scratch_) && f.size() > 0;
      if (!ok) ok = f.reopen() && f.size() > 0;
      texts_[k] = ok ? std::string_view(f.data(), f.size()) : std::string_view();
    }
  }

  std::vector<CounterDevice<kDiskCounters, DiskstatsLine>> disks_;
  SkippedNames skipped_;
  std::vector<std::string> stat_paths_;  // each kept disk's /sys/block/<disk>/stat, in disks_ order
  bool sysfs_ = false;  // read stat_files_, not /proc/diskstats
  std::vector<std::unique_ptr<ProcFile>> stat_files_;
  std::vector<std::string_view> texts_;  // what each of stat_files_ read this tick (empty: the disk is not there)
  std::string scratch_;  // a failed read's message, not reported (the disk is gone)
};

std::unique_ptr<Source> make_diskstats_source() { return std::make_unique<DiskstatsSource>(); }

}  // namespace

SYSPROF_SOURCE(disk, make_diskstats_source);

}  // namespace sysprof
