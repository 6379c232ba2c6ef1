// Index-layer scenarios of spec/lookup.md §6.7 (eviction, LFU, quota: [index] rows), the
// producer and state views, and the changes observers get. §6.1–§6.6 are in cache_index_test.cpp.
#include "index/testing/combined_index.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "index/test_support.hpp"

namespace ic::index {
namespace {

using namespace ic::index::testing;
using std::chrono::hours;
using std::chrono::minutes;

const policy::resolved_policy no_policy = policy::resolved_policy::no_policy();

// ------------------------------------------------------- §6.7 eviction, LFU, quota

TEST(CacheIndex, TtlSweepRemovesExpiredEntries) {  // S102
  combined_index idx;
  idx.set_tenant_policy("t", with_ttl(minutes(10)));
  idx.ingest(update("r", {legacy("p", 8)}), t0);
  EXPECT_EQ(idx.entries_by_model().size(), 1u);
  auto res = idx.sweep(t0 + 11 * minute);
  EXPECT_EQ(res.entries_removed_lru, 1);
  EXPECT_EQ(idx.facts().total_entries, 0);
  EXPECT_TRUE(idx.entries_by_model().empty());
}

TEST(CacheIndex, GlobalCapEvictsOldestEntry) {  // S103
  index_options o;
  o.max_entries = 2;
  combined_index idx(o);
  idx.ingest(update("r", {legacy("old", 8)}), t0);
  idx.ingest(update("r", {legacy("mid", 8)}), t0 + minute);
  auto res = idx.ingest(update("r", {legacy("new", 8)}), t0 + 2 * minute);
  EXPECT_EQ(res.cap_evicted_lru, 1);
  EXPECT_EQ(idx.facts().total_entries, 2);
  EXPECT_FALSE(idx.find_entry("t", "m", "vllm", "", "old", "r"));
  EXPECT_TRUE(idx.find_entry("t", "m", "vllm", "", "mid", "r"));
}

TEST(CacheIndex, EventsRemoveReplicaFromKeys) {  // S104
  combined_index idx;
  idx.ingest(update("r1", {legacy("p1", 8), legacy("p2", 8)}), t0);
  idx.ingest(update("r2", {legacy("p1", 8)}), t0);
  idx.apply_event(evicted("r1", "p1"), t0);
  EXPECT_EQ(ids(idx.lookup(exact("p1"), no_policy, t0)), std::vector<std::string>{"r2"});
  idx.apply_event(cleared("r1"), t0);
  EXPECT_TRUE(idx.lookup(exact("p2"), no_policy, t0).scores.empty());
}

TEST(CacheIndex, PerTenantTtl) {  // S105
  combined_index idx(index_options{1'000'000, hours(1)});
  idx.set_tenant_policy("tenant-short", with_ttl(minutes(5)));
  idx.ingest(update("r", {legacy("p", 8)}, "tenant-short"), t0);
  idx.ingest(update("r", {legacy("p", 8)}, "tenant-long"), t0);
  const micros now = t0 + 10 * minute;
  EXPECT_TRUE(idx.lookup(exact("p", 0, "tenant-short"), with_ttl(minutes(5)), now).scores.empty());
  EXPECT_EQ(idx.lookup(exact("p", 0, "tenant-long"), with_ttl(hours(1)), now).scores.size(), 1u);
  idx.sweep(now);
  EXPECT_EQ(idx.facts().total_entries, 1);
}

TEST(CacheIndex, ZeroPolicyTtlFallsBackToGlobal) {  // S106
  combined_index idx(index_options{1'000'000, hours(1)});
  idx.set_tenant_policy("t", with_ttl(std::chrono::nanoseconds(0)));
  idx.ingest(update("r", {legacy("p", 8)}), t0);
  idx.sweep(t0 + 30 * minute);
  EXPECT_EQ(idx.facts().total_entries, 1);
  EXPECT_GT(freshness(t0 + 30 * minute, t0, hours(1)), 0.0f);
}

void credit_exact(combined_index& idx, const std::string& key, const policy::resolved_policy& pol,
                  int times, micros now, std::string_view tenant = "t") {
  for (int i = 0; i < times; ++i) {
    auto r = idx.lookup(exact(key, 0, tenant), pol, now);
    idx.credit_lfu(tenant, r.scores);
  }
}

TEST(CacheIndex, LfuCapEvictsLeastUsed) {  // S107
  index_options o;
  o.max_entries = 3;
  combined_index idx(o);
  idx.set_tenant_policy("t", lfu());
  idx.ingest(update("r", {legacy("hot", 8)}), t0);
  idx.ingest(update("r", {legacy("warm", 8)}), t0 + 1);
  idx.ingest(update("r", {legacy("cold", 8)}), t0 + 2);
  credit_exact(idx, "hot", lfu(), 5, t0 + 3);
  credit_exact(idx, "warm", lfu(), 2, t0 + 3);
  auto res = idx.ingest(update("r", {legacy("new", 8)}), t0 + 4);
  EXPECT_EQ(res.cap_evicted_lfu, 1);
  EXPECT_FALSE(idx.find_entry("t", "m", "vllm", "", "cold", "r"));
  EXPECT_TRUE(idx.find_entry("t", "m", "vllm", "", "new", "r"));
}

TEST(CacheIndex, LfuTieFallsBackToAge) {  // S108
  index_options o;
  o.max_entries = 2;
  combined_index idx(o);
  idx.set_tenant_policy("t", lfu());
  idx.ingest(update("r", {legacy("older", 8)}), t0);
  idx.ingest(update("r", {legacy("newer", 8)}), t0 + minute);
  idx.ingest(update("r", {legacy("trigger", 8)}), t0 + 2 * minute);
  EXPECT_FALSE(idx.find_entry("t", "m", "vllm", "", "older", "r"));
  EXPECT_TRUE(idx.find_entry("t", "m", "vllm", "", "newer", "r"));
}

std::string cap_victim(policy::eviction_mode mode) {
  index_options o;
  o.max_entries = 3;
  combined_index idx(o);
  policy::resolved_policy pol;
  pol.eviction = mode;
  idx.set_tenant_policy("t", pol);
  idx.ingest(update("r", {legacy("A", 8)}), t0);
  idx.ingest(update("r", {legacy("B", 8)}), t0 + 1);
  idx.ingest(update("r", {legacy("C", 8)}), t0 + 2);
  credit_exact(idx, "A", lfu(), 9, t0 + 3);
  credit_exact(idx, "B", lfu(), 3, t0 + 3);
  credit_exact(idx, "C", lfu(), 5, t0 + 3);
  idx.ingest(update("r", {legacy("D", 8)}), t0 + 4);
  for (auto k : {"A", "B", "C", "D"}) {
    if (!idx.find_entry("t", "m", "vllm", "", k, "r")) return k;
  }
  return "";
}

TEST(CacheIndex, CapVictimDependsOnAlgorithm) {  // S109
  EXPECT_EQ(cap_victim(policy::eviction_mode::lru), "A");
  EXPECT_EQ(cap_victim(policy::eviction_mode::lfu), "D");
}

TEST(CacheIndex, CreditsAccumulateExactly) {  // S110
  combined_index idx;
  idx.set_tenant_policy("t", lfu());
  idx.ingest(update("r", {legacy("p", 8)}), t0);
  credit_exact(idx, "p", lfu(), 50 * 200, t0);
  EXPECT_EQ(idx.find_entry("t", "m", "vllm", "", "p", "r")->access_count, 10'000);
}

TEST(CacheIndex, OnlyLfuTenantsRecordHits) {  // S111
  combined_index idx;
  idx.set_tenant_policy("lfu-t", lfu());
  idx.ingest(update("r", {legacy("p", 8)}, "lru-t"), t0);
  idx.ingest(update("r", {legacy("p", 8)}, "lfu-t"), t0);
  credit_exact(idx, "p", no_policy, 5, t0, "lru-t");
  credit_exact(idx, "p", lfu(), 5, t0, "lfu-t");
  EXPECT_EQ(idx.find_entry("lru-t", "m", "vllm", "", "p", "r")->access_count, 0);
  EXPECT_EQ(idx.find_entry("lfu-t", "m", "vllm", "", "p", "r")->access_count, 5);
}

TEST(CacheIndex, ReingestKeepsAccessCount) {  // S112
  combined_index idx;
  idx.set_tenant_policy("t", lfu());
  idx.ingest(update("r", {legacy("p", 8)}), t0);
  credit_exact(idx, "p", lfu(), 3, t0);
  idx.ingest(update("r", {legacy("p", 8)}), t0 + minute);
  EXPECT_EQ(idx.find_entry("t", "m", "vllm", "", "p", "r")->access_count, 3);
}

TEST(CacheIndex, ChainCreditHitsEveryBlockOfTheRun) {  // S113
  combined_index idx;
  idx.set_tenant_policy("t", lfu());
  idx.ingest(update("r", {chain({"b1", "b2", "b3", "x4"}, 16)}), t0);
  for (int i = 0; i < 2; ++i) {
    auto r = idx.lookup(chain_query({"b1", "b2", "b3"}, 16), lfu(), t0);
    idx.credit_lfu("t", r.scores);
  }
  for (auto b : {"b1", "b2", "b3"}) {
    EXPECT_EQ(idx.find_entry("t", "m", "vllm", "", b, "r")->access_count, 2) << b;
  }
  EXPECT_EQ(idx.find_entry("t", "m", "vllm", "", "x4", "r")->access_count, 0);
}

TEST(CacheIndex, EvictionCountersByAlgorithmAndReason) {  // S114
  index_options o;
  o.max_entries = 1;
  combined_index lfu_idx(o);
  lfu_idx.set_tenant_policy("t", lfu());
  lfu_idx.ingest(update("r", {legacy("a", 8)}), t0);
  EXPECT_EQ(lfu_idx.ingest(update("r", {legacy("b", 8)}), t0 + 1).cap_evicted_lfu, 1);
  EXPECT_EQ(lfu_idx.sweep(t0 + 31 * minute).entries_removed_lfu, 1);
  combined_index lru_idx(o);
  lru_idx.ingest(update("r", {legacy("a", 8)}), t0);
  EXPECT_EQ(lru_idx.ingest(update("r", {legacy("b", 8)}), t0 + 1).cap_evicted_lru, 1);
}

TEST(CacheIndex, QuotaEvictsWholeOldestKey) {  // S115
  combined_index idx;
  idx.set_tenant_quota("t", 2);
  std::int64_t evicted_keys = 0;
  evicted_keys += idx.ingest(update("r1", {legacy("a", 8)}), t0).quota_evicted_keys;
  evicted_keys += idx.ingest(update("r2", {legacy("a", 8)}), t0 + 1).quota_evicted_keys;
  evicted_keys += idx.ingest(update("r1", {legacy("b", 8)}), t0 + 2).quota_evicted_keys;
  evicted_keys += idx.ingest(update("r1", {legacy("c", 8)}), t0 + 3).quota_evicted_keys;
  EXPECT_EQ(evicted_keys, 1);
  EXPECT_FALSE(idx.find_entry("t", "m", "vllm", "", "a", "r1"));
  EXPECT_FALSE(idx.find_entry("t", "m", "vllm", "", "a", "r2"));
  EXPECT_TRUE(idx.find_entry("t", "m", "vllm", "", "b", "r1"));
  EXPECT_TRUE(idx.find_entry("t", "m", "vllm", "", "c", "r1"));
}

TEST(CacheIndex, QuotaEvictsInAgeOrder) {  // S116
  combined_index idx;
  idx.set_tenant_quota("t", 3);
  std::int64_t n = 0;
  int i = 0;
  for (auto k : {"a", "b", "c", "d", "e"}) {
    n += idx.ingest(update("r", {legacy(k, 8)}), t0 + (i++) * minute).quota_evicted_keys;
  }
  EXPECT_EQ(n, 2);
  EXPECT_FALSE(idx.find_entry("t", "m", "vllm", "", "a", "r"));
  EXPECT_FALSE(idx.find_entry("t", "m", "vllm", "", "b", "r"));
  EXPECT_EQ(idx.tenant_keys("t"), 3);
}

TEST(CacheIndex, QuotaUnderLimitOrOtherTenantEvictsNothing) {  // S117
  combined_index idx;
  idx.set_tenant_quota("t", 10);
  idx.set_tenant_quota("other", 1);
  for (auto k : {"a", "b", "c"}) idx.ingest(update("r", {legacy(k, 8)}), t0);
  for (auto k : {"a", "b", "c"}) idx.ingest(update("r", {legacy(k, 8)}, "free"), t0);
  EXPECT_EQ(idx.tenant_keys("t"), 3);
  EXPECT_EQ(idx.tenant_keys("free"), 3);
}

TEST(CacheIndex, QuotaOnlyAffectsItsTenant) {  // S118
  combined_index idx;
  idx.set_tenant_quota("team-a", 2);
  int i = 0;
  for (auto k : {"a", "b", "c", "d"}) {
    idx.ingest(update("r", {legacy(k, 8)}, "team-a"), t0 + i);
    idx.ingest(update("r", {legacy(k, 8)}, "team-b"), t0 + i++);
  }
  EXPECT_EQ(idx.tenant_keys("team-a"), 2);
  EXPECT_EQ(idx.tenant_keys("team-b"), 4);
}

TEST(CacheIndex, ZeroQuotaAdmitsNothing) {  // S119
  combined_index idx;
  idx.set_tenant_quota("t", 0);
  auto res = idx.ingest(update("r", {legacy("a", 8), legacy("b", 8)}), t0);
  EXPECT_EQ(res.quota_evicted_keys, 2);
  EXPECT_EQ(idx.tenant_keys("t"), 0);
}

TEST(CacheIndex, QuotaTieBreaksOnSmallerKey) {  // S120
  struct variant {
    cache_state_update first, second;
    std::string victim_model, victim_scheme, victim_adapter, victim_hash;
  };
  auto mk = [](std::string model, std::string scheme, std::string adapter, std::string hash) {
    auto u = update("r", {legacy(std::move(hash), 8, 0, std::move(adapter))}, "t", std::move(model),
                    std::move(scheme), t0);
    return u;
  };
  std::vector<variant> cases = {
      {mk("m-b", "s", "", "p"), mk("m-a", "s", "", "p"), "m-a", "s", "", "p"},
      {mk("m", "s-b", "", "p"), mk("m", "s-a", "", "p"), "m", "s-a", "", "p"},
      {mk("m", "s", "ad-b", "p"), mk("m", "s", "ad-a", "p"), "m", "s", "ad-a", "p"},
      {mk("m", "s", "", "pb"), mk("m", "s", "", "pa"), "m", "s", "", "pa"},
  };
  for (const auto& c : cases) {
    combined_index idx;
    idx.set_tenant_quota("t", 1);
    idx.ingest(c.first, t0);
    idx.ingest(c.second, t0);
    EXPECT_EQ(idx.tenant_keys("t"), 1);
    EXPECT_FALSE(
        idx.find_entry("t", c.victim_model, c.victim_scheme, c.victim_adapter, c.victim_hash, "r"))
        << c.victim_model << c.victim_scheme << c.victim_adapter << c.victim_hash;
  }
}

TEST(CacheIndex, ReservedTenantIsOutsideCapAndAggregates) {  // S121
  index_options o;
  o.max_entries = 1;
  combined_index idx(o);
  idx.ingest(update("__probe-x", {legacy("probe", 16)}, std::string(reserved_tenant)), t0, nullptr,
             input_origin::probe);
  idx.ingest(update("r", {legacy("real", 8)}), t0 + 1);
  EXPECT_TRUE(idx.find_entry("t", "m", "vllm", "", "real", "r"));
  EXPECT_EQ(idx.facts().reserved_entries, 1);
  auto snap = idx.snapshot();
  EXPECT_EQ(snap.total_prefixes, 1);
  ASSERT_EQ(snap.tenants.size(), 1u);
  EXPECT_EQ(snap.tenants[0].tenant_id, "t");
  auto gauge = idx.entries_by_model();
  ASSERT_EQ(gauge.size(), 1u);
  EXPECT_EQ(gauge[0].second, 1);
  EXPECT_EQ(idx.lookup(exact("probe", 0, reserved_tenant), no_policy, t0 + 1).strategy,
            lookup_strategy::prefix_match);
}

TEST(CacheIndex, CapOrderBreaksTiesByTenantThenKeyThenReplica) {
  index_options o;
  o.max_entries = 3;
  combined_index idx(o);
  idx.ingest(update("r2", {legacy("k", 8)}, "tb"), t0);
  idx.ingest(update("r1", {legacy("k", 8)}, "tb"), t0);
  idx.ingest(update("r1", {legacy("k", 8)}, "ta"), t0);
  idx.ingest(update("r1", {legacy("j", 8)}, "tb"), t0 + 1);
  EXPECT_FALSE(idx.find_entry("ta", "m", "vllm", "", "k", "r1"));
  idx.ingest(update("r1", {legacy("z", 8)}, "tc"), t0 + 2);
  EXPECT_FALSE(idx.find_entry("tb", "m", "vllm", "", "k", "r1"));
  EXPECT_TRUE(idx.find_entry("tb", "m", "vllm", "", "k", "r2"));
}

TEST(CacheIndex, CapStaysExactAcrossManyOverCapIngests) {
  index_options o;
  o.max_entries = 100;
  combined_index idx(o);
  for (int i = 0; i < 1000; ++i) {
    idx.ingest(update("r" + std::to_string(i % 3), {legacy("k" + std::to_string(i), 8)}), t0 + i);
  }
  EXPECT_EQ(idx.facts().total_entries, 100);
  for (int i = 900; i < 1000; ++i) {
    EXPECT_TRUE(
        idx.find_entry("t", "m", "vllm", "", "k" + std::to_string(i), "r" + std::to_string(i % 3)));
  }
}

// ------------------------------------------------------------ producer / state views

TEST(CacheIndex, GetCacheStateReportsStatsAndKeys) {  // H10
  combined_index idx;
  auto u = update("replica-a", {legacy("p", 10)});
  replica_stats s = stats(0.5f, 0.0f, 2048);
  s.t2_hit_tokens = 600;
  s.t2_query_tokens = 1000;
  u.stats = s;
  idx.ingest(u, t0);
  auto v = idx.get_cache_state("t", "m");
  EXPECT_EQ(v.total_prefixes, 1);
  EXPECT_EQ(v.hot_prefixes, 0);
  ASSERT_EQ(v.replicas.size(), 1u);
  EXPECT_EQ(v.replicas[0].cache_memory_bytes, 2048);
  EXPECT_EQ(v.replicas[0].t2_hit_tokens, 600);
  EXPECT_EQ(v.replicas[0].t2_query_tokens, 1000);
}

TEST(CacheIndex, ReservedTenantProducerInputIsRefused) {  // H11
  combined_index idx;
  std::string probe(reserved_tenant);
  idx.ingest(update("__probe", {legacy("p", 16)}, probe), t0, nullptr, input_origin::probe);
  auto res = idx.ingest(update("x", {legacy("q", 16)}, probe), t0);
  EXPECT_EQ(res.first_drop_reason, drop_reason::reserved_tenant);
  EXPECT_EQ(res.dropped_reserved_tenant, 1);
  cache_event ev = cleared("__probe");
  ev.tenant_id = probe;
  EXPECT_FALSE(idx.apply_event(ev, t0).applied);
  EXPECT_EQ(idx.facts().reserved_entries, 1);
  EXPECT_TRUE(idx.get_cache_state(probe, "m").replicas.empty());
  EXPECT_EQ(idx.get_cache_state(probe, "m").total_prefixes, 0);
  EXPECT_TRUE(idx.apply_event(ev, t0, nullptr, input_origin::probe).applied);
  EXPECT_EQ(idx.facts().reserved_entries, 0);
}

TEST(CacheIndex, PublishedEvictionLeavesOtherHolder) {  // H12
  combined_index idx;
  idx.ingest(update("a", {legacy("p", 10)}), t0);
  idx.ingest(update("b", {legacy("p", 10)}), t0);
  idx.apply_event(evicted("a", "p"), t0);
  EXPECT_EQ(ids(idx.lookup(exact("p"), no_policy, t0)), std::vector<std::string>{"b"});
}

TEST(CacheIndex, ColdStartCarveOutCountsReservedTenant) {  // §7.7
  combined_index idx;
  idx.ingest(update("__probe", {legacy("p", 16)}, std::string(reserved_tenant)), t0, nullptr,
             input_origin::probe);
  EXPECT_EQ(idx.lookup(exact("p", 0, "t"), no_policy, t0).strategy,
            lookup_strategy::unknown_tenant);
}

TEST(CacheIndex, UnknownTierValuesReportUnspecified) {  // H4 (index part)
  combined_index idx;
  idx.ingest(update("r99", {legacy("p", 128, 99)}), t0);
  idx.ingest(update("rneg", {legacy("q", 128, -1)}), t0);
  idx.ingest(update("r2", {legacy("s", 128, 2)}), t0);
  EXPECT_EQ(idx.lookup(exact("p"), no_policy, t0).scores.at(0).score.tier, 0);
  EXPECT_EQ(idx.lookup(exact("q"), no_policy, t0).scores.at(0).score.tier, 0);
  EXPECT_EQ(idx.lookup(exact("s"), no_policy, t0).scores.at(0).score.tier, 2);
}

TEST(CacheIndex, ZeroTimestampMeansNowAndExplicitTimestampIsTrusted) {
  combined_index idx;
  idx.ingest(update("r", {legacy("p", 8)}), t0);
  idx.ingest(update("r", {legacy("q", 8)}, "t", "m", "vllm", t0 - 40 * minute), t0);
  EXPECT_EQ(idx.find_entry("t", "m", "vllm", "", "p", "r")->last_seen, t0);
  EXPECT_TRUE(idx.lookup(exact("q"), no_policy, t0).scores.empty());
}

TEST(CacheIndex, EmptyPrefixHashIsIndexedUnderEmptyKey) {  // §7.6
  combined_index idx;
  idx.ingest(update("r", {legacy("", 8)}), t0);
  EXPECT_EQ(idx.tenant_keys("t"), 1);
  EXPECT_EQ(idx.lookup(exact(""), no_policy, t0).strategy, lookup_strategy::prefix_match);
}

TEST(CacheIndex, EightByteAndOtherLengthHashesBothWork) {
  combined_index idx;
  std::string h8("\x01\x02\x03\x04\x05\x06\x07\x08", 8);
  std::string h32(32, 'x');
  idx.ingest(update("r", {chain({h8, h32}, 16)}), t0);
  EXPECT_EQ(idx.lookup(chain_query({h8, h32}, 16), no_policy, t0).scores.at(0).score.matched_tokens,
            32);
  idx.apply_event(evicted("r", h32), t0);
  EXPECT_EQ(idx.lookup(chain_query({h8, h32}, 16), no_policy, t0).scores.at(0).score.matched_tokens,
            16);
}

// ------------------------------------------------------------- changes for observers

TEST(CacheIndex, ChangesReportAdditionsOnlyOnCreation) {
  combined_index idx;
  change_log log;
  idx.ingest(update("r", {chain({"b1", "b2"}, 16)}), t0, &log);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].type, event_type::prefix_added);
  EXPECT_EQ(log[0].prefix_hash, "b1");
  EXPECT_EQ(log[0].tenant_id, "t");
  EXPECT_EQ(log[0].replica_id, "r");
  EXPECT_EQ(log[0].timestamp_us, t0);
  log.clear();
  idx.ingest(update("r", {chain({"b1", "b2"}, 16)}), t0 + 1, &log);
  EXPECT_TRUE(log.empty());
}

TEST(CacheIndex, ChangesReportEvictionCauses) {
  index_options o;
  o.max_entries = 2;
  combined_index idx(o);
  change_log log;
  idx.ingest(update("r", {legacy("a", 8), legacy("b", 8)}), t0, &log);
  idx.ingest(update("r", {legacy("c", 8)}), t0 + 5, &log);
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[3].type, event_type::prefix_evicted);
  EXPECT_EQ(log[3].cause, change_cause::cap);
  EXPECT_EQ(log[3].prefix_hash, "a");
  EXPECT_EQ(log[3].timestamp_us, t0 + 5);
  log.clear();
  idx.apply_event(evicted("r", "b"), t0 + 6, &log);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].cause, change_cause::event);
  log.clear();
  idx.sweep(t0 + 31 * minute, &log);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].cause, change_cause::ttl);
  EXPECT_EQ(log[0].timestamp_us, t0 + 31 * minute);
  log.clear();
  idx.set_tenant_quota("t", 0);
  idx.ingest(update("r", {legacy("q", 8)}), t0 + 32 * minute, &log);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[1].cause, change_cause::quota);
}

