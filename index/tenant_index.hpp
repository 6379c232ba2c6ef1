// The per-tenant index: one tenant's prefix keys, per-replica entries, stats rows, the
// secondary counters of spec/lookup.md §2.4, its policy and quota, and its eviction orders
// (cap, quota). The server runs one `tenant_index` per tenant actor (state::tenant_state).
//
// It is plain C++ with one writer: mutations must be serialised (its actor), and const calls
// may run concurrently with each other but never with a mutation (lookups use thread-local
// scratch; see concurrent_lookup_test.cpp). No method reads a clock: time is always an
// argument, so feeding the same timestamped inputs to two indexes gives the same state.
//
//   ic::index::tenant_index idx("acme", options);    // options.shared: the server's totals
//   idx.ingest(update, now_us);                      // ReportCacheState message
//   idx.apply_event(event, now_us);                  // PublishEvent
//   auto r = lookup_tenant(&idx, total_keys, request, policy, now_us);   // §3.3
//   idx.sweep_step(now_us, cursor, max_keys, changes, result);            // sliced §4.7
//
// Cross-tenant parts: every public mutating call adds its change of `facts()` to
// `options.shared` (the cold-start carve-out reads the totals); the global cap (§4.6) is
// either this index's own (`external_cap` false: over its own entries) or merged by the owner
// over every tenant with `cap_victim` / `evict_cap` and `pick_cap_step`. A v1 (combined)
// snapshot loads straight into one index per tenant (`snapshot_loader` with a per-tenant
// target); see index/README.md.
//
// Layout (see index/README.md): keys live in a chunked slab of 32-byte `key_record`s
// addressed by a `key_table` (linear probing over 4-byte tagged slots); a key's replica entries
// (20 bytes each) sit inline when there is one and in one heap array otherwise. Names are interned
// to dense ids per tenant. 8-byte prefix hashes are stored inline as big-endian integers; other
// lengths go to a side table.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "index/index_types.hpp"
#include "index/key_table.hpp"
#include "index/types.hpp"
#include "policy/resolved_policy.hpp"

namespace ic::index {

/// Interns names (model, scheme, adapter, replica) to dense ids; ids and views are stable.
class name_pool {
 public:
  /// Returns the id of `s`, adding it when new.
  std::uint32_t intern(std::string_view s);
  /// Returns the id of `s` when known.
  std::optional<std::uint32_t> find(std::string_view s) const;
  /// Returns the name of `id`.
  std::string_view name(std::uint32_t id) const { return views_[id]; }
  /// Returns the number of interned names.
  std::size_t size() const { return names_.size(); }
  /// Returns approximate heap bytes.
  std::size_t bytes() const;

 private:
  std::deque<std::string> names_;
  std::vector<std::string_view> views_;
  std::unordered_map<std::string_view, std::uint32_t> ids_;
};

/// Internal tier codes (one byte): 1..3 = T1..T3, 4 = unknown positive, 255 = negative.
inline constexpr std::uint8_t tier_unknown_positive = 4;
inline constexpr std::uint8_t tier_coldest = 255;
/// Returns the normalised tier code of a wire tier (§2.6).
std::uint8_t normalize_tier(std::int32_t wire);
/// Returns the wire tier of a code (unknown codes report UNSPECIFIED).
inline std::int32_t wire_tier(std::uint8_t code) { return code >= 1 && code <= 3 ? code : 0; }

/// One (key, replica) entry seen through a key's parallel arrays (references, no copy).
struct entry_proxy {
  micros& last_seen;
  std::int32_t& token_count;
  /// Replica id (low 24 bits) and tier code (high 8 bits).
  std::uint32_t& replica_tier;
  /// LFU counter (saturating).
  std::uint32_t& access_count;

