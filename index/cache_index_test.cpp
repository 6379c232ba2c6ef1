// Index-layer scenarios of spec/lookup.md §6.1–§6.6 ([index] rows), plus extensions.md §4–§5.
// §6.7 (eviction, LFU, quota), the state views and observer changes: cache_index_eviction_test.cpp.
#include "index/testing/combined_index.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "index/test_support.hpp"

namespace ic::index {
namespace {

using namespace ic::index::testing;
using std::chrono::hours;
using std::chrono::minutes;

const policy::resolved_policy no_policy = policy::resolved_policy::no_policy();

// ------------------------------------------------------------------ §6.1 ingest / matching

TEST(CacheIndex, ExactMatchRanksByTokensAndRefreshReorders) {  // S1
  combined_index idx;
  auto pol = with_ttl(hours(1));
  idx.ingest(update("a", {legacy("p1", 100)}), t0);
  idx.ingest(update("b", {legacy("p1", 50)}), t0);
  idx.ingest(update("c", {legacy("decoy", 1)}), t0);
  auto r = idx.lookup(exact("p1"), pol, t0);
  ASSERT_EQ(ids(r), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.scores[0].score.matched_tokens, 100);
  idx.ingest(update("b", {legacy("p1", 50)}), t0 + 50 * minute);
  r = idx.lookup(exact("p1"), pol, t0 + 50 * minute);
  ASSERT_EQ(ids(r), (std::vector<std::string>{"b", "a"}));
  EXPECT_NEAR(r.scores[1].score.estimated_cache_hit_prob, 1.0 / 6.0, 1e-4);
}

TEST(CacheIndex, RepeatedIdenticalUpdateIsIdempotent) {  // S2
  combined_index idx;
  for (int i = 0; i < 3; ++i) idx.ingest(update("r", {legacy("p", 64)}), t0);
  EXPECT_EQ(idx.lookup(exact("p"), no_policy, t0).scores.size(), 1u);
  EXPECT_EQ(idx.model_keys("t", "m"), 1);
  EXPECT_EQ(idx.facts().total_entries, 1);
}

TEST(CacheIndex, PrefixAddedEventDoesNotRefresh) {  // S3
  combined_index idx;
  idx.set_tenant_policy("t", with_ttl(minutes(10)));
  idx.ingest(update("r", {legacy("p", 64)}, "t", "m", "vllm"), t0);
  idx.ingest(update("r", {legacy("p", 64)}, "t", "m", "sglang"), t0);
  cache_event ev;
  ev.type = static_cast<int>(event_type::prefix_added);
  ev.tenant_id = "t";
  ev.model_id = "m";
  ev.replica_id = "r";
  ev.prefix_hash = "p";
  EXPECT_FALSE(idx.apply_event(ev, t0 + 9 * minute).applied);
  idx.sweep(t0 + 11 * minute);
  auto pol = with_ttl(minutes(10));
  EXPECT_TRUE(idx.lookup(exact("p", 0, "t", "m", "vllm"), pol, t0 + 11 * minute).scores.empty());
  EXPECT_TRUE(idx.lookup(exact("p", 0, "t", "m", "sglang"), pol, t0 + 11 * minute).scores.empty());
  EXPECT_EQ(idx.facts().total_entries, 0);
}

TEST(CacheIndex, UnspecifiedTierIngestsAsT1) {  // S4
  combined_index idx;
  idx.ingest(update("a", {legacy("p1", 64)}), t0);
  EXPECT_EQ(idx.lookup(exact("p1"), no_policy, t0).scores.at(0).score.tier, 1);
}

TEST(CacheIndex, ChainWithoutTierReportsT1) {  // S5
  combined_index idx;
  idx.ingest(update("a", {chain({"b1", "b2", "b3"}, 16)}), t0);
  auto r = idx.lookup(chain_query({"b1", "b2", "b3"}, 16), no_policy, t0);
  ASSERT_EQ(r.scores.size(), 1u);
  EXPECT_EQ(r.scores[0].score.tier, 1);
}

TEST(CacheIndex, ExplicitT2TierIsReported) {  // S6
  combined_index idx;
  idx.ingest(update("a", {legacy("p1", 64, 2)}), t0);
  EXPECT_EQ(idx.lookup(exact("p1"), no_policy, t0).scores.at(0).score.tier, 2);
}

TEST(CacheIndex, ChainWalkAccumulatesRequestCountsNotStoredCounts) {  // S7
  combined_index idx;
  idx.ingest(update("r", {legacy("p", 64)}), t0);
  auto r = idx.lookup(chain_query({"p", "x", "y"}, 16), no_policy, t0);
  ASSERT_EQ(ids(r), std::vector<std::string>{"r"});
  EXPECT_EQ(r.scores[0].score.matched_tokens, 16);
}

TEST(CacheIndex, MalformedChainIsDroppedWithReason) {  // S8
  combined_index idx;
  prefix_entry p = chain({"a", "b", "c"}, 16);
  p.block_token_counts = {16};
  auto res = idx.ingest(update("r", {p}), t0);
  EXPECT_EQ(idx.facts().total_entries, 0);
  EXPECT_EQ(res.dropped_malformed_chain, 1);
  EXPECT_EQ(res.first_drop_reason, drop_reason::malformed_chain);
}

TEST(CacheIndex, EmptyHashSchemeSkipsPrefixesButKeepsStats) {  // S9
  combined_index idx;
  auto u = update("r", {chain({"a", "b"}, 16), legacy("p", 4)}, "t", "m", "");
  u.stats = stats(0.5f);
  auto res = idx.ingest(u, t0);
  EXPECT_EQ(idx.facts().total_entries, 0);
  EXPECT_EQ(res.dropped_empty_hash_scheme, 2);
  EXPECT_EQ(res.first_drop_reason, drop_reason::empty_hash_scheme);
  EXPECT_EQ(idx.get_cache_state("t", "m").replicas.size(), 1u);
}

TEST(CacheIndex, HashesWithoutCountsIndexNothing) {  // S10
  combined_index idx;
  prefix_entry p;
  p.block_hashes = {"a", "b"};
  idx.ingest(update("r", {p}), t0);
  EXPECT_EQ(idx.facts().total_keys, 0);
}

TEST(CacheIndex, CountsWithoutHashesDoNotFallBackToLegacy) {  // S11
  combined_index idx;
  prefix_entry p = legacy("legacy-p", 64);
  p.block_token_counts = {16, 16};
  auto res = idx.ingest(update("r", {p}), t0);
  EXPECT_EQ(idx.facts().total_keys, 0);
  EXPECT_EQ(res.dropped_malformed_chain, 1);
}

TEST(CacheIndex, ChainPlusLegacyHashIndexesBoth) {  // S12
  combined_index idx;
  prefix_entry p = chain({"b1", "b2", "b3"}, 16);
  p.prefix_hash = "legacy-full";
  p.token_count = 128;
  idx.ingest(update("r", {p}), t0);
  EXPECT_EQ(idx.tenant_keys("t"), 4);
  EXPECT_EQ(idx.lookup(chain_query({"b1", "b2", "b3"}, 16), no_policy, t0)
                .scores.at(0)
                .score.matched_tokens,
            48);
  EXPECT_EQ(idx.lookup(exact("legacy-full"), no_policy, t0).scores.at(0).score.matched_tokens, 128);
}

TEST(CacheIndex, ChainBlocksStoreCumulativeCounts) {
  combined_index idx;
  prefix_entry p = chain({"b1", "b2", "b3"}, 16);
  p.block_token_counts = {16, 32, 8};
  idx.ingest(update("r", {p}), t0);
  EXPECT_EQ(idx.find_entry("t", "m", "vllm", "", "b2", "r")->token_count, 48);
  EXPECT_EQ(idx.find_entry("t", "m", "vllm", "", "b3", "r")->token_count, 56);
}

TEST(CacheIndex, MissingExactKeyIsEmpty) {  // S13
  combined_index idx;
  idx.ingest(update("r", {legacy("known", 10)}), t0);
  auto r = idx.lookup(exact("missing"), no_policy, t0);
  EXPECT_TRUE(r.scores.empty());
  EXPECT_EQ(r.strategy, lookup_strategy::none);
}

TEST(CacheIndex, OtherHashSchemeDoesNotMatch) {  // S14
  combined_index idx;
  idx.ingest(update("r", {legacy("p", 10)}, "t", "m", "vllm"), t0);
  EXPECT_TRUE(idx.lookup(exact("p", 0, "t", "m", "sglang"), no_policy, t0).scores.empty());
}

TEST(CacheIndex, SameBytesUnderTwoSchemesStaySeparate) {  // S15
  combined_index idx;
  idx.ingest(update("vllm-replica-0", {legacy("p", 32)}, "t", "m", "vllm"), t0);
  idx.ingest(update("sglang-replica-0", {legacy("p", 32)}, "t", "m", "sglang"), t0);
  EXPECT_EQ(ids(idx.lookup(exact("p", 0, "t", "m", "vllm"), no_policy, t0)),
            std::vector<std::string>{"vllm-replica-0"});
  EXPECT_EQ(ids(idx.lookup(exact("p", 0, "t", "m", "sglang"), no_policy, t0)),
            std::vector<std::string>{"sglang-replica-0"});
}

TEST(CacheIndex, EmptySchemeIngestIndexesNothingAndEmptySchemeLookupNeverMatches) {  // S16
  combined_index idx;
  idx.ingest(update("r", {legacy("p", 32)}, "t", "m", ""), t0);
  EXPECT_EQ(idx.facts().total_entries, 0);
  idx.ingest(update("r", {legacy("p", 32)}, "t", "m", "vllm"), t0);
  EXPECT_TRUE(idx.lookup(exact("p", 0, "t", "m", ""), no_policy, t0).scores.empty());
  EXPECT_EQ(idx.lookup(exact("p", 0, "t", "m", "vllm"), no_policy, t0).scores.size(), 1u);
}

TEST(CacheIndex, TenantsAreIsolated) {  // S17
  combined_index idx;
  idx.ingest(update("r", {legacy("p", 32)}, "tenant-a"), t0);
  EXPECT_TRUE(idx.lookup(exact("p", 0, "tenant-b"), no_policy, t0).scores.empty());
  EXPECT_EQ(idx.lookup(exact("p", 0, "tenant-a"), no_policy, t0).scores.size(), 1u);
}

TEST(CacheIndex, ChainWalkReturnsLongestCommonRunPerReplica) {  // S18
  combined_index idx;
  idx.ingest(update("A", {chain({"b1", "b2", "b3", "x4", "x5"}, 16)}), t0);
  idx.ingest(update("B", {chain({"b1", "b2", "y3", "y4", "y5"}, 16)}), t0);
  auto r = idx.lookup(chain_query({"b1", "b2", "b3", "b4", "b5"}, 16), no_policy, t0);
  ASSERT_EQ(ids(r), (std::vector<std::string>{"A", "B"}));
  EXPECT_EQ(r.scores[0].score.matched_tokens, 48);
  EXPECT_EQ(r.scores[1].score.matched_tokens, 32);
}

TEST(CacheIndex, ChainWalkStopsAtFirstMissingBlock) {
  combined_index idx;
  idx.ingest(update("r", {legacy("b1", 16), legacy("b3", 48)}), t0);
  auto r = idx.lookup(chain_query({"b1", "b2", "b3"}, 16), no_policy, t0);
  ASSERT_EQ(r.scores.size(), 1u);
  EXPECT_EQ(r.scores[0].score.matched_tokens, 16);  // cannot re-enter at b3
}

TEST(CacheIndex, ChainWalkDropsReplicaWhoseBlockIsStale) {
  combined_index idx;
  auto pol = with_ttl(minutes(10));
  idx.ingest(update("a", {chain({"b1", "b2", "b3"}, 16)}), t0);
  idx.ingest(update("b", {chain({"b1", "b2", "b3"}, 16)}), t0);
  idx.ingest(update("b", {legacy("b2", 32)}, "t", "m", "vllm", t0 - 20 * minute), t0);
  auto r = idx.lookup(chain_query({"b1", "b2", "b3"}, 16), pol, t0);
  ASSERT_EQ(r.scores.size(), 2u);
  EXPECT_EQ(r.scores[0].score.replica_id, "a");
  EXPECT_EQ(r.scores[0].score.matched_tokens, 48);
  EXPECT_EQ(r.scores[1].score.matched_tokens, 16);
}

TEST(CacheIndex, FullChainMatchesAllBlocks) {  // S19
  combined_index idx;
  idx.ingest(update("r", {chain({"b1", "b2", "b3", "b4"}, 16)}), t0);
  EXPECT_EQ(idx.lookup(chain_query({"b1", "b2", "b3", "b4"}, 16), no_policy, t0)
                .scores.at(0)
                .score.matched_tokens,
            64);
}

TEST(CacheIndex, ChainRunReportsColdestTier) {  // S20
  combined_index idx;
  idx.ingest(update("r", {legacy("b1", 16, 2)}), t0);
  idx.ingest(update("r", {legacy("b2", 32, 1)}), t0);
  auto r = idx.lookup(chain_query({"b1", "b2"}, 16), no_policy, t0);
  EXPECT_EQ(r.scores.at(0).score.matched_tokens, 32);
  EXPECT_EQ(r.scores.at(0).score.tier, 2);
}

TEST(CacheIndex, DisjointChainIsEmpty) {  // S21
  combined_index idx;
  idx.ingest(update("r", {chain({"h1", "h2", "h3"}, 16)}), t0);
  EXPECT_TRUE(idx.lookup(chain_query({"q1", "q2", "q3"}, 16), no_policy, t0).scores.empty());
}

TEST(CacheIndex, ChainUnderOtherSchemeIsEmpty) {  // S22
  combined_index idx;
  idx.ingest(update("r", {chain({"b1", "b2"}, 16)}, "t", "m", "vllm"), t0);
  EXPECT_TRUE(
      idx.lookup(chain_query({"b1", "b2"}, 16, "t", "m", "sglang"), no_policy, t0).scores.empty());
}

TEST(CacheIndex, ChainFreshnessUsesOldestMatchedBlock) {  // S23
  combined_index idx;
  auto pol = with_ttl(minutes(10));
  idx.ingest(update("r", {legacy("b1", 16)}), t0);
  idx.ingest(update("r", {legacy("b2", 32), legacy("b3", 48)}), t0 + 8 * minute);
  auto r = idx.lookup(chain_query({"b1", "b2", "b3"}, 16), pol, t0 + 8 * minute);
  ASSERT_EQ(r.scores.size(), 1u);
  EXPECT_NEAR(r.scores[0].score.estimated_cache_hit_prob, 0.2, 1e-5);
  EXPECT_LT(r.scores[0].score.estimated_cache_hit_prob, 0.5f);
}

TEST(CacheIndex, MalformedChainLookupHasNoLegacyFallback) {  // S24, S25
  combined_index idx;
  idx.ingest(update("r", {legacy("legacy-p", 128)}), t0);
  auto q = exact("legacy-p", 128);
  q.chain_hashes = {"a", "b"};
  q.chain_counts = {16};
  EXPECT_TRUE(idx.lookup(q, no_policy, t0).scores.empty());
  auto q2 = exact("legacy-p", 128);
  q2.chain_counts = {16, 16};
  EXPECT_TRUE(idx.lookup(q2, no_policy, t0).scores.empty());
}

// Many replicas, several depths (DP groups), pressure ties and names whose byte order differs
// from their arrival order: the chain walk's key-based sort must give exactly the §3.5 order
// (score desc, id asc) and exactly the float32 scores of the formula.
TEST(CacheIndex, ChainLookupManyReplicasOrderAndScoresExact) {
  index_options o;
  o.max_entries = 0;
  combined_index idx(o);
  std::vector<std::string> chain;
  for (int j = 0; j < 40; ++j) chain.push_back("block-" + std::to_string(j));
  struct want_row {
    std::string id;
    std::int32_t matched;
    float pressure;
    float score;
  };
  std::vector<want_row> want;
  for (int i = 0; i < 70; ++i) {
    const std::string id = i % 3 == 0   ? "r-" + std::to_string(i)
                           : i % 3 == 1 ? "R" + std::to_string(i * 7)
                                        : "replica-" + std::to_string(70 - i);
    const int depth = 1 + (i % 7) * 5;
    auto u = update(id, {testing::chain({chain.begin(), chain.begin() + depth}, 16)}, "t", "m",
                    "vllm", t0);
    const float p = static_cast<float>(i % 4) * 0.25f;
    u.stats = stats(0.5f, p);
    idx.ingest(u, t0);
    want.push_back(want_row{id, 16 * depth, p, 0.0f});
  }
  const auto pol = with_ttl(minutes(10));
  const micros now = t0 + 1'000'000;
  const float f = freshness(now, t0, pol.eviction_ttl);
  for (auto& w : want) {
    std::int64_t k = 0;
    for (const auto& x : want) k += x.matched >= w.matched ? 1 : 0;
    const float pf = std::clamp(1.0f - w.pressure, 0.0f, 1.0f);
    w.score = static_cast<float>(w.matched) * f * pf * (1.0f + f * 0.0f);
    const double dp = distinguishing_power(k, static_cast<std::int64_t>(want.size()));
    if (dp != 1.0) w.score *= static_cast<float>(dp);
  }
  std::sort(want.begin(), want.end(), [](const want_row& a, const want_row& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.id < b.id;
  });
  const auto r = idx.lookup(chain_query(chain, 16), pol, now);
  ASSERT_EQ(r.scores.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(r.scores[i].score.replica_id, want[i].id) << i;
    EXPECT_EQ(r.scores[i].score.matched_tokens, want[i].matched) << i;
    EXPECT_EQ(std::memcmp(&r.scores[i].score.score, &want[i].score, sizeof(float)), 0) << i;
    EXPECT_EQ(r.scores[i].score.estimated_cache_hit_prob, f) << i;
  }
}

// ------------------------------------------------- §6.2 orchestrator, TENANT_HOT, factors

TEST(CacheIndex, PrefixMatchBeatsWarmStatsOnlyReplica) {  // S26
  combined_index idx;
  auto u = update("holder", {legacy("p", 32)});
  u.stats = stats(0.9f);
  idx.ingest(u, t0);
  idx.ingest(stats_only("warm-only", stats(0.9f)), t0);
  auto r = idx.lookup(exact("p"), no_policy, t0);
  EXPECT_EQ(r.strategy, lookup_strategy::prefix_match);
  EXPECT_EQ(ids(r), std::vector<std::string>{"holder"});
}

TEST(CacheIndex, TenantHotReturnsOnlyWarmServingReplicas) {  // S27
  combined_index idx;
  auto w = update("warm", {legacy("other", 1)});
  w.stats = stats(0.7f, 0.1f);
  auto c = update("cold", {legacy("other", 1)});
  c.stats = stats(0.0f, 0.5f);
  idx.ingest(w, t0);
  idx.ingest(c, t0);
  auto r = idx.lookup(exact("novel"), no_policy, t0);
  EXPECT_EQ(r.strategy, lookup_strategy::tenant_hot);
  EXPECT_EQ(ids(r), std::vector<std::string>{"warm"});
}

TEST(CacheIndex, StatsOnlyIndexIsColdStart) {  // S28
  combined_index idx;
  idx.ingest(stats_only("r", stats(0.9f)), t0);
  EXPECT_EQ(idx.lookup(exact("novel"), no_policy, t0).strategy, lookup_strategy::none);
}

TEST(CacheIndex, EmptyIndexIsNone) {  // S29, S56
  combined_index idx;
  auto r = idx.lookup(exact("novel"), no_policy, t0);
  EXPECT_EQ(r.strategy, lookup_strategy::none);
  EXPECT_TRUE(r.scores.empty());
}

TEST(CacheIndex, TenantHotRecencyClampsToOneWhenClockMovesBack) {  // S30
  combined_index idx;
  auto u = update("r", {legacy("other", 1)});
  u.stats = stats(0.5f, 0.0f);
  idx.ingest(u, t0);
  auto r = idx.lookup(exact("novel"), no_policy, t0 - 2 * minute);
  EXPECT_EQ(r.strategy, lookup_strategy::tenant_hot);
  ASSERT_EQ(r.scores.size(), 1u);
  EXPECT_EQ(r.scores[0].score.score, 0.5f);
}

TEST(CacheIndex, TenantHotHasZeroMatchedAndUnspecifiedTier) {  // S31, S58
  combined_index idx;
  auto u = update("warm", {legacy("other", 1)});
  u.stats = stats(0.8f);
  idx.ingest(u, t0);
  auto r = idx.lookup(exact("novel"), no_policy, t0);
  EXPECT_EQ(r.strategy, lookup_strategy::tenant_hot);
  EXPECT_EQ(r.scores.at(0).score.matched_tokens, 0);
  EXPECT_EQ(r.scores.at(0).score.tier, 0);
  EXPECT_FLOAT_EQ(r.scores.at(0).score.estimated_cache_hit_prob, 0.8f);
}

TEST(CacheIndex, TenantHotRespectsMinimumHitRate) {  // S32
  index_options o;
  o.tenant_hot_min_hit_rate = 0.5f;
  combined_index idx(o);
  auto u = update("r", {legacy("other", 1)});
  u.stats = stats(0.2f);
  idx.ingest(u, t0);
  EXPECT_EQ(idx.lookup(exact("novel"), no_policy, t0).strategy, lookup_strategy::none);
}

TEST(CacheIndex, TenantHotDisabledByZeroMaxAge) {  // S33
  index_options o;
  o.tenant_hot_max_age = std::chrono::nanoseconds(0);
  combined_index idx(o);
  auto u = update("r", {legacy("other", 1)});
  u.stats = stats(0.9f);
  idx.ingest(u, t0);
  EXPECT_EQ(idx.lookup(exact("novel"), no_policy, t0).strategy, lookup_strategy::none);
}

TEST(CacheIndex, TenantHotNeedsServingInRequestedScheme) {  // S34
  combined_index idx;
  auto u = update("r", {legacy("other", 1)}, "t", "m", "sglang");
  u.stats = stats(0.9f);
  idx.ingest(u, t0);
  auto r = idx.lookup(exact("novel", 0, "t", "m", "vllm"), no_policy, t0);
  EXPECT_EQ(r.strategy, lookup_strategy::unknown_hash_scheme);
  EXPECT_TRUE(r.scores.empty());
}

TEST(CacheIndex, SweptPrefixMakesIndexColdEvenWithFreshStats) {  // S35
  index_options o;
  o.tenant_hot_max_age = hours(1);
  combined_index idx(o);
  idx.set_tenant_policy("t", with_ttl(minutes(10)));
  auto u = update("r", {legacy("other", 1)});
  u.stats = stats(0.9f);
  idx.ingest(u, t0);
  idx.ingest(stats_only("r", stats(0.9f)), t0 + 15 * minute);
  idx.sweep(t0 + 15 * minute);
  EXPECT_EQ(idx.lookup(exact("novel"), with_ttl(minutes(10)), t0 + 15 * minute).strategy,
            lookup_strategy::none);
}

TEST(CacheIndex, StatsOnlyReplicaGivesNothingAcrossTenantSchemeOrModel) {  // S36, S37, S38
  combined_index idx;
  idx.ingest(stats_only("r", stats(0.9f), "tenant-a", "model-a"), t0);
  EXPECT_EQ(idx.lookup(exact("novel", 0, "tenant-b", "model-a"), no_policy, t0).strategy,
            lookup_strategy::none);
  EXPECT_EQ(idx.lookup(exact("novel", 0, "tenant-a", "model-a", ""), no_policy, t0).strategy,
            lookup_strategy::none);
  EXPECT_EQ(idx.lookup(exact("novel", 0, "tenant-a", "model-b"), no_policy, t0).strategy,
            lookup_strategy::none);
}

TEST(CacheIndex, ExactScoresApplyDistinguishingPower) {  // S39
  combined_index idx;
  idx.ingest(update("r1", {legacy("p", 80)}), t0);
  idx.ingest(update("r2", {legacy("p", 40)}), t0);
  idx.ingest(update("decoy", {legacy("decoy", 1)}), t0);
  auto r = idx.lookup(exact("p"), no_policy, t0);
  ASSERT_EQ(ids(r), (std::vector<std::string>{"r1", "r2"}));
  EXPECT_NEAR(r.scores[0].score.score, 80.0 / 3, 1e-3);
  EXPECT_NEAR(r.scores[1].score.score, 40.0 / 3, 1e-3);
}

std::vector<std::string> pressure_case(float weight, const char* a, int ta, float pa, const char* b,
                                       int tb, float pb) {
  index_options o;
  o.pressure_weight = weight;
  combined_index idx(o);
  auto ua = update(a, {legacy("p", ta)});
  ua.stats = stats(0.0f, pa);
  auto ub = update(b, {legacy("p", tb)});
  ub.stats = stats(0.0f, pb);
  idx.ingest(ua, t0);
  idx.ingest(ub, t0);
  idx.ingest(update("decoy", {legacy("decoy", 1)}), t0);
  return ids(idx.lookup(exact("p"), no_policy, t0));
}

TEST(CacheIndex, PressureFactorReordersReplicas) {  // S40
  EXPECT_EQ(pressure_case(1, "saturated", 100, 0.9f, "idle", 100, 0),
            (std::vector<std::string>{"idle", "saturated"}));
  EXPECT_EQ(pressure_case(1, "big-but-hot", 100, 0.9f, "small-cool", 50, 0),
            (std::vector<std::string>{"small-cool", "big-but-hot"}));
  EXPECT_EQ(pressure_case(0, "big-hot", 100, 0.9f, "small-cool", 50, 0),
            (std::vector<std::string>{"big-hot", "small-cool"}));
  EXPECT_EQ(pressure_case(1, "broken", 100, 1.5f, "alive", 1, 0),
            (std::vector<std::string>{"alive", "broken"}));
}

std::string slo_first(float bias, std::int32_t ttft) {
  index_options o;
  o.slo_tight_ttft_ms = 100;
  o.slo_tight_bias = bias;
  combined_index idx(o);
  auto pol = with_ttl(hours(1));
  idx.ingest(update("big-old", {legacy("p", 100)}), t0);
  idx.ingest(update("small-fresh", {legacy("p", 50)}), t0 + 20 * minute);
  idx.ingest(update("decoy", {legacy("decoy", 1)}), t0 + 20 * minute);
  auto q = exact("p");
  q.ttft_ms = ttft;
  return idx.lookup(q, pol, t0 + 20 * minute).scores.at(0).score.replica_id;
}

TEST(CacheIndex, TightSloFavoursFreshReplica) {  // S41
  EXPECT_EQ(slo_first(5, 0), "big-old");
  EXPECT_EQ(slo_first(5, 500), "big-old");
  EXPECT_EQ(slo_first(5, 50), "small-fresh");
}

TEST(CacheIndex, ZeroSloBiasKeepsTokenOrder) {  // S42
  EXPECT_EQ(slo_first(0, 50), "big-old");
}

TEST(CacheIndex, WorstTierFold) {  // S43
  EXPECT_EQ(worst_tier(1, 2), 2);
  EXPECT_EQ(worst_tier(3, 2), 3);
  EXPECT_EQ(worst_tier(1, 1), 1);
  EXPECT_EQ(worst_tier(0, 2), 0);
  EXPECT_EQ(worst_tier(3, 0), 0);
}

TEST(CacheIndex, ChainScoresCombinePressureAndDepthPower) {  // S44
  combined_index idx;
  auto a = update("big-but-hot", {chain({"b1", "b2", "b3"}, 16)});
  a.stats = stats(0.0f, 0.9f);
  auto b = update("small-cool", {chain({"b1", "b2"}, 16)});
  b.stats = stats(0.0f, 0.0f);
  idx.ingest(a, t0);
  idx.ingest(b, t0);
  idx.ingest(update("decoy", {legacy("decoy", 1)}), t0);
  auto r = idx.lookup(chain_query({"b1", "b2", "b3"}, 16), no_policy, t0);
  ASSERT_EQ(ids(r), (std::vector<std::string>{"small-cool", "big-but-hot"}));
  EXPECT_NEAR(r.scores[0].score.score, 32.0 / 3, 1e-3);
  EXPECT_NEAR(r.scores[1].score.score, 3.2, 1e-3);
}

TEST(CacheIndex, StaleStatsAreNotTenantHot) {  // S45
  combined_index idx;
  auto u = update("stale-warm", {legacy("other", 1)});
  u.stats = stats(0.9f);
  idx.ingest(u, t0);
  EXPECT_EQ(idx.lookup(exact("novel"), with_ttl(hours(1)), t0 + 10 * minute).strategy,
            lookup_strategy::none);
}

TEST(CacheIndex, StalePressureIsIgnored) {  // S46
  combined_index idx;
  auto pol = with_ttl(minutes(10));
  idx.ingest(stats_only("r", stats(0.0f, 0.9f)), t0);
  idx.ingest(update("r", {legacy("p", 50)}), t0 + 15 * minute);
  EXPECT_EQ(idx.lookup(exact("p"), pol, t0 + 15 * minute).scores.at(0).score.score, 50.0f);
}

TEST(CacheIndex, ReplicaUpdatedKeepsRowAliveButNotWarm) {  // S47
  combined_index idx;
  auto pol = with_ttl(minutes(10));
  idx.set_tenant_policy("t", pol);
  auto u = update("r", {legacy("p", 50)});
  u.stats = stats(0.9f, 0.9f);
  idx.ingest(u, t0);
  for (int i = 0; i < 5; ++i) {
    cache_event ev;
    ev.type = static_cast<int>(event_type::replica_updated);
    ev.tenant_id = "t";
    ev.model_id = "m";
    ev.replica_id = "r";
    idx.apply_event(ev, t0 + (20 + i) * minute);
  }
  const micros now = t0 + 24 * minute;
  idx.ingest(update("r", {legacy("p", 50)}), now);
  idx.sweep(now);
  EXPECT_EQ(idx.get_cache_state("t", "m").replicas.size(), 1u);  // row kept alive
  EXPECT_EQ(idx.lookup(exact("p"), pol, now).scores.at(0).score.score, 50.0f);
  EXPECT_EQ(idx.lookup(exact("novel"), pol, now).strategy, lookup_strategy::none);
}

TEST(CacheIndex, StatsUseTopLevelReplicaIdAndDropClientVersion) {  // S48
  combined_index idx;
  replica_stats s = stats(0.5f, 0.0f, 42);
  s.replica_id = "mismatched";
  s.client_version = "v9";
  idx.ingest(stats_only("real-replica", s), t0);
  auto v = idx.get_cache_state("t", "m");
  ASSERT_EQ(v.replicas.size(), 1u);
  EXPECT_EQ(v.replicas[0].replica_id, "real-replica");
  EXPECT_EQ(v.replicas[0].cache_memory_bytes, 42);
  EXPECT_EQ(v.replicas[0].client_version, "");
}

TEST(CacheIndex, NonFiniteStatsAreStoredAsZero) {  // S49
  combined_index idx;
  idx.ingest(stats_only("a", stats(std::nanf(""), std::numeric_limits<float>::infinity())), t0);
  idx.ingest(stats_only("b", stats(0.3f, -std::numeric_limits<float>::infinity())), t0);
  auto v = idx.get_cache_state("t", "m");
  ASSERT_EQ(v.replicas.size(), 2u);
  EXPECT_EQ(v.replicas[0].hit_rate, 0.0f);
  EXPECT_EQ(v.replicas[0].pressure, 0.0f);
  EXPECT_EQ(v.replicas[1].pressure, 0.0f);
}

// --------------------------------------------------------------------- §6.3 diagnostics

TEST(CacheIndex, UnknownTenantDiagnostic) {  // S50
  combined_index idx;
  idx.ingest(update("r", {legacy("p", 10)}, "ic-smoke"), t0);
  auto r = idx.lookup(exact("p", 0, "default"), no_policy, t0);
  EXPECT_EQ(r.strategy, lookup_strategy::unknown_tenant);
  EXPECT_TRUE(r.scores.empty());
}

TEST(CacheIndex, UnknownModelDiagnostic) {  // S51
  combined_index idx;
  idx.ingest(update("r", {legacy("p", 10)}, "t", "m1"), t0);
  EXPECT_EQ(idx.lookup(exact("p", 0, "t", "m2"), no_policy, t0).strategy,
            lookup_strategy::unknown_model);
}

TEST(CacheIndex, UnknownHashSchemeDiagnostic) {  // S52
  combined_index idx;
  idx.ingest(update("r", {legacy("p", 10)}), t0);
  EXPECT_EQ(idx.lookup(exact("p", 0, "t", "m", "vllm-v1"), no_policy, t0).strategy,
            lookup_strategy::unknown_hash_scheme);
}

TEST(CacheIndex, OutermostUnknownWins) {  // S53
  combined_index idx;
  idx.ingest(update("r", {legacy("p", 10)}, "ic-smoke", "m1"), t0);
  EXPECT_EQ(idx.lookup(exact("p", 0, "other-tenant", "m-other", "sglang"), no_policy, t0).strategy,
            lookup_strategy::unknown_tenant);
  EXPECT_EQ(idx.lookup(exact("p", 0, "ic-smoke", "m-other", "sglang"), no_policy, t0).strategy,
            lookup_strategy::unknown_model);
}

TEST(CacheIndex, NovelPrefixInKnownScopeIsNone) {  // S54
  combined_index idx;
  idx.ingest(update("r", {legacy("known", 10)}), t0);
  EXPECT_EQ(idx.lookup(exact("novel"), no_policy, t0).strategy, lookup_strategy::none);
}

TEST(CacheIndex, EmptyTenantModelOrSchemeIsNeverDiagnosed) {  // S55
  combined_index idx;
  idx.ingest(update("r", {legacy("p", 10)}), t0);
  EXPECT_EQ(idx.lookup(exact("p", 0, "t", "m", ""), no_policy, t0).strategy, lookup_strategy::none);
  EXPECT_EQ(idx.lookup(exact("p", 0, "", "m"), no_policy, t0).strategy, lookup_strategy::none);
  EXPECT_EQ(idx.lookup(exact("p", 0, "t", ""), no_policy, t0).strategy, lookup_strategy::none);
}

TEST(CacheIndex, DataUnderEmptyKeysIsNeverMatched) {  // S57
  combined_index idx;
  idx.ingest(update("r", {legacy("p", 10)}, ""), t0);
  idx.ingest(update("r", {legacy("p", 10)}, "t", ""), t0);
  EXPECT_EQ(idx.facts().total_entries, 2);
  auto r = idx.lookup(exact("p", 0, ""), no_policy, t0);
  EXPECT_EQ(r.strategy, lookup_strategy::none);
  EXPECT_TRUE(r.scores.empty());
  EXPECT_TRUE(idx.lookup(exact("p", 0, "t", ""), no_policy, t0).scores.empty());
}

TEST(CacheIndex, ChainMissUnderOtherSchemeIsUnknownHashScheme) {  // S59
  combined_index idx;
  idx.ingest(update("r", {chain({"b1", "b2"}, 16)}, "t", "m", "vllm"), t0);
  EXPECT_EQ(idx.lookup(chain_query({"b1", "b2"}, 16, "t", "m", "vllm-v1"), no_policy, t0).strategy,
            lookup_strategy::unknown_hash_scheme);
}

TEST(CacheIndex, AllClearedOfOnlyReplicaRemovesEveryPresence) {  // S60
  combined_index idx;
  idx.ingest(update("r", {legacy("p", 10)}), t0);
  idx.apply_event(cleared("r"), t0);
  EXPECT_EQ(idx.tenant_keys("t"), 0);
  EXPECT_EQ(idx.model_keys("t", "m"), 0);
  EXPECT_TRUE(idx.serving("t", "m", "vllm").empty());
}

TEST(CacheIndex, ChainRequestsNeverGetTenantHot) {
  combined_index idx;
  auto u = update("warm", {legacy("other", 1)});
  u.stats = stats(0.9f);
  idx.ingest(u, t0);
  EXPECT_EQ(idx.lookup(chain_query({"x1", "x2"}, 16), no_policy, t0).strategy,
            lookup_strategy::none);
}

// ------------------------------------------------------------ §6.4 distinguishing power

TEST(CacheIndex, KeyHeldByEveryReplicaScoresZero) {  // S63
  combined_index idx;
  for (auto r : {"r0", "r1", "r2"}) idx.ingest(update(r, {legacy("chat-template", 16)}), t0);
  auto r = idx.lookup(exact("chat-template"), no_policy, t0);
  ASSERT_EQ(r.scores.size(), 3u);
  for (const auto& s : r.scores) {
    EXPECT_EQ(s.score.score, 0.0f);
    EXPECT_EQ(s.score.matched_tokens, 16);
  }
}

TEST(CacheIndex, UniqueHolderGetsTwoThirds) {  // S64
  combined_index idx;
  idx.ingest(update("r0", {legacy("unique-rag-ctx", 64)}), t0);
  idx.ingest(update("r1", {legacy("other-prefix", 32)}), t0);
  idx.ingest(update("r2", {legacy("other-prefix", 32)}), t0);
  EXPECT_NEAR(idx.lookup(exact("unique-rag-ctx"), no_policy, t0).scores.at(0).score.score,
              64.0 * 2 / 3, 1e-3);
}

TEST(CacheIndex, TwoOfThreeHoldersGetOneThird) {  // S65
  combined_index idx;
  idx.ingest(update("r0", {legacy("partial", 48)}), t0);
  idx.ingest(update("r1", {legacy("partial", 48)}), t0);
  idx.ingest(update("r2", {legacy("else", 16)}), t0);
  auto r = idx.lookup(exact("partial"), no_policy, t0);
  ASSERT_EQ(r.scores.size(), 2u);
  EXPECT_NEAR(r.scores[0].score.score, 16.0, 1e-3);
  EXPECT_NEAR(r.scores[1].score.score, 16.0, 1e-3);
}

TEST(CacheIndex, SingleReplicaHasNoPowerPenalty) {  // S66
  combined_index idx;
  idx.ingest(update("r", {legacy("p", 64)}), t0);
  EXPECT_EQ(idx.lookup(exact("p"), no_policy, t0).scores.at(0).score.score, 64.0f);
}

TEST(CacheIndex, DepthAwarePowerOnChains) {  // S67
  combined_index idx;
  idx.ingest(update("r0", {chain({"b1", "b2", "b3", "b4"}, 64)}), t0);
  idx.ingest(update("r1", {chain({"b1", "b2"}, 64)}), t0);
  idx.ingest(update("r2", {chain({"b1"}, 64)}), t0);
  auto r = idx.lookup(chain_query({"b1", "b2", "b3", "b4"}, 64), no_policy, t0);
  ASSERT_EQ(r.scores.size(), 3u);
  EXPECT_EQ(r.scores[0].score.replica_id, "r0");
  EXPECT_NEAR(r.scores[0].score.score, 256.0 * 2 / 3, 1e-3);
  EXPECT_NEAR(r.scores[1].score.score, 128.0 / 3, 1e-3);
  EXPECT_EQ(r.scores[2].score.score, 0.0f);
}

TEST(CacheIndex, ChainHeadHeldByAllScoresZero) {  // S68
  combined_index idx;
  for (auto r : {"r0", "r1", "r2"}) idx.ingest(update(r, {chain({"head"}, 16)}), t0);
  auto r = idx.lookup(chain_query({"head"}, 16), no_policy, t0);
  ASSERT_EQ(r.scores.size(), 3u);
  for (const auto& s : r.scores) EXPECT_EQ(s.score.score, 0.0f);
}

TEST(CacheIndex, SingleReplicaChainScoresFullTokens) {  // S69
  combined_index idx;
  idx.ingest(update("r", {chain({"b1", "b2"}, 64)}), t0);
  EXPECT_EQ(idx.lookup(chain_query({"b1", "b2"}, 64), no_policy, t0).scores.at(0).score.score,
            128.0f);
}

TEST(CacheIndex, DistinguishingPowerTable) {  // S70
  EXPECT_EQ(distinguishing_power(1, 1), 1.0);
  EXPECT_EQ(distinguishing_power(0, 1), 1.0);
  EXPECT_EQ(distinguishing_power(0, 0), 1.0);
  EXPECT_EQ(distinguishing_power(3, 3), 0.0);
  EXPECT_EQ(distinguishing_power(10, 10), 0.0);
  EXPECT_DOUBLE_EQ(distinguishing_power(1, 3), 2.0 / 3);
  EXPECT_DOUBLE_EQ(distinguishing_power(2, 3), 1.0 / 3);
  EXPECT_EQ(distinguishing_power(5, 3), 0.0);
  EXPECT_EQ(distinguishing_power(-1, 3), 1.0);
}

TEST(CacheIndex, FreshnessIsLinearOverTtl) {
  const auto ttl = minutes(10);
  EXPECT_EQ(freshness(t0, t0, ttl), 1.0f);
  EXPECT_EQ(freshness(t0, t0 + minute, ttl), 1.0f);
  EXPECT_FLOAT_EQ(freshness(t0 + 5 * minute, t0, ttl), 0.5f);
  EXPECT_EQ(freshness(t0 + 10 * minute, t0, ttl), 0.0f);
  EXPECT_EQ(freshness(t0, t0, std::chrono::nanoseconds(0)), 0.0f);
}

// --------------------------------------------------------------------- §6.5 affinity

TEST(CacheIndex, AffinityWithoutReplicasIsNone) {  // S71
  combined_index idx;
  EXPECT_FALSE(idx.affinity_pick("t", "m", "vllm", "seed"));
}

TEST(CacheIndex, AffinityNeedsSchemeAndSeed) {  // S72
  combined_index idx;
  idx.ingest(update("r", {legacy("p", 1)}), t0);
  EXPECT_FALSE(idx.affinity_pick("t", "m", "", "seed"));
  EXPECT_FALSE(idx.affinity_pick("t", "m", "vllm", ""));
  EXPECT_TRUE(idx.affinity_pick("t", "m", "vllm", "seed"));
}

TEST(CacheIndex, AffinityCandidatesAreScopedByScheme) {  // S73
  combined_index idx;
  idx.ingest(update("r-vllm", {legacy("p", 1)}, "t", "m", "vllm"), t0);
  idx.ingest(update("r-sglang", {legacy("p", 1)}, "t", "m", "sglang"), t0);
  EXPECT_EQ(idx.affinity_pick("t", "m", "vllm", "s"), "r-vllm");
  EXPECT_EQ(idx.affinity_pick("t", "m", "sglang", "s"), "r-sglang");
  EXPECT_FALSE(idx.affinity_pick("t", "m", "missing", "s"));
}

TEST(CacheIndex, AffinityIsStableForASeed) {  // S74, S75
  combined_index idx;
  for (auto r : {"r-1", "r-2", "r-3", "r-4"}) idx.ingest(update(r, {legacy("p", 1)}), t0);
  auto first = idx.affinity_pick("t", "m", "vllm", "some-seed");
  for (int i = 0; i < 100; ++i) EXPECT_EQ(idx.affinity_pick("t", "m", "vllm", "some-seed"), first);
  combined_index one;
  one.ingest(update("only", {legacy("p", 1)}), t0);
  EXPECT_EQ(one.affinity_pick("t", "m", "vllm", "anything"), "only");
}

TEST(CacheIndex, AffinitySpreadsRandomSeeds) {  // S76
  combined_index idx;
  for (int i = 0; i < 8; ++i) idx.ingest(update("r" + std::to_string(i), {legacy("p", 1)}), t0);
  std::mt19937_64 rng(7);
  std::map<std::string, int> picks;
  for (int i = 0; i < 1000; ++i) {
    std::string seed(32, '\0');
    for (auto& c : seed) c = static_cast<char>(rng());
    ++picks[*idx.affinity_pick("t", "m", "vllm", seed)];
  }
  ASSERT_EQ(picks.size(), 8u);
  for (const auto& [r, n] : picks) {
    EXPECT_GE(n, 80) << r;
    EXPECT_LE(n, 220) << r;
  }
}

TEST(CacheIndex, AffinityIgnoresInsertionOrder) {  // S77
  combined_index a;
  combined_index b;
  for (auto r : {"r-1", "r-2", "r-3", "r-4"}) a.ingest(update(r, {legacy("p", 1)}), t0);
  for (auto r : {"r-4", "r-2", "r-1", "r-3"}) b.ingest(update(r, {legacy("p", 1)}), t0);
  EXPECT_EQ(a.affinity_pick("t", "m", "vllm", "x"), b.affinity_pick("t", "m", "vllm", "x"));
}

TEST(CacheIndex, AffinityMatchesDerivedCheckValues) {  // §3.10 table
  combined_index idx;
  for (auto r : {"r-1", "r-2", "r-3", "r-4"}) idx.ingest(update(r, {legacy("p", 1)}), t0);
  EXPECT_EQ(idx.affinity_pick("t", "m", "vllm", "prompt-fingerprint"), "r-2");
  EXPECT_EQ(idx.affinity_pick("t", "m", "vllm", chain_affinity_seed({"identical-prompt-block"})),
            "r-3");
  EXPECT_EQ(chain_affinity_seed({"block"}), std::string("\x00\x00\x00\x05"
                                                        "block",
                                                        9));
  EXPECT_EQ(affinity_index(chain_affinity_seed({"block"}), 2), 0u);
  EXPECT_EQ(affinity_index(chain_affinity_seed({"prompt-block-1", "prompt-block-2"}), 3), 0u);
}

// ------------------------------------------------------------- §6.6 adapter partition

TEST(CacheIndex, AdapterPartitionsAreSeparate) {  // S91
  combined_index idx;
  idx.ingest(update("replica-sql", {legacy("bytes", 128, 0, "sql-lora")}), t0);
  idx.ingest(update("replica-chat", {legacy("bytes", 128, 0, "chat-lora")}), t0);
  EXPECT_EQ(ids(idx.lookup(exact("bytes", 0, "t", "m", "vllm", "sql-lora"), no_policy, t0)),
            std::vector<std::string>{"replica-sql"});
  EXPECT_EQ(ids(idx.lookup(exact("bytes", 0, "t", "m", "vllm", "chat-lora"), no_policy, t0)),
            std::vector<std::string>{"replica-chat"});
}

TEST(CacheIndex, SameAdapterOnTwoReplicasMatchesBoth) {  // S92
  combined_index idx;
  idx.ingest(update("a", {legacy("bytes", 128, 0, "sql-lora")}), t0);
  idx.ingest(update("b", {legacy("bytes", 128, 0, "sql-lora")}), t0);
  auto r = idx.lookup(exact("bytes", 0, "t", "m", "vllm", "sql-lora"), no_policy, t0);
  ASSERT_EQ(r.scores.size(), 2u);
  EXPECT_EQ(r.scores[0].score.matched_tokens, 128);
  EXPECT_EQ(r.scores[1].score.matched_tokens, 128);
}

TEST(CacheIndex, DefaultAndLoraPartitionsDoNotMix) {  // S93
  combined_index idx;
  idx.ingest(update("r", {legacy("p", 64)}), t0);
  EXPECT_EQ(idx.lookup(exact("p", 0, "t", "m", "vllm", ""), no_policy, t0).scores.size(), 1u);
  EXPECT_TRUE(
      idx.lookup(exact("p", 0, "t", "m", "vllm", "sql-lora"), no_policy, t0).scores.empty());
  combined_index rev;
  rev.ingest(update("r", {legacy("p", 64, 0, "sql-lora")}), t0);
  EXPECT_TRUE(rev.lookup(exact("p", 0, "t", "m", "vllm", ""), no_policy, t0).scores.empty());
}

TEST(CacheIndex, EntryAdapterOverridesUpdateAdapter) {  // S94
  combined_index idx;
  auto u = update("r", {legacy("entry1", 64), legacy("entry2", 64, 0, "other-lora")});
  u.adapter_id = "default-lora";
  idx.ingest(u, t0);
  EXPECT_TRUE(idx.find_entry("t", "m", "vllm", "default-lora", "entry1", "r"));
  EXPECT_FALSE(idx.find_entry("t", "m", "vllm", "default-lora", "entry2", "r"));
  EXPECT_TRUE(idx.find_entry("t", "m", "vllm", "other-lora", "entry2", "r"));
}

TEST(CacheIndex, ChainLookupStaysInAdapterPartition) {  // S95
  combined_index idx;
  auto a = update("replica-sql", {chain({"b0", "b1"}, 64)});
  a.adapter_id = "sql-lora";
  auto b = update("replica-chat", {chain({"b0", "b1"}, 64)});
  b.adapter_id = "chat-lora";
  idx.ingest(a, t0);
  idx.ingest(b, t0);
  auto r = idx.lookup(chain_query({"b0", "b1"}, 64, "t", "m", "vllm", "sql-lora"), no_policy, t0);
  EXPECT_EQ(r.strategy, lookup_strategy::prefix_match);
  ASSERT_EQ(ids(r), std::vector<std::string>{"replica-sql"});
  EXPECT_EQ(r.scores[0].score.matched_tokens, 128);
}

TEST(CacheIndex, PrefixEvictedWithAdapterKeepsOtherAdapters) {  // S96
  combined_index idx;
  idx.ingest(update("replica-0", {legacy("p", 8, 0, "sql-lora"), legacy("p", 8, 0, "chat-lora")}),
             t0);
  idx.apply_event(evicted("replica-0", "p", "sql-lora"), t0);
  EXPECT_FALSE(idx.find_entry("t", "m", "vllm", "sql-lora", "p", "replica-0"));
  EXPECT_TRUE(idx.find_entry("t", "m", "vllm", "chat-lora", "p", "replica-0"));
}

TEST(CacheIndex, PrefixEvictedWithoutAdapterRemovesAllPartitionsAndSchemes) {  // S97
  combined_index idx;
  idx.ingest(update("r", {legacy("p", 8, 0, "sql-lora"), legacy("p", 8)}), t0);
  idx.ingest(update("r", {legacy("p", 8)}, "t", "m", "sglang"), t0);
  auto res = idx.apply_event(evicted("r", "p"), t0);
  EXPECT_EQ(res.entries_removed, 3);
  EXPECT_EQ(idx.facts().total_entries, 0);
}

TEST(CacheIndex, AllClearedRemovesEveryAdapter) {  // S98
  combined_index idx;
  idx.ingest(update("r", {legacy("p", 8, 0, "sql-lora"), legacy("q", 8, 0, "chat-lora")}), t0);
  idx.apply_event(cleared("r"), t0);
  EXPECT_EQ(idx.facts().total_entries, 0);
}

TEST(CacheIndex, UnseenAdapterIsPlainMissButOtherSchemeIsUnknown) {  // S99
  combined_index idx;
  idx.ingest(update("r", {legacy("p", 8, 0, "sql-lora")}), t0);
  EXPECT_EQ(idx.lookup(exact("p", 0, "t", "m", "vllm", "never-seen-lora"), no_policy, t0).strategy,
            lookup_strategy::none);
  EXPECT_EQ(idx.lookup(exact("p", 0, "t", "m", "sglang", "sql-lora"), no_policy, t0).strategy,
            lookup_strategy::unknown_hash_scheme);
}

}  // namespace
}  // namespace ic::index
