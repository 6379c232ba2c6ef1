// Deterministic workload shapes for the benchmark: tenants × replicas × chains of 8-byte
// block hashes, each chain a shared per-tenant system prompt followed by a per-request suffix.
//
// Chains come in groups of `kChainsPerGroup` consecutive ids that share a placement, so a
// producer can send a group in one CacheStateUpdate: group `g = c / kChainsPerGroup` belongs to
// tenant `g % tenants` and is cached on replica `(g / tenants) % replicas`.
// Block `j < system_blocks` of any chain of tenant `t` is the tenant's system prompt block
// (shared by every chain of `t`); later blocks are unique to the chain. Multi-turn sessions
// report their chain growing turn by turn (`turn_length`). Everything derives from `seed`, so
// a `fill` run and a later `lookup` run with the same shape agree on every hash.
//
//   workload w(shape);
//   std::vector<std::uint64_t> hashes;
//   w.chain(42, w.shape().chain_blocks, &hashes);   // 64 hashes of chain 42
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ic::tools::bench {

/// The knobs of a workload; defaults mirror a small multi-tenant chat deployment.
struct workload_shape {
  int tenants = 4;            ///< N tenants; default 4
  int replicas = 8;           ///< M replicas per tenant; default 8
  int chain_blocks = 64;      ///< K blocks per full chain; default 64
  int system_blocks = 16;     ///< shared system-prompt blocks at the head of every chain; default 16
  int block_tokens = 16;      ///< tokens per block; default 16
  int turns = 1;              ///< turns per session (a chain grows each turn); default 1
  std::uint64_t seed = 1;     ///< hash seed; default 1
  std::string model = "bench-model";  ///< model id; default bench-model
  std::string scheme = "vllm";        ///< hash scheme; default vllm
};

/// Checks a shape; returns an empty string when it is valid, else one line saying why not.
std::string validate(const workload_shape& s);

/// Mixes a 64-bit value (splitmix64 finaliser).
std::uint64_t mix64(std::uint64_t x);

/// Consecutive chain ids that share one (tenant, replica) placement.
constexpr std::uint64_t kChainsPerGroup = 256;

/// Generates chains and names for one workload shape.
class workload {
 public:
  explicit workload(workload_shape shape) : shape_(std::move(shape)) {}

  const workload_shape& shape() const { return shape_; }

  /// "bench-tenant-<t>".
  std::string tenant_name(int t) const;
  /// "bench-replica-<r>".
  std::string replica_name(int r) const;

  int tenant_of(std::uint64_t chain) const {
    return static_cast<int>((chain / kChainsPerGroup) % static_cast<std::uint64_t>(shape_.tenants));
  }
  int replica_of(std::uint64_t chain) const {
    return static_cast<int>((chain / kChainsPerGroup / static_cast<std::uint64_t>(shape_.tenants)) %
                            static_cast<std::uint64_t>(shape_.replicas));
  }

  /// Hash of block `j` of chain `chain` (system block when j < system_blocks).
  std::uint64_t block_hash(std::uint64_t chain, int j) const;

  /// Appends the first `blocks` hashes of `chain` to `out` (cleared first).
  void chain(std::uint64_t chain, int blocks, std::vector<std::uint64_t>* out) const;

  /// Length in blocks of a session's chain after turn `turn` (0-based).
  int turn_length(int turn) const;

  /// (key × replica) entries that the first `chains` chains create when reported whole.
  std::uint64_t entries_for_chains(std::uint64_t chains) const;

  /// The fewest whole chains whose report creates at least `entries` entries.
  std::uint64_t chains_for_entries(std::uint64_t entries) const;

 private:
  workload_shape shape_;
};

}  // namespace ic::tools::bench
