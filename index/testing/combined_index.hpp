// The combined multi-tenant index: a test oracle, not production code (linked only into
// tests through `ic_index_testing`). It holds every tenant's `tenant_index` in one object,
// with the per-tenant policy and quota maps and a built-in global cap (§4.6) merged over its
// tenants by the same `pick_cap_step` rule the server's coordinator runs, so the index tests
// can state spec scenarios over several tenants in one line, and the equivalence tests can
// compare the server's per-tenant indexes (sharded) against one combined history.
//
//   ic::index::combined_index idx;                    // cap 1,000,000, TTL 30 min
//   idx.ingest(update, now_us);                        // any tenant's update
//   auto r = idx.lookup(request, policy, now_us);      // lookup_tenant over request.tenant
//   idx.credit_lfu(request.tenant, r.scores);
//
// Everything it does goes through `tenant_index`'s public API; it adds only the tenant map
// and the merge. v1 (combined) snapshots are written and read with the helpers at the end.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "index/route_lookup.hpp"
#include "index/snapshot_codec.hpp"
#include "index/tenant_index.hpp"

namespace ic::index {

/// The facts of a combined index (the sum over its tenants); the name the tests know.
using global_facts = index_facts;

/// Every tenant's index in one object, with a built-in global cap. For tests.
class combined_index {
 public:
  /// Creates an empty index with the given constants (`options.shared`, when set, receives
  /// every tenant's changes; `external_cap` leaves the cap to the caller).
  explicit combined_index(index_options options = {});
  ~combined_index();
  combined_index(const combined_index&) = delete;
  combined_index& operator=(const combined_index&) = delete;

  /// Installs a tenant's resolved policy; tenants without one use the default TTL.
  void set_tenant_policy(std::string_view tenant, const policy::resolved_policy& policy);
  /// Installs a tenant's quota (nullopt = unbounded, negative clamped to 0).
  void set_tenant_quota(std::string_view tenant, policy::tenant_quota quota);

  /// Applies an update of any tenant (ingest and quota in its index, then the global cap
  /// merged over every tenant unless `external_cap`).
  ingest_result ingest(const cache_state_update& update, micros now, change_log* changes = nullptr,
                       input_origin origin = input_origin::producer);
  /// Applies an event of any tenant.
  event_result apply_event(const cache_event& event, micros now, change_log* changes = nullptr,
                           input_origin origin = input_origin::producer);
  /// Sweeps every tenant (name order).
  sweep_result sweep(micros now, change_log* changes = nullptr);

  /// Where a sliced sweep over every tenant stands.
  struct sweep_cursor {
    std::string tenant;                ///< tenant being swept ("" before the first)
    tenant_index::sweep_cursor inner;  ///< where that tenant's sweep stands
    bool started = false;
  };
  /// Runs the next slice (at most `max_keys` key slots over the tenants, in name order);
  /// true when every tenant is swept.
  bool sweep_step(micros now, sweep_cursor& cursor, std::size_t max_keys, change_log* changes,
                  sweep_result& result);

  /// `lookup_tenant` over `request.tenant` with this index's total keys.
  index_lookup_result lookup(const index_lookup_request& request,
                             const policy::resolved_policy& policy, micros now) const;
  /// `affinity_pick` over `tenant` (nullopt for an empty tenant name).
  std::optional<std::string> affinity_pick(std::string_view tenant, std::string_view model,
                                           std::string_view hash_scheme,
                                           std::string_view seed) const;
  /// Credits the LFU hits of a lookup of `tenant`.
  void credit_lfu(std::string_view tenant, const std::vector<scored_replica>& replicas);

  cache_state_view get_cache_state(std::string_view tenant, std::string_view model) const;
  snapshot_view snapshot() const;
  std::vector<std::pair<std::string, std::int64_t>> entries_by_model() const;

  /// The next cap victim over every tenant, and the bounded eviction (as one index would).
  std::optional<cap_head> cap_victim();
  std::int64_t evict_cap(const std::optional<cap_head>& bound, std::int64_t max, micros ts,
                         change_log* changes, ingest_result& result);

  /// Moves every tenant into a combined index of its own built with `per_tenant` options
  /// (its facts leave this index's shared totals and join `per_tenant.shared`), leaving this
  /// index empty. Sorted by tenant name.
  std::vector<std::pair<std::string, std::unique_ptr<combined_index>>> split_tenants(
      const index_options& per_tenant);

  /// The sum of the tenants' facts (not the shared totals).
  global_facts facts() const;
  const index_options& options() const { return options_; }
  /// The tenant's index, or nullptr.
  const tenant_index* tenant(std::string_view tenant) const;
  /// The tenant's index, created (under its policy and quota) when absent.
  tenant_index& tenant_or_add(std::string_view tenant);
  /// Every tenant's index in creation order (the v1 snapshot order).
  std::vector<const tenant_index*> tenants() const;
  /// The total keys the miss classifier reads (`options.shared` when set, else the sum).
  std::int64_t lookup_total_keys() const;
  std::int64_t tenant_keys(std::string_view tenant) const;
  std::int64_t model_keys(std::string_view tenant, std::string_view model) const;
  std::vector<std::pair<std::string, std::int64_t>> serving(std::string_view tenant,
                                                            std::string_view model,
                                                            std::string_view hash_scheme) const;
  std::optional<entry_view> find_entry(std::string_view tenant, std::string_view model,
                                       std::string_view hash_scheme, std::string_view adapter,
                                       std::string_view prefix_hash,
                                       std::string_view replica) const;
  /// The canonical dump of every tenant as one index prints it (one `G|` line of sums).
  std::vector<std::string> canonical_dump() const;
  memory_breakdown memory_usage() const;

 private:
  index_options tenant_options() const;
  void enforce_cap(micros ts, change_log* changes, ingest_result& result);

  index_options options_;
  std::map<std::string, policy::resolved_policy, std::less<>> policies_;
  std::map<std::string, std::int64_t, std::less<>> quotas_;
  std::map<std::string, tenant_index*, std::less<>> by_name_;
  std::vector<std::unique_ptr<tenant_index>> order_;  ///< creation order
};

/// Writes a combined index as one v1 stream (every tenant, creation order).
bool write_snapshot(const combined_index& idx, const std::function<bool(std::string_view)>& sink,
                    std::size_t chunk_bytes = 1 << 20);
/// A loader of a v1 stream into an empty combined index (tenants created in stream order).
snapshot_loader combined_loader(combined_index& target);
/// A loader that puts each tenant of a v1 stream into a combined index of its own
/// (`target_of(name)` returns an empty one, not owned).
snapshot_loader combined_split_loader(std::function<combined_index*(std::string_view)> target_of);

/// The LookupRoute steps over a combined index: `decide_route` on the request's tenant,
/// and the H13 credit to it.
route_decision decide_route(const combined_index& index, const lookup_route_request& request,
                            const route_plan& plan, const policy::resolved_policy& policy,
                            micros now);
void commit_route(combined_index& index, const lookup_route_request& request,
                  const route_decision& decision);
/// Every step without a deadline (latency left 0).
lookup_route_response route_lookup(combined_index& index, const lookup_route_request& request,
                                   const policy::resolved_policy& policy, micros now,
                                   const route_options& options = {});

}  // namespace ic::index
