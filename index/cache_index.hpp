// The cache-aware routing index: every tenant's prefix entries, replica stats and the small
// cross-tenant facts the contract needs (spec/lookup.md §2–§4, extensions.md §4–§5).
//
// `cache_index` owns one `tenant_partition` per tenant plus a `global_facts` record (total
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

#include "index/scoring.hpp"
#include "index/types.hpp"
#include "policy/resolved_policy.hpp"

namespace ic::index {

class tenant_partition;
class snapshot_access;
struct cap_candidate;

/// Totals shared by several indexes of one server (one `cache_index` per tenant actor).
/// Each index adds the change of its own `facts()` after every mutating call, so the
/// shared totals equal the sum of the indexes' facts whenever no mutation is running.
/// Destroying an index does not remove its facts from the totals (the owner does that,
/// e.g. after `split_tenants` they were moved, not destroyed).
struct shared_facts {
  std::atomic<std::int64_t> total_entries{0};
  std::atomic<std::int64_t> reserved_entries{0};
  std::atomic<std::int64_t> total_keys{0};
  /// total_entries − reserved_entries as one counter, so a reader comparing it with the
  /// global cap never pairs an old total with a new reserved count.
  std::atomic<std::int64_t> nonreserved_entries{0};
};

/// Index constants (spec/lookup.md §2.5); the defaults are the reference values.
struct index_options {
  /// Global cap on non-reserved (key × replica) entries; 0 = unbounded. Default 1,000,000.
  std::int64_t max_entries = 1'000'000;
  /// TTL of tenants without a policy (`set_tenant_policy`). Default 30 min.
  std::chrono::nanoseconds default_ttl = policy::default_ttl;
  /// Pressure weight w in clamp(1 − w·p, 0, 1). Default 1.0.
  float pressure_weight = 1.0f;
  /// TTFT below which (and above 0) an SLO is tight. Default 200 ms.
  std::int32_t slo_tight_ttft_ms = 200;
  /// Bias coefficient of a tight SLO. Default 1.0.
  float slo_tight_bias = 1.0f;
  /// Minimum hit rate (>=) for TENANT_HOT. Default 0.1.
  float tenant_hot_min_hit_rate = 0.1f;
  /// Maximum stats age (strict <) for TENANT_HOT; <= 0 disables TENANT_HOT. Default 5 min.
  std::chrono::nanoseconds tenant_hot_max_age = std::chrono::minutes(5);
  /// Shared totals of several indexes (not owned), or nullptr. When set, the cold-start
  /// carve-out of `lookup` reads `shared->total_keys` instead of this index's own count, and
  /// every mutating call adds its change of `facts()` to it. Default nullptr.
  shared_facts* shared = nullptr;
  /// When true, `ingest` does not enforce the global cap (§4.6); the owner merges the cap
  /// order of several indexes with `cap_victim` / `evict_cap`. The cap order is still kept
  /// (when max_entries > 0). Default false.
  bool external_cap = false;
};

/// The index-level lookup request (built by the handler, spec/lookup.md §3.1 H8).
struct index_lookup_request {
  std::string_view tenant;
  std::string_view model;
  std::string_view hash_scheme;
  std::string_view adapter;
  /// Exact key and its token count (used when the chain is empty).
  std::string exact_key;
  std::int32_t exact_count = 0;
  /// Chain hashes and counts; a request is chain-bearing iff either is non-empty.
  std::vector<std::string> chain_hashes;
  std::vector<std::int32_t> chain_counts;
  std::int32_t ttft_ms = 0;
  std::int32_t tbt_ms = 0;
};

/// Outcome class of an index lookup (§3.3).
enum class lookup_strategy : std::uint8_t {
  none = 0,
  prefix_match,
  tenant_hot,
  unknown_tenant,
  unknown_model,
  unknown_hash_scheme,
};

/// Returns the reason-code string of a strategy (NONE reads as NO_HINT).
std::string_view reason_code_of(lookup_strategy s);

/// Identifies one (key, replica) entry for LFU credit. A credit may arrive after later
/// mutations (the server credits delivered lookups asynchronously): the key's identity is
/// carried along, so a credit whose key slot was freed and reused is skipped.
struct entry_ref {
  std::uint32_t tenant_slot = 0;
  std::uint32_t key = 0;
  std::uint32_t replica = 0;
  /// The key's table hash (over its bytes and partition) and partition id when the ref was
  /// taken.
  std::uint64_t key_hash = 0;
  std::uint32_t key_part = 0;
};

/// One scored replica of an index lookup, with the entries that earned its matched tokens.
struct scored_replica {
  replica_score score;
  /// LFU hits (recorded only in LFU tenants).
  std::vector<entry_ref> hits;
};

/// Result of `cache_index::lookup`.
struct index_lookup_result {
  lookup_strategy strategy = lookup_strategy::none;
  /// Sorted score desc, replica_id asc.
  std::vector<scored_replica> scores;
};

/// A read-only view of one (key, replica) entry, for tests and tools.
struct entry_view {
  std::int32_t token_count = 0;
  micros last_seen = 0;
  /// Wire tier as reported back (0 for unknown/negative tiers).
  std::int32_t tier = 0;
  std::int64_t access_count = 0;
};

/// Cross-tenant facts of one index. Each partition updates them as it adds and removes; the
/// server's per-tenant indexes also publish their changes to one `shared_facts` (atomics,
/// below) with the same meaning.
struct global_facts {
  /// (key × replica) entries of every tenant.
  std::int64_t total_entries = 0;
  /// Subset of `total_entries` belonging to the reserved tenant.
  std::int64_t reserved_entries = 0;
  /// Distinct prefix keys of every tenant, reserved included (cold-start carve-out).
  std::int64_t total_keys = 0;
};

/// The next §4.6 cap victim of an index: its order key across indexes.
struct cap_head {
  std::uint32_t count = 0;      ///< effectiveCount (access count in LFU tenants, 0 in LRU)
  micros last_seen = 0;
  std::string tenant;           ///< ties between indexes break by tenant name
};
/// Returns true when `a` is evicted before `b` (count, then last_seen, then tenant name).
bool cap_before(const cap_head& a, const cap_head& b);
/// Same, for a victim given by its parts (no tenant-name copy on the eviction loop).
bool cap_before(std::uint32_t count, micros last_seen, std::string_view tenant, const cap_head& b);

/// One step of the §4.6 cap merge over several indexes (spec: the index whose next victim
/// is first evicts while its next victim stays before every other index's next victim).
struct cap_step {
  static constexpr std::size_t none = static_cast<std::size_t>(-1);
  /// Position (in `heads`) of the index that evicts next; `none` when no index has a victim.
  std::size_t best = none;
  /// The first of the other indexes' next victims: `evict_cap`'s bound (nullopt = none).
  std::optional<cap_head> bound;
};
/// Picks the next cap-merge step from every index's next victim (`cap_victim()`, nullopt =
/// none). The one rule of the merge: `state::enforce_cap` (replay) and the coordinator
/// actor (live, by messages) both call it.
cap_step pick_cap_step(const std::vector<std::optional<cap_head>>& heads);

/// Memory accounting of the index's own data structures (bytes, approximate).
struct memory_breakdown {
  std::size_t key_records = 0;
  std::size_t replica_arrays = 0;
  std::size_t hash_slots = 0;
  std::size_t order_refs = 0;
  std::size_t other = 0;
  std::size_t total() const {
    return key_records + replica_arrays + hash_slots + order_refs + other;
  }
};

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

