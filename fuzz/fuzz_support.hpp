// Helpers shared by the libFuzzer targets: a checked invariant that crashes (so libFuzzer
// records the input) with a message, and a byte cursor for splitting one input into parts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace ic::fuzz {

/// Aborts with `what` when `ok` is false: an invariant of the code under test broke.
inline void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz invariant failed: %s\n", what);
  std::abort();
}

/// Reads fixed-size values and slices off the front of the input; past the end it yields
/// zeros and empty slices.
class cursor {
 public:
  cursor(const std::uint8_t* data, std::size_t size)
      : rest_(reinterpret_cast<const char*>(data), size) {}

  std::uint8_t byte() {
    if (rest_.empty()) return 0;
    auto b = static_cast<std::uint8_t>(rest_.front());
    rest_.remove_prefix(1);
    return b;
  }
  std::uint32_t u32() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | byte();
    return v;
  }
  std::uint64_t u64() { return (static_cast<std::uint64_t>(u32()) << 32) | u32(); }
  /// The next `n` bytes (fewer at the end).
  std::string_view take(std::size_t n) {
    auto s = rest_.substr(0, n);
    rest_.remove_prefix(s.size());
    return s;
  }
  std::string_view rest() const { return rest_; }
  bool empty() const { return rest_.empty(); }

 private:
  std::string_view rest_;
};

}  // namespace ic::fuzz
