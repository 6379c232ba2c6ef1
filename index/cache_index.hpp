// The cache-aware routing index: every tenant's prefix entries, replica stats and the small
// cross-tenant facts the contract needs (spec/lookup.md §2–§4, extensions.md §4–§5).
//
// `cache_index` owns one `tenant_index` per tenant plus a `global_facts` record (total
// entries, reserved entries, total keys: the global cap and the cold-start carve-out read
// these). It is plain C++ with one writer: mutations must be serialised (e.g. one actor),
// and const calls may run concurrently with each other but never with a mutation (lookups
// use thread-local scratch; see concurrent_lookup_test.cpp). No method reads a clock — time is always an argument, so feeding the same timestamped
// inputs to two indexes gives the same state (deterministic replay).
//
//   ic::index::cache_index idx;                      // cap 1,000,000, TTL 30 min
//   idx.ingest(update, now_us);                      // ReportCacheState message
//   idx.apply_event(event, now_us);                  // PublishEvent
//   auto r = idx.lookup(request, policy, now_us);    // §3.3 orchestrator
//   idx.sweep(now_us);                               // every sweep interval
//
// Sharded servers run one `cache_index` per tenant actor: `index_options::shared` (totals
// for the carve-out), `external_cap` + `cap_victim` / `evict_cap` (the owner merges the §4.6
// order across indexes); a combined single-index snapshot loads straight into one index
// per tenant (`snapshot_loader` with a per-tenant target); see
// index/README.md "Sharding".
//
// The handler steps of LookupRoute (policy gates, dual input, floors, affinity, LFU credit)
// live in index/route_lookup.hpp and call into this class.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "index/index_types.hpp"
#include "index/types.hpp"
#include "policy/resolved_policy.hpp"

namespace ic::index {

class tenant_index;
class snapshot_access;
struct cap_candidate;

/// The whole index: every tenant's partition plus `global_facts`.
class cache_index {
 public:
  /// Creates an empty index with the given constants.
  explicit cache_index(index_options options = {});
  ~cache_index();
  cache_index(const cache_index&) = delete;
  cache_index& operator=(const cache_index&) = delete;

  /// Installs a tenant's resolved policy (TTL, eviction mode for cap/LFU). Tenants without
  /// one use `resolved_policy::no_policy()` with `options.default_ttl`.
  void set_tenant_policy(std::string_view tenant, const policy::resolved_policy& policy);
  /// Installs a tenant's quota (nullopt = unbounded, negative clamped to 0). Enforced at the
  /// tenant's next ingest (§4.5). The reserved tenant never has one.
  void set_tenant_quota(std::string_view tenant, policy::tenant_quota quota);

  /// Applies one CacheStateUpdate (§2.6) at `now`; records changes in `changes` when given.
  /// Producers' reserved-tenant messages are skipped (RESERVED_TENANT).
  ingest_result ingest(const cache_state_update& update, micros now, change_log* changes = nullptr,
                       input_origin origin = input_origin::producer);
  /// Applies one CacheEvent (§2.7) at `now`.
  event_result apply_event(const cache_event& event, micros now, change_log* changes = nullptr,
                           input_origin origin = input_origin::producer);
  /// Removes every entry and stats row whose age at `now` reaches its tenant's TTL (§4.7).
  /// For tests and benchmarks: the server and replay run `sweep_step` slices.
  sweep_result sweep(micros now, change_log* changes = nullptr);

  /// Where a sliced sweep stands (see `sweep_step`). A default cursor starts a sweep.
  struct sweep_cursor {
    std::string tenant;       ///< partition being swept ("" before the first)
    std::uint32_t key = 0;    ///< next key slot in that partition
    bool started = false;
  };
  /// Runs the next slice (at most `max_keys` key slots) of the sweep at `now`, adding to
  /// `result`; returns true when the sweep is complete. Slices run back to back with no
  /// other mutation in between give exactly `sweep(now)`'s state, results and change order;
  /// const readers may run between slices (they see a partly swept index, whose expired
  /// entries matching ignores anyway).
  bool sweep_step(micros now, sweep_cursor& cursor, std::size_t max_keys, change_log* changes,
                  sweep_result& result);

  /// Runs the §3.3 orchestrator: exact / chain match, TENANT_HOT, miss classifier. The TTL
  /// and eviction mode come from `policy`. Does not credit LFU (see `credit_lfu`).
  index_lookup_result lookup(const index_lookup_request& request,
                             const policy::resolved_policy& policy, micros now) const;
  /// Returns the §3.10 affinity pick for `seed` among the scope's serving replicas, or
  /// nullopt (empty tenant/model/scheme, empty seed or no serving replica).
  std::optional<std::string> affinity_pick(std::string_view tenant, std::string_view model,
                                           std::string_view hash_scheme,
                                           std::string_view seed) const;
  /// Adds 1 to the LFU counter of every hit of `replicas` (§3.12); stale refs are skipped.
  void credit_lfu(const std::vector<scored_replica>& replicas);

