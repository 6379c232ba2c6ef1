// tenant_index::lookup: the chain walk (§3.5), exact match (§3.4) and TENANT_HOT
// (§3.7), plus the walk's helpers (scratch, holder comparison, prefetch, LFU refs).
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

// ---------------------------------------------------------------------------------- lookup

/// What every lookup step reads: the policy's TTL and eviction mode, the SLO bias, the
/// query scope's serving count and the model's stats rows.
struct tenant_index::lookup_context {
  std::int64_t ttl_ns = 0;
  std::chrono::nanoseconds ttl{};
  bool lfu = false;
  float slo_coef = 0.0f;
  std::optional<std::uint32_t> scope;
  /// Replicas serving the query's (model, scheme): the distinguishing power's total.
  std::int64_t total = 0;
  const std::unordered_map<std::uint32_t, stats_row>* model_stats = nullptr;

  /// Returns a replica's pressure while its stats are fresh, else 0.
  float pressure_of(std::uint32_t replica, micros now) const {
    if (model_stats == nullptr) return 0.0f;
    auto it = model_stats->find(replica);
    if (it == model_stats->end()) return 0.0f;
    if (freshness(now, it->second.stats_reported, ttl) > 0.0f) return it->second.pressure;
    return 0.0f;
  }
};

index_lookup_result tenant_index::lookup(const index_lookup_request& q,
                                             const policy::resolved_policy& pol, micros now) const {
  lookup_context c;
  c.ttl_ns = pol.eviction_ttl.count();
  c.ttl = pol.eviction_ttl;
  c.lfu = pol.eviction == policy::eviction_mode::lfu;
  c.slo_coef = slo_coefficient(q.ttft_ms, options_.slo_tight_ttft_ms, options_.slo_tight_bias);
  c.scope = find_scope(q.model, q.hash_scheme);
  c.total = c.scope ? static_cast<std::int64_t>(scopes_[*c.scope].serving.size()) : 0;
  if (const auto model_id = names_.find(q.model)) {
    auto it = stats_.find(*model_id);
    if (it != stats_.end()) c.model_stats = &it->second;
  }
  const auto part = find_part(q.model, q.hash_scheme, q.adapter);
  if (!q.chain_hashes.empty() || !q.chain_counts.empty()) {
    index_lookup_result out;
    if (q.chain_hashes.size() != q.chain_counts.size() || !part) return out;
    lookup_scratch& tls = thread_scratch();
    const std::size_t resolved = resolve_chain_keys(q, *part, tls);
    walk_chain(q, c, resolved, now, tls);
    const std::size_t ns = score_runs(c, now, tls);
    order_and_emit(c, ns, tls, out);
    if (!out.scores.empty()) out.strategy = lookup_strategy::prefix_match;
    return out;
  }
  index_lookup_result out = exact_match(q, c, part, now);
  if (!out.scores.empty()) return out;
  tenant_hot(c, now, out);
  return out;
}

std::size_t tenant_index::resolve_chain_keys(const index_lookup_request& q, std::uint32_t part,
                                                 lookup_scratch& tls) const {
  const std::size_t n = q.chain_hashes.size();
  // The walk is bound by memory latency: resolve every block's key up front in three
  // passes (slot, record, key) so the cache misses of different blocks overlap.
  // 8-byte hashes (the fingerprint size) are resolved inline: `be_buf` holds the
  // big-endian value the record stores (`key_hash`/`find_key_hashed`, inlined).
  tls.hash_buf.resize(n);
  tls.be_buf.resize(n);
  tls.key_buf.resize(n);
  const std::uint64_t part_mix = std::uint64_t{part} * 0x9E3779B97F4A7C15ULL;
  for (std::size_t j = 0; j < n; ++j) {
    const std::string& b = q.chain_hashes[j];
    std::uint64_t h;
    if (b.size() == 8) {
      tls.be_buf[j] = load_be64(b);
      h = mix64(tls.be_buf[j] + part_mix);
    } else {
      h = key_hash(part, b);
    }
    tls.hash_buf[j] = h;
    table_.prefetch(h);
  }
  for (std::size_t j = 0; j < n; ++j) {
    const std::uint32_t r = table_.home_record(tls.hash_buf[j]);
    if (r != npos) __builtin_prefetch(&records_[r]);
  }
  std::size_t resolved = 0;
  for (; resolved < n; ++resolved) {
    const std::string& b = q.chain_hashes[resolved];
    std::uint32_t found = npos;
    if (b.size() == 8) {
      const std::uint64_t be = tls.be_buf[resolved];
      const std::uint32_t pid = part;
      std::size_t at = 0;
      found = table_.find(
          tls.hash_buf[resolved],
          [this, pid, be](std::uint32_t r) {
            const key_record& k = records_[r];
            return (k.part & (key_part_mask | long_flag)) == pid && k.hash == be;
          },
          at);
    } else {
      auto kj = find_key_hashed(part, b, tls.hash_buf[resolved]);
      if (kj) found = *kj;
    }
    if (found == npos) break;
    tls.key_buf[resolved] = found;
    // The first blocks' holder lists go to L1 now; the others start on their way to L2
    // (the walk moves them to L1 four blocks ahead).
    prefetch_entries(records_[found], resolved >= 4);
  }
  return resolved;
}

