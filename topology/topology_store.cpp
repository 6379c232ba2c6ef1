#include "topology/topology_store.hpp"

#include <algorithm>
#include <tuple>

#include "admin_json/ref.hpp"
#include "topology/topology_json.hpp"

namespace ic::topology {

bool compiled_pool::pattern_matches(std::string_view id) const {
  for (const auto& g : patterns) {
    if (g.matches(id)) return true;
  }
  return false;
}

bool compiled_pool::contains(std::string_view id) const {
  const auto& ids = spec->replica_ids;
  return (!ids.empty() && std::binary_search(ids.begin(), ids.end(), id, std::less<>())) ||
         pattern_matches(id);
}

namespace {

compiled_pool compile_pool(const pool& p) {
  compiled_pool c;
  c.spec = &p;
  for (const auto& pattern : p.replica_id_patterns) {
    // Validation refused patterns that do not compile.
    if (auto g = glob::compile(pattern)) c.patterns.push_back(std::move(*g));
  }
  return c;
}

}  // namespace

topology_snapshot::topology_snapshot(topology_set set) : set_(std::move(set)) {
  compiled_.reserve(set_.topologies.size());
  for (const auto& t : set_.topologies) {
    compiled_topology c;
    c.spec = &t;
    for (const auto& p : t.prefill_pools) c.prefill.push_back(compile_pool(p));
    for (const auto& d : t.decode_pools) c.decode.push_back(compile_pool(d));
    for (const auto& p : t.prefill_pools) {
      auto& row = c.transport.emplace_back();
      for (const auto& d : t.decode_pools) {
        if (!t.transport.empty()) {
          row.push_back(t.transport);
        } else {
          // Validation refused sets with an underivable pair; "" cannot be reached.
          row.push_back(derive_transport(t, p, d).value_or(std::string_view{}));
        }
      }
    }
    compiled_.push_back(std::move(c));
  }
  canonical_ = encode_topology_set(set_);
}

const compiled_topology* topology_snapshot::find(std::string_view ns, std::string_view name) const {
  return admin_json::find_by_ref(compiled_, ns, name, [](const compiled_topology& c) {
    return std::tie(c.spec->namespace_name, c.spec->name);
  });
}

topology_store::topology_store()
    : current_(std::make_shared<const topology_snapshot>(topology_set{})) {}

void topology_store::apply(topology_set set) {
  current_.publish(std::make_shared<const topology_snapshot>(std::move(set)));
  pushed_ = true;
}

std::shared_ptr<const topology_snapshot> topology_store::current() const { return current_.load(); }

std::string topology_store::to_bytes() const { return current()->canonical(); }

policy::result<topology_set> topology_store::from_bytes(std::string_view bytes) {
  return decode_topology_set(bytes);
}

}  // namespace ic::topology
