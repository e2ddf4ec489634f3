// cgroup v2 files of the sampled process (Documentation/admin-guide/cgroup-v2.rst). The cgroup is
// the "0::/path" line of /proc/<pid>/cgroup, found once at open; each interface file is its own part,
// so a controller that is not enabled (its files absent) leaves out only its channels.
#include <cerrno>
#include <cmath>
#include <cstring>
#include <sys/stat.h>

#include "parse/cgroup.hpp"
#include "sources/file_source.hpp"
#include "sources/registry.hpp"
#include "sources/source_group.hpp"

namespace sysprof {
namespace {

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Common shape of the cgroup parts: a file in the cgroup's directory, channels fixed by the class.
class CgroupFile : public FileSource {
 public:
  const char* name() const override { return "cgroup"; }

  // The group names the directory once; an absent file (controller not enabled) is then "memory.max: ...".
  bool open(const Config& cfg, std::vector<std::string>& channels, std::string& err) override {
    bool ok = FileSource::open(cfg, channels, err);
    if (err.compare(0, dir_.size(), dir_) == 0) err.erase(0, dir_.size());
    return ok;
  }

 protected:
  CgroupFile(std::string dir, const char* file) : dir_(std::move(dir)), file_name_(file) {}
  std::string path(const Config&) const override { return dir_ + file_name_; }
  bool fail(std::string& err) const {
    err = file_.path() + ": malformed: '" + std::string(file_.data(), file_.size()) + "'";
    return false;
  }
  std::string dir_;  // ends in '/'
  const char* file_name_;
};

// "Single value" files: memory.current, memory.max. Only a limit may read "max" (no limit: +inf).
class ValueFile final : public CgroupFile {
 public:
  ValueFile(std::string dir, const char* file, const char* channel, bool limit)
      : CgroupFile(std::move(dir), file), channel_(channel), limit_(limit) {
    width_ = 1;
  }

 protected:
  void layout(std::vector<std::string>& channels) override { channels.push_back(channel_); }
  std::unique_ptr<FileSource> fresh() const override { return std::make_unique<ValueFile>(dir_, file_name_, channel_, limit_); }
  bool parse(int64_t, double* out, std::string& err) override {
    double v;
    if (!parse_cgroup_value(file_.data(), file_.size(), limit_, v)) return fail(err);
    if (out) out[0] = v;
    return true;
  }

 private:
  const char* channel_;
  bool limit_;
};

// memory.stat: anon (anonymous memory) and file (page cache) bytes.
class MemoryStat final : public CgroupFile {
 public:
  explicit MemoryStat(std::string dir) : CgroupFile(std::move(dir), "memory.stat") { width_ = 2; }

 protected:
  void layout(std::vector<std::string>& channels) override {
    channels.push_back("cgroup/memory_anon_bytes");
    channels.push_back("cgroup/memory_file_bytes");
  }
  std::unique_ptr<FileSource> fresh() const override { return std::make_unique<MemoryStat>(dir_); }
  bool parse(int64_t, double* out, std::string& err) override {
    static constexpr const char* kKeys[] = {"anon", "file"};
    uint64_t v[2];
    std::string_view bad;
    unsigned found = parse_flat_keyed(file_.data(), file_.size(), kKeys, v, bad);
    if (!bad.empty()) malformed(file_, bad, err);
    if (!found) {
      if (bad.empty()) err = file_.path() + ": no anon/file lines";
      return false;
    }
    if (out)
      for (int i = 0; i < 2; ++i) out[i] = (found >> i) & 1u ? double(v[i]) : kNaN;
    return true;
  }
};

// cpu.stat: usage/user/system always (cgroup core); nr_periods, nr_throttled, throttled_usec only
// where the cpu controller is enabled, so those channels exist only if the first read has them.
class CpuStat final : public CgroupFile {
 public:
  // cpus: the CPUs the cgroup can run on, which bound cpu_percent.
  CpuStat(std::string dir, unsigned cpus, bool throttling = false)
      : CgroupFile(std::move(dir), "cpu.stat"), throttling_(throttling), cpus_(cpus) {}

