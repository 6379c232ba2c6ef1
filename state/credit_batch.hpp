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
//   batch.add("t", idx.name_hit(ref).value());        // tenant actors, any thread
//   std::vector<proto::lfu_credit> due = batch.take(); // journal actor, every interval
//
// Thread-safe. Plain C++: no CAF.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "proto/record_codec.hpp"

namespace ic::state {

class credit_batch {
 public:
  /// At most `max_entries` distinct entries per batch (spec: 4096); later new entries are
  /// dropped (counted), credits to entries already held still add up.
  explicit credit_batch(std::size_t max_entries = 4096) : max_(max_entries) {}

  /// Adds `count` credits to (tenant, hit).
  void add(const std::string& tenant, index::named_hit hit, std::uint32_t count = 1);
  /// Takes the collected credits (sorted by tenant, then entry), leaving the batch empty.
  std::vector<proto::lfu_credit> take();
  /// Distinct entries dropped because a batch was full, since construction.
  std::uint64_t dropped() const;

 private:
  mutable std::mutex mu_;
  std::size_t max_;
  std::map<std::pair<std::string, index::named_hit>, std::uint32_t> counts_;
  std::uint64_t dropped_ = 0;
};

/// Splits a journaled credit record by tenant (the coordinator sends each tenant its own;
/// replay applies them the same way).
std::map<std::string, proto::credit_record> credits_by_tenant(const proto::credit_record& r);

}  // namespace ic::state
