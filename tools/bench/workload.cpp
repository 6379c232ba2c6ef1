#include "tools/bench/workload.hpp"

#include <algorithm>

namespace ic::tools::bench {

std::string validate(const workload_shape& s) {
  if (s.tenants <= 0) return "--tenants must be positive";
  if (s.replicas <= 0) return "--replicas must be positive";
  if (s.chain_blocks <= 0) return "--chain-blocks must be positive";
  if (s.system_blocks < 0 || s.system_blocks >= s.chain_blocks)
    return "--system-blocks must be in [0, chain-blocks)";
  if (s.block_tokens <= 0) return "--block-tokens must be positive";
  if (s.turns <= 0 || s.turns > s.chain_blocks - s.system_blocks)
    return "--turns must be in [1, chain-blocks - system-blocks]";
  return "";
}

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string workload::tenant_name(int t) const { return "bench-tenant-" + std::to_string(t); }
std::string workload::replica_name(int r) const { return "bench-replica-" + std::to_string(r); }

std::uint64_t workload::block_hash(std::uint64_t chain, int j) const {
  const std::uint64_t seed = mix64(shape_.seed);
  if (j < shape_.system_blocks) {
    // Shared by every chain of the tenant.
    return mix64(seed ^ mix64(0x5157000000000000ULL + static_cast<std::uint64_t>(tenant_of(chain))) ^
                 static_cast<std::uint64_t>(j));
  }
  return mix64(seed ^ mix64(chain * 4099 + 0x1000000000ULL) ^ mix64(static_cast<std::uint64_t>(j)));
}

void workload::chain(std::uint64_t c, int blocks, std::vector<std::uint64_t>* out) const {
  out->clear();
  out->reserve(static_cast<std::size_t>(blocks));
  for (int j = 0; j < blocks; ++j) out->push_back(block_hash(c, j));
}

int workload::turn_length(int turn) const {
  const int suffix = shape_.chain_blocks - shape_.system_blocks;
  const int per_turn = suffix / shape_.turns;
  if (turn >= shape_.turns - 1) return shape_.chain_blocks;
  return shape_.system_blocks + (turn + 1) * per_turn;
}

std::uint64_t workload::entries_for_chains(std::uint64_t chains) const {
  const std::uint64_t unique = static_cast<std::uint64_t>(shape_.chain_blocks - shape_.system_blocks);
  const std::uint64_t groups = (chains + kChainsPerGroup - 1) / kChainsPerGroup;
  const std::uint64_t placements =
      std::min<std::uint64_t>(groups, static_cast<std::uint64_t>(shape_.tenants) * shape_.replicas);
  return chains * unique + placements * static_cast<std::uint64_t>(shape_.system_blocks);
}

std::uint64_t workload::chains_for_entries(std::uint64_t entries) const {
  std::uint64_t lo = 0, hi = entries + 1;
  while (lo < hi) {
    std::uint64_t mid = lo + (hi - lo) / 2;
    if (entries_for_chains(mid) >= entries) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

}  // namespace ic::tools::bench