void tenant_index::walk_chain(const index_lookup_request& q, const lookup_context& c,
                                  std::size_t resolved, micros now, lookup_scratch& tls) const {
  // fresh(t) <=> (now - t) * 1000 < ttl_ns <=> t > now - ceil(ttl_ns / 1000).
  micros cutoff = std::numeric_limits<micros>::max();
  if (c.ttl_ns > 0) {
    const std::int64_t ttl_us = c.ttl_ns / 1000 + (c.ttl_ns % 1000 != 0 ? 1 : 0);
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
      if (c.lfu) tls.run_hits.emplace_back(tls.run_slot[r], *k0);
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
      if (c.lfu) {
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
      active = c.lfu ? walk_block<true>(e, m, kidx, j, cutoff, add)
                   : walk_block<false>(e, m, kidx, j, cutoff, add);
    }
    prev_e = e;
    prev_m = m;
  }
  flush();
}

std::size_t tenant_index::score_runs(const lookup_context& c, micros now,
                                         lookup_scratch& tls) const {
  const std::size_t nruns = tls.runs.size();
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
      f_value = freshness(now, rs.oldest, c.ttl);
      f_oldest = rs.oldest;
      f_cached = true;
    }
    const float f = f_value;
    if (f <= 0.0f) continue;
    const float pf = pressure_factor(c.pressure_of(rs.replica, now), options_.pressure_weight);
    scored_run& x = sc[ns++];
    x.run = static_cast<std::uint32_t>(s);
    x.rank = rank[rs.replica];
    x.matched = matched;
    x.f = f;
    x.score = score(static_cast<float>(matched), f, pf, c.slo_coef);
  }
  return ns;
}

void tenant_index::order_and_emit(const lookup_context& c, std::size_t ns,
                                      lookup_scratch& tls, index_lookup_result& out) const {
  std::vector<scored_run>& sc = tls.scored;
  const std::vector<std::uint32_t>& rank = name_ranks();
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
  const bool depth_sorted = c.total > 1 && ns > 0 && !one_depth;
  if (c.total > 1 && ns > 0) {
    if (one_depth) {
      // One group: every scored replica has the same depth.
      const double dp = distinguishing_power(static_cast<std::int64_t>(ns), c.total);
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
        const double dp = distinguishing_power(static_cast<std::int64_t>(end), c.total);
        if (dp != 1.0) {
          for (std::size_t i = g; i < end; ++i) {
            sc[at[static_cast<std::uint32_t>(keys[i])]].score *= static_cast<float>(dp);
          }
        }
        g = end;
      }
    }
  }
  if (c.lfu) std::sort(tls.run_hits.begin(), tls.run_hits.end());
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
    if (c.lfu) {
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
}

index_lookup_result tenant_index::exact_match(const index_lookup_request& q,
                                                  const lookup_context& c,
                                                  std::optional<std::uint32_t> part,
                                                  micros now) const {
  index_lookup_result out;
  if (!part) return out;
  const auto key = find_key(*part, q.exact_key);
  if (!key) return out;
  const key_record& k = records_[*key];
  const entry_span e = entries_of(k);
  for (std::uint32_t i = 0; i < size_of(k); ++i) {
    const float f = freshness(now, e[i].last_seen, c.ttl);
    if (f <= 0.0f) continue;
    scored_replica sr;
    const std::uint32_t r = e[i].replica();
    sr.score.replica_id = std::string(names_.name(r));
    const float pf = pressure_factor(c.pressure_of(r, now), options_.pressure_weight);
    sr.score.score = score(static_cast<float>(e[i].token_count), f, pf, c.slo_coef);
    sr.score.matched_tokens = e[i].token_count;
    sr.score.estimated_cache_hit_prob = f;
    sr.score.tier = wire_tier(e[i].tier());
    if (c.lfu && e[i].token_count > 0) sr.hits.push_back(ref_of(*key, r));
    out.scores.push_back(std::move(sr));
  }
  const double dp = distinguishing_power(static_cast<std::int64_t>(out.scores.size()), c.total);
  if (dp != 1.0) {
    for (auto& s : out.scores) s.score.score *= static_cast<float>(dp);
  }
  sort_scores(out.scores);
  if (!out.scores.empty()) out.strategy = lookup_strategy::prefix_match;
  return out;
}

