// process_tree's record of who held which slot when: one entry per tenure (a pid in a slot, or unslotted),
// with the member's command (comm, from its /proc/<pid>/stat) and the wall times it began and ended. Written
// by the sampling thread on membership changes only (discovery, a member's exit); read from any thread by
// devices() (Sampler.members). Bounded: past kMaxRecords the oldest ended tenures are dropped, and counted.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "sources/source.hpp"

namespace sysprof {

// comm of a /proc/<pid>/stat line: between the first '(' and the last ')' (comm may hold either); empty
// where the line has neither.
inline std::string_view stat_comm(const char* p, size_t n) {
  const char* open = static_cast<const char*>(std::memchr(p, '(', n));
  const char* close = nullptr;
  for (const char* q = p + n; q > p;)
    if (*--q == ')') {
      close = q;
      break;
    }
  if (!open || !close || close < open) return {};
  return std::string_view(open + 1, size_t(close - open - 1));
}

// The value of an integer option "name=value" of cfg.options, clamped to [lo, hi]; dflt where absent or not
// a number.
inline int64_t option_int(const Config& cfg, std::string_view name, int64_t dflt, int64_t lo, int64_t hi) {
  for (const auto& o : cfg.options) {
    if (o.size() <= name.size() || o.compare(0, name.size(), name) != 0 || o[name.size()] != '=') continue;
    char* end = nullptr;
    long long v = std::strtoll(o.c_str() + name.size() + 1, &end, 10);
    if (!end || *end) return dflt;
    return v < lo ? lo : v > hi ? hi : int64_t(v);
  }
  return dflt;
}

class MemberLog {
 public:
  static constexpr size_t kMaxRecords = 4096;
  MemberLog() { records_.reserve(kMaxRecords); }

  // A tenure begins: pid in slot (-1: summed into the totals only). comm fits std::string's inline
  // buffer (the kernel's comm is at most 15 bytes), so this does not allocate either.
  void begin(int64_t pid, int slot, std::string_view comm) {
    int64_t now = wall_now_ns();
    std::lock_guard<std::mutex> lock(mu_);
    if (records_.size() == kMaxRecords) drop_one_ended();
    if (records_.size() == kMaxRecords) {
      ++dropped_;
      return;
    }
    records_.push_back(Record{pid, slot, std::string(comm), now, 0});
  }
  // The open tenure of pid ends (in whichever slot).
  void end(int64_t pid) {
    int64_t now = wall_now_ns();
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = records_.size(); i-- > 0;)
      if (records_[i].pid == pid && records_[i].end_ns == 0) {
        records_[i].end_ns = now;
        return;
      }
  }
  // One map per tenure, oldest first: source, slot, pid, comm, start_ns (wall), end_ns (absent while it lasts);
  // after kMaxRecords a last map {"source", "dropped"} counts the tenures left out.
  std::vector<std::map<std::string, std::string>> describe() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::map<std::string, std::string>> out;
    for (const Record& r : records_) {
      std::map<std::string, std::string> m{{"source", "process_tree"}, {"slot", std::to_string(r.slot)},
                                           {"pid", std::to_string(r.pid)}, {"comm", r.comm},
                                           {"start_ns", std::to_string(r.start_ns)}};
      if (r.end_ns) m["end_ns"] = std::to_string(r.end_ns);
      out.push_back(std::move(m));
    }
    if (dropped_) out.push_back({{"source", "process_tree"}, {"dropped", std::to_string(dropped_)}});
    return out;
  }

 private:
  struct Record {
    int64_t pid;
    int slot;
    std::string comm;
    int64_t start_ns, end_ns;  // wall (CLOCK_REALTIME) ns; end_ns 0: still a member
  };
  void drop_one_ended() {
    for (size_t i = 0; i < records_.size(); ++i)
      if (records_[i].end_ns) {
        records_.erase(records_.begin() + long(i));
        ++dropped_;
        return;
      }
  }
  mutable std::mutex mu_;
  std::vector<Record> records_;
  uint64_t dropped_ = 0;
};

}  // namespace sysprof
