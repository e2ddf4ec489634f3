// /proc/net/dev: per-interface byte, packet, error and drop counters.
#include <cstring>

#include "sources/file_source.hpp"
#include "sources/registry.hpp"

namespace sysprof {
namespace {

// Columns: receive bytes packets errs drop fifo frame compressed multicast, then transmit bytes
// packets errs drop fifo colls carrier compressed.
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
// names run into the numbers with no blank after the colon). The two header lines have no ':'
// but a '|'.
int parse_line(Cursor c, Line& l) {
  if (c.done()) return 0;
  const char* colon = static_cast<const char*>(memrchr(c.p, ':', size_t(c.end - c.p)));
  if (!colon) return std::memchr(c.p, '|', size_t(c.end - c.p)) ? 0 : -1;
  Cursor n{c.p, colon};
  skip_blanks(n);
  if (n.p == colon) return -1;
  l.name = std::string_view(n.p, size_t(colon - n.p));
  Cursor v{colon + 1, c.end};
  uint64_t s[16];  // the 16 columns net-procfs.c prints; any past them (a future kernel) are not read
  for (int i = 0; i < 16; ++i)
    if (!parse_u64(v, s[i])) return -1;
  for (int i = 0; i < kCounters; ++i) l.v[i] = s[kColumn[i]];
  return 1;
}

class NetdevSource final : public FileSource {
 public:
  const char* name() const override { return "net"; }

 protected:
  std::string path(const Config& cfg) const override { return join(cfg.proc_root, "net/dev"); }
  bool single_shot() const override { return false; }

  bool discover(const Config&, std::string& warning) override {
    LineReader lines(file_.data(), file_.size());
    Cursor c;
    std::string_view bad;
    while (lines.next(c)) {
      Line l;
      int r = parse_line(c, l);
      if (r < 0) bad = std::string_view(c.p, size_t(c.end - c.p));
      if (r > 0) nics_.push_back(CounterDevice<kCounters>{std::string(l.name), {}, 0, false});
    }
    if (!bad.empty()) malformed(file_, bad, warning);
    return !(nics_.empty() && !bad.empty());
  }

  void layout(std::vector<std::string>& channels) override {
    for (auto& n : nics_)
      for (auto f : kFields) channels.push_back("net/" + n.name + "/" + f);
    width_ = nics_.size() * kPerNic;
  }

  std::unique_ptr<FileSource> fresh() const override {
    auto s = std::make_unique<NetdevSource>();
    for (auto& n : nics_) s->nics_.push_back(CounterDevice<kCounters>{n.name, {}, 0, false});
    return s;
  }

  bool parse(int64_t mono_ns, double* out, std::string& err) override {
    auto fill = [&](size_t k, const Line&, const uint64_t* delta, double dt) {
      if (!out) return;
      double* o = out + k * kPerNic;
      for (int i = 0; i < kCounters; ++i) o[i] = nics_[k].c[i].total();
      o[8] = rate(delta[kBytesRecv], dt);
      o[9] = rate(delta[kBytesSent], dt);
      o[10] = rate(delta[kPacketsRecv], dt);
      o[11] = rate(delta[kPacketsSent], dt);
    };
    auto gone = [&](size_t k) {
      if (out) fill_nan(out + k * kPerNic, kPerNic);
    };
    std::string_view bad = scan_counter_devices<kCounters, Line>(file_, nics_, mono_ns, parse_line, fill, gone);
    if (!bad.empty()) malformed(file_, bad, err);
    return true;
  }

 private:
  std::vector<CounterDevice<kCounters>> nics_;
};

std::unique_ptr<Source> make_netdev_source() { return std::make_unique<NetdevSource>(); }

}  // namespace

SYSPROF_SOURCE(net, make_netdev_source);

}  // namespace sysprof
