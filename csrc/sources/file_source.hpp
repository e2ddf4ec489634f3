// Shared shape of every /proc source: one file opened once, re-read and parsed each tick.
#pragma once
#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "io/proc_file.hpp"
#include "io/scan.hpp"
#include "sources/source.hpp"

namespace sysprof {

class FileSource : public Source {
 public:
  bool open(const Config& cfg, std::vector<std::string>& channels, std::string& err) override {
    if (!file_.open(path(cfg), err, single_shot())) return false;
    std::string warning;
    if (!discover(cfg, warning)) {
      err = warning;
      return false;
    }
    layout(channels);
    if (!parse(mono_now_ns(), nullptr, err)) return false;  // primes baselines, proves the format
    if (err.empty()) err = warning;
    return true;
  }

  std::unique_ptr<Source> clone(const Config& cfg, std::string& err) const override {
    std::unique_ptr<FileSource> s = fresh();
    std::vector<std::string> unused;
    s->layout(unused);
    if (!s->file_.open(s->path(cfg), err, s->single_shot()) || !s->parse(mono_now_ns(), nullptr, err)) return nullptr;
    return s;
  }

  bool sample(int64_t mono_ns, double* out, std::string& err) override {
    row_kept_ = row_kept && ok_;
    ok_ = file_.read(err) && parse(mono_ns, out, err);
    if (!ok_) fill_nan(out, width_);
    return ok_;
  }

 protected:
  virtual std::string path(const Config& cfg) const = 0;
  // single_open seq files render in one read; record-based ones (diskstats, net/dev) need reads to EOF.
  virtual bool single_shot() const { return true; }
  // Learns the devices from the first read (file_ holds it); may set a warning. False: unusable.
  virtual bool discover(const Config&, std::string&) { return true; }
  // Appends channel names and sets width_ from the discovered devices.
  virtual void layout(std::vector<std::string>& channels) = 0;
  // A new instance with the same devices, not yet opened.
  virtual std::unique_ptr<FileSource> fresh() const = 0;
  // Parses file_ into out[0, width_); out == nullptr only advances baselines. May set a warning
  // (e.g. a skipped line) and still return true; false means no usable value at all.
  virtual bool parse(int64_t mono_ns, double* out, std::string& err) = 0;

  // This sample()'s `out` holds what the previous one wrote (Source::row_kept, and that call succeeded).
  bool row_kept_ = false;
  bool ok_ = false;  // the previous sample() succeeded
  ProcFile file_;  // declared after the flags: what sample() reads lies together
};

// 64-bit hash of a device line (read hot from the pread buffer). Each 8-byte block goes through a bijective
// mix of the state, so two lines of equal length that differ in one block never collide; lines that differ
// in several collide with probability ~2^-64 (a device's line against its own previous one, once per change).
inline uint64_t line_hash(const char* p, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  uint64_t w = 0;
  std::memcpy(&w, p, n);
  h = (h ^ w) * 0x94D049BB133111EBull;
  return h ^ (h >> 29);
}

// A device of a per-device counter file (a disk, a NIC). The first cache line is all an idle device touches
// per tick (alignas: one line, never two): its line's hash and length, whether this read saw it, whether its
// row slice already holds its idle output, and the time of its last read. The head is what the shared scan
// (scan_device_lines) reads; the counters and the parsed line follow, per source.
struct alignas(64) DeviceHead {
  explicit DeviceHead(std::string n) : name(std::move(n)) {}
  uint64_t hash = 0;  // of the line as last parsed (len 0: none yet)
  uint32_t len = 0;
  bool seen = false;
  // The slice of the row this device last wrote holds totals and zero rates (its line did not change since
  // the read before): when the line is the same again and the row is the one written then, there is
  // nothing to write. Implies primed counters (cleared with them when the device goes).
  bool settled = false;
  int64_t last_ns = 0;
  std::string name;
};

template <int N, class Line>
struct alignas(64) CounterDevice : DeviceHead {
  explicit CounterDevice(std::string n) : DeviceHead(std::move(n)) {}
  Counter c[N];
  Line line{};  // what the line last parsed to (name cleared: it pointed into the read buffer)
};

// What a source does with a line the shared scan could not settle alone. line(): `match` is the expected
// device when the line hashed equal to the one it printed last (its cached parse stands), else nullptr (parse
// it; `h` is its hash when `hashed`); `owner` is the device the line belongs to when its file is that device's
// own (a line without a name), else nullptr (found by the name it carries). Returns -1 for a malformed line.
// gone(k): device k was not in this read.
struct DeviceLines {
  virtual int line(Cursor c, DeviceHead* match, DeviceHead* owner, uint64_t h, bool hashed, size_t& hint) = 0;
  virtual void gone(size_t k) = 0;