TEST(CacheIndex, ChangesReportClearsAndReplicaUpdates) {
  combined_index idx;
  change_log log;
  auto u = update("r", {legacy("a", 8)});
  u.stats = stats(0.5f);
  idx.ingest(u, t0, &log);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[1].type, event_type::replica_updated);
  log.clear();
  idx.apply_event(cleared("r"), t0 + 1, &log);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].type, event_type::prefix_evicted);
  EXPECT_EQ(log[1].type, event_type::all_cleared);
  EXPECT_EQ(log[1].model_id, "m");
  EXPECT_TRUE(idx.get_cache_state("t", "m").replicas.empty());
}

TEST(CacheIndex, ReservedTenantChangesAreNotRecorded) {
  combined_index idx;
  change_log log;
  idx.ingest(update("__probe", {legacy("p", 16)}, std::string(reserved_tenant)), t0, &log,
             input_origin::probe);
  EXPECT_TRUE(log.empty());
}

TEST(CacheIndex, SnapshotAggregatesPerTenantReplica) {
  combined_index idx;
  auto u = update("r1", {legacy("a", 8), legacy("b", 8)}, "team-a");
  u.stats = stats(0.5f, 0.1f, 100);
  idx.ingest(u, t0);
  idx.ingest(update("r2", {legacy("a", 8)}, "team-a"), t0 + 5);
  idx.ingest(stats_only("r3", stats(0.25f), "team-b"), t0);
  auto s = idx.snapshot();
  EXPECT_EQ(s.total_prefixes, 2);
  ASSERT_EQ(s.replicas.size(), 3u);
  EXPECT_EQ(s.replicas[0].replica_id, "r1");
  EXPECT_EQ(s.replicas[0].prefix_count, 2);
  EXPECT_TRUE(s.replicas[0].stats_reported);
  EXPECT_EQ(s.replicas[0].last_update, t0);
  EXPECT_EQ(s.replicas[1].last_event_at, t0 + 5);
  EXPECT_FALSE(s.replicas[1].last_update.has_value());
  EXPECT_EQ(s.replicas[2].tenant, "team-b");
  EXPECT_EQ(s.replicas[2].prefix_count, 0);
  ASSERT_EQ(s.tenants.size(), 2u);
  EXPECT_EQ(s.tenants[0].index_entries, 2);
  EXPECT_FLOAT_EQ(s.tenants[0].hit_rate, 0.5f);
  EXPECT_TRUE(s.tenants[1].hit_rate_reported);
}

