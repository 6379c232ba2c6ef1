// Sharding: one `combined_index` per tenant (shared totals, external cap merged by the owner)
// must give exactly the state, changes and answers of one combined index fed the same
// inputs, including the cold-start carve-out (§3.8 step 1), UNKNOWN_TENANT, the global cap
// order (§4.6) across tenants, `split_tenants` after recovery and snapshot loading.
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "index/testing/combined_index.hpp"
#include "index/route_lookup.hpp"
#include "index/snapshot_codec.hpp"
#include "index/test_support.hpp"

namespace ic::index {
namespace {

using namespace ic::index::testing;
using testing::image;  // joins the overloads below

std::uint32_t bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

/// Bit-exact image of an index lookup (hits by count: their tenant slots differ by design).
std::string image(const index_lookup_result& r) {
  std::ostringstream os;
  os << reason_code_of(r.strategy);
  for (const auto& s : r.scores) {
    os << '|' << s.score.replica_id << ',' << bits(s.score.score) << ',' << s.score.matched_tokens
       << ',' << bits(s.score.estimated_cache_hit_prob) << ',' << s.score.tier << ','
       << s.hits.size();
  }
  return os.str();
}

std::string image(const ingest_result& r) {
  std::ostringstream os;
  os << r.first_drop_reason << ',' << r.dropped_empty_hash_scheme << ','
     << r.dropped_malformed_chain << ',' << r.dropped_reserved_tenant << ',' << r.entries_added
     << ',' << r.quota_evicted_keys << ',' << r.cap_evicted_lru << ',' << r.cap_evicted_lfu;
  return os.str();
}

std::string image(const cache_state_view& v) {
  std::ostringstream os;
  os << v.total_prefixes << ',' << v.hot_prefixes;
  for (const auto& r : v.replicas) os << '|' << r.replica_id << ',' << r.hit_rate << ',' << r.pressure;
  return os.str();
}

std::string image(const global_facts& f) {
  return std::to_string(f.total_entries) + "/" + std::to_string(f.reserved_entries) + "/" +
         std::to_string(f.total_keys);
}

/// Appends `idx`'s dump lines without the global "G|" line.
void dump_tenants(const combined_index& idx, std::vector<std::string>& out) {
  for (auto& line : idx.canonical_dump()) {
    if (line.rfind("G|", 0) != 0) out.push_back(std::move(line));
  }
}

sweep_result sliced_sweep(combined_index& idx, micros now, change_log* log, std::size_t slice) {
  if (slice == 0) return idx.sweep(now, log);
  sweep_result r;
  combined_index::sweep_cursor cursor;
  while (!idx.sweep_step(now, cursor, slice, log, r)) {
  }
  return r;
}

/// One combined index (today's server).
struct combined_target {
  combined_index& idx;

  ingest_result ingest(const cache_state_update& u, micros now, change_log* log, input_origin o) {
    return idx.ingest(u, now, log, o);
  }
  event_result event(const cache_event& e, micros now, change_log* log, input_origin o) {
    return idx.apply_event(e, now, log, o);
  }
  sweep_result sweep(micros now, change_log* log, std::size_t slice) {
    return sliced_sweep(idx, now, log, slice);
  }
  void set_policy(const std::string& t, const policy::resolved_policy& p) {
    idx.set_tenant_policy(t, p);
  }
  void set_quota(const std::string& t, policy::tenant_quota q) { idx.set_tenant_quota(t, q); }
  std::string route(const lookup_route_request& r, const policy::resolved_policy& p, micros now) {
    return describe(route_lookup(idx, r, p, now));
  }
  std::string lookup(const index_lookup_request& q, const policy::resolved_policy& p, micros now,
                     bool credit) {
    auto l = idx.lookup(q, p, now);
    if (credit) idx.credit_lfu(q.tenant, l.scores);
    return image(l);
  }
  std::string state(const std::string& t, const std::string& m) {
    return image(idx.get_cache_state(t, m));
  }
  std::vector<std::string> dump() {
    std::vector<std::string> out;
    dump_tenants(idx, out);
    std::sort(out.begin(), out.end());
    return out;
  }
  global_facts totals() const { return idx.facts(); }
};

/// One index per tenant with shared totals and the owner's cap merge (the actor design).
struct sharded_target {
  explicit sharded_target(const index_options& base) : per(base) {
    per.shared = &shared;
    per.external_cap = true;
    spare = std::make_unique<combined_index>(per);
  }

