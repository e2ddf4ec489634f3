// /proc/pressure/{cpu,memory,io}: pressure stall information (Documentation/accounting/psi.rst).
//   some avg10=0.00 avg60=0.00 avg300=0.00 total=0
//   full avg10=0.00 avg60=0.00 avg300=0.00 total=0
// avgN are percents over N-second windows; total is cumulative stall time in microseconds. Its rate
// is the share of wall time stalled over one tick, far finer than the 10 s window. cpu has a full
// line only since 5.13 (and it reads 0 system-wide).
#include "parse/psi.hpp"
#include "sources/file_source.hpp"
#include "sources/registry.hpp"
#include "sources/source_group.hpp"

namespace sysprof {
namespace {

constexpr const char* kResources[] = {"cpu", "memory", "io"};
constexpr const char* kKinds[] = {"some", "full"};
constexpr const char* kFields[] = {"avg10_percent", "avg60_percent", "avg300_percent", "seconds_total",
                                   "seconds_per_second"};
constexpr size_t kPerKind = 5;

class PsiFile final : public FileSource {
 public:
  explicit PsiFile(const char* resource) : resource_(resource) { width_ = 2 * kPerKind; }
  const char* name() const override { return "pressure"; }

  bool open(const Config& cfg, std::vector<std::string>& channels, std::string& err) override {
    if (FileSource::open(cfg, channels, err)) return true;
    // Not even read: the file is absent or refuses reads (EOPNOTSUPP when booted with psi=0).
    if (!parsed_) err += " (no PSI: kernel before 4.20, CONFIG_PSI=n or psi=0)";
    return false;
  }

 protected:
  std::string path(const Config& cfg) const override {
    return join(cfg.proc_root, (std::string("pressure/") + resource_).c_str());
  }
  void layout(std::vector<std::string>& channels) override {
    for (auto kind : kKinds)
      for (auto f : kFields) channels.push_back(std::string("pressure/") + resource_ + "/" + kind + "_" + f);
  }
  std::unique_ptr<FileSource> fresh() const override { return std::make_unique<PsiFile>(resource_); }

  bool parse(int64_t mono_ns, double* out, std::string& err) override {
    parsed_ = true;
    double scratch[2 * kPerKind];
    if (!out) out = scratch;
    bool seen[2] = {false, false};
    std::string_view bad;
    LineReader lines(file_.data(), file_.size());
    Cursor c;
    PsiLine l;
    while (lines.next(c)) {
      int r = parse_psi_line(c, l);
      int k = l.kind;
      if (r <= 0 || seen[k]) {
        if (c.p != c.end) bad = std::string_view(c.p, size_t(c.end - c.p));
        continue;
      }
      seen[k] = true;
      double* o = out + size_t(k) * kPerKind;
      // Stall time accrues in scheduler-tick steps: rate over a trailing window, a share of wall
      // time and so at most 1.
      double share = total_[k].update(mono_ns, l.total_us) / 1e6;
      for (int a = 0; a < 3; ++a) o[a] = l.avg[a] <= 100.0 ? l.avg[a] : kNaN;  // a percent: above 100 is corrupt
      o[3] = double(l.total_us) / 1e6;  // the double nearest the exact seconds
      o[4] = share > 1.0 ? 1.0 : share;
    }
    for (int k = 0; k < 2; ++k)
      if (!seen[k]) {  // no full line for cpu before 5.13
        total_[k].reset();
        fill_nan(out + size_t(k) * kPerKind, kPerKind);
      }
    if (!bad.empty()) malformed(file_, bad, err);
    if (!seen[0]) {
      if (bad.empty()) err = file_.path() + ": no 'some' line";
      return false;
    }
    return true;
  }

 private:
  const char* resource_;
  TrailingRate total_[2];
  bool parsed_ = false;
};

std::unique_ptr<Source> make_pressure_source() {
  return std::make_unique<SourceGroup>("pressure", [](const Config&, std::vector<std::unique_ptr<Source>>& parts,
                                                      std::string&) {
    for (auto r : kResources) parts.push_back(std::make_unique<PsiFile>(r));
    return true;
  });
}

}  // namespace

SYSPROF_SOURCE(pressure, make_pressure_source);

}  // namespace sysprof
