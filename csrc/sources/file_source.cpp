// The per-device counter files' shared scan (file_source.hpp): one copy of the loop every disk and NIC line goes
// through, whatever the source.
#include "sources/file_source.hpp"

namespace sysprof {

std::string_view scan_device_lines(const ProcFile& file, char* base, size_t stride, size_t n, int64_t mono_ns,
                                   bool row_kept, DeviceLines& out) {
  auto device = [base, stride](size_t k) { return reinterpret_cast<DeviceHead*>(base + k * stride); };
  for (size_t k = 0; k < n; ++k) device(k)->seen = false;
  std::string_view bad;
  size_t hint = 0;
  LineReader lines(file.data(), file.size());
  Cursor c;
  while (lines.next(c)) {
    size_t len = size_t(c.end - c.p);
    DeviceHead* match = nullptr;
    uint64_t h = 0;
    bool hashed = false;  // hashed only where a line may be a kept device's: not a skipped device's line
    if (hint < n && len) {
      DeviceHead* e = device(hint);
      if (!e->seen && e->len == len) {
        h = line_hash(c.p, len);
        hashed = true;
        if (e->hash == h) {
          match = e;
          ++hint;
          if (e->settled && row_kept) {  // the same line, and the row holds its output: nothing to do
            e->seen = true;
            e->last_ns = mono_ns;
            continue;
          }
        }
      }
    }
    if (out.line(c, match, h, hashed, hint) < 0) bad = std::string_view(c.p, len);
  }
  for (size_t k = 0; k < n; ++k) {
    DeviceHead* d = device(k);
    if (d->seen) continue;
    d->settled = false;
    out.gone(k);
  }
  return bad;
}

}  // namespace sysprof