  std::uint32_t replica() const { return replica_tier & 0xFFFFFFu; }
  std::uint8_t tier() const { return static_cast<std::uint8_t>(replica_tier >> 24); }
};

/// A key's replica entries as parallel arrays: 20 bytes per entry (8 + 4 + 4 + 4).
///
/// Multi-replica keys keep one heap block `[last_seen × cap][replica_tier × cap]
/// [token_count × cap][access × cap]`, so a block's holder list can be compared with
/// `memcmp`; a single replica lives inline in the `key_record` (n = 1).
struct entry_span {
  micros* ls;
  std::uint32_t* rt;
  std::int32_t* tc;
  std::uint32_t* ac;
  std::uint32_t n;

  std::uint32_t size() const { return n; }
  entry_proxy operator[](std::size_t i) const { return entry_proxy{ls[i], tc[i], rt[i], ac[i]}; }
};

/// One prefix key: 32 bytes, naturally aligned.
struct key_record {
  /// Big-endian 8-byte hash, or the side-table index of a hash of another length.
  std::uint64_t hash;
  /// Partition (model, scheme, adapter) id in bits 0..23, plus the `key_*` flag bits;
  /// all ones marks a free record.
  std::uint32_t part;
  /// Inline: the entry's replica id | tier code. Heap: the number of entries.
  std::uint32_t rt;
  union {
    /// Inline: the entry's last_seen.
    micros ls;
    /// Heap: the entry block (see `entry_span`).
    char* block;
  } u;
  /// Inline: the entry's token count. Heap: the block's capacity.
  std::int32_t tc;
  /// Inline: the entry's LFU counter.
  std::uint32_t ac;
};

/// key_record::part flag bits.
inline constexpr std::uint32_t key_long_hash = 0x80000000u;
inline constexpr std::uint32_t key_on_heap = 0x40000000u;
inline constexpr std::uint32_t key_empty = 0x20000000u;
inline constexpr std::uint32_t key_part_mask = 0x00FFFFFFu;
inline constexpr std::uint32_t key_free = 0xFFFFFFFFu;

static_assert(sizeof(key_record) == 32, "key_record must stay 32 bytes");

/// A vector in fixed chunks of 2^bits elements (bits chosen at construction, clamped to
/// [min_bits, max_bits]): growth never copies and wastes at most one chunk.
template <typename T>
class chunked_vector {
 public:
  static constexpr unsigned min_bits = 4;
  static constexpr unsigned max_bits = 20;
  explicit chunked_vector(unsigned bits = 12)
      : bits_(bits < min_bits ? min_bits : bits > max_bits ? max_bits : bits),
        mask_((std::size_t{1} << bits_) - 1) {}
  std::size_t chunk_size() const { return mask_ + 1; }
  T& operator[](std::size_t i) { return chunks_[i >> bits_][i & mask_]; }
  const T& operator[](std::size_t i) const { return chunks_[i >> bits_][i & mask_]; }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return chunks_.size() * chunk_size(); }
  void push_back(const T& v) {
    // Default-initialised (not zeroed): every slot is written before it is read.
    if (size_ == capacity()) chunks_.push_back(std::unique_ptr<T[]>(new T[chunk_size()]));
    (*this)[size_++] = v;
  }

 private:
  std::vector<std::unique_ptr<T[]>> chunks_;
  std::size_t size_ = 0;
  unsigned bits_;
  std::size_t mask_;
};

/// A global-cap candidate of one tenant index (§4.6 order within the tenant).
struct cap_candidate {
  std::uint32_t count = 0;
  micros last_seen = 0;
  std::uint32_t key = 0;
  std::uint32_t replica = 0;
};

class snapshot_access;

/// One stats row as liveness readers see it (LookupPDRoute, pd-templates.md §2.3).
struct stats_row_view {
  /// Points into the index's name pool; valid until the index is destroyed.
  std::string_view replica_id;
  /// Sanitised at ingest (non-finite reads 0).
  float pressure = 0;
  /// Refreshed by stats ingests and REPLICA_UPDATED events.
  micros last_seen = 0;
};

/// One tenant's index.
class tenant_index {
 public:
  /// Creates an empty index of tenant `name` with the given constants (its policy is
  /// `resolved_policy::no_policy()` with `options.default_ttl` until `set_policy`).
  tenant_index(std::string name, index_options options = {});
  ~tenant_index();
  tenant_index(const tenant_index&) = delete;
  tenant_index& operator=(const tenant_index&) = delete;

