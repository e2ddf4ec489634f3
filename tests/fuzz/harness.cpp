// libFuzzer target driving the real sources over a fake /proc and /sys tree.
//
// Build one binary per target with -DSYSPROF_FUZZ_TARGET=<name> (see build.sh). An input holds two
// readings of the target's files, as sections that each start with a header line
//     >1 proc/stat          (the file's first reading)
//     >2 proc/stat          (its second reading; a file without one keeps its first)
// The section's content runs to the newline before the next header (that newline is the separator,
// so a blank line before a header means the file ends in '\n'). Bytes before the first header are
// the first reading of the target's main file. Only the target's own paths are written.
//
// Per input: write reading 1, open a Collector with range enforcement OFF, sample; write reading 2 in
// place (same inode, as the kernel's files), sample twice (the second past the process tree's
// discovery period). Every value of every row is checked against RangeRules; a violation prints the
// target, channel, value and input, then aborts (libFuzzer saves the input).
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sanitizer/common_interface_defs.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "engine/ranges.hpp"
#include "engine/sampler.hpp"

#ifndef SYSPROF_FUZZ_TARGET
#error "define SYSPROF_FUZZ_TARGET (cpu, per_cpu, meminfo, ...)"
#endif
#define SYSPROF_STR2(x) #x
#define SYSPROF_STR(x) SYSPROF_STR2(x)

namespace {

using sysprof::Config;

constexpr const char* kCg = "sys/fs/cgroup/fuzz/";

struct Target {
  const char* name;
  const char* main_file;
  // '#' matches 1-7 digits, '*' a device name ([A-Za-z0-9!._:-], 1-32 bytes), all else itself.
  std::vector<std::string> allowed;
  std::vector<std::string> dirs;                                 // made before reading 1
  std::vector<std::pair<std::string, std::string>> base_files;  // written before reading 1
  void (*configure)(Config&);
};

std::vector<Target> targets() {
  std::string cg = kCg;
  const std::string online = "sys/devices/system/cpu/online";
  std::vector<std::pair<std::string, std::string>> cg_base = {{"proc/self/cgroup", "0::/fuzz\n"},
                                                              {"sys/fs/cgroup/cgroup.controllers", "cpu io memory\n"}};
  return {
      {"cpu", "proc/stat", {"proc/stat"}, {}, {}, [](Config& c) { c.sources = {"cpu"}; }},
      {"per_cpu", "proc/stat", {"proc/stat", "sys/devices/system/cpu/possible", online}, {}, {},
       [](Config& c) { c.sources = {"cpu"}, c.options = {"per_cpu"}; }},
      {"meminfo", "proc/meminfo", {"proc/meminfo"}, {}, {}, [](Config& c) { c.sources = {"memory"}; }},
      {"diskstats", "proc/diskstats", {"proc/diskstats", "sys/block/*"}, {"sys/block"}, {},
       [](Config& c) { c.sources = {"disk"}; }},
      {"netdev", "proc/net/dev", {"proc/net/dev"}, {}, {}, [](Config& c) { c.sources = {"net"}; }},
      {"loadavg", "proc/loadavg", {"proc/loadavg"}, {}, {}, [](Config& c) { c.sources = {"load"}; }},
      {"process", "proc/self/stat", {"proc/self/stat", online}, {}, {}, [](Config& c) { c.sources = {"process"}; }},
      {"process_tree", "proc/self/stat",
       {"proc/self/stat", "proc/#/stat", "proc/#/task/#/children", "proc/#/smaps_rollup", online}, {}, {},
       [](Config& c) { c.sources = {"process_tree"}; }},
      {"pressure", "proc/pressure/cpu", {"proc/pressure/cpu", "proc/pressure/memory", "proc/pressure/io"}, {}, {},
       [](Config& c) { c.sources = {"pressure"}; }},
      {"cgroup_memory", "sys/fs/cgroup/fuzz/memory.current",
       {cg + "memory.current", cg + "memory.max", cg + "memory.stat"}, {cg}, cg_base,
       [](Config& c) { c.sources = {"cgroup"}; }},
      {"cgroup_cpu", "sys/fs/cgroup/fuzz/cpu.stat", {cg + "cpu.stat", cg + "cpu.max", online}, {cg}, cg_base,
       [](Config& c) { c.sources = {"cgroup"}; }},
      {"cgroup_io", "sys/fs/cgroup/fuzz/io.stat", {cg + "io.stat"}, {cg}, cg_base, [](Config& c) { c.sources = {"cgroup"}; }},
      {"vmstat", "proc/vmstat", {"proc/vmstat"}, {}, {}, [](Config& c) { c.sources = {"vmstat"}; }},
  };
}

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '!' || c == '.' ||
         c == '_' || c == '-' || c == ':';
}

