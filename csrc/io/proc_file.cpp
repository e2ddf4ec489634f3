#include "io/proc_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/scan.hpp"
#include "sources/source.hpp"

namespace sysprof {
namespace {

// Opens a file for reading. O_NONBLOCK so that a FIFO cannot block the open; anything but a
// regular file (a device such as /dev/zero, a FIFO, a socket) is refused before the first read.
// err == nullptr: no message (nothing allocated), for the quiet retries of ProcFile::reopen.
int open_regular(const std::string& path, std::string* err) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (err) *err = path + ": " + std::strerror(errno);
    return -1;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (err) *err = path + ": not a regular file";
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string too_large(const std::string& path) {
  return path + ": " + std::to_string(kMaxFileBytes >> 20) + " MiB or more, not a /proc or /sys file";
}

// The failures of ProcFile::read (why: nullptr for a file that reached kMaxFileBytes), out of line: its loop,
// run every tick, stays a few lines of code.
__attribute__((cold, noinline)) bool read_failed(const std::string& path, const char* why, std::string& err) {
  err = why ? path + ": " + why : too_large(path);
  return false;
}

}  // namespace

ProcFile::~ProcFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ProcFile::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  len_ = 0;
}

bool ProcFile::open(const std::string& path, std::string& err, bool single_shot) {
  if (fd_ >= 0) ::close(fd_);
  path_ = path;
  single_shot_ = single_shot;
  fd_ = open_regular(path, &err);
  if (fd_ < 0) return false;
  buf_.assign(16384, '\0');
  if (!read(err)) return false;
  // Headroom so that a file that grows a little (a new NIC, a hot-plugged disk) needs no allocation.
  if (buf_.size() < 2 * len_ + 4096) buf_.resize(std::min(2 * len_ + 4096, kMaxFileBytes));
  return true;
}

bool ProcFile::reopen() {
  if (path_.empty()) return false;  // never opened
  if (buf_.empty()) buf_.assign(16384, '\0');  // the first open failed
  if (fd_ >= 0) ::close(fd_);
  len_ = 0;
  fd_ = open_regular(path_, nullptr);
  if (fd_ < 0) return false;
  std::string err;  // allocates only if the reopened file fails to read
  if (read(err)) return true;
  close();
  return false;
}

bool ProcFile::read(std::string& err) {
  if (__builtin_expect(fd_ < 0, 0))
    return read_failed(path_, "not open", err);
  size_t off = 0;
  for (;;) {
    if (__builtin_expect(off == buf_.size(), 0)) {  // outgrown: only when the file grew
      if (buf_.size() >= kMaxFileBytes) {
        len_ = 0;
        return read_failed(path_, nullptr, err);
      }
      buf_.resize(std::min(buf_.size() * 2, kMaxFileBytes));
    }
    size_t want = buf_.size() - off;
    ssize_t n = ::pread(fd_, buf_.data() + off, want, off_t(off));
    if (__builtin_expect(n < 0, 0)) {
      if (errno == EINTR) continue;
      len_ = 0;
      return read_failed(path_, std::strerror(errno), err);
    }
    off += size_t(n);
    if (n == 0 || (single_shot_ && off < buf_.size()) || (want >= 4096 && size_t(n) < kSeqShortRead)) break;
  }
  len_ = off;
  return true;
}

bool read_small_file(const std::string& path, std::string& out, std::string& err) {
  out.clear();
  int fd = open_regular(path, &err);
  if (fd < 0) return false;
  char chunk[4096];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) err = path + ": " + std::strerror(errno);
    if (n > 0 && out.size() + size_t(n) >= kMaxFileBytes) {
      err = too_large(path);
      n = -1;
    }
    if (n <= 0) {
      ::close(fd);
      if (n < 0) out.clear();
      return n == 0;
    }
    out.append(chunk, size_t(n));
  }
}

unsigned online_cpus(const Config& cfg) {
  std::string buf, err;
  size_t n = 0;
  if (read_small_file(join(cfg.sys_root, "devices/system/cpu/online"), buf, err))
    n = for_each_cpu_in_list(buf.data(), buf.size(), [](long) {});
  if (n == 0 && read_small_file(join(cfg.proc_root, "stat"), buf, err)) {
    LineReader lines(buf.data(), buf.size());
    Cursor c;
    while (lines.next(c))
      if (c.end - c.p > 3 && std::memcmp(c.p, "cpu", 3) == 0 && is_digit(c.p[3])) ++n;
  }
  if (n == 0) {
    long s = sysconf(_SC_NPROCESSORS_ONLN);
    n = s > 0 ? size_t(s) : 1;
  }
  return unsigned(n > 0xFFFFFFu ? 0xFFFFFFu : n);
}

unsigned affinity_cpus(int64_t pid, unsigned online) {
  unsigned n = 0;
#ifdef __linux__
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(pid_t(pid), sizeof set, &set) == 0) n = unsigned(CPU_COUNT(&set));
#else
  (void)pid;
#endif
  return n > 0 && n < online ? n : online;
}

}  // namespace sysprof
