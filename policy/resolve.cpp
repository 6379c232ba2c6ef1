#include "policy/resolve.hpp"

#include <algorithm>
#include <string_view>

namespace ic::policy {
namespace {

/// Returns true when `s` equals "lfu" ignoring ASCII case.
bool is_lfu(std::string_view s) {
  if (s.size() != 3) return false;
  const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  return lower(s[0]) == 'l' && lower(s[1]) == 'f' && lower(s[2]) == 'u';
}

}  // namespace

resolved_policy resolve_policy(const cache_policy& p, std::chrono::nanoseconds server_default_ttl) {
  resolved_policy r;
  r.eviction_ttl = p.eviction_ttl_ns > 0 ? std::chrono::nanoseconds{p.eviction_ttl_ns}
                                         : server_default_ttl;
  r.eviction = is_lfu(p.eviction) ? eviction_mode::lfu : eviction_mode::lru;
  r.minimum_prefix_tokens = std::max(p.minimum_prefix_tokens, 0);
  r.minimum_matched_tokens = std::max(p.minimum_matched_tokens, 0);
  if (!p.routing_floor_score) {
    r.routing_floor_score = default_routing_floor_score;
  } else {
    r.routing_floor_score = *p.routing_floor_score < 0.0f ? 0.0f : *p.routing_floor_score;
  }
  r.lookup_timeout_ms = std::max(p.lookup_timeout_ms, 0);
  r.affinity_routing = p.affinity_routing.value_or(true);
  const policy_strategy s = p.strategy.value_or(policy_strategy{});
  r.enable_chain_matching = s.enable_chain_matching.value_or(true);
  r.require_chain = s.require_chain.value_or(false);
  r.enable_tenant_hot = s.enable_tenant_hot.value_or(true);
  return r;
}

std::int64_t resolve_quota(const cache_tenant& tenant) {
  return std::max<std::int64_t>(tenant.max_index_entries, 0);
}

resolved_policy_set resolve_policy_set(const policy_set& set,
                                       std::chrono::nanoseconds server_default_ttl) {
  resolved_policy_set out;
  for (const auto& p : set.policies) {
    if (p.namespace_name.empty()) continue;
    out.policies.insert_or_assign(p.namespace_name, resolve_policy(p, server_default_ttl));
  }
  for (const auto& t : set.tenants) {
    if (t.tenant_id.empty() || t.tenant_id == reserved_probe_tenant) continue;
    out.quotas.insert_or_assign(t.tenant_id, resolve_quota(t));
  }
  return out;
}

}  // namespace ic::policy
