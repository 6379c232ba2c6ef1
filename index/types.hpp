// Plain domain structs of the index: what the gRPC layer translates protobuf to and from.
//
// These mirror the v1alpha1 wire messages the index needs (spec/lookup.md §1.3) field by
// field, as plain C++ values with no protobuf dependency, plus the index's own result types
// (ingest results with drop reasons, change descriptions for observers, views for
// GetCacheState and /snapshot). Enum-typed wire fields are carried as raw `int32_t` so that
// unknown values survive translation exactly (the index normalises them, §2.6).
//
//   ic::index::cache_state_update u;
//   u.replica_id = "r1"; u.tenant_id = "team-a"; u.model_id = "m"; u.hash_scheme = "vllm";
//   u.prefixes.push_back({.prefix_hash = "p1", .token_count = 128});
//   auto result = index.ingest(u, now_us);
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <tuple>
#include <string_view>
#include <vector>

namespace ic::index {

/// Microseconds since the Unix epoch: every timestamp the index stores or is given.
using micros = std::int64_t;

/// The tenant reserved for the in-process self-test (spec/lookup.md §2.8).
inline constexpr std::string_view reserved_tenant = "inferencecache.io/probe";

/// Wire values of `CacheTier`.
enum class cache_tier : std::int32_t { unspecified = 0, t1 = 1, t2 = 2, t3 = 3 };

/// Wire values of `CacheEvent.Type`.
enum class event_type : std::int32_t {
  unspecified = 0,
  prefix_added = 1,
  prefix_evicted = 2,
  replica_updated = 3,
  all_cleared = 4,
};

/// One `PrefixEntry` of a `CacheStateUpdate`.
struct prefix_entry {
  std::string prefix_hash;
  std::int32_t token_count = 0;
  std::vector<std::string> block_hashes;
  std::vector<std::int32_t> block_token_counts;
  /// Raw wire `CacheTier` value (unknown values kept; normalised at ingest).
  std::int32_t tier = 0;
  std::string adapter_id;
};

/// `ReplicaStats` as reported by a producer and as returned by GetCacheState.
struct replica_stats {
  std::string replica_id;
  std::int64_t cache_memory_bytes = 0;
  float hit_rate = 0;
  float pressure = 0;
  /// Accepted on the wire but never stored (always empty in views).
  std::string client_version;
  std::int64_t t2_hit_tokens = 0;
  std::int64_t t2_query_tokens = 0;

