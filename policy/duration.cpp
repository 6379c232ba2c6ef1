#include "policy/duration.hpp"

#include <cstdint>
#include <cstdio>
#include <optional>

namespace ic::policy {
namespace {

constexpr std::uint64_t two63 = std::uint64_t{1} << 63;

/// Quotes `s` for an error line: printable ASCII verbatim, `"`/`\` escaped, other bytes \xNN.
std::string quote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  out += '"';
  return out;
}

std::optional<std::uint64_t> unit_nanos(std::string_view u) {
  if (u == "ns") return 1;
  if (u == "us" || u == "\xc2\xb5s" || u == "\xce\xbcs") return 1'000;  // us, µs (U+00B5), μs (U+03BC)
  if (u == "ms") return 1'000'000;
  if (u == "s") return 1'000'000'000;
  if (u == "m") return 60'000'000'000;
  if (u == "h") return 3'600'000'000'000;
  return std::nullopt;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

result<std::chrono::nanoseconds> parse_duration(std::string_view orig) {
  // Mirrors Go's time.ParseDuration: [-+]?([0-9]*(\.[0-9]*)?[a-z]+)+
  const auto invalid = [&] { return error{"invalid duration " + quote(orig)}; };
  std::string_view s = orig;
  bool neg = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s == "0") return std::chrono::nanoseconds{0};
  if (s.empty()) return invalid();

  std::uint64_t d = 0;
  while (!s.empty()) {
    if (!(s[0] == '.' || is_digit(s[0]))) return invalid();

    // Integer part [0-9]*.
    std::uint64_t v = 0;
    std::size_t i = 0;
    for (; i < s.size() && is_digit(s[i]); ++i) {
      if (v > two63 / 10) return invalid();
      v = v * 10 + static_cast<std::uint64_t>(s[i] - '0');
      if (v > two63) return invalid();
    }
    const bool pre = i > 0;
    s.remove_prefix(i);

    // Fraction (\.[0-9]*)?: digits beyond 63-bit precision are ignored, as in Go.
    std::uint64_t f = 0;
    double scale = 1;
    bool post = false;
    if (!s.empty() && s[0] == '.') {
      s.remove_prefix(1);
      bool overflow = false;
      std::size_t j = 0;
      for (; j < s.size() && is_digit(s[j]); ++j) {
        if (overflow) continue;
        if (f > (two63 - 1) / 10) {
          overflow = true;
          continue;
        }
        const std::uint64_t y = f * 10 + static_cast<std::uint64_t>(s[j] - '0');
        if (y > two63) {
          overflow = true;
          continue;
        }
        f = y;
        scale *= 10;
      }
      post = j > 0;
      s.remove_prefix(j);
    }
    if (!pre && !post) return invalid();

    // Unit: everything up to the next digit or '.'.
    std::size_t u = 0;
    while (u < s.size() && !(s[u] == '.' || is_digit(s[u]))) ++u;
    if (u == 0) return error{"missing unit in duration " + quote(orig)};
    const std::string_view unit_text = s.substr(0, u);
    s.remove_prefix(u);
    const auto unit = unit_nanos(unit_text);
    if (!unit) {
      return error{"unknown unit " + quote(unit_text) + " in duration " + quote(orig)};
    }
    if (v > two63 / *unit) return invalid();
    v *= *unit;
    if (f > 0) {
      // float64 keeps nanosecond accuracy for fractions of the largest unit (hours).
      v += static_cast<std::uint64_t>(static_cast<double>(f) *
                                      (static_cast<double>(*unit) / scale));
      if (v > two63) return invalid();
    }
    d += v;
    if (d > two63) return invalid();
  }
  if (neg) {
    // d <= 2^63 here, so the negation is representable (d == 2^63 is INT64_MIN).
    return std::chrono::nanoseconds{static_cast<std::int64_t>(0 - d)};
  }
  if (d > two63 - 1) return invalid();
  return std::chrono::nanoseconds{static_cast<std::int64_t>(d)};
}

namespace {

/// Prepends the fraction v / 10^prec (trailing zeros and a bare '.' omitted); returns v / 10^prec.
std::uint64_t prepend_frac(std::string& out, std::uint64_t v, int prec) {
  bool print = false;
  for (int i = 0; i < prec; ++i) {
    const auto digit = static_cast<char>(v % 10);
    print = print || digit != 0;
    if (print) out.insert(out.begin(), static_cast<char>('0' + digit));
    v /= 10;
  }
  if (print) out.insert(out.begin(), '.');
  return v;
}

void prepend_int(std::string& out, std::uint64_t v) { out.insert(0, std::to_string(v)); }

}  // namespace

std::string format_duration(std::chrono::nanoseconds d) {
  const std::int64_t n = d.count();
  const bool neg = n < 0;
  std::uint64_t u = static_cast<std::uint64_t>(n);
  if (neg) u = 0 - u;

  std::string out;
  if (u < 1'000'000'000) {
    if (u == 0) return "0s";
    int prec = 0;
    out = "s";
    if (u < 1'000) {
      prec = 0;
      out.insert(0, "n");
    } else if (u < 1'000'000) {
      prec = 3;
      out.insert(0, "\xc2\xb5");  // U+00B5, as Go prints it
    } else {
      prec = 6;
      out.insert(0, "m");
    }
    u = prepend_frac(out, u, prec);
    prepend_int(out, u);
  } else {
    out = "s";
    u = prepend_frac(out, u, 9);
    prepend_int(out, u % 60);
    u /= 60;
    if (u > 0) {
      out.insert(out.begin(), 'm');
      prepend_int(out, u % 60);
      u /= 60;
      if (u > 0) {
        out.insert(out.begin(), 'h');
        prepend_int(out, u);
      }
    }
  }
  if (neg) out.insert(out.begin(), '-');
  return out;
}

}  // namespace ic::policy
