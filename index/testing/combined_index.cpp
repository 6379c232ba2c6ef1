#include "index/testing/combined_index.hpp"

#include <algorithm>
#include <cassert>

namespace ic::index {

combined_index::combined_index(index_options options) : options_(options) {
  if (options_.default_ttl.count() <= 0) options_.default_ttl = policy::default_ttl;
}

combined_index::~combined_index() = default;

index_options combined_index::tenant_options() const {
  index_options o = options_;
  o.external_cap = true;  // the cap is merged here, over every tenant
  return o;
}

const tenant_index* combined_index::tenant(std::string_view tenant) const {
  auto it = by_name_.find(tenant);
  return it == by_name_.end() ? nullptr : it->second;
}

tenant_index& combined_index::tenant_or_add(std::string_view tenant) {
  if (auto it = by_name_.find(tenant); it != by_name_.end()) return *it->second;
  order_.push_back(std::make_unique<tenant_index>(std::string(tenant), tenant_options()));
  tenant_index* p = order_.back().get();
  by_name_.emplace(std::string(tenant), p);
  if (auto it = policies_.find(tenant); it != policies_.end()) p->set_policy(it->second);
  if (auto it = quotas_.find(tenant); it != quotas_.end()) p->set_quota(it->second);
  return *p;
}

std::vector<const tenant_index*> combined_index::tenants() const {
  std::vector<const tenant_index*> v;
  for (const auto& t : order_) v.push_back(t.get());
  return v;
}

void combined_index::set_tenant_policy(std::string_view tenant,
                                       const policy::resolved_policy& pol) {
  policy::resolved_policy p = pol;
  if (p.eviction_ttl.count() <= 0) p.eviction_ttl = options_.default_ttl;
  policies_.insert_or_assign(std::string(tenant), p);
  if (auto it = by_name_.find(tenant); it != by_name_.end()) it->second->set_policy(p);
}

void combined_index::set_tenant_quota(std::string_view tenant, policy::tenant_quota quota) {
  if (tenant == reserved_tenant) quota.reset();
  if (quota && *quota < 0) quota = 0;
  if (quota) {
    quotas_.insert_or_assign(std::string(tenant), *quota);
  } else if (auto it = quotas_.find(tenant); it != quotas_.end()) {
    quotas_.erase(it);
  }
  if (auto it = by_name_.find(tenant); it != by_name_.end()) it->second->set_quota(quota);
}

global_facts combined_index::facts() const {
  global_facts f;
  for (const auto& t : order_) f += t->facts();
  return f;
}

std::int64_t combined_index::lookup_total_keys() const {
  return options_.shared != nullptr ? options_.shared->total_keys.load(std::memory_order_acquire)
                                    : facts().total_keys;
}

ingest_result combined_index::ingest(const cache_state_update& update, micros now,
                                     change_log* changes, input_origin origin) {
  if (update.tenant_id == reserved_tenant && origin == input_origin::producer) {
    return tenant_index(update.tenant_id).ingest(update, now, changes, origin);  // the drop
  }
  ingest_result result = tenant_or_add(update.tenant_id).ingest(update, now, changes, origin);
  if (!options_.external_cap) enforce_cap(effective_time(update, now), changes, result);
  return result;
}

void combined_index::enforce_cap(micros ts, change_log* changes, ingest_result& result) {
  if (options_.max_entries <= 0) return;
  // The merge of state::enforce_cap, over this index's tenants in name order.
  std::vector<tenant_index*> all;
  for (auto& [_, t] : by_name_) all.push_back(t);
  std::vector<std::optional<cap_head>> heads(all.size());
  for (;;) {
    const global_facts f = facts();
    const std::int64_t excess = f.total_entries - f.reserved_entries - options_.max_entries;
    if (excess <= 0) return;
    for (std::size_t i = 0; i < all.size(); ++i) heads[i] = all[i]->cap_victim();
    const cap_step step = pick_cap_step(heads);
    if (step.best == cap_step::none) return;
    if (all[step.best]->evict_cap(step.bound, excess, ts, changes, result) == 0) return;
  }
}

std::optional<cap_head> combined_index::cap_victim() {
  std::vector<std::optional<cap_head>> heads;
  for (auto& [_, t] : by_name_) heads.push_back(t->cap_victim());
  const cap_step step = pick_cap_step(heads);
  if (step.best == cap_step::none) return std::nullopt;
  return heads[step.best];
}

std::int64_t combined_index::evict_cap(const std::optional<cap_head>& bound, std::int64_t max,
                                       micros ts, change_log* changes, ingest_result& result) {
  std::vector<tenant_index*> all;
  for (auto& [_, t] : by_name_) all.push_back(t);
  std::vector<std::optional<cap_head>> heads(all.size());
  std::int64_t evicted = 0;
  while (evicted < max) {
    for (std::size_t i = 0; i < all.size(); ++i) heads[i] = all[i]->cap_victim();
    if (bound) heads.push_back(bound);  // the caller's bound acts as one more index's head
    const cap_step step = pick_cap_step(heads);
    if (bound) heads.pop_back();
    if (step.best == cap_step::none || step.best >= all.size()) break;
    const std::int64_t n = all[step.best]->evict_cap(step.bound, max - evicted, ts, changes, result);
    if (n == 0) break;
    evicted += n;
  }
  return evicted;
}

std::vector<std::pair<std::string, std::unique_ptr<combined_index>>> combined_index::split_tenants(
    const index_options& per_tenant) {
  std::vector<std::pair<std::string, std::unique_ptr<combined_index>>> out;
  for (auto& [name, p] : by_name_) {
    auto idx = std::make_unique<combined_index>(per_tenant);
    auto it = std::find_if(order_.begin(), order_.end(), [&](const auto& t) { return t.get() == p; });
    std::unique_ptr<tenant_index> owned = std::move(*it);
    owned->rebind(idx->tenant_options());  // its facts move to per_tenant.shared
    if (auto pit = policies_.find(name); pit != policies_.end()) idx->policies_.emplace(*pit);
    if (auto qit = quotas_.find(name); qit != quotas_.end()) idx->quotas_.emplace(*qit);
    idx->by_name_.emplace(name, owned.get());
    idx->order_.push_back(std::move(owned));
    out.emplace_back(name, std::move(idx));
  }
  by_name_.clear();
  order_.clear();
  return out;
}

event_result combined_index::apply_event(const cache_event& event, micros now,
                                         change_log* changes, input_origin origin) {
  auto it = by_name_.find(event.tenant_id);
  if (it == by_name_.end()) {
    // Nothing of this tenant is held: the tenant index's own filters, then nothing to do.
    event_result r = tenant_index(event.tenant_id).apply_event(event, now, nullptr, origin);
    return r;
  }
  return it->second->apply_event(event, now, changes, origin);
}

sweep_result combined_index::sweep(micros now, change_log* changes) {
  sweep_result result;
  for (auto& [_, t] : by_name_) {
    const sweep_result r = t->sweep(now, changes);
    result.entries_removed_lru += r.entries_removed_lru;
    result.entries_removed_lfu += r.entries_removed_lfu;
    result.stats_rows_removed += r.stats_rows_removed;
  }
  return result;
}

bool combined_index::sweep_step(micros now, sweep_cursor& cursor, std::size_t max_keys,
                                change_log* changes, sweep_result& result) {
  auto it = cursor.started ? by_name_.find(cursor.tenant) : by_name_.begin();
  cursor.started = true;
  std::size_t budget = max_keys;
  while (it != by_name_.end()) {
    if (it->first != cursor.tenant) {
      cursor.tenant = it->first;
      cursor.inner = {};
    }
    const std::uint32_t from = cursor.inner.key;
    if (!it->second->sweep_step(now, cursor.inner, budget, changes, result)) return false;
    budget -= std::min<std::size_t>(budget, cursor.inner.key - from);  // one per key slot
    ++it;
  }
  return true;
}

index_lookup_result combined_index::lookup(const index_lookup_request& q,
                                           const policy::resolved_policy& pol, micros now) const {
  return lookup_tenant(tenant(q.tenant), lookup_total_keys(), q, pol, now);
}

std::optional<std::string> combined_index::affinity_pick(std::string_view t,
                                                         std::string_view model,
                                                         std::string_view hash_scheme,
                                                         std::string_view seed) const {
  if (t.empty()) return std::nullopt;
  return index::affinity_pick(tenant(t), model, hash_scheme, seed);
}

void combined_index::credit_lfu(std::string_view t, const std::vector<scored_replica>& replicas) {
  if (auto it = by_name_.find(t); it != by_name_.end()) it->second->credit_lfu(replicas);
}

cache_state_view combined_index::get_cache_state(std::string_view t,
                                                 std::string_view model) const {
  const tenant_index* p = tenant(t);
  return p == nullptr ? cache_state_view{} : p->get_cache_state(model);
}

snapshot_view combined_index::snapshot() const {
  snapshot_view out;
  for (const auto& [_, t] : by_name_) out += t->snapshot();
  return out;
}

std::vector<std::pair<std::string, std::int64_t>> combined_index::entries_by_model() const {
  std::map<std::string, std::int64_t> m;
  for (const auto& [_, t] : by_name_)
    for (auto& [model, n] : t->entries_by_model()) m[model] += n;
  return {m.begin(), m.end()};
}

std::int64_t combined_index::tenant_keys(std::string_view t) const {
  const tenant_index* p = tenant(t);
  return p == nullptr ? 0 : p->keys();
}

std::int64_t combined_index::model_keys(std::string_view t, std::string_view model) const {
  const tenant_index* p = tenant(t);
  return p == nullptr ? 0 : p->model_keys(model);
}

std::vector<std::pair<std::string, std::int64_t>> combined_index::serving(
    std::string_view t, std::string_view model, std::string_view hash_scheme) const {
  const tenant_index* p = tenant(t);
  return p == nullptr ? std::vector<std::pair<std::string, std::int64_t>>{}
                      : p->serving(model, hash_scheme);
}

std::optional<entry_view> combined_index::find_entry(std::string_view t, std::string_view model,
                                                     std::string_view hash_scheme,
                                                     std::string_view adapter,
                                                     std::string_view prefix_hash,
                                                     std::string_view replica) const {
  const tenant_index* p = tenant(t);
  if (p == nullptr) return std::nullopt;
  return p->find_entry(model, hash_scheme, adapter, prefix_hash, replica);
}

std::vector<std::string> combined_index::canonical_dump() const {
  return merged_dump(tenants(), facts());
}

memory_breakdown combined_index::memory_usage() const {
  memory_breakdown m;
  for (const auto& t : order_) m += t->memory_usage();
  return m;
}

// ------------------------------------------------------------------------------ snapshots

bool write_snapshot(const combined_index& idx, const std::function<bool(std::string_view)>& sink,
                    std::size_t chunk_bytes) {
  return write_snapshot(idx.tenants(), sink, chunk_bytes);
}

snapshot_loader combined_loader(combined_index& target) {
  assert(target.tenants().empty() && "combined_loader needs an empty index");
  const bool was_empty = target.tenants().empty();  // else every tenant is refused
  return snapshot_loader([&target, was_empty](std::string_view name) -> tenant_index* {
    return was_empty ? &target.tenant_or_add(name) : nullptr;
  });
}

snapshot_loader combined_split_loader(std::function<combined_index*(std::string_view)> target_of) {
  return snapshot_loader(
      [f = std::move(target_of)](std::string_view name) -> tenant_index* {
        combined_index* c = f(name);
        if (c == nullptr || !c->tenants().empty()) return nullptr;
        return &c->tenant_or_add(name);
      });
}

// ---------------------------------------------------------------------------- route lookup

route_decision decide_route(const combined_index& index, const lookup_route_request& r,
                            const route_plan& plan, const policy::resolved_policy& pol,
                            micros now) {
  return decide_route(index.tenant(r.tenant_id), index.lookup_total_keys(), r, plan, pol, now);
}

void commit_route(combined_index& index, const lookup_route_request& r,
                  const route_decision& decision) {
  index.credit_lfu(r.tenant_id, decision.credit);
}

lookup_route_response route_lookup(combined_index& index, const lookup_route_request& request,
                                   const policy::resolved_policy& policy, micros now,
                                   const route_options& options) {
  route_plan plan = plan_route(request, policy, options);
  if (plan.early) return std::move(*plan.early);
  route_decision d = decide_route(index, request, plan, policy, now);
  commit_route(index, request, d);
  return std::move(d.response);
}

}  // namespace ic::index
