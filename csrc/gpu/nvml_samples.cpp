// gpu: the driver's own buffered samples; see csrc/gpu/nvml_samples.hpp.
#include "gpu/nvml_samples.hpp"

#include <algorithm>
#include <atomic>
#include <ctime>

namespace sysprof {
namespace nvml {

// NVML's units: power mW, utilisation %, clocks MHz (NVML API reference, nvmlSamplingType_t).
const SampleKind kSampleKindTable[kSampleKinds] = {
    {kTotalPowerSamples, "NVML_TOTAL_POWER_SAMPLES", "power_samples_watts", 1e-3},
    {kGpuUtilizationSamples, "NVML_GPU_UTILIZATION_SAMPLES", "utilization_samples_percent", 1.0},
    {kMemoryUtilizationSamples, "NVML_MEMORY_UTILIZATION_SAMPLES", "memory_utilization_samples_percent", 1.0},
    {kProcessorClkSamples, "NVML_PROCESSOR_CLK_SAMPLES", "sm_clock_samples_hz", 1e6},
    {kMemoryClkSamples, "NVML_MEMORY_CLK_SAMPLES", "memory_clock_samples_hz", 1e6},
};

void SampleBuffer::push(uint32_t series, int64_t t_ns, double value) {
  std::lock_guard<std::mutex> g(mu_);
  if (size_ == kSamplesKept) {  // full: the oldest goes
    head_ = (head_ + 1) % kSamplesKept;
    --size_;
    ++dropped_;
  }
  const size_t at = head_ + size_;  // head_ is 0 until the ring has its full size (drops need it full)
  if (at == ring_.size() && ring_.size() < kSamplesKept)
    ring_.push_back(DriverSample{series, t_ns, value});  // grows with what the driver gives, up to the cap
  else
    ring_[at % ring_.size()] = DriverSample{series, t_ns, value};
  ++size_;
}

void SampleBuffer::take(std::vector<DriverSample>& out, uint64_t& dropped) {
  std::lock_guard<std::mutex> g(mu_);
  out.clear();
  out.reserve(size_);
  for (size_t i = 0; i < size_; ++i) out.push_back(ring_[(head_ + i) % ring_.size()]);
  head_ = size_ = 0;
  dropped = dropped_;
  dropped_ = 0;
}

void SampleBuffer::set_absent(const std::string& series, const std::string& why) {
  std::lock_guard<std::mutex> g(mu_);
  absent_[series] = why;
}

std::map<std::string, std::string> SampleBuffer::absent() const {
  std::lock_guard<std::mutex> g(mu_);
  return absent_;
}

void SampleBuffer::add_cost(int64_t cpu_ns, uint64_t device_reads) {
  std::lock_guard<std::mutex> g(mu_);
  cpu_ns_ += cpu_ns;
  device_reads_ += device_reads;
}

void SampleBuffer::cost(int64_t& cpu_ns, uint64_t& device_reads) const {
  std::lock_guard<std::mutex> g(mu_);
  cpu_ns = cpu_ns_;
  device_reads = device_reads_;
}

namespace {

int64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::mutex registry_mu;
std::map<uint64_t, std::weak_ptr<SampleBuffer>>& registry() {
  static auto* r = new std::map<uint64_t, std::weak_ptr<SampleBuffer>>();  // never destroyed: safe at exit
  return *r;
}
std::atomic<uint64_t> next_token{1};

unsigned long long wall_us() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)(ts.tv_nsec / 1000);
}

}  // namespace

void samples_open(const Library& lib, const std::vector<Gpu>& gpus, SampleReader& sr) {
  std::vector<std::string> series;
  for (const Gpu& g : gpus)
    for (const SampleKind& k : kSampleKindTable) series.push_back("gpu/" + std::to_string(g.index) + "/" + k.channel);
  sr.buffer = std::make_shared<SampleBuffer>(series);
  sr.last_seen.assign(series.size(), wall_us());
  sr.refused.assign(series.size(), 0);
  sr.scratch.resize(kSamplesAsked);
  if (!lib.get_samples) {
    for (const std::string& s : series)
      sr.buffer->set_absent(s, "nvmlDeviceGetSamples: NVML_ERROR_FUNCTION_NOT_FOUND (an older driver)");
    sr.refused.assign(series.size(), 1);
  }
  sr.token = next_token.fetch_add(1);
  std::lock_guard<std::mutex> g(registry_mu);
  registry()[sr.token] = sr.buffer;
}

void samples_read(const Library& lib, const std::vector<Gpu>& gpus, int64_t now, SampleReader& sr, Calls& calls) {
  if (!sr.buffer || !lib.get_samples || now - sr.at < kSamplesNs) return;
  sr.at = now;
  const int64_t cpu0 = thread_cpu_ns();
  uint64_t device_reads = 0;
  for (size_t d = 0; d < gpus.size(); ++d) {
    const Gpu& g = gpus[d];
    if (g.lost) continue;
    bool asked = false;
    for (int k = 0; k < kSampleKinds; ++k) {
      const size_t s = d * kSampleKinds + size_t(k);
      if (sr.refused[s]) continue;
      const SampleKind& kind = kSampleKindTable[k];
      asked = true;
      int type = 0;
      unsigned count = unsigned(sr.scratch.size());
      auto ask = [&] { return lib.get_samples(g.handle, kind.type, sr.last_seen[s], &type, &count, sr.scratch.data()); };
      Return r = calls.call("nvmlDeviceGetSamples", int(g.index), make_call(ask));
      if (r == kErrorInsufficientSize) {  // the driver holds more than asked: ask its count, then again
        auto size = [&] { return lib.get_samples(g.handle, kind.type, sr.last_seen[s], &type, &count, nullptr); };
        if (calls.call("nvmlDeviceGetSamples", int(g.index), make_call(size)) != kSuccess) continue;
        sr.scratch.resize(std::max<size_t>(count, sr.scratch.size() * 2));
        count = unsigned(sr.scratch.size());
        r = calls.call("nvmlDeviceGetSamples", int(g.index), make_call(ask));
      }
      if (r == kErrorNotFound) continue;  // nothing new since last_seen
      if (r != kSuccess) {
        if (permanent(r)) {
          sr.refused[s] = 1;
          sr.buffer->set_absent(sr.buffer->series()[s], std::string("nvmlDeviceGetSamples(") + kind.type_name +
                                                            "): " + return_name(r));
        }
        continue;
      }
      const unsigned long long seen = sr.last_seen[s];
      for (unsigned i = 0; i < count && i < sr.scratch.size(); ++i) {
        const Sample& x = sr.scratch[i];
        if (x.timeStamp <= seen) continue;  // each sample once, whatever the driver returns
        sr.last_seen[s] = std::max(sr.last_seen[s], x.timeStamp);
        sr.buffer->push(uint32_t(s), int64_t(x.timeStamp) * 1000, value_as_double(type, x.sampleValue) * kind.scale);
      }
    }
    device_reads += asked;
  }
  sr.buffer->add_cost(thread_cpu_ns() - cpu0, device_reads);
}

void samples_close(SampleReader& sr) {
  if (!sr.token) return;
  std::lock_guard<std::mutex> g(registry_mu);
  registry().erase(sr.token);
  sr.token = 0;
}

std::shared_ptr<SampleBuffer> find_samples(uint64_t token) {
  std::lock_guard<std::mutex> g(registry_mu);
  auto it = registry().find(token);
  return it == registry().end() ? nullptr : it->second.lock();
}

}  // namespace nvml
}  // namespace sysprof
