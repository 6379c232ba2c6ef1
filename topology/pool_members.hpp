// Pool member counts per topology and side, for the `inferencecache_pd_topology_replicas`
// gauge (pd-templates.md §2.7): live, stale and desired.
//
// Membership and liveness are the selector's (§2.3): a side's members are its pools'
// explicit ids plus every replica with a stats row of the topology's namespace (= tenant)
// matching a pattern, over the models the topology serves (every model when it lists none);
// a member is live when one of those rows was seen less than `statsMaxAgeMs` ago (pressure
// does not matter here), else stale (an explicit id without a row is stale). `desired` is
// the sum of the side's pools' `replicas` (the CRD's desired size, informational).
//
//   auto counts = ic::topology::count_members(*store.current(), tenant_of, now_us);
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "index/tenant_index.hpp"
#include "topology/topology_store.hpp"

namespace ic::topology {

/// One side of one topology.
struct side_members {
  std::string topology;  ///< "namespace/name"
  std::string role;      ///< "prefill" | "decode"
  std::int64_t live = 0;
  std::int64_t stale = 0;
  std::int64_t desired = 0;
};

/// Counts every topology's sides at `now` (Unix µs); `tenant_of` returns a tenant's index or
/// nullptr (it holds nothing).
std::vector<side_members> count_members(
    const topology_snapshot& topologies,
    const std::function<const index::tenant_index*(std::string_view tenant)>& tenant_of,
    index::micros now);

}  // namespace ic::topology
