// /proc/loadavg: "1m 5m 15m running/total last_pid".
#include "proc_file.hpp"
#include "scan.hpp"
#include "source.hpp"

namespace sysprof {
namespace {

constexpr const char* kChannels[] = {"load/1m", "load/5m", "load/15m", "load/procs_running", "load/procs_total"};

class LoadavgSource final : public Source {
 public:
  LoadavgSource() { width_ = 5; }
  const char* name() const override { return "load"; }

  bool open(const Config& cfg, std::vector<std::string>& channels, std::string& err) override {
    double out[5];
    if (!file_.open(join(cfg.proc_root, "loadavg"), err, true) || !parse(out, err)) return false;
    for (auto c : kChannels) channels.push_back(c);
    return true;
  }

  std::unique_ptr<Source> clone(const Config& cfg, std::string& err) const override {
    auto s = std::make_unique<LoadavgSource>();
    if (!s->file_.open(join(cfg.proc_root, "loadavg"), err, true)) return nullptr;
    return s;
  }

  bool sample(int64_t, double* out, std::string& err) override {
    if (!file_.read(err) || !parse(out, err)) {
      fill_nan(out, width_);
      return false;
    }
    return true;
  }

 private:
  bool parse(double* out, std::string& err) {
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

  ProcFile file_;
};

}  // namespace

std::unique_ptr<Source> make_loadavg_source() { return std::make_unique<LoadavgSource>(); }

}  // namespace sysprof
