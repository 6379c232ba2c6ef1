// Internal to index/: the snapshot format's constants and byte helpers, and
// `snapshot_access` (a friend of tenant_index) whose writer lives in
// snapshot_writer.cpp and whose loader lives in snapshot_loader.cpp. The grammar is in
// index/README.md ("Snapshot format").
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t by value
#include <xxhash.h>

#include "index/tenant_index.hpp"

// The format is little-endian and entries are copied as whole parallel arrays, which is only
// a plain memcpy on a little-endian host (the index already assumes x86-64).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "snapshot codec assumes little-endian");

namespace ic::index {

namespace snapshot_format {


/// "ICSX" read as a little-endian u32: the first four bytes of every snapshot.
constexpr std::uint32_t snapshot_magic = 0x58534349u;
constexpr char tenant_tag = 'T';
constexpr char end_tag = 'E';
/// Key word bit: the hash is not 8 bytes and is stored length-prefixed.
constexpr std::uint32_t wire_long_hash = 0x80000000u;
/// Upper bound on one string (name or hash) so a corrupt length cannot make the loader wait
/// for (and buffer) gigabytes.
constexpr std::uint32_t max_string_bytes = 64u << 20;
/// Bytes per entry on the wire: last_seen i64, replica|tier u32, token_count i32, LFU u32.
constexpr std::size_t entry_bytes = 20;
constexpr std::size_t tenant_fixed_bytes = 1 + 4 + 5 * 4 + 8;  // + name bytes
constexpr std::size_t end_bytes = 1 + 4 + 3 * 8 + 8;
constexpr std::size_t stats_bytes = 4 + 4 + 8 + 4 + 4 + 8 + 8 + 8 + 8;

template <typename T>
inline char* put(char* p, T v) {
  std::memcpy(p, &v, sizeof v);
  return p + sizeof v;
}

template <typename T>
inline T get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// Most keys a tenant's key table is sized for before its keys arrive (snapshot_loader).
constexpr std::size_t presize_keys_max = std::size_t{1} << 16;

inline bool valid_tier(std::uint8_t t) {
  return (t >= 1 && t <= tier_unknown_positive) || t == tier_coldest;
}

}  // namespace snapshot_format

/// Reads and rebuilds the private state of `tenant_index` (a friend): the writer
/// (snapshot_writer.cpp) and the loader (snapshot_loader.cpp).
class snapshot_access {
 public:
  using sink_fn = std::function<bool(std::string_view)>;

  /// Streams `tenants` (in that order) to `sink` in chunks of `chunk_bytes`, then the end
  /// record with their summed facts (see write_snapshot).
  static bool write(const std::vector<const tenant_index*>& tenants, const sink_fn& sink,
                    std::size_t chunk_bytes);

  class chunk_writer;
  static bool write_string(chunk_writer& w, std::string_view s);
  static bool write_tenant(chunk_writer& w, const tenant_index& t);

  /// The loader's state machine (snapshot_loader.cpp).
  class loader;
};

}  // namespace ic::index
