// Builders shared by the index tests: terse ways to write the scenario rows of
// spec/lookup.md §6 (`I(r, t/m/s, prefix=p:N)`, `chain(b1..bk)×c`).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "index/cache_index.hpp"
#include "index/types.hpp"
#include "policy/resolved_policy.hpp"

namespace ic::index::testing {

/// A fixed, arbitrary epoch for tests (µs).
inline constexpr micros t0 = 1'700'000'000'000'000;
/// One minute in µs.
inline constexpr micros minute = 60'000'000;

/// Returns a legacy PrefixEntry.
inline prefix_entry legacy(std::string hash, std::int32_t count, std::int32_t tier = 0,
                           std::string adapter = "") {
  prefix_entry p;
  p.prefix_hash = std::move(hash);
  p.token_count = count;
  p.tier = tier;
  p.adapter_id = std::move(adapter);
  return p;
}

/// Returns a chain PrefixEntry with `count` tokens per block.
inline prefix_entry chain(std::vector<std::string> hashes, std::int32_t count,
                          std::int32_t tier = 0) {
  prefix_entry p;
  p.block_token_counts.assign(hashes.size(), count);
  p.block_hashes = std::move(hashes);
  p.tier = tier;
  return p;
}

/// Returns an update of `replica` under (tenant, model, scheme) with `prefixes`.
inline cache_state_update update(std::string replica, std::vector<prefix_entry> prefixes,
                                 std::string tenant = "t", std::string model = "m",
                                 std::string scheme = "vllm", micros ts = 0) {
  cache_state_update u;
  u.replica_id = std::move(replica);
  u.tenant_id = std::move(tenant);
  u.model_id = std::move(model);
  u.hash_scheme = std::move(scheme);
  u.prefixes = std::move(prefixes);
  u.timestamp_us = ts;
  return u;
}

/// Returns stats with the given hit rate and pressure.
inline replica_stats stats(float hit_rate, float pressure = 0.0f, std::int64_t bytes = 0) {
  replica_stats s;
  s.hit_rate = hit_rate;
  s.pressure = pressure;
  s.cache_memory_bytes = bytes;
  return s;
}

/// Returns an update carrying stats only.
inline cache_state_update stats_only(std::string replica, replica_stats s, std::string tenant = "t",
                                     std::string model = "m", std::string scheme = "vllm") {
  cache_state_update u =
      update(std::move(replica), {}, std::move(tenant), std::move(model), std::move(scheme));
  u.stats = std::move(s);
  return u;
}

/// Returns an exact index request.
inline index_lookup_request exact(std::string_view key, std::int32_t count = 0,
                                  std::string_view tenant = "t", std::string_view model = "m",
                                  std::string_view scheme = "vllm", std::string_view adapter = "") {
  index_lookup_request q;
  q.tenant = tenant;
  q.model = model;
  q.hash_scheme = scheme;
  q.adapter = adapter;
  q.exact_key = std::string(key);
  q.exact_count = count;
  return q;
}

/// Returns a chain index request with `count` tokens per block.
inline index_lookup_request chain_query(std::vector<std::string> hashes, std::int32_t count,
                                        std::string_view tenant = "t", std::string_view model = "m",
                                        std::string_view scheme = "vllm",
                                        std::string_view adapter = "") {
  index_lookup_request q;
  q.tenant = tenant;
  q.model = model;
  q.hash_scheme = scheme;
  q.adapter = adapter;
  q.chain_counts.assign(hashes.size(), count);
  q.chain_hashes = std::move(hashes);
  return q;
}

/// Returns a policy equal to "no policy" with the given TTL.
inline policy::resolved_policy with_ttl(std::chrono::nanoseconds ttl) {
  policy::resolved_policy p;
  p.eviction_ttl = ttl;
  return p;
}

/// Returns an LFU policy.
inline policy::resolved_policy lfu() {
  policy::resolved_policy p;
  p.eviction = policy::eviction_mode::lfu;
  return p;
}

/// Returns the replica ids of a result, in order.
inline std::vector<std::string> ids(const index_lookup_result& r) {
  std::vector<std::string> out;
  for (const auto& s : r.scores) out.push_back(s.score.replica_id);
  return out;
}

}  // namespace ic::index::testing
