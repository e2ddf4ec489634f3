// gpu: the XID waiter (see nvml_events.hpp).
#include "gpu/nvml_events.hpp"

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace sysprof {
namespace nvml {

struct EventState {
  Library lib;  // a copy (the handle and the pointers): the thread may outlive the reader
  EventSet set = nullptr;
  size_t n = 0;
  std::unique_ptr<Device[]> handles;
  std::unique_ptr<std::atomic<bool>[]> registered;
  std::unique_ptr<std::atomic<uint64_t>[]> count, last;
  std::atomic<bool> has_note{false};
  std::shared_ptr<const std::atomic<bool>> stopped;  // EventWaiter::stop()

  std::mutex mu;  // never held during an NVML call
  std::condition_variable cv;
  bool quit = false, ended = true, handed = false;
  std::string note;

  bool ending() const { return quit || stopped->load(std::memory_order_relaxed); }  // mu held
};

namespace {

const char* missing_symbol(const Library& l) {
  if (!l.event_set_create) return "nvmlEventSetCreate";
  if (!l.register_events) return "nvmlDeviceRegisterEvents";
  if (!l.event_set_wait) return "nvmlEventSetWait_v2";
  if (!l.event_set_free) return "nvmlEventSetFree";
  return nullptr;
}

std::string refusal(unsigned index, const char* what, Return r) {
  return "gpu/" + std::to_string(index) + ": xid_total, xid_last read NaN (" + what + ": " + return_name(r) + ")";
}

void count_event(EventState& s, const EventData& e) {
  if (!(e.eventType & kEventTypeXidCriticalError)) return;
  for (size_t d = 0; d < s.n; ++d)
    if (s.handles[d] == e.device && s.registered[d].load(std::memory_order_relaxed)) {
      s.last[d].store(e.eventData, std::memory_order_relaxed);
      s.count[d].fetch_add(1, std::memory_order_release);  // a step of the count implies its code is stored
      return;
    }
}

// The waiter's thread: waits until asked to end; a permanent failure of the wait ends it early.
void wait_loop(const std::shared_ptr<EventState>& sp) {
  EventState& s = *sp;
  sigset_t all;  // as the reader: process signals go to other threads
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  pthread_setname_np(pthread_self(), "sysprof-xid");
  for (;;) {
    {
      std::lock_guard<std::mutex> g(s.mu);
      if (s.ending()) break;
    }
    EventData e;
    std::memset(&e, 0, sizeof e);
    Return r = s.lib.event_set_wait(s.set, &e, kEventWaitMs);
    if (r == kSuccess) {
      count_event(s, e);
    } else if (r == kErrorTimeout) {
      continue;
    } else if (permanent(r) || r == kErrorUninitialized) {
      std::lock_guard<std::mutex> g(s.mu);
      for (size_t d = 0; d < s.n; ++d) s.registered[d].store(false, std::memory_order_relaxed);
      s.note = std::string("gpu: xid_total, xid_last read NaN from now on (nvmlEventSetWait_v2: ") + return_name(r) + ")";
      s.has_note.store(true, std::memory_order_release);
      break;
    } else {  // e.g. a lost device: not a busy loop
      std::unique_lock<std::mutex> lk(s.mu);
      s.cv.wait_for(lk, std::chrono::milliseconds(kEventWaitMs), [&] { return s.ending(); });
    }
  }
  bool handed;
  {
    std::lock_guard<std::mutex> g(s.mu);
    s.ended = true;
    handed = s.handed;
    s.cv.notify_all();
  }
  if (handed) {  // the reader has gone: this thread makes the last calls
    s.lib.event_set_free(s.set);
    if (s.lib.initialized) s.lib.shutdown();
    unload_library(s.lib);
  }
}

}  // namespace

EventWaiter::~EventWaiter() = default;

void EventWaiter::open(const Library& lib, const std::vector<Gpu>& gpus, Calls& calls) {
  auto st = std::make_shared<EventState>();
  st->lib = lib;
  st->stopped = stopped_;
  st->n = gpus.size();
  st->handles.reset(new Device[st->n]);
  st->registered.reset(new std::atomic<bool>[st->n]());
  st->count.reset(new std::atomic<uint64_t>[st->n]());
  st->last.reset(new std::atomic<uint64_t>[st->n]());
  for (size_t d = 0; d < st->n; ++d) st->handles[d] = gpus[d].handle;
  st_ = st;
  if (const char* missing = missing_symbol(lib)) {  // an older driver
    for (const Gpu& g : gpus) calls.note(refusal(g.index, missing, kErrorFunctionNotFound));
    return;
  }
  EventSet set = nullptr;
  auto create = [&] { return lib.event_set_create(&set); };
  Return r = calls.call("nvmlEventSetCreate", -1, make_call(create));
  if (r != kSuccess) {
    for (const Gpu& g : gpus) calls.note(refusal(g.index, "nvmlEventSetCreate", r));
    return;
  }
  st->set = set;
  bool any = false;
  for (size_t d = 0; d < st->n; ++d) {
    const Gpu& g = gpus[d];
    auto reg = [&] { return lib.register_events(g.handle, kEventTypeXidCriticalError, set); };
    r = calls.call("nvmlDeviceRegisterEvents", int(g.index), make_call(reg));
    if (r == kSuccess)
      st->registered[d].store(true, std::memory_order_relaxed), any = true;
    else
      calls.note(refusal(g.index, "nvmlDeviceRegisterEvents", r));
  }
  if (!any) return;  // the set is freed by close()
  st->ended = false;
  try {
    std::thread([st] { wait_loop(st); }).detach();
  } catch (const std::exception& e) {
    st->ended = true;
    for (size_t d = 0; d < st->n; ++d) st->registered[d].store(false, std::memory_order_relaxed);
    calls.note(std::string("gpu: xid_total, xid_last read NaN (the XID thread did not start: ") + e.what() + ")");
  }
}

void EventWaiter::values(size_t d, double* out) const {
  const EventState* s = st_.get();
  if (!s || d >= s->n || !s->registered[d].load(std::memory_order_relaxed)) {
    out[0] = out[1] = kNaN;
    return;
  }
  out[0] = double(s->count[d].load(std::memory_order_acquire));
  out[1] = double(s->last[d].load(std::memory_order_relaxed));
}

bool EventWaiter::take_note(std::string& msg) {
  if (!st_ || !st_->has_note.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> g(st_->mu);
  msg = st_->note;
  st_->has_note.store(false, std::memory_order_relaxed);
  return true;
}

bool EventWaiter::close(int64_t wait_ns, Calls& calls) {
  if (!st_) return true;
  EventState& s = *st_;
  {
    std::unique_lock<std::mutex> lk(s.mu);
    s.quit = true;
    s.cv.notify_all();
    if (!s.cv.wait_for(lk, std::chrono::nanoseconds(wait_ns), [&] { return s.ended; })) {
      s.handed = true;  // the wait overran its timeout: the thread makes the last calls
      return false;
    }
  }
  if (s.set) {
    auto f = [&] { return s.lib.event_set_free(s.set); };
    calls.call("nvmlEventSetFree", -1, make_call(f));
    s.set = nullptr;
  }
  return true;
}

}  // namespace nvml
}  // namespace sysprof
