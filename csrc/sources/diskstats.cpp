// /proc/diskstats: per whole disk I/O counters (Documentation/admin-guide/iostats.rst).
#include <sys/stat.h>

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
    }
    if (!bad.empty()) malformed(file_, bad, warning);
    if (good == 0 && !bad.empty()) return false;
    if (!have_sys) warning += (warning.empty() ? "" : "; ") + block + " unreadable: partitions are not filtered out";
    return true;
  }

  void layout(std::vector<std::string>& channels) override {
    for (auto& d : disks_)
      for (auto f : kFields) channels.push_back("disk/" + d.name + "/" + f);
    width_ = disks_.size() * kPerDisk;
  }

  std::unique_ptr<FileSource> fresh() const override {
    auto s = std::make_unique<DiskstatsSource>();
    for (auto& d : disks_) s->disks_.push_back(CounterDevice<kDiskCounters, DiskstatsLine>(d.name));
    s->skipped_ = skipped_;
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
  std::vector<CounterDevice<kDiskCounters, DiskstatsLine>> disks_;
  SkippedNames skipped_;
};

std::unique_ptr<Source> make_diskstats_source() { return std::make_unique<DiskstatsSource>(); }

}  // namespace

SYSPROF_SOURCE(disk, make_diskstats_source);

}  // namespace sysprof
