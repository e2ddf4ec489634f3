// gpu: the driver's own buffered samples (nvmlDeviceGetSamples), read on the NVML reader thread.
//
// The driver keeps about a second of samples per device and type, each with its own timestamp (CPU wall
// clock, microseconds since the epoch: the same clock as our rows' timestamps, so only * 1000 to ns).
// Every kSamplesNs the reader thread (never the sampling thread) asks each device for the five types of
// kSampleKinds with lastSeenTimeStamp = the newest timestamp it already has (at open: the wall clock then,
// so only samples taken from the start on come, and each comes once), converts the values to base units
// (mW -> W, MHz -> Hz, % as is) and appends them to a SampleBuffer: a bounded ring (kSamplesKept entries
// for all devices and types; the oldest dropped, counted) behind a mutex that no NVML call holds. Python
// drains it (_native.nvml_drain_samples(token), sysprof/sampling/gpu_samples.py): one way, NVML -> reader
// thread -> buffer -> drain -> trace. NVML_ERROR_NOT_FOUND means no new sample; a permanent refusal
// (NOT_SUPPORTED for a type, a library without the symbol: an older driver) stops asking for that series,
// named in the buffer's `absent` (not in errors["gpu"]: the row's channels are not concerned).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/nvml_query.hpp"

namespace sysprof {
namespace nvml {

constexpr int64_t kSamplesNs = 500000000;  // the reader asks every 0.5 s (the driver keeps about 1 s)
constexpr size_t kSamplesKept = size_t(1) << 16;  // side-buffer entries, all devices and types
constexpr unsigned kSamplesAsked = 256;  // samples asked per call at first (grown to the driver's count)

struct SampleKind {
  int type;  // nvmlSamplingType_t
  const char* type_name;  // its NVML name, for messages
  const char* channel;  // the series: gpu/<index>/<channel>
  double scale;  // value * scale: base units
};
constexpr int kSampleKinds = 5;
extern const SampleKind kSampleKindTable[kSampleKinds];

struct DriverSample {
  uint32_t series;  // index into SampleBuffer::series()
  int64_t t_ns;  // wall clock, ns since the epoch
  double value;
};

class SampleBuffer {
 public:
  explicit SampleBuffer(std::vector<std::string> series) : series_(std::move(series)) {}
  const std::vector<std::string>& series() const { return series_; }
  void push(uint32_t series, int64_t t_ns, double value);  // the reader thread
  // Everything buffered, oldest first, and the entries dropped since the last take (any thread).
  void take(std::vector<DriverSample>& out, uint64_t& dropped);
  void set_absent(const std::string& series, const std::string& why);
  std::map<std::string, std::string> absent() const;
  // The reader thread's CPU time in samples reads, and how many device reads it made (benchmarks/bench_gpu.py).
  void add_cost(int64_t cpu_ns, uint64_t device_reads);
  void cost(int64_t& cpu_ns, uint64_t& device_reads) const;

 private:
  const std::vector<std::string> series_;
  mutable std::mutex mu_;
  std::vector<DriverSample> ring_;  // grown to at most kSamplesKept, then reused
  size_t head_ = 0, size_ = 0;
  uint64_t dropped_ = 0;
  std::map<std::string, std::string> absent_;
  int64_t cpu_ns_ = 0;
  uint64_t device_reads_ = 0;
};

struct SampleReader {
  std::shared_ptr<SampleBuffer> buffer;
  uint64_t token = 0;  // the buffer's key for Python (find_samples); 0: none
  std::vector<unsigned long long> last_seen;  // per device and kind: the newest timestamp (us) taken
  std::vector<char> refused;  // per device and kind
  std::vector<Sample> scratch;
  int64_t at = INT64_MIN / 4;  // when last read
};

// At discovery: the series of every device, lastSeen = now, the buffer registered for Python.
void samples_open(const Library& lib, const std::vector<Gpu>& gpus, SampleReader& sr);
// Every kSamplesNs (the reader thread; allocates only when the driver holds more than asked).
void samples_read(const Library& lib, const std::vector<Gpu>& gpus, int64_t now, SampleReader& sr, Calls& calls);
// Unregisters the buffer (Python's drain then gets nothing more).
void samples_close(SampleReader& sr);
// The buffer registered under `token`, or null once its reader is gone.
std::shared_ptr<SampleBuffer> find_samples(uint64_t token);

}  // namespace nvml
}  // namespace sysprof
