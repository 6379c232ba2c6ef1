// Deterministic replay and eviction-order oracles on random input sequences.
//
// Two indexes fed the same timestamped inputs must hold the same state and answer every
// lookup the same (what journal replay relies on). A second test checks the incremental
// cap/quota orders against a brute-force sort of the whole index after every ingest.
#include <algorithm>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <tuple>

#include <gtest/gtest.h>

#include "index/testing/combined_index.hpp"
#include "index/route_lookup.hpp"
#include "index/test_support.hpp"

namespace ic::index {
namespace {

using namespace ic::index::testing;

TEST(Replay, SameInputsGiveSameStateAndAnswers) {
  // The last run gives `b` a key slab of 16-record chunks (key_chunk_bits 4): a layout
  // option, so it must not change any state or answer (its ~80 keys per tenant span chunks).
  for (auto [seed, b_bits] : {std::pair{1u, 12u}, {2u, 12u}, {3u, 12u}, {4u, 4u}}) {
    index_options o;
    o.max_entries = 60;
    combined_index a(o);
    index_options ob = o;
    ob.key_chunk_bits = b_bits;
    combined_index b(ob);
    generator g(seed);
    std::map<std::string, policy::resolved_policy> policies;
    for (int step = 0; step < 3000; ++step) {
      const int op = g.pick(20);
      if (op < 10) {
        auto u = g.make_update(false);
        auto ra = a.ingest(u, g.now);
        auto rb = b.ingest(u, g.now);
        ASSERT_EQ(ra.first_drop_reason, rb.first_drop_reason);
        ASSERT_EQ(ra.cap_evicted_lru + ra.cap_evicted_lfu, rb.cap_evicted_lru + rb.cap_evicted_lfu);
      } else if (op < 13) {
        auto e = g.make_event();
        a.apply_event(e, g.now);
        b.apply_event(e, g.now);
      } else if (op < 14) {
        a.sweep(g.now);
        b.sweep(g.now);
      } else if (op < 15) {
        policy::resolved_policy p;
        p.eviction = g.pick(2) ? policy::eviction_mode::lfu : policy::eviction_mode::lru;
        p.eviction_ttl = std::chrono::minutes(1 + g.pick(30));
        p.minimum_matched_tokens = g.pick(3) * 16;
        const std::string t = g.tenant();
        policies[t] = p;
        a.set_tenant_policy(t, p);
        b.set_tenant_policy(t, p);
        if (g.pick(3) == 0) {
          policy::tenant_quota q;
          if (g.pick(2)) q = g.pick(30);
          a.set_tenant_quota(t, q);
          b.set_tenant_quota(t, q);
        }
      } else {
        auto r = g.make_request();
        auto it = policies.find(r.tenant_id);
        const auto pol = it == policies.end() ? policy::resolved_policy{} : it->second;
        ASSERT_EQ(describe(route_lookup(a, r, pol, g.now)),
                  describe(route_lookup(b, r, pol, g.now)))
            << "seed " << seed << " step " << step;
      }
      if (step % 100 == 0) {
        ASSERT_EQ(a.canonical_dump(), b.canonical_dump()) << "seed " << seed << " step " << step;
        ASSERT_LE(a.facts().total_entries - a.facts().reserved_entries, o.max_entries);
      }
    }
    EXPECT_EQ(a.canonical_dump(), b.canonical_dump());
    EXPECT_GT(a.facts().total_entries, 0);
  }
}

TEST(Replay, KeyChunkBitsSetsTheSlabChunkAndSnapshotsCrossChunkSizes) {
  auto key_bytes = [](unsigned bits) {
    index_options o;
    o.key_chunk_bits = bits;
    combined_index idx(o);
    idx.ingest(update("r1", {legacy("k1", 16)}), t0);
    return idx.memory_usage().key_records;
  };
  EXPECT_EQ(key_bytes(12), 4096 * sizeof(key_record));  // the default: one 128 KiB chunk
  EXPECT_EQ(key_bytes(6), 64 * sizeof(key_record));
  EXPECT_EQ(key_bytes(0), 16 * sizeof(key_record));     // clamped up to 4
  EXPECT_EQ(key_bytes(99), (std::size_t{1} << 20) * sizeof(key_record));  // clamped to 20

  // A snapshot of a small-chunk index loads into a default one (and back) identically.
  index_options small;
  small.key_chunk_bits = 4;
  combined_index a(small);
  generator g(7);
  for (int i = 0; i < 400; ++i) a.ingest(g.make_update(false), g.now);
  ASSERT_GT(a.facts().total_keys, 16);  // more than one chunk
  auto reload = [](const combined_index& from, combined_index& to) {
    std::string bytes;
    ASSERT_TRUE(write_snapshot(from, [&](std::string_view c) {
      bytes.append(c);
      return true;
    }));
    auto loader = combined_loader(to);
    std::string error;
    ASSERT_TRUE(loader.feed(bytes, &error) && loader.finish(&error)) << error;
  };
  combined_index b;
  reload(a, b);
  EXPECT_EQ(b.canonical_dump(), a.canonical_dump());
  combined_index c(small);
  reload(b, c);
  EXPECT_EQ(c.canonical_dump(), a.canonical_dump());
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == '|') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::string unhex(const std::string& h) {
  std::string out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) {
    out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  }
  return out;
}

/// One entry parsed from canonical_dump().
struct dumped_entry {
  std::string tenant, model, scheme, adapter, hash, replica;
  micros last_seen = 0;
  std::int64_t access = 0;
};

std::vector<dumped_entry> entries_of(const combined_index& idx) {
  std::vector<dumped_entry> out;
  for (const auto& line : idx.canonical_dump()) {
    if (line.rfind("E|", 0) != 0) continue;
    auto f = split(line);
    dumped_entry e{f[1], f[2], f[3], f[4], unhex(f[5]), f[6], std::stoll(f[8]), std::stoll(f[10])};
    out.push_back(e);
  }
  return out;
}

void evict_from_oracle(combined_index& oracle, const dumped_entry& e, micros now) {
  cache_event ev;
  ev.type = static_cast<int>(event_type::prefix_evicted);
  ev.tenant_id = e.tenant;
  ev.model_id = e.model;
  ev.replica_id = e.replica;
  ev.prefix_hash = e.hash;
  oracle.apply_event(ev, now);
}

/// Checks a random chain lookup against a naive per-replica walk over `find_entry`.
void check_chain_walk(const combined_index& idx, generator& g,
                      std::map<std::string, bool>& lfu_tenant) {
  index_lookup_request q;
  const std::string tenant = g.tenant();
  const std::string model = g.model();
  q.tenant = tenant;
  q.model = model;
  q.hash_scheme = "vllm";
  for (int j = 0, n = 1 + g.pick(6); j < n; ++j) {
    q.chain_hashes.push_back(g.hash());
    q.chain_counts.push_back(8 * (1 + g.pick(3)));
  }
  policy::resolved_policy pol;
  pol.eviction_ttl = std::chrono::minutes(1 + g.pick(3));
  pol.eviction = lfu_tenant[tenant] ? policy::eviction_mode::lfu : policy::eviction_mode::lru;
  const auto got = idx.lookup(q, pol, g.now);
  std::map<std::string, replica_score> want;
  for (const auto& [replica, n] : idx.serving(tenant, model, "vllm")) {
    std::int64_t matched = 0;
    micros oldest = std::numeric_limits<micros>::max();
    std::int32_t tier = 1;
    for (std::size_t j = 0; j < q.chain_hashes.size(); ++j) {
      auto e = idx.find_entry(tenant, model, "vllm", "", q.chain_hashes[j], replica);
      if (!e || freshness(g.now, e->last_seen, pol.eviction_ttl) <= 0.0f) break;
      matched += q.chain_counts[j];
      oldest = std::min(oldest, e->last_seen);
      tier = worst_tier(tier, e->tier);
    }
    if (matched <= 0 || freshness(g.now, oldest, pol.eviction_ttl) <= 0.0f) continue;
    replica_score s;
    s.replica_id = replica;
    s.matched_tokens = static_cast<std::int32_t>(matched);
    s.estimated_cache_hit_prob = freshness(g.now, oldest, pol.eviction_ttl);
    s.tier = tier;
    want[replica] = s;
  }
  ASSERT_EQ(got.scores.size(), want.size());
  for (const auto& sr : got.scores) {
    auto it = want.find(sr.score.replica_id);
    ASSERT_NE(it, want.end()) << sr.score.replica_id;
    EXPECT_EQ(sr.score.matched_tokens, it->second.matched_tokens);
    EXPECT_EQ(sr.score.estimated_cache_hit_prob, it->second.estimated_cache_hit_prob);
    EXPECT_EQ(sr.score.tier, it->second.tier);
  }
  EXPECT_EQ(got.strategy == lookup_strategy::prefix_match, !want.empty());
}

TEST(Replay, IncrementalQuotaAndCapOrdersMatchBruteForce) {
  for (std::uint64_t seed : {11u, 12u}) {
    constexpr std::int64_t cap = 40;
    index_options capped;
    capped.max_entries = cap;
    index_options unbounded;
    unbounded.max_entries = 0;
    combined_index idx(capped);
    combined_index oracle(unbounded);
    std::map<std::string, bool> lfu_tenant = {{"t0", false}, {"t1", true}, {"t2", false}};
    const std::map<std::string, std::int64_t> quota = {{"t2", 12}};
    for (const auto& [t, is_lfu] : lfu_tenant) {
      policy::resolved_policy p;
      p.eviction = is_lfu ? policy::eviction_mode::lfu : policy::eviction_mode::lru;
      p.minimum_matched_tokens = 0;
      idx.set_tenant_policy(t, p);
      oracle.set_tenant_policy(t, p);
    }
    for (const auto& [t, q] : quota) {
      idx.set_tenant_quota(t, q);
    }
    generator g(seed);
    for (int step = 0; step < 1500; ++step) {
      if (g.pick(4) == 0) {
        auto r = g.make_request();
        r.hash_scheme = "vllm";
        r.adapter_id = "";
        policy::resolved_policy p;
        p.eviction =
            lfu_tenant[r.tenant_id] ? policy::eviction_mode::lfu : policy::eviction_mode::lru;
        p.minimum_matched_tokens = 0;
        p.routing_floor_score = 0;
        ASSERT_EQ(describe(route_lookup(idx, r, p, g.now)),
                  describe(route_lookup(oracle, r, p, g.now)));
        continue;
      }
      if (g.pick(8) == 0) {
        auto e = g.make_event();
        e.adapter_id = "";
        idx.apply_event(e, g.now);
        oracle.apply_event(e, g.now);
        if (g.pick(10) == 0) {
          idx.sweep(g.now);
          oracle.sweep(g.now);
        }
        continue;
      }
      if (step % 10 == 0) check_chain_walk(idx, g, lfu_tenant);
      auto u = g.make_update(true);
      const micros ts = u.timestamp_us == 0 ? g.now : u.timestamp_us;
      idx.ingest(u, g.now);
      oracle.ingest(u, g.now);
      // Brute-force quota (§4.5) on the ingested tenant.
      auto qit = quota.find(u.tenant_id);
      if (qit != quota.end()) {
        for (;;) {
          auto all = entries_of(oracle);
          std::map<std::tuple<std::string, std::string, std::string, std::string>, micros> age;
          for (const auto& e : all) {
            if (e.tenant != u.tenant_id) continue;
            auto k = std::make_tuple(e.model, e.scheme, e.adapter, e.hash);
            auto it = age.find(k);
            age[k] = it == age.end() ? e.last_seen : std::max(it->second, e.last_seen);
          }
          if (static_cast<std::int64_t>(age.size()) <= qit->second) break;
          auto victim = std::min_element(age.begin(), age.end(), [](const auto& x, const auto& y) {
            return std::tie(x.second, x.first) < std::tie(y.second, y.first);
          });
          for (const auto& e : all) {
            if (e.tenant == u.tenant_id &&
                std::make_tuple(e.model, e.scheme, e.adapter, e.hash) == victim->first) {
              evict_from_oracle(oracle, e, ts);
            }
          }
        }
      }
      // Brute-force global cap (§4.6).
      auto all = entries_of(oracle);
      std::sort(all.begin(), all.end(), [&](const dumped_entry& x, const dumped_entry& y) {
        const std::int64_t cx = lfu_tenant[x.tenant] ? x.access : 0;
        const std::int64_t cy = lfu_tenant[y.tenant] ? y.access : 0;
        return std::tie(cx, x.last_seen, x.tenant, x.model, x.scheme, x.adapter, x.hash,
                        x.replica) <
               std::tie(cy, y.last_seen, y.tenant, y.model, y.scheme, y.adapter, y.hash, y.replica);
      });
      for (std::size_t i = 0; static_cast<std::int64_t>(all.size() - i) > cap; ++i) {
        evict_from_oracle(oracle, all[i], ts);
      }
      ASSERT_EQ(idx.canonical_dump(), oracle.canonical_dump())
          << "seed " << seed << " step " << step;
    }
    EXPECT_EQ(idx.facts().total_entries, cap);
  }
}

}  // namespace
}  // namespace ic::index