// Whole-path match of `path` against `pat` (see Target::allowed). ".." can never match.
bool matches(const char* pat, const char* path) {
  for (; *pat; ++pat) {
    if (*pat == '#' || *pat == '*') {
      size_t n = 0;
      if (*pat == '#')
        while (path[n] >= '0' && path[n] <= '9' && n < 7) ++n;
      else
        while (name_char(path[n]) && n < 32) ++n;
      if (n == 0 || (*pat == '*' && std::strspn(path, ".") == n)) return false;
      path += n;
    } else if (*path++ != *pat) {
      return false;
    }
  }
  return *path == '\0';
}

struct Section {
  int reading;  // 1 or 2
  std::string path;
  const uint8_t* data;
  size_t size;
};

// Splits an input into sections (see the top of this file).
std::vector<Section> split(const uint8_t* data, size_t size, const Target& t) {
  std::vector<Section> out;
  auto is_header = [&](size_t i) {
    return i + 3 <= size && data[i] == '>' && (data[i + 1] == '1' || data[i + 1] == '2') && data[i + 2] == ' ';
  };
  size_t i = 0;
  if (!is_header(0)) {  // leading bytes: reading 1 of the main file
    size_t e = 0;
    while (e < size && !(data[e] == '\n' && is_header(e + 1))) ++e;
    out.push_back(Section{1, t.main_file, data, e});
    i = e < size ? e + 1 : size;
  }
  while (i < size) {  // at a header
    int reading = data[i + 1] - '0';
    size_t p = i + 3, eol = p;
    while (eol < size && data[eol] != '\n') ++eol;
    std::string path(reinterpret_cast<const char*>(data + p), eol - p);
    size_t b = eol < size ? eol + 1 : size, e = b;
    while (e < size && !(data[e] == '\n' && is_header(e + 1))) ++e;
    if (b > e) b = e;
    out.push_back(Section{reading, path, data + b, e - b});
    i = e < size ? e + 1 : size;
  }
  return out;
}

class FakeRoot {
 public:
  FakeRoot() {
    // tmpfs where there is one: file creation on a journalled disk costs 4x the exec/s
    const char* tmp = std::getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string tmpl = std::string(tmp) + "/sysprof-fuzz-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    root_ = buf.data();
  }
  ~FakeRoot() { remove(); }
  void remove() {
    clear();
    if (!root_.empty()) ::rmdir(root_.c_str());
    root_.clear();
  }
  const std::string& root() const { return root_; }

  void mkdirs(const std::string& rel) {  // rel: "a/b/c/" or "a/b/c" (all made)
    for (size_t k = 0; k <= rel.size(); ++k)
      if (k == rel.size() || rel[k] == '/') {
        if (k == 0) continue;
        std::string d = root_ + "/" + rel.substr(0, k);
        if (::mkdir(d.c_str(), 0700) == 0) dirs_.push_back(d);
      }
  }
  // Writes (creating, or truncating in place) rel with the given bytes.
  void write(const std::string& rel, const void* data, size_t n) {
    size_t slash = rel.rfind('/');
    if (slash != std::string::npos) mkdirs(rel.substr(0, slash));
    std::string p = root_ + "/" + rel;
    int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return;  // e.g. the path is a directory made for another file
    const char* c = static_cast<const char*>(data);
    while (n > 0) {
      ssize_t w = ::write(fd, c, n);
      if (w <= 0) break;
      c += w, n -= size_t(w);
    }
    ::close(fd);
    files_.push_back(p);
  }
  void clear() {
    for (auto& f : files_) ::unlink(f.c_str());
    for (size_t k = dirs_.size(); k-- > 0;) ::rmdir(dirs_[k].c_str());
    files_.clear();
    dirs_.clear();
  }

