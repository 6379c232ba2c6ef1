// The `/topology` wire model: prefill/decode topologies as pushed (pd-templates.md §2.2).
//
// A `topology_set` mirrors the JSON body `{version, topologies[]}` field for field, after
// decoding and normalisation (see topology/topology_json.hpp): topologies sorted by
// (namespace, name), replica ids / patterns / models sorted and deduplicated, `selection`
// filled with its defaults. `matchLabels` and `replicas` are stored and echoed, never
// evaluated (the server only knows replica ids). Pools keep their declaration order, which
// the transport derivation of §2.5 depends on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ic::topology {

/// The only accepted `/topology` schema version.
inline constexpr std::int64_t topology_version = 1;
/// Largest accepted `/topology` body (1 MiB).
inline constexpr std::size_t max_topology_body_bytes = std::size_t{1} << 20;
/// Limits of §2.2.
inline constexpr std::size_t max_topologies = 256;
inline constexpr std::size_t max_pool_patterns = 32;
inline constexpr std::size_t max_pool_ids = 1024;

/// Transport hint strings (exact, §1).
namespace transport {
inline constexpr std::string_view mooncake = "Mooncake";
inline constexpr std::string_view nixl = "NIXL";
inline constexpr std::string_view direct = "Direct";
}  // namespace transport

/// `prefillPools[]` / `decodePools[]`.
struct pool {
  std::string name;
  /// Names an `acceleratorTypes` entry; empty = unset.
  std::string accelerator_type;
  /// Explicit members (sorted, unique).
  std::vector<std::string> replica_ids;
  /// Glob patterns (topology/glob.hpp; sorted, unique).
  std::vector<std::string> replica_id_patterns;
  /// CRD desired size: informational (the `desired` gauge).
  std::optional<std::int64_t> replicas;
  /// Stored and echoed, never evaluated.
  std::map<std::string, std::string> match_labels;

  friend bool operator==(const pool& a, const pool& b) {
    return a.name == b.name && a.accelerator_type == b.accelerator_type &&
           a.replica_ids == b.replica_ids && a.replica_id_patterns == b.replica_id_patterns &&
           a.replicas == b.replicas && a.match_labels == b.match_labels;
  }
};

/// `acceleratorTypes[]`.
struct accelerator_type {
  std::string name;
  /// Compared trimmed and lower-cased by the §2.5 derivation (`nvidia`, `huawei`, `ascend`).
  std::string vendor;
  std::string model;
  /// Optional transport of this accelerator type; empty = unset.
  std::string transport;
  std::map<std::string, std::string> match_labels;

  friend bool operator==(const accelerator_type& a, const accelerator_type& b) {
    return a.name == b.name && a.vendor == b.vendor && a.model == b.model &&
           a.transport == b.transport && a.match_labels == b.match_labels;
  }
};

/// `selection`: every field has its default when absent.
struct selection_options {
  /// Liveness window: a member is live iff now − last_seen < this. 1..3,600,000; default 60,000.
  std::int64_t stats_max_age_ms = 60'000;
  /// Decode candidates need pressure < this. (0, 1e6]; default 1.0.
  float max_decode_pressure = 1.0f;
  /// Prefill candidates need pressure < this. (0, 1e6]; default 1.0.
  float max_prefill_pressure = 1.0f;
  /// S6 conditional local prefill threshold; 0 = off. ≥ 0; default 0.
  std::int64_t local_prefill_max_uncached_tokens = 0;
  /// S7: prefill on the decode pick when no prefill replica qualifies. Default false.
  bool local_prefill_when_prefill_busy = false;

  friend bool operator==(const selection_options& a, const selection_options& b) {
    return a.stats_max_age_ms == b.stats_max_age_ms &&
           a.max_decode_pressure == b.max_decode_pressure &&
           a.max_prefill_pressure == b.max_prefill_pressure &&
           a.local_prefill_max_uncached_tokens == b.local_prefill_max_uncached_tokens &&
           a.local_prefill_when_prefill_busy == b.local_prefill_when_prefill_busy;
  }
};

/// One `topologies[]` entry; its ref is `namespace/name`.
struct topology {
  std::string namespace_name;
  std::string name;
  /// Engine domain used for the prefix match (required).
  std::string hash_scheme;
  /// Models it serves (sorted, unique); empty = any model.
  std::vector<std::string> models;
  /// Explicit transport for every pair; empty = derive (§2.5).
  std::string transport;
  std::vector<pool> prefill_pools;
  std::vector<pool> decode_pools;
  std::vector<accelerator_type> accelerator_types;
  selection_options selection;

  friend bool operator==(const topology& a, const topology& b) {
    return a.namespace_name == b.namespace_name && a.name == b.name &&
           a.hash_scheme == b.hash_scheme && a.models == b.models && a.transport == b.transport &&
           a.prefill_pools == b.prefill_pools && a.decode_pools == b.decode_pools &&
           a.accelerator_types == b.accelerator_types && a.selection == b.selection;
  }
};

/// A whole `/topology` push.
struct topology_set {
  std::int64_t version = topology_version;
  /// Sorted by (namespace, name), unique.
  std::vector<topology> topologies;

  friend bool operator==(const topology_set& a, const topology_set& b) {
    return a.version == b.version && a.topologies == b.topologies;
  }
};

/// Returns the §2.5 (3) transport derived for a (prefill pool, decode pool) pair from their
/// accelerator types: both set `transport` and agree ⇒ it; else both vendors `nvidia` ⇒
/// NIXL, both in {huawei, ascend} ⇒ Mooncake; otherwise nullopt (not derivable).
std::optional<std::string_view> derive_transport(const topology& t, const pool& prefill,
                                                 const pool& decode);

}  // namespace ic::topology
