// gpu: the reader thread and its published reading (see nvml_reader.hpp).
#include "gpu/nvml_reader.hpp"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "gpu/nvml_gpm.hpp"
#include "sources/source.hpp"

namespace sysprof {
namespace nvml {

// ---- Published

void Published::init(size_t width) {
  for (Slot& s : slots_) s.v.reset(new std::atomic<double>[width]());
  width_ = width;
}

void Published::publish(int64_t t, const double* v) {
  int w = latest_.load(std::memory_order_relaxed) ^ 1;
  Slot& s = slots_[w];
  uint64_t q = s.seq.load(std::memory_order_relaxed);
  s.seq.store(q + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.t.store(t, std::memory_order_relaxed);
  for (size_t i = 0; i < width_; ++i) s.v[i].store(v[i], std::memory_order_relaxed);
  s.seq.store(q + 2, std::memory_order_release);
  latest_.store(w, std::memory_order_release);
}

bool Published::copy(double* out, int64_t& t) const {
  for (int attempt = 0; attempt < 4; ++attempt) {
    const Slot& s = slots_[latest_.load(std::memory_order_acquire)];
    uint64_t q = s.seq.load(std::memory_order_acquire);
    if (q & 1) continue;
    t = s.t.load(std::memory_order_relaxed);
    for (size_t i = 0; i < width_; ++i) out[i] = s.v[i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.seq.load(std::memory_order_relaxed) == q) return true;
  }
  return false;
}

void label(char* buf, size_t cap, const char* what, int dev) {
  if (dev >= 0)
    std::snprintf(buf, cap, "gpu/%d: %s", dev, what);
  else
    std::snprintf(buf, cap, "%s", what);
}

namespace {

std::chrono::steady_clock::time_point time_point(int64_t mono_ns) {
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(mono_ns));
}
std::string cstr(const char* p, size_t cap) { return std::string(p, strnlen(p, cap)); }
std::map<std::string, std::string> undescribed(unsigned index) {
  return {{"index", std::to_string(index)}, {"name", ""}, {"uuid", ""}, {"pci_bus_id", ""}};
}

}  // namespace

// ---- the reader thread

Reader::Reader(int64_t interval_ns, Selection sel)
    : interval_(std::max<int64_t>(interval_ns, 1)), keep_(2 * interval_ + kLateNs), sel_(std::move(sel)) {}

void Reader::main() {
  sigset_t all;  // process signals go to other threads, not to one that may sit in the driver
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  pthread_setname_np(pthread_self(), "sysprof-nvml");
  try {
    if (discover() && describe()) {
      events_.open(lib_, gpus_, *this);
      samples_open(lib_, gpus_, samples_);
      read_all(mono_now_ns());  // rates and the energy power start from here
      set_phase(kReady);
      loop();
    }
  } catch (const std::exception& e) {
    fail(std::string("GPU reader stopped: ") + e.what());
  } catch (...) {
    fail("GPU reader stopped by an unknown exception");
  }
  releasing_ = true;  // from here on only calls that give something back, stopped or not
  samples_close(samples_);
  if (lib_.initialized)
    for (Gpu& g : gpus_) gpm_close(lib_, g, *this);  // GPM samples before the XID waiter may shut NVML down
  if (events_.close(kEventStopWaitNs, *this)) {  // else the XID thread shuts NVML down once its wait returns
    if (lib_.initialized) timed("nvmlShutdown", -1, [&] { return lib_.shutdown(); });  // no other call can be in flight
    unload_library(lib_);
  }
  std::lock_guard<std::mutex> g(mu_);
  done_ = true;
  state_cv_.notify_all();
  published_cv_.notify_all();
}

// Every NVML call goes through here, so that the other threads can see what is in flight. Once stop()
// was called no new call is made but the releases of the teardown in main(): any other answers
// UNINITIALIZED unasked, so a slow driver is not asked for the rest of a reading, discovery or
// description (seconds, at a slow call per metric). The check and the in-flight mark are one step
// under mu_, as stop()'s flag is set: a call it did not see in flight is never begun after it.
Return Reader::call(const char* what, int dev, Call c) {
  int64_t since;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (quit_.load(std::memory_order_relaxed) && !releasing_) return kErrorUninitialized;
    std::atomic_thread_fence(std::memory_order_release);  // see in_flight(): call_since_ is the sequence
    call_what_.store(what, std::memory_order_relaxed);
    call_dev_.store(dev, std::memory_order_relaxed);
    since = mono_now_ns();
    call_since_.store(since, std::memory_order_release);
  }
  Return r = c.fn(c.ctx);
  int64_t took = mono_now_ns() - since;
  call_since_.store(0, std::memory_order_release);
  if (took > kLateNs) {  // rare: say that it came back, and after how long
    char buf[160], secs[48];
    label(buf, sizeof buf, what, dev);
    std::snprintf(secs, sizeof secs, " returned after %.1f s", double(took / 100000000) / 10.0);
    std::lock_guard<std::mutex> g(msg_mu_);
    slow_ = std::string(buf) + secs;
    slow_version_.fetch_add(1, std::memory_order_release);
  }
  return r;
}

bool Reader::discover() {
  std::string err;
  bool loaded = false;
  timed("dlopen", -1, [&] {
    loaded = load_library(lib_, err);
    return kSuccess;
  });
  if (!loaded) return fail(err), false;
  Return r = timed("nvmlInit_v2", -1, [&] { return lib_.init(); });
  if (r != kSuccess) return fail(std::string("nvmlInit_v2 failed: ") + return_name(r) + init_hint(r)), false;
  lib_.initialized = true;
  unsigned count = 0;
  r = timed("nvmlDeviceGetCount_v2", -1, [&] { return lib_.get_count(&count); });
  if (r != kSuccess) return fail(std::string("nvmlDeviceGetCount_v2 failed: ") + return_name(r)), false;
  if (count == 0) return fail("NVML found no GPU"), false;
  if (!open_devices(count)) return false;
  size_t width = 0;
  // the laid-out metrics, then the XIDs', then the reading's time
  for (const Gpu& g : gpus_) width += g.chans.size() + kEventChannels + 1;
  published_.init(width);
  scratch_.assign(width, kNaN);
  error_.reserve(256);
  tick_error_.reserve(256);
  set_phase(kLayout);
  return true;
}

// The handles of the devices this process may use and was asked for (sel_), in that order; the others are
// left out, with a note for those it may not use.
bool Reader::open_devices(unsigned count) {
  std::vector<std::pair<unsigned, Device>> all;
  std::string skipped;
  for (unsigned i = 0; i < count; ++i) {
    if (quit_.load(std::memory_order_relaxed)) return false;
    Device h = nullptr;
    Return r = timed("nvmlDeviceGetHandleByIndex_v2", int(i), [&] { return lib_.get_handle(i, &h); });
    if (r != kSuccess) {  // e.g. NO_PERMISSION for a GPU this container may not see
      skipped += (skipped.empty() ? "" : "; ") + std::string("gpu/") + std::to_string(i) +
                 ": nvmlDeviceGetHandleByIndex_v2 " + return_name(r) + "; left out";
      continue;
    }
    all.emplace_back(i, h);
  }
  std::vector<size_t> keep = select_devices(lib_, all, sel_, *this);
  if (quit_.load(std::memory_order_relaxed)) return false;
  if (keep.empty()) {
    std::string why = all.empty() ? (skipped.empty() ? "NVML found no usable GPU" : skipped)
                                  : (sel_.cuda ? "no GPU is visible under CUDA_VISIBLE_DEVICES"
                                               : "no GPU matches the gpus selection");
    std::string notes = this->notes();
    return fail(notes.empty() ? why : why + " (" + notes + ")"), false;
  }
  gpus_.reserve(keep.size());  // never reallocated: other threads read the layout from kLayout on
  for (size_t k : keep) {
    gpus_.emplace_back();
    Gpu& g = gpus_.back();
    g.index = all[k].first;
    g.handle = all[k].second;
    fill_nan(g.held, kPerDevice);
    refuse_missing(lib_, g, *this);
    gpm_open(lib_, g, *this);
    for (int c = 0; c < kPerDevice; ++c)
      if (c < kFirstGpm || g.gpm) g.chans.push_back(c);
  }
  if (!skipped.empty()) note(skipped);
  return true;
}

bool Reader::describe() {
  for (Gpu& g : gpus_) {
    if (quit_.load(std::memory_order_relaxed)) return false;
    const int i = int(g.index);
    std::map<std::string, std::string> d = undescribed(g.index);
    char buf[kNameBufferSize > kUuidBufferSize ? kNameBufferSize : kUuidBufferSize];
    if (lib_.get_name && timed("nvmlDeviceGetName", i, [&] { return lib_.get_name(g.handle, buf, kNameBufferSize); }) == kSuccess)
      d["name"] = cstr(buf, kNameBufferSize);
    if (lib_.get_uuid && timed("nvmlDeviceGetUUID", i, [&] { return lib_.get_uuid(g.handle, buf, kUuidBufferSize); }) == kSuccess)
      d["uuid"] = cstr(buf, kUuidBufferSize);
    PciInfo pci;
    std::memset(&pci, 0, sizeof pci);
    if (lib_.get_pci && timed("nvmlDeviceGetPciInfo_v3", i, [&] { return lib_.get_pci(g.handle, &pci); }) == kSuccess)
      d["pci_bus_id"] = cstr(pci.busId, sizeof pci.busId);
    std::vector<std::string> migs;
    if (mig_instances(lib_, g.handle, i, *this, migs)) {  // MIG on: the parent's metrics, its instances listed
      std::string list;
      for (const std::string& u : migs) list += (list.empty() ? "" : ",") + u;
      d["mig_instances"] = list;
    }
    if (sel_.cuda) d["cuda_index"] = std::to_string(&g - gpus_.data());
    g.info = std::move(d);
  }
  return !quit_.load(std::memory_order_relaxed);
}

// Reads every interval while the sampler thread wants readings, once per request(), else sleeps.
void Reader::loop() {
  std::unique_lock<std::mutex> lk(mu_);
  int64_t next = kNever;
  for (;;) {
    if (quit_.load(std::memory_order_relaxed)) return;
    int64_t now = mono_now_ns();
    if (!wait_turn(lk, now, next)) continue;
    last_start_ = now;
    lk.unlock();
    read_all(now);
    lk.lock();
    if (waiters_) published_cv_.notify_all();
    next = next + interval_ > now ? next + interval_ : now + interval_;  // absolute deadlines; none made up
  }
}

// True: read now (a request, or the next deadline of a wanted series). Else it waited (until the
// deadline, or asleep until want(), request() or stop()) and the caller looks again.
bool Reader::wait_turn(std::unique_lock<std::mutex>& lk, int64_t now, int64_t next) {
  if (sync_want_ > last_start_) return true;
  if (now - demand_.load(std::memory_order_seq_cst) < keep_) {
    if (now >= next) return true;
    cv_.wait_until(lk, time_point(next));
    return false;
  }
  idle_.store(true, std::memory_order_seq_cst);
  if (mono_now_ns() - demand_.load(std::memory_order_seq_cst) >= keep_ && !quit_.load(std::memory_order_relaxed) &&
      sync_want_ <= last_start_)
    cv_.wait(lk);
  idle_.store(false, std::memory_order_seq_cst);
  return false;
}

// One reading of every device, published. Allocates nothing unless an error is new.
void Reader::read_all(int64_t now) {
  tick_error_.clear();
  double* o = scratch_.data();
  for (size_t i = 0; i < gpus_.size(); ++i) {  // every channel into g.full, then the device's laid-out ones in order
    Gpu& g = gpus_[i];
    int64_t w0 = wall_now_ns();
    read_device(lib_, g, now, g.full, tick_error_, *this);
    int64_t w1 = wall_now_ns();
    for (int c : g.chans) *o++ = g.full[c];
    if (g.lost)
      fill_nan(o, kEventChannels);  // a lost device's channels all read NaN
    else
      events_.values(i, o);
    o += kEventChannels;
    // reading_time_seconds: the middle of this device's calls (wall clock, the rows' clock), so a trace can
    // stamp the values at the time they were true, not at the row that found them (up to an interval + kLateNs
    // later, more when the reader lags)
    *o++ = g.lost ? kNaN : double(w0 + (w1 - w0) / 2) * 1e-9;
  }
  std::string xid_note;
  if (events_.take_note(xid_note)) note(xid_note);
  published_.publish(now, scratch_.data());
  samples_read(lib_, gpus_, now, samples_, *this);  // after the publish: never delays a reading
  if (tick_error_ != last_tick_error_) {
    last_tick_error_ = tick_error_;
    std::lock_guard<std::mutex> g(msg_mu_);
    error_ = tick_error_;
    error_version_.fetch_add(1, std::memory_order_release);
  }
}

void Reader::set_phase(int p) {
  std::lock_guard<std::mutex> g(mu_);
  phase_.store(p, std::memory_order_release);
  state_cv_.notify_all();
}

// Before the layout: open() reports `msg` and leaves the source out. After: a note.
void Reader::fail(const std::string& msg) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (phase_.load(std::memory_order_relaxed) == kLoading) {
      failure_ = msg;
      phase_.store(kFailed, std::memory_order_release);
      state_cv_.notify_all();
      return;
    }
  }
  note(msg);
}

