// Internal to index/: small helpers of tenant_index's files (tenant_index.cpp,
// eviction_orders.cpp, tenant_lookup.cpp, tenant_views.cpp): key hashing, saturating ages,
// run-length key refs, sort keys.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "index/hash_mix.hpp"
#include "index/tenant_index.hpp"

namespace ic::index::partition_detail {

constexpr std::uint32_t long_flag = key_long_hash;
constexpr std::uint32_t max_replica_id = 0xFFFFFFu;

using ic::index::mix64;

inline std::uint64_t load_be64(std::string_view b) {
  std::uint64_t v = 0;
  std::memcpy(&v, b.data(), 8);
  return __builtin_bswap64(v);  // x86-64 is little-endian
}

inline std::string store_be64(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; --i) {
    s[i] = static_cast<char>(v & 0xFF);
    v >>= 8;
  }
  return s;
}

/// Returns (now − t) in nanoseconds, saturating.
inline std::int64_t age_ns(micros now, micros t) {
  std::int64_t d = 0;
  std::int64_t r = 0;
  if (__builtin_sub_overflow(now, t, &d)) {
    return now > t ? std::numeric_limits<std::int64_t>::max()
                   : std::numeric_limits<std::int64_t>::min();
  }
  if (__builtin_mul_overflow(d, std::int64_t{1000}, &r)) {
    return d > 0 ? std::numeric_limits<std::int64_t>::max()
                 : std::numeric_limits<std::int64_t>::min();
  }
  return r;
}

/// Returns true when an entry or stats row is expired at `now` (§4.7: age >= ttl).
inline bool is_expired(micros now, micros t, std::int64_t ttl_ns) { return age_ns(now, t) >= ttl_ns; }

/// Returns a key whose ascending order is the descending order of non-NaN floats; -0 and +0
/// (which compare equal) get the same key.
inline std::uint32_t descending_key(float v) {
  if (v == 0.0f) v = 0.0f;
  std::uint32_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  b = (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);  // ascending in v
  return ~b;
}


/// Adds `key` to a run-length ref list; returns false when it repeats the last key.
inline bool add_run(std::vector<std::pair<std::uint32_t, std::uint32_t>>& runs, std::uint32_t key) {
  if (!runs.empty()) {
    auto& r = runs.back();
    if (key == r.first + r.second - 1) return false;
    if (key == r.first + r.second) {
      ++r.second;
      return true;
    }
  }
  runs.emplace_back(key, 1);
  return true;
}

/// Returns the number of keys in a run-length ref list.
inline std::size_t run_keys(const std::vector<std::pair<std::uint32_t, std::uint32_t>>& runs) {
  std::size_t n = 0;
  for (const auto& r : runs) n += r.second;
  return n;
}

/// Returns the sorted, de-duplicated keys of a run-length ref list.
inline std::vector<std::uint32_t> expand_runs(
    const std::vector<std::pair<std::uint32_t, std::uint32_t>>& runs) {
  std::vector<std::uint32_t> keys;
  keys.reserve(run_keys(runs));
  for (const auto& r : runs) {
    for (std::uint32_t i = 0; i < r.second; ++i) keys.push_back(r.first + i);
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

/// Replaces a run-length ref list by the runs of sorted `keys`.
inline void assign_runs(std::vector<std::pair<std::uint32_t, std::uint32_t>>& runs,
                 const std::vector<std::uint32_t>& keys) {
  runs.clear();
  for (std::uint32_t k : keys) add_run(runs, k);
  runs.shrink_to_fit();
}

inline void sort_scores(std::vector<scored_replica>& v) {
  std::sort(v.begin(), v.end(), [](const scored_replica& a, const scored_replica& b) {
    if (a.score.score != b.score.score) return a.score.score > b.score.score;
    return a.score.replica_id < b.score.replica_id;
  });
}

}  // namespace ic::index::partition_detail