  shared_facts shared;
  index_options per;
  std::map<std::string, std::unique_ptr<combined_index>, std::less<>> by_tenant;
  /// Answers reads of tenants that have no index (never mutated).
  std::unique_ptr<combined_index> spare;
  std::int64_t merge_rounds = 0;

  combined_index& at(const std::string& t) {
    auto it = by_tenant.find(t);
    if (it == by_tenant.end()) it = by_tenant.emplace(t, std::make_unique<combined_index>(per)).first;
    return *it->second;
  }
  combined_index& reader(std::string_view t) {
    auto it = by_tenant.find(t);
    return it == by_tenant.end() ? *spare : *it->second;
  }

  /// The owner's §4.6 merge: evict from the index whose next victim is first, up to the
  /// next victim of any other index.
  void enforce_cap(micros ts, change_log* log, ingest_result& r) {
    if (per.max_entries <= 0) return;
    for (;;) {
      const std::int64_t excess =
          shared.total_entries.load() - shared.reserved_entries.load() - per.max_entries;
      if (excess <= 0) return;
      combined_index* first = nullptr;
      std::optional<cap_head> head;
      std::optional<cap_head> bound;
      for (auto& [t, idx] : by_tenant) {
        auto h = idx->cap_victim();
        if (!h) continue;
        if (!head || cap_before(*h, *head)) {
          if (head && (!bound || cap_before(*head, *bound))) bound = head;
          head = h;
          first = idx.get();
        } else if (!bound || cap_before(*h, *bound)) {
          bound = h;
        }
      }
      if (first == nullptr) return;
      ++merge_rounds;
      const std::int64_t n = first->evict_cap(bound, excess, ts, log, r);
      ASSERT_GE(n, 1);
    }
  }

  ingest_result ingest(const cache_state_update& u, micros now, change_log* log, input_origin o) {
    ingest_result r = at(u.tenant_id).ingest(u, now, log, o);
    enforce_cap(u.timestamp_us == 0 ? now : u.timestamp_us, log, r);
    return r;
  }
  event_result event(const cache_event& e, micros now, change_log* log, input_origin o) {
    return at(e.tenant_id).apply_event(e, now, log, o);
  }
  sweep_result sweep(micros now, change_log* log, std::size_t slice) {
    sweep_result all;
    for (auto& [t, idx] : by_tenant) {  // tenant order: the combined sweep's change order
      sweep_result r = sliced_sweep(*idx, now, log, slice);
      all.entries_removed_lru += r.entries_removed_lru;
      all.entries_removed_lfu += r.entries_removed_lfu;
      all.stats_rows_removed += r.stats_rows_removed;
    }
    return all;
  }
  void set_policy(const std::string& t, const policy::resolved_policy& p) {
    at(t).set_tenant_policy(t, p);
  }
  void set_quota(const std::string& t, policy::tenant_quota q) { at(t).set_tenant_quota(t, q); }
  std::string route(const lookup_route_request& r, const policy::resolved_policy& p, micros now) {
    auto it = by_tenant.find(r.tenant_id);
    if (it == by_tenant.end()) {
      // No actor for the tenant: a read-only answer (nothing to credit).
      auto plan = plan_route(r, p);
      if (plan.early) return describe(*plan.early);
      return describe(decide_route(*spare, r, plan, p, now).response);
    }
    return describe(route_lookup(*it->second, r, p, now));
  }
  std::string lookup(const index_lookup_request& q, const policy::resolved_policy& p, micros now,
                     bool credit) {
    combined_index& idx = reader(q.tenant);
    auto l = idx.lookup(q, p, now);
    if (credit && &idx != spare.get()) idx.credit_lfu(q.tenant, l.scores);
    return image(l);
  }
  std::string state(const std::string& t, const std::string& m) {
    return image(reader(t).get_cache_state(t, m));
  }
  std::vector<std::string> dump() {
    std::vector<std::string> out;
    for (auto& [t, idx] : by_tenant) dump_tenants(*idx, out);
    std::sort(out.begin(), out.end());
    return out;
  }
  global_facts totals() const {
    // The single non-reserved counter always equals the difference of the two totals.
    EXPECT_EQ(shared.nonreserved_entries.load(),
              shared.total_entries.load() - shared.reserved_entries.load());
    return global_facts{shared.total_entries.load(), shared.reserved_entries.load(),
                        shared.total_keys.load()};
  }
  /// Sum of the indexes' own facts (must equal the shared totals between calls).
  global_facts sum() const {
    global_facts f;
    for (const auto& [t, idx] : by_tenant) {
      f.total_entries += idx->facts().total_entries;
      f.reserved_entries += idx->facts().reserved_entries;
      f.total_keys += idx->facts().total_keys;
    }
    return f;
  }
  void adopt(std::vector<std::pair<std::string, std::unique_ptr<combined_index>>> split) {
    for (auto& [t, idx] : split) by_tenant.emplace(t, std::move(idx));
  }
};

/// A random history (several tenants, the reserved one, LRU and LFU, quotas, short TTLs so
/// the index empties now and then) and what it exercised.
struct history {
  explicit history(std::uint64_t seed) : g(seed) {}
  generator g;
  std::map<std::string, policy::resolved_policy> policies;
  std::map<std::string, policy::tenant_quota> quotas;
  int carve_outs = 0;       ///< lookups made while no tenant held a key
  int unknown_tenant = 0;   ///< UNKNOWN_TENANT answers
  int cap_evictions = 0;
  int lfu_cap_evictions = 0;
  int reserved_ingests = 0;

