// Builders shared by the index tests: terse ways to write the scenario rows of
// spec/lookup.md §6 (`I(r, t/m/s, prefix=p:N)`, `chain(b1..bk)×c`).
#pragma once

#include <chrono>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "index/testing/combined_index.hpp"
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

/// Random, reproducible inputs for replay-style tests: a few tenants, models, replicas and
/// schemes; 8-byte and other-length hashes; chains, legacy entries, stats, events, lookups.
struct generator {
  explicit generator(std::uint64_t seed) : rng(seed) {}
  std::mt19937_64 rng;
  micros now = t0;

  int pick(int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); }
  std::string hash() {
    // Mix 8-byte hashes (inline path) with other lengths (side-table path).
    const int v = pick(40);
    if (pick(4) == 0) return "h" + std::to_string(v);
    std::string h(8, '\0');
    h[7] = static_cast<char>(v);
    h[0] = 'k';
    return h;
  }
  std::string tenant() { return "t" + std::to_string(pick(3)); }
  std::string model() { return "m" + std::to_string(pick(2)); }
  std::string scheme() { return pick(5) == 0 ? "sglang" : "vllm"; }
  std::string replica() { return "r" + std::to_string(pick(5)); }
  std::string adapter() { return pick(4) == 0 ? "lora" : ""; }

  cache_state_update make_update(bool single_scope) {
    cache_state_update u = update(replica(), {}, tenant(), model(),
                                  single_scope ? "vllm" : (pick(20) == 0 ? "" : scheme()));
    const int n = 1 + pick(4);
    for (int i = 0; i < n; ++i) {
      if (pick(2) == 0) {
        u.prefixes.push_back(legacy(hash(), pick(200), pick(6) - 1, single_scope ? "" : adapter()));
      } else {
        std::vector<std::string> hs;
        for (int j = 0, m = 1 + pick(5); j < m; ++j) hs.push_back(hash());
        prefix_entry p = chain(hs, 16, pick(4));
        if (!single_scope && pick(10) == 0) p.block_token_counts.pop_back();
        if (pick(5) == 0) p.prefix_hash = hash();
        u.prefixes.push_back(p);
      }
    }
    if (pick(3) == 0) u.stats = stats(static_cast<float>(pick(10)) / 10, pick(10) / 10.0f);
    now += pick(3) * 1'000'000 + pick(2);
    u.timestamp_us = pick(6) == 0 ? 0 : now - pick(120) * 1'000'000;
    return u;
  }

  cache_event make_event() {
    cache_event e;
    e.type = pick(5);
    e.tenant_id = tenant();
    e.model_id = model();
    e.replica_id = replica();
    e.prefix_hash = hash();
    e.adapter_id = pick(3) == 0 ? adapter() : "";
    e.timestamp_us = pick(2) == 0 ? 0 : now;
    return e;
  }

  lookup_route_request make_request() {
    lookup_route_request r;
    r.tenant_id = tenant();
    r.model_id = model();
    r.hash_scheme = scheme();
    r.adapter_id = adapter();
    if (pick(2) == 0) {
      r.prefix_hash = hash();
      r.prefix_token_count = pick(200);
    } else {
      for (int j = 0, m = 1 + pick(5); j < m; ++j) {
        r.block_hashes.push_back(hash());
        r.block_token_counts.push_back(16 * (1 + pick(4)));
      }
    }
    if (pick(3) == 0) r.slo_target = slo{pick(300), 0};
    return r;
  }
};

/// An ALL_CLEARED event of `replica` in (tenant, model m).
inline cache_event cleared(std::string replica, std::string tenant = "t") {
  cache_event ev;
  ev.type = static_cast<int>(event_type::all_cleared);
  ev.tenant_id = std::move(tenant);
  ev.model_id = "m";
  ev.replica_id = std::move(replica);
  return ev;
}

/// A PREFIX_EVICTED event of `hash` by `replica` in (tenant t, model m); an empty `adapter`
/// removes the key from every adapter partition and scheme.
inline cache_event evicted(std::string replica, std::string hash, std::string adapter = "") {
  cache_event ev;
  ev.type = static_cast<int>(event_type::prefix_evicted);
  ev.tenant_id = "t";
  ev.model_id = "m";
  ev.replica_id = std::move(replica);
  ev.prefix_hash = std::move(hash);
  ev.adapter_id = std::move(adapter);
  return ev;
}

/// A change log as one comparable string (type, cause, names, hash, time per change).
inline std::string image(const change_log& log) {
  std::ostringstream os;
  for (const auto& c : log)
    os << static_cast<int>(c.type) << ',' << static_cast<int>(c.cause) << ',' << c.tenant_id << ','
       << c.model_id << ',' << c.hash_scheme << ',' << c.adapter_id << ',' << c.replica_id << ','
       << c.prefix_hash << ',' << c.timestamp_us << ';';
  return os.str();
}

inline std::string describe(const lookup_route_response& r) {
  std::ostringstream os;
  os << r.reason_code << '|' << r.adapter_id;
  for (const auto& s : r.replica_scores) {
    os << '|' << s.replica_id << ',' << s.score << ',' << s.matched_tokens << ','
       << s.estimated_cache_hit_prob << ',' << s.tier;
  }
  return os.str();
}

}  // namespace ic::index::testing