void Reader::note(const std::string& msg) {
  std::lock_guard<std::mutex> g(msg_mu_);
  if (!notes_.empty()) notes_ += "; ";
  notes_ += msg;
  notes_version_.fetch_add(1, std::memory_order_release);
}

// ---- any thread

int Reader::wait_phase(int64_t deadline) {
  std::unique_lock<std::mutex> lk(mu_);
  state_cv_.wait_until(lk, time_point(deadline), [&] {
    int p = phase_.load(std::memory_order_relaxed);
    return p == kReady || p == kFailed;
  });
  return phase_.load(std::memory_order_relaxed);
}

std::string Reader::failure() {
  std::lock_guard<std::mutex> g(mu_);
  return failure_;
}

std::vector<std::string> Reader::channels() const {
  std::vector<std::string> v;
  for (const Gpu& g : gpus_) {
    for (int c : g.chans) v.push_back("gpu/" + std::to_string(g.index) + "/" + kChannelNames[c]);
    for (int e = 0; e < kEventChannels; ++e)
      v.push_back("gpu/" + std::to_string(g.index) + "/" + kEventChannelNames[e]);
    v.push_back("gpu/" + std::to_string(g.index) + "/" + kReadingTimeName);
  }
  return v;
}

std::vector<std::map<std::string, std::string>> Reader::devices() const {
  std::vector<std::map<std::string, std::string>> out;
  bool described = phase() == kReady;
  for (const Gpu& g : gpus_) out.push_back(described ? g.info : undescribed(g.index));
  if (described && samples_.token)  // the key of the driver samples' buffer (Python's drain_gpu_samples)
    for (auto& d : out) d["driver_samples"] = std::to_string(samples_.token);
  return out;
}