  std::string tenant() {
    const int v = g.pick(12);
    if (v == 0) return std::string(ic::index::reserved_tenant);
    return "t" + std::to_string(v % 5);
  }
  policy::resolved_policy policy_of(const std::string& t) const {
    auto it = policies.find(t);
    return it == policies.end() ? policy::resolved_policy{} : it->second;
  }

  /// Applies `steps` random inputs to `a` and `b`, checking they stay equal.
  template <typename A, typename B>
  void run(A& a, B& b, int steps, const std::string& trace) {
    for (int step = 0; step < steps; ++step) {
      SCOPED_TRACE(trace + " step " + std::to_string(step));
      const int op = g.pick(40);
      change_log la, lb;
      if (op < 18) {
        auto u = g.make_update(false);
        u.tenant_id = tenant();
        input_origin o = input_origin::producer;
        if (u.tenant_id == ic::index::reserved_tenant && g.pick(4) != 0) {
          o = input_origin::probe;
          ++reserved_ingests;
        }
        const auto ra = a.ingest(u, g.now, &la, o);
        const auto rb = b.ingest(u, g.now, &lb, o);
        ASSERT_EQ(image(ra), image(rb));
        cap_evictions += static_cast<int>(ra.cap_evicted_lru + ra.cap_evicted_lfu);
        lfu_cap_evictions += static_cast<int>(ra.cap_evicted_lfu);
      } else if (op < 22) {
        auto e = g.make_event();
        e.tenant_id = tenant();
        const input_origin o =
            e.tenant_id == ic::index::reserved_tenant && g.pick(2) ? input_origin::probe
                                                                   : input_origin::producer;
        const auto ra = a.event(e, g.now, &la, o);
        const auto rb = b.event(e, g.now, &lb, o);
        ASSERT_EQ(ra.applied, rb.applied);
        ASSERT_EQ(ra.entries_removed, rb.entries_removed);
      } else if (op < 24) {
        g.now += g.pick(60) * 1'000'000;
        const std::size_t slice = g.pick(3) == 0 ? 1 + g.pick(7) : 0;
        const auto ra = a.sweep(g.now, &la, 0);
        const auto rb = b.sweep(g.now, &lb, slice);
        ASSERT_EQ(ra.entries_removed_lru, rb.entries_removed_lru);
        ASSERT_EQ(ra.entries_removed_lfu, rb.entries_removed_lfu);
        ASSERT_EQ(ra.stats_rows_removed, rb.stats_rows_removed);
      } else if (op < 26) {
        const std::string t = tenant();
        policy::resolved_policy p;
        p.eviction = g.pick(2) ? policy::eviction_mode::lfu : policy::eviction_mode::lru;
        p.eviction_ttl = std::chrono::seconds(30 + 30 * g.pick(10));
        p.minimum_matched_tokens = g.pick(4) == 0 ? 16 : 0;
        policies[t] = p;
        a.set_policy(t, p);
        b.set_policy(t, p);
        if (g.pick(3) == 0) {
          policy::tenant_quota q;
          if (g.pick(2)) q = g.pick(20);
          quotas[t] = q;
          a.set_quota(t, q);
          b.set_quota(t, q);
        }
      } else if (op < 33) {
        auto r = g.make_request();
        r.tenant_id = g.pick(6) == 0 ? "t9" : tenant();  // t9 never holds anything
        if (a.totals().total_keys == 0) ++carve_outs;
        const auto pol = policy_of(r.tenant_id);
        const std::string ra = a.route(r, pol, g.now);
        const std::string rb = b.route(r, pol, g.now);
        ASSERT_EQ(ra, rb);
        if (ra.rfind("UNKNOWN_TENANT", 0) == 0) ++unknown_tenant;
      } else if (op < 38) {
        const std::string t = g.pick(8) == 0 ? "t9" : tenant();
        const std::string m = g.model();
        std::vector<std::string> hs;
        for (int j = 0, n = 1 + g.pick(4); j < n; ++j) hs.push_back(g.hash());
        index_lookup_request q = g.pick(2) ? chain_query(hs, 16, t, m, "vllm")
                                           : exact(hs[0], 16 * (1 + g.pick(5)), t, m, "vllm");
        if (a.totals().total_keys == 0) ++carve_outs;
        const auto pol = policy_of(t);
        const std::string ra = a.lookup(q, pol, g.now, true);
        const std::string rb = b.lookup(q, pol, g.now, true);
        ASSERT_EQ(ra, rb);
        if (ra.rfind("UNKNOWN_TENANT", 0) == 0) ++unknown_tenant;
      } else {
        const std::string t = tenant();
        const std::string m = g.model();
        ASSERT_EQ(a.state(t, m), b.state(t, m));
      }
      ASSERT_EQ(image(la), image(lb));
      if (step % 50 == 0 || step + 1 == steps) {
        ASSERT_EQ(a.dump(), b.dump());
        ASSERT_EQ(image(a.totals()), image(b.totals()));
      }
    }
  }
};

void check_sharded(const sharded_target& s, const combined_index& combined) {
  EXPECT_EQ(image(s.totals()), image(combined.facts()));
  EXPECT_EQ(image(s.sum()), image(combined.facts()));
  if (combined.options().max_entries > 0) {
    EXPECT_LE(s.totals().total_entries - s.totals().reserved_entries,
              combined.options().max_entries);
  }
}

template <typename Target>
void run_checked(history& h, combined_index& combined, Target& t, int steps,
                 const std::string& trace) {
  combined_target a{combined};
  h.run(a, t, steps, trace);
}

TEST(ShardedIndex, MatchesCombinedIndexOnRandomHistories) {
  int carve_outs = 0, unknown = 0, cap = 0, lfu_cap = 0, reserved = 0;
  std::int64_t merge_rounds = 0;
  for (std::int64_t max_entries : {std::int64_t{0}, std::int64_t{25}, std::int64_t{60},
                                   std::int64_t{200}}) {
    for (std::uint64_t seed : {1u, 2u, 3u, 4u}) {
      index_options o;
      o.max_entries = max_entries;
      o.default_ttl = std::chrono::seconds(90);
      combined_index combined(o);
      sharded_target s(o);
      history h(seed * 1000 + static_cast<std::uint64_t>(max_entries));
      run_checked(h, combined, s, 1500,
                  "cap " + std::to_string(max_entries) + " seed " + std::to_string(seed));
      if (HasFatalFailure()) return;
      check_sharded(s, combined);
      carve_outs += h.carve_outs;
      unknown += h.unknown_tenant;
      cap += h.cap_evictions;
      lfu_cap += h.lfu_cap_evictions;
      reserved += h.reserved_ingests;
      merge_rounds += s.merge_rounds;
    }
  }
  // The histories did exercise what the test is about.
  EXPECT_GT(carve_outs, 0);
  EXPECT_GT(unknown, 0);
  EXPECT_GT(cap, 100);
  EXPECT_GT(lfu_cap, 10);
  EXPECT_GT(reserved, 0);
  EXPECT_GT(merge_rounds, 0);
}

// Cold start (§3.8 step 1) looks at every tenant's keys: a key of another tenant, even the
// reserved one, turns a no-key answer into UNKNOWN_TENANT in every per-tenant index.
TEST(ShardedIndex, CarveOutReadsSharedTotalsIncludingReservedTenant) {
  index_options o;
  o.max_entries = 2;
  combined_index combined(o);
  sharded_target s(o);
  const auto q = exact("k1", 16, "a");
  const policy::resolved_policy pol;
  EXPECT_EQ(combined.lookup(q, pol, t0).strategy, lookup_strategy::none);
  EXPECT_EQ(s.reader("a").lookup(q, pol, t0).strategy, lookup_strategy::none);

  const auto probe = update("r1", {legacy("p1", 16), legacy("p2", 16), legacy("p3", 16)},
                            std::string(ic::index::reserved_tenant), "m", "vllm", t0);
  combined.ingest(probe, t0, nullptr, input_origin::probe);
  s.ingest(probe, t0, nullptr, input_origin::probe);
  EXPECT_EQ(s.totals().reserved_entries, 3);  // not capped: reserved entries are exempt
  EXPECT_EQ(image(s.totals()), image(combined.facts()));
  EXPECT_EQ(combined.lookup(q, pol, t0).strategy, lookup_strategy::unknown_tenant);
  EXPECT_EQ(s.reader("a").lookup(q, pol, t0).strategy, lookup_strategy::unknown_tenant);
  // The index of tenant "b" (created, no key yet) reads the shared count too.
  s.at("b");
  EXPECT_EQ(s.at("b").facts().total_keys, 0);
  EXPECT_EQ(s.at("b").lookup(exact("k1", 16, "b"), pol, t0).strategy,
            lookup_strategy::unknown_tenant);

  // Tenants a and b fill the cap; the reserved tenant is never a victim.
  for (const char* t : {"a", "b"}) {
    const auto u = update("r1", {legacy(std::string("x") + t, 16), legacy(std::string("y") + t, 16)},
                          t, "m", "vllm", t0 + (t[0] == 'a' ? 1 : 2));
    change_log la, lb;
    const auto ra = combined.ingest(u, t0, &la);
    const auto rb = s.ingest(u, t0, &lb, input_origin::producer);
    EXPECT_EQ(image(ra), image(rb));
    EXPECT_EQ(image(la), image(lb));
  }
  EXPECT_EQ(s.totals().total_entries - s.totals().reserved_entries, 2);
  EXPECT_EQ(s.at("a").facts().total_entries, 0);  // a's entries were older: evicted first
  EXPECT_EQ(s.dump(), combined_target{combined}.dump());

  // Everything expires: back to the carve-out everywhere.
  combined.sweep(t0 + 3600 * 1'000'000LL);
  s.sweep(t0 + 3600 * 1'000'000LL, nullptr, 0);
  EXPECT_EQ(image(s.totals()), "0/0/0");
  EXPECT_EQ(image(s.sum()), "0/0/0");
  EXPECT_EQ(s.at("b").lookup(exact("xb", 16, "b"), pol, t0).strategy, lookup_strategy::none);
  EXPECT_EQ(combined.lookup(exact("xb", 16, "b"), pol, t0).strategy, lookup_strategy::none);
}

TEST(ShardedIndex, CapVictimAndBoundedEvictCap) {
  index_options o;
  o.max_entries = 100;
  o.external_cap = true;
  combined_index idx(o);
  // a: LRU entries at t0+1, t0+3; b: LFU entries (count 0 before any credit) at t0+2.
  idx.ingest(update("r1", {legacy("a1", 16)}, "a", "m", "vllm", t0 + 1), t0);
  idx.ingest(update("r1", {legacy("a3", 16)}, "a", "m", "vllm", t0 + 3), t0);
  idx.set_tenant_policy("b", lfu());
  idx.ingest(update("r1", {legacy("b2", 16), legacy("b2x", 16)}, "b", "m", "vllm", t0 + 2), t0);
  auto h = idx.cap_victim();
  ASSERT_TRUE(h);
  EXPECT_EQ(h->tenant, "a");
  EXPECT_EQ(h->count, 0u);
  EXPECT_EQ(h->last_seen, t0 + 1);

  ingest_result r;
  change_log log;
  // Bound (0, t0+2, "a"): only a1 sorts before it.
  EXPECT_EQ(idx.evict_cap(cap_head{0, t0 + 2, "a"}, 10, t0 + 9, &log, r), 1);
  EXPECT_EQ(r.cap_evicted_lru, 1);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].prefix_hash, "a1");
  EXPECT_EQ(log[0].cause, change_cause::cap);
  EXPECT_EQ(log[0].timestamp_us, t0 + 9);
  // Equal (count, last_seen): the tenant name decides ("b" < "c", not < "a").
  EXPECT_EQ(idx.evict_cap(cap_head{0, t0 + 2, "a"}, 10, t0 + 9, &log, r), 0);
  EXPECT_EQ(idx.evict_cap(cap_head{0, t0 + 2, "c"}, 1, t0 + 9, &log, r), 1);  // max 1
  EXPECT_EQ(r.cap_evicted_lfu, 1);
  EXPECT_EQ(idx.cap_victim()->tenant, "b");
  // No bound: everything, in order.
  EXPECT_EQ(idx.evict_cap(std::nullopt, 10, t0 + 9, &log, r), 2);
  EXPECT_FALSE(idx.cap_victim());
  EXPECT_EQ(idx.facts().total_entries, 0);
  EXPECT_TRUE(cap_before(cap_head{0, 5, "z"}, cap_head{1, 0, "a"}));
  EXPECT_TRUE(cap_before(cap_head{1, 4, "z"}, cap_head{1, 5, "a"}));
  EXPECT_TRUE(cap_before(cap_head{1, 5, "a"}, cap_head{1, 5, "b"}));
  EXPECT_FALSE(cap_before(cap_head{1, 5, "a"}, cap_head{1, 5, "a"}));

