// gpu: XID events (critical errors the driver reports: a page fault, a GPU fallen off the bus, a
// double-bit ECC error, ...), waited for on a thread of their own: never the reader's, never the
// sampler's.
//
// The reader thread (csrc/gpu/nvml_reader.cpp) opens the waiter after discovery: nvmlEventSetCreate,
// then nvmlDeviceRegisterEvents(nvmlEventTypeXidCriticalError) per device, each answer through the
// reader's timed calls. The waiter's thread then loops on nvmlEventSetWait_v2 with a timeout of
// kEventWaitMs; each XID adds one to its device's count and sets its device's last code (atomics).
// The reader copies them into every reading (two channels per device, kEventChannelNames): the count
// as `xid_total`, the code of the latest XID as `xid_last` (0 before the first; NaN where the device
// cannot report XIDs). Python turns each step of xid_total into an instant event carrying xid_last
// (sysprof/trace/gpu_events.py), so the data flows one way: driver -> waiter -> reading -> ring.
//
// Stopping: stop() (any thread: the reader's stop) lets no new wait begin. The reader then asks the waiter
// to end and waits at most kEventStopWaitNs (one wait's timeout and a margin) before nvmlEventSetFree and
// nvmlShutdown. A wait that overruns its timeout (a driver in
// a bad state) is not waited for: the waiter's thread then frees the set, shuts NVML down and unloads
// the library itself once its wait returns, so no shutdown ever overlaps a call.
#pragma once
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/nvml_query.hpp"

namespace sysprof {
namespace nvml {

constexpr unsigned kEventWaitMs = 100;  // one nvmlEventSetWait_v2's timeout
constexpr int64_t kEventStopWaitNs = int64_t(kEventWaitMs) * 1000000 + 150000000;  // the reader waits this long for the waiter
constexpr int kEventChannels = 2;
// "xid_total", "xid_last": the registry's gpu rows after the Channel ones (gen/channels.hpp)
inline constexpr const char* const* kEventChannelNames = kGpuChannelNames + kPerDevice;
// A device's last channel, after these: when its values were read (wall-clock seconds since the epoch).
constexpr const char* kReadingTimeName = kGpuChannelNames[kPerDevice + kEventChannels];  // reading_time_seconds
constexpr int kDeviceWidth = kPerDevice + kEventChannels;  // a device's values in a reading: the table's, then these

struct EventState;  // shared by the waiter and its thread

class EventWaiter {
 public:
  EventWaiter() = default;
  EventWaiter(const EventWaiter&) = delete;
  EventWaiter& operator=(const EventWaiter&) = delete;
  ~EventWaiter();

  // On the reader thread, after discovery: the event set and the devices' registrations (refusals
  // noted through calls), then the waiter's thread where a device was registered.
  void open(const Library& lib, const std::vector<Gpu>& gpus, Calls& calls);
  // Device d's channels (kEventChannels values), for a reading; any thread, allocation-free.
  void values(size_t d, double* out) const;
  // A note the waiter's thread left (its wait failed for good); false when none is new.
  bool take_note(std::string& msg);
  // Asks the thread to end and waits at most wait_ns. True: it ended (or never ran) and the set is
  // freed; the caller may shut NVML down. False: the thread shuts NVML down when its wait returns.
  bool close(int64_t wait_ns, Calls& calls);
  // Any thread: the waiter's thread begins no new wait (the one in flight ends within its timeout); close()
  // still frees the set.
  void stop() { stopped_->store(true, std::memory_order_relaxed); }

 private:
  std::shared_ptr<EventState> st_;
  const std::shared_ptr<std::atomic<bool>> stopped_ = std::make_shared<std::atomic<bool>>(false);
};

}  // namespace nvml
}  // namespace sysprof