  const std::string& name() const { return name_; }
  bool reserved() const { return reserved_; }
  /// A number no other tenant_index of this process had: an entry_ref is only meaningful
  /// to the index instance that made it (a snapshot load builds a new one).
  std::uint64_t instance() const { return instance_; }
  /// Distinct keys (prefixes_by_tenant).
  std::int64_t keys() const { return keys_; }
  /// (key, replica) entries.
  std::int64_t entries() const { return entries_; }
  /// This index's facts (its own counters; not the shared totals).
  index_facts facts() const { return index_facts{entries_, reserved_ ? entries_ : 0, keys_}; }
  /// Returns the options the index was built with.
  const index_options& options() const { return options_; }
  const policy::resolved_policy& policy() const { return policy_; }
  const std::optional<std::int64_t>& quota() const { return quota_; }

  /// Installs the tenant's resolved policy (TTL <= 0 reads as `options.default_ttl`); a
  /// changed eviction mode re-sorts the cap order.
  void set_policy(const policy::resolved_policy& policy);
  /// Installs the tenant's quota (nullopt = unbounded, negative clamped to 0). Enforced at the
  /// tenant's next ingest (§4.5). The reserved tenant never has one.
  void set_quota(std::optional<std::int64_t> quota);

  /// Applies one CacheStateUpdate (§2.6) of this tenant at `now` (ingest, quota, and the cap
  /// unless `external_cap`); records changes in `changes` when given. Producers'
  /// reserved-tenant messages are skipped (RESERVED_TENANT).
  ingest_result ingest(const cache_state_update& update, micros now, change_log* changes = nullptr,
                       input_origin origin = input_origin::producer);
  /// Applies one CacheEvent (§2.7) of this tenant at `now`.
  event_result apply_event(const cache_event& event, micros now, change_log* changes = nullptr,
                           input_origin origin = input_origin::producer);
  /// Removes every entry and stats row whose age at `now` reaches the TTL (§4.7). For tests
  /// and benchmarks: the server and replay run `sweep_step` slices.
  sweep_result sweep(micros now, change_log* changes = nullptr);
  /// Where a sliced sweep stands (see `sweep_step`). A default cursor starts a sweep.
  struct sweep_cursor {
    std::uint32_t key = 0;  ///< next key slot
  };
  /// Runs the next slice (at most `max_keys` key slots) of the sweep at `now`, adding to
  /// `result`; returns true when the sweep is complete. Slices run back to back with no
  /// other mutation in between give exactly `sweep(now)`'s state, results and change order;
  /// const readers may run between slices (they see a partly swept index, whose expired
  /// entries matching ignores anyway).
  bool sweep_step(micros now, sweep_cursor& cursor, std::size_t max_keys, change_log* changes,
                  sweep_result& result);

  /// Returns the next §4.6 cap victim of this index, or nullopt (reserved, or no entry).
  /// Non-const: it drops stale order refs.
  std::optional<cap_head> cap_victim();
  /// Evicts cap victims in §4.6 order while the next one sorts before `bound` (no bound:
  /// any) and fewer than `max` were evicted in this call; counts them in
  /// result.cap_evicted_lru / cap_evicted_lfu, records changes (cause cap, time `ts`) and
  /// returns how many were evicted. The same code enforces the own cap inside `ingest`.
  std::int64_t evict_cap(const std::optional<cap_head>& bound, std::int64_t max, micros ts,
                         change_log* changes, ingest_result& result);
  /// Adds 1 to the LFU counter of every hit of `replicas` (§3.12); stale refs are skipped.
  void credit_lfu(const std::vector<scored_replica>& replicas);

