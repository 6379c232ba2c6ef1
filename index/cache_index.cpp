#include "index/cache_index.hpp"

#include <algorithm>

#include "index/tenant_index.hpp"

namespace ic::index {

// ------------------------------------------------------------------------------ cache_index

cache_index::cache_index(index_options options) : options_(options) {
  if (options_.default_ttl.count() <= 0) options_.default_ttl = policy::default_ttl;
}

index_options cache_index::tenant_options() const {
  index_options o = options_;
  o.external_cap = true;
  return o;
}

global_facts cache_index::facts() const {
  global_facts f;
  for (const auto& t : slots_) {
    if (!t) continue;
    const global_facts g = t->facts();
    f.total_entries += g.total_entries;
    f.reserved_entries += g.reserved_entries;
    f.total_keys += g.total_keys;
  }
  return f;
}

void cache_index::publish_loaded() {
  for (const auto& t : slots_) t->publish_facts(global_facts{});
}

cache_index::~cache_index() = default;

tenant_index* cache_index::find_partition(std::string_view tenant) const {
  auto it = by_name_.find(tenant);
  return it == by_name_.end() ? nullptr : it->second;
}

tenant_index& cache_index::partition(std::string_view tenant) {
  if (auto* p = find_partition(tenant)) return *p;
  const auto slot = static_cast<std::uint32_t>(slots_.size());
  slots_.push_back(std::make_unique<tenant_index>(std::string(tenant), tenant_options()));
  tenant_index* p = slots_.back().get();
  p->slot_ = slot;
  by_name_.emplace(std::string(tenant), p);
  auto pit = policies_.find(tenant);
  if (pit != policies_.end()) p->set_policy(pit->second);
  auto qit = quotas_.find(tenant);
  if (qit != quotas_.end()) p->set_quota(qit->second);
  return *p;
}

void cache_index::set_tenant_policy(std::string_view tenant, const policy::resolved_policy& pol) {
  policy::resolved_policy p = pol;
  if (p.eviction_ttl.count() <= 0) p.eviction_ttl = options_.default_ttl;
  policies_.insert_or_assign(std::string(tenant), p);
  if (auto* part = find_partition(tenant)) part->set_policy(p);
}

void cache_index::set_tenant_quota(std::string_view tenant, policy::tenant_quota quota) {
  if (tenant == reserved_tenant) quota.reset();
  if (quota && *quota < 0) quota = 0;
  if (quota) {
    quotas_.insert_or_assign(std::string(tenant), *quota);
  } else {
    auto it = quotas_.find(tenant);
    if (it != quotas_.end()) quotas_.erase(it);
  }
  if (auto* part = find_partition(tenant)) part->set_quota(quota);
}

ingest_result cache_index::ingest(const cache_state_update& update, micros now, change_log* changes,
                                  input_origin origin) {
  ingest_result result;
  if (update.tenant_id == reserved_tenant && origin == input_origin::producer) {
    result.dropped_reserved_tenant = 1;
    result.first_drop_reason = drop_reason::reserved_tenant;
    return result;
  }
  const micros ts = effective_time(update, now);
  tenant_index& p = partition(update.tenant_id);
  {
    tenant_index::facts_guard guard(p);
    p.ingest_at(update, ts, changes, result);
  }
  if (!options_.external_cap) enforce_cap(ts, changes, result);
  return result;
}

tenant_index* cache_index::next_cap_victim(cap_candidate& victim) {
  tenant_index* best = nullptr;
  for (auto& [name, p] : by_name_) {  // tenant-name order breaks (count, last_seen) ties
    if (p->reserved() || p->entries() == 0) continue;
    auto c = p->peek_cap_victim();
    if (!c) continue;
    if (best == nullptr || c->count < victim.count ||
        (c->count == victim.count && c->last_seen < victim.last_seen)) {
      best = p;
      victim = *c;
    }
  }
  return best;
}

std::int64_t cache_index::evict_cap_impl(const cap_head* bound, std::int64_t max, micros ts,
                                          change_log* changes, ingest_result& result) {
  std::int64_t evicted = 0;
  while (evicted < max) {
    cap_candidate c;
    tenant_index* best = next_cap_victim(c);
    if (best == nullptr) break;
    // Stop unless (count, last_seen, tenant) sorts strictly before the bound.
    if (bound != nullptr && !cap_before(c.count, c.last_seen, best->name(), *bound)) break;
    const bool lfu = best->policy().eviction == policy::eviction_mode::lfu;
    tenant_index::facts_guard guard(*best);
    best->evict_cap_victim(c, ts, changes);
    ++(lfu ? result.cap_evicted_lfu : result.cap_evicted_lru);
    ++evicted;
  }
  return evicted;
}

void cache_index::enforce_cap(micros ts, change_log* changes, ingest_result& result) {
  if (options_.max_entries <= 0) return;
  const global_facts f = facts();
  const std::int64_t excess = f.total_entries - f.reserved_entries - options_.max_entries;
  // Every eviction removes one non-reserved entry.
  if (excess > 0) evict_cap_impl(nullptr, excess, ts, changes, result);
}

std::optional<cap_head> cache_index::cap_victim() {
  cap_candidate c;
  tenant_index* best = next_cap_victim(c);
  if (best == nullptr) return std::nullopt;
  return cap_head{c.count, c.last_seen, best->name()};
}

std::int64_t cache_index::evict_cap(const std::optional<cap_head>& bound, std::int64_t max,
                                    micros ts, change_log* changes, ingest_result& result) {
  return evict_cap_impl(bound ? &*bound : nullptr, max, ts, changes, result);
}

std::vector<std::pair<std::string, std::unique_ptr<cache_index>>> cache_index::split_tenants(
    const index_options& per_tenant) {
  std::vector<std::pair<std::string, std::unique_ptr<cache_index>>> out;
  out.reserve(by_name_.size());
  for (auto& [name, p] : by_name_) {
    auto idx = std::make_unique<cache_index>(per_tenant);
    std::unique_ptr<tenant_index> owned = std::move(slots_[p->slot()]);
    owned->rebind(0, idx->tenant_options());  // its facts move to per_tenant.shared
    if (auto it = policies_.find(name); it != policies_.end()) idx->policies_.emplace(*it);
    if (auto it = quotas_.find(name); it != quotas_.end()) idx->quotas_.emplace(*it);
    idx->by_name_.emplace(name, owned.get());
    idx->slots_.push_back(std::move(owned));
    out.emplace_back(name, std::move(idx));
  }
  by_name_.clear();
  slots_.clear();
  return out;
}

event_result cache_index::apply_event(const cache_event& event, micros now, change_log* changes,
                                      input_origin origin) {
  event_result result;
  if (event.tenant_id == reserved_tenant && origin == input_origin::producer) return result;
  const auto type = static_cast<event_type>(event.type);
  if (type != event_type::prefix_evicted && type != event_type::replica_updated &&
      type != event_type::all_cleared) {
    return result;
  }
  tenant_index* p = find_partition(event.tenant_id);
  if (p == nullptr) {
    // Nothing of this tenant is held: no entry to remove, no stats row to refresh.
    result.applied = true;
    return result;
  }
  return p->apply_event(event, now, changes, origin);
}

sweep_result cache_index::sweep(micros now, change_log* changes) {
  sweep_result result;
  for (auto& [name, p] : by_name_) {
    tenant_index::facts_guard guard(*p);
    p->sweep_all(now, changes, result);
  }
  return result;
}

bool cache_index::sweep_step(micros now, sweep_cursor& cursor, std::size_t max_keys,
                             change_log* changes, sweep_result& result) {
  auto it = cursor.started ? by_name_.find(cursor.tenant) : by_name_.begin();
  cursor.started = true;
  std::size_t budget = max_keys;
  while (it != by_name_.end()) {
    if (it->first != cursor.tenant) {
      cursor.tenant = it->first;
      cursor.key = 0;
    }
    tenant_index::facts_guard guard(*it->second);
    if (!it->second->sweep_slice(now, changes, result, cursor.key, budget)) return false;
    ++it;
  }
  return true;
}

index_lookup_result cache_index::lookup(const index_lookup_request& q,
                                        const policy::resolved_policy& pol, micros now) const {
  return lookup_tenant(find_partition(q.tenant), lookup_total_keys(), q, pol, now);
}

std::int64_t cache_index::lookup_total_keys() const {
  return options_.shared != nullptr ? options_.shared->total_keys.load(std::memory_order_acquire)
                                    : facts().total_keys;
}

std::optional<std::string> cache_index::affinity_pick(std::string_view tenant,
                                                      std::string_view model,
                                                      std::string_view hash_scheme,
                                                      std::string_view seed) const {
  if (tenant.empty()) return std::nullopt;
  return index::affinity_pick(find_partition(tenant), model, hash_scheme, seed);
}

void cache_index::credit_lfu(const std::vector<scored_replica>& replicas) {
  for (const auto& r : replicas) {
    for (const auto& h : r.hits) {
      if (h.tenant_slot < slots_.size()) slots_[h.tenant_slot]->credit(h);
    }
  }
}

cache_state_view cache_index::get_cache_state(std::string_view tenant,
                                              std::string_view model) const {
  const tenant_index* p = find_partition(tenant);
  if (p == nullptr) return {};
  return p->get_cache_state(model);
}

snapshot_view cache_index::snapshot() const {
  snapshot_view v;
  for (const auto& [name, p] : by_name_) {
    if (!p->reserved()) p->snapshot_rows(v);
  }
  return v;
}

std::vector<std::pair<std::string, std::int64_t>> cache_index::entries_by_model() const {
  std::map<std::string, std::int64_t> m;
  for (const auto& [name, p] : by_name_) {
    if (!p->reserved()) p->entries_by_model(m);
  }
  return {m.begin(), m.end()};
}

std::int64_t cache_index::tenant_keys(std::string_view tenant) const {
  const tenant_index* p = find_partition(tenant);
  return p == nullptr ? 0 : p->keys();
}

std::int64_t cache_index::model_keys(std::string_view tenant, std::string_view model) const {
  const tenant_index* p = find_partition(tenant);
  return p == nullptr ? 0 : p->model_keys(model);
}

std::vector<std::pair<std::string, std::int64_t>> cache_index::serving(
    std::string_view tenant, std::string_view model, std::string_view hash_scheme) const {
  const tenant_index* p = find_partition(tenant);
  if (p == nullptr) return {};
  return p->serving(model, hash_scheme);
}

std::optional<entry_view> cache_index::find_entry(std::string_view tenant, std::string_view model,
                                                  std::string_view hash_scheme,
                                                  std::string_view adapter,
                                                  std::string_view prefix_hash,
                                                  std::string_view replica) const {
  const tenant_index* p = find_partition(tenant);
  if (p == nullptr) return std::nullopt;
  return p->find_entry(model, hash_scheme, adapter, prefix_hash, replica);
}

std::vector<std::string> cache_index::canonical_dump() const {
  std::vector<std::string> out;
  for (const auto& [name, p] : by_name_) p->dump(out);
  const global_facts f = facts();
  out.push_back("G|" + std::to_string(f.total_entries) + "|" + std::to_string(f.reserved_entries) +
                "|" + std::to_string(f.total_keys));
  std::sort(out.begin(), out.end());
  return out;
}

memory_breakdown cache_index::memory_usage() const {
  memory_breakdown m;
  for (const auto& s : slots_) s->memory(m);
  return m;
}

}  // namespace ic::index
