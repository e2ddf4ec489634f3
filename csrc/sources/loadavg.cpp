// /proc/loadavg: "1m 5m 15m running/total last_pid".
#include "sources/file_source.hpp"
#include "sources/registry.hpp"

namespace sysprof {
namespace {

constexpr const char* kChannels[] = {"load/1m", "load/5m", "load/15m", "load/procs_running", "load/procs_total"};

class LoadavgSource final : public FileSource {
 public:
  LoadavgSource() { width_ = 5; }
  const char* name() const override { return "load"; }

 protected:
  std::string path(const Config& cfg) const override { return join(cfg.proc_root, "loadavg"); }
  void layout(std::vector<std::string>& channels) override {
    for (auto c : kChannels) channels.push_back(c);
  }
  std::unique_ptr<FileSource> fresh() const override { return std::make_unique<LoadavgSource>(); }

  bool parse(int64_t, double* out, std::string& err) override {
    double scratch[5];
    if (!out) out = scratch;
    Cursor c{file_.data(), file_.data() + file_.size()};
    double running, total;
    bool ok = parse_decimal(c, out[0]) && parse_decimal(c, out[1]) && parse_decimal(c, out[2]) &&
              parse_digits_double(c, running) && c.p < c.end && *c.p++ == '/' && parse_digits_double(c, total);
    if (!ok) {
      err = file_.path() + ": malformed: '" + std::string(file_.data(), file_.size()) + "'";
      return false;
    }
    out[3] = running;
    out[4] = total;
    return true;
  }
};

std::unique_ptr<Source> make_loadavg_source() { return std::make_unique<LoadavgSource>(); }

}  // namespace

SYSPROF_SOURCE(load, make_loadavg_source);

}  // namespace sysprof
