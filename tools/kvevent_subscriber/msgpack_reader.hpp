// A bounded, allocation-free msgpack reader: a cursor over one frame.
//
// The subscriber decodes engine payloads it does not trust. This reader never allocates,
// never recurses and never reads past the frame: every length (str, bin, array, map) is
// checked against the bytes that remain before it is believed, so a 5-byte payload that
// declares 2^32 elements fails at once instead of allocating. Values are returned one at a
// time; containers return their element count and the caller reads the elements next.
//
//   mp_reader r(payload.data(), payload.size());
//   mp_value v;
//   if (!r.next(v) || v.type != mp_type::array) return malformed;
//   for (std::uint32_t i = 0; i < v.count; ++i) { ... r.next(...) or r.skip() ... }
//
// Integers: non-negative values come back as `uint` whatever their wire width or
// signedness; negative values as `sint`. str and bin point into the frame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ic::kvevent {

/// The kind of one msgpack value.
enum class mp_type : std::uint8_t { nil, boolean, uint, sint, f64, str, bin, array, map, ext };

/// One decoded value. For `array`/`map`, `count` is the number of elements/pairs that follow.
struct mp_value {
  mp_type type = mp_type::nil;
  bool b = false;
  std::uint64_t u = 0;  ///< `uint`
  std::int64_t i = 0;   ///< `sint` (always negative)
  double d = 0;         ///< `f64` (float32 widened)
  std::uint32_t count = 0;
  std::string_view bytes;  ///< `str`, `bin`, `ext` payload (points into the frame)

  bool is_int() const { return type == mp_type::uint || type == mp_type::sint; }
  bool is_bytes() const { return type == mp_type::str || type == mp_type::bin; }
};

/// A cursor over one msgpack frame; every read is bounds-checked.
class mp_reader {
 public:
  mp_reader(const void* data, std::size_t size)
      : p_(static_cast<const std::uint8_t*>(data)), end_(p_ + size) {}
  explicit mp_reader(std::string_view s) : mp_reader(s.data(), s.size()) {}

  /// Reads the next value header (and scalar payload). False when the input is truncated,
  /// uses the reserved byte 0xc1, or declares more elements than bytes remain.
  bool next(mp_value& out);

  /// Skips one complete value, containers included, iteratively. False as `next`.
  bool skip();

  /// Skips `n` complete values.
  bool skip_n(std::uint64_t n);

  /// Skips the elements of the container whose header `v` was just read (nothing for a
  /// scalar): reading a header and then ignoring the value.
  bool skip_contents(const mp_value& v) {
    if (v.type == mp_type::array) return skip_n(v.count);
    if (v.type == mp_type::map) return skip_n(2ull * v.count);
    return true;
  }

  /// Bytes not yet read.
  std::size_t remaining() const { return static_cast<std::size_t>(end_ - p_); }
  bool at_end() const { return p_ == end_; }
  const std::uint8_t* position() const { return p_; }

 private:
  bool take(std::size_t n, const std::uint8_t*& at);
  bool container(mp_value& out, mp_type t, std::uint64_t n, unsigned min_bytes_each);

  const std::uint8_t* p_;
  const std::uint8_t* end_;
};

}  // namespace ic::kvevent
