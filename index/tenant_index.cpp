// tenant_index: names, construction, the key hash table, entries, ingest, events and
// the TTL sweep. Eviction orders, lookup and views are in files of their own.
#include "index/tenant_index.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

#include <xxhash.h>

#include "index/partition_detail.hpp"

namespace ic::index {

using namespace partition_detail;

// ---------------------------------------------------------------------------------- name_pool

std::uint32_t name_pool::intern(std::string_view s) {
  auto it = ids_.find(s);
  if (it != ids_.end()) return it->second;
  auto id = static_cast<std::uint32_t>(names_.size());
  names_.emplace_back(s);
  views_.emplace_back(names_.back());
  ids_.emplace(views_.back(), id);
  return id;
}

std::optional<std::uint32_t> name_pool::find(std::string_view s) const {
  auto it = ids_.find(s);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

std::size_t name_pool::bytes() const {
  std::size_t b = ids_.size() * 48 + ids_.bucket_count() * 8;
  for (const auto& n : names_) b += sizeof(std::string) + (n.size() > 15 ? n.capacity() : 0);
  return b;
}

std::uint8_t normalize_tier(std::int32_t wire) {
  if (wire == 0) return 1;
  if (wire >= 1 && wire <= 3) return static_cast<std::uint8_t>(wire);
  if (wire > 3) return tier_unknown_positive;
  return tier_coldest;
}

// ---------------------------------------------------------------------------- construction

namespace {
std::uint64_t next_index_instance() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

tenant_index::tenant_index(std::string name, index_options options)
    : name_(std::move(name)),
      reserved_(name_ == reserved_tenant),
      records_(options.key_chunk_bits),
      options_(options),
      instance_(next_index_instance()) {
  if (options_.default_ttl.count() <= 0) options_.default_ttl = policy::default_ttl;
  policy_.eviction_ttl = options_.default_ttl;
}

tenant_index::~tenant_index() {
  for (std::size_t i = 0; i < records_.size(); ++i) {
    key_record& k = records_[i];
    if (!is_free(k) && on_heap(k)) std::free(k.u.block);
  }
}

void tenant_index::rebind(const index_options& options) {
  const bool tracked = cap_tracked();
  const index_facts mine = facts();
  {
    // The facts leave the old totals and join the new ones.
    facts_guard leaving(*this);
    entries_ = keys_ = 0;
  }
  entries_ = mine.total_entries;
  keys_ = mine.total_keys;
  options_ = options;
  if (options_.default_ttl.count() <= 0) options_.default_ttl = policy::default_ttl;
  publish_facts(index_facts{});
  if (tracked != cap_tracked()) rebuild_cap_order();
}

void tenant_index::set_policy(const policy::resolved_policy& policy) {
  const bool mode_changed = policy.eviction != policy_.eviction;
  policy_ = policy;
  if (policy_.eviction_ttl.count() <= 0) policy_.eviction_ttl = options_.default_ttl;
  if (mode_changed) rebuild_cap_order();
}

void tenant_index::set_quota(std::optional<std::int64_t> quota) {
  if (quota && *quota < 0) quota = 0;
  if (reserved_) quota.reset();
  const bool was = quota_.has_value();
  quota_ = quota;
  if (quota_ && !was) rebuild_quota_order();
  if (!quota_) {
    quota_order_.clear();
    quota_refs_ = 0;
  }
}

// --------------------------------------------------------------------------- names / scopes

std::uint32_t tenant_index::part_of(std::string_view model, std::string_view scheme,
                                        std::string_view adapter) {
  const auto m = names_.intern(model);
  const auto s = names_.intern(scheme);
  const auto a = names_.intern(adapter);
  auto it = part_ids_.find({m, s, a});
  if (it != part_ids_.end()) return it->second;
  std::uint32_t scope;
  auto sit = scope_ids_.find({m, s});
  if (sit != scope_ids_.end()) {
    scope = sit->second;
  } else {
    scope = static_cast<std::uint32_t>(scopes_.size());
    scopes_.push_back(scope_info{m, s, {}});
    scope_ids_.emplace(std::make_pair(m, s), scope);
  }
  const auto id = static_cast<std::uint32_t>(parts_.size());
  if (id >= key_part_mask) std::abort();  // > 16 M (model, scheme, adapter) triples in a tenant
  parts_.push_back(part_info{m, s, a, scope});
  part_ids_.emplace(std::make_tuple(m, s, a), id);
  return id;
}

std::optional<std::uint32_t> tenant_index::find_part(std::string_view model,
                                                         std::string_view scheme,
                                                         std::string_view adapter) const {
  auto m = names_.find(model);
  auto s = names_.find(scheme);
  auto a = names_.find(adapter);
  if (!m || !s || !a) return std::nullopt;
  auto it = part_ids_.find({*m, *s, *a});
  if (it == part_ids_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::uint32_t> tenant_index::find_scope(std::string_view model,
                                                          std::string_view scheme) const {
  auto m = names_.find(model);
  auto s = names_.find(scheme);
  if (!m || !s) return std::nullopt;
  auto it = scope_ids_.find({*m, *s});
  if (it == scope_ids_.end()) return std::nullopt;
  return it->second;
}

// -------------------------------------------------------------------------- key hash table

std::uint64_t tenant_index::key_hash(std::uint32_t part, std::string_view bytes) const {
  if (bytes.size() == 8) return mix64(load_be64(bytes) + part * 0x9E3779B97F4A7C15ULL);
  return XXH3_64bits_withSeed(bytes.data(), bytes.size(), part + 0x51ULL);
}

std::uint64_t tenant_index::key_hash(const key_record& k) const {
  if (k.part & long_flag) return key_hash(part_id(k), long_hashes_[k.hash]);
  return mix64(k.hash + part_id(k) * 0x9E3779B97F4A7C15ULL);
}

bool tenant_index::key_equals(const key_record& k, std::uint32_t part,
                                  std::string_view bytes) const {
  if (part_id(k) != part) return false;
  if (k.part & long_flag) return bytes.size() != 8 && long_hashes_[k.hash] == bytes;
  return bytes.size() == 8 && k.hash == load_be64(bytes);
}

std::string tenant_index::key_bytes(const key_record& k) const {
  if (k.part & long_flag) return long_hashes_[k.hash];
  return store_be64(k.hash);
}

std::optional<std::uint32_t> tenant_index::find_key(std::uint32_t part,
                                                        std::string_view bytes) const {
  return find_key_hashed(part, bytes, key_hash(part, bytes));
}

std::optional<std::uint32_t> tenant_index::find_key_hashed(std::uint32_t part,
                                                               std::string_view bytes,
                                                               std::uint64_t h) const {
  std::size_t at = 0;
  const std::uint32_t found = table_.find(
      h, [&](std::uint32_t r) { return key_equals(records_[r], part, bytes); }, at);
  if (found == npos) return std::nullopt;
  return found;
}

std::uint32_t tenant_index::find_or_create_key(std::uint32_t part, std::string_view bytes,
                                                   bool& created) {
  const std::uint64_t h = key_hash(part, bytes);
  std::size_t at = 0;
  const std::uint32_t found = table_.find(
      h, [&](std::uint32_t r) { return key_equals(records_[r], part, bytes); }, at);
  if (found != npos) {
    created = false;
    return found;
  }
  created = true;
  key_record rec{};
  rec.part = part;
  if (bytes.size() == 8) {
    rec.hash = load_be64(bytes);
  } else {
    rec.part |= long_flag;
    std::uint32_t l;
    if (!free_long_.empty()) {
      l = free_long_.back();
      free_long_.pop_back();
      long_hashes_[l].assign(bytes.data(), bytes.size());
    } else {
      l = static_cast<std::uint32_t>(long_hashes_.size());
      long_hashes_.emplace_back(bytes);
    }
    rec.hash = l;
  }
  rec.part |= key_empty;
  std::uint32_t idx;
  if (!free_records_.empty()) {
    idx = free_records_.back();
    free_records_.pop_back();
    records_[idx] = rec;
  } else {
    idx = static_cast<std::uint32_t>(records_.size());
    records_.push_back(rec);
  }
  table_.insert_at(at, h, idx);  // aborts past 64 M keys in one tenant
  ++keys_;
  ++keys_by_model_[parts_[part].model];
  // Keep the load factor at or below 7/8.
  if (table_.over_load()) {
    table_.rehash(table_.slot_count() * 2, [this](std::uint32_t r) { return record_hash(r); });
  }
  return idx;
}

// ------------------------------------------------------------------------------- entries

std::uint32_t tenant_index::find_replica(const key_record& k, std::uint32_t replica) {
  const entry_span e = entries_of(k);
  for (std::uint32_t i = 0; i < e.n; ++i) {
    if ((e.rt[i] & 0xFFFFFFu) == replica) return i;
  }
  return npos;
}

namespace {

/// Allocates an entry block of `cap` entries and copies `n` entries of `from` into it.
char* make_block(std::uint32_t cap, const entry_span& from, std::uint32_t n) {
  char* b = static_cast<char*>(std::malloc(static_cast<std::size_t>(cap) * 20));
  auto* ls = reinterpret_cast<micros*>(b);
  auto* rt = reinterpret_cast<std::uint32_t*>(b + 8 * static_cast<std::size_t>(cap));
  auto* tc = reinterpret_cast<std::int32_t*>(b + 12 * static_cast<std::size_t>(cap));
  auto* ac = reinterpret_cast<std::uint32_t*>(b + 16 * static_cast<std::size_t>(cap));
  for (std::uint32_t i = 0; i < n; ++i) {
    ls[i] = from.ls[i];
    rt[i] = from.rt[i];
    tc[i] = from.tc[i];
    ac[i] = from.ac[i];
  }
  return b;
}

}  // namespace

std::uint32_t tenant_index::add_replica(key_record& k, std::uint32_t replica) {
  const std::uint32_t n = size_of(k);
  if (n == 0) {
    k.u.ls = 0;
    k.rt = replica;
    k.tc = 0;
    k.ac = 0;
    k.part &= ~key_empty;
    return 0;
  }
  if (!on_heap(k)) {
    char* b = make_block(2, entries_of(k), 1);
    k.u.block = b;
    k.rt = 1;  // size
    k.tc = 2;  // capacity
    k.ac = 0;
    k.part |= key_on_heap;
  } else if (n == static_cast<std::uint32_t>(k.tc)) {
    const auto cap = static_cast<std::uint32_t>(k.tc) * 2;
    char* b = make_block(cap, entries_of(k), n);
    std::free(k.u.block);
    k.u.block = b;
    k.tc = static_cast<std::int32_t>(cap);
  }
  k.rt = n + 1;
  const entry_span e = entries_of(k);
  e.ls[n] = 0;
  e.rt[n] = replica;
  e.tc[n] = 0;
  e.ac[n] = 0;
  return n;
}

micros tenant_index::key_age(const key_record& k) const {
  const entry_span e = entries_of(k);
  micros m = std::numeric_limits<micros>::min();
  for (std::uint32_t i = 0, n = size_of(k); i < n; ++i) m = std::max(m, e[i].last_seen);
  return m;
}

std::uint32_t tenant_index::effective_count(const entry_proxy& e) const {
  return policy_.eviction == policy::eviction_mode::lfu ? e.access_count : 0;
}

void tenant_index::upsert(std::uint32_t part, std::string_view hash, std::int32_t token_count,
                              std::uint8_t tier, micros ts, std::uint32_t replica,
                              change_log* changes, ingest_result& result) {
  bool created_key = false;
  const std::uint32_t kidx = find_or_create_key(part, hash, created_key);
  key_record& k = records_[kidx];
  std::uint32_t pos = created_key ? npos : find_replica(k, replica);
  bool created = false;
  if (pos == npos) {
    pos = add_replica(k, replica);
    created = true;
    ++entries_;
    ++scopes_[parts_[part].scope].serving[replica];
    ++result.entries_added;
  }
  entry_proxy e = entries_of(k)[pos];
  const micros old_ts = e.last_seen;
  e.token_count = token_count;
  e.last_seen = ts;
  e.replica_tier = replica | (static_cast<std::uint32_t>(tier) << 24);
  if (created) record(changes, event_type::prefix_added, change_cause::ingest, &k, replica, ts);
  if (cap_tracked() && (created || old_ts != ts)) push_cap_ref(kidx, effective_count(e), ts);
  if (quota_ && (created || old_ts != ts)) push_quota_ref(kidx);
}

void tenant_index::remove_entry(std::uint32_t kidx, std::uint32_t pos, change_cause cause,
                                    micros ts, change_log* changes) {
  key_record& k = records_[kidx];
  const entry_span e = entries_of(k);
  const std::uint32_t replica = e[pos].replica();
  record(changes, event_type::prefix_evicted, cause, &k, replica, ts);
  const std::uint32_t n = e.n;
  e.ls[pos] = e.ls[n - 1];
  e.rt[pos] = e.rt[n - 1];
  e.tc[pos] = e.tc[n - 1];
  e.ac[pos] = e.ac[n - 1];
  const std::uint32_t part = part_id(k);
  if (on_heap(k)) {
    if (n - 1 == 1) {
      const micros ls = e.ls[0];
      const std::uint32_t rt = e.rt[0];
      const std::int32_t tc = e.tc[0];
      const std::uint32_t ac = e.ac[0];
      std::free(k.u.block);
      k.u.ls = ls;
      k.rt = rt;
      k.tc = tc;
      k.ac = ac;
      k.part &= ~key_on_heap;
    } else {
      k.rt = n - 1;
    }
  } else {
    k.part |= key_empty;
  }
  --entries_;
  auto& serving = scopes_[parts_[part].scope].serving;
  auto sit = serving.find(replica);
  if (sit != serving.end() && --sit->second == 0) serving.erase(sit);

  if (size_of(k) == 0) {
    table_.erase(kidx, [this](std::uint32_t r) { return record_hash(r); });
    if (k.part & long_flag) {
      long_hashes_[k.hash].clear();
      long_hashes_[k.hash].shrink_to_fit();
      free_long_.push_back(static_cast<std::uint32_t>(k.hash));
    }
    k.part = key_free;
    free_records_.push_back(kidx);
    --keys_;
    auto mit = keys_by_model_.find(parts_[part].model);
    if (mit != keys_by_model_.end() && --mit->second == 0) keys_by_model_.erase(mit);
  } else if (quota_ && !removing_key_) {
    push_quota_ref(kidx);
  }
}

void tenant_index::record(change_log* changes, event_type type, change_cause cause,
                              const key_record* k, std::uint32_t replica, micros ts,
                              std::uint32_t model) const {
  if (changes == nullptr || reserved_) return;
  cache_change c;
  c.type = type;
  c.cause = cause;
  c.tenant_id = name_;
  c.replica_id = names_.name(replica);
  c.timestamp_us = ts;
  if (k != nullptr) {
    const part_info& p = parts_[part_id(*k)];
    c.model_id = names_.name(p.model);
    c.hash_scheme = names_.name(p.scheme);
    c.adapter_id = names_.name(p.adapter);
    c.prefix_hash = key_bytes(*k);
  } else {
    c.model_id = names_.name(model);
  }
  changes->push_back(std::move(c));
}

// ---------------------------------------------------------------------------------- ingest

void tenant_index::ingest_parts(const cache_state_update& u, micros ts, change_log* changes,
                              ingest_result& result) {
  auto note_drop = [&](std::string_view why) {
    if (result.first_drop_reason.empty()) result.first_drop_reason = why;
  };
  if (u.hash_scheme.empty()) {
    if (!u.prefixes.empty()) {
      result.dropped_empty_hash_scheme += static_cast<std::int64_t>(u.prefixes.size());
      note_drop(drop_reason::empty_hash_scheme);
    }
  } else {
    const std::uint32_t replica = names_.intern(u.replica_id);
    if (replica > max_replica_id) std::abort();  // > 16 M distinct replica names per tenant
    std::uint32_t cached_part = 0;
    std::string_view cached_adapter;
    bool have_part = false;
    for (const prefix_entry& p : u.prefixes) {
      const std::uint8_t tier = normalize_tier(p.tier);
      std::string_view adapter =
          !p.adapter_id.empty() ? std::string_view(p.adapter_id) : std::string_view(u.adapter_id);
      const bool chain = !p.block_hashes.empty() || !p.block_token_counts.empty();
      if (chain && p.block_hashes.size() != p.block_token_counts.size()) {
        ++result.dropped_malformed_chain;
        note_drop(drop_reason::malformed_chain);
        continue;
      }
      if (!have_part || adapter != cached_adapter) {
        cached_part = part_of(u.model_id, u.hash_scheme, adapter);
        cached_adapter = adapter;
        have_part = true;
      }
      if (chain) {
        std::uint32_t cumulative = 0;  // int32 wrap-around like the reference
        for (std::size_t j = 0; j < p.block_hashes.size(); ++j) {
          cumulative += static_cast<std::uint32_t>(p.block_token_counts[j]);
          upsert(cached_part, p.block_hashes[j], static_cast<std::int32_t>(cumulative), tier, ts,
                 replica, changes, result);
        }
        if (!p.prefix_hash.empty()) {
          upsert(cached_part, p.prefix_hash, p.token_count, tier, ts, replica, changes, result);
        }
      } else {
        upsert(cached_part, p.prefix_hash, p.token_count, tier, ts, replica, changes, result);
      }
    }
  }
  if (u.stats) {
    const std::uint32_t model = names_.intern(u.model_id);
    const std::uint32_t replica = names_.intern(u.replica_id);
    stats_row& row = stats_[model][replica];
    const replica_stats& s = *u.stats;
    row.cache_memory_bytes = s.cache_memory_bytes;
    row.hit_rate = std::isfinite(s.hit_rate) ? s.hit_rate : 0.0f;
    row.pressure = std::isfinite(s.pressure) ? s.pressure : 0.0f;
    row.t2_hit_tokens = s.t2_hit_tokens;
    row.t2_query_tokens = s.t2_query_tokens;
    row.last_seen = ts;
    row.stats_reported = ts;
    record(changes, event_type::replica_updated, change_cause::ingest, nullptr, replica, ts, model);
  }
  // Stale-ref compaction keeps the order structures within 2x the live entries.
  if (cap_tracked() && cap_refs_ > 2 * static_cast<std::size_t>(entries_) + 4096)
    rebuild_cap_order();
  if (quota_ && quota_refs_ > 2 * static_cast<std::size_t>(keys_) + 4096) rebuild_quota_order();
}

// ---------------------------------------------------------------------------------- events

void tenant_index::apply_event_at(const cache_event& ev, micros ts, change_log* changes,
                                   event_result& result) {
  switch (static_cast<event_type>(ev.type)) {
    case event_type::prefix_evicted: {
      result.applied = true;
      auto model = names_.find(ev.model_id);
      if (!model) return;
      auto replica = names_.find(ev.replica_id);
      if (!replica) return;
      std::optional<std::uint32_t> adapter;
      if (!ev.adapter_id.empty()) {
        adapter = names_.find(ev.adapter_id);
        if (!adapter) return;
      }
      for (std::uint32_t part = 0; part < parts_.size(); ++part) {
        const part_info& p = parts_[part];
        if (p.model != *model || (adapter && p.adapter != *adapter)) continue;
        auto key = find_key(part, ev.prefix_hash);
        if (!key) continue;
        key_record& k = records_[*key];
        const entry_span e = entries_of(k);
        for (std::uint32_t i = 0; i < size_of(k); ++i) {
          if (e[i].replica() == *replica) {
            remove_entry(*key, i, change_cause::event, ts, changes);
            ++result.entries_removed;
            break;
          }
        }
      }
      return;
    }
    case event_type::replica_updated: {
      result.applied = true;
      auto model = names_.find(ev.model_id);
      auto replica = names_.find(ev.replica_id);
      if (model && replica) {
        auto mit = stats_.find(*model);
        if (mit != stats_.end()) {
          auto rit = mit->second.find(*replica);
          if (rit != mit->second.end()) rit->second.last_seen = ts;
        }
      }
      const std::uint32_t rid = names_.intern(ev.replica_id);
      const std::uint32_t mid = names_.intern(ev.model_id);
      record(changes, event_type::replica_updated, change_cause::event, nullptr, rid, ts, mid);
      return;
    }
    case event_type::all_cleared: {
      result.applied = true;
      const std::uint32_t rid = names_.intern(ev.replica_id);
      const std::uint32_t mid = names_.intern(ev.model_id);
      for (std::uint32_t kidx = 0; kidx < records_.size(); ++kidx) {
        key_record& k = records_[kidx];
        if (is_free(k) || parts_[part_id(k)].model != mid) continue;
        const entry_span e = entries_of(k);
        for (std::uint32_t i = 0; i < size_of(k); ++i) {
          if (e[i].replica() == rid) {
            remove_entry(kidx, i, change_cause::event, ts, changes);
            ++result.entries_removed;
            break;
          }
        }
      }
      auto mit = stats_.find(mid);
      if (mit != stats_.end()) {
        mit->second.erase(rid);
        if (mit->second.empty()) stats_.erase(mit);
      }
      record(changes, event_type::all_cleared, change_cause::event, nullptr, rid, ts, mid);
      return;
    }
    default:
      return;  // PREFIX_ADDED is a no-op; unknown types are ignored.
  }
}

// ------------------------------------------------------------------------------ TTL sweep

void tenant_index::sweep_all(micros now, change_log* changes, sweep_result& result) {
  std::uint32_t next_key = 0;
  std::size_t unlimited = std::numeric_limits<std::size_t>::max();
  sweep_slice(now, changes, result, next_key, unlimited);
}

bool tenant_index::sweep_slice(micros now, change_log* changes, sweep_result& result,
                                   std::uint32_t& next_key, std::size_t& budget) {
  const std::int64_t ttl = policy_.eviction_ttl.count();
  const bool lfu = policy_.eviction == policy::eviction_mode::lfu;
  for (; next_key < records_.size(); ++next_key) {
    if (budget == 0) return false;
    --budget;
    const std::uint32_t kidx = next_key;
    if (is_free(records_[kidx])) continue;
    for (std::uint32_t i = size_of(records_[kidx]); i-- > 0;) {
      key_record& k = records_[kidx];
      if (is_free(k)) break;
      if (is_expired(now, entries_of(k)[i].last_seen, ttl)) {
        remove_entry(kidx, i, change_cause::ttl, now, changes);
        ++(lfu ? result.entries_removed_lfu : result.entries_removed_lru);
      }
    }
  }
  for (auto mit = stats_.begin(); mit != stats_.end();) {
    for (auto rit = mit->second.begin(); rit != mit->second.end();) {
      if (is_expired(now, rit->second.last_seen, ttl)) {
        rit = mit->second.erase(rit);
        ++result.stats_rows_removed;
      } else {
        ++rit;
      }
    }
    mit = mit->second.empty() ? stats_.erase(mit) : std::next(mit);
  }
  return true;
}

}  // namespace ic::index
