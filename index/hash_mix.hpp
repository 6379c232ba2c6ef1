// The splitmix64 finaliser, shared by the index's key table and the subscriber's flat tables.
//
//   std::size_t slot = ic::index::mix64(key) & mask;
//
// Header-only, no dependencies: clients such as tools/kvevent_subscriber include it without
// linking the index.
#pragma once

#include <cstdint>

namespace ic::index {

/// Spreads any 64-bit value over all 64 bits (splitmix64's finaliser; a bijection).
inline std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace ic::index
