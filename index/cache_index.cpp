#include "index/cache_index.hpp"

#include <algorithm>

#include <openssl/evp.h>

#include "index/tenant_partition.hpp"

namespace ic::index {

// ---------------------------------------------------------------------------- free helpers

std::string_view reason_code_of(lookup_strategy s) {
  switch (s) {
    case lookup_strategy::prefix_match:
      return reason::prefix_match;
    case lookup_strategy::tenant_hot:
      return reason::tenant_hot;
    case lookup_strategy::unknown_tenant:
      return reason::unknown_tenant;
    case lookup_strategy::unknown_model:
      return reason::unknown_model;
    case lookup_strategy::unknown_hash_scheme:
      return reason::unknown_hash_scheme;
    case lookup_strategy::none:
      break;
  }
  return reason::no_hint;
}

std::int32_t worst_tier(std::int32_t a, std::int32_t b) {
  if (a == 0 || b == 0) return 0;
  return a > b ? a : b;
}

std::string chain_affinity_seed(const std::vector<std::string>& chain) {
  std::string seed;
  for (const auto& h : chain) {
    const auto n = static_cast<std::uint32_t>(h.size());
    const char len[4] = {static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                         static_cast<char>(n >> 8), static_cast<char>(n)};
    seed.append(len, 4);
    seed.append(h);
  }
  return seed;
}

std::size_t affinity_index(std::string_view seed, std::size_t n) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(seed.data(), seed.size(), digest, &len, EVP_sha256(), nullptr);
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | digest[i];
  return static_cast<std::size_t>(v % n);
}

// ------------------------------------------------------------------------------ cache_index

cache_index::cache_index(index_options options) : options_(options) {
  if (options_.default_ttl.count() <= 0) options_.default_ttl = policy::default_ttl;
  default_policy_.eviction_ttl = options_.default_ttl;
}

cache_index::~cache_index() = default;

tenant_partition* cache_index::find_partition(std::string_view tenant) const {
  auto it = by_name_.find(tenant);
  return it == by_name_.end() ? nullptr : it->second;
}

tenant_partition& cache_index::partition(std::string_view tenant) {
  if (auto* p = find_partition(tenant)) return *p;
  const auto slot = static_cast<std::uint32_t>(slots_.size());
  slots_.push_back(
      std::make_unique<tenant_partition>(std::string(tenant), slot, &facts_, &options_));
  tenant_partition* p = slots_.back().get();
  by_name_.emplace(std::string(tenant), p);
  auto pit = policies_.find(tenant);
  if (pit != policies_.end()) p->set_policy(pit->second);
  auto qit = quotas_.find(tenant);
  if (qit != quotas_.end()) p->set_quota(qit->second);
  return *p;
}

