// The per-device counter files' shared scans (file_source.hpp): one copy of the loops every disk and NIC line goes
// through, whatever the source and whichever file it came from.
#include "sources/file_source.hpp"

namespace sysprof {
namespace {

DeviceHead* head(char* base, size_t stride, size_t k) { return reinterpret_cast<DeviceHead*>(base + k * stride); }

// One line, where `expected` is the device whose line it should be (nullptr: none). A line with the hash and
// length that device printed last is its cached parse; if its row slice is settled too, nothing is left to do.
// Returns 1 for a device line (or one settled here), 0 for another line, -1 for a malformed one.
inline int visit(Cursor c, DeviceHead* expected, DeviceHead* owner, int64_t mono_ns, bool row_kept, DeviceLines& out,
                 size_t& hint) {
  size_t len = size_t(c.end - c.p);
  DeviceHead* match = nullptr;
  uint64_t h = 0;
  bool hashed = false;  // hashed only where a line may be a kept device's: not a skipped device's line
  if (expected && len && !expected->seen && expected->len == len) {
    h = line_hash(c.p, len);
    hashed = true;
    if (expected->hash == h) {
      match = expected;
      ++hint;
      if (expected->settled && row_kept) {  // the same line, and the row holds its output: nothing to do
        expected->seen = true;
        expected->last_ns = mono_ns;
        return 1;
      }
    }
  }
  return out.line(c, match, owner, h, hashed, hint);
}

// Devices not seen in this read are gone.
void finish(char* base, size_t stride, size_t n, DeviceLines& out) {
  for (size_t k = 0; k < n; ++k) {
    DeviceHead* d = head(base, stride, k);
    if (d->seen) continue;
    d->settled = false;
    out.gone(k);
  }
}

}  // namespace

std::string_view scan_device_lines(const ProcFile& file, char* base, size_t stride, size_t n, int64_t mono_ns,
                                   bool row_kept, DeviceLines& out) {
  for (size_t k = 0; k < n; ++k) head(base, stride, k)->seen = false;
  std::string_view bad;
  size_t hint = 0;
  LineReader lines(file.data(), file.size());
  Cursor c;
  while (lines.next(c))
    if (visit(c, hint < n ? head(base, stride, hint) : nullptr, nullptr, mono_ns, row_kept, out, hint) < 0)
      bad = std::string_view(c.p, size_t(c.end - c.p));
  finish(base, stride, n, out);
  return bad;
}

std::string_view scan_device_texts(const std::string_view* texts, char* base, size_t stride, size_t n,
                                   int64_t mono_ns, bool row_kept, DeviceLines& out, size_t& bad_at) {
  std::string_view bad;
  for (size_t k = 0; k < n; ++k) {
    DeviceHead* d = head(base, stride, k);
    d->seen = false;
    Cursor c;
    LineReader lines(texts[k].data(), texts[k].size());
    if (!lines.next(c)) continue;  // not there: gone
    size_t hint = k;
    if (visit(c, d, d, mono_ns, row_kept, out, hint) < 0) {
      bad = std::string_view(c.p, size_t(c.end - c.p));
      bad_at = k;
    }
  }
  finish(base, stride, n, out);
  return bad;
}

}  // namespace sysprof
