#include "proc_file.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace sysprof {

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
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    err = path + ": " + std::strerror(errno);
    return false;
  }
  buf_.assign(16384, '\0');
  if (!read(err)) return false;
  // Headroom so that a file that grows a little (a new NIC, a hot-plugged disk) needs no allocation.
  if (buf_.size() < 2 * len_ + 4096) buf_.resize(2 * len_ + 4096);
  return true;
}

bool ProcFile::read(std::string& err) {
  if (fd_ < 0) {
    err = path_ + ": not open";
    return false;
  }
  size_t off = 0;
  for (;;) {
    if (off == buf_.size()) buf_.resize(buf_.size() * 2);  // outgrown: only when the file grew
    ssize_t n = ::pread(fd_, buf_.data() + off, buf_.size() - off, off_t(off));
    if (n < 0) {
      if (errno == EINTR) continue;
      err = path_ + ": " + std::strerror(errno);
      len_ = 0;
      return false;
    }
    off += size_t(n);
    if (n == 0 || (single_shot_ && off < buf_.size())) break;
  }
  len_ = off;
  return true;
}

}  // namespace sysprof
