// One source made of several files that may each be missing (the three PSI resources, the cgroup
// controller files). Each file is a FileSource of its own, so every parser stays one class per
// kernel file; the group gives them one name, one slice of the row and one entry in errors.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sources/source.hpp"

namespace sysprof {

class SourceGroup final : public Source {
 public:
  // Builds the parts for a configuration (e.g. after finding the cgroup's directory). False with a
  // reason: the whole source is unusable (cgroup v1). True: a non-empty string is context put before
  // the parts' notes (the cgroup's directory, which they then need not repeat).
  using Build = std::function<bool(const Config&, std::vector<std::unique_ptr<Source>>&, std::string&)>;

  SourceGroup(const char* name, Build build) : name_(name), build_(std::move(build)) {}
  const char* name() const override { return name_; }

  // A part that fails to open leaves out its channels and adds its reason to err; the group is
  // usable while at least one part is.
  bool open(const Config& cfg, std::vector<std::string>& channels, std::string& err) override {
    std::vector<std::unique_ptr<Source>> candidates;
    std::string context;
    if (!build_(cfg, candidates, context)) {
      err = context;
      return false;
    }
    std::string notes;
    for (auto& src : candidates) {
      size_t before = channels.size();
      std::string e;
      bool ok = src->open(cfg, channels, e);
      if (!ok) channels.resize(before);
      if (!e.empty()) notes += (notes.empty() ? "" : "; ") + e;
      if (!ok) continue;
      width_ += src->width();
      parts_.push_back(Part{std::move(src), parts_.empty() ? 0 : parts_.back().end()});
    }
    err = notes.empty() ? notes : context + notes;
    return !parts_.empty();
  }

  // All parts or nothing, as for a single file: a part whose file vanished since open fails the clone.
  std::unique_ptr<Source> clone(const Config& cfg, std::string& err) const override {
    auto g = std::make_unique<SourceGroup>(name_, build_);
    for (const Part& p : parts_) {
      std::unique_ptr<Source> c = p.src->clone(cfg, err);
      if (!c) return nullptr;
      g->parts_.push_back(Part{std::move(c), p.offset});
    }
    g->width_ = width_;
    return g;
  }

  bool sample(int64_t mono_ns, double* out, std::string& err) override {
    bool all_ok = true;
    for (Part& p : parts_) {
      scratch_.clear();  // keeps its capacity: no allocation unless a part reports something
      if (!p.src->sample(mono_ns, out + p.offset, scratch_)) all_ok = false;
      if (!scratch_.empty()) err += (err.empty() ? "" : "; ") + scratch_;
    }
    return all_ok;
  }

 private:
  struct Part {
    std::unique_ptr<Source> src;
    size_t offset;  // of its slice within this source's
    size_t end() const { return offset + src->width(); }
  };

  const char* name_;
  Build build_;
  std::vector<Part> parts_;
  std::string scratch_;
};

}  // namespace sysprof
