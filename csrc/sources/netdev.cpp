// /proc/net/dev: per-interface byte, packet, error and drop counters.
#include <cstring>

#include "parse/net_dev.hpp"
#include "sources/device_filter.hpp"
#include "sources/file_source.hpp"
#include "sources/registry.hpp"

namespace sysprof {
namespace {

constexpr const char* kFields[] = {"bytes_recv", "bytes_sent", "packets_recv", "packets_sent", "errors_in",
                                   "errors_out", "drops_in", "drops_out", "bytes_recv_per_second",
                                   "bytes_sent_per_second", "packets_recv_per_second", "packets_sent_per_second"};
constexpr size_t kPerNic = sizeof(kFields) / sizeof(kFields[0]);

// The name of a net/dev line (before its last ':', blanks skipped), without parsing its columns; empty if none.
inline std::string_view netdev_name(Cursor c) {
  skip_blanks(c);
  const char* colon = last_colon(c);
  return colon ? std::string_view(c.p, size_t(colon - c.p)) : std::string_view();
}

class NetdevSource final : public FileSource {
 public:
  const char* name() const override { return "net"; }

 protected:
  std::string path(const Config& cfg) const override { return join(cfg.proc_root, "net/dev"); }
  bool single_shot() const override { return false; }

  bool discover(const Config& cfg, std::string& warning) override {
    DeviceRules rules(cfg, "net");  // an interface they leave out (sampling/devices.py) is skipped each tick
    LineReader lines(file_.data(), file_.size());
    Cursor c;
    std::string_view bad;
    while (lines.next(c)) {
      NetDevLine l;
      int r = parse_net_dev_line(c, l);
      if (r < 0) bad = std::string_view(c.p, size_t(c.end - c.p));
      if (r <= 0) continue;
      std::string name(l.name);
      if (rules.keeps(name))
        nics_.push_back(CounterDevice<kNetCounters, NetDevLine>(name));
      else
        skipped_.add(l.name);
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
    for (auto& n : nics_) s->nics_.push_back(CounterDevice<kNetCounters, NetDevLine>(n.name));
    s->skipped_ = skipped_;
    return s;
  }

  bool parse(int64_t mono_ns, double* out, std::string& err) override {
    auto fill = [&](size_t k, const NetDevLine&, const uint64_t* delta, double dt) {
      if (!out) return;
      double* o = out + k * kPerNic;
      for (int i = 0; i < kNetCounters; ++i) o[i] = nics_[k].c[i].total();
      o[8] = rate(delta[kBytesRecv], dt);
      o[9] = rate(delta[kBytesSent], dt);
      o[10] = rate(delta[kPacketsRecv], dt);
      o[11] = rate(delta[kPacketsSent], dt);
    };
    auto gone = [&](size_t k) {
      if (out) fill_nan(out + k * kPerNic, kPerNic);
    };
    auto parse_line = [this](Cursor c, NetDevLine& l) {
      if (!skipped_.empty() && skipped_.contains(netdev_name(c))) return 0;  // left out: not parsed
      return parse_net_dev_line(c, l);
    };
    std::string_view bad = scan_counter_devices<kNetCounters, NetDevLine>(file_, nics_, mono_ns, row_kept_ && out, parse_line, fill, gone);
    if (!bad.empty()) malformed(file_, bad, err);
    return true;
  }

 private:
  std::vector<CounterDevice<kNetCounters, NetDevLine>> nics_;
  SkippedNames skipped_;
};

std::unique_ptr<Source> make_netdev_source() { return std::make_unique<NetdevSource>(); }

}  // namespace

SYSPROF_SOURCE(net, make_netdev_source);

}  // namespace sysprof