 protected:
  static constexpr const char* kKeys[] = {"usage_usec", "user_usec", "system_usec", "nr_periods", "nr_throttled",
                                          "throttled_usec"};

  bool discover(const Config&, std::string& warning) override {
    uint64_t v[6];
    std::string_view bad;
    throttling_ = (parse_flat_keyed(file_.data(), file_.size(), kKeys, v, bad) & 0x38) == 0x38;
    if (!throttling_) warning = file_.path() + ": no throttling statistics (cpu controller not enabled here)";
    return true;
  }
  void layout(std::vector<std::string>& channels) override {
    for (auto c : {"cgroup/cpu_usage_seconds_total", "cgroup/cpu_user_seconds_total",
                   "cgroup/cpu_system_seconds_total", "cgroup/cpu_percent"})
      channels.push_back(c);
    if (throttling_)
      for (auto c : {"cgroup/cpu_throttled_seconds_total", "cgroup/cpu_throttled_periods_total",
                     "cgroup/cpu_periods_total"})
        channels.push_back(c);
    width_ = throttling_ ? 7 : 4;
  }
  std::unique_ptr<FileSource> fresh() const override { return std::make_unique<CpuStat>(dir_, cpus_, throttling_); }

  bool parse(int64_t mono_ns, double* out, std::string& err) override {
    uint64_t v[6];
    std::string_view bad;
    unsigned found = parse_flat_keyed(file_.data(), file_.size(), kKeys, v, bad);
    if (!bad.empty()) malformed(file_, bad, err);
    if (!(found & 1u)) {
      if (bad.empty()) err = file_.path() + ": no usage_usec";
      return false;
    }
    double usage_rate = usage_.update(mono_ns, v[0]);  // µs of CPU per s
    if (!out) return true;
    // µs / 1e6 rather than * 1e-6: the double nearest the exact seconds, as the file's reader computes it
    auto get = [&](int i, double div) { return (found >> i) & 1u ? double(v[i]) / div : kNaN; };
    out[0] = get(0, 1e6);
    out[1] = get(1, 1e6);
    out[2] = get(2, 1e6);
    // percent of one core; usage_usec advances at the scheduler tick, so a 20 ms window can see a
    // burst above what the cgroup's CPUs could run: bounded by them
    out[3] = cap_core_percent(usage_rate / 1e4, cpus_);
    if (throttling_) {
      out[4] = get(5, 1e6);
      out[5] = get(4, 1.0);
      out[6] = get(3, 1.0);
    }
    return true;
  }

 private:
  bool throttling_;
  unsigned cpus_;
  TrailingRate usage_;
};

// cpu.max: "$MAX $PERIOD" in microseconds; the limit in cores is MAX/PERIOD, +inf for "max".
class CpuMax final : public CgroupFile {
 public:
  explicit CpuMax(std::string dir) : CgroupFile(std::move(dir), "cpu.max") { width_ = 1; }

 protected:
  void layout(std::vector<std::string>& channels) override { channels.push_back("cgroup/cpu_limit_cores"); }
  std::unique_ptr<FileSource> fresh() const override { return std::make_unique<CpuMax>(dir_); }
  bool parse(int64_t, double* out, std::string& err) override {
    double max, period;
    if (!parse_cpu_max(file_.data(), file_.size(), max, period)) return fail(err);
    if (out) out[0] = max / period;
    return true;
  }
};

// io.stat: "MAJ:MIN rbytes=.. wbytes=.. rios=.. wios=.. dbytes=.. dios=.." per device with I/O,
// summed. A device that leaves makes the sum drop: that tick's rate is 0, not negative.
class IoStat final : public CgroupFile {
 public:
  explicit IoStat(std::string dir) : CgroupFile(std::move(dir), "io.stat") { width_ = 4; }

 protected:
  void layout(std::vector<std::string>& channels) override {
    for (auto c : {"cgroup/io_read_bytes", "cgroup/io_write_bytes", "cgroup/io_read_bytes_per_second",
                   "cgroup/io_write_bytes_per_second"})
      channels.push_back(c);
  }
  std::unique_ptr<FileSource> fresh() const override { return std::make_unique<IoStat>(dir_); }

