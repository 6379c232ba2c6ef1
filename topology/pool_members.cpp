#include "topology/pool_members.hpp"

#include <algorithm>
#include <map>

namespace ic::topology {
namespace {

/// Replica id -> live, for the rows of `t`'s namespace over the models it serves.
std::map<std::string, bool, std::less<>> seen_replicas(const topology& t,
                                                        const index::tenant_index* idx,
                                                        index::micros now) {
  std::map<std::string, bool, std::less<>> out;
  if (idx == nullptr) return out;
  const index::micros max_age_us = t.selection.stats_max_age_ms * 1000;
  std::vector<index::stats_row_view> rows;
  for (std::string_view model : idx->stats_models()) {
    if (!t.models.empty() && !std::binary_search(t.models.begin(), t.models.end(), model)) continue;
    rows.clear();
    idx->stats_rows(model, rows);
    for (const auto& r : rows) {
      const bool live = now - r.last_seen < max_age_us;
      auto [it, fresh] = out.emplace(std::string(r.replica_id), live);
      if (!fresh) it->second = it->second || live;
    }
  }
  return out;
}

side_members count_side(const compiled_topology& ct, const std::vector<compiled_pool>& pools,
                        const char* role, const std::map<std::string, bool, std::less<>>& seen) {
  side_members m;
  m.topology = ct.spec->namespace_name + "/" + ct.spec->name;
  m.role = role;
  std::map<std::string_view, bool> members;  // id -> live
  for (const auto& p : pools) {
    m.desired += p.spec->replicas.value_or(0);
    for (const auto& id : p.spec->replica_ids) {
      auto it = seen.find(id);
      members.emplace(id, it != seen.end() && it->second);
    }
  }
  for (const auto& [id, live] : seen) {
    if (members.count(id)) continue;
    for (const auto& p : pools) {
      if (p.pattern_matches(id)) {
        members.emplace(id, live);
        break;
      }
    }
  }
  for (const auto& [_, live] : members) ++(live ? m.live : m.stale);
  return m;
}

}  // namespace

std::vector<side_members> count_members(
    const topology_snapshot& topologies,
    const std::function<const index::tenant_index*(std::string_view tenant)>& tenant_of,
    index::micros now) {
  std::vector<side_members> out;
  for (const auto& t : topologies.set().topologies) {
    const compiled_topology* ct = topologies.find(t.namespace_name, t.name);
    if (ct == nullptr) continue;
    const auto seen = seen_replicas(t, tenant_of(t.namespace_name), now);
    out.push_back(count_side(*ct, ct->prefill, "prefill", seen));
    out.push_back(count_side(*ct, ct->decode, "decode", seen));
  }
  return out;
}

}  // namespace ic::topology
