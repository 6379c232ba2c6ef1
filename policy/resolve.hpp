// Policy resolution: from decoded `/policy` entries to per-tenant knobs and quotas.
//
// Implements the table of spec/lookup.md §2.9 (and operations.md §2.4) exactly. The tenant
// key of a CachePolicy is its namespace; the key of a quota is the CacheTenant's tenantID.
// "No policy" (no entry for the tenant: `resolved_policy::no_policy(ttl)`) differs from "a
// policy with zero-valued fields": the latter turns the matched-tokens floor off. The
// server's `--default-ttl` replaces the reference's fixed 30 min fallback, so every
// function here takes it as a parameter.
//
//   auto set = ic::policy::resolve_policy_set(*parsed, std::chrono::minutes{30});
//   auto it = set.policies.find("team-a");
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "policy/policy_set.hpp"
#include "policy/resolved_policy.hpp"

namespace ic::policy {

/// Resolves one CachePolicy entry with defaults and clamps (§2.9 "policy present" column);
/// `server_default_ttl` (> 0) stands in for a TTL that is absent or ≤ 0.
resolved_policy resolve_policy(const cache_policy& policy,
                               std::chrono::nanoseconds server_default_ttl);

/// Returns a CacheTenant entry's quota: `maxIndexEntries`, negative clamped to 0.
std::int64_t resolve_quota(const cache_tenant& tenant);

/// Every tenant's resolved policy and quota after one push (absent key = defaults/unbounded).
struct resolved_policy_set {
  /// Resolved policy per namespace; "" dropped; a repeated namespace: the last entry wins.
  std::map<std::string, resolved_policy, std::less<>> policies;
  /// Quota per tenantID; "" and the reserved probe tenant dropped; repeated: the last wins.
  std::map<std::string, std::int64_t, std::less<>> quotas;
};

/// Resolves a whole decoded set (replace-on-write: the result stands alone).
resolved_policy_set resolve_policy_set(const policy_set& set,
                                       std::chrono::nanoseconds server_default_ttl);

}  // namespace ic::policy
