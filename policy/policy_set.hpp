// The `/policy` wire model: one decoded push of CachePolicy and CacheTenant entries.
//
// A `policy_set` mirrors the JSON body `{version, policies[], tenants[]}` of
// spec/operations.md §2.2 field for field, *before* resolution: pointer-like fields stay
// `std::optional` (absent/null = nil), plain fields keep Go's zero value when absent, and
// nothing is clamped or defaulted here except the version back-fill of §2.2 (see
// `backfill` in policy/policy_json.hpp). Resolution into per-tenant knobs lives in
// policy/resolve.hpp; the store that holds the current set is policy/policy_store.hpp.
//
//   auto set = ic::policy::parse_policy_body(body);     // policy/policy_json.hpp
//   if (set) store.apply(*set);
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ic::policy {

/// Oldest `/policy` schema version accepted (`PolicyMinimumAcceptedVersion`).
inline constexpr std::int64_t min_accepted_version = 3;
/// Current `/policy` schema version (`PolicyPropagationVersion`); newest accepted.
inline constexpr std::int64_t current_version = 7;
/// Largest accepted `/policy` body in bytes (1 MiB); larger bodies are a 400.
inline constexpr std::size_t max_body_bytes = std::size_t{1} << 20;
/// The reserved self-test tenant: never has a quota (spec/lookup.md §2.8).
inline constexpr std::string_view reserved_probe_tenant = "inferencecache.io/probe";

/// `policies[].strategy`: every field nil (absent or null) means "default".
struct policy_strategy {
  /// `enableChainMatching`; nil ⇒ true.
  std::optional<bool> enable_chain_matching;
  /// `requireChain`; nil ⇒ false.
  std::optional<bool> require_chain;
  /// `enableTenantHot`; nil ⇒ true.
  std::optional<bool> enable_tenant_hot;

  friend bool operator==(const policy_strategy& a, const policy_strategy& b) {
    return a.enable_chain_matching == b.enable_chain_matching &&
           a.require_chain == b.require_chain && a.enable_tenant_hot == b.enable_tenant_hot;
  }
  friend bool operator!=(const policy_strategy& a, const policy_strategy& b) { return !(a == b); }
};

/// One `policies[]` entry (a CachePolicy, keyed by namespace = tenant id), as decoded.
struct cache_policy {
  /// `namespace`: the tenant key; "" entries are dropped at resolution. Default "".
  std::string namespace_name;
  /// `evictionTTL` in nanoseconds (a Go `time.Duration` integer); ≤ 0 ⇒ server TTL. Default 0.
  std::int64_t eviction_ttl_ns = 0;
  /// `minimumPrefixTokens`; ≤ 0 ⇒ no gate. Default 0.
  std::int32_t minimum_prefix_tokens = 0;
  /// `minimumMatchedTokens`; 0 ⇒ floor off, negative ⇒ 0. Default 0 (64 back-filled for v3).
  std::int32_t minimum_matched_tokens = 0;
  /// `routingFloorScore` (float32 pointer); nil ⇒ 0.1, negative ⇒ 0. Default nil.
  std::optional<float> routing_floor_score;
  /// `lookupTimeoutMs`; ≤ 0 ⇒ no budget. Default 0.
  std::int32_t lookup_timeout_ms = 0;
  /// `affinityRouting` (bool pointer); nil ⇒ true. Default nil.
  std::optional<bool> affinity_routing;
  /// `eviction`: "lfu" (any case) ⇒ LFU, anything else ⇒ LRU. Default "".
  std::string eviction;
  /// `strategy` (pointer); nil ⇒ every strategy default. Default nil.
  std::optional<policy_strategy> strategy;

  friend bool operator==(const cache_policy& a, const cache_policy& b) {
    return a.namespace_name == b.namespace_name && a.eviction_ttl_ns == b.eviction_ttl_ns &&
           a.minimum_prefix_tokens == b.minimum_prefix_tokens &&
           a.minimum_matched_tokens == b.minimum_matched_tokens &&
           a.routing_floor_score == b.routing_floor_score &&
           a.lookup_timeout_ms == b.lookup_timeout_ms &&
           a.affinity_routing == b.affinity_routing && a.eviction == b.eviction &&
           a.strategy == b.strategy;
  }
  friend bool operator!=(const cache_policy& a, const cache_policy& b) { return !(a == b); }
};

/// One `tenants[]` entry (a CacheTenant quota, keyed by tenantID), as decoded.
struct cache_tenant {
  /// `tenantID`; "" entries are dropped at resolution. Default "".
  std::string tenant_id;
  /// `maxIndexEntries` (not omitempty: absent = 0 = admit nothing); negative ⇒ 0. Default 0.
  std::int64_t max_index_entries = 0;
  /// `isolationMode`: carried and echoed, otherwise ignored ("Fairness" only). Default "".
  std::string isolation_mode;

  friend bool operator==(const cache_tenant& a, const cache_tenant& b) {
    return a.tenant_id == b.tenant_id && a.max_index_entries == b.max_index_entries &&
           a.isolation_mode == b.isolation_mode;
  }
  friend bool operator!=(const cache_tenant& a, const cache_tenant& b) { return !(a == b); }
};

/// A whole `/policy` body: replaces every policy and quota when applied.
struct policy_set {
  /// `version`: the schema version (3..7 accepted), not a sequence number. Default 7.
  std::int64_t version = current_version;
  /// `policies`, in body order (null/absent = empty).
  std::vector<cache_policy> policies;
  /// `tenants`, in body order (null/absent = empty = no quotas).
  std::vector<cache_tenant> tenants;

  friend bool operator==(const policy_set& a, const policy_set& b) {
    return a.version == b.version && a.policies == b.policies && a.tenants == b.tenants;
  }
  friend bool operator!=(const policy_set& a, const policy_set& b) { return !(a == b); }
};

}  // namespace ic::policy