  /// Returns the GetCacheState view (§4.3) of (this tenant, model); empty when reserved.
  cache_state_view get_cache_state(std::string_view model) const;
  /// Appends the stats rows of `model` to `out`, sorted by replica id (none when reserved).
  void stats_rows(std::string_view model, std::vector<stats_row_view>& out) const;
  /// Returns the models that have stats rows, sorted (none when reserved).
  std::vector<std::string_view> stats_models() const;
  /// Returns the /snapshot rows of this tenant (none when reserved). O(entries).
  snapshot_view snapshot() const;
  /// Returns distinct keys per model (`index_entries{model}`; none when reserved), sorted.
  std::vector<std::pair<std::string, std::int64_t>> entries_by_model() const;
  /// Returns a canonical, sorted text dump of the whole state (entries, stats, counters,
  /// facts); two indexes with equal dumps answer every query the same.
  std::vector<std::string> canonical_dump() const;
  /// Returns the bytes held by the index's data structures.
  memory_breakdown memory_usage() const;

  /// Moves the index under new options (new `shared` totals: its facts leave the old ones and
  /// join the new ones); rebuilds the cap order when whether it is kept changes. For tests
  /// (the combined oracle's `split_tenants`).
  void rebind(const index_options& options);

  /// Runs exact match / chain walk / TENANT_HOT for a non-empty tenant/model/scheme request;
  /// returns prefix_match, tenant_hot or none (`lookup_tenant` classifies misses).
  index_lookup_result lookup(const index_lookup_request& q, const policy::resolved_policy& pol,
                             micros now) const;
  /// Returns the sorted serving replica names of (model, scheme).
  std::vector<std::string_view> serving_names(std::string_view model,
                                              std::string_view scheme) const;
  /// Returns serving_by_scope[(model, scheme)] as (replica, count).
  std::vector<std::pair<std::string, std::int64_t>> serving(std::string_view model,
                                                            std::string_view scheme) const;
  /// Returns prefixes_by_tenant_model[model].
  std::int64_t model_keys(std::string_view model) const;
  /// Adds one LFU credit to `ref` when it still names a live entry.
  void credit(const entry_ref& ref);
  /// Returns the names of `ref`'s entry (nullopt when the ref is stale).
  std::optional<named_hit> name_hit(const entry_ref& ref) const;
  /// Adds `count` LFU credits to the named entry; false when it names nothing (evicted,
  /// or never seen here), which is skipped like a stale ref.
  bool credit_named(const named_hit& hit, std::uint32_t count);
  /// Returns the LFU ref of (key, replica), with the key's identity for `credit`.
  entry_ref ref_of(std::uint32_t key, std::uint32_t replica) const;

  /// Returns the (key, replica) entry, if present.
  std::optional<entry_view> find_entry(std::string_view model, std::string_view scheme,
                                       std::string_view adapter, std::string_view hash,
                                       std::string_view replica) const;

 private:
  friend class snapshot_access;  // index/snapshot_{writer,loader}.cpp read and rebuild the state
  struct facts_guard;            // publishes a public call's change of facts() to shared

  /// Adds facts() − before to options_.shared (when set).
  void publish_facts(const index_facts& before);
  /// The steps of `ingest` after the origin check, at the effective time `ts`.
  void ingest_at(const cache_state_update& update, micros ts, change_log* changes,
                 ingest_result& result);
  /// Applies the prefix and stats parts of an update (§2.6 steps 3–5).
  void ingest_parts(const cache_state_update& update, micros ts, change_log* changes,
                    ingest_result& result);
  std::int64_t evict_cap_impl(const cap_head* bound, std::int64_t max, micros ts,
                              change_log* changes, ingest_result& result);
  /// Enforces the tenant quota (§4.5) at `ts`.
  void enforce_quota(micros ts, change_log* changes, ingest_result& result);
  /// Applies an event (§2.7) at `ts`.
  void apply_event_at(const cache_event& event, micros ts, change_log* changes,
                      event_result& result);
  /// Removes stale entries and stats rows (§4.7).
  void sweep_all(micros now, change_log* changes, sweep_result& result);
  /// Sweeps key slots from `next_key` on, spending at most `budget` slots (decremented);
  /// when the last slot is done also sweeps the stats rows and returns true.
  bool sweep_slice(micros now, change_log* changes, sweep_result& result,
                   std::uint32_t& next_key, std::size_t& budget);

