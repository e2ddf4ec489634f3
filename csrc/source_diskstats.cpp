// /proc/diskstats: per whole disk I/O counters (Documentation/admin-guide/iostats.rst).
#include <string_view>
#include <sys/stat.h>

#include "proc_file.hpp"
#include "scan.hpp"
#include "source.hpp"

namespace sysprof {
namespace {

constexpr double kSectorBytes = 512.0;  // diskstats sectors are 512 bytes whatever the device's block size

// Counters kept per disk, in output order.
enum { kReads, kWrites, kSectorsRead, kSectorsWritten, kIoTicks, kReadTicks, kWriteTicks, kCounters };

constexpr const char* kFields[] = {"read_bytes", "write_bytes", "read_count", "write_count", "busy_time_seconds",
                                   "read_time_seconds", "write_time_seconds", "read_bytes_per_second",
                                   "write_bytes_per_second", "read_count_per_second", "write_count_per_second",
                                   "busy_time_seconds_per_second"};
constexpr size_t kPerDisk = sizeof(kFields) / sizeof(kFields[0]);

struct Line {
  std::string_view name;
  uint64_t v[kCounters];
  bool has_times;  // false on 4-statistic partition lines of kernels before 2.6.25
};

// "major minor name" then 4, 11, 15 or 17 statistics (14, 18 or 20 fields; 7 on old partition lines).
bool parse_line(Cursor c, Line& l) {
  uint64_t major, minor;
  if (!parse_u64(c, major) || !parse_u64(c, minor)) return false;
  l.name = next_token(c);
  if (l.name.empty()) return false;
  uint64_t s[17];
  int n = 0;
  while (n < 17 && parse_u64(c, s[n])) ++n;
  skip_blanks(c);
  if (!c.done()) return false;  // trailing junk or more than 17 statistics
  if (n == 4) {
    l.v[kReads] = s[0], l.v[kSectorsRead] = s[1], l.v[kWrites] = s[2], l.v[kSectorsWritten] = s[3];
    l.v[kIoTicks] = l.v[kReadTicks] = l.v[kWriteTicks] = 0;
    l.has_times = false;
    return true;
  }
  if (n != 11 && n != 15 && n != 17) return false;
  l.v[kReads] = s[0], l.v[kSectorsRead] = s[2], l.v[kReadTicks] = s[3];
  l.v[kWrites] = s[4], l.v[kSectorsWritten] = s[6], l.v[kWriteTicks] = s[7];
  l.v[kIoTicks] = s[9];
  l.has_times = true;
  return true;
}

struct Disk {
  std::string name;
  Counter c[kCounters];
  int64_t last_ns = 0;
  bool seen = false;
};

class DiskstatsSource final : public Source {
 public:
  const char* name() const override { return "disk"; }