void tenant_index::tenant_hot(const lookup_context& c, micros now,
                                  index_lookup_result& out) const {
  const std::int64_t max_age = options_.tenant_hot_max_age.count();
  if (max_age > 0 && c.model_stats != nullptr && c.scope) {
    const auto& serving = scopes_[*c.scope].serving;
    for (const auto& [replica, row] : *c.model_stats) {
      const std::int64_t age = age_ns(now, row.stats_reported);
      if (!(age < max_age) || !(row.hit_rate >= options_.tenant_hot_min_hit_rate)) continue;
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
      const float pf = pressure_factor(row.pressure, options_.pressure_weight);
      scored_replica sr;
      sr.score.replica_id = std::string(names_.name(replica));
      sr.score.score = score(row.hit_rate, recency, pf, c.slo_coef);
      sr.score.matched_tokens = 0;
      sr.score.estimated_cache_hit_prob = row.hit_rate;
      sr.score.tier = 0;
      out.scores.push_back(std::move(sr));
    }
    sort_scores(out.scores);
    if (!out.scores.empty()) out.strategy = lookup_strategy::tenant_hot;
  }
}

tenant_index::lookup_scratch& tenant_index::thread_scratch() {
  thread_local lookup_scratch scratch;
  return scratch;
}

template <bool Lfu>
std::size_t tenant_index::walk_block(const entry_span& e, std::uint32_t m, std::uint32_t key,
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

bool tenant_index::same_holders(const entry_span& a, const entry_span& b) {
  return a.n == b.n &&
         std::memcmp(a.rt, b.rt, static_cast<std::size_t>(a.n) * sizeof(std::uint32_t)) == 0 &&
         std::memcmp(a.ls, b.ls, static_cast<std::size_t>(a.n) * sizeof(micros)) == 0;
}

void tenant_index::prefetch_entries(const key_record& k, bool to_l2) const {
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

const std::vector<std::uint32_t>& tenant_index::name_ranks() const {
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

entry_ref tenant_index::ref_of(std::uint32_t key, std::uint32_t replica) const {
  const key_record& k = records_[key];
  // The key's table hash covers its bytes (also for hashes kept in the side table, whose
  // slots are reused too) and its partition.
  return entry_ref{key, replica, key_hash(k), k.part & (key_part_mask | key_long_hash)};
}

std::optional<std::pair<std::uint32_t, std::uint32_t>> tenant_index::live_entry(
    const entry_ref& ref) const {
  if (ref.key >= records_.size()) return std::nullopt;
  const key_record& k = records_[ref.key];
  if (is_free(k)) return std::nullopt;
  // The slot may have been freed and reused by another key since the lookup.
  if ((k.part & (key_part_mask | key_long_hash)) != ref.key_part || key_hash(k) != ref.key_hash)
    return std::nullopt;
  const std::uint32_t pos = find_replica(k, ref.replica);
  if (pos == npos) return std::nullopt;
  return std::make_pair(ref.key, pos);
}

void tenant_index::add_credit(std::uint32_t key, std::uint32_t pos, std::uint32_t count) {
  entry_proxy e = entries_of(records_[key])[pos];
  constexpr std::uint32_t max = std::numeric_limits<std::uint32_t>::max();
  e.access_count = count > max - e.access_count ? max : e.access_count + count;
  if (cap_tracked() && policy_.eviction == policy::eviction_mode::lfu) {
    push_cap_ref(key, e.access_count, e.last_seen);
  }
}

void tenant_index::credit(const entry_ref& ref) {
  if (auto live = live_entry(ref)) add_credit(live->first, live->second, 1);
}

std::optional<named_hit> tenant_index::name_hit(const entry_ref& ref) const {
  auto live = live_entry(ref);
  if (!live) return std::nullopt;
  const key_record& k = records_[live->first];
  const part_info& p = parts_[part_id(k)];
  return named_hit{std::string(names_.name(p.model)), std::string(names_.name(p.scheme)),
                   std::string(names_.name(p.adapter)), key_bytes(k),
                   std::string(names_.name(entries_of(k)[live->second].replica()))};
}

bool tenant_index::credit_named(const named_hit& hit, std::uint32_t count) {
  const auto part = find_part(hit.model, hit.scheme, hit.adapter);
  const auto replica = names_.find(hit.replica);
  if (!part || !replica || count == 0) return false;
  const auto key = find_key(*part, hit.key);
  if (!key) return false;
  const std::uint32_t pos = find_replica(records_[*key], *replica);
  if (pos == npos) return false;
  add_credit(*key, pos, count);
  return true;
}

}  // namespace ic::index