  /// Returns the index's first live cap victim, if any.
  std::optional<cap_candidate> peek_cap_victim();
  /// Removes the victim last returned by `peek_cap_victim`.
  void evict_cap_victim(const cap_candidate& victim, micros ts, change_log* changes);

  void snapshot_rows(snapshot_view& out) const;
  void entries_by_model(std::map<std::string, std::int64_t>& out) const;
  void dump(std::vector<std::string>& out) const;
  void memory(memory_breakdown& m) const;

  struct part_info {
    std::uint32_t model, scheme, adapter, scope;
  };
  struct scope_info {
    std::uint32_t model, scheme;
    std::unordered_map<std::uint32_t, std::uint32_t> serving;
  };
  struct stats_row {
    std::int64_t cache_memory_bytes = 0;
    float hit_rate = 0;
    float pressure = 0;
    std::int64_t t2_hit_tokens = 0;
    std::int64_t t2_query_tokens = 0;
    micros last_seen = 0;
    micros stats_reported = 0;
  };
  /// A lazily validated group of refs sharing one order position (see README).
  struct order_bucket {
    /// Key refs as runs (first key, length): chain ingests create consecutive keys.
    std::vector<std::pair<std::uint32_t, std::uint32_t>> refs;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> candidates;
    std::size_t cursor = 0;
    bool dirty = true;
  };
  struct run_state {
    std::uint32_t replica;
    std::uint32_t matched;
    micros oldest;
    std::uint8_t tier;
    std::uint32_t last_block;
  };
  /// One scored chain-walk replica (see `lookup`).
  struct scored_run {
    std::uint32_t run;
    std::uint32_t rank;  // the replica name's rank: ties sort by name, byte-wise
    std::int32_t matched;
    float f;
    float score;
  };
  /// Chain-walk scratch, one per thread (shared by every tenant index a thread looks up), so
  /// const lookups may run concurrently. `generation` is unique per lookup on a thread, so
  /// stamps left by another tenant index's lookup never match.
  struct lookup_scratch {
    std::vector<std::uint32_t> stamp;
    std::vector<std::uint32_t> run_slot;
    std::uint32_t generation = 0;
    std::vector<run_state> runs;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> run_hits;
    std::vector<std::uint64_t> hash_buf;
    std::vector<std::uint64_t> be_buf;
    std::vector<std::uint32_t> key_buf;
    std::vector<scored_run> scored;
    std::vector<std::uint64_t> sort_keys;
    std::vector<std::uint32_t> rank_pos;
    std::vector<std::uint32_t> by_rank;
    std::vector<std::uint64_t> rank_marks;  // one byte per name rank; zero between lookups
  };
  static lookup_scratch& thread_scratch();
  // The steps of `lookup` (tenant_lookup.cpp), in order.
  struct lookup_context;
  /// Chain: resolves each block's key (three prefetching passes); returns how many leading
  /// blocks exist (their record indexes in `tls.key_buf`).
  std::size_t resolve_chain_keys(const index_lookup_request& q, std::uint32_t part,
                                 lookup_scratch& tls) const;
  /// Chain: walks the resolved blocks, growing one run per fresh replica of block 0
  /// (`tls.runs`, LFU hits in `tls.run_hits`).
  void walk_chain(const index_lookup_request& q, const lookup_context& c, std::size_t resolved,
                  micros now, lookup_scratch& tls) const;
  /// Chain: scores the runs (`tls.scored`); returns how many scored.
  std::size_t score_runs(const lookup_context& c, micros now, lookup_scratch& tls) const;
  /// Chain: applies the distinguishing power per depth group and appends the scored runs to
  /// `out` in final order (score desc, then name).
  void order_and_emit(const lookup_context& c, std::size_t ns, lookup_scratch& tls,
                      index_lookup_result& out) const;
  /// Exact match (§3.4) of `q.exact_key`.
  index_lookup_result exact_match(const index_lookup_request& q, const lookup_context& c,
                                  std::optional<std::uint32_t> part, micros now) const;
  /// TENANT_HOT (§3.7): appends the hot replicas to `out`.
  void tenant_hot(const lookup_context& c, micros now, index_lookup_result& out) const;

