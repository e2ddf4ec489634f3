// Allocation-free scanning of /proc text. Every function works on [p, end) and never reads past end.
#pragma once
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>

namespace sysprof {

struct Cursor {
  const char* p;
  const char* end;
  bool done() const { return p >= end; }
};

inline bool is_blank(char c) { return c == ' ' || c == '\t'; }
inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

inline void skip_blanks(Cursor& c) {
  const char* p = c.p;  // local copies: the loops stay in registers
  const char* e = c.end;
  while (p < e && is_blank(*p)) ++p;
  c.p = p;
}

// Saturates at UINT64_MAX instead of wrapping: a corrupt value must never read as a small one.
// 19 digits cannot overflow (10^19 - 1 < 2^64), so only a 20th digit and beyond take the checked path.
inline bool parse_u64(Cursor& c, uint64_t& v) {
  skip_blanks(c);
  const char* p = c.p;
  const char* e = c.end;
  unsigned d;
  if (p >= e || (d = unsigned(static_cast<unsigned char>(*p)) - '0') > 9) return false;
  uint64_t x = d;
  ++p;
  const char* unchecked_end = e - p > 18 ? p + 18 : e;
  while (p < unchecked_end && (d = unsigned(static_cast<unsigned char>(*p)) - '0') <= 9) {
    x = x * 10 + d;
    ++p;
  }
  bool sat = false;
  while (p < e && (d = unsigned(static_cast<unsigned char>(*p)) - '0') <= 9) {
    if (!sat && (x > (UINT64_MAX - d) / 10)) sat = true;
    if (!sat) x = x * 10 + d;
    ++p;
  }
  c.p = p;
  v = sat ? UINT64_MAX : x;
  return true;
}

// Signed integer (some /proc/<pid>/stat fields are signed).
inline bool parse_i64(Cursor& c, int64_t& v) {
  skip_blanks(c);
  bool neg = c.p < c.end && *c.p == '-';
  if (neg) ++c.p;
  uint64_t u;
  if (!parse_u64(c, u)) return false;
  if (u > uint64_t(INT64_MAX)) u = uint64_t(INT64_MAX);
  v = neg ? -int64_t(u) : int64_t(u);
  return true;
}

// Saturating uint64 arithmetic: a corrupt value pins at UINT64_MAX, never wraps (no UB either way).
inline uint64_t sat_add(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}
inline uint64_t sat_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

// Decimal digits as a double: exact below 2^53. A number too large for a double (309+ digits)
// is rejected (false), never read as inf.
inline bool parse_digits_double(Cursor& c, double& v) {
  skip_blanks(c);
  if (c.p >= c.end || !is_digit(*c.p)) return false;
  double x = 0;
  while (c.p < c.end && is_digit(*c.p)) x = x * 10 + double(*c.p++ - '0');
  v = x;
  return x <= std::numeric_limits<double>::max();
}

// "12.34" as in /proc/loadavg (no exponent, no sign). The fraction is divided once, so "0.12"
// gives the same double as strtod.
inline bool parse_decimal(Cursor& c, double& v) {
  if (!parse_digits_double(c, v)) return false;
  if (c.p < c.end && *c.p == '.') {
    ++c.p;
    double frac = 0, scale = 1;
    while (c.p < c.end && is_digit(*c.p) && scale < 1e15) {
      frac = frac * 10 + double(*c.p++ - '0');
      scale *= 10;
    }
    while (c.p < c.end && is_digit(*c.p)) ++c.p;
    v = (v * scale + frac) / scale;  // one rounding: "2.72" gives the double nearest 2.72
  }
  return v <= std::numeric_limits<double>::max();  // v * scale can overflow: never inf
}

// CPU ids at or above this are ignored: Linux's NR_CPUS is at most 8192 (x86-64), so a larger id can only
// come from a corrupt file, and would cost a channel per id.
constexpr uint64_t kMaxCpus = 8192;

// Visits every id of a sysfs cpu list ("0-3,8,10-11"; ids of kMaxCpus and above are ignored). Returns the
// number of ids visited.
template <class Visit>
size_t for_each_cpu_in_list(const char* p, size_t n, Visit visit) {
  Cursor c{p, p + n};
  size_t count = 0;
  while (!c.done()) {
    uint64_t a, b;
    if (!parse_u64(c, a)) break;
    b = a;
    if (c.p < c.end && *c.p == '-') {
      ++c.p;
      if (!parse_u64(c, b)) break;
    }
    for (uint64_t i = a; i <= b && i < kMaxCpus; ++i, ++count) visit(long(i));
    if (c.p < c.end && *c.p == ',') ++c.p;
    else break;
  }
  return count;
}

// Next whitespace-delimited token.
inline std::string_view next_token(Cursor& c) {
  skip_blanks(c);
  const char* s = c.p;
  while (c.p < c.end && !is_blank(*c.p) && *c.p != '\n') ++c.p;
  return std::string_view(s, size_t(c.p - s));
}

// Splits a buffer into lines; the last line need not end in '\n'.
class LineReader {
 public:
  LineReader(const char* data, size_t n) : p_(data), end_(data + n) {}
  bool next(Cursor& line) {
    if (p_ >= end_) return false;
    const char* nl = static_cast<const char*>(std::memchr(p_, '\n', size_t(end_ - p_)));
    const char* e = nl ? nl : end_;
    line = Cursor{p_, e};
    p_ = nl ? nl + 1 : end_;
    return true;
  }

 private:
  const char* p_;
  const char* end_;
};

}  // namespace sysprof