TEST(CacheIndex, MemoryPerSingleReplicaEntryStaysCompact) {
  index_options o;
  o.max_entries = 0;
  combined_index idx(o);
  constexpr int n = 20000;
  for (int i = 0; i < n; ++i) {
    std::string h(8, '\0');
    for (int b = 0; b < 8; ++b) h[b] = static_cast<char>((i * 2654435761u) >> (b * 4));
    h[0] = static_cast<char>(i >> 8);
    h[1] = static_cast<char>(i);
    idx.ingest(update("r", {legacy(h, 8)}), t0 + i / 64);
  }
  EXPECT_EQ(idx.facts().total_entries, n);
  auto m = idx.memory_usage();
  EXPECT_LE(m.key_records + m.hash_slots + m.replica_arrays, static_cast<std::size_t>(n) * 48);
}


// The server gives LFU credit after the lookup, possibly after later mutations: a credit whose
// key slot was freed and reused by another key must not land on the new key.
TEST(CacheIndex, StaleLfuCreditSkipsARecycledKeySlot) {
  combined_index idx;
  policy::resolved_policy lfu_policy;
  lfu_policy.eviction = policy::eviction_mode::lfu;
  idx.set_tenant_policy("t", lfu_policy);
  const micros t = 1'700'000'000'000'000;
  idx.ingest(update("r1", {legacy("a", 8)}), t);
  auto looked = idx.lookup(exact("a", 8), lfu_policy, t);
  ASSERT_FALSE(looked.scores.empty());
  ASSERT_FALSE(looked.scores[0].hits.empty());
  // r1 is cleared (key "a" freed) and then reports "b", which takes the freed slot.
  idx.apply_event(cleared("r1"), t + 1);
  idx.ingest(update("r1", {legacy("b", 8)}), t + 2);
  idx.credit_lfu("t", looked.scores);
  ASSERT_TRUE(idx.find_entry("t", "m", "vllm", "", "b", "r1").has_value());
  EXPECT_EQ(idx.find_entry("t", "m", "vllm", "", "b", "r1")->access_count, 0);
  // A fresh credit still counts.
  idx.credit_lfu("t", idx.lookup(exact("b", 8), lfu_policy, t + 3).scores);
  EXPECT_EQ(idx.find_entry("t", "m", "vllm", "", "b", "r1")->access_count, 1);
}

}  // namespace
}  // namespace ic::index
