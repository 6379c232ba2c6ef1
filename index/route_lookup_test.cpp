// Handler-step scenarios of spec/lookup.md §6 ([handler] rows and H rows that need no gRPC,
// tokenizer or deadline machinery).
#include "index/route_lookup.hpp"

#include <functional>

#include <gtest/gtest.h>

#include "index/fingerprint.hpp"
#include "index/test_support.hpp"

namespace ic::index {
namespace {

using namespace ic::index::testing;

const policy::resolved_policy no_policy = policy::resolved_policy::no_policy();

lookup_route_request req(std::string tenant = "t", std::string model = "m",
                         std::string scheme = "vllm") {
  lookup_route_request r;
  r.tenant_id = std::move(tenant);
  r.model_id = std::move(model);
  r.hash_scheme = std::move(scheme);
  return r;
}

lookup_route_request exact_req(std::string key, std::int32_t count, std::string tenant = "t") {
  auto r = req(std::move(tenant));
  r.prefix_hash = std::move(key);
  r.prefix_token_count = count;
  return r;
}

lookup_route_request chain_req(std::vector<std::string> hashes, std::int32_t count,
                               std::string scheme = "vllm") {
  auto r = req("t", "m", std::move(scheme));
  r.block_token_counts.assign(hashes.size(), count);
  r.block_hashes = std::move(hashes);
  return r;
}

std::vector<std::uint32_t> tokens(std::uint32_t from, std::uint32_t n) {
  std::vector<std::uint32_t> v(n);
  for (std::uint32_t i = 0; i < n; ++i) v[i] = from + i;
  return v;
}

/// Ingests `toks` the way the kvevent-subscriber does: one legacy entry per block.
void subscriber_ingest(combined_index& idx, const std::string& replica,
                       const std::vector<std::uint32_t>& toks, int block_size = 16,
                       std::string adapter = "", std::int32_t tier = 1) {
  auto chain = fingerprint_chain(toks.data(), toks.size(), block_size);
  std::vector<prefix_entry> ps;
  for (std::size_t i = 0; i < chain.size(); ++i) {
    ps.push_back(
        legacy(to_wire(chain[i]), static_cast<std::int32_t>((i + 1) * block_size), tier, adapter));
  }
  idx.ingest(update(replica, std::move(ps)), t0);
}

policy::resolved_policy policy_with(std::function<void(policy::resolved_policy&)> f) {
  policy::resolved_policy p;
  f(p);
  return p;
}

// ------------------------------------------------------------------------ §6.5 affinity

TEST(RouteLookup, NovelChainGetsAffinityHint) {  // S78
  combined_index idx;
  for (auto r : {"r-1", "r-2", "r-3"}) {
    auto u = update(r, {legacy(std::string("own-") + r, 32)});
    u.stats = stats(0.0f);
    idx.ingest(u, t0);
  }
  auto resp = route_lookup(idx, chain_req({"prompt-block-1", "prompt-block-2"}, 16), no_policy, t0);
  EXPECT_EQ(resp.reason_code, "AFFINITY_HINT");
  ASSERT_EQ(resp.replica_scores.size(), 1u);
  EXPECT_EQ(resp.replica_scores[0].replica_id, "r-1");
}

TEST(RouteLookup, AffinityDisabledGivesNoHint) {  // S79
  combined_index idx;
  idx.ingest(update("r-1", {legacy("x", 32)}), t0);
  auto pol = policy_with([](auto& p) { p.affinity_routing = false; });
  auto resp = route_lookup(idx, chain_req({"block-A"}, 16), pol, t0);
  EXPECT_EQ(resp.reason_code, "NO_HINT");
  EXPECT_TRUE(resp.replica_scores.empty());
}

TEST(RouteLookup, EmptyIndexHasNoAffinityCandidate) {  // S80
  combined_index idx;
  EXPECT_EQ(route_lookup(idx, chain_req({"block"}, 16), no_policy, t0).reason_code, "NO_HINT");
}

TEST(RouteLookup, RequestWithoutSeedGetsNoHint) {  // S81
  combined_index idx;
  idx.ingest(update("r-1", {legacy("x", 32)}), t0);
  auto resp = route_lookup(idx, req(), no_policy, t0);
  EXPECT_EQ(resp.reason_code, "NO_HINT");
  EXPECT_TRUE(resp.replica_scores.empty());
}

TEST(RouteLookup, AffinityIsStableAcrossRequests) {  // S82
  combined_index idx;
  for (auto r : {"r-1", "r-2", "r-3", "r-4"}) idx.ingest(update(r, {legacy("x", 32)}), t0);
  auto first = route_lookup(idx, chain_req({"identical-prompt-block"}, 16), no_policy, t0);
  ASSERT_EQ(first.replica_scores.size(), 1u);
  EXPECT_EQ(first.replica_scores[0].replica_id, "r-3");
  for (int i = 0; i < 10; ++i) {
    auto again = route_lookup(idx, chain_req({"identical-prompt-block"}, 16), no_policy, t0);
    EXPECT_EQ(again.replica_scores.at(0).replica_id, "r-3");
  }
}

TEST(RouteLookup, AffinityHintCarriesZeroFields) {  // S83
  combined_index idx;
  for (auto r : {"r-1", "r-2"}) idx.ingest(update(r, {legacy("x", 32)}), t0);
  auto resp = route_lookup(idx, chain_req({"block"}, 16), no_policy, t0);
  EXPECT_EQ(resp.reason_code, "AFFINITY_HINT");
  ASSERT_EQ(resp.replica_scores.size(), 1u);
  EXPECT_EQ(resp.replica_scores[0].replica_id, "r-1");
  EXPECT_EQ(resp.replica_scores[0].score, 0.0f);
  EXPECT_EQ(resp.replica_scores[0].matched_tokens, 0);
  EXPECT_EQ(resp.replica_scores[0].estimated_cache_hit_prob, 0.0f);
  EXPECT_EQ(resp.replica_scores[0].tier, 0);
}

TEST(RouteLookup, MinPrefixWithAffinityStillHints) {  // S84, S85
  combined_index idx;
  for (auto r : {"r-1", "r-2", "r-3"}) idx.ingest(update(r, {legacy("x", 32)}), t0);
  auto pol = policy_with([](auto& p) { p.minimum_prefix_tokens = 1024; });
  EXPECT_EQ(route_lookup(idx, chain_req({"tiny-prompt"}, 8), pol, t0).reason_code, "AFFINITY_HINT");
  pol.affinity_routing = false;
  EXPECT_EQ(route_lookup(idx, chain_req({"tiny-prompt"}, 8), pol, t0).reason_code, "NO_HINT");
}

TEST(RouteLookup, UnknownSchemeBeatsAffinity) {  // S86
  combined_index idx;
  idx.ingest(update("r-1", {legacy("x", 32)}), t0);
  auto pol = policy_with([](auto& p) { p.minimum_prefix_tokens = 1024; });
  auto resp = route_lookup(idx, chain_req({"c"}, 8, "sglang"), pol, t0);
  EXPECT_EQ(resp.reason_code, "UNKNOWN_HASH_SCHEME");
  EXPECT_TRUE(resp.replica_scores.empty());
}

TEST(RouteLookup, MinPrefixDowngradeFallsToAffinity) {  // S87
  combined_index idx;
  idx.ingest(update("r-1", {legacy("deep", 64)}), t0);
  auto pol = policy_with([](auto& p) {
    p.minimum_prefix_tokens = 1024;
    p.minimum_matched_tokens = 0;
  });
  auto resp = route_lookup(idx, exact_req("deep", 1), pol, t0);
  EXPECT_EQ(resp.reason_code, "AFFINITY_HINT");
  ASSERT_EQ(resp.replica_scores.size(), 1u);
  EXPECT_EQ(resp.replica_scores[0].replica_id, "r-1");
  EXPECT_EQ(resp.replica_scores[0].matched_tokens, 0);
}

TEST(RouteLookup, TenantHotDowngradeFallsToAffinity) {  // S88
  combined_index idx;
  auto u = update("warm-r", {legacy("warm-prefix", 256)});
  u.stats = stats(0.9f);
  idx.ingest(u, t0);
  auto pol = policy_with([](auto& p) { p.minimum_prefix_tokens = 1024; });
  EXPECT_EQ(route_lookup(idx, exact_req("novel-prefix", 1), pol, t0).reason_code, "AFFINITY_HINT");
}

TEST(RouteLookup, CountsOnlyChainFailsOpenWithoutAffinity) {  // S89, H51
  combined_index idx;
  for (auto r : {"r-1", "r-2"}) {
    auto u = update(r, {legacy("x", 32)});
    u.stats = stats(0.9f);
    idx.ingest(u, t0);
  }
  auto r = exact_req("legacy-prefix", 32);
  r.block_token_counts = {16, 16};
  auto resp = route_lookup(idx, r, no_policy, t0);
  EXPECT_EQ(resp.reason_code, "NO_HINT");
  EXPECT_TRUE(resp.adapter_id.empty());
  auto r2 = req();
  r2.block_token_counts = {16, 16};
  EXPECT_EQ(route_lookup(idx, r2, no_policy, t0).reason_code, "NO_HINT");
}

TEST(RouteLookup, MissingTenantModelOrSchemeNeverHints) {  // S90
  combined_index idx;
  idx.ingest(update("r", {legacy("x", 32)}, ""), t0);
  idx.ingest(update("r", {legacy("x", 32)}, "t", ""), t0);
  idx.ingest(update("r", {legacy("x", 32)}, "t", "m", ""), t0);
  for (auto r : {req("", "m", "vllm"), req("t", "", "vllm"), req("t", "m", "")}) {
    r.prefix_hash = "x";
    r.prefix_token_count = 32;
    EXPECT_EQ(route_lookup(idx, r, no_policy, t0).reason_code, "NO_HINT");
  }
}

// ------------------------------------------------------------------ §6.6 adapters

TEST(RouteLookup, AdapterPartitionsMatchAndEcho) {  // S100
  combined_index idx;
  auto toks = tokens(1, 128);
  subscriber_ingest(idx, "r1", toks, 128, "sql-lora");
  subscriber_ingest(idx, "r2", toks, 128, "chat-lora");
  const std::string key = to_wire(fingerprint_chain(toks.data(), toks.size(), 128)[0]);
  for (auto adapter : {"sql-lora", "chat-lora"}) {
    auto r = chain_req({key}, 128);
    r.adapter_id = adapter;
    auto resp = route_lookup(idx, r, no_policy, t0);
    EXPECT_EQ(resp.reason_code, "PREFIX_MATCH") << adapter;
    EXPECT_EQ(resp.adapter_id, adapter);
  }
  for (auto adapter : {"unloaded-lora", ""}) {
    auto r = chain_req({key}, 128);
    r.adapter_id = adapter;
    EXPECT_NE(route_lookup(idx, r, no_policy, t0).reason_code, "PREFIX_MATCH") << adapter;
  }
}

TEST(RouteLookup, DefaultAdapterChainMatches) {  // S101
  combined_index idx;
  auto toks = tokens(1, 128);
  subscriber_ingest(idx, "r1", toks, 128);
  auto resp = route_lookup(
      idx, chain_req({to_wire(fingerprint_chain(toks.data(), 128, 128)[0])}, 128), no_policy, t0);
  EXPECT_EQ(resp.reason_code, "PREFIX_MATCH");
  EXPECT_EQ(resp.adapter_id, "");
}

// ----------------------------------------------------------------- §6.8 handler rows

TEST(RouteLookup, EmptyIndexModelOnlyIsNoHint) {  // H1
  combined_index idx;
  lookup_route_request r;
  r.model_id = "m";
  auto resp = route_lookup(idx, r, no_policy, t0);
  EXPECT_EQ(resp.reason_code, "NO_HINT");
  EXPECT_TRUE(resp.replica_scores.empty());
}

TEST(RouteLookup, ExactHitIsPrefixMatchT1) {  // H2, H9
  combined_index idx;
  idx.ingest(update("r1", {legacy("p", 128)}), t0);
  auto resp = route_lookup(idx, exact_req("p", 128), no_policy, t0);
  EXPECT_EQ(resp.reason_code, "PREFIX_MATCH");
  ASSERT_EQ(resp.replica_scores.size(), 1u);
  EXPECT_EQ(resp.replica_scores[0].tier, 1);
  EXPECT_EQ(resp.replica_scores[0].matched_tokens, 128);
}

TEST(RouteLookup, WarmReplicaIsTenantHot) {  // H3
  combined_index idx;
  auto u = update("warm", {legacy("other", 1)});
  u.stats = stats(0.8f);
  idx.ingest(u, t0);
  auto resp = route_lookup(idx, exact_req("novel", 128), no_policy, t0);
  EXPECT_EQ(resp.reason_code, "TENANT_HOT");
  ASSERT_EQ(resp.replica_scores.size(), 1u);
  EXPECT_EQ(resp.replica_scores[0].matched_tokens, 0);
  EXPECT_EQ(resp.replica_scores[0].tier, 0);
}

TEST(RouteLookup, TiersNormaliseAtIngest) {  // H4
  const std::pair<std::int32_t, std::int32_t> cases[] = {{1, 1}, {2, 2}, {0, 1}, {99, 0}, {-1, 0}};
  for (auto [wire, want] : cases) {
    combined_index idx;
    idx.ingest(update("r", {legacy("p", 128, wire)}), t0);
    auto resp = route_lookup(idx, exact_req("p", 128), no_policy, t0);
    ASSERT_EQ(resp.replica_scores.size(), 1u) << wire;
    EXPECT_EQ(resp.replica_scores[0].tier, want) << wire;
  }
}

TEST(RouteLookup, EmptySchemeIsNoHint) {  // H5
  combined_index idx;
  idx.ingest(stats_only("warm", stats(0.9f)), t0);
  auto r = req("t", "m", "");
  EXPECT_EQ(route_lookup(idx, r, no_policy, t0).reason_code, "NO_HINT");
}

TEST(RouteLookup, TightSloRaisesScore) {  // H6
  combined_index idx;
  idx.ingest(update("r", {legacy("p", 128)}), t0);
  auto tight = exact_req("p", 128);
  tight.slo_target = slo{50, 0};
  auto a = route_lookup(idx, tight, no_policy, t0);
  auto b = route_lookup(idx, exact_req("p", 128), no_policy, t0);
  ASSERT_EQ(a.reason_code, "PREFIX_MATCH");
  ASSERT_EQ(b.reason_code, "PREFIX_MATCH");
  EXPECT_GT(a.replica_scores[0].score, b.replica_scores[0].score);
}

TEST(RouteLookup, ReservedTenantShortCircuits) {  // H11
  combined_index idx;
  idx.ingest(update("__probe", {legacy("p", 128)}, std::string(reserved_tenant)), t0, nullptr,
             input_origin::probe);
  auto r = exact_req("p", 128, std::string(reserved_tenant));
  r.adapter_id = "a";
  auto resp = route_lookup(idx, r, no_policy, t0);
  EXPECT_EQ(resp.reason_code, "NO_HINT");
  EXPECT_TRUE(resp.replica_scores.empty());
  EXPECT_EQ(resp.lookup_latency_us, 0);
  EXPECT_EQ(resp.adapter_id, "");
}

TEST(RouteLookup, MinPrefixBelowCountPasses) {  // H13
  combined_index idx;
  idx.ingest(update("r", {legacy("p", 100)}), t0);
  auto pol = policy_with([](auto& p) {
    p.minimum_prefix_tokens = 50;
    p.minimum_matched_tokens = 0;
  });
  EXPECT_EQ(route_lookup(idx, exact_req("p", 100), pol, t0).reason_code, "PREFIX_MATCH");
}

TEST(RouteLookup, MinPrefixGateSkipsIndexWhenAffinityOff) {  // H14, H22
  auto pol = policy_with([](auto& p) {
    p.minimum_prefix_tokens = 200;
    p.affinity_routing = false;
  });
  auto plan = plan_route(exact_req("p", 10), pol);
  ASSERT_TRUE(plan.early);
  EXPECT_EQ(plan.early->reason_code, "NO_HINT");
  EXPECT_EQ(plan.early->adapter_id, "");
  auto chain_plan = plan_route(chain_req({"a", "b"}, 16), pol);
  ASSERT_TRUE(chain_plan.early);
  EXPECT_EQ(chain_plan.early->reason_code, "NO_HINT");
}

TEST(RouteLookup, TimeoutResponseCarriesNothing) {  // H15/H16 shape (deadline is the caller's)
  combined_index idx;
  idx.ingest(update("r", {legacy("p", 128)}), t0);
  auto r = exact_req("p", 128);
  r.adapter_id = "x";
  auto plan = plan_route(r, no_policy);
  auto resp = timeout_response(plan);
  EXPECT_EQ(resp.reason_code, "TIMEOUT");
  EXPECT_TRUE(resp.replica_scores.empty());
  EXPECT_EQ(resp.adapter_id, "");
}

TEST(RouteLookup, OtherTenantsPolicyDoesNotApply) {  // H19
  combined_index idx;
  auto team_a = policy_with([](auto& p) {
    p.minimum_prefix_tokens = 200;
    p.lookup_timeout_ms = 1;
  });
  idx.set_tenant_policy("team-a", team_a);
  idx.ingest(update("r", {legacy("p", 128)}, "team-b"), t0);
  EXPECT_EQ(route_lookup(idx, exact_req("p", 128, "team-b"), no_policy, t0).reason_code,
            "PREFIX_MATCH");
}

TEST(RouteLookup, ChainLongerThanStoredMatchesCommonRun) {  // H20
  combined_index idx;
  idx.ingest(update("r", {chain({"b1", "b2", "b3"}, 64)}), t0);
  auto resp = route_lookup(idx, chain_req({"b1", "b2", "b3", "x4", "x5"}, 64), no_policy, t0);
  EXPECT_EQ(resp.reason_code, "PREFIX_MATCH");
  EXPECT_EQ(resp.replica_scores.at(0).matched_tokens, 192);
}

TEST(RouteLookup, ChainSumSatisfiesMinPrefix) {  // H21
  combined_index idx;
  idx.ingest(update("r", {chain({"c1", "c2", "c3"}, 16)}), t0);
  auto pol = policy_with([](auto& p) {
    p.minimum_prefix_tokens = 32;
    p.minimum_matched_tokens = 0;
  });
  EXPECT_EQ(route_lookup(idx, chain_req({"c1", "c2", "c3"}, 16), pol, t0).reason_code,
            "PREFIX_MATCH");
}

TEST(RouteLookup, RequireChainRejectsEveryOtherShape) {  // H23
  auto pol = policy_with([](auto& p) { p.require_chain = true; });
  std::vector<lookup_route_request> shapes;
  shapes.push_back(exact_req("p", 10));
  auto malformed = chain_req({"a", "b"}, 16);
  malformed.block_token_counts = {16};
  shapes.push_back(malformed);
  auto toks = req();
  toks.token_ids = tokens(0, 32);
  shapes.push_back(toks);
  auto prompt = req();
  prompt.prompt_text = "hello";
  shapes.push_back(prompt);
  for (const auto& r : shapes) {
    auto plan = plan_route(r, pol);
    ASSERT_TRUE(plan.early);
    EXPECT_EQ(plan.early->reason_code, "POLICY_REQUIRES_CHAIN");
    EXPECT_TRUE(plan.early->adapter_id.empty());
  }
  EXPECT_FALSE(plan_route(chain_req({"a"}, 16), pol).early);
}

TEST(RouteLookup, ChainMatchingDisabledResolvesToExact) {  // H24
  auto pol = policy_with([](auto& p) { p.enable_chain_matching = false; });
  auto both = exact_req("legacy-exact", 99);
  both.block_hashes = {"a", "b"};
  both.block_token_counts = {16, 16};
  auto plan = plan_route(both, pol);
  ASSERT_FALSE(plan.early);
  EXPECT_EQ(plan.index_request.exact_key, "legacy-exact");
  EXPECT_EQ(plan.index_request.exact_count, 99);
  EXPECT_TRUE(plan.index_request.chain_hashes.empty());

  auto malformed = both;
  malformed.block_token_counts = {16};
  plan = plan_route(malformed, pol);
  ASSERT_FALSE(plan.early);
  EXPECT_EQ(plan.index_request.exact_key, "legacy-exact");

  auto chain_only = chain_req({"a", "b"}, 16);
  plan = plan_route(chain_only, pol);
  ASSERT_TRUE(plan.early);
  EXPECT_EQ(plan.early->reason_code, "NO_HINT");

  auto toks = req();
  toks.token_ids = tokens(1000, 32);
  auto chain = fingerprint_chain(toks.token_ids.data(), 32, 16);
  plan = plan_route(toks, pol);
  ASSERT_FALSE(plan.early);
  EXPECT_EQ(plan.index_request.exact_key, to_wire(chain.back()));
  EXPECT_EQ(plan.index_request.exact_count, 32);
  EXPECT_TRUE(plan.index_request.chain_hashes.empty());
  EXPECT_TRUE(plan.echo_tokens.empty());

  auto malformed_toks = toks;
  malformed_toks.block_hashes = {"a", "b"};
  malformed_toks.block_token_counts = {16};
  plan = plan_route(malformed_toks, pol);
  ASSERT_FALSE(plan.early);
  EXPECT_EQ(plan.index_request.exact_key, to_wire(chain.back()));
}

TEST(RouteLookup, ChainOffUsesLegacyCountForMinPrefix) {  // H25
  auto pol = policy_with([](auto& p) {
    p.enable_chain_matching = false;
    p.minimum_prefix_tokens = 100;
    p.affinity_routing = false;
  });
  auto r = exact_req("p", 10);
  r.block_hashes = {"a", "b"};
  r.block_token_counts = {100, 100};
  auto plan = plan_route(r, pol);
  ASSERT_TRUE(plan.early);
  EXPECT_EQ(plan.early->reason_code, "NO_HINT");
}

TEST(RouteLookup, TenantHotDisabledGivesNoHint) {  // H26
  combined_index idx;
  auto u = update("warm", {legacy("other", 1)});
  u.stats = stats(0.9f);
  idx.ingest(u, t0);
  auto pol = policy_with([](auto& p) {
    p.enable_tenant_hot = false;
    p.affinity_routing = false;
  });
  EXPECT_EQ(route_lookup(idx, exact_req("novel", 128), pol, t0).reason_code, "NO_HINT");
}

TEST(RouteLookup, MalformedChainIsNotTenantHot) {  // H27
  combined_index idx;
  auto u = update("warm", {legacy("other", 1)});
  u.stats = stats(0.9f);
  idx.ingest(u, t0);
  auto r = chain_req({"a", "b"}, 16);
  r.block_token_counts = {16};
  EXPECT_EQ(route_lookup(idx, r, no_policy, t0).reason_code, "NO_HINT");
}

TEST(RouteLookup, EffectivePrefixTokens) {  // H28
  resolved_input a;
  a.chain = {"x", "y", "z"};
  a.counts = {16, 16, 16};
  a.exact_count = 999;
  EXPECT_EQ(effective_prefix_tokens(a), 48);
  resolved_input b;
  b.exact_count = 128;
  EXPECT_EQ(effective_prefix_tokens(b), 128);
  resolved_input c;
  c.chain = {"x", "y", "z"};
  c.counts = {32, 32, 32};
  EXPECT_EQ(effective_prefix_tokens(c), 96);
}

TEST(RouteLookup, UnheldChainWithAffinityOffIsNoHint) {  // H29
  combined_index idx;
  auto u = update("warm", {legacy("other", 1)});
  u.stats = stats(0.9f);
  idx.ingest(u, t0);
  auto pol = policy_with([](auto& p) { p.affinity_routing = false; });
  EXPECT_EQ(route_lookup(idx, chain_req({"n1", "n2"}, 16), pol, t0).reason_code, "NO_HINT");
}

TEST(RouteLookup, MatchedTokensFloor) {  // H30, H31, H32, H33
  combined_index idx;
  idx.ingest(update("r16", {legacy("p16", 16)}), t0);
  idx.ingest(update("r64", {legacy("p64", 64)}), t0);
  idx.ingest(update("r100", {legacy("p100", 100)}), t0);
  idx.ingest(update("r1", {legacy("p1", 1)}), t0);
  auto off64 = policy_with([](auto& p) {
    p.affinity_routing = false;
    p.minimum_matched_tokens = 64;
  });
  EXPECT_EQ(route_lookup(idx, exact_req("p16", 16), off64, t0).reason_code, "NO_HINT");
  auto h31 = route_lookup(idx, exact_req("p64", 64), no_policy, t0);
  EXPECT_EQ(h31.reason_code, "PREFIX_MATCH");
  EXPECT_EQ(h31.replica_scores.at(0).matched_tokens, 64);
  auto off256 = policy_with([](auto& p) {
    p.affinity_routing = false;
    p.minimum_matched_tokens = 256;
  });
  EXPECT_EQ(route_lookup(idx, exact_req("p100", 100), off256, t0).reason_code, "NO_HINT");
  auto zero = policy_with([](auto& p) { p.minimum_matched_tokens = 0; });
  auto h33 = route_lookup(idx, exact_req("p1", 1), zero, t0);
  EXPECT_EQ(h33.reason_code, "PREFIX_MATCH");
  EXPECT_EQ(h33.replica_scores.at(0).matched_tokens, 1);
}

TEST(RouteLookup, MatchedFloorPrunesShallowReplicas) {  // H34
  combined_index idx;
  idx.ingest(update("A", {chain({"b1", "b2", "b3", "b4"}, 16)}), t0);
  idx.ingest(update("B", {chain({"b1"}, 16)}), t0);
  auto pol = policy_with([](auto& p) { p.minimum_matched_tokens = 64; });
  auto resp = route_lookup(idx, chain_req({"b1", "b2", "b3", "b4"}, 16), pol, t0);
  EXPECT_EQ(resp.reason_code, "PREFIX_MATCH");
  ASSERT_EQ(resp.replica_scores.size(), 1u);
  EXPECT_EQ(resp.replica_scores[0].replica_id, "A");
  EXPECT_EQ(resp.replica_scores[0].matched_tokens, 64);
}

TEST(RouteLookup, PrunedReplicasAreNotCredited) {  // H35
  index_options o;
  o.max_entries = 6;
  combined_index idx(o);
  auto pol = lfu();
  pol.minimum_matched_tokens = 64;
  idx.set_tenant_policy("t", pol);
  idx.ingest(update("rB", {chain({"b1", "b2"}, 16)}), t0);
  idx.ingest(update("rA", {chain({"b1", "b2", "b3", "b4"}, 16)}), t0 + 1);
  for (int i = 0; i < 3; ++i) {
    auto resp = route_lookup(idx, chain_req({"b1", "b2", "b3", "b4"}, 16), pol, t0 + 2);
    ASSERT_EQ(resp.replica_scores.size(), 1u);
    EXPECT_EQ(resp.replica_scores[0].replica_id, "rA");
  }
  EXPECT_EQ(idx.find_entry("t", "m", "vllm", "", "b1", "rB")->access_count, 0);
  idx.ingest(update("rC", {legacy("filler", 16)}), t0 + 3);
  EXPECT_TRUE(idx.find_entry("t", "m", "vllm", "", "filler", "rC"));
  EXPECT_EQ(idx.facts().total_entries, 6);
}

TEST(RouteLookup, DeliveredMatchesProtectFromCapButTimeoutsDoNot) {  // H36, H37
  for (bool timed_out : {false, true}) {
    index_options o;
    o.max_entries = 1;
    combined_index idx(o);
    auto pol = lfu();
    pol.minimum_matched_tokens = 0;
    pol.lookup_timeout_ms = 5;
    idx.set_tenant_policy("t", pol);
    idx.ingest(update("A", {legacy("a", 32)}), t0);
    for (int i = 0; i < 3; ++i) {
      auto r = exact_req("a", 32);
      auto plan = plan_route(r, pol);
      ASSERT_FALSE(plan.early);
      auto d = decide_route(idx, r, plan, pol, t0);
      EXPECT_EQ(d.response.reason_code, "PREFIX_MATCH");
      if (!timed_out) commit_route(idx, r, d);  // a TIMEOUT never credits
    }
    idx.ingest(update("B", {legacy("b", 32)}), t0 + 1);
    EXPECT_EQ(idx.find_entry("t", "m", "vllm", "", "a", "A").has_value(), !timed_out);
    EXPECT_EQ(idx.find_entry("t", "m", "vllm", "", "b", "B").has_value(), timed_out);
  }
}

TEST(RouteLookup, RoutingFloorOnTopScore) {  // H38, H39, H40, H41, H42
  combined_index shared;
  for (auto r : {"r0", "r1", "r2"})
    shared.ingest(update(r, {legacy("rag-corpus-header", 1500)}), t0);
  auto off = policy_with([](auto& p) { p.affinity_routing = false; });
  EXPECT_EQ(route_lookup(shared, exact_req("rag-corpus-header", 1500), off, t0).reason_code,
            "NO_HINT");

  combined_index idx;
  idx.ingest(update("r0", {legacy("unique", 64)}), t0);
  idx.ingest(update("r1", {legacy("other", 32)}), t0);
  idx.ingest(update("r2", {legacy("other", 32)}), t0);
  auto h39 = route_lookup(idx, exact_req("unique", 64), no_policy, t0);
  EXPECT_EQ(h39.reason_code, "PREFIX_MATCH");
  EXPECT_EQ(h39.replica_scores.at(0).replica_id, "r0");
  auto floor100 = policy_with([](auto& p) {
    p.affinity_routing = false;
    p.routing_floor_score = 100;
  });
  EXPECT_EQ(route_lookup(idx, exact_req("unique", 64), floor100, t0).reason_code, "NO_HINT");

  combined_index chat;
  for (auto r : {"r0", "r1", "r2"}) chat.ingest(update(r, {legacy("chat", 16)}), t0);
  auto floor0 = policy_with([](auto& p) {
    p.routing_floor_score = 0;
    p.minimum_matched_tokens = 0;
  });
  auto h41 = route_lookup(chat, exact_req("chat", 16), floor0, t0);
  EXPECT_EQ(h41.reason_code, "PREFIX_MATCH");
  ASSERT_EQ(h41.replica_scores.size(), 3u);
  EXPECT_EQ(h41.replica_scores[0].score, 0.0f);

  combined_index solo;
  solo.ingest(update("solo", {legacy("p", 64)}), t0);
  EXPECT_EQ(route_lookup(solo, exact_req("p", 64), no_policy, t0).reason_code, "PREFIX_MATCH");
}

TEST(RouteLookup, TokenIdsAndExplicitChainMatchAlike) {  // H46
  combined_index idx;
  auto toks = tokens(1000, 64);
  subscriber_ingest(idx, "r1", toks);
  auto by_tokens = req();
  by_tokens.token_ids = toks;
  auto a = route_lookup(idx, by_tokens, no_policy, t0);
  std::vector<std::string> chain;
  for (auto h : fingerprint_chain(toks.data(), toks.size(), 16)) chain.push_back(to_wire(h));
  auto b = route_lookup(idx, chain_req(chain, 16), no_policy, t0);
  for (const auto& resp : {a, b}) {
    EXPECT_EQ(resp.reason_code, "PREFIX_MATCH");
    EXPECT_EQ(resp.replica_scores.at(0).matched_tokens, 64);
    EXPECT_TRUE(resp.token_ids.empty());
  }
}

TEST(RouteLookup, SubBlockTokenIdsFailOpen) {  // H47
  combined_index idx;
  auto u = update("warm", {legacy("other", 1)});
  u.stats = stats(0.9f);
  idx.ingest(u, t0);
  auto r = req();
  r.token_ids = tokens(1, 8);
  EXPECT_EQ(route_lookup(idx, r, no_policy, t0).reason_code, "NO_HINT");
}

TEST(RouteLookup, NovelTokenIdsGetAffinity) {  // H49
  combined_index idx;
  subscriber_ingest(idx, "r1", tokens(1000, 64));
  auto r = req();
  r.token_ids = tokens(5000, 64);
  auto resp = route_lookup(idx, r, no_policy, t0);
  EXPECT_EQ(resp.reason_code, "AFFINITY_HINT");
  EXPECT_EQ(resp.replica_scores.at(0).matched_tokens, 0);
}

TEST(RouteLookup, OversizedInputsFailOpen) {  // H52
  combined_index idx;
  subscriber_ingest(idx, "r1", tokens(1000, 64));
  auto r = req();
  r.token_ids.assign((1u << 20) + 1, 7);
  EXPECT_EQ(route_lookup(idx, r, no_policy, t0).reason_code, "NO_HINT");
  auto p = req();
  p.prompt_text.assign((1u << 20) + 1, 'x');
  auto resp = route_lookup(idx, p, no_policy, t0);
  EXPECT_EQ(resp.reason_code, "NO_HINT");
  EXPECT_TRUE(resp.token_ids.empty());
}

TEST(RouteLookup, ExplicitChainWinsOverTokenIds) {  // H53
  combined_index idx;
  auto toks = tokens(1000, 64);
  subscriber_ingest(idx, "r1", toks);
  std::vector<std::string> chain;
  for (auto h : fingerprint_chain(toks.data(), toks.size(), 16)) chain.push_back(to_wire(h));
  auto r = chain_req(chain, 16);
  r.token_ids = tokens(9000, 64);
  EXPECT_EQ(route_lookup(idx, r, no_policy, t0).reason_code, "PREFIX_MATCH");
}

TEST(RouteLookup, BlockSizeMustMatchProducer) {  // H55
  combined_index idx;
  auto toks = tokens(1000, 64);
  subscriber_ingest(idx, "r1", toks, 32);
  auto r = req();
  r.token_ids = toks;
  route_options b32;
  b32.block_size = 32;
  EXPECT_EQ(route_lookup(idx, r, no_policy, t0, b32).reason_code, "PREFIX_MATCH");
  EXPECT_NE(route_lookup(idx, r, no_policy, t0).reason_code, "PREFIX_MATCH");
}

TEST(RouteLookup, PromptTextWithoutTokenizerFailsOpen) {  // H59
  combined_index idx;
  subscriber_ingest(idx, "r1", tokens(1000, 64));
  auto r = req();
  r.prompt_text = "hello world";
  auto plan = plan_route(r, no_policy);
  EXPECT_TRUE(plan.default_tokenize_bound);
  auto resp = route_lookup(idx, r, no_policy, t0);
  EXPECT_EQ(resp.reason_code, "NO_HINT");
  EXPECT_TRUE(resp.token_ids.empty());
  EXPECT_TRUE(resp.adapter_id.empty());
}

// H50, H52 (tokenizer output), H54, H56–H59: the gateway's tokenizer output arrives as
// `prompt_tokens` (absent = no tokenizer or an error).
TEST(RouteLookup, PromptTokensMatchLikeTokenIdsAndAreEchoed) {  // H54
  combined_index idx;
  auto toks = tokens(2000000, 64);
  subscriber_ingest(idx, "r1", toks);
  auto r = req();
  r.prompt_text = "the text the tokenizer read";
  r.prompt_tokens = toks;
  EXPECT_TRUE(needs_prompt_tokens(r, no_policy));
  auto resp = route_lookup(idx, r, no_policy, t0);
  EXPECT_EQ(resp.reason_code, "PREFIX_MATCH");
  ASSERT_EQ(resp.replica_scores.size(), 1u);
  EXPECT_EQ(resp.replica_scores[0].replica_id, "r1");
  EXPECT_EQ(resp.token_ids, toks);
}

TEST(RouteLookup, NovelPromptTokensGetAffinityWithEcho) {  // H50
  combined_index idx;
  subscriber_ingest(idx, "r1", tokens(1000, 64));
  auto r = req();
  r.prompt_text = "novel";
  r.prompt_tokens = tokens(7000, 64);
  auto resp = route_lookup(idx, r, no_policy, t0);
  EXPECT_EQ(resp.reason_code, "AFFINITY_HINT");
  EXPECT_EQ(resp.token_ids, *r.prompt_tokens);
}

TEST(RouteLookup, PromptTokensBelowMinimumPrefixFailOpenWithEcho) {  // H56, H57
  combined_index idx;
  auto pol = policy_with([](auto& p) { p.minimum_prefix_tokens = 1000; });
  auto r = req();
  r.prompt_text = "short";
  r.prompt_tokens = tokens(1, 64);
  auto resp = route_lookup(idx, r, pol, t0);
  EXPECT_EQ(resp.reason_code, "NO_HINT");
  EXPECT_EQ(resp.token_ids.size(), 64u);
  r.prompt_tokens = tokens(1, 8);  // no full block
  resp = route_lookup(idx, r, no_policy, t0);
  EXPECT_EQ(resp.reason_code, "NO_HINT");
  EXPECT_EQ(resp.token_ids, tokens(1, 8));
}

TEST(RouteLookup, OversizedOrMissingPromptTokensFailOpenWithoutEcho) {  // H52, H58, H59
  combined_index idx;
  subscriber_ingest(idx, "r1", tokens(1000, 64));
  auto r = req();
  r.prompt_text = "x";
  r.prompt_tokens = std::vector<std::uint32_t>((1u << 20) + 1, 7);
  auto resp = route_lookup(idx, r, no_policy, t0);
  EXPECT_EQ(resp.reason_code, "NO_HINT");
  EXPECT_TRUE(resp.token_ids.empty());
  r.prompt_tokens = std::vector<std::uint32_t>{};
  EXPECT_TRUE(route_lookup(idx, r, no_policy, t0).token_ids.empty());
}

TEST(RouteLookup, PromptTextIsNotTokenizedWhenSomethingElseDecides) {
  auto r = req();
  r.prompt_text = "x";
  r.token_ids = tokens(1, 16);
  EXPECT_FALSE(needs_prompt_tokens(r, no_policy));  // token_ids win
  r.token_ids.clear();
  auto reserved = req(std::string(reserved_tenant));
  reserved.prompt_text = "x";
  EXPECT_FALSE(needs_prompt_tokens(reserved, no_policy));
  auto gated = policy_with([](auto& p) { p.require_chain = true; });
  EXPECT_FALSE(needs_prompt_tokens(r, gated));  // POLICY_REQUIRES_CHAIN comes first
  EXPECT_TRUE(needs_prompt_tokens(r, no_policy));
}

TEST(RouteLookup, SubscriberBlocksMatchWithoutFalsePositives) {  // H60
  combined_index idx;
  std::vector<std::string> keys;
  for (std::uint32_t i = 0; i < 8; ++i) {
    auto toks = tokens(10000 * (i + 1), 128);
    subscriber_ingest(idx, "r" + std::to_string(i), toks, 128);
    keys.push_back(to_wire(fingerprint_chain(toks.data(), 128, 128)[0]));
  }
  int matches = 0;
  int false_matches = 0;
  for (const auto& k : keys)
    matches += route_lookup(idx, chain_req({k}, 128), no_policy, t0).reason_code == "PREFIX_MATCH";
  for (std::uint32_t i = 0; i < 8; ++i) {
    auto toks = tokens(900000 + 1000 * i, 128);
    auto k = to_wire(fingerprint_chain(toks.data(), 128, 128)[0]);
    false_matches +=
        route_lookup(idx, chain_req({k}, 128), no_policy, t0).reason_code == "PREFIX_MATCH";
  }
  EXPECT_EQ(matches, 8);
  EXPECT_EQ(false_matches, 0);
}

TEST(RouteLookup, ReReportedBlockMovesToT2) {  // H61
  combined_index idx;
  auto toks = tokens(1, 128);
  subscriber_ingest(idx, "r1", toks, 128, "", 1);
  subscriber_ingest(idx, "r1", toks, 128, "", 2);  // ignore-removed mode re-reports as T2
  auto resp = route_lookup(
      idx, chain_req({to_wire(fingerprint_chain(toks.data(), 128, 128)[0])}, 128), no_policy, t0);
  EXPECT_EQ(resp.reason_code, "PREFIX_MATCH");
  EXPECT_EQ(resp.replica_scores.at(0).tier, 2);
}

TEST(RouteLookup, RemovedBlockEmptiesIndex) {  // H62
  combined_index idx;
  auto toks = tokens(1, 128);
  subscriber_ingest(idx, "r1", toks, 128);
  const std::string key = to_wire(fingerprint_chain(toks.data(), 128, 128)[0]);
  cache_event ev;
  ev.type = static_cast<int>(event_type::prefix_evicted);
  ev.tenant_id = "t";
  ev.model_id = "m";
  ev.replica_id = "r1";
  ev.prefix_hash = key;
  idx.apply_event(ev, t0);
  auto resp = route_lookup(idx, chain_req({key}, 128), no_policy, t0);
  EXPECT_EQ(resp.reason_code, "NO_HINT");
  EXPECT_TRUE(resp.replica_scores.empty());
}

TEST(RouteLookup, UnknownCodesEchoAdapter) {  // §3.11 adapter echo
  combined_index idx;
  idx.ingest(update("r", {legacy("p", 128)}), t0);
  auto r = exact_req("p", 128, "nobody");
  r.adapter_id = "lora-x";
  auto resp = route_lookup(idx, r, no_policy, t0);
  EXPECT_EQ(resp.reason_code, "UNKNOWN_TENANT");
  EXPECT_EQ(resp.adapter_id, "lora-x");
}

}  // namespace
}  // namespace ic::index