bool Reader::in_flight(const char*& what, int& dev, int64_t& since) const {
  since = call_since_.load(std::memory_order_acquire);
  if (!since) return false;
  what = call_what_.load(std::memory_order_relaxed);
  dev = call_dev_.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return what && call_since_.load(std::memory_order_relaxed) == since;
}

int64_t Reader::blocked_ns(int64_t now) const {
  const char* what;
  int dev;
  int64_t since;
  return in_flight(what, dev, since) ? now - since : 0;
}

std::string Reader::blocked_message(int64_t now, const char* tail) const {
  const char* what;
  int dev;
  int64_t since;
  char buf[160];
  if (!in_flight(what, dev, since)) return std::string("GPU discovery did not finish within 1.5 s") + tail;
  label(buf, sizeof buf, what, dev);
  char secs[32];
  std::snprintf(secs, sizeof secs, " blocked for %.1f s", double((now - since) / 100000000) / 10.0);
  return std::string(buf) + secs + tail;
}

void Reader::want(int64_t mono_ns) {
  demand_.store(mono_ns, std::memory_order_seq_cst);
  if (idle_.load(std::memory_order_seq_cst)) {  // rare: the first tick after an idle spell
    std::lock_guard<std::mutex> g(mu_);
    cv_.notify_one();
  }
}