  // external_cap: ingest goes over the cap and leaves it to the owner.
  index_options small = o;
  small.max_entries = 1;
  combined_index ext(small);
  const auto res = ext.ingest(update("r1", {legacy("k1", 16), legacy("k2", 16)}, "a"), t0);
  EXPECT_EQ(res.cap_evicted_lru, 0);
  EXPECT_EQ(ext.facts().total_entries, 2);
  small.external_cap = false;
  combined_index internal(small);
  EXPECT_EQ(internal.ingest(update("r1", {legacy("k1", 16), legacy("k2", 16)}, "a"), t0)
                .cap_evicted_lru,
            1);
}

// Recovery from an old single-index snapshot: split, then the per-tenant indexes evolve
// exactly like the combined one.
TEST(ShardedIndex, SplitTenantsThenEvolveLikeCombined) {
  for (std::int64_t max_entries : {std::int64_t{0}, std::int64_t{30}, std::int64_t{120}}) {
    for (std::uint64_t seed : {11u, 12u, 13u}) {
      const std::string trace =
          "cap " + std::to_string(max_entries) + " seed " + std::to_string(seed);
      index_options o;
      o.max_entries = max_entries;
      o.default_ttl = std::chrono::seconds(90);
      combined_index reference(o), to_split(o);
      history h(seed);
      combined_target b{to_split};
      {
        combined_target a{reference};
        h.run(a, b, 800, trace + " before split");
      }
      if (HasFatalFailure()) return;
      const global_facts before = to_split.facts();
      sharded_target s(o);
      auto parts = to_split.split_tenants(s.per);
      ASSERT_GT(parts.size(), 2u);
      for (std::size_t i = 1; i < parts.size(); ++i) EXPECT_LT(parts[i - 1].first, parts[i].first);
      s.adopt(std::move(parts));
      EXPECT_EQ(image(to_split.facts()), "0/0/0");
      EXPECT_EQ(to_split.canonical_dump().size(), 1u);  // only the "G|" line
      EXPECT_EQ(image(s.totals()), image(before));
      EXPECT_EQ(s.dump(), combined_target{reference}.dump());
      run_checked(h, reference, s, 1200, trace + " after split");
      if (HasFatalFailure()) return;
      check_sharded(s, reference);
    }
  }
}