  /// Returns the GetCacheState view (§4.3) of (tenant, model).
  cache_state_view get_cache_state(std::string_view tenant, std::string_view model) const;
  /// Returns the /snapshot aggregate (operations.md §3.3). O(entries).
  snapshot_view snapshot() const;
  /// Returns distinct keys per model over non-reserved tenants (`index_entries{model}`),
  /// sorted by model; models with 0 keys are absent.
  std::vector<std::pair<std::string, std::int64_t>> entries_by_model() const;

  /// Returns the next §4.6 cap victim of this index (over its non-reserved partitions: min
  /// of (effectiveCount, last_seen), ties by tenant name, then the partition's own order),
  /// or nullopt when there is none. Non-const: it drops stale order refs.
  std::optional<cap_head> cap_victim();
  /// Evicts cap victims in §4.6 order while the next one sorts before `bound` (no bound:
  /// any) and fewer than `max` were evicted in this call; counts them in
  /// result.cap_evicted_lru / cap_evicted_lfu, records changes (cause cap, time `ts`) and
  /// returns how many were evicted. The same code enforces the cap inside `ingest`.
  std::int64_t evict_cap(const std::optional<cap_head>& bound, std::int64_t max, micros ts,
                         change_log* changes, ingest_result& result);

  /// Moves every tenant partition (with its policy and quota) into an index of its own,
  /// built with `per_tenant` options, leaving this index empty (facts zero; when this index
  /// has `options.shared`, its facts are subtracted from it). Adds each new index's facts
  /// to `per_tenant.shared` when set. Sorted by tenant name. `per_tenant` should differ
  /// from this index's options only in `shared` / `external_cap`. LFU refs taken from this
  /// index before the split do not credit the new ones. For tests (the equivalence of the
  /// combined and per-tenant forms); the server splits a combined snapshot as it loads.
  std::vector<std::pair<std::string, std::unique_ptr<cache_index>>> split_tenants(
      const index_options& per_tenant);

  /// Returns the tenant's index, or nullptr when the tenant holds nothing here.
  const tenant_index* tenant(std::string_view tenant) const { return find_partition(tenant); }
  /// Returns the tenant's index, creating it (under its policy and quota) when absent.
  tenant_index& tenant_or_add(std::string_view tenant) { return partition(tenant); }
  /// Returns the distinct keys the miss classifier reads: `options.shared->total_keys` when
  /// set, else the sum over this index's tenants.
  std::int64_t lookup_total_keys() const;
  /// Returns this index's own cross-tenant facts (the sum over its tenants; not the shared
  /// totals).
  global_facts facts() const;
  /// Returns the options the index was built with.
  const index_options& options() const { return options_; }
  /// Returns the number of distinct keys of `tenant` (prefixes_by_tenant).
  std::int64_t tenant_keys(std::string_view tenant) const;
  /// Returns the number of distinct keys of (tenant, model) (prefixes_by_tenant_model).
  std::int64_t model_keys(std::string_view tenant, std::string_view model) const;
  /// Returns serving_by_scope[(tenant, model, scheme)] as (replica, key count), sorted.
  std::vector<std::pair<std::string, std::int64_t>> serving(std::string_view tenant,
                                                            std::string_view model,
                                                            std::string_view hash_scheme) const;
  /// Returns the (key, replica) entry, if present.
  std::optional<entry_view> find_entry(std::string_view tenant, std::string_view model,
                                       std::string_view hash_scheme, std::string_view adapter,
                                       std::string_view prefix_hash,
                                       std::string_view replica) const;
  /// Returns a canonical, sorted text dump of the whole state (entries, stats, counters);
  /// two indexes with equal dumps answer every query the same.
  std::vector<std::string> canonical_dump() const;
  /// Returns the bytes held by the index's data structures.
  memory_breakdown memory_usage() const;

 private:
  friend class snapshot_access;  // index/snapshot_{writer,loader}.cpp read and rebuild the state

  tenant_index* find_partition(std::string_view tenant) const;
  tenant_index& partition(std::string_view tenant);
  /// The options of this index's tenants: the cap is merged here, over every tenant.
  index_options tenant_options() const;
  void enforce_cap(micros now, change_log* changes, ingest_result& result);
  /// Returns the tenant holding the next cap victim (and the victim), or nullptr.
  tenant_index* next_cap_victim(cap_candidate& victim);
  std::int64_t evict_cap_impl(const cap_head* bound, std::int64_t max, micros ts,
                              change_log* changes, ingest_result& result);
  /// Adds every tenant's facts to options_.shared (after a snapshot load).
  void publish_loaded();

  index_options options_;
  std::map<std::string, policy::resolved_policy, std::less<>> policies_;
  std::map<std::string, std::int64_t, std::less<>> quotas_;
  /// Tenants by name (sorted: snapshot order); `slots_` indexes them stably.
  std::map<std::string, tenant_index*, std::less<>> by_name_;
  std::vector<std::unique_ptr<tenant_index>> slots_;
};


}  // namespace ic::index
