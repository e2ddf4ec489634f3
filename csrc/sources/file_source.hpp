// Shared shape of every /proc source: one file opened once, re-read and parsed each tick.
#pragma once
#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
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
    if (!file_.read(err) || !parse(mono_ns, out, err)) {
      fill_nan(out, width_);
      return false;
    }
    return true;
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

  ProcFile file_;
};

// A device of a per-device counter file (a disk, a NIC).
template <int N, class Line>
struct CounterDevice {
  std::string name;
  Counter c[N];
  int64_t last_ns = 0;
  bool seen = false;
  // The device's line as last parsed, and what it parsed to (name pointing at `name`): an idle device prints the
  // same bytes tick after tick, and those need no parse.
  std::string last_line;
  Line line{};
};

// Reads device lines (parse(Cursor, Line&) -> bool; Line has `name` and `v[N]`), matches them to the
// discovered devices, advances their counters and calls fill(index, line, delta, dt_seconds) for each
// (dt is 0 on a device's first line: no rate yet). Devices absent from this read are marked gone
// (re-primed when they return) and reported through gone(index). Returns the last malformed line.
// A line identical to the one the expected device (the one after the previous match) printed last time
// is not parsed again: the parse is a function of the bytes, so its values are the cached ones (zero
// deltas). Idle devices (loop devices, idle NICs: most of them on a real node) then cost one memcmp.
template <int N, class Line, class Parse, class Fill, class Gone>
std::string_view scan_counter_devices(const ProcFile& file, std::vector<CounterDevice<N, Line>>& devices,
                                      int64_t mono_ns, Parse parse, Fill fill, Gone gone) {
  for (auto& d : devices) d.seen = false;
  std::string_view bad;
  size_t hint = 0;
  LineReader lines(file.data(), file.size());
  Cursor c;
  while (lines.next(c)) {
    size_t len = size_t(c.end - c.p);
    CounterDevice<N, Line>* d = nullptr;
    const Line* l = nullptr;
    if (hint < devices.size() && len) {
      CounterDevice<N, Line>& e = devices[hint];
      if (!e.seen && e.last_line.size() == len && std::memcmp(e.last_line.data(), c.p, len) == 0) {
        d = &e;
        l = &e.line;
        ++hint;
      }
    }
    if (!d) {
      Line parsed;
      int r = parse(c, parsed);  // 1 parsed, 0 not a device line, -1 malformed
      if (r < 0) bad = std::string_view(c.p, len);
      if (r <= 0) continue;
      d = find_device(devices, parsed.name, hint);
      if (!d || d->seen) continue;
      if (d->last_line.capacity() < len) d->last_line.reserve(std::max<size_t>(256, 2 * len));  // rarely: a longer line
      d->last_line.assign(c.p, len);
      d->line = parsed;
      d->line.name = {};  // the buffer it pointed into is re-read next tick; fill() reads no name
      l = &d->line;
    }
    d->seen = true;
    double dt = d->c[0].valid ? double(mono_ns - d->last_ns) * 1e-9 : 0.0;
    uint64_t delta[N];
    for (int i = 0; i < N; ++i) delta[i] = d->c[i].update(l->v[i]);
    d->last_ns = mono_ns;
    fill(size_t(d - devices.data()), *l, delta, dt);
  }
  for (size_t k = 0; k < devices.size(); ++k) {
    if (devices[k].seen) continue;
    for (auto& cn : devices[k].c) cn.valid = false;
    gone(k);
  }
  return bad;
}

// Writes the message into `err`, reusing its capacity: a line that stays malformed tick after tick
// costs no allocation.
inline void malformed(const ProcFile& f, std::string_view line, std::string& err) {
  err.assign(f.path());
  err.append(": malformed line skipped: '");
  err.append(line);
  err.append("'");
}

}  // namespace sysprof