std::string snapshot_of(const combined_index& idx) {
  std::string all;
  EXPECT_TRUE(write_snapshot(idx, [&](std::string_view c) {
    all.append(c);
    return true;
  }));
  return all;
}

bool load_into(combined_index& target, const std::string& bytes, std::size_t piece) {
  auto loader = combined_loader(target);
  std::string error;
  for (std::size_t off = 0; off < bytes.size(); off += piece) {
    if (!loader.feed(std::string_view(bytes).substr(off, piece), &error)) return false;
  }
  const bool ok = loader.finish(&error);
  if (ok) {
    EXPECT_TRUE(loader.finish(&error));  // a second finish adds nothing
  }
  return ok;
}

// Old single-index snapshot -> load -> split -> per-tenant actors; later each actor's own
// snapshot loads into an index that counts itself in the shared totals.
/// The options of the snapshot-recovery tests: a cap of 50 and a 90 s TTL.
index_options recovery_test_options() {
  index_options o;
  o.max_entries = 50;
  o.default_ttl = std::chrono::seconds(90);
  return o;
}

/// Runs `steps` of `h` on two combined indexes alike (the reference and the one to snapshot).
void run_both(history& h, combined_index& reference, combined_index& old, int steps) {
  combined_target a{reference}, b{old};
  h.run(a, b, steps, "before snapshot");
}

