// /proc/loadavg: "1m 5m 15m running/total last_pid".
#include "parse/loadavg.hpp"
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
    LoadavgSnapshot l;
    if (!parse_loadavg(file_.data(), file_.size(), l, err)) {
      err = file_.path() + ": " + err;
      return false;
    }
    if (!out) return true;
    for (int i = 0; i < 3; ++i) out[i] = l.avg[i];
    out[3] = l.running;
    out[4] = l.total;
    return true;
  }
};

std::unique_ptr<Source> make_loadavg_source() { return std::make_unique<LoadavgSource>(); }

}  // namespace

SYSPROF_SOURCE(load, make_loadavg_source);

}  // namespace sysprof