  friend bool operator==(const replica_stats& a, const replica_stats& b) {
    return a.replica_id == b.replica_id && a.cache_memory_bytes == b.cache_memory_bytes &&
           a.hit_rate == b.hit_rate && a.pressure == b.pressure &&
           a.client_version == b.client_version && a.t2_hit_tokens == b.t2_hit_tokens &&
           a.t2_query_tokens == b.t2_query_tokens;
  }
};

/// One `CacheStateUpdate` message of a ReportCacheState stream.
struct cache_state_update {
  std::string replica_id;
  std::string model_id;
  std::string tenant_id;
  std::string hash_scheme;
  /// Unix microseconds; 0 means "the `now` passed to ingest".
  micros timestamp_us = 0;
  std::vector<prefix_entry> prefixes;
  /// Absent when the message carried no `stats` submessage.
  std::optional<replica_stats> stats;
  std::string adapter_id;
};

/// One `CacheEvent` (PublishEvent input; also the shape of StreamCacheEvents output).
struct cache_event {
  /// Raw wire `CacheEvent.Type` (unknown values are ignored).
  std::int32_t type = 0;
  std::string replica_id;
  std::string model_id;
  std::string tenant_id;
  std::string prefix_hash;
  micros timestamp_us = 0;
  std::string adapter_id;
};

/// An LFU hit named by what every server's index of the tenant has in common (names and
/// key bytes, not slot ids): journaled LFU credits (spec/scaleout.md §3.4) carry these.
struct named_hit {
  std::string model;
  std::string scheme;
  std::string adapter;
  std::string key;  ///< the key's hash bytes
  std::string replica;
  friend bool operator<(const named_hit& a, const named_hit& b) {
    return std::tie(a.model, a.scheme, a.adapter, a.key, a.replica) <
           std::tie(b.model, b.scheme, b.adapter, b.key, b.replica);
  }
};

/// Returns the time an update or event takes effect: its own `timestamp_us`, or `at` (when
/// it was applied) when that is 0 (spec/lookup.md §2.6, §2.7). The one place of this rule.
inline micros effective_time(const cache_state_update& u, micros at) {
  return u.timestamp_us == 0 ? at : u.timestamp_us;
}
inline micros effective_time(const cache_event& e, micros at) {
  return e.timestamp_us == 0 ? at : e.timestamp_us;
}

/// `SLO` of a lookup request.
struct slo {
  std::int32_t ttft_ms = 0;
  std::int32_t tbt_ms = 0;
};

/// `LookupRouteRequest`.
struct lookup_route_request {
  std::string model_id;
  std::string tenant_id;
  std::string prefix_hash;
  std::int32_t prefix_token_count = 0;
  std::string hash_scheme;
  /// Absent SLO reads as zeros.
  std::optional<slo> slo_target;
  std::vector<std::string> block_hashes;
  std::vector<std::int32_t> block_token_counts;
  std::vector<std::uint32_t> token_ids;
  std::string prompt_text;
  std::string adapter_id;
  /// The tokens the gateway's tokenizer made of `prompt_text` (chat template applied);
  /// nullopt when it made none (no tokenizer for the model, an error, text too large, no
  /// free slot), which fails the prompt_text path open (spec/lookup.md §3.2 step 3).
  std::optional<std::vector<std::uint32_t>> prompt_tokens;
};

/// `ReplicaScore`.
struct replica_score {
  std::string replica_id;
  float score = 0;
  std::int32_t matched_tokens = 0;
  float estimated_cache_hit_prob = 0;
  /// Wire tier: 1/2/3, or 0 (UNSPECIFIED) for anything else.
  std::int32_t tier = 0;
};

/// LookupRoute reason codes (spec/lookup.md §1.4), exact strings.
namespace reason {
inline constexpr std::string_view prefix_match = "PREFIX_MATCH";
inline constexpr std::string_view tenant_hot = "TENANT_HOT";
inline constexpr std::string_view affinity_hint = "AFFINITY_HINT";
inline constexpr std::string_view no_hint = "NO_HINT";
inline constexpr std::string_view policy_requires_chain = "POLICY_REQUIRES_CHAIN";
inline constexpr std::string_view timeout = "TIMEOUT";
inline constexpr std::string_view unknown_tenant = "UNKNOWN_TENANT";
inline constexpr std::string_view unknown_model = "UNKNOWN_MODEL";
inline constexpr std::string_view unknown_hash_scheme = "UNKNOWN_HASH_SCHEME";
}  // namespace reason

/// `LookupRouteResponse`.
struct lookup_route_response {
  std::vector<replica_score> replica_scores;
  std::string reason_code;
  /// Filled by the caller (it owns the clock); 0 on the reserved-tenant short-circuit.
  std::int64_t lookup_latency_us = 0;
  std::vector<std::uint32_t> token_ids;
  std::string adapter_id;
};

/// GetCacheState answer (`GetCacheStateResponse`; the summary is always present).
struct cache_state_view {
  /// Every stats row of (tenant, model), sorted by replica_id; client_version empty.
  std::vector<replica_stats> replicas;
  /// Distinct prefix keys of (tenant, model), all schemes and adapters, stale included.
  std::int64_t total_prefixes = 0;
  /// Always 0 (spec/lookup.md §7.14).
  std::int64_t hot_prefixes = 0;
};

/// Ack drop reasons of extensions.md §4 (first drop met in message order).
namespace drop_reason {
inline constexpr std::string_view empty_hash_scheme = "DROPPED_EMPTY_HASH_SCHEME";
inline constexpr std::string_view malformed_chain = "DROPPED_MALFORMED_CHAIN";
inline constexpr std::string_view reserved_tenant = "RESERVED_TENANT";
}  // namespace drop_reason

/// What removed an entry (extensions.md §5; metric label `reason` for ttl/cap).
enum class change_cause : std::uint8_t { ingest = 0, event = 1, ttl = 2, quota = 3, cap = 4 };

/// One observable change to the index, in the order it was applied (extensions.md §5).
///
/// The string views point into the index's name pools and stay valid for the lifetime of the
/// `tenant_index` that produced them (names are never freed). `hash_scheme` is extra
/// information (CacheEvent has no such field). Changes of the reserved tenant are never
/// recorded.
struct cache_change {
  /// PREFIX_ADDED (entry created), PREFIX_EVICTED (entry removed), ALL_CLEARED, REPLICA_UPDATED.
  event_type type = event_type::unspecified;
  change_cause cause = change_cause::ingest;
  std::string_view tenant_id;
  std::string_view model_id;
  std::string_view hash_scheme;
  std::string_view adapter_id;
  std::string_view replica_id;
  /// The key's hash bytes (the block hash for chain entries); empty for ALL_CLEARED and
  /// REPLICA_UPDATED.
  std::string prefix_hash;
  /// When the change happened: ingest time for additions; event, sweep or ingest time for
  /// removals.
  micros timestamp_us = 0;
};

/// Sink for changes; pass nullptr to the mutating calls to skip recording (cheaper).
using change_log = std::vector<cache_change>;

/// Where an input came from: producers are refused the reserved tenant, the probe is not.
enum class input_origin : std::uint8_t { producer = 0, probe = 1 };

/// What one ingest did: drops (for the Ack and `ingest_dropped_total`) and evictions.
struct ingest_result {
  /// extensions.md §4 reason of the first drop in message order; empty when nothing dropped.
  std::string_view first_drop_reason;
  /// PrefixEntries dropped because hash_scheme was empty.
  std::int64_t dropped_empty_hash_scheme = 0;
  /// PrefixEntries dropped because their chain arrays had different lengths.
  std::int64_t dropped_malformed_chain = 0;
  /// 1 when the whole message was skipped for the reserved tenant.
  std::int64_t dropped_reserved_tenant = 0;
  /// (key, replica) entries created.
  std::int64_t entries_added = 0;
  /// Distinct keys removed by the tenant quota (`tenant_evictions_total{over_entries}`).
  std::int64_t quota_evicted_keys = 0;
  /// (key, replica) entries removed by the global cap, by victim tenant's algorithm.
  std::int64_t cap_evicted_lru = 0;
  std::int64_t cap_evicted_lfu = 0;
};

/// What one PublishEvent did.
struct event_result {
  /// False for the reserved tenant (producer origin) and unknown/no-op types.
  bool applied = false;
  /// (key, replica) entries removed.
  std::int64_t entries_removed = 0;
};

/// What one TTL sweep removed (`index_evictions_total{algorithm, reason="ttl"}`).
struct sweep_result {
  std::int64_t entries_removed_lru = 0;
  std::int64_t entries_removed_lfu = 0;
  std::int64_t stats_rows_removed = 0;
};

/// One row of /snapshot `replicas` (operations.md §3.3), keyed (tenant, replica_id).
struct snapshot_replica {
  std::string replica_id;
  std::string tenant;
  std::int64_t cache_memory_bytes = 0;
  float hit_rate = 0;
  float pressure = 0;
  /// Newest stats row's last_seen; nullopt when the replica has no stats.
  std::optional<micros> last_update;
  /// (key, replica) entries held by the replica in the tenant.
  std::int64_t prefix_count = 0;
  /// Newest last_seen among the replica's entries; nullopt when it holds none.
  std::optional<micros> last_event_at;
  bool stats_reported = false;
  std::int64_t t2_hit_tokens = 0;
  std::int64_t t2_query_tokens = 0;
};

/// One row of /snapshot `tenants`.
struct snapshot_tenant {
  std::string tenant_id;
  /// Distinct prefix keys of the tenant.
  std::int64_t index_entries = 0;
  /// Unweighted mean of the tenant's replicas' latest hit rates.
  float hit_rate = 0;
  bool hit_rate_reported = false;
};

/// The /snapshot aggregate; the reserved tenant is excluded everywhere.
struct snapshot_view {
  /// Sorted by (tenant, replica_id).
  std::vector<snapshot_replica> replicas;
  /// Sorted by tenant_id.
  std::vector<snapshot_tenant> tenants;
  std::int64_t total_prefixes = 0;
  std::int64_t hot_prefixes = 0;

  /// Appends another tenant's view (views of tenants taken in name order stay sorted).
  snapshot_view& operator+=(snapshot_view&& v) {
    replicas.insert(replicas.end(), std::make_move_iterator(v.replicas.begin()),
                    std::make_move_iterator(v.replicas.end()));
    tenants.insert(tenants.end(), std::make_move_iterator(v.tenants.begin()),
                   std::make_move_iterator(v.tenants.end()));
    total_prefixes += v.total_prefixes;
    hot_prefixes += v.hot_prefixes;
    return *this;
  }
};

}  // namespace ic::index