TEST(ShardedIndex, SnapshotRecoverySplitAndPerTenantSnapshots) {
  const index_options o = recovery_test_options();
  combined_index reference(o), old(o);
  history h(77);
  run_both(h, reference, old, 700);
  ASSERT_FALSE(HasFatalFailure());
  combined_index recovered(o);
  ASSERT_TRUE(load_into(recovered, snapshot_of(old), 13));
  // The runtime re-applies the policy store after loading (snapshots hold no policies).
  for (const auto& [t, p] : h.policies) recovered.set_tenant_policy(t, p);
  for (const auto& [t, q] : h.quotas) recovered.set_tenant_quota(t, q);
  sharded_target s(o);
  s.adopt(recovered.split_tenants(s.per));
  EXPECT_EQ(image(s.totals()), image(reference.facts()));
  run_checked(h, reference, s, 700, "after split");
  ASSERT_FALSE(HasFatalFailure());
  check_sharded(s, reference);

  // Restart of the sharded server: every tenant's snapshot loads into a fresh index with a
  // fresh shared total; the totals come out equal.
  ASSERT_GT(s.by_tenant.size(), 2u);
  sharded_target restarted(o);
  for (const auto& [t, idx] : s.by_tenant) {
    auto fresh = std::make_unique<combined_index>(restarted.per);
    ASSERT_TRUE(load_into(*fresh, snapshot_of(*idx), 7)) << t;
    EXPECT_EQ(image(fresh->facts()), image(idx->facts()));
    restarted.by_tenant.emplace(t, std::move(fresh));
  }
  EXPECT_EQ(image(restarted.totals()), image(s.totals()));
  EXPECT_EQ(image(restarted.sum()), image(s.totals()));
  EXPECT_EQ(restarted.dump(), s.dump());
  for (const auto& [t, p] : h.policies) restarted.set_policy(t, p);
  for (const auto& [t, q] : h.quotas) restarted.set_quota(t, q);
  run_checked(h, reference, restarted, 500, "after restart");
  ASSERT_FALSE(HasFatalFailure());
  check_sharded(restarted, reference);

  // A failed load adds nothing to the shared totals.
  const global_facts totals = restarted.totals();
  std::string bytes = snapshot_of(*restarted.by_tenant.begin()->second);
  bytes.resize(bytes.size() - 1);
  combined_index broken(restarted.per);
  EXPECT_FALSE(load_into(broken, bytes, 1 << 20));
  EXPECT_EQ(image(restarted.totals()), image(totals));
}

