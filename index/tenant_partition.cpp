#include "index/tenant_partition.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

#include <xxhash.h>

namespace ic::index {

namespace {

constexpr std::uint32_t long_flag = key_long_hash;
constexpr std::uint32_t max_replica_id = 0xFFFFFFu;

std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

/// Hash-table slots hold (6-bit hash tag << 26) | (record index + 1); 0 = empty.
constexpr std::uint32_t slot_index_mask = (1u << 26) - 1;
std::uint32_t slot_tag_of(std::uint64_t h) { return static_cast<std::uint32_t>(h >> 58) << 26; }

std::uint64_t load_be64(std::string_view b) {
  std::uint64_t v = 0;
  std::memcpy(&v, b.data(), 8);
  return __builtin_bswap64(v);  // x86-64 is little-endian
}

std::string store_be64(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; --i) {
    s[i] = static_cast<char>(v & 0xFF);
    v >>= 8;
  }
  return s;
}

/// Returns (now − t) in nanoseconds, saturating.
std::int64_t age_ns(micros now, micros t) {
  std::int64_t d = 0;
  std::int64_t r = 0;
  if (__builtin_sub_overflow(now, t, &d)) {
    return now > t ? std::numeric_limits<std::int64_t>::max()
                   : std::numeric_limits<std::int64_t>::min();
  }
  if (__builtin_mul_overflow(d, std::int64_t{1000}, &r)) {
    return d > 0 ? std::numeric_limits<std::int64_t>::max()
                 : std::numeric_limits<std::int64_t>::min();
  }
  return r;
}

/// Returns true when an entry or stats row is expired at `now` (§4.7: age >= ttl).
bool is_expired(micros now, micros t, std::int64_t ttl_ns) { return age_ns(now, t) >= ttl_ns; }

/// Returns a key whose ascending order is the descending order of non-NaN floats; -0 and +0
/// (which compare equal) get the same key.
std::uint32_t descending_key(float v) {
  if (v == 0.0f) v = 0.0f;
  std::uint32_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  b = (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);  // ascending in v
  return ~b;
}

float pressure_factor(float p, float w) {
  float v = 1.0f - w * p;
  if (v < 0.0f) return 0.0f;
  if (v > 1.0f) return 1.0f;
  return v;
}

/// Adds `key` to a run-length ref list; returns false when it repeats the last key.
bool add_run(std::vector<std::pair<std::uint32_t, std::uint32_t>>& runs, std::uint32_t key) {
  if (!runs.empty()) {
    auto& r = runs.back();
    if (key == r.first + r.second - 1) return false;
    if (key == r.first + r.second) {
      ++r.second;
      return true;
    }
  }
  runs.emplace_back(key, 1);
  return true;
}

/// Returns the number of keys in a run-length ref list.
std::size_t run_keys(const std::vector<std::pair<std::uint32_t, std::uint32_t>>& runs) {
  std::size_t n = 0;
  for (const auto& r : runs) n += r.second;
  return n;
}

/// Returns the sorted, de-duplicated keys of a run-length ref list.
std::vector<std::uint32_t> expand_runs(
    const std::vector<std::pair<std::uint32_t, std::uint32_t>>& runs) {
  std::vector<std::uint32_t> keys;
  keys.reserve(run_keys(runs));
  for (const auto& r : runs) {
    for (std::uint32_t i = 0; i < r.second; ++i) keys.push_back(r.first + i);
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

/// Replaces a run-length ref list by the runs of sorted `keys`.
void assign_runs(std::vector<std::pair<std::uint32_t, std::uint32_t>>& runs,
                 const std::vector<std::uint32_t>& keys) {
  runs.clear();
  for (std::uint32_t k : keys) add_run(runs, k);
  runs.shrink_to_fit();
}

void sort_scores(std::vector<scored_replica>& v) {
  std::sort(v.begin(), v.end(), [](const scored_replica& a, const scored_replica& b) {
    if (a.score.score != b.score.score) return a.score.score > b.score.score;
    return a.score.replica_id < b.score.replica_id;
  });
}

}  // namespace

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

tenant_partition::tenant_partition(std::string name, std::uint32_t slot, global_facts* facts,
                                   const index_options* options)
    : name_(std::move(name)),
      slot_(slot),
      reserved_(name_ == reserved_tenant),
      facts_(facts),
      options_(options) {
  policy_.eviction_ttl = options_->default_ttl;
  slots_.assign(16, 0);
}

tenant_partition::~tenant_partition() {
  for (std::size_t i = 0; i < records_.size(); ++i) {
    key_record& k = records_[i];
    if (!is_free(k) && on_heap(k)) std::free(k.u.block);
  }
}

void tenant_partition::rebind(std::uint32_t slot, global_facts* facts,
                              const index_options* options) {
  const bool tracked = cap_tracked();
  slot_ = slot;
  facts_ = facts;
  options_ = options;
  if (tracked != cap_tracked()) rebuild_cap_order();
}

void tenant_partition::set_policy(const policy::resolved_policy& policy) {
  const bool mode_changed = policy.eviction != policy_.eviction;
  policy_ = policy;
  if (mode_changed) rebuild_cap_order();
}

void tenant_partition::set_quota(std::optional<std::int64_t> quota) {
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

std::uint32_t tenant_partition::part_of(std::string_view model, std::string_view scheme,
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

std::optional<std::uint32_t> tenant_partition::find_part(std::string_view model,
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

std::optional<std::uint32_t> tenant_partition::find_scope(std::string_view model,
                                                          std::string_view scheme) const {
  auto m = names_.find(model);
  auto s = names_.find(scheme);
  if (!m || !s) return std::nullopt;
  auto it = scope_ids_.find({*m, *s});
  if (it == scope_ids_.end()) return std::nullopt;
  return it->second;
}

// -------------------------------------------------------------------------- key hash table

std::uint64_t tenant_partition::key_hash(std::uint32_t part, std::string_view bytes) const {
  if (bytes.size() == 8) return mix64(load_be64(bytes) + part * 0x9E3779B97F4A7C15ULL);
  return XXH3_64bits_withSeed(bytes.data(), bytes.size(), part + 0x51ULL);
}

std::uint64_t tenant_partition::key_hash(const key_record& k) const {
  if (k.part & long_flag) return key_hash(part_id(k), long_hashes_[k.hash]);
  return mix64(k.hash + part_id(k) * 0x9E3779B97F4A7C15ULL);
}

bool tenant_partition::key_equals(const key_record& k, std::uint32_t part,
                                  std::string_view bytes) const {
  if (part_id(k) != part) return false;
  if (k.part & long_flag) return bytes.size() != 8 && long_hashes_[k.hash] == bytes;
  return bytes.size() == 8 && k.hash == load_be64(bytes);
}

std::string tenant_partition::key_bytes(const key_record& k) const {
  if (k.part & long_flag) return long_hashes_[k.hash];
  return store_be64(k.hash);
}

std::optional<std::uint32_t> tenant_partition::find_key(std::uint32_t part,
                                                        std::string_view bytes) const {
  return find_key_hashed(part, bytes, key_hash(part, bytes));
}

std::optional<std::uint32_t> tenant_partition::find_key_hashed(std::uint32_t part,
                                                               std::string_view bytes,
                                                               std::uint64_t h) const {
  const std::size_t mask = slots_.size() - 1;
  const std::uint32_t tag = slot_tag_of(h);
  std::size_t i = h & mask;
  while (slots_[i] != 0) {
    const std::uint32_t sl = slots_[i];
    if ((sl & ~slot_index_mask) == tag &&
        key_equals(records_[(sl & slot_index_mask) - 1], part, bytes)) {
      return (sl & slot_index_mask) - 1;
    }
    i = (i + 1) & mask;
  }
  return std::nullopt;
}

void tenant_partition::grow_table() {
  std::vector<std::uint32_t> next(slots_.size() * 2, 0);
  const std::size_t mask = next.size() - 1;
  for (std::uint32_t s : slots_) {
    if (s == 0) continue;
    std::size_t i = key_hash(records_[(s & slot_index_mask) - 1]) & mask;
    while (next[i] != 0) i = (i + 1) & mask;
    next[i] = s;
  }
  slots_.swap(next);
}

std::uint32_t tenant_partition::find_or_create_key(std::uint32_t part, std::string_view bytes,
                                                   bool& created) {
  const std::size_t mask = slots_.size() - 1;
  const std::uint64_t h = key_hash(part, bytes);
  const std::uint32_t tag = slot_tag_of(h);
  std::size_t i = h & mask;
  while (slots_[i] != 0) {
    const std::uint32_t sl = slots_[i];
    if ((sl & ~slot_index_mask) == tag &&
        key_equals(records_[(sl & slot_index_mask) - 1], part, bytes)) {
      created = false;
      return (sl & slot_index_mask) - 1;
    }
    i = (i + 1) & mask;
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
  if (idx + 1 > slot_index_mask) std::abort();  // > 64 M keys in one tenant
  slots_[i] = tag | (idx + 1);
  ++keys_;
  ++facts_->total_keys;
  ++keys_by_model_[parts_[part].model];
  // Keep the load factor at or below 7/8.
  if (static_cast<std::size_t>(keys_) * 8 > slots_.size() * 7) grow_table();
  return idx;
}

void tenant_partition::erase_slot(std::uint32_t key) {
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = key_hash(records_[key]) & mask;
  while ((slots_[i] & slot_index_mask) != key + 1) i = (i + 1) & mask;
  // Backward-shift deletion keeps linear probing tombstone-free.
  std::size_t j = i;
  for (;;) {
    j = (j + 1) & mask;
    if (slots_[j] == 0) break;
    const std::size_t home = key_hash(records_[(slots_[j] & slot_index_mask) - 1]) & mask;
    const bool movable = (j > i) ? (home <= i || home > j) : (home <= i && home > j);
    if (movable) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i] = 0;
}

// ------------------------------------------------------------------------------- entries

std::uint32_t tenant_partition::find_replica(const key_record& k, std::uint32_t replica) {
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

std::uint32_t tenant_partition::add_replica(key_record& k, std::uint32_t replica) {
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

micros tenant_partition::key_age(const key_record& k) const {
  const entry_span e = entries_of(k);
  micros m = std::numeric_limits<micros>::min();
  for (std::uint32_t i = 0, n = size_of(k); i < n; ++i) m = std::max(m, e[i].last_seen);
  return m;
}

std::uint32_t tenant_partition::effective_count(const entry_proxy& e) const {
  return policy_.eviction == policy::eviction_mode::lfu ? e.access_count : 0;
}

void tenant_partition::upsert(std::uint32_t part, std::string_view hash, std::int32_t token_count,
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
    ++facts_->total_entries;
    if (reserved_) ++facts_->reserved_entries;
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

void tenant_partition::remove_entry(std::uint32_t kidx, std::uint32_t pos, change_cause cause,
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
  --facts_->total_entries;
  if (reserved_) --facts_->reserved_entries;
  auto& serving = scopes_[parts_[part].scope].serving;
  auto sit = serving.find(replica);
  if (sit != serving.end() && --sit->second == 0) serving.erase(sit);

  if (size_of(k) == 0) {
    erase_slot(kidx);
    if (k.part & long_flag) {
      long_hashes_[k.hash].clear();
      long_hashes_[k.hash].shrink_to_fit();
      free_long_.push_back(static_cast<std::uint32_t>(k.hash));
    }
    k.part = key_free;
    free_records_.push_back(kidx);
    --keys_;
    --facts_->total_keys;
    auto mit = keys_by_model_.find(parts_[part].model);
    if (mit != keys_by_model_.end() && --mit->second == 0) keys_by_model_.erase(mit);
  } else if (quota_ && !removing_key_) {
    push_quota_ref(kidx);
  }
}

void tenant_partition::record(change_log* changes, event_type type, change_cause cause,
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

void tenant_partition::ingest(const cache_state_update& u, micros ts, change_log* changes,
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

void tenant_partition::apply_event(const cache_event& ev, micros ts, change_log* changes,
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

void tenant_partition::sweep(micros now, change_log* changes, sweep_result& result) {
  std::uint32_t next_key = 0;
  std::size_t unlimited = std::numeric_limits<std::size_t>::max();
  sweep_slice(now, changes, result, next_key, unlimited);
}

bool tenant_partition::sweep_slice(micros now, change_log* changes, sweep_result& result,
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

// ----------------------------------------------------------------------- eviction orders

bool tenant_partition::key_less(std::uint32_t a, std::uint32_t b) const {
  const key_record& ka = records_[a];
  const key_record& kb = records_[b];
  const part_info& pa = parts_[part_id(ka)];
  const part_info& pb = parts_[part_id(kb)];
  if (pa.model != pb.model) return names_.name(pa.model) < names_.name(pb.model);
  if (pa.scheme != pb.scheme) return names_.name(pa.scheme) < names_.name(pb.scheme);
  if (pa.adapter != pb.adapter) return names_.name(pa.adapter) < names_.name(pb.adapter);
  if (!(ka.part & long_flag) && !(kb.part & long_flag)) return ka.hash < kb.hash;
  return key_bytes(ka) < key_bytes(kb);
}

void tenant_partition::push_cap_ref(std::uint32_t key, std::uint32_t count, micros ts) {
  const std::pair<std::uint32_t, micros> bk{count, ts};
  if (last_cap_bucket_ == nullptr || last_cap_key_ != bk) {
    last_cap_bucket_ = &cap_order_[bk];
    last_cap_key_ = bk;
  }
  // A repeated key needs no second ref, but the bucket must still re-collect its candidates:
  // the key may have gained another replica entry in this bucket.
  last_cap_bucket_->dirty = true;
  if (add_run(last_cap_bucket_->refs, key)) ++cap_refs_;
}

void tenant_partition::rebuild_cap_order() {
  cap_order_.clear();
  cap_refs_ = 0;
  last_cap_bucket_ = nullptr;
  if (!cap_tracked()) return;
  for (std::uint32_t kidx = 0; kidx < records_.size(); ++kidx) {
    const key_record& k = records_[kidx];
    if (is_free(k)) continue;
    const entry_span e = entries_of(k);
    for (std::uint32_t i = 0; i < size_of(k); ++i) {
      push_cap_ref(kidx, effective_count(e[i]), e[i].last_seen);
    }
  }
}

void tenant_partition::prepare_cap_bucket(
    std::map<std::pair<std::uint32_t, micros>, order_bucket>::iterator it) {
  order_bucket& b = it->second;
  const auto [count, ts] = it->first;
  const std::size_t before = run_keys(b.refs);
  std::vector<std::uint32_t> keys = expand_runs(b.refs);
  b.candidates.clear();
  std::size_t kept = 0;
  for (std::uint32_t kidx : keys) {
    const key_record& k = records_[kidx];
    if (is_free(k)) continue;
    const entry_span e = entries_of(k);
    bool any = false;
    for (std::uint32_t i = 0; i < size_of(k); ++i) {
      if (e[i].last_seen == ts && effective_count(e[i]) == count) {
        b.candidates.emplace_back(kidx, e[i].replica());
        any = true;
      }
    }
    if (any) keys[kept++] = kidx;
  }
  cap_refs_ -= before - kept;
  keys.resize(kept);
  assign_runs(b.refs, keys);
  std::sort(b.candidates.begin(), b.candidates.end(), [this](const auto& x, const auto& y) {
    if (x.first != y.first) return key_less(x.first, y.first);
    return names_.name(x.second) < names_.name(y.second);
  });
  b.cursor = 0;
  b.dirty = false;
}

std::optional<cap_candidate> tenant_partition::peek_cap_victim() {
  while (!cap_order_.empty()) {
    auto it = cap_order_.begin();
    order_bucket& b = it->second;
    if (b.dirty) prepare_cap_bucket(it);
    const auto [count, ts] = it->first;
    while (b.cursor < b.candidates.size()) {
      const auto [kidx, replica] = b.candidates[b.cursor];
      key_record& k = records_[kidx];
      if (!is_free(k)) {
        const std::uint32_t pos = find_replica(k, replica);
        if (pos != npos && entries_of(k)[pos].last_seen == ts &&
            effective_count(entries_of(k)[pos]) == count) {
          return cap_candidate{count, ts, kidx, replica};
        }
      }
      ++b.cursor;
    }
    cap_refs_ -= run_keys(b.refs);
    if (last_cap_bucket_ == &b) last_cap_bucket_ = nullptr;
    cap_order_.erase(it);
  }
  return std::nullopt;
}

void tenant_partition::evict_cap_victim(const cap_candidate& v, micros ts, change_log* changes) {
  key_record& k = records_[v.key];
  const entry_span e = entries_of(k);
  for (std::uint32_t i = 0; i < size_of(k); ++i) {
    if (e[i].replica() == v.replica) {
      remove_entry(v.key, i, change_cause::cap, ts, changes);
      break;
    }
  }
  if (!cap_order_.empty()) ++cap_order_.begin()->second.cursor;
}

void tenant_partition::push_quota_ref(std::uint32_t key) {
  order_bucket& b = quota_order_[key_age(records_[key])];
  b.dirty = true;
  if (add_run(b.refs, key)) ++quota_refs_;
}

void tenant_partition::rebuild_quota_order() {
  quota_order_.clear();
  quota_refs_ = 0;
  if (!quota_) return;
  for (std::uint32_t kidx = 0; kidx < records_.size(); ++kidx) {
    if (!is_free(records_[kidx])) push_quota_ref(kidx);
  }
}

void tenant_partition::enforce_quota(micros ts, change_log* changes, ingest_result& result) {
  if (!quota_) return;
  while (keys_ > *quota_ && !quota_order_.empty()) {
    auto it = quota_order_.begin();
    order_bucket& b = it->second;
    const micros age = it->first;
    if (b.dirty) {
      const std::size_t before = run_keys(b.refs);
      const std::vector<std::uint32_t> keys = expand_runs(b.refs);
      b.candidates.clear();
      for (std::uint32_t kidx : keys) {
        if (!is_free(records_[kidx]) && key_age(records_[kidx]) == age) {
          b.candidates.emplace_back(kidx, 0);
        }
      }
      quota_refs_ -= before - b.candidates.size();
      std::vector<std::uint32_t> live;
      for (auto& c : b.candidates) live.push_back(c.first);
      assign_runs(b.refs, live);
      std::sort(b.candidates.begin(), b.candidates.end(),
                [this](const auto& x, const auto& y) { return key_less(x.first, y.first); });
      b.cursor = 0;
      b.dirty = false;
    }
    bool evicted = false;
    while (b.cursor < b.candidates.size()) {
      const std::uint32_t kidx = b.candidates[b.cursor++].first;
      if (is_free(records_[kidx]) || key_age(records_[kidx]) != age) continue;
      // Remove the whole key: every replica.
      removing_key_ = true;
      while (!is_free(records_[kidx]) && size_of(records_[kidx]) > 0) {
        remove_entry(kidx, size_of(records_[kidx]) - 1, change_cause::quota, ts, changes);
      }
      removing_key_ = false;
      ++result.quota_evicted_keys;
      evicted = true;
      break;
    }
    if (!evicted) {
      quota_refs_ -= run_keys(b.refs);
      quota_order_.erase(it);
    }
  }
}

// ---------------------------------------------------------------------------------- lookup

index_lookup_result tenant_partition::lookup(const index_lookup_request& q,
                                             const policy::resolved_policy& pol, micros now) const {
  lookup_scratch& tls = thread_scratch();
  index_lookup_result out;
  const std::int64_t ttl = pol.eviction_ttl.count();
  const std::chrono::nanoseconds ttl_d = pol.eviction_ttl;
  const bool lfu = pol.eviction == policy::eviction_mode::lfu;
  float slo_coef = 0.0f;
  if (options_->slo_tight_ttft_ms > 0 && options_->slo_tight_bias > 0 && q.ttft_ms > 0 &&
      q.ttft_ms < options_->slo_tight_ttft_ms) {
    slo_coef = options_->slo_tight_bias;
  }
  const auto model_id = names_.find(q.model);
  const auto scope = find_scope(q.model, q.hash_scheme);
  const std::int64_t total = scope ? static_cast<std::int64_t>(scopes_[*scope].serving.size()) : 0;
  const std::unordered_map<std::uint32_t, stats_row>* model_stats = nullptr;
  if (model_id) {
    auto it = stats_.find(*model_id);
    if (it != stats_.end()) model_stats = &it->second;
  }
  auto pressure_of = [&](std::uint32_t replica) -> float {
    if (model_stats == nullptr) return 0.0f;
    auto it = model_stats->find(replica);
    if (it == model_stats->end()) return 0.0f;
    if (freshness(now, it->second.stats_reported, ttl_d) > 0.0f) return it->second.pressure;
    return 0.0f;
  };
  const auto part = find_part(q.model, q.hash_scheme, q.adapter);
  const bool chain = !q.chain_hashes.empty() || !q.chain_counts.empty();

  if (chain) {
    if (q.chain_hashes.size() != q.chain_counts.size()) return out;
    if (!part) return out;
    const std::size_t n = q.chain_hashes.size();
    // The walk is bound by memory latency: resolve every block's key up front in three
    // passes (slot, record, key) so the cache misses of different blocks overlap.
    const std::size_t mask = slots_.size() - 1;
    // 8-byte hashes (the fingerprint size) are resolved inline: `be_buf` holds the
    // big-endian value the record stores (`key_hash`/`find_key_hashed`, inlined).
    tls.hash_buf.resize(n);
    tls.be_buf.resize(n);
    tls.key_buf.resize(n);
    const std::uint64_t part_mix = std::uint64_t{*part} * 0x9E3779B97F4A7C15ULL;
    for (std::size_t j = 0; j < n; ++j) {
      const std::string& b = q.chain_hashes[j];
      std::uint64_t h;
      if (b.size() == 8) {
        tls.be_buf[j] = load_be64(b);
        h = mix64(tls.be_buf[j] + part_mix);
      } else {
        h = key_hash(*part, b);
      }
      tls.hash_buf[j] = h;
      __builtin_prefetch(&slots_[h & mask]);
    }
    for (std::size_t j = 0; j < n; ++j) {
      const std::uint32_t sl = slots_[tls.hash_buf[j] & mask];
      if (sl != 0) __builtin_prefetch(&records_[(sl & slot_index_mask) - 1]);
    }
    std::size_t resolved = 0;
    for (; resolved < n; ++resolved) {
      const std::string& b = q.chain_hashes[resolved];
      std::uint32_t found = npos;
      if (b.size() == 8) {
        const std::uint64_t h = tls.hash_buf[resolved];
        const std::uint64_t be = tls.be_buf[resolved];
        const std::uint32_t tag = slot_tag_of(h);
        for (std::size_t i = h & mask;; i = (i + 1) & mask) {
          const std::uint32_t sl = slots_[i];
          if (sl == 0) break;
          if ((sl & ~slot_index_mask) != tag) continue;
          const key_record& k = records_[(sl & slot_index_mask) - 1];
          if ((k.part & (key_part_mask | long_flag)) == *part && k.hash == be) {
            found = (sl & slot_index_mask) - 1;
            break;
          }
        }
      } else {
        auto kj = find_key_hashed(*part, b, tls.hash_buf[resolved]);
        if (kj) found = *kj;
      }
      if (found == npos) break;
      tls.key_buf[resolved] = found;
      // The first blocks' holder lists go to L1 now; the others start on their way to L2
      // (the walk moves them to L1 four blocks ahead).
      prefetch_entries(records_[found], resolved >= 4);
    }
    // fresh(t) <=> (now - t) * 1000 < ttl_ns <=> t > now - ceil(ttl_ns / 1000).
    micros cutoff = std::numeric_limits<micros>::max();
    if (ttl > 0) {
      const std::int64_t ttl_us = ttl / 1000 + (ttl % 1000 != 0 ? 1 : 0);
      if (__builtin_sub_overflow(now, ttl_us, &cutoff)) {
        cutoff = std::numeric_limits<micros>::min();
      }
    }
    if (tls.stamp.size() < names_.size()) {
      tls.stamp.resize(names_.size(), 0);
      tls.run_slot.resize(names_.size(), 0);
    }
    if (++tls.generation == 0) {
      std::fill(tls.stamp.begin(), tls.stamp.end(), 0);
      tls.generation = 1;
    }
    tls.runs.clear();
    tls.run_hits.clear();
    std::optional<std::uint32_t> k0;
    if (resolved > 0) k0 = tls.key_buf[0];
    if (k0) {
      const key_record& k = records_[*k0];
      const entry_span e = entries_of(k);
      for (std::uint32_t i = 0, m = size_of(k); i < m; ++i) {
        if (e[i].last_seen <= cutoff) continue;
        const std::uint32_t r = e[i].replica();
        tls.stamp[r] = tls.generation;
        tls.run_slot[r] = static_cast<std::uint32_t>(tls.runs.size());
        run_state& rs = tls.runs.emplace_back();
        rs.replica = r;
        rs.matched = static_cast<std::uint32_t>(q.chain_counts[0]);
        rs.oldest = e[i].last_seen;
        rs.tier = e[i].tier();
        rs.last_block = 0;
        if (lfu) tls.run_hits.emplace_back(tls.run_slot[r], *k0);
      }
    }
    std::size_t active = tls.runs.size();
    const std::size_t nruns = tls.runs.size();
    entry_span prev_e{nullptr, nullptr, nullptr, nullptr, 0};
    std::uint32_t prev_m = 0;
    if (k0) {
      prev_e = entries_of(records_[*k0]);
      prev_m = prev_e.n;
    }
    // Blocks whose holder list equals the previous block's (replica, last_seen, tier) list
    // -- the common case for the blocks of one reported chain -- only extend every run alive
    // so far; they are applied lazily, in one pass, at the next differing block or the end.
    std::size_t pending_from = 0;  // first block of the pending identical stretch (0 = none)
    std::size_t pending_to = 0;
    std::uint32_t pending_add = 0;
    auto flush = [&]() {
      if (pending_from == 0) return;
      const auto alive = static_cast<std::uint32_t>(pending_from - 1);
      for (std::size_t s = 0; s < nruns; ++s) {
        run_state& rs = tls.runs[s];
        if (rs.last_block != alive) continue;
        rs.last_block = static_cast<std::uint32_t>(pending_to);
        rs.matched += pending_add;
        if (lfu) {
          for (std::size_t b = pending_from; b <= pending_to; ++b) {
            tls.run_hits.emplace_back(static_cast<std::uint32_t>(s), tls.key_buf[b]);
          }
        }
      }
      pending_from = 0;
      pending_add = 0;
    };
    for (std::size_t j = 1; j < resolved && active > 0; ++j) {
      const std::uint32_t kidx = tls.key_buf[j];
      if (j + 4 < resolved) prefetch_entries(records_[tls.key_buf[j + 4]]);
      const key_record& k = records_[kidx];
      const entry_span e = entries_of(k);
      const std::uint32_t m = size_of(k);
      const auto add = static_cast<std::uint32_t>(q.chain_counts[j]);
      if (m == prev_m && same_holders(e, prev_e)) {
        if (pending_from == 0) pending_from = j;
        pending_to = j;
        pending_add += add;
      } else {
        flush();
        active = lfu ? walk_block<true>(e, m, kidx, j, cutoff, add)
                     : walk_block<false>(e, m, kidx, j, cutoff, add);
      }
      prev_e = e;
      prev_m = m;
    }
    flush();
    // Score in a light array, order it, then build the result in final order. Orders are
    // sorted as 64-bit keys: the order's field in the high half, the replica name's rank in
    // the low half. Ranks are distinct, so no two keys tie and the key order is exactly the
    // order of the (field desc, name asc) comparators of §3.5; `at[rank]` maps a key back
    // to its row.
    std::vector<scored_run>& sc = tls.scored;
    if (sc.size() < nruns) sc.resize(nruns);
    std::size_t ns = 0;
    const std::vector<std::uint32_t>& rank = name_ranks();
    // Runs that share `oldest` (one chain ingest stamps its blocks alike) share freshness.
    bool f_cached = false;
    micros f_oldest = 0;
    float f_value = 0.0f;
    for (std::size_t s = 0; s < nruns; ++s) {
      const run_state& rs = tls.runs[s];
      const auto matched = static_cast<std::int32_t>(rs.matched);
      if (matched <= 0) continue;
      if (!f_cached || rs.oldest != f_oldest) {
        f_value = freshness(now, rs.oldest, ttl_d);
        f_oldest = rs.oldest;
        f_cached = true;
      }
      const float f = f_value;
      if (f <= 0.0f) continue;
      const float pf = pressure_factor(pressure_of(rs.replica), options_->pressure_weight);
      scored_run& x = sc[ns++];
      x.run = static_cast<std::uint32_t>(s);
      x.rank = rank[rs.replica];
      x.matched = matched;
      x.f = f;
      x.score = static_cast<float>(matched) * f * pf * (1.0f + f * slo_coef);
    }
    if (tls.sort_keys.size() < ns) tls.sort_keys.resize(ns);
    if (tls.rank_pos.size() < rank.size()) tls.rank_pos.resize(rank.size());
    std::uint64_t* const keys = tls.sort_keys.data();
    std::uint32_t* const at = tls.rank_pos.data();
    for (std::size_t i = 0; i < ns; ++i) at[sc[i].rank] = static_cast<std::uint32_t>(i);
    // Rows in name order, by a bitmap scan over the ranks when that is O(rows): both sorts
    // below then usually find their keys already in order (equal scores / depths).
    if (tls.by_rank.size() < ns) tls.by_rank.resize(ns);
    std::uint32_t* const by_rank = tls.by_rank.data();
    bool have_rank_order = false;
    if (ns > 1 && rank.size() <= 16 * ns) {
      // One mark byte per rank (no read-modify-write chain), scanned 8 at a time.
      const std::size_t words = (rank.size() + 7) / 8;
      if (tls.rank_marks.size() < words) tls.rank_marks.resize(words, 0);
      std::uint64_t* const marks = tls.rank_marks.data();  // all zero between lookups
      auto* const mark_bytes = reinterpret_cast<unsigned char*>(marks);
      for (std::size_t i = 0; i < ns; ++i) mark_bytes[sc[i].rank] = 1;
      std::size_t o = 0;
      for (std::size_t w = 0; w < words; ++w) {
        if (marks[w] == 0) continue;
        for (std::size_t r = w * 8; r < w * 8 + 8; ++r) {
          if (mark_bytes[r] != 0) by_rank[o++] = at[r];
        }
        marks[w] = 0;
      }
      have_rank_order = true;
    }
    // Fills `keys` with (hi(row) << 32 | rank) and sorts them.
    auto sort_rows = [&](auto hi) {
      if (have_rank_order) {
        for (std::size_t i = 0; i < ns; ++i) {
          const scored_run& x = sc[by_rank[i]];
          keys[i] = (std::uint64_t{hi(x)} << 32) | x.rank;
        }
        if (!std::is_sorted(keys, keys + ns)) std::sort(keys, keys + ns);
      } else {
        for (std::size_t i = 0; i < ns; ++i) {
          keys[i] = (std::uint64_t{hi(sc[i])} << 32) | sc[i].rank;
        }
        std::sort(keys, keys + ns);
      }
    };
    bool one_depth = true;
    for (std::size_t i = 1; i < ns; ++i) one_depth &= sc[i].matched == sc[0].matched;
    const bool depth_sorted = total > 1 && ns > 0 && !one_depth;
    if (total > 1 && ns > 0) {
      if (one_depth) {
        // One group: every scored replica has the same depth.
        const double dp = distinguishing_power(static_cast<std::int64_t>(ns), total);
        if (dp != 1.0) {
          for (std::size_t i = 0; i < ns; ++i) sc[i].score *= static_cast<float>(dp);
        }
      } else {
        // Group by depth (matched desc, then name); k = the group's end index.
        sort_rows([](const scored_run& x) {
          return static_cast<std::uint32_t>(0xFFFFFFFFu - static_cast<std::uint32_t>(x.matched));
        });
        std::size_t g = 0;
        while (g < ns) {
          const std::int32_t depth = sc[at[static_cast<std::uint32_t>(keys[g])]].matched;
          std::size_t end = g;
          while (end < ns && sc[at[static_cast<std::uint32_t>(keys[end])]].matched == depth) ++end;
          const double dp = distinguishing_power(static_cast<std::int64_t>(end), total);
          if (dp != 1.0) {
            for (std::size_t i = g; i < end; ++i) {
              sc[at[static_cast<std::uint32_t>(keys[i])]].score *= static_cast<float>(dp);
            }
          }
          g = end;
        }
      }
    }
    if (lfu) std::sort(tls.run_hits.begin(), tls.run_hits.end());
    out.scores.reserve(ns);
    auto emit = [&](const scored_run& x) {
      const run_state& rs = tls.runs[x.run];
      scored_replica& o = out.scores.emplace_back();
      replica_score& r = o.score;
      r.replica_id.assign(names_.name(rs.replica));
      r.score = x.score;
      r.matched_tokens = x.matched;
      r.estimated_cache_hit_prob = x.f;
      r.tier = wire_tier(rs.tier);
      if (lfu) {
        auto lo =
            std::lower_bound(tls.run_hits.begin(), tls.run_hits.end(), std::make_pair(x.run, 0u));
        for (; lo != tls.run_hits.end() && lo->first == x.run; ++lo) {
          o.hits.push_back(ref_of(lo->second, rs.replica));
        }
      }
    };
    // Final order: score desc, then name.
    bool nan = false;
    for (std::size_t i = 0; i < ns; ++i) nan |= sc[i].score != sc[i].score;
    if (!nan) {
      sort_rows([](const scored_run& x) { return descending_key(x.score); });
      for (std::size_t i = 0; i < ns; ++i) emit(sc[at[static_cast<std::uint32_t>(keys[i])]]);
    } else {
      // A NaN score (reachable only through odd index_options, e.g. an infinite pressure
      // weight) has no key order: replay the comparator sorts on the rows in their
      // pre-sort order, exactly as computed before keys were used.
      std::vector<scored_run> rows(sc.begin(), sc.begin() + static_cast<std::ptrdiff_t>(ns));
      if (depth_sorted) {
        std::sort(rows.begin(), rows.end(), [](const scored_run& a, const scored_run& b) {
          if (a.matched != b.matched) return a.matched > b.matched;
          return a.rank < b.rank;
        });
      }
      std::sort(rows.begin(), rows.end(), [](const scored_run& a, const scored_run& b) {
        if (a.score != b.score) return a.score > b.score;
        return a.rank < b.rank;
      });
      for (const scored_run& x : rows) emit(x);
    }
    if (!out.scores.empty()) out.strategy = lookup_strategy::prefix_match;
    return out;
  }

  // Exact match (§3.4).
  if (part) {
    auto key = find_key(*part, q.exact_key);
    if (key) {
      const key_record& k = records_[*key];
      const entry_span e = entries_of(k);
      for (std::uint32_t i = 0; i < size_of(k); ++i) {
        const float f = freshness(now, e[i].last_seen, ttl_d);
        if (f <= 0.0f) continue;
        scored_replica sr;
        const std::uint32_t r = e[i].replica();
        sr.score.replica_id = std::string(names_.name(r));
        const float pf = pressure_factor(pressure_of(r), options_->pressure_weight);
        sr.score.score = static_cast<float>(e[i].token_count) * f * pf * (1.0f + f * slo_coef);
        sr.score.matched_tokens = e[i].token_count;
        sr.score.estimated_cache_hit_prob = f;
        sr.score.tier = wire_tier(e[i].tier());
        if (lfu && e[i].token_count > 0) sr.hits.push_back(ref_of(*key, r));
        out.scores.push_back(std::move(sr));
      }
      const double dp = distinguishing_power(static_cast<std::int64_t>(out.scores.size()), total);
      if (dp != 1.0) {
        for (auto& s : out.scores) s.score.score *= static_cast<float>(dp);
      }
      sort_scores(out.scores);
      if (!out.scores.empty()) {
        out.strategy = lookup_strategy::prefix_match;
        return out;
      }
    }
  }

  // TENANT_HOT (§3.7).
  const std::int64_t max_age = options_->tenant_hot_max_age.count();
  if (max_age > 0 && model_stats != nullptr && scope) {
    const auto& serving = scopes_[*scope].serving;
    for (const auto& [replica, row] : *model_stats) {
      const std::int64_t age = age_ns(now, row.stats_reported);
      if (!(age < max_age) || !(row.hit_rate >= options_->tenant_hot_min_hit_rate)) continue;
      auto sit = serving.find(replica);
      if (sit == serving.end() || sit->second == 0) continue;
      float recency;
      if (age <= 0) {
        recency = 1.0f;
      } else if (age >= max_age) {
        recency = 0.0f;
      } else {
        recency = 1.0f - static_cast<float>(age) / static_cast<float>(max_age);
      }
      const float pf = pressure_factor(row.pressure, options_->pressure_weight);
      scored_replica sr;
      sr.score.replica_id = std::string(names_.name(replica));
      sr.score.score = row.hit_rate * recency * pf * (1.0f + recency * slo_coef);
      sr.score.matched_tokens = 0;
      sr.score.estimated_cache_hit_prob = row.hit_rate;
      sr.score.tier = 0;
      out.scores.push_back(std::move(sr));
    }
    sort_scores(out.scores);
    if (!out.scores.empty()) out.strategy = lookup_strategy::tenant_hot;
  }
  return out;
}

tenant_partition::lookup_scratch& tenant_partition::thread_scratch() {
  thread_local lookup_scratch scratch;
  return scratch;
}

template <bool Lfu>
std::size_t tenant_partition::walk_block(const entry_span& e, std::uint32_t m, std::uint32_t key,
                                         std::size_t block, micros cutoff,
                                         std::uint32_t add) const {
  lookup_scratch& tls = thread_scratch();
  run_state* __restrict runs = tls.runs.data();
  const std::uint32_t* __restrict stamp = tls.stamp.data();
  const std::uint32_t* __restrict slot_of = tls.run_slot.data();
  const std::uint32_t nruns = static_cast<std::uint32_t>(tls.runs.size());
  const std::uint32_t gen = tls.generation;
  const auto prev = static_cast<std::uint32_t>(block - 1);
  const auto cur = static_cast<std::uint32_t>(block);
  std::size_t still = 0;
  // Fast path: the key lists the running replicas in block-0 order (replicas report the
  // same chains in the same order), so no per-entry slot lookup and no branches.
  bool aligned = m == nruns;
  for (std::uint32_t i = 0; aligned && i < m; ++i) {
    aligned = runs[i].replica == (e[i].replica_tier & 0xFFFFFFu);
  }
  if (aligned && !Lfu) {
    for (std::uint32_t i = 0; i < m; ++i) {
      const micros ls = e[i].last_seen;
      const auto tier = static_cast<std::uint8_t>(e[i].replica_tier >> 24);
      run_state& rs = runs[i];
      const bool ok = (rs.last_block == prev) & (ls > cutoff);
      rs.last_block = ok ? cur : rs.last_block;
      rs.matched += ok ? add : 0;
      rs.oldest = ok && ls < rs.oldest ? ls : rs.oldest;
      rs.tier = ok && tier > rs.tier ? tier : rs.tier;
      still += ok;
    }
    return still;
  }
  for (std::uint32_t i = 0; i < m; ++i) {
    const entry_proxy en = e[i];
    const std::uint32_t r = en.replica_tier & 0xFFFFFFu;
    std::uint32_t slot;
    if (i < nruns && runs[i].replica == r) {
      slot = i;  // same replica order as block 0: the common case
    } else if (stamp[r] == gen) {
      slot = slot_of[r];
    } else {
      continue;
    }
    run_state& rs = runs[slot];
    if (rs.last_block != prev || en.last_seen <= cutoff) continue;
    rs.matched += add;
    rs.oldest = en.last_seen < rs.oldest ? en.last_seen : rs.oldest;
    const auto tier = static_cast<std::uint8_t>(en.replica_tier >> 24);
    rs.tier = tier > rs.tier ? tier : rs.tier;
    rs.last_block = cur;
    if constexpr (Lfu) tls.run_hits.emplace_back(slot, key);
    ++still;
  }
  return still;
}

bool tenant_partition::same_holders(const entry_span& a, const entry_span& b) {
  return a.n == b.n &&
         std::memcmp(a.rt, b.rt, static_cast<std::size_t>(a.n) * sizeof(std::uint32_t)) == 0 &&
         std::memcmp(a.ls, b.ls, static_cast<std::size_t>(a.n) * sizeof(micros)) == 0;
}

void tenant_partition::prefetch_entries(const key_record& k, bool to_l2) const {
  // Every other line: the L2 spatial prefetcher fetches each 128-byte pair's buddy line.
  const entry_span e = entries_of(k);
  const char* ls = reinterpret_cast<const char*>(e.ls);
  const char* rt = reinterpret_cast<const char*>(e.rt);
  const std::size_t ls_bytes = e.n * sizeof(micros);
  const std::size_t rt_bytes = e.n * sizeof(std::uint32_t);
  if (to_l2) {
    for (std::size_t off = 0; off < ls_bytes; off += 128) __builtin_prefetch(ls + off, 0, 2);
    for (std::size_t off = 0; off < rt_bytes; off += 128) __builtin_prefetch(rt + off, 0, 2);
  } else {
    for (std::size_t off = 0; off < ls_bytes; off += 128) __builtin_prefetch(ls + off);
    for (std::size_t off = 0; off < rt_bytes; off += 128) __builtin_prefetch(rt + off);
  }
}

const std::vector<std::uint32_t>& tenant_partition::name_ranks() const {
  // Concurrent readers may both find the cache stale; names only change under the writer.
  std::lock_guard<std::mutex> lock(ranks_mu_);
  if (ranks_.size() != names_.size()) {
    std::vector<std::uint32_t> order(names_.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [this](std::uint32_t a, std::uint32_t b) { return names_.name(a) < names_.name(b); });
    ranks_.assign(names_.size(), 0);
    for (std::uint32_t r = 0; r < order.size(); ++r) ranks_[order[r]] = r;
  }
  return ranks_;
}

entry_ref tenant_partition::ref_of(std::uint32_t key, std::uint32_t replica) const {
  const key_record& k = records_[key];
  // The key's table hash covers its bytes (also for hashes kept in the side table, whose
  // slots are reused too) and its partition.
  return entry_ref{slot_, key, replica, key_hash(k), k.part & (key_part_mask | key_long_hash)};
}

void tenant_partition::credit(const entry_ref& ref) {
  if (ref.key >= records_.size()) return;
  key_record& k = records_[ref.key];
  if (is_free(k)) return;
  // The slot may have been freed and reused by another key since the lookup.
  if ((k.part & (key_part_mask | key_long_hash)) != ref.key_part || key_hash(k) != ref.key_hash)
    return;
  const std::uint32_t pos = find_replica(k, ref.replica);
  if (pos == npos) return;
  entry_proxy e = entries_of(k)[pos];
  if (e.access_count != std::numeric_limits<std::uint32_t>::max()) ++e.access_count;
  if (cap_tracked() && policy_.eviction == policy::eviction_mode::lfu) {
    push_cap_ref(ref.key, e.access_count, e.last_seen);
  }
}

// ------------------------------------------------------------------------------- queries

std::vector<std::string_view> tenant_partition::serving_names(std::string_view model,
                                                              std::string_view scheme) const {
  std::vector<std::string_view> out;
  auto scope = find_scope(model, scheme);
  if (!scope) return out;
  for (const auto& [r, n] : scopes_[*scope].serving) {
    if (n > 0) out.push_back(names_.name(r));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::pair<std::string, std::int64_t>> tenant_partition::serving(
    std::string_view model, std::string_view scheme) const {
  std::vector<std::pair<std::string, std::int64_t>> out;
  auto scope = find_scope(model, scheme);
  if (!scope) return out;
  for (const auto& [r, n] : scopes_[*scope].serving) out.emplace_back(names_.name(r), n);
  std::sort(out.begin(), out.end());
  return out;
}

std::int64_t tenant_partition::model_keys(std::string_view model) const {
  auto m = names_.find(model);
  if (!m) return 0;
  auto it = keys_by_model_.find(*m);
  return it == keys_by_model_.end() ? 0 : it->second;
}

cache_state_view tenant_partition::get_cache_state(std::string_view model) const {
  cache_state_view v;
  v.total_prefixes = model_keys(model);
  auto m = names_.find(model);
  if (!m) return v;
  auto it = stats_.find(*m);
  if (it == stats_.end()) return v;
  for (const auto& [r, row] : it->second) {
    replica_stats s;
    s.replica_id = std::string(names_.name(r));
    s.cache_memory_bytes = row.cache_memory_bytes;
    s.hit_rate = row.hit_rate;
    s.pressure = row.pressure;
    s.t2_hit_tokens = row.t2_hit_tokens;
    s.t2_query_tokens = row.t2_query_tokens;
    v.replicas.push_back(std::move(s));
  }
  std::sort(
      v.replicas.begin(), v.replicas.end(),
      [](const replica_stats& a, const replica_stats& b) { return a.replica_id < b.replica_id; });
  return v;
}

void tenant_partition::snapshot_rows(snapshot_view& out) const {
  struct row {
    std::int64_t prefix_count = 0;
    std::optional<micros> last_event;
    const stats_row* stats = nullptr;
    std::string_view stats_model;
  };
  std::map<std::string_view, row> rows;
  for (std::size_t ki = 0; ki < records_.size(); ++ki) {
    const key_record& k = records_[ki];
    if (is_free(k)) continue;
    const entry_span e = entries_of(k);
    for (std::uint32_t i = 0; i < size_of(k); ++i) {
      row& r = rows[names_.name(e[i].replica())];
      ++r.prefix_count;
      if (!r.last_event || *r.last_event < e[i].last_seen) r.last_event = e[i].last_seen;
    }
  }
  for (const auto& [m, by_replica] : stats_) {
    for (const auto& [rid, s] : by_replica) {
      row& r = rows[names_.name(rid)];
      // The newest row wins; a full tie goes to the smaller model name, so the choice never
      // depends on hash-map order (a restored snapshot must answer the same).
      const std::string_view model = names_.name(m);
      if (r.stats == nullptr || std::tie(r.stats->last_seen, r.stats->stats_reported, model) <
                                    std::tie(s.last_seen, s.stats_reported, r.stats_model)) {
        r.stats = &s;
        r.stats_model = model;
      }
    }
  }
  double hit_sum = 0;
  std::int64_t hit_n = 0;
  for (const auto& [name, r] : rows) {
    snapshot_replica s;
    s.replica_id = std::string(name);
    s.tenant = name_;
    s.prefix_count = r.prefix_count;
    s.last_event_at = r.last_event;
    if (r.stats != nullptr) {
      s.cache_memory_bytes = r.stats->cache_memory_bytes;
      s.hit_rate = r.stats->hit_rate;
      s.pressure = r.stats->pressure;
      s.last_update = r.stats->last_seen;
      s.stats_reported = true;
      s.t2_hit_tokens = r.stats->t2_hit_tokens;
      s.t2_query_tokens = r.stats->t2_query_tokens;
      hit_sum += r.stats->hit_rate;
      ++hit_n;
    }
    out.replicas.push_back(std::move(s));
  }
  snapshot_tenant t;
  t.tenant_id = name_;
  t.index_entries = keys_;
  t.hit_rate_reported = hit_n > 0;
  t.hit_rate = hit_n > 0 ? static_cast<float>(hit_sum / static_cast<double>(hit_n)) : 0.0f;
  if (!rows.empty() || keys_ > 0) out.tenants.push_back(std::move(t));
  out.total_prefixes += keys_;
}

void tenant_partition::entries_by_model(std::map<std::string, std::int64_t>& out) const {
  for (const auto& [m, n] : keys_by_model_) {
    if (n > 0) out[std::string(names_.name(m))] += n;
  }
}

std::optional<entry_view> tenant_partition::find_entry(std::string_view model,
                                                       std::string_view scheme,
                                                       std::string_view adapter,
                                                       std::string_view hash,
                                                       std::string_view replica) const {
  auto part = find_part(model, scheme, adapter);
  auto rid = names_.find(replica);
  if (!part || !rid) return std::nullopt;
  auto key = find_key(*part, hash);
  if (!key) return std::nullopt;
  const key_record& k = records_[*key];
  const entry_span e = entries_of(k);
  for (std::uint32_t i = 0; i < size_of(k); ++i) {
    if (e[i].replica() == *rid) {
      return entry_view{e[i].token_count, e[i].last_seen, wire_tier(e[i].tier()),
                        static_cast<std::int64_t>(e[i].access_count)};
    }
  }
  return std::nullopt;
}

void tenant_partition::dump(std::vector<std::string>& out) const {
  auto hex = [](const std::string& s) {
    static const char* d = "0123456789abcdef";
    std::string h;
    for (unsigned char c : s) {
      h += d[c >> 4];
      h += d[c & 15];
    }
    return h;
  };
  for (std::size_t ki = 0; ki < records_.size(); ++ki) {
    const key_record& k = records_[ki];
    if (is_free(k)) continue;
    const part_info& p = parts_[part_id(k)];
    const entry_span e = entries_of(k);
    for (std::uint32_t i = 0; i < size_of(k); ++i) {
      std::ostringstream os;
      os << "E|" << name_ << '|' << names_.name(p.model) << '|' << names_.name(p.scheme) << '|'
         << names_.name(p.adapter) << '|' << hex(key_bytes(k)) << '|' << names_.name(e[i].replica())
         << '|' << e[i].token_count << '|' << e[i].last_seen << '|' << int(e[i].tier()) << '|'
         << e[i].access_count;
      out.push_back(os.str());
    }
  }
  for (const auto& [m, by_replica] : stats_) {
    for (const auto& [r, s] : by_replica) {
      std::ostringstream os;
      os << "S|" << name_ << '|' << names_.name(m) << '|' << names_.name(r) << '|'
         << s.cache_memory_bytes << '|' << s.hit_rate << '|' << s.pressure << '|' << s.t2_hit_tokens
         << '|' << s.t2_query_tokens << '|' << s.last_seen << '|' << s.stats_reported;
      out.push_back(os.str());
    }
  }
  for (const scope_info& s : scopes_) {
    for (const auto& [r, n] : s.serving) {
      std::ostringstream os;
      os << "V|" << name_ << '|' << names_.name(s.model) << '|' << names_.name(s.scheme) << '|'
         << names_.name(r) << '|' << n;
      out.push_back(os.str());
    }
  }
  for (const auto& [m, n] : keys_by_model_) {
    std::ostringstream os;
    os << "M|" << name_ << '|' << names_.name(m) << '|' << n;
    out.push_back(os.str());
  }
  std::ostringstream os;
  os << "T|" << name_ << '|' << keys_ << '|' << entries_;
  out.push_back(os.str());
}

void tenant_partition::memory(memory_breakdown& m) const {
  m.key_records +=
      records_.capacity() * sizeof(key_record) + free_records_.capacity() * sizeof(std::uint32_t);
  for (std::size_t ki = 0; ki < records_.size(); ++ki) {
    const key_record& k = records_[ki];
    if (!is_free(k) && on_heap(k)) m.replica_arrays += static_cast<std::size_t>(k.tc) * 20 + 16;
  }
  m.hash_slots += slots_.capacity() * sizeof(std::uint32_t);
  for (const auto& [bk, b] : cap_order_) {
    m.order_refs += b.refs.capacity() * 8 + b.candidates.capacity() * 8 + 96;
  }
  for (const auto& [bk, b] : quota_order_) {
    m.order_refs += b.refs.capacity() * 8 + b.candidates.capacity() * 8 + 96;
  }
  m.other += names_.bytes() + long_hashes_.capacity() * sizeof(std::string);
  for (const auto& s : scopes_) m.other += s.serving.size() * 32 + s.serving.bucket_count() * 8;
}

}  // namespace ic::index
