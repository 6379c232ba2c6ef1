// LFU credits journaled in batches (spec/scaleout.md §3.4). In JetStream mode a lookup in
// an LFU tenant does not credit its entries at once: the credit would exist on the replica
// that answered only, and LFU tenants near their quota or the cap would then evict
// differently on different replicas. Instead each replica collects its lookups' credits
// here, by entry name (tenant + index::named_hit), and every --lfu-credit-interval
// publishes them as one `lfu_credits` record; every replica (this one too) applies credits
// only when that record comes back from the stream, at its position. RocksDB mode does not
// use this (one server: lookups credit at once, as before).
//
//   credit_batch batch(4096);
//   batch.add_hits("t", idx, out.credit);              // tenant actors, any thread
//   batch.add("t", idx.name_hit(ref).value());         // or one named entry
//   std::vector<proto::lfu_credit> due = batch.take(); // journal actor, every interval
//
// add_hits names an entry once per interval: later hits on it are found by their entry_ref
// (and the index instance that made it) without building names, under one lock per lookup
// (docs/benchmarks.md "LFU credits in JetStream mode").
//
// Thread-safe. Plain C++: no CAF.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "index/index_types.hpp"
#include "proto/record_codec.hpp"

namespace ic::index {
class tenant_index;
}

namespace ic::state {

class credit_batch {
 public:
  /// At most `max_entries` distinct entries per batch (spec: 4096); later new entries are
  /// dropped (counted), credits to entries already held still add up.
  explicit credit_batch(std::size_t max_entries = 4096) : max_(max_entries) {}

  /// Adds `count` credits to (tenant, hit).
  void add(const std::string& tenant, index::named_hit hit, std::uint32_t count = 1);
  /// Adds one credit to each entry of one lookup's `hits`, which `idx` (tenant `tenant`)
  /// made; the caller may read `idx` (its read gate or its actor). The same as `add` of
  /// each hit's name, but an entry already in this batch is not named again, and once the
  /// batch is full a hit on an entry it has not seen through add_hits is dropped unnamed
  /// (so also one whose name an add() put there: that entry loses this credit).
  void add_hits(const std::string& tenant, const index::tenant_index& idx,
                const std::vector<index::scored_replica>& hits);
  /// Takes the collected credits (sorted by tenant, then entry), leaving the batch empty.
  std::vector<proto::lfu_credit> take();
  /// Distinct entries dropped because a batch was full, since construction.
  std::uint64_t dropped() const;

 private:
  using key = std::pair<std::string, index::named_hit>;
  /// Under mu_: adds `count` to `k`; returns its counter, or nullptr when the batch is full.
  std::uint32_t* add_locked(key k, std::uint32_t count);

  struct ref_hash {
    std::size_t operator()(const index::entry_ref& r) const noexcept;
  };
  struct ref_eq {
    bool operator()(const index::entry_ref& a, const index::entry_ref& b) const noexcept;
  };
  /// One tenant's entries credited through add_hits this interval: their counters in
  /// counts_, valid for refs of index `instance`.
  struct seen_refs {
    std::uint64_t instance = 0;
    std::unordered_map<index::entry_ref, std::uint32_t*, ref_hash, ref_eq> counters;
  };

  mutable std::mutex mu_;
  std::size_t max_;
  std::map<key, std::uint32_t> counts_;
  std::unordered_map<std::string, seen_refs> seen_;  // cleared with counts_ by take()
  std::uint64_t dropped_ = 0;
};

/// Splits a journaled credit record by tenant (the coordinator sends each tenant its own;
/// replay applies them the same way).
std::map<std::string, proto::credit_record> credits_by_tenant(const proto::credit_record& r);

}  // namespace ic::state