 protected:
  ~DeviceLines() = default;
};

// The loops over a counter file's lines that every per-device source shares (out of line: one copy of their
// code for disk and net): devices are `n` heads `stride` bytes apart from `base`. Both return the last
// malformed line. scan_device_lines reads one file listing every device (/proc/diskstats, /proc/net/dev);
// scan_device_texts reads one text per device, device k's in texts[k] (its own file, e.g. /sys/block/<disk>/stat:
// its first line, which carries no name; empty: the device is not there), and sets `bad_at` to the device of the
// malformed line.
std::string_view scan_device_lines(const ProcFile& file, char* base, size_t stride, size_t n, int64_t mono_ns,
                                   bool row_kept, DeviceLines& lines);
std::string_view scan_device_texts(const std::string_view* texts, char* base, size_t stride, size_t n,
                                   int64_t mono_ns, bool row_kept, DeviceLines& lines, size_t& bad_at);

// The per-device work of scan_counter_devices and scan_counter_texts (below): parse(Cursor, Line&) -> int (Line
// has `name` and `v[N]`), matched to the discovered devices, advances their counters and calls
// fill(index, line, delta, dt_seconds) for each (dt is 0 on a device's first line: no rate yet); gone(index) for
// a device absent from this read (re-primed when it returns).
template <int N, class Line, class Parse, class Fill, class Gone>
struct CounterLines final : DeviceLines {
  using Device = CounterDevice<N, Line>;
  static_assert(std::is_base_of<DeviceHead, Device>::value, "");
  CounterLines(std::vector<Device>& d, int64_t t, bool k, Parse& p, Fill& f, Gone& g)
      : devices(d), mono_ns(t), row_kept(k), parse(p), fill(f), gone_(g) {}
  int line(Cursor c, DeviceHead* match, DeviceHead* owner, uint64_t h, bool hashed, size_t& hint) override {
    Device* d = static_cast<Device*>(match);
    if (!d) {
      Line parsed;
      int r = parse(c, parsed);  // 1 parsed, 0 not a device line, -1 malformed
      if (r <= 0) return r;
      d = owner ? static_cast<Device*>(owner) : find_device(devices, parsed.name, hint);
      if (!d || d->seen) return 0;
      size_t len = size_t(c.end - c.p);
      d->hash = hashed ? h : line_hash(c.p, len);
      d->len = uint32_t(len);
      d->line = parsed;
      d->line.name = {};  // the buffer it pointed into is re-read next tick; fill() reads no name
    }
    d->seen = true;
    double dt = d->c[0].valid ? double(mono_ns - d->last_ns) * 1e-9 : 0.0;
    uint64_t delta[N], any = 0;
    for (int i = 0; i < N; ++i) any |= delta[i] = d->c[i].update(d->line.v[i]);
    d->last_ns = mono_ns;
    fill(size_t(d - devices.data()), d->line, delta, dt);
    d->settled = row_kept && any == 0 && dt > 0;  // what fill wrote is the device's idle output
    return 1;
  }
  void gone(size_t k) override {
    for (auto& cn : devices[k].c) cn.valid = false;
    gone_(k);
  }
  char* base() { return reinterpret_cast<char*>(static_cast<DeviceHead*>(devices.data())); }
  std::vector<Device>& devices;
  int64_t mono_ns;
  bool row_kept;
  Parse& parse;
  Fill& fill;
  Gone& gone_;
};

// Reads device lines from one file listing the devices by name (see CounterLines). A line of the expected device
// (the one after the previous match) with the hash and length of the one it printed last time is not parsed
// again: the parse is a function of the bytes, so its values are the cached ones (zero deltas). If its row slice
// is settled too and `row_kept` (the output buffer holds what this source wrote on its previous call), the device
// costs one compare and one cache line: idle devices (loop devices, idle NICs: most of them on a real node) then
// leave their slice as it is.
template <int N, class Line, class Parse, class Fill, class Gone>
std::string_view scan_counter_devices(const ProcFile& file, std::vector<CounterDevice<N, Line>>& devices,
                                      int64_t mono_ns, bool row_kept, Parse parse, Fill fill, Gone gone) {
  CounterLines<N, Line, Parse, Fill, Gone> lines(devices, mono_ns, row_kept, parse, fill, gone);
  return scan_device_lines(file, lines.base(), sizeof(CounterDevice<N, Line>), devices.size(), mono_ns, row_kept,
                           lines);
}

// The same from one text per device (texts[k] is device k's, empty if it is not there): the same matching, the
// same skip of unchanged lines, the same values as scan_counter_devices on a file listing the same lines.
template <int N, class Line, class Parse, class Fill, class Gone>
std::string_view scan_counter_texts(const std::string_view* texts, std::vector<CounterDevice<N, Line>>& devices,
                                    int64_t mono_ns, bool row_kept, Parse parse, Fill fill, Gone gone,
                                    size_t& bad_at) {
  CounterLines<N, Line, Parse, Fill, Gone> lines(devices, mono_ns, row_kept, parse, fill, gone);
  return scan_device_texts(texts, lines.base(), sizeof(CounterDevice<N, Line>), devices.size(), mono_ns, row_kept,
                           lines, bad_at);
}

// Writes the message into `err`, reusing its capacity: a line that stays malformed tick after tick
// costs no allocation.
// Out of line and cold: the tick's code stays packed without it.
__attribute__((cold, noinline)) inline void malformed(const ProcFile& f, std::string_view line, std::string& err) {
  err.assign(f.path());
  err.append(": malformed line skipped: '");
  err.append(line);
  err.append("'");
}

}  // namespace sysprof
