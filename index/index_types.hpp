// The public value types of the per-tenant index (`index::tenant_index`): its options,
// the totals several indexes of one server share (`shared_facts`), the index-level lookup
// request and result, LFU entry refs, the §4.6 cap-merge heads and step, memory accounting,
// and the small §3 helpers (worst tier, affinity seed and pick).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "index/scoring.hpp"
#include "index/types.hpp"
#include "policy/resolved_policy.hpp"

namespace ic::index {

/// Totals shared by the tenant indexes of one server (one `tenant_index` per tenant actor).
/// Each index adds the change of its own `facts()` after every mutating call, so the
/// shared totals equal the sum of the indexes' facts whenever no mutation is running.
/// Destroying an index does not remove its facts from the totals (the owner does that).
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
  /// The key-record slab grows in chunks of 2^key_chunk_bits records (32 bytes each),
  /// clamped to [4, 20]; fixed for the index's lifetime (`rebind` keeps the slab). The
  /// default 12 (4096 records, 128 KiB per chunk) suits large tenants; a smaller value costs
  /// a tenant with few keys less memory (many small tenants, tests, fuzzing). Default 12.
  unsigned key_chunk_bits = 12;
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

/// Result of an index lookup (`tenant_index::lookup`, `lookup_tenant`).
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

/// The facts of one index (`tenant_index::facts()`, derived from its counters), with the
/// meaning of the `shared_facts` totals every index publishes its changes to.
struct index_facts {
  /// (key × replica) entries.
  std::int64_t total_entries = 0;
  /// Subset of `total_entries` belonging to the reserved tenant.
  std::int64_t reserved_entries = 0;
  /// Distinct prefix keys, reserved included (cold-start carve-out).
  std::int64_t total_keys = 0;

  index_facts& operator+=(const index_facts& o) {
    total_entries += o.total_entries;
    reserved_entries += o.reserved_entries;
    total_keys += o.total_keys;
    return *this;
  }
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
  memory_breakdown& operator+=(const memory_breakdown& o) {
    key_records += o.key_records;
    replica_arrays += o.replica_arrays;
    hash_slots += o.hash_slots;
    order_refs += o.order_refs;
    other += o.other;
    return *this;
  }
};

/// Returns worst(a, b) of §3.5 on wire tier values (UNSPECIFIED wins, else the colder).
std::int32_t worst_tier(std::int32_t a, std::int32_t b);
/// Returns the §3.10 affinity seed of a resolved chain: concat of uint32_be(len) ‖ hash.
std::string chain_affinity_seed(const std::vector<std::string>& chain);
/// Returns the index into `n` candidates picked by SHA-256(seed) (§3.10); n must be > 0.
std::size_t affinity_index(std::string_view seed, std::size_t n);

}  // namespace ic::index
