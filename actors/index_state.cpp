#include "actors/index_state.hpp"

#include <set>

namespace ic::actors {
namespace {

index::index_options make_index_options(const index_state_options& o) {
  index::index_options io;
  io.max_entries = o.max_entries;
  io.default_ttl = o.default_ttl;
  return io;
}

}  // namespace

index_state::index_state(index_state_options options)
    : options_(options), index_(make_index_options(options)), policies_(options.default_ttl) {
  route_options_.block_size = options.block_size > 0 ? options.block_size : 16;
}

apply_outcome index_state::apply(const decoded_record& record, index::change_log* changes) {
  apply_outcome out;
  const index::micros at = record.applied_at_us;
  std::visit(
      [&](const auto& payload) {
        using T = std::decay_t<decltype(payload)>;
        if constexpr (std::is_same_v<T, index::cache_state_update>) {
          out.ingest = index_.ingest(payload, at, changes);
        } else if constexpr (std::is_same_v<T, index::cache_event>) {
          out.event = index_.apply_event(payload, at, changes);
        } else if constexpr (std::is_same_v<T, policy_record>) {
          auto set = policy::policy_store::from_bytes(payload.canonical_json);
          if (!set.has_value()) {
            out.ok = false;
            out.error = set.error();
            return;
          }
          apply_policy(set.value());
        } else {
          out.sweep = index_.sweep(at, changes);
        }
      },
      record.payload);
  return out;
}

void index_state::apply_policy(const policy::policy_set& set) {
  // Replace-on-write: every tenant named before or now gets its new resolution (tenants
  // that lost their policy fall back to the no-policy defaults, quotas to unbounded).
  std::set<std::string> tenants;
  for (const auto& [t, _] : policies_.resolved().policies) tenants.insert(t);
  for (const auto& [t, _] : policies_.resolved().quotas) tenants.insert(t);
  policies_.apply(set);
  for (const auto& [t, _] : policies_.resolved().policies) tenants.insert(t);
  for (const auto& [t, _] : policies_.resolved().quotas) tenants.insert(t);
  for (const auto& t : tenants) {
    index_.set_tenant_policy(t, policies_.resolve(t));
    index_.set_tenant_quota(t, policies_.quota(t));
  }
}

lookup_outcome index_state::decide(const index::lookup_route_request& request,
                                   index::micros now_us,
                                   const std::function<bool()>& expired) const {
  const policy::resolved_policy pol = policies_.resolve(request.tenant_id);
  index::route_plan plan = index::plan_route(request, pol, route_options_);
  if (plan.early) return {std::move(*plan.early), {}};
  index::route_decision decision = index::decide_route(index_, request, plan, pol, now_us);
  if (expired && expired()) return {index::timeout_response(plan), {}};
  return {std::move(decision.response), std::move(decision.credit)};
}

void index_state::credit(const std::vector<index::scored_replica>& hits) {
  if (!hits.empty()) index_.credit_lfu(hits);
}

index::lookup_route_response index_state::lookup(const index::lookup_route_request& request,
                                                 index::micros now_us,
                                                 const std::function<bool()>& expired) {
  lookup_outcome out = decide(request, now_us, expired);
  credit(out.credit);
  return std::move(out.response);
}

}  // namespace ic::actors