  // names, parts, scopes
  std::uint32_t part_of(std::string_view model, std::string_view scheme, std::string_view adapter);
  std::optional<std::uint32_t> find_part(std::string_view model, std::string_view scheme,
                                         std::string_view adapter) const;
  std::optional<std::uint32_t> find_scope(std::string_view model, std::string_view scheme) const;

  // keys and entries
  static bool on_heap(const key_record& k) { return (k.part & key_on_heap) != 0; }
  static std::uint32_t size_of(const key_record& k) {
    return on_heap(k) ? k.rt : ((k.part & key_empty) != 0 ? 0 : 1);
  }
  static entry_span entries_of(const key_record& k) {
    if (on_heap(k)) {
      const auto cap = static_cast<std::size_t>(k.tc);
      char* b = k.u.block;
      return entry_span{reinterpret_cast<micros*>(b), reinterpret_cast<std::uint32_t*>(b + 8 * cap),
                        reinterpret_cast<std::int32_t*>(b + 12 * cap),
                        reinterpret_cast<std::uint32_t*>(b + 16 * cap), k.rt};
    }
    auto& m = const_cast<key_record&>(k);
    return entry_span{&m.u.ls, &m.rt, &m.tc, &m.ac, size_of(k)};
  }
  static bool is_free(const key_record& k) { return k.part == key_free; }
  static std::uint32_t part_id(const key_record& k) { return k.part & key_part_mask; }
  std::uint64_t key_hash(std::uint32_t part, std::string_view bytes) const;
  std::uint64_t key_hash(const key_record& k) const;
  bool key_equals(const key_record& k, std::uint32_t part, std::string_view bytes) const;
  std::string key_bytes(const key_record& k) const;
  std::optional<std::uint32_t> find_key(std::uint32_t part, std::string_view bytes) const;
  std::optional<std::uint32_t> find_key_hashed(std::uint32_t part, std::string_view bytes,
                                               std::uint64_t h) const;
  /// Returns the key hash of record `key` (the `hash_of` of `table_`).
  std::uint64_t record_hash(std::uint32_t key) const { return key_hash(records_[key]); }
  /// Prefetches a key's holder list (last_seen and replica|tier arrays) into L1, or into
  /// L2 when `to_l2`.
  void prefetch_entries(const key_record& k, bool to_l2 = false) const;
  /// Returns true when two entry lists have the same replicas, last_seen and tiers in order.
  static bool same_holders(const entry_span& a, const entry_span& b);
  /// Advances the running chain-walk replicas over one block's entries; returns how many
  /// are still running.
  template <bool Lfu>
  std::size_t walk_block(const entry_span& e, std::uint32_t m, std::uint32_t key, std::size_t block,
                         micros cutoff, std::uint32_t add) const;
  /// Returns each name id's rank in byte-wise name order (cached until a name is added).
  const std::vector<std::uint32_t>& name_ranks() const;
  std::uint32_t find_or_create_key(std::uint32_t part, std::string_view bytes, bool& created);
  /// Returns the position of `replica` in `k`, or `npos`.
  static std::uint32_t find_replica(const key_record& k, std::uint32_t replica);
  /// Appends a zeroed entry for `replica`; returns its position.
  static std::uint32_t add_replica(key_record& k, std::uint32_t replica);
  /// Resolves `ref` to (key, position) when it still names a live entry.
  std::optional<std::pair<std::uint32_t, std::uint32_t>> live_entry(const entry_ref& ref) const;
  /// Adds `count` to the LFU counter of entry `pos` of key `key` (saturating).
  void add_credit(std::uint32_t key, std::uint32_t pos, std::uint32_t count);
  static constexpr std::uint32_t npos = key_table::npos;
  void upsert(std::uint32_t part, std::string_view hash, std::int32_t token_count,
              std::uint8_t tier, micros ts, std::uint32_t replica, change_log* changes,
              ingest_result& result);
  void remove_entry(std::uint32_t key, std::uint32_t pos, change_cause cause, micros ts,
                    change_log* changes);
  micros key_age(const key_record& k) const;

