// gpu: the reader thread, the only thread that calls NVML (dlopen, nvmlInit, discovery, the readings,
// nvmlShutdown), and the reading it publishes for the sampler's thread.
//
// A driver in a bad state can block an NVML call for seconds, so no other thread waits for one:
// - the latest reading is published in two slots, each with a sequence number (no lock); copy()
//   takes it, and a reading older than the interval + kLateNs reads NaN (csrc/gpu/nvml_source.cpp);
// - the call in flight (what, device, since when) is visible to every thread; one in flight for longer
//   than kLateNs is "blocked", named in err, and its return once it comes back;
// - the reader reads every interval while the sampler thread asked (want()) within the last
//   2 intervals + kLateNs, and sleeps otherwise; request() asks for one fresh reading and waits at
//   most kSyncWaitNs for it, not at all while a call is blocked;
// - stop() waits at most the given time (0 while a call is blocked); the reader calls nvmlShutdown
//   itself after its last call returned, so shutdown never overlaps a call. From stop() on, neither
//   the reader nor the XID thread begins a new call but the releases (GPM samples, the event set,
//   nvmlShutdown): the call in flight then is the last that asks the driver anything.
#pragma once
#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/nvml_events.hpp"
#include "gpu/nvml_query.hpp"
#include "gpu/nvml_samples.hpp"
#include "gpu/nvml_select.hpp"

namespace sysprof {
namespace nvml {

constexpr int64_t kOpenWaitNs = 1500000000;  // open() waits this long for the device layout
constexpr int64_t kLateNs = 250000000;  // a call in flight longer is "blocked"; readings older than interval + this read NaN
constexpr int64_t kSyncWaitNs = 2000000000;  // a clone's sample() waits at most this long for a fresh reading
constexpr int64_t kExitWaitNs = 1000000000;  // the last owner waits at most this long for the reader to end
constexpr int64_t kNever = INT64_MIN / 4;  // a time long past, safe to subtract from

// The latest reading in two slots: the writer fills the unpublished one, then publishes it. A slot's
// sequence number is odd while it is written; a copy that saw it change is retried. No lock: the
// writer never waits, and a copy only retries when the writer lapped it (twice in one copy).
class Published {
 public:
  void init(size_t width);
  void publish(int64_t t, const double* v);  // one writer
  // The latest reading and the time it was begun; false when none could be copied.
  bool copy(double* out, int64_t& t) const;
  int64_t time() const { return slots_[latest_.load(std::memory_order_acquire)].t.load(std::memory_order_acquire); }

 private:
  struct Slot {
    std::atomic<uint64_t> seq{0};
    std::atomic<int64_t> t{kNever};
    std::unique_ptr<std::atomic<double>[]> v;
  };
  Slot slots_[2];
  std::atomic<int> latest_{0};
  size_t width_ = 0;
};

// kLoading: no layout yet; kLayout: devices known, not described; kReady: the first reading is published.
enum Phase { kLoading, kLayout, kReady, kFailed };

// "gpu/<dev>: <what>" or "<what>" for a call that concerns no device.
void label(char* buf, size_t cap, const char* what, int dev);

class Reader final : public Calls {
 public:
  // sel: the GPUs read and their order (csrc/gpu/nvml_select.hpp; inactive: all, NVML order).
  Reader(int64_t interval_ns, Selection sel);

  // ---- the reader thread
  void main();

  // ---- any thread
  int wait_phase(int64_t deadline);  // until ready or failed, or the deadline; the phase
  std::string failure();
  int phase() const { return phase_.load(std::memory_order_acquire); }
  // The channel names, "gpu/<index>/<channel>", device by device; from kLayout on. A device lays out
  // every Channel but the GPM ones where it has no GPM (csrc/gpu/nvml_gpm.hpp).
  std::vector<std::string> channels() const;
  std::vector<std::map<std::string, std::string>> devices() const;

  // The call in flight: what, device (-1: none) and since when (CLOCK_MONOTONIC). False: none.
  bool in_flight(const char*& what, int& dev, int64_t& since) const;
  int64_t blocked_ns(int64_t now) const;
  // "gpu/0: nvmlDeviceGetName blocked for 1.5 s<tail>", or a generic message when no call is in flight.
  std::string blocked_message(int64_t now, const char* tail) const;

  void want(int64_t mono_ns);  // the sampler thread wants readings (wakes an idle reader)
  // Reads every interval_ns from its next reading on (the sampler's budget stretched or relaxed the gpu source).
  void set_interval(int64_t interval_ns) {
    interval_.store(std::max<int64_t>(interval_ns, 1));
    keep_.store(2 * interval_.load() + kLateNs);
  }
  void request(int64_t since);  // a reading begun at or after `since`, waited for (bounded)
  bool copy(double* out, int64_t& t) const { return published_.copy(out, t); }
  bool stop(int64_t wait_ns);  // lets the reader go; true: it ended within wait_ns

  // Messages, each with a version that changes when it does.
  uint64_t notes_version() const { return notes_version_.load(std::memory_order_acquire); }
  uint64_t slow_version() const { return slow_version_.load(std::memory_order_acquire); }
  uint64_t error_version() const { return error_version_.load(std::memory_order_acquire); }
  std::string notes() const;
  std::string slow() const;
  std::string error() const;

  // ---- Calls, for the reading (the reader thread)
  Return call(const char* what, int dev, Call c) override;
  void note(const std::string& msg) override;

 private:
  template <class F>
  Return timed(const char* what, int dev, F&& f) {
    return call(what, dev, make_call(f));
  }
  void set_phase(int p);
  void fail(const std::string& msg);
  bool discover();
  bool open_devices(unsigned count);
  bool describe();
  void loop();
  bool wait_turn(std::unique_lock<std::mutex>& lk, int64_t now, int64_t next);
  void read_all(int64_t now);

  std::atomic<int64_t> interval_, keep_;  // set_interval() may change them
  const Selection sel_;
  Library lib_;
  std::vector<Gpu> gpus_;
  EventWaiter events_;  // XID events, on a thread of their own (nvml_events.hpp)
  SampleReader samples_;  // the driver's buffered samples, every kSamplesNs (nvml_samples.hpp)
  std::vector<double> scratch_;  // the reading being taken
  std::string tick_error_, last_tick_error_;
  Published published_;

  std::atomic<int> phase_{kLoading};
  std::atomic<bool> quit_{false};
  std::atomic<bool> idle_{false};
  std::atomic<int64_t> demand_{kNever};  // the sampler thread's latest tick
  std::atomic<const char*> call_what_{nullptr};
  std::atomic<int> call_dev_{-1};
  std::atomic<int64_t> call_since_{0};  // 0: no call in flight

  // Never held during an NVML call.
  mutable std::mutex mu_;
  std::condition_variable cv_;  // wakes the reader: want() after idling, request(), stop()
  std::condition_variable state_cv_;  // phase changes, done
  std::condition_variable published_cv_;  // a reading was published while request() waits
  std::string failure_;
  bool releasing_ = false;  // the reader thread's teardown: its calls are made even once stopped
  int64_t sync_want_ = kNever, last_start_ = kNever;
  int waiters_ = 0;
  bool done_ = false;

  mutable std::mutex msg_mu_;
  std::string notes_, slow_, error_;  // permanent conditions; the latest slow call; the latest reading's error
  std::atomic<uint64_t> notes_version_{0}, slow_version_{0}, error_version_{0};
};

}  // namespace nvml
}  // namespace sysprof
