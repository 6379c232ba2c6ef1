// The current `/topology` store: an immutable, compiled snapshot swapped on every push.
//
// `topology_store` holds the last accepted push as a `topology_snapshot` behind a
// `shared_ptr` (pd-templates.md §2.2 "Serving"): `apply` builds a new snapshot and swaps the
// pointer (atomic, so lookups on other threads read the old or the new one, never a mix, and
// never wait); `current()` hands a reader its own reference. A snapshot compiles what
// lookups need at push time: glob matchers per pool, the transport of every
// (prefill pool, decode pool) pair, and a (namespace, name) index.
//
// Persistence: `to_bytes()` is the canonical JSON (topology/topology_json.hpp) and
// `from_bytes()` decodes it back to the identical set, so a journal that stores the bytes
// and re-applies them rebuilds the same store; `to_json()` is the GET body (the same bytes).
//
//   ic::topology::topology_store store;
//   auto set = ic::topology::parse_topology_body(body);       // 400 on error; store untouched
//   journal.append(ic::topology::encode_topology_set(*set));   // 503 on failure; untouched
//   store.apply(*set);
//   auto snap = store.current();                               // a lookup's consistent view
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "admin_json/snapshot_cell.hpp"
#include "policy/result.hpp"
#include "topology/glob.hpp"
#include "topology/topology.hpp"

namespace ic::topology {

/// One pool with its patterns compiled.
struct compiled_pool {
  const pool* spec = nullptr;
  std::vector<glob> patterns;
  /// Returns true when `id` is an explicit member or matches a pattern.
  bool contains(std::string_view id) const;
  /// Returns true when `id` matches one of the patterns.
  bool pattern_matches(std::string_view id) const;
};

/// One topology with everything a lookup needs precomputed.
struct compiled_topology {
  const topology* spec = nullptr;
  std::vector<compiled_pool> prefill;
  std::vector<compiled_pool> decode;
  /// derived[i][j]: the transport of (prefill pool i, decode pool j) per §2.5 (2)–(3).
  std::vector<std::vector<std::string_view>> transport;
};

/// An immutable accepted push, compiled. Not copyable (it points into itself).
class topology_snapshot {
 public:
  explicit topology_snapshot(topology_set set);
  topology_snapshot(const topology_snapshot&) = delete;
  topology_snapshot& operator=(const topology_snapshot&) = delete;

  /// Returns the topology `namespace/name`, or nullptr.
  const compiled_topology* find(std::string_view namespace_name, std::string_view name) const;
  /// Returns the accepted set (normalised).
  const topology_set& set() const { return set_; }
  /// Returns the canonical JSON of `set()` (GET body, journal payload).
  const std::string& canonical() const { return canonical_; }

 private:
  topology_set set_;
  std::vector<compiled_topology> compiled_;  // same order as set_.topologies (sorted)
  std::string canonical_;
};

/// Holds the current snapshot; `apply` is replace-on-write.
class topology_store {
 public:
  /// Creates a store holding the empty set (`{"version":1,"topologies":[]}`).
  topology_store();

  /// Replaces the whole store with `set` (a decoded, hence validated and normalised, set).
  void apply(topology_set set);

  /// Returns the current snapshot (never null); safe from any thread.
  std::shared_ptr<const topology_snapshot> current() const;

  /// Returns true once any set has been applied.
  bool has_pushed() const { return pushed_; }

  /// Returns the canonical bytes of the current set (journal / snapshot payload).
  std::string to_bytes() const;
  /// Decodes bytes written by `to_bytes()` (no size limit); errors are one line.
  static policy::result<topology_set> from_bytes(std::string_view bytes);
  /// Returns the GET /topology body (equal to `to_bytes()`).
  std::string to_json() const { return to_bytes(); }

 private:
  admin_json::snapshot_cell<const topology_snapshot> current_;
  bool pushed_ = false;
};

}  // namespace ic::topology
