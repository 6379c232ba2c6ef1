#include "tools/kvevent_subscriber/msgpack_reader.hpp"

#include <cstring>

namespace ic::kvevent {
namespace {

std::uint64_t be(const std::uint8_t* p, int n) {
  std::uint64_t v = 0;
  for (int k = 0; k < n; ++k) v = (v << 8) | p[k];
  return v;
}

}  // namespace

bool mp_reader::take(std::size_t n, const std::uint8_t*& at) {
  if (remaining() < n) return false;
  at = p_;
  p_ += n;
  return true;
}

bool mp_reader::container(mp_value& out, mp_type t, std::uint64_t n, unsigned min_bytes_each) {
  // Every element needs at least one byte: a count the rest of the frame cannot hold is
  // a lie, rejected before any caller sizes anything by it.
  if (n * min_bytes_each > remaining()) return false;
  out.type = t;
  out.count = static_cast<std::uint32_t>(n);
  return true;
}

bool mp_reader::next(mp_value& out) {
  const std::uint8_t* h;
  if (!take(1, h)) return false;
  const std::uint8_t c = *h;
  const std::uint8_t* q;
  auto uint_of = [&](int n) {
    if (!take(static_cast<std::size_t>(n), q)) return false;
    out.type = mp_type::uint;
    out.u = be(q, n);
    return true;
  };
  auto sint_of = [&](int n) {
    if (!take(static_cast<std::size_t>(n), q)) return false;
    std::uint64_t raw = be(q, n);
    std::int64_t v;
    switch (n) {
      case 1: v = static_cast<std::int8_t>(raw); break;
      case 2: v = static_cast<std::int16_t>(raw); break;
      case 4: v = static_cast<std::int32_t>(raw); break;
      default: v = static_cast<std::int64_t>(raw); break;
    }
    if (v >= 0) {
      out.type = mp_type::uint;
      out.u = static_cast<std::uint64_t>(v);
    } else {
      out.type = mp_type::sint;
      out.i = v;
    }
    return true;
  };
  auto bytes_of = [&](mp_type t, int len_bytes) {
    std::uint64_t n = c;  // fix forms pass len_bytes 0 and the length in the low bits
    if (len_bytes > 0) {
      if (!take(static_cast<std::size_t>(len_bytes), q)) return false;
      n = be(q, len_bytes);
    } else {
      n = (t == mp_type::str) ? (c & 0x1f) : 0;
    }
    if (n > remaining()) return false;
    out.type = t;
    out.bytes = std::string_view(reinterpret_cast<const char*>(p_), static_cast<std::size_t>(n));
    p_ += n;
    return true;
  };
  auto ext_of = [&](std::uint64_t n, bool fixed) {
    if (!fixed) {
      int lb = c == 0xc7 ? 1 : (c == 0xc8 ? 2 : 4);
      if (!take(static_cast<std::size_t>(lb), q)) return false;
      n = be(q, lb);
    }
    if (n + 1 > remaining()) return false;
    out.type = mp_type::ext;
    out.bytes = std::string_view(reinterpret_cast<const char*>(p_ + 1), static_cast<std::size_t>(n));
    p_ += n + 1;
    return true;
  };

  if (c <= 0x7f) { out.type = mp_type::uint; out.u = c; return true; }
  if (c >= 0xe0) { out.type = mp_type::sint; out.i = static_cast<std::int8_t>(c); return true; }
  if ((c & 0xf0) == 0x80) return container(out, mp_type::map, c & 0x0f, 2);
  if ((c & 0xf0) == 0x90) return container(out, mp_type::array, c & 0x0f, 1);
  if ((c & 0xe0) == 0xa0) return bytes_of(mp_type::str, 0);
  switch (c) {
    case 0xc0: out.type = mp_type::nil; return true;
    case 0xc2: out.type = mp_type::boolean; out.b = false; return true;
    case 0xc3: out.type = mp_type::boolean; out.b = true; return true;
    case 0xc4: return bytes_of(mp_type::bin, 1);
    case 0xc5: return bytes_of(mp_type::bin, 2);
    case 0xc6: return bytes_of(mp_type::bin, 4);
    case 0xc7: case 0xc8: case 0xc9: return ext_of(0, false);
    case 0xca: {
      if (!take(4, q)) return false;
      std::uint32_t raw = static_cast<std::uint32_t>(be(q, 4));
      float f;
      std::memcpy(&f, &raw, 4);
      out.type = mp_type::f64;
      out.d = f;
      return true;
    }
    case 0xcb: {
      if (!take(8, q)) return false;
      std::uint64_t raw = be(q, 8);
      std::memcpy(&out.d, &raw, 8);
      out.type = mp_type::f64;
      return true;
    }
    case 0xcc: return uint_of(1);
    case 0xcd: return uint_of(2);
    case 0xce: return uint_of(4);
    case 0xcf: return uint_of(8);
    case 0xd0: return sint_of(1);
    case 0xd1: return sint_of(2);
    case 0xd2: return sint_of(4);
    case 0xd3: return sint_of(8);
    case 0xd4: return ext_of(1, true);
    case 0xd5: return ext_of(2, true);
    case 0xd6: return ext_of(4, true);
    case 0xd7: return ext_of(8, true);
    case 0xd8: return ext_of(16, true);
    case 0xd9: return bytes_of(mp_type::str, 1);
    case 0xda: return bytes_of(mp_type::str, 2);
    case 0xdb: return bytes_of(mp_type::str, 4);
    case 0xdc: if (!take(2, q)) return false; return container(out, mp_type::array, be(q, 2), 1);
    case 0xdd: if (!take(4, q)) return false; return container(out, mp_type::array, be(q, 4), 1);
    case 0xde: if (!take(2, q)) return false; return container(out, mp_type::map, be(q, 2), 2);
    case 0xdf: if (!take(4, q)) return false; return container(out, mp_type::map, be(q, 4), 2);
    default: return false;  // 0xc1 is reserved
  }
}

bool mp_reader::skip_n(std::uint64_t n) {
  // Iterative: a counter of values still to skip instead of recursion, so nesting depth
  // costs nothing; counts are bounded by the frame size (see container()).
  mp_value v;
  while (n > 0) {
    if (!next(v)) return false;
    --n;
    if (v.type == mp_type::array) n += v.count;
    else if (v.type == mp_type::map) n += 2ull * v.count;
  }
  return true;
}

bool mp_reader::skip() { return skip_n(1); }

}  // namespace ic::kvevent