const policy::resolved_policy& cache_index::policy_of(std::string_view tenant) const {
  auto it = policies_.find(tenant);
  return it == policies_.end() ? default_policy_ : it->second;
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

// Publishes the change of facts_ over one public mutating call to options_.shared.
struct cache_index::facts_guard {
  explicit facts_guard(cache_index& idx) : idx_(idx), before_(idx.facts_) {}
  ~facts_guard() { idx_.publish_facts(before_); }
  facts_guard(const facts_guard&) = delete;
  facts_guard& operator=(const facts_guard&) = delete;

 private:
  cache_index& idx_;
  global_facts before_;
};

void cache_index::publish_facts(const global_facts& before) {
  shared_facts* s = options_.shared;
  if (s == nullptr) return;
  if (const auto d = facts_.total_entries - before.total_entries; d != 0) {
    s->total_entries.fetch_add(d, std::memory_order_acq_rel);
  }
  if (const auto d = facts_.reserved_entries - before.reserved_entries; d != 0) {
    s->reserved_entries.fetch_add(d, std::memory_order_acq_rel);
  }
  if (const auto d = facts_.total_keys - before.total_keys; d != 0) {
    s->total_keys.fetch_add(d, std::memory_order_acq_rel);
  }
  const auto nonreserved = (facts_.total_entries - facts_.reserved_entries) -
                           (before.total_entries - before.reserved_entries);
  if (nonreserved != 0) s->nonreserved_entries.fetch_add(nonreserved, std::memory_order_acq_rel);
}

ingest_result cache_index::ingest(const cache_state_update& update, micros now, change_log* changes,
                                  input_origin origin) {
  ingest_result result;
  if (update.tenant_id == reserved_tenant && origin == input_origin::producer) {
    result.dropped_reserved_tenant = 1;
    result.first_drop_reason = drop_reason::reserved_tenant;
    return result;
  }
  facts_guard guard(*this);
  const micros ts = effective_time(update, now);
  tenant_partition& p = partition(update.tenant_id);
  p.ingest(update, ts, changes, result);
  p.enforce_quota(ts, changes, result);
  if (!options_.external_cap) enforce_cap(ts, changes, result);
  return result;
}

bool cap_before(std::uint32_t count, micros last_seen, std::string_view tenant,
                const cap_head& b) {
  if (count != b.count) return count < b.count;
  if (last_seen != b.last_seen) return last_seen < b.last_seen;
  return tenant < std::string_view(b.tenant);
}

bool cap_before(const cap_head& a, const cap_head& b) {
  return cap_before(a.count, a.last_seen, a.tenant, b);
}

cap_step pick_cap_step(const std::vector<std::optional<cap_head>>& heads) {
  cap_step step;
  for (std::size_t i = 0; i < heads.size(); ++i) {
    const auto& h = heads[i];
    if (!h) continue;
    if (step.best == cap_step::none || cap_before(*h, *heads[step.best])) {
      if (step.best != cap_step::none && (!step.bound || cap_before(*heads[step.best], *step.bound)))
        step.bound = heads[step.best];
      step.best = i;
    } else if (!step.bound || cap_before(*h, *step.bound)) {
      step.bound = h;
    }
  }
  return step;
}

tenant_partition* cache_index::next_cap_victim(cap_candidate& victim) {
  tenant_partition* best = nullptr;
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
    tenant_partition* best = next_cap_victim(c);
    if (best == nullptr) break;
    // Stop unless (count, last_seen, tenant) sorts strictly before the bound.
    if (bound != nullptr && !cap_before(c.count, c.last_seen, best->name(), *bound)) break;
    const bool lfu = best->policy().eviction == policy::eviction_mode::lfu;
    best->evict_cap_victim(c, ts, changes);
    ++(lfu ? result.cap_evicted_lfu : result.cap_evicted_lru);
    ++evicted;
  }
  return evicted;
}

void cache_index::enforce_cap(micros ts, change_log* changes, ingest_result& result) {
  if (options_.max_entries <= 0) return;
  const std::int64_t excess =
      facts_.total_entries - facts_.reserved_entries - options_.max_entries;
  // Every eviction removes one non-reserved entry.
  if (excess > 0) evict_cap_impl(nullptr, excess, ts, changes, result);
}

std::optional<cap_head> cache_index::cap_victim() {
  cap_candidate c;
  tenant_partition* best = next_cap_victim(c);
  if (best == nullptr) return std::nullopt;
  return cap_head{c.count, c.last_seen, best->name()};
}

std::int64_t cache_index::evict_cap(const std::optional<cap_head>& bound, std::int64_t max,
                                    micros ts, change_log* changes, ingest_result& result) {
  facts_guard guard(*this);
  return evict_cap_impl(bound ? &*bound : nullptr, max, ts, changes, result);
}

std::vector<std::pair<std::string, std::unique_ptr<cache_index>>> cache_index::split_tenants(
    const index_options& per_tenant) {
  facts_guard guard(*this);
  std::vector<std::pair<std::string, std::unique_ptr<cache_index>>> out;
  out.reserve(by_name_.size());
  for (auto& [name, p] : by_name_) {
    auto idx = std::make_unique<cache_index>(per_tenant);
    std::unique_ptr<tenant_partition> owned = std::move(slots_[p->slot()]);
    owned->rebind(0, &idx->facts_, &idx->options_);
    idx->facts_.total_entries = owned->entries();
    idx->facts_.reserved_entries = owned->reserved() ? owned->entries() : 0;
    idx->facts_.total_keys = owned->keys();
    if (auto it = policies_.find(name); it != policies_.end()) idx->policies_.emplace(*it);
    if (auto it = quotas_.find(name); it != quotas_.end()) idx->quotas_.emplace(*it);
    idx->by_name_.emplace(name, owned.get());
    idx->slots_.push_back(std::move(owned));
    idx->publish_facts(global_facts{});
    out.emplace_back(name, std::move(idx));
  }
  by_name_.clear();
  slots_.clear();
  facts_ = global_facts{};
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
  const micros ts = effective_time(event, now);
  tenant_partition* p = find_partition(event.tenant_id);
  if (p == nullptr) {
    // Nothing of this tenant is held: no entry to remove, no stats row to refresh.
    result.applied = true;
    return result;
  }
  facts_guard guard(*this);
  p->apply_event(event, ts, changes, result);
  return result;
}