 private:
  std::string root_;
  std::vector<std::string> files_, dirs_;
};

// The fake root is removed when a finding ends the process too (tmpfs is memory).
FakeRoot* g_fake = nullptr;
void remove_fake_root() {
  if (g_fake) g_fake->remove();
}

const Target& target() {
  static const std::vector<Target> all = targets();
  for (const auto& t : all)
    if (std::strcmp(t.name, SYSPROF_STR(SYSPROF_FUZZ_TARGET)) == 0) return t;
  std::fprintf(stderr, "unknown fuzz target %s\n", SYSPROF_STR(SYSPROF_FUZZ_TARGET));
  std::abort();
}

void dump_input(const uint8_t* data, size_t size) {
  std::fprintf(stderr, "input (%zu bytes, C-escaped):\n\"", size);
  for (size_t i = 0; i < size && i < 8192; ++i) {
    uint8_t c = data[i];
    if (c == '\n') std::fputs("\\n\"\n\"", stderr);
    else if (c == '"' || c == '\\') std::fprintf(stderr, "\\%c", c);
    else if (c >= 32 && c < 127) std::fputc(c, stderr);
    else std::fprintf(stderr, "\\x%02x\"\"", c);
  }
  std::fputs(size > 8192 ? "\" ... (truncated)\n" : "\"\n", stderr);
}

void check(const sysprof::RangeRules& rules, const std::vector<std::string>& channels, const double* row, int sample,
           const uint8_t* data, size_t size) {
  for (size_t i = 0; i < rules.size(); ++i) {
    const char* why = rules.violation(i, row[i]);
    if (!why) continue;
    std::fprintf(stderr, "\n=== range violation: target %s, sample %d: %s = %.17g, outside %s\n",
                 SYSPROF_STR(SYSPROF_FUZZ_TARGET), sample, channels[i].c_str(), row[i], why);
    dump_input(data, size);
    remove_fake_root();
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static FakeRoot fake;
  if (!g_fake) {
    g_fake = &fake;
    __sanitizer_set_death_callback(remove_fake_root);
  }
  const Target& t = target();
  std::vector<Section> sections = split(data, size, t);
  if (sections.size() > 64) return 0;  // keeps each input cheap; the parsers see at most this many files
  for (const auto& s : sections) {
    bool ok = false;
    for (const auto& a : t.allowed) ok = ok || matches(a.c_str(), s.path.c_str());
    if (!ok) return 0;
  }
  for (const auto& d : t.dirs) fake.mkdirs(d);
  for (const auto& f : t.base_files) fake.write(f.first, f.second.data(), f.second.size());
  for (const auto& s : sections)
    if (s.reading == 1) fake.write(s.path, s.data, s.size);

  Config cfg;
  cfg.sources.clear();
  t.configure(cfg);
  cfg.proc_root = fake.root() + "/proc";
  cfg.sys_root = fake.root() + "/sys";
  {
    sysprof::ErrorLog log;
    std::vector<std::string> channels;
    sysprof::Collector collector(cfg, channels, log);
    collector.set_range_enforcement(false);
    const sysprof::RangeRules& rules = collector.range_rules();
    if (rules.size() != collector.width() || channels.size() != collector.width()) {
      std::fprintf(stderr, "rules cover %zu of %zu channels\n", rules.size(), collector.width());
      std::abort();
    }
    std::vector<double> row(collector.width());
    // Synthetic CLOCK_MONOTONIC times after the open's own reading: 25 ms covers the trailing-rate
    // window (20 ms), 150 ms starts the process tree's next discovery (every 100 ms).
    int64_t t0 = sysprof::mono_now_ns();
    collector.sample(t0 + 25000000, row.data());
    check(rules, channels, row.data(), 1, data, size);
    for (const auto& s : sections)
      if (s.reading == 2) fake.write(s.path, s.data, s.size);
    collector.sample(t0 + 150000000, row.data());
    check(rules, channels, row.data(), 2, data, size);
    collector.sample(t0 + 175000000, row.data());
    check(rules, channels, row.data(), 3, data, size);
  }
  fake.clear();
  return 0;
}
