#include "policy/policy_store.hpp"

#include <cassert>

#include "policy/policy_json.hpp"

namespace ic::policy {

policy_store::policy_store(std::chrono::nanoseconds server_default_ttl)
    : default_ttl_(server_default_ttl) {
  assert(server_default_ttl.count() > 0);
}

void policy_store::apply(const policy_set& set) {
  policy_set normalised = set;
  backfill(normalised);
  resolved_ = resolve_policy_set(normalised, default_ttl_);
  current_ = std::move(normalised);
  pushed_ = true;
}

resolved_policy policy_store::resolve(std::string_view tenant) const {
  const auto it = resolved_.policies.find(tenant);
  if (it == resolved_.policies.end()) return resolved_policy::no_policy(default_ttl_);
  return it->second;
}

tenant_quota policy_store::quota(std::string_view tenant) const {
  if (tenant == reserved_probe_tenant) return std::nullopt;
  const auto it = resolved_.quotas.find(tenant);
  if (it == resolved_.quotas.end()) return std::nullopt;
  return it->second;
}

bool policy_store::has_policy(std::string_view tenant) const {
  return resolved_.policies.find(tenant) != resolved_.policies.end();
}

std::string policy_store::to_bytes() const { return encode_policy_set(current_); }

result<policy_set> policy_store::from_bytes(std::string_view bytes) {
  return decode_policy_set(bytes);
}

std::string policy_store::to_json() const { return encode_policy_set(current_); }

}  // namespace ic::policy
