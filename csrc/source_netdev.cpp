// /proc/net/dev: per-interface byte, packet, error and drop counters.
#include <cstring>
#include <string_view>

#include "proc_file.hpp"
#include "scan.hpp"
#include "source.hpp"

namespace sysprof {
namespace {

// Receive: bytes packets errs drop fifo frame compressed multicast; transmit: bytes packets errs
// drop fifo colls carrier compressed.
enum { kBytesRecv, kBytesSent, kPacketsRecv, kPacketsSent, kErrIn, kErrOut, kDropIn, kDropOut, kCounters };
constexpr int kColumn[kCounters] = {0, 8, 1, 9, 2, 10, 3, 11};

constexpr const char* kFields[] = {"bytes_recv", "bytes_sent", "packets_recv", "packets_sent", "errors_in",
                                   "errors_out", "drops_in", "drops_out", "bytes_recv_per_second",
                                   "bytes_sent_per_second", "packets_recv_per_second", "packets_sent_per_second"};
constexpr size_t kPerNic = sizeof(kFields) / sizeof(kFields[0]);

struct Line {
  std::string_view name;
  uint64_t v[kCounters];
};

// The name is everything before the LAST ':' (aliases such as "eth0:1" contain one, and long
// names run into the numbers with no blank after the colon).
bool parse_line(Cursor c, Line& l) {
  const char* colon = nullptr;
  for (const char* q = c.end; q > c.p;)
    if (*--q == ':') {
      colon = q;
      break;
    }
  if (!colon) return false;
  Cursor n{c.p, colon};
  skip_blanks(n);
  if (n.p == colon) return false;
  l.name = std::string_view(n.p, size_t(colon - n.p));
  Cursor v{colon + 1, c.end};
  uint64_t s[16];
  for (int i = 0; i < 16; ++i)
    if (!parse_u64(v, s[i])) return false;
  for (int i = 0; i < kCounters; ++i) l.v[i] = s[kColumn[i]];
  return true;
}

bool is_header(Cursor c) {
  // "Inter-|   Receive ..." and " face |bytes ..." : the only lines with a '|'.
  return std::memchr(c.p, '|', size_t(c.end - c.p)) != nullptr;
}

struct Nic {
  std::string name;
  Counter c[kCounters];
  int64_t last_ns = 0;
  bool seen = false;
};

class NetdevSource final : public Source {
 public:
  const char* name() const override { return "net"; }

  bool open(const Config& cfg, std::vector<std::string>& channels, std::string& err) override {
    if (!file_.open(join(cfg.proc_root, "net/dev"), err, false)) return false;
    LineReader lines(file_.data(), file_.size());
    Cursor c;
    std::string bad;
    while (lines.next(c)) {
      Line l;
      if (c.p == c.end || is_header(c)) continue;
      if (!parse_line(c, l)) {
        if (bad.empty()) bad = std::string(c.p, c.end);
        continue;
      }
      nics_.push_back(Nic{std::string(l.name), {}, 0, false});
    }
    if (nics_.empty() && !bad.empty()) {
      err = file_.path() + ": no parsable line; first malformed: '" + bad + "'";
      return false;
    }
    layout(channels);
    if (!update(mono_now_ns(), nullptr, err)) return false;
    if (!bad.empty()) err = file_.path() + ": malformed line skipped: '" + bad + "'";
    return true;
  }

  std::unique_ptr<Source> clone(const Config& cfg, std::string& err) const override {
    auto s = std::make_unique<NetdevSource>();
    for (auto& n : nics_) s->nics_.push_back(Nic{n.name, {}, 0, false});
    std::vector<std::string> unused;
    s->layout(unused);
    if (!s->file_.open(join(cfg.proc_root, "net/dev"), err, false) || !s->update(mono_now_ns(), nullptr, err))
      return nullptr;
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
    for (auto& n : nics_)
      for (auto f : kFields) channels.push_back("net/" + n.name + "/" + f);
    width_ = nics_.size() * kPerNic;
  }

  bool update(int64_t mono_ns, double* out, std::string& err) {
    if (!file_.read(err)) return false;
    for (auto& n : nics_) n.seen = false;
    const char* bad = nullptr;
    const char* bad_end = nullptr;
    size_t hint = 0;
    LineReader lines(file_.data(), file_.size());
    Cursor c;
    while (lines.next(c)) {
      Line l;
      if (c.p == c.end || is_header(c)) continue;
      if (!parse_line(c, l)) {
        bad = c.p, bad_end = c.end;
        continue;
      }
      Nic* n = find_device(nics_, l.name, hint);
      if (!n || n->seen) continue;
      n->seen = true;
      bool had_baseline = n->c[0].valid;
      double dt = had_baseline ? double(mono_ns - n->last_ns) * 1e-9 : 0.0;
      uint64_t delta[kCounters];
      for (int i = 0; i < kCounters; ++i) delta[i] = n->c[i].update(l.v[i]);
      n->last_ns = mono_ns;
      if (!out) continue;
      double* o = out + size_t(n - nics_.data()) * kPerNic;
      for (int i = 0; i < kCounters; ++i) o[i] = n->c[i].total();
      o[8] = rate(delta[kBytesRecv], dt);
      o[9] = rate(delta[kBytesSent], dt);
      o[10] = rate(delta[kPacketsRecv], dt);
      o[11] = rate(delta[kPacketsSent], dt);
    }
    for (size_t k = 0; k < nics_.size(); ++k) {
      if (nics_[k].seen) continue;
      for (auto& cn : nics_[k].c) cn.valid = false;  // gone: re-prime if it comes back
      if (out) fill_nan(out + k * kPerNic, kPerNic);
    }
    if (bad) err = file_.path() + ": malformed line skipped: '" + std::string(bad, bad_end) + "'";
    return true;
  }

  ProcFile file_;
  std::vector<Nic> nics_;
};

}  // namespace

std::unique_ptr<Source> make_netdev_source() { return std::make_unique<NetdevSource>(); }

}  // namespace sysprof