// Old single-index snapshot loaded straight into one index per tenant (the v1 reader of the
// server snapshot): the same totals and the same evolution as the combined index.
TEST(ShardedIndex, SplitLoadOfACombinedSnapshotEvolvesLikeCombined) {
  for (std::size_t piece : {std::size_t{1}, std::size_t{13}, std::size_t{1} << 20}) {
    const index_options o = recovery_test_options();
    combined_index reference(o), old(o);
    history h(78);
    run_both(h, reference, old, 700);
    ASSERT_FALSE(HasFatalFailure());
    sharded_target s(o);
    std::vector<std::pair<std::string, std::unique_ptr<combined_index>>> parts;
    auto loader = combined_split_loader([&](std::string_view tenant) {
      auto idx = std::make_unique<combined_index>(s.per);
      const std::string name(tenant);
      if (auto it = h.policies.find(name); it != h.policies.end())
        idx->set_tenant_policy(name, it->second);
      if (auto it = h.quotas.find(name); it != h.quotas.end()) idx->set_tenant_quota(name, it->second);
      parts.emplace_back(name, std::move(idx));
      return parts.back().second.get();
    });
    const std::string bytes = snapshot_of(old);
    std::string error;
    for (std::size_t off = 0; off < bytes.size(); off += piece)
      ASSERT_TRUE(loader.feed(std::string_view(bytes).substr(off, piece), &error)) << error;
    ASSERT_TRUE(loader.finish(&error)) << error;
    ASSERT_GT(parts.size(), 2u);
    s.adopt(std::move(parts));
    EXPECT_EQ(image(s.totals()), image(reference.facts()));
    EXPECT_EQ(image(s.sum()), image(reference.facts()));
    EXPECT_EQ(s.dump(), combined_target{reference}.dump());
    run_checked(h, reference, s, 700, "after split load");
    ASSERT_FALSE(HasFatalFailure());
    check_sharded(s, reference);
  }
}

