#include "policy/resolve.hpp"

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ic::policy {
namespace {

using namespace std::chrono_literals;

constexpr std::chrono::nanoseconds server_ttl = 2h;  // a non-default --default-ttl

TEST(ResolvePolicy, NoPolicyUsesTheGlobalDefaults) {
  const auto r = resolved_policy::no_policy(server_ttl);
  EXPECT_EQ(r.eviction_ttl, server_ttl);
  EXPECT_EQ(r.eviction, eviction_mode::lru);
  EXPECT_EQ(r.minimum_prefix_tokens, 0);
  EXPECT_EQ(r.minimum_matched_tokens, 64);
  EXPECT_FLOAT_EQ(r.routing_floor_score, 0.1f);
  EXPECT_EQ(r.lookup_timeout_ms, 0);
  EXPECT_TRUE(r.affinity_routing);
  EXPECT_TRUE(r.enable_chain_matching);
  EXPECT_FALSE(r.require_chain);
  EXPECT_TRUE(r.enable_tenant_hot);
  EXPECT_EQ(resolved_policy::no_policy().eviction_ttl, 30min);
  EXPECT_EQ(resolved_policy::no_policy(30min), resolved_policy::no_policy());
}

TEST(ResolvePolicy, ZeroValuedPolicyDiffersFromNoPolicyOnlyInTheMatchedTokensFloor) {
  cache_policy zero;
  zero.namespace_name = "a";
  const auto r = resolve_policy(zero, server_ttl);
  auto want = resolved_policy::no_policy(server_ttl);
  want.minimum_matched_tokens = 0;  // a present policy's 0 turns the floor off (§7.19)
  EXPECT_EQ(r, want);
  EXPECT_NE(r, resolved_policy::no_policy(server_ttl));
}

struct knob_case {
  const char* name;
  std::function<void(cache_policy&)> set;
  std::function<void(resolved_policy&)> want;  // applied to the zero-policy resolution
};

TEST(ResolvePolicy, AppliesEveryDefaultAndClampOfTheResolutionTable) {
  const std::vector<knob_case> cases = {
      // evictionTTL: value if > 0, else the server default.
      {"ttl positive", [](cache_policy& p) { p.eviction_ttl_ns = 90'000'000'000; },
       [](resolved_policy& r) { r.eviction_ttl = 90s; }},
      {"ttl 1ns", [](cache_policy& p) { p.eviction_ttl_ns = 1; },
       [](resolved_policy& r) { r.eviction_ttl = 1ns; }},
      {"ttl zero", [](cache_policy& p) { p.eviction_ttl_ns = 0; }, [](resolved_policy&) {}},
      {"ttl negative", [](cache_policy& p) { p.eviction_ttl_ns = -5; }, [](resolved_policy&) {}},
      // eviction: case-insensitive "lfu", anything else LRU.
      {"eviction lfu", [](cache_policy& p) { p.eviction = "lfu"; },
       [](resolved_policy& r) { r.eviction = eviction_mode::lfu; }},
      {"eviction LFU", [](cache_policy& p) { p.eviction = "LFU"; },
       [](resolved_policy& r) { r.eviction = eviction_mode::lfu; }},
      {"eviction Lfu", [](cache_policy& p) { p.eviction = "Lfu"; },
       [](resolved_policy& r) { r.eviction = eviction_mode::lfu; }},
      {"eviction lru", [](cache_policy& p) { p.eviction = "lru"; }, [](resolved_policy&) {}},
      {"eviction unknown", [](cache_policy& p) { p.eviction = "fifo"; }, [](resolved_policy&) {}},
      {"eviction lfu padded", [](cache_policy& p) { p.eviction = " lfu"; }, [](resolved_policy&) {}},
      // minimumPrefixTokens: value, <= 0 off.
      {"min prefix 50", [](cache_policy& p) { p.minimum_prefix_tokens = 50; },
       [](resolved_policy& r) { r.minimum_prefix_tokens = 50; }},
      {"min prefix negative", [](cache_policy& p) { p.minimum_prefix_tokens = -5; },
       [](resolved_policy&) {}},
      // minimumMatchedTokens: as-is, 0 off, negative 0 (H43).
      {"min matched 256", [](cache_policy& p) { p.minimum_matched_tokens = 256; },
       [](resolved_policy& r) { r.minimum_matched_tokens = 256; }},
      {"min matched 0", [](cache_policy& p) { p.minimum_matched_tokens = 0; },
       [](resolved_policy& r) { r.minimum_matched_tokens = 0; }},
      {"min matched -1", [](cache_policy& p) { p.minimum_matched_tokens = -1; },
       [](resolved_policy& r) { r.minimum_matched_tokens = 0; }},
      // routingFloorScore: nil 0.1, negative 0, else value (H43).
      {"floor nil", [](cache_policy& p) { p.routing_floor_score.reset(); },
       [](resolved_policy& r) { r.routing_floor_score = 0.1f; }},
      {"floor 0.5", [](cache_policy& p) { p.routing_floor_score = 0.5f; },
       [](resolved_policy& r) { r.routing_floor_score = 0.5f; }},
      {"floor 100", [](cache_policy& p) { p.routing_floor_score = 100.0f; },
       [](resolved_policy& r) { r.routing_floor_score = 100.0f; }},
      {"floor 0 = off", [](cache_policy& p) { p.routing_floor_score = 0.0f; },
       [](resolved_policy& r) { r.routing_floor_score = 0.0f; }},
      {"floor negative", [](cache_policy& p) { p.routing_floor_score = -0.3f; },
       [](resolved_policy& r) { r.routing_floor_score = 0.0f; }},
      // lookupTimeoutMs: value if > 0.
      {"timeout 5", [](cache_policy& p) { p.lookup_timeout_ms = 5; },
       [](resolved_policy& r) { r.lookup_timeout_ms = 5; }},
      {"timeout negative", [](cache_policy& p) { p.lookup_timeout_ms = -7; },
       [](resolved_policy&) {}},
      // affinityRouting: nil true, else value.
      {"affinity false", [](cache_policy& p) { p.affinity_routing = false; },
       [](resolved_policy& r) { r.affinity_routing = false; }},
      {"affinity true", [](cache_policy& p) { p.affinity_routing = true; },
       [](resolved_policy&) {}},
      // strategy: nil strategy / nil field = defaults.
      {"strategy empty", [](cache_policy& p) { p.strategy = policy_strategy{}; },
       [](resolved_policy&) {}},
      {"strategy chain off",
       [](cache_policy& p) { p.strategy = policy_strategy{}; p.strategy->enable_chain_matching = false; },
       [](resolved_policy& r) { r.enable_chain_matching = false; }},
      {"strategy require chain",
       [](cache_policy& p) { p.strategy = policy_strategy{}; p.strategy->require_chain = true; },
       [](resolved_policy& r) { r.require_chain = true; }},
      {"strategy tenant hot off",
       [](cache_policy& p) { p.strategy = policy_strategy{}; p.strategy->enable_tenant_hot = false; },
       [](resolved_policy& r) { r.enable_tenant_hot = false; }},
      {"strategy explicit defaults",
       [](cache_policy& p) { p.strategy = policy_strategy{true, false, true}; },
       [](resolved_policy&) {}},
  };
  cache_policy zero;
  zero.namespace_name = "a";
  const resolved_policy base = resolve_policy(zero, server_ttl);
  for (const auto& c : cases) {
    cache_policy p = zero;
    c.set(p);
    resolved_policy want = base;
    c.want(want);
    EXPECT_EQ(resolve_policy(p, server_ttl), want) << c.name;
  }
}

TEST(ResolvePolicy, NeverYieldsANonPositiveTtl) {
  for (std::int64_t ttl : {std::int64_t{0}, std::int64_t{-1}, std::numeric_limits<std::int64_t>::min()}) {
    cache_policy p;
    p.eviction_ttl_ns = ttl;
    EXPECT_EQ(resolve_policy(p, server_ttl).eviction_ttl, server_ttl) << ttl;
  }
}

TEST(ResolveQuota, ClampsNegativeToZero) {
  EXPECT_EQ(resolve_quota(cache_tenant{"t", 10, ""}), 10);
  EXPECT_EQ(resolve_quota(cache_tenant{"t", 0, ""}), 0);
  EXPECT_EQ(resolve_quota(cache_tenant{"t", -5, ""}), 0);
  EXPECT_EQ(resolve_quota(cache_tenant{"t", std::numeric_limits<std::int64_t>::min(), ""}), 0);
}

TEST(ResolvePolicySet, DropsEmptyKeysAndTheReservedTenantQuota) {
  policy_set set;
  cache_policy a;
  a.namespace_name = "a";
  a.lookup_timeout_ms = 5;
  cache_policy unnamed;
  unnamed.lookup_timeout_ms = 9;
  set.policies = {unnamed, a};
  set.tenants = {cache_tenant{"", 1, ""}, cache_tenant{std::string(reserved_probe_tenant), 1, ""},
                 cache_tenant{"t", -3, "Fairness"}};
  const auto r = resolve_policy_set(set, server_ttl);
  ASSERT_EQ(r.policies.size(), 1u);
  EXPECT_EQ(r.policies.at("a").lookup_timeout_ms, 5);
  ASSERT_EQ(r.quotas.size(), 1u);
  EXPECT_EQ(r.quotas.at("t"), 0);
}

TEST(ResolvePolicySet, LastEntryWinsForARepeatedKey) {
  policy_set set;
  cache_policy first;
  first.namespace_name = "a";
  first.lookup_timeout_ms = 1;
  cache_policy second = first;
  second.lookup_timeout_ms = 2;
  set.policies = {first, second};
  set.tenants = {cache_tenant{"t", 1, ""}, cache_tenant{"t", 2, ""}};
  const auto r = resolve_policy_set(set, server_ttl);
  EXPECT_EQ(r.policies.at("a").lookup_timeout_ms, 2);
  EXPECT_EQ(r.quotas.at("t"), 2);
}

}  // namespace
}  // namespace ic::policy
