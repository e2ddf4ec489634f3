// gpu: NVML on a reader thread of its own, loaded with dlopen so that nothing links against NVIDIA.
//
// The source the sampler sees. NVML is called on the reader thread only (csrc/gpu/nvml_reader.hpp),
// owned by the source and shared with its clones; sample() on the sampler's thread only copies the
// latest reading the reader published and never waits for NVML:
// - open() waits at most kOpenWaitNs for the device layout (count and handles); without it the source
//   is left out, naming the call that is blocked. With the layout but no first reading yet, the
//   channels are laid out and read NaN until the reader catches up.
// - A reading older than the interval + kLateNs reads NaN; a call in flight for longer than kLateNs
//   is named in err (with how long), and the call's return once it comes back.
// - A clone's sample() (Sampler::sample_now) asks for one fresh reading and waits at most kSyncWaitNs
//   for it, not at all while a call is blocked.
// - The last owner stops the reader and waits at most kExitWaitNs (0 while a call is blocked), then
//   abandons it; the reader shuts NVML down itself once its last call returned.
// What is read per device, and how refusals and lost devices are handled: csrc/gpu/nvml_query.hpp.
#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "gpu/nvml_reader.hpp"
#include "sources/registry.hpp"
#include "sources/source.hpp"

namespace sysprof {
namespace {

using namespace nvml;

// Owns the reader thread; shared by a source and its clones, the last of which lets it go.
struct ReaderOwner {
  std::shared_ptr<Reader> reader;
  std::unique_ptr<std::thread> thread;
  uint64_t generation = fork_generation();
  int64_t wait_ns = kExitWaitNs;
  clockid_t cpu_clock{};  // the reader thread's CPU-time clock (the budget's measure)
  bool have_clock = false;
  mutable std::atomic<int64_t> cpu_ns{0};  // its latest reading (kept once the thread has ended)

  ~ReaderOwner() {
    if (!thread) return;
    if (fork_generation() != generation) {  // a forked child: the thread is the parent's, not here
      (void)thread.release();
      return;
    }
    if (reader->stop(wait_ns))
      thread->join();
    else
      thread->detach();  // stuck in NVML: it shuts NVML down and ends when the call returns
  }
};

class NvmlSource final : public Source {
 public:
  const char* name() const override { return "gpu"; }

  bool open(const Config& cfg, std::vector<std::string>& channels, std::string& err) override {
    auto owner = std::make_shared<ReaderOwner>();
    owner->reader = std::make_shared<Reader>(cfg.interval_ns, parse_selection(cfg.options));
    std::shared_ptr<Reader> r = owner->reader;
    try {
      owner->thread.reset(new std::thread([r] { r->main(); }));
      owner->have_clock = pthread_getcpuclockid(owner->thread->native_handle(), &owner->cpu_clock) == 0;
    } catch (const std::exception& e) {
      err = std::string("GPU reader thread not started: ") + e.what();
      return false;
    }
    owner_ = owner;
    r_ = r.get();
    int phase = r->wait_phase(mono_now_ns() + kOpenWaitNs);
    if (phase == kFailed) {
      err = r->failure();
      return false;
    }
    if (phase == kLoading) {
      err = r->blocked_message(mono_now_ns(), " at open; gpu source left out (its thread ends when the call returns)");
      owner->wait_ns = 0;
      return false;
    }
    std::vector<std::string> names = r->channels();
    width_ = names.size();
    channels.insert(channels.end(), names.begin(), names.end());
    late_ns_ = cfg.interval_ns + kLateNs;
    remember_versions();
    err = r->notes();
    if (phase == kLayout) {
      std::string b = r->blocked_message(mono_now_ns(), " at open; gpu channels read NaN until it returns");
      err = err.empty() ? b : b + "; " + err;
    }
    return true;
  }

