// The current policy set of the server: what consumers resolve tenants against.
//
// `policy_store` is plain, single-threaded state (the policy actor owns one). It holds the
// last accepted `/policy` push (normalised by the version back-fill) and its resolution.
// `apply` is replace-on-write (spec/operations.md §2.3): a namespace absent from the new
// set reverts to "no policy", a tenant absent reverts to unbounded; there is no sequencing,
// the last applied set wins. Before any push every tenant has no policy and no quota.
//
// Persistence: `to_bytes()` is the canonical JSON of the accepted set (see
// policy/policy_json.hpp); `from_bytes()` decodes it back to the identical `policy_set`,
// so a journal that stores the bytes and re-applies them on replay rebuilds the same store.
//
//   ic::policy::policy_store store{std::chrono::minutes{30}};   // --default-ttl
//   auto set = ic::policy::parse_policy_body(body);              // 400 on error
//   journal.append(ic::policy::encode_policy_set(*set));         // then
//   store.apply(*set);
//   ic::policy::resolved_policy p = store.resolve("team-a");
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "policy/policy_set.hpp"
#include "policy/resolve.hpp"
#include "policy/resolved_policy.hpp"
#include "policy/result.hpp"

namespace ic::policy {

/// Holds the accepted policy set and answers per-tenant policy and quota queries.
class policy_store {
 public:
  /// Creates an empty store; `server_default_ttl` is `--default-ttl` (precondition: > 0).
  explicit policy_store(std::chrono::nanoseconds server_default_ttl = ::ic::policy::default_ttl);

  /// Replaces every policy and quota with `set` (back-filled if its version is below 7).
  void apply(const policy_set& set);

  /// Returns the tenant's resolved policy, or `resolved_policy::no_policy(default_ttl())`.
  resolved_policy resolve(std::string_view tenant) const;

  /// Returns the tenant's quota: nullopt (unbounded) when none; always nullopt for the
  /// reserved probe tenant; otherwise ≥ 0 (0 = admit nothing).
  tenant_quota quota(std::string_view tenant) const;

  /// Returns true when a CachePolicy entry applies to `tenant` (vs the no-policy defaults).
  bool has_policy(std::string_view tenant) const;

  /// Returns true once any set has been applied.
  bool has_pushed() const { return pushed_; }

  /// Returns the accepted set (an empty version-7 set before any push).
  const policy_set& current() const { return current_; }

  /// Returns the resolved view of `current()`.
  const resolved_policy_set& resolved() const { return resolved_; }

  /// Returns the TTL used when no policy sets one (`--default-ttl`).
  std::chrono::nanoseconds default_ttl() const { return default_ttl_; }

  /// Returns the canonical bytes of `current()` for the journal.
  std::string to_bytes() const;

  /// Decodes bytes written by `to_bytes()`; errors are one line (corrupt record).
  static result<policy_set> from_bytes(std::string_view bytes);

  /// Returns the GET /policy body: the canonical JSON of `current()`.
  std::string to_json() const;

 private:
  std::chrono::nanoseconds default_ttl_;
  bool pushed_ = false;
  policy_set current_;
  resolved_policy_set resolved_;
};

}  // namespace ic::policy