  /// Returns this index's own cross-tenant facts (not the shared totals).
  const global_facts& facts() const { return facts_; }
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
  struct facts_guard;            // publishes a public call's change of facts_ to shared

  tenant_partition* find_partition(std::string_view tenant) const;
  tenant_partition& partition(std::string_view tenant);
  void enforce_cap(micros now, change_log* changes, ingest_result& result);
  /// Returns the partition holding the next cap victim (and the victim), or nullptr.
  tenant_partition* next_cap_victim(cap_candidate& victim);
  std::int64_t evict_cap_impl(const cap_head* bound, std::int64_t max, micros ts,
                              change_log* changes, ingest_result& result);
  /// Adds facts_ − before to options_.shared (when set).
  void publish_facts(const global_facts& before);
  const policy::resolved_policy& policy_of(std::string_view tenant) const;

  index_options options_;
  global_facts facts_;
  policy::resolved_policy default_policy_;
  std::map<std::string, policy::resolved_policy, std::less<>> policies_;
  std::map<std::string, std::int64_t, std::less<>> quotas_;
  /// Partitions by tenant name (sorted: snapshot order); `slots_` indexes them stably.
  std::map<std::string, tenant_partition*, std::less<>> by_name_;
  std::vector<std::unique_ptr<tenant_partition>> slots_;
};

/// Returns worst(a, b) of §3.5 on wire tier values (UNSPECIFIED wins, else the colder).
std::int32_t worst_tier(std::int32_t a, std::int32_t b);
/// Returns the §3.10 affinity seed of a resolved chain: concat of uint32_be(len) ‖ hash.
std::string chain_affinity_seed(const std::vector<std::string>& chain);
/// Returns the index into `n` candidates picked by SHA-256(seed) (§3.10); n must be > 0.
std::size_t affinity_index(std::string_view seed, std::size_t n);

}  // namespace ic::index