  bool parse(int64_t mono_ns, double* out, std::string& err) override {
    uint64_t sum[2] = {0, 0};
    std::string_view bad;
    LineReader lines(file_.data(), file_.size());
    Cursor c;
    while (lines.next(c)) {
      uint64_t r, w;
      int got = parse_io_stat_line(c, r, w);
      if (got < 0) bad = std::string_view(c.p, size_t(c.end - c.p));
      if (got <= 0) continue;
      sum[0] = sat_add(sum[0], r), sum[1] = sat_add(sum[1], w);
    }
    if (!bad.empty()) malformed(file_, bad, err);
    bool had_baseline = bytes_[0].valid;
    double dt = double(mono_ns - last_ns_) * 1e-9;
    last_ns_ = mono_ns;
    for (int k = 0; k < 2; ++k) {
      uint64_t d = bytes_[k].update(sum[k]);
      if (out) {
        out[k] = double(sum[k]);
        out[2 + k] = had_baseline ? rate(d, dt) : kNaN;
      }
    }
    return true;
  }

 private:
  Total64 bytes_[2];
  int64_t last_ns_ = 0;
};

// The cgroup's directory from the "0::" line. Under systemd's hybrid layout the v2 tree is mounted
// at fs/cgroup/unified rather than fs/cgroup.
bool cgroup_dir(const Config& cfg, std::string& dir, std::string& err) {
  std::string rel = cfg.pid < 0 ? "self/cgroup" : std::to_string(cfg.pid) + "/cgroup";
  std::string file = join(cfg.proc_root, rel.c_str());
  std::string text;
  if (!read_small_file(file, text, err)) return false;
  std::string path;
  bool v2 = false;
  LineReader lines(text.data(), text.size());
  Cursor c;
  while (lines.next(c))
    if (c.end - c.p >= 3 && std::memcmp(c.p, "0::", 3) == 0) {
      path.assign(c.p + 3, c.end);
      v2 = true;
      break;
    }
  if (!v2 || path.empty() || path[0] != '/') {
    err = "cgroup v1 is not supported (" + file + " has no '0::/' line)";
    return false;
  }
  std::string mount = join(cfg.sys_root, "fs/cgroup");
  struct stat st;
  if (::stat((mount + "/cgroup.controllers").c_str(), &st) != 0 &&
      ::stat((mount + "/unified/cgroup.controllers").c_str(), &st) == 0)
    mount += "/unified";
  dir = mount + path;
  if (dir.back() != '/') dir += '/';
  if (!is_dir(dir)) {
    err = dir + ": no such cgroup directory (is cgroup2 mounted at " + mount + "?)";
    return false;
  }
  return true;
}

// The CPUs the cgroup can run on: the online ones, or its cpuset.cpus.effective (cpuset controller)
// where fewer. Read once at open.
unsigned cgroup_cpus(const Config& cfg, const std::string& dir) {
  unsigned n = online_cpus(cfg);
  std::string list, ignored;
  if (read_small_file(dir + "cpuset.cpus.effective", list, ignored)) {
    size_t k = for_each_cpu_in_list(list.data(), list.size(), [](long) {});
    if (k > 0 && k < n) n = unsigned(k);
  }
  return n;
}

std::unique_ptr<Source> make_cgroup_source() {
  return std::make_unique<SourceGroup>("cgroup", [](const Config& cfg, std::vector<std::unique_ptr<Source>>& parts,
                                                    std::string& err) {
    std::string dir;
    if (!cgroup_dir(cfg, dir, err)) return false;
    err = dir + ": ";
    parts.push_back(std::make_unique<ValueFile>(dir, "memory.current", "cgroup/memory_current_bytes", false));
    parts.push_back(std::make_unique<ValueFile>(dir, "memory.max", "cgroup/memory_max_bytes", true));
    parts.push_back(std::make_unique<MemoryStat>(dir));
    parts.push_back(std::make_unique<CpuStat>(dir, cgroup_cpus(cfg, dir)));
    parts.push_back(std::make_unique<CpuMax>(dir));
    parts.push_back(std::make_unique<IoStat>(dir));
    return true;
  });
}

}  // namespace

SYSPROF_SOURCE(cgroup, make_cgroup_source);

}  // namespace sysprof
