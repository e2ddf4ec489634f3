// A /proc or /sys file opened once and re-read from offset 0 on every tick.
#pragma once
#include <string>
#include <vector>

namespace sysprof {

class ProcFile {
 public:
  ProcFile() = default;
  ~ProcFile();
  ProcFile(const ProcFile&) = delete;
  ProcFile& operator=(const ProcFile&) = delete;

  // Opens the file and reads it once to size the buffer. Returns false with a message on failure.
  // single_shot: the kernel renders the whole file in one read (single_open seq files such as
  // /proc/stat, meminfo, loadavg, <pid>/stat), so a short read is the end of the file. Record-based
  // seq files (diskstats, net/dev) hand out about a page per read and are read until EOF.
  bool open(const std::string& path, std::string& err, bool single_shot);
  // Re-reads the whole file into the buffer. Grows the buffer only if the file outgrew it
  // (rare; never in the steady state). Returns false with a message on failure.
  bool read(std::string& err);
  // Closes the file (the buffer is kept for a later open). A closed file's read() fails.
  void close();
  bool is_open() const { return fd_ >= 0; }

  const char* data() const { return buf_.data(); }
  size_t size() const { return len_; }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
  std::vector<char> buf_;
  size_t len_ = 0;
  bool single_shot_ = true;
};

}  // namespace sysprof
