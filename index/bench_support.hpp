// Builders shared by the index benchmarks: random 64-block chains and an index filled with
// (key × replica) entries of a given shape.
#pragma once

#include <malloc.h>

#include <cstdint>
#include <string>
#include <vector>

#include "index/tenant_index.hpp"
#include "index/fingerprint.hpp"

namespace ic::index::bench {

/// A fixed base timestamp (µs).
inline constexpr micros base_ts = 1'700'000'000'000'000;

/// Returns the next splitmix64 value of `s`.
inline std::uint64_t splitmix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/// Returns a 64-block chain of random 8-byte wire hashes.
inline std::vector<std::string> random_chain(std::uint64_t& seed, int blocks = 64) {
  std::vector<std::string> c;
  c.reserve(blocks);
  for (int i = 0; i < blocks; ++i) c.push_back(to_wire(splitmix(seed)));
  return c;
}

/// Returns a one-chain update of `replica` in tenant/model/scheme "tenant"/"model"/"vllm".
inline cache_state_update chain_update(const std::string& replica, std::vector<std::string> chain) {
  cache_state_update u;
  u.replica_id = replica;
  u.tenant_id = "tenant";
  u.model_id = "model";
  u.hash_scheme = "vllm";
  prefix_entry p;
  p.block_token_counts.assign(chain.size(), 16);
  p.block_hashes = std::move(chain);
  u.prefixes.push_back(std::move(p));
  return u;
}

/// Returns the heap bytes in use (mallinfo2).
inline std::size_t heap_in_use() {
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

/// Builds `entries` (key × replica) entries from 64-block chains, each held by
/// `replicas_per_key` of 64 replicas (chain c goes to replicas c*k .. c*k+k-1 mod 64).
/// Returns the chains.
inline std::vector<std::vector<std::string>> fill(tenant_index& idx, std::int64_t entries,
                                                  int replicas_per_key, micros ts) {
  std::uint64_t seed = 42;
  std::vector<std::vector<std::string>> chains;
  const std::int64_t per_chain = 64LL * replicas_per_key;
  std::int64_t chain_no = 0;
  for (std::int64_t made = 0; made < entries; made += per_chain, ++chain_no) {
    auto c = random_chain(seed);
    for (int r = 0; r < replicas_per_key; ++r) {
      const std::int64_t replica = (chain_no * replicas_per_key + r) % 64;
      auto u = chain_update("replica-" + std::to_string(replica), c);
      u.timestamp_us = ts + made / 64;
      idx.ingest(u, ts);
    }
    chains.push_back(std::move(c));
  }
  return chains;
}

}  // namespace ic::index::bench
