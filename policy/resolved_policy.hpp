// The per-tenant policy knobs after resolution with defaults (spec/lookup.md §2.9).
//
// `resolved_policy` is what every consumer reads: the lookup gates, the tenant index (TTL,
// eviction mode) and the gateway (lookup budget). It is produced by the policy store from a
// `/policy` push or a `--policy-file`; `resolved_policy::no_policy()` is the value for a
// tenant that has no CachePolicy (which differs from a policy with zero-valued fields).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace ic::policy {

/// Eviction order used when the global cap picks victims in a tenant.
enum class eviction_mode : std::uint8_t { lru = 0, lfu = 1 };

/// Global defaults that apply when no policy sets a value.
inline constexpr std::chrono::minutes default_ttl{30};
inline constexpr std::int32_t default_minimum_matched_tokens = 64;
inline constexpr float default_routing_floor_score = 0.1f;

/// One tenant's resolved policy (every field already defaulted and clamped).
struct resolved_policy {
  /// Entry TTL; never zero or negative after resolution. Default: the server's --default-ttl.
  std::chrono::nanoseconds eviction_ttl = default_ttl;
  /// LRU unless the policy says "lfu" (case-insensitive).
  eviction_mode eviction = eviction_mode::lru;
  /// Pre-lookup size gate in tokens; 0 = off. Default 0.
  std::int32_t minimum_prefix_tokens = 0;
  /// Floor on a replica's matched tokens for PREFIX_MATCH; 0 = off. Default 64.
  std::int32_t minimum_matched_tokens = default_minimum_matched_tokens;
  /// Floor on the top PREFIX_MATCH score (strict <); 0 = off. Default 0.1.
  float routing_floor_score = default_routing_floor_score;
  /// Lookup budget in ms; 0 = no budget. Default 0.
  std::int32_t lookup_timeout_ms = 0;
  /// Fall back to AFFINITY_HINT when nothing else matched. Default true.
  bool affinity_routing = true;
  /// strategy.enableChainMatching. Default true.
  bool enable_chain_matching = true;
  /// strategy.requireChain. Default false.
  bool require_chain = false;
  /// strategy.enableTenantHot. Default true.
  bool enable_tenant_hot = true;

  /// Returns the resolution for a tenant without any CachePolicy.
  static resolved_policy no_policy() { return resolved_policy{}; }

  /// Returns the resolution for a tenant without any CachePolicy under a server whose
  /// `--default-ttl` is `server_default_ttl` (precondition: > 0).
  static resolved_policy no_policy(std::chrono::nanoseconds server_default_ttl) {
    resolved_policy p;
    p.eviction_ttl = server_default_ttl;
    return p;
  }

  friend bool operator==(const resolved_policy& a, const resolved_policy& b) {
    return a.eviction_ttl == b.eviction_ttl && a.eviction == b.eviction &&
           a.minimum_prefix_tokens == b.minimum_prefix_tokens &&
           a.minimum_matched_tokens == b.minimum_matched_tokens &&
           a.routing_floor_score == b.routing_floor_score &&
           a.lookup_timeout_ms == b.lookup_timeout_ms && a.affinity_routing == b.affinity_routing &&
           a.enable_chain_matching == b.enable_chain_matching &&
           a.require_chain == b.require_chain && a.enable_tenant_hot == b.enable_tenant_hot;
  }
  friend bool operator!=(const resolved_policy& a, const resolved_policy& b) { return !(a == b); }
};

/// A tenant quota (CacheTenant.maxIndexEntries): nullopt = unbounded, 0 = admit nothing.
using tenant_quota = std::optional<std::int64_t>;

}  // namespace ic::policy