TEST(ShardedIndex, SplitLoadRefusesADuplicateTenantAndACorruptStream) {
  combined_index combined;
  cache_state_update u;
  u.tenant_id = "a";
  u.model_id = "m";
  u.replica_id = "r";
  u.hash_scheme = "vllm";
  prefix_entry p;
  p.prefix_hash = std::string(8, 'x');
  p.token_count = 16;
  u.prefixes.push_back(p);
  (void)combined.ingest(u, 1'000'000);
  std::string bytes = snapshot_of(combined);
  std::vector<std::unique_ptr<combined_index>> made;
  auto target_of = [&](std::string_view) {
    made.push_back(std::make_unique<combined_index>());
    return made.back().get();
  };
  {
    auto loader = combined_split_loader(target_of);
    std::string error;
    ASSERT_TRUE(loader.feed(bytes, &error)) << error;
    EXPECT_TRUE(loader.finish(&error)) << error;
  }
  bytes[bytes.size() / 2] ^= 0x40;
  auto loader = combined_split_loader(target_of);
  std::string error;
  EXPECT_FALSE(loader.feed(bytes, &error) && loader.finish(&error));
  EXPECT_FALSE(error.empty());
}

TEST(ShardedIndex, DefaultOptionsKeepOwnFactsAndInternalCap) {
  // Without `shared`, nothing is published; facts() stays the index's own either way.
  shared_facts shared;
  index_options o;
  o.max_entries = 3;
  combined_index plain(o);
  o.shared = &shared;
  combined_index counted(o);
  for (combined_index* idx : {&plain, &counted}) {
    idx->ingest(update("r1", {legacy("k1", 16), legacy("k2", 16)}, "a", "m", "vllm", t0 + 1), t0);
    idx->ingest(update("r2", {legacy("k1", 16), legacy("k3", 16)}, "b", "m", "vllm", t0 + 2), t0);
  }
  EXPECT_EQ(image(plain.facts()), "3/0/3");  // internal cap (external_cap false) evicted one
  EXPECT_EQ(image(counted.facts()), "3/0/3");
  EXPECT_EQ(shared.total_entries.load(), 3);
  EXPECT_EQ(shared.total_keys.load(), 3);
  counted.apply_event(cache_event{}, t0);
  counted.apply_event(cleared("r2", "b"), t0 + 5);
  EXPECT_EQ(image(counted.facts()), image(global_facts{shared.total_entries.load(),
                                                       shared.reserved_entries.load(),
                                                       shared.total_keys.load()}));
  // Splitting a shared index moves its facts from it to the new ones (same shared here).
  index_options per = o;
  per.external_cap = true;
  const global_facts before = counted.facts();
  auto parts = counted.split_tenants(per);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].first, "a");
  EXPECT_EQ(parts[1].first, "b");
  EXPECT_EQ(image(global_facts{shared.total_entries.load(), shared.reserved_entries.load(),
                               shared.total_keys.load()}),
            image(before));
  // The moved partition still credits and evicts through its new index.
  EXPECT_FALSE(parts[0].second->find_entry("a", "m", "vllm", "", "k1", "r1"));  // cap victim
  auto l = parts[0].second->lookup(exact("k2", 16, "a"), policy::resolved_policy{}, t0 + 6);
  EXPECT_EQ(l.strategy, lookup_strategy::prefix_match);
  EXPECT_EQ(parts[0].second->find_entry("a", "m", "vllm", "", "k2", "r1")->token_count, 16);
  // Empty source: lookups fall back on shared totals only if it has `shared` (it does).
  EXPECT_EQ(counted.lookup(exact("k1", 16, "a"), policy::resolved_policy{}, t0).strategy,
            lookup_strategy::unknown_tenant);
}

TEST(CapMerge, PickCapStepEvictsFromTheFirstVictimBoundedByTheNextOtherIndex) {
  // heads: index 0 (count 1, t=5), index 1 none, index 2 (count 0, t=9), index 3 (count 0, t=7)
  std::vector<std::optional<cap_head>> heads = {
      cap_head{1, 5, "a"}, std::nullopt, cap_head{0, 9, "c"}, cap_head{0, 7, "d"}};
  cap_step step = pick_cap_step(heads);
  EXPECT_EQ(step.best, 3u);
  ASSERT_TRUE(step.bound.has_value());
  EXPECT_EQ(step.bound->tenant, "c");
  // Equal (count, last_seen): the tenant name decides.
  step = pick_cap_step({cap_head{0, 7, "z"}, cap_head{0, 7, "b"}});
  EXPECT_EQ(step.best, 1u);
  EXPECT_EQ(step.bound->tenant, "z");
  // One index with a victim: no bound; none at all: no step.
  step = pick_cap_step({std::nullopt, cap_head{2, 1, "x"}});
  EXPECT_EQ(step.best, 1u);
  EXPECT_FALSE(step.bound.has_value());
  EXPECT_EQ(pick_cap_step({std::nullopt}).best, cap_step::none);
  EXPECT_EQ(pick_cap_step({}).best, cap_step::none);
}

}  // namespace
}  // namespace ic::index