// Waits at most kSyncWaitNs, and not while a call is blocked.
void Reader::request(int64_t since) {
  std::unique_lock<std::mutex> lk(mu_);
  sync_want_ = std::max(sync_want_, since);
  cv_.notify_one();
  ++waiters_;
  for (;;) {
    if (published_.time() >= since || done_) break;
    int64_t now = mono_now_ns();
    if (now - since >= kSyncWaitNs || blocked_ns(now) > kLateNs) break;
    published_cv_.wait_for(lk, std::chrono::milliseconds(10));
  }
  --waiters_;
}

bool Reader::stop(int64_t wait_ns) {
  std::unique_lock<std::mutex> lk(mu_);
  quit_.store(true, std::memory_order_relaxed);
  events_.stop();  // the XID thread begins no new wait either
  cv_.notify_all();
  if (blocked_ns(mono_now_ns()) > kLateNs) wait_ns = 0;
  return state_cv_.wait_for(lk, std::chrono::nanoseconds(wait_ns), [&] { return done_; });
}

std::string Reader::notes() const {
  std::lock_guard<std::mutex> g(msg_mu_);
  return notes_;
}
std::string Reader::slow() const {
  std::lock_guard<std::mutex> g(msg_mu_);
  return slow_;
}
std::string Reader::error() const {
  std::lock_guard<std::mutex> g(msg_mu_);
  return error_;
}

}  // namespace nvml
}  // namespace sysprof