sweep_result cache_index::sweep(micros now, change_log* changes) {
  sweep_result result;
  facts_guard guard(*this);
  for (auto& [name, p] : by_name_) p->sweep(now, changes, result);
  return result;
}

bool cache_index::sweep_step(micros now, sweep_cursor& cursor, std::size_t max_keys,
                             change_log* changes, sweep_result& result) {
  facts_guard guard(*this);
  auto it = cursor.started ? by_name_.find(cursor.tenant) : by_name_.begin();
  cursor.started = true;
  std::size_t budget = max_keys;
  while (it != by_name_.end()) {
    if (it->first != cursor.tenant) {
      cursor.tenant = it->first;
      cursor.key = 0;
    }
    if (!it->second->sweep_slice(now, changes, result, cursor.key, budget)) return false;
    ++it;
  }
  return true;
}

index_lookup_result cache_index::lookup(const index_lookup_request& q,
                                        const policy::resolved_policy& pol, micros now) const {
  index_lookup_result out;
  if (q.tenant.empty() || q.model.empty() || q.hash_scheme.empty()) return out;
  const tenant_partition* p = find_partition(q.tenant);
  const bool chain = !q.chain_hashes.empty() || !q.chain_counts.empty();
  if (chain && q.chain_hashes.size() != q.chain_counts.size()) return out;
  if (p != nullptr) {
    out = p->lookup(q, pol, now);
    if (out.strategy != lookup_strategy::none) return out;
  }
  // Miss classifier (§3.8).
  out.scores.clear();
  const std::int64_t total_keys = options_.shared != nullptr
                                      ? options_.shared->total_keys.load(std::memory_order_acquire)
                                      : facts_.total_keys;
  if (total_keys == 0) return out;
  if (p == nullptr || p->keys() == 0) {
    out.strategy = lookup_strategy::unknown_tenant;
  } else if (p->model_keys(q.model) == 0) {
    out.strategy = lookup_strategy::unknown_model;
  } else if (p->serving_names(q.model, q.hash_scheme).empty()) {
    out.strategy = lookup_strategy::unknown_hash_scheme;
  }
  return out;
}

std::optional<std::string> cache_index::affinity_pick(std::string_view tenant,
                                                      std::string_view model,
                                                      std::string_view hash_scheme,
                                                      std::string_view seed) const {
  if (tenant.empty() || model.empty() || hash_scheme.empty() || seed.empty()) return std::nullopt;
  const tenant_partition* p = find_partition(tenant);
  if (p == nullptr) return std::nullopt;
  auto names = p->serving_names(model, hash_scheme);
  if (names.empty()) return std::nullopt;
  return std::string(names[affinity_index(seed, names.size())]);
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
  if (tenant == reserved_tenant) return {};
  const tenant_partition* p = find_partition(tenant);
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
  const tenant_partition* p = find_partition(tenant);
  return p == nullptr ? 0 : p->keys();
}

std::int64_t cache_index::model_keys(std::string_view tenant, std::string_view model) const {
  const tenant_partition* p = find_partition(tenant);
  return p == nullptr ? 0 : p->model_keys(model);
}

std::vector<std::pair<std::string, std::int64_t>> cache_index::serving(
    std::string_view tenant, std::string_view model, std::string_view hash_scheme) const {
  const tenant_partition* p = find_partition(tenant);
  if (p == nullptr) return {};
  return p->serving(model, hash_scheme);
}

std::optional<entry_view> cache_index::find_entry(std::string_view tenant, std::string_view model,
                                                  std::string_view hash_scheme,
                                                  std::string_view adapter,
                                                  std::string_view prefix_hash,
                                                  std::string_view replica) const {
  const tenant_partition* p = find_partition(tenant);
  if (p == nullptr) return std::nullopt;
  return p->find_entry(model, hash_scheme, adapter, prefix_hash, replica);
}

std::vector<std::string> cache_index::canonical_dump() const {
  std::vector<std::string> out;
  for (const auto& [name, p] : by_name_) p->dump(out);
  out.push_back("G|" + std::to_string(facts_.total_entries) + "|" +
                std::to_string(facts_.reserved_entries) + "|" + std::to_string(facts_.total_keys));
  std::sort(out.begin(), out.end());
  return out;
}

memory_breakdown cache_index::memory_usage() const {
  memory_breakdown m;
  for (const auto& s : slots_) s->memory(m);
  return m;
}

}  // namespace ic::index
