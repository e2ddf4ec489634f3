// A /proc or /sys file opened once and re-read from offset 0 on every tick.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace sysprof {

// No /proc or /sys file comes near this (/proc/stat of a 1024-CPU machine is ~150 kB): a file that
// does is not what it claims to be (a bind mount gone wrong, a broken FUSE layer) and is refused.
constexpr size_t kMaxFileBytes = size_t(4) << 20;

// A record-based seq file's read fills the kernel's buffer (at least a page, 4096 bytes or more) with whole
// records and stops when the next record does not fit or when there are no more records (fs/seq_file.c,
// seq_read_iter). No record of the files read this way comes near 512 bytes (a diskstats line with 20
// statistics of 20 digits is ~450), so a read returning fewer than 4096 - 512 bytes ended the records: the
// zero-length read that would confirm EOF (~1 µs each) is skipped. Regular files (fixture trees) end at a
// short read too.
constexpr size_t kSeqShortRead = 4096 - 512;

class ProcFile {
 public:
  ProcFile() = default;
  ~ProcFile();
  ProcFile(const ProcFile&) = delete;
  ProcFile& operator=(const ProcFile&) = delete;

  // Opens the file and reads it once to size the buffer. Returns false with a message on failure;
  // a file that is not a regular file (/dev/zero, a FIFO) or holds kMaxFileBytes or more is refused.
  // single_shot: the kernel renders the whole file in one read (single_open seq files such as
  // /proc/stat, meminfo, loadavg, <pid>/stat), so a short read is the end of the file. Record-based
  // seq files (diskstats, net/dev, vmstat) hand out about a page per read (kSeqShortRead).
  bool open(const std::string& path, std::string& err, bool single_shot);
  // Re-reads the whole file into the buffer. Grows the buffer only if the file outgrew it (rare;
  // never in the steady state), and never past kMaxFileBytes: a file that reaches it fails.
  bool read(std::string& err);
  // Closes the file (the buffer is kept for a later open). A closed file's read() fails.
  void close();
  // Opens the path of the last open() (even a failed one) again and reads it, quietly: no message, and no
  // allocation unless the file grew or the first open failed. For a file that can go and come back (a sysfs attribute of a removed and re-created device:
  // the old descriptor reads ENODEV for good). False, and closed, if it cannot be opened or read.
  bool reopen();
  bool is_open() const { return fd_ >= 0; }

  const char* data() const { return buf_.data(); }
  size_t size() const { return len_; }
  const std::string& path() const { return path_; }

 private:
  // What every read touches first, together; the path (messages only) last.
  int fd_ = -1;
  bool single_shot_ = true;
  std::vector<char> buf_;
  size_t len_ = 0;
  std::string path_;
};

// Reads a whole small file (a children list, /proc/<pid>/cgroup, a sysfs cpu list) into out, with
// the same refusals as ProcFile::open: not a regular file, or kMaxFileBytes or more. False with a
// message naming the file in err.
bool read_small_file(const std::string& path, std::string& out, std::string& err);

}  // namespace sysprof
