// tenant_index's read-only views: GetCacheState, /snapshot rows, entries by model,
// the canonical dump and memory accounting.
#include "index/tenant_index.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

#include "index/partition_detail.hpp"

namespace ic::index {

using namespace partition_detail;

// ------------------------------------------------------------------------------- queries

std::vector<std::string_view> tenant_index::serving_names(std::string_view model,
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

std::vector<std::pair<std::string, std::int64_t>> tenant_index::serving(
    std::string_view model, std::string_view scheme) const {
  std::vector<std::pair<std::string, std::int64_t>> out;
  auto scope = find_scope(model, scheme);
  if (!scope) return out;
  for (const auto& [r, n] : scopes_[*scope].serving) out.emplace_back(names_.name(r), n);
  std::sort(out.begin(), out.end());
  return out;
}

std::int64_t tenant_index::model_keys(std::string_view model) const {
  auto m = names_.find(model);
  if (!m) return 0;
  auto it = keys_by_model_.find(*m);
  return it == keys_by_model_.end() ? 0 : it->second;
}

cache_state_view tenant_index::get_cache_state(std::string_view model) const {
  cache_state_view v;
  if (reserved_) return v;
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

void tenant_index::stats_rows(std::string_view model, std::vector<stats_row_view>& out) const {
  if (reserved_) return;
  auto m = names_.find(model);
  if (!m) return;
  auto it = stats_.find(*m);
  if (it == stats_.end()) return;
  const std::size_t first = out.size();
  for (const auto& [r, row] : it->second) out.push_back({names_.name(r), row.pressure, row.last_seen});
  std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
            [](const stats_row_view& a, const stats_row_view& b) { return a.replica_id < b.replica_id; });
}

std::vector<std::string_view> tenant_index::stats_models() const {
  std::vector<std::string_view> out;
  if (reserved_) return out;
  for (const auto& [m, rows] : stats_)
    if (!rows.empty()) out.push_back(names_.name(m));
  std::sort(out.begin(), out.end());
  return out;
}

void tenant_index::snapshot_rows(snapshot_view& out) const {
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

void tenant_index::entries_by_model(std::map<std::string, std::int64_t>& out) const {
  for (const auto& [m, n] : keys_by_model_) {
    if (n > 0) out[std::string(names_.name(m))] += n;
  }
}

std::optional<entry_view> tenant_index::find_entry(std::string_view model,
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

void tenant_index::dump(std::vector<std::string>& out) const {
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

void tenant_index::memory(memory_breakdown& m) const {
  m.key_records +=
      records_.capacity() * sizeof(key_record) + free_records_.capacity() * sizeof(std::uint32_t);
  for (std::size_t ki = 0; ki < records_.size(); ++ki) {
    const key_record& k = records_[ki];
    if (!is_free(k) && on_heap(k)) m.replica_arrays += static_cast<std::size_t>(k.tc) * 20 + 16;
  }
  m.hash_slots += table_.memory_bytes();
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