  bool open(const Config& cfg, std::vector<std::string>& channels, std::string& err) override {
    if (!file_.open(join(cfg.proc_root, "diskstats"), err, false)) return false;
    // Whole disks are the entries of /sys/block; partitions live below them.
    std::string block = join(cfg.sys_root, "block");
    struct stat st;
    bool have_sys = ::stat(block.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    LineReader lines(file_.data(), file_.size());
    Cursor c;
    std::string bad;
    size_t good = 0;
    while (lines.next(c)) {
      Line l;
      if (!parse_line(c, l)) {
        if (c.p != c.end && bad.empty()) bad = std::string(c.p, c.end);
        continue;
      }
      ++good;
      std::string name(l.name);
      if (have_sys) {
        std::string sysname = name;
        for (auto& ch : sysname)
          if (ch == '/') ch = '!';
        if (::stat((block + "/" + sysname).c_str(), &st) != 0) continue;
      }
      disks_.push_back(Disk{name, {}, 0, false});
    }
    if (good == 0 && !bad.empty()) {
      err = file_.path() + ": no parsable line; first malformed: '" + bad + "'";
      return false;
    }
    layout(channels);
    if (!update(mono_now_ns(), nullptr, err)) return false;
    if (!bad.empty()) err = file_.path() + ": malformed line skipped: '" + bad + "'";
    if (!have_sys) err += (err.empty() ? "" : "; ") + block + " unreadable: partitions are not filtered out";
    return true;
  }

  std::unique_ptr<Source> clone(const Config& cfg, std::string& err) const override {
    auto s = std::make_unique<DiskstatsSource>();
    for (auto& d : disks_) s->disks_.push_back(Disk{d.name, {}, 0, false});
    std::vector<std::string> unused;
    s->layout(unused);
    if (!s->file_.open(join(cfg.proc_root, "diskstats"), err, false) || !s->update(mono_now_ns(), nullptr, err)) return nullptr;
    return s;
  }

  bool sample(int64_t mono_ns, double* out, std::string& err) override {
    if (!update(mono_ns, out, err)) {
      fill_nan(out, width_);
      return false;
    }
    return true;
  }

 private:
  void layout(std::vector<std::string>& channels) {
    for (auto& d : disks_)
      for (auto f : kFields) channels.push_back("disk/" + d.name + "/" + f);
    width_ = disks_.size() * kPerDisk;
  }

  // Reads the file; with out == nullptr only advances the baselines (priming).
  bool update(int64_t mono_ns, double* out, std::string& err) {
    if (!file_.read(err)) return false;
    for (auto& d : disks_) d.seen = false;
    const char* bad = nullptr;
    const char* bad_end = nullptr;
    size_t hint = 0;
    LineReader lines(file_.data(), file_.size());
    Cursor c;
    while (lines.next(c)) {
      Line l;
      if (!parse_line(c, l)) {
        if (c.p != c.end) bad = c.p, bad_end = c.end;
        continue;
      }
      Disk* d = find_device(disks_, l.name, hint);
      if (!d || d->seen) continue;
      d->seen = true;
      size_t k = size_t(d - disks_.data());
      bool had_baseline = d->c[0].valid;
      double dt = double(mono_ns - d->last_ns) * 1e-9;
      uint64_t delta[kCounters];
      for (int i = 0; i < kCounters; ++i) delta[i] = d->c[i].update(l.v[i]);
      d->last_ns = mono_ns;
      if (!out) continue;
      double* o = out + k * kPerDisk;
      o[0] = d->c[kSectorsRead].total() * kSectorBytes;
      o[1] = d->c[kSectorsWritten].total() * kSectorBytes;
      o[2] = d->c[kReads].total();
      o[3] = d->c[kWrites].total();
      o[4] = l.has_times ? d->c[kIoTicks].total() / 1000.0 : kNaN;
      o[5] = l.has_times ? d->c[kReadTicks].total() / 1000.0 : kNaN;
      o[6] = l.has_times ? d->c[kWriteTicks].total() / 1000.0 : kNaN;
      if (!had_baseline) dt = 0;  // reappeared device: no rate this tick
      o[7] = rate(delta[kSectorsRead], dt) * kSectorBytes;
      o[8] = rate(delta[kSectorsWritten], dt) * kSectorBytes;
      o[9] = rate(delta[kReads], dt);
      o[10] = rate(delta[kWrites], dt);
      o[11] = l.has_times ? rate(delta[kIoTicks], dt) / 1000.0 : kNaN;
    }
    for (size_t k = 0; k < disks_.size(); ++k) {
      if (disks_[k].seen) continue;
      for (auto& cn : disks_[k].c) cn.valid = false;  // gone: re-prime if it comes back
      if (out) fill_nan(out + k * kPerDisk, kPerDisk);
    }
    if (bad) err = file_.path() + ": malformed line skipped: '" + std::string(bad, bad_end) + "'";
    return true;
  }

  ProcFile file_;
  std::vector<Disk> disks_;
};

}  // namespace

std::unique_ptr<Source> make_diskstats_source() { return std::make_unique<DiskstatsSource>(); }

}  // namespace sysprof