  // Shares the reader: a clone never calls NVML. Its sample() asks for a fresh reading and waits
  // for it (bounded), where the original's only takes the latest.
  std::unique_ptr<Source> clone(const Config&, std::string& err) const override {
    if (!owner_) {
      err = "gpu source was not opened";
      return nullptr;
    }
    auto s = std::make_unique<NvmlSource>();
    s->owner_ = owner_;
    s->r_ = r_;
    s->width_ = width_;
    s->late_ns_ = late_ns_;
    s->sync_ = true;
    s->remember_versions();
    return s;
  }

  bool sample(int64_t mono_ns, double* out, std::string& err) override {
    int64_t now = mono_ns;
    if (sync_) {
      now = mono_now_ns();
      r_->request(now);
    } else {
      r_->want(mono_ns);
    }
    int64_t t;
    if (!r_->copy(out, t) || now - t > late_ns_) fill_nan(out, width_);  // late: NaN
    report(now, err);
    return err.empty();
  }

  std::vector<std::map<std::string, std::string>> devices() const override {
    return r_ ? r_->devices() : std::vector<std::map<std::string, std::string>>{};
  }

  // The budget (engine/budget.hpp): the reader thread's CPU, and its interval following the source's.
  int64_t helper_cpu_ns() const override {
    if (!owner_ || !owner_->have_clock || sync_) return 0;  // a clone's reader is the original's: counted there
    int64_t ns = cpu_clock_ns(owner_->cpu_clock, owner_->cpu_ns.load(std::memory_order_relaxed));
    owner_->cpu_ns.store(ns, std::memory_order_relaxed);
    return ns;
  }
  bool helper_follows() const override { return true; }
  void retime(int64_t interval_ns) override {
    if (!r_) return;
    r_->set_interval(interval_ns);
    late_ns_ = interval_ns + kLateNs;
  }

 private:
  void remember_versions() {
    seen_notes_ = r_->notes_version();
    seen_slow_ = r_->slow_version();
    seen_error_ = r_->error_version();
  }

  // err: the call blocked now (rebuilt in 0.1 s steps), else what changed: a slow call that
  // returned, the latest reading's error, the notes.
  void report(int64_t now, std::string& err) {
    const char* what;
    int dev;
    int64_t since;
    if (r_->in_flight(what, dev, since) && now - since > kLateNs) {
      int64_t step = (now - since) / 100000000;
      if (what != shown_what_ || dev != shown_dev_ || since != shown_since_ || step != shown_step_) {
        shown_what_ = what, shown_dev_ = dev, shown_since_ = since, shown_step_ = step;
        char who[160];
        label(who, sizeof who, what, dev);
        std::snprintf(msg_, sizeof msg_, "%s blocked for %.1f s; gpu readings older than %lld ms read NaN", who,
                      double(step) / 10.0, (long long)(late_ns_ / 1000000));
      }
      err.assign(msg_);
      return;
    }
    uint64_t v = r_->slow_version();
    if (v != seen_slow_) {
      seen_slow_ = v;
      err = r_->slow();
      std::string notes = r_->notes();
      if (!notes.empty()) err += "; " + notes;
      return;
    }
    v = r_->error_version();
    if (v != seen_error_) {
      seen_error_ = v;
      err = r_->error();
      if (!err.empty()) return;
    }
    v = r_->notes_version();
    if (v != seen_notes_) {
      seen_notes_ = v;
      err = r_->notes();
    }
  }

  std::shared_ptr<ReaderOwner> owner_;
  Reader* r_ = nullptr;
  bool sync_ = false;
  int64_t late_ns_ = kLateNs;
  uint64_t seen_notes_ = 0, seen_slow_ = 0, seen_error_ = 0;
  const char* shown_what_ = nullptr;
  int shown_dev_ = -1;
  int64_t shown_since_ = 0, shown_step_ = -1;
  char msg_[256] = {};
};

std::unique_ptr<Source> make_nvml_source() { return std::make_unique<NvmlSource>(); }

}  // namespace

SYSPROF_SOURCE(gpu, make_nvml_source);

}  // namespace sysprof
