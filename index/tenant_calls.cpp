// tenant_index's public calls (each publishes its change of facts() to the shared totals),
// the cap victim and eviction of one tenant, `lookup_tenant` (with the §3.8 miss classifier),
// `affinity_pick`, and the small free helpers of index_types.hpp.
#include <algorithm>

#include <openssl/evp.h>

#include "index/tenant_index.hpp"

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

// --------------------------------------------------------------------------- facts publishing

void tenant_index::publish_facts(const index_facts& before) {
  shared_facts* s = options_.shared;
  if (s == nullptr) return;
  const index_facts now = facts();
  if (const auto d = now.total_entries - before.total_entries; d != 0) {
    s->total_entries.fetch_add(d, std::memory_order_acq_rel);
  }
  if (const auto d = now.reserved_entries - before.reserved_entries; d != 0) {
    s->reserved_entries.fetch_add(d, std::memory_order_acq_rel);
  }
  if (const auto d = now.total_keys - before.total_keys; d != 0) {
    s->total_keys.fetch_add(d, std::memory_order_acq_rel);
  }
  const auto nonreserved = (now.total_entries - now.reserved_entries) -
                           (before.total_entries - before.reserved_entries);
  if (nonreserved != 0) s->nonreserved_entries.fetch_add(nonreserved, std::memory_order_acq_rel);
}

// ------------------------------------------------------------------------------ mutations

ingest_result tenant_index::ingest(const cache_state_update& update, micros now,
                                   change_log* changes, input_origin origin) {
  ingest_result result;
  if (update.tenant_id == reserved_tenant && origin == input_origin::producer) {
    result.dropped_reserved_tenant = 1;
    result.first_drop_reason = drop_reason::reserved_tenant;
    return result;
  }
  facts_guard guard(*this);
  const micros ts = effective_time(update, now);
  ingest_at(update, ts, changes, result);
  if (!options_.external_cap && options_.max_entries > 0) {
    // The own cap: this index's non-reserved entries (every eviction removes one).
    const std::int64_t excess = (reserved_ ? 0 : entries_) - options_.max_entries;
    if (excess > 0) evict_cap_impl(nullptr, excess, ts, changes, result);
  }
  return result;
}

void tenant_index::ingest_at(const cache_state_update& update, micros ts, change_log* changes,
                             ingest_result& result) {
  ingest_parts(update, ts, changes, result);
  enforce_quota(ts, changes, result);
}

event_result tenant_index::apply_event(const cache_event& event, micros now, change_log* changes,
                                       input_origin origin) {
  event_result result;
  if (event.tenant_id == reserved_tenant && origin == input_origin::producer) return result;
  const auto type = static_cast<event_type>(event.type);
  if (type != event_type::prefix_evicted && type != event_type::replica_updated &&
      type != event_type::all_cleared) {
    return result;
  }
  facts_guard guard(*this);
  apply_event_at(event, effective_time(event, now), changes, result);
  return result;
}

sweep_result tenant_index::sweep(micros now, change_log* changes) {
  sweep_result result;
  facts_guard guard(*this);
  sweep_all(now, changes, result);
  return result;
}

bool tenant_index::sweep_step(micros now, sweep_cursor& cursor, std::size_t max_keys,
                              change_log* changes, sweep_result& result) {
  facts_guard guard(*this);
  std::size_t budget = max_keys;
  return sweep_slice(now, changes, result, cursor.key, budget);
}

std::optional<cap_head> tenant_index::cap_victim() {
  if (reserved_ || entries_ == 0) return std::nullopt;
  auto c = peek_cap_victim();
  if (!c) return std::nullopt;
  return cap_head{c->count, c->last_seen, name_};
}

std::int64_t tenant_index::evict_cap_impl(const cap_head* bound, std::int64_t max, micros ts,
                                          change_log* changes, ingest_result& result) {
  std::int64_t evicted = 0;
  if (reserved_) return 0;
  const bool lfu = policy_.eviction == policy::eviction_mode::lfu;
  while (evicted < max && entries_ > 0) {
    auto c = peek_cap_victim();
    if (!c) break;
    // Stop unless (count, last_seen, tenant) sorts strictly before the bound.
    if (bound != nullptr && !cap_before(c->count, c->last_seen, name_, *bound)) break;
    evict_cap_victim(*c, ts, changes);
    ++(lfu ? result.cap_evicted_lfu : result.cap_evicted_lru);
    ++evicted;
  }
  return evicted;
}

std::int64_t tenant_index::evict_cap(const std::optional<cap_head>& bound, std::int64_t max,
                                     micros ts, change_log* changes, ingest_result& result) {
  facts_guard guard(*this);
  return evict_cap_impl(bound ? &*bound : nullptr, max, ts, changes, result);
}

void tenant_index::credit_lfu(const std::vector<scored_replica>& replicas) {
  for (const auto& r : replicas) {
    for (const auto& h : r.hits) credit(h);
  }
}

// -------------------------------------------------------------------------------- lookups

std::int64_t total_keys_of(const tenant_index& tenant) {
  const shared_facts* s = tenant.options().shared;
  return s != nullptr ? s->total_keys.load(std::memory_order_acquire) : tenant.keys();
}

index_lookup_result lookup_tenant(const tenant_index* p, std::int64_t total_keys,
                                  const index_lookup_request& q,
                                  const policy::resolved_policy& pol, micros now) {
  index_lookup_result out;
  if (q.tenant.empty() || q.model.empty() || q.hash_scheme.empty()) return out;
  const bool chain = !q.chain_hashes.empty() || !q.chain_counts.empty();
  if (chain && q.chain_hashes.size() != q.chain_counts.size()) return out;
  if (p != nullptr) {
    out = p->lookup(q, pol, now);
    if (out.strategy != lookup_strategy::none) return out;
  }
  // Miss classifier (§3.8).
  out.scores.clear();
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

std::optional<std::string> affinity_pick(const tenant_index* p, std::string_view model,
                                         std::string_view hash_scheme, std::string_view seed) {
  if (p == nullptr || model.empty() || hash_scheme.empty() || seed.empty()) return std::nullopt;
  auto names = p->serving_names(model, hash_scheme);
  if (names.empty()) return std::nullopt;
  return std::string(names[affinity_index(seed, names.size())]);
}

// ---------------------------------------------------------------------------------- views

snapshot_view tenant_index::snapshot() const {
  snapshot_view v;
  if (!reserved_) snapshot_rows(v);
  return v;
}

std::vector<std::pair<std::string, std::int64_t>> tenant_index::entries_by_model() const {
  std::map<std::string, std::int64_t> m;
  if (!reserved_) entries_by_model(m);
  return {m.begin(), m.end()};
}

namespace {
std::string facts_line(const index_facts& f) {
  return "G|" + std::to_string(f.total_entries) + "|" + std::to_string(f.reserved_entries) + "|" +
         std::to_string(f.total_keys);
}
}  // namespace

std::vector<std::string> tenant_index::canonical_dump() const {
  std::vector<std::string> out;
  dump(out);
  out.push_back(facts_line(facts()));
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> merged_dump(const std::vector<const tenant_index*>& tenants,
                                     const index_facts& facts) {
  std::vector<std::string> out;
  for (const tenant_index* t : tenants) {
    for (auto& line : t->canonical_dump())
      if (line.rfind("G|", 0) != 0) out.push_back(std::move(line));
  }
  out.push_back(facts_line(facts));
  std::sort(out.begin(), out.end());
  return out;
}

memory_breakdown tenant_index::memory_usage() const {
  memory_breakdown m;
  memory(m);
  return m;
}

}  // namespace ic::index
