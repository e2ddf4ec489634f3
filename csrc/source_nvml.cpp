// GPU source placeholder: replaced by the NVML reader (issue 4).
#include "source.hpp"

namespace sysprof {
namespace {
class NvmlSource final : public Source {
 public:
  const char* name() const override { return "gpu"; }
  bool open(const Config&, std::vector<std::string>&, std::string& err) override {
    err = "NVML reader not built";
    return false;
  }
  std::unique_ptr<Source> clone(const Config&, std::string& err) const override {
    err = "NVML reader not built";
    return nullptr;
  }
  bool sample(int64_t, double*, std::string&) override { return false; }
};
}  // namespace
std::unique_ptr<Source> make_nvml_source() { return std::make_unique<NvmlSource>(); }
}  // namespace sysprof