  // eviction orders
  bool cap_tracked() const { return !reserved_ && options_.max_entries > 0; }
  std::uint32_t effective_count(const entry_proxy& e) const;
  void push_cap_ref(std::uint32_t key, std::uint32_t count, micros ts);
  void rebuild_cap_order();
  void prepare_cap_bucket(std::map<std::pair<std::uint32_t, micros>, order_bucket>::iterator it);
  void push_quota_ref(std::uint32_t key);
  void rebuild_quota_order();
  bool key_less(std::uint32_t a, std::uint32_t b) const;

  void record(change_log* changes, event_type type, change_cause cause, const key_record* k,
              std::uint32_t replica, micros ts, std::uint32_t model = 0) const;

  std::string name_;
  bool reserved_;
  policy::resolved_policy policy_;
  std::optional<std::int64_t> quota_;

  name_pool names_;
  std::vector<part_info> parts_;
  std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>, std::uint32_t> part_ids_;
  std::vector<scope_info> scopes_;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint32_t> scope_ids_;

  chunked_vector<key_record> records_;
  std::vector<std::uint32_t> free_records_;
  key_table table_;  ///< key hash -> record index
  std::vector<std::string> long_hashes_;
  std::vector<std::uint32_t> free_long_;
  std::int64_t keys_ = 0;
  std::int64_t entries_ = 0;
  std::unordered_map<std::uint32_t, std::int64_t> keys_by_model_;
  std::unordered_map<std::uint32_t, std::unordered_map<std::uint32_t, stats_row>> stats_;

  std::map<std::pair<std::uint32_t, micros>, order_bucket> cap_order_;
  std::size_t cap_refs_ = 0;
  std::pair<std::uint32_t, micros> last_cap_key_{0, 0};
  order_bucket* last_cap_bucket_ = nullptr;
  std::map<micros, order_bucket> quota_order_;
  std::size_t quota_refs_ = 0;
  bool removing_key_ = false;

  // Replica-name ranks, computed lazily by readers (guarded: lookups may run concurrently).
  mutable std::mutex ranks_mu_;
  mutable std::vector<std::uint32_t> ranks_;

  // Last: the constants the lookup reads once per call, kept out of the hot members' lines.
  index_options options_;
  std::uint64_t instance_;
};

// Publishes the change of facts() over one public mutating call to options_.shared.
struct tenant_index::facts_guard {
  explicit facts_guard(tenant_index& idx) : idx_(idx), before_(idx.facts()) {}
  ~facts_guard() { idx_.publish_facts(before_); }
  facts_guard(const facts_guard&) = delete;
  facts_guard& operator=(const facts_guard&) = delete;

 private:
  tenant_index& idx_;
  index_facts before_;
};

/// Runs the §3.3 orchestrator over one tenant: exact / chain match and TENANT_HOT in
/// `tenant` (nullptr: the tenant holds nothing), then the miss classifier (§3.8), which reads
/// `total_keys` (every tenant's distinct keys: the shared totals, for the cold-start
/// carve-out). The TTL and eviction mode come from `policy`. Does not credit LFU.
index_lookup_result lookup_tenant(const tenant_index* tenant, std::int64_t total_keys,
                                  const index_lookup_request& request,
                                  const policy::resolved_policy& policy, micros now);
/// Returns the §3.10 affinity pick for `seed` among (model, scheme)'s serving replicas of
/// `tenant`, or nullopt (no tenant, empty model/scheme/seed, or no serving replica).
std::optional<std::string> affinity_pick(const tenant_index* tenant, std::string_view model,
                                         std::string_view hash_scheme, std::string_view seed);
/// Returns the canonical dump of several tenant indexes as one index prints it: their lines
/// without their own `G|` facts line, plus one `G|` line of `facts`, sorted.
std::vector<std::string> merged_dump(const std::vector<const tenant_index*>& tenants,
                                     const index_facts& facts);
/// Returns the keys every index counts: `shared->total_keys` when the index shares its
/// totals, else its own.
std::int64_t total_keys_of(const tenant_index& tenant);

}  // namespace ic::index
