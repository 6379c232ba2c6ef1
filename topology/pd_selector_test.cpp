// LookupPDRoute selection: the scenarios of pd-templates.md §2.8 decidable without the
// server, on real tenant indexes (entries, TTL, events, classifier; held by the combined test
// oracle, which hands out the request tenant's index); stats rows arrive by stats ingests and
// REPLICA_UPDATED events into the same index, as on the server.
// Each test is named after its scenario number; fixture F is built in `PdRouteScenarios`.
#include "topology/pd_selector.hpp"

#include <string>

#include <gtest/gtest.h>

#include "index/test_support.hpp"
#include "index/testing/combined_index.hpp"
#include "topology/topology_json.hpp"

namespace ic::topology {
namespace {

using index::testing::legacy;
using index::testing::minute;
using index::testing::t0;
using index::testing::update;

/// The view the server builds for one request: the request tenant's index and the totals.
index_pd_view view_of(const index::combined_index& idx, std::string_view tenant) {
  return index_pd_view(idx.tenant(tenant), idx.facts().total_keys);
}

constexpr micros second = 1'000'000;
const std::string K("\x01\x02\x03\x04\x05\x06\x07\x08", 8);

/// A clock that returns `t`, then `t + step`, `t + 2·step`, ... on successive reads.
class stepping_clock : public clock {
 public:
  explicit stepping_clock(micros t, micros step = 0) : t_(t), step_(step) {}
  micros now() const override { return t_ + step_ * reads_++; }

 private:
  micros t_;
  micros step_;
  mutable micros reads_ = 0;
};

struct expect_answer {
  std::string reason, prefill, decode, transport;
};

std::string topology_body(const std::string& prefill_members, const std::string& extra = "",
                          const std::string& decode_members = R"("replicaIds":["d-0","d-1"])") {
  return R"({"version":1,"topologies":[{"namespace":"serving","name":"pd","hashScheme":"vllm",)"
         R"("prefillPools":[{"name":"p","acceleratorType":"h100",)" + prefill_members + "}],"
         R"("decodePools":[{"name":"d","acceleratorType":"h100",)" + decode_members + "}],"
         R"("acceleratorTypes":[{"name":"h100","vendor":"nvidia","model":"H100"}])" + extra + "}]}";
}

/// Fixture F of §2.8.
class PdRouteScenarios : public ::testing::Test {
 protected:
  void SetUp() override {
    push(topology_body(R"("replicaIds":["p-0","p-1","p-2"])"));
    feed_stats(index);
    hold("p-1", 256);
    hold("d-0", 256);
    request.model_id = "m";
    request.tenant_id = "serving";
    request.prefix_hash = K;
    request.prefix_token_count = 256;
    request.pd_topology_ref = "serving/pd";
  }

  void push(const std::string& body) {
    auto set = parse_topology_body(body);
    ASSERT_TRUE(set) << set.error();
    store.apply(std::move(*set));
  }
  /// Reports fixture F's stats at t0 into `idx` (a stats-only update per replica).
  static void feed_stats(index::combined_index& idx) {
    for (auto [id, p] : {std::pair<const char*, float>{"p-0", 0.2f}, {"p-1", 0.5f}, {"p-2", 0.1f},
                         {"d-0", 0.4f}, {"d-1", 0.3f}}) {
      set_stats(idx, id, p, t0);
    }
  }
  static void set_stats(index::combined_index& idx, const std::string& id, float pressure,
                        micros last_seen, const std::string& tenant = "serving") {
    idx.ingest(index::testing::stats_only(id, index::testing::stats(0, pressure), tenant, "m"),
               last_seen);
  }
  void set_stats(const std::string& id, float pressure, micros last_seen,
                 const std::string& tenant = "serving") {
    set_stats(index, id, pressure, last_seen, tenant);
  }
  /// A REPLICA_UPDATED event for `id` at `at` (refreshes its stats row's last_seen).
  void touch(const std::string& id, micros at) {
    index.apply_event({static_cast<std::int32_t>(index::event_type::replica_updated), id, "m",
                       "serving", "", 0, ""},
                      at);
  }
  void hold(const std::string& replica, std::int32_t tokens, micros at = t0,
            const std::string& scheme = "vllm", const std::string& adapter = "",
            const std::string& tenant = "serving") {
    index.ingest(update(replica, {legacy(K, tokens, 0, adapter)}, tenant, "m", scheme), at);
  }
  pd_route_response run(const policy::resolved_policy& pol = policy::resolved_policy::no_policy(),
                        std::optional<micros> deadline = std::nullopt) {
    index_pd_view view = view_of(index, request.tenant_id);
    stepping_clock c(t0);
    return select_pd_route(request, *store.current(), pol, view, c, deadline);
  }
  static void expect(const pd_route_response& got, const expect_answer& want) {
    EXPECT_EQ(got.reason_code, want.reason);
    EXPECT_EQ(got.prefill_replica_id, want.prefill);
    EXPECT_EQ(got.decode_replica_id, want.decode);
    EXPECT_EQ(got.transport_hint, want.transport);
  }
  static void expect_empty(const pd_route_response& got, std::string_view reason) {
    expect(got, {std::string(reason), "", "", ""});
  }

  index::combined_index index;
  topology_store store;
  pd_route_request request;
};

const expect_answer scenario1{"PREFIX_MATCH", "p-1", "d-1", "NIXL"};
const expect_answer affinity_p2{"AFFINITY_HINT", "p-2", "d-1", "NIXL"};

TEST(PdSelectorFacts, ComputedAffinityOfKMatchesTheSpec) {
  // SHA256(K)[0..8] = 66840dda154e8a11 ≡ 2 (mod 3), ≡ 1 (mod 2).
  EXPECT_EQ(index::affinity_index(K, 3), 2u);
  EXPECT_EQ(index::affinity_index(K, 2), 1u);
}

TEST_F(PdRouteScenarios, Scenario01_DecodeLowestPressurePrefillHolder) { expect(run(), scenario1); }

TEST_F(PdRouteScenarios, Scenario02_HigherScoreWinsOverFreerHolder) {
  hold("p-0", 128);
  expect(run(), scenario1);
}

TEST_F(PdRouteScenarios, Scenario03_ScoreIncludesPressure) {
  index.apply_event({2, "p-1", "m", "serving", K, 0, ""}, t0);  // PREFIX_EVICTED
  hold("p-0", 256);
  hold("p-2", 256);
  expect(run(), {"PREFIX_MATCH", "p-2", "d-1", "NIXL"});
}

TEST_F(PdRouteScenarios, Scenario04_BelowMatchedFloorFallsBackToAffinity) {
  hold("p-1", 48);
  expect(run(), affinity_p2);
}

TEST_F(PdRouteScenarios, Scenario05_AffinityOffGivesNoHint) {
  hold("p-1", 48);
  auto pol = policy::resolved_policy::no_policy();
  pol.affinity_routing = false;
  pol.minimum_matched_tokens = 64;
  expect_empty(run(pol), "NO_HINT");
}

TEST_F(PdRouteScenarios, Scenario06_FloorOffKeepsTheSmallHolder) {
  hold("p-1", 48);
  auto pol = policy::resolved_policy::no_policy();
  pol.minimum_matched_tokens = 0;
  expect(run(pol), scenario1);
}

TEST_F(PdRouteScenarios, Scenario07_NovelPrefixInKnownScopeGetsAffinity) {
  // Nobody holds K; the tenant has other vllm keys.
  index.apply_event({2, "p-1", "m", "serving", K, 0, ""}, t0);  // PREFIX_EVICTED
  index.apply_event({2, "d-0", "m", "serving", K, 0, ""}, t0);
  index.ingest(update("p-0", {legacy("other-key", 100)}, "serving", "m", "vllm"), t0);
  expect(run(), affinity_p2);
  // Another novel prefix: the pick follows its own SHA-256 (mod 3 over [p-0, p-1, p-2]).
  request.prefix_hash = std::string("\x09\x09\x09\x09\x09\x09\x09\x09", 8);
  const auto pick = index::affinity_index(request.prefix_hash, 3);
  expect(run(), {"AFFINITY_HINT", "p-" + std::to_string(pick), "d-1", "NIXL"});
}

TEST_F(PdRouteScenarios, Scenario08_TenantWithoutPrefixesIsUnknownTenant) {
  index::combined_index other;
  feed_stats(other);  // serving reports stats but holds no prefix
  other.ingest(update("x", {legacy(K, 256)}, "someone-else", "m", "vllm"), t0);
  index_pd_view view = view_of(other, request.tenant_id);
  stepping_clock c(t0);
  expect_empty(select_pd_route(request, *store.current(), policy::resolved_policy::no_policy(),
                               view, c),
               "UNKNOWN_TENANT");
}

TEST_F(PdRouteScenarios, Scenario09_PrefixesUnderAnotherSchemeAreUnknownHashScheme) {
  index::combined_index sglang;
  feed_stats(sglang);
  sglang.ingest(update("p-1", {legacy(K, 256)}, "serving", "m", "sglang"), t0);
  index_pd_view view = view_of(sglang, request.tenant_id);
  stepping_clock c(t0);
  expect_empty(select_pd_route(request, *store.current(), policy::resolved_policy::no_policy(),
                               view, c),
               "UNKNOWN_HASH_SCHEME");
}

TEST_F(PdRouteScenarios, Scenario10_EmptyIndexIsColdStartAffinity) {
  index::combined_index empty;
  feed_stats(empty);  // stats rows, no prefixes
  index_pd_view view = view_of(empty, request.tenant_id);
  stepping_clock c(t0);
  expect(select_pd_route(request, *store.current(), policy::resolved_policy::no_policy(), view, c),
         affinity_p2);
}

TEST_F(PdRouteScenarios, Scenario11_UnknownRef) {
  request.pd_topology_ref = "serving/nope";
  expect_empty(run(), "UNKNOWN_TOPOLOGY");
}

TEST_F(PdRouteScenarios, Scenario12_EmptyRefIsNoHint) {
  request.pd_topology_ref = "";
  expect_empty(run(), "NO_HINT");
}

TEST_F(PdRouteScenarios, Scenario13_BareNameResolvesInTheTenantNamespace) {
  request.pd_topology_ref = "pd";
  expect(run(), scenario1);
}

TEST_F(PdRouteScenarios, Scenario14_NamespaceMustEqualTenant) {
  request.tenant_id = "other";
  expect_empty(run(), "UNKNOWN_TOPOLOGY");
}

TEST_F(PdRouteScenarios, Scenario15_MalformedRefs) {
  for (const char* ref : {"a/b/c", "/pd", "serving/", "serving/pd/"}) {
    request.pd_topology_ref = ref;
    expect_empty(run(), "UNKNOWN_TOPOLOGY");
  }
}

TEST_F(PdRouteScenarios, Scenario16_MissingHashOrModelIsNoHint) {
  request.prefix_hash.clear();
  expect_empty(run(), "NO_HINT");
  request.prefix_hash = K;
  request.model_id.clear();
  expect_empty(run(), "NO_HINT");
}

TEST_F(PdRouteScenarios, Scenario17_ReservedTenantIsNoHint) {
  request.tenant_id = std::string(index::reserved_tenant);
  expect_empty(run(), "NO_HINT");
}

TEST_F(PdRouteScenarios, Scenario18_NoLiveDecodeIsNoHint) {
  set_stats("d-0", 0.4f, t0 - 61 * second);
  set_stats("d-1", 0.3f, t0 - 61 * second);
  expect_empty(run(), "NO_HINT");
}

TEST_F(PdRouteScenarios, Scenario19_RefreshedLastSeenMakesAReplicaLiveAgain) {
  // The REPLICA_UPDATED → last_seen refresh itself is the wiring's (end-to-end row); here
  // the refreshed row is what the selector sees.
  set_stats("d-1", 0.3f, t0 - 90 * second);
  expect(run(), {"PREFIX_MATCH", "p-1", "d-0", "NIXL"});
  touch("d-1", t0 - 10 * second);
  expect(run(), scenario1);
}

TEST_F(PdRouteScenarios, Scenario20_SaturatedDecodeIsSkipped) {
  set_stats("d-1", 1.0f, t0);
  expect(run(), {"PREFIX_MATCH", "p-1", "d-0", "NIXL"});
}

TEST_F(PdRouteScenarios, Scenario21_AllDecodesSaturatedIsNoHint) {
  set_stats("d-0", 1.0f, t0);
  set_stats("d-1", 1.5f, t0);
  expect_empty(run(), "NO_HINT");
}

TEST_F(PdRouteScenarios, Scenario22_DecodeTieBrokenBySha256) {
  set_stats("d-0", 0.3f, t0);
  expect(run(), scenario1);  // index 1 of [d-0, d-1]
}

TEST_F(PdRouteScenarios, Scenario23_NoLivePrefillIsNoHint) {
  for (const char* id : {"p-0", "p-1", "p-2"}) set_stats(id, 0.1f, t0 - 61 * second);
  expect_empty(run(), "NO_HINT");
}

TEST_F(PdRouteScenarios, Scenario24_BusyPrefillFallsBackToLocalPrefill) {
  push(topology_body(R"("replicaIds":["p-0","p-1","p-2"])",
                     R"(,"selection":{"localPrefillWhenPrefillBusy":true})"));
  for (const char* id : {"p-0", "p-1", "p-2"}) set_stats(id, 0.1f, t0 - 61 * second);
  expect(run(), {"LOCAL_PREFILL", "d-1", "d-1", "Direct"});
}

TEST_F(PdRouteScenarios, Scenario25_ShortUncachedPromptPrefillsLocally) {
  push(topology_body(R"("replicaIds":["p-0","p-1","p-2"])",
                     R"(,"selection":{"localPrefillMaxUncachedTokens":512})"));
  expect(run(), {"LOCAL_PREFILL", "d-1", "d-1", "Direct"});
}

TEST_F(PdRouteScenarios, Scenario26_DecodeHoldingThePrefixPrefillsLocally) {
  push(topology_body(R"("replicaIds":["p-0","p-1","p-2"])",
                     R"(,"selection":{"localPrefillMaxUncachedTokens":128})"));
  request.prefix_token_count = 1024;
  hold("d-1", 1024);
  expect(run(), {"LOCAL_PREFILL", "d-1", "d-1", "Direct"});
}

TEST_F(PdRouteScenarios, Scenario27_LongUncachedPromptGoesToThePrefillHolder) {
  push(topology_body(R"("replicaIds":["p-0","p-1","p-2"])",
                     R"(,"selection":{"localPrefillMaxUncachedTokens":128})"));
  request.prefix_token_count = 1024;
  hold("p-1", 1024);
  expect(run(), scenario1);
}

TEST_F(PdRouteScenarios, Scenario28_ZeroTokenCountSkipsTheLocalRule) {
  push(topology_body(R"("replicaIds":["p-0","p-1","p-2"])",
                     R"(,"selection":{"localPrefillMaxUncachedTokens":512})"));
  request.prefix_token_count = 0;
  expect(run(), scenario1);
}

TEST_F(PdRouteScenarios, Scenario29_ReplicaOnBothSidesGetsDirect) {
  push(topology_body(R"("replicaIds":["p-0","p-1","p-2","b-0"])", "",
                     R"("replicaIds":["d-0","d-1","b-0"])"));
  index.apply_event({2, "p-1", "m", "serving", K, 0, ""}, t0);
  set_stats("b-0", 0.05f, t0);
  hold("b-0", 256);
  expect(run(), {"PREFIX_MATCH", "b-0", "b-0", "Direct"});
}

TEST_F(PdRouteScenarios, Scenario30_ExplicitTopologyTransportWins) {
  push(topology_body(R"("replicaIds":["p-0","p-1","p-2"])", R"(,"transport":"Mooncake")"));
  expect(run(), {"PREFIX_MATCH", "p-1", "d-1", "Mooncake"});
}

TEST_F(PdRouteScenarios, Scenario32_ExpiredEntryIsIgnored) {
  hold("p-1", 256, t0 - 30 * minute);  // refresh with an old timestamp: last_seen = t0 − 30 min
  ASSERT_EQ(index.find_entry("serving", "m", "vllm", "", K, "p-1")->last_seen, t0 - 30 * minute);
  expect(run(), affinity_p2);
}

TEST_F(PdRouteScenarios, Scenario33_AdapterEntriesAreNotTheDefaultPartition) {
  index.apply_event({2, "p-1", "m", "serving", K, 0, ""}, t0);
  hold("p-1", 256, t0, "vllm", "lora-a");
  expect(run(), affinity_p2);
}

TEST_F(PdRouteScenarios, Scenario34_EvictedEntryIsGone) {
  index.apply_event({2, "p-1", "m", "serving", K, 0, ""}, t0);
  expect(run(), affinity_p2);
}

TEST_F(PdRouteScenarios, Scenario35_PatternMembersComeFromStatsRows) {
  push(topology_body(R"("replicaIdPatterns":["p-*"])"));
  set_stats("p-9", 0.05f, t0);
  hold("p-9", 256);
  set_stats("q-1", 0.0f, t0);  // not a member
  hold("q-1", 4096);
  expect(run(), {"PREFIX_MATCH", "p-9", "d-1", "NIXL"});
}

TEST_F(PdRouteScenarios, Scenario36_RequireChainPolicy) {
  auto pol = policy::resolved_policy::no_policy();
  pol.require_chain = true;
  expect_empty(run(pol), "POLICY_REQUIRES_CHAIN");
}

TEST_F(PdRouteScenarios, Scenario37_ExpiredDeadlineIsTimeout) {
  auto pol = policy::resolved_policy::no_policy();
  pol.lookup_timeout_ms = 5;
  expect_empty(run(pol, t0 - 1), "TIMEOUT");
  expect_empty(run(pol, t0), "TIMEOUT");
  // The tenant budget breached during the lookup (the clock advances 10 ms per read).
  index_pd_view view = view_of(index, request.tenant_id);
  stepping_clock slow(t0, 10'000);
  expect_empty(select_pd_route(request, *store.current(), pol, view, slow), "TIMEOUT");
  // Reserved tenant beats TIMEOUT; TIMEOUT beats requireChain.
  request.tenant_id = std::string(index::reserved_tenant);
  expect_empty(run(pol, t0 - 1), "NO_HINT");
  request.tenant_id = "serving";
  pol.require_chain = true;
  expect_empty(run(pol, t0 - 1), "TIMEOUT");
}

TEST_F(PdRouteScenarios, Scenario38_ModelNotServedByTopology) {
  push(topology_body(R"("replicaIds":["p-0","p-1","p-2"])", R"(,"models":["m2"])"));
  expect_empty(run(), "UNKNOWN_TOPOLOGY");
  push(topology_body(R"("replicaIds":["p-0","p-1","p-2"])", R"(,"models":["m2","m"])"));
  expect(run(), scenario1);
}

TEST_F(PdRouteScenarios, Scenario39_ReplaceOnWriteDropsTheTopology) {
  auto set = parse_topology_body(R"({"version":1,"topologies":[]})");
  ASSERT_TRUE(set);
  store.apply(*set);
  expect_empty(run(), "UNKNOWN_TOPOLOGY");
}

TEST_F(PdRouteScenarios, Scenario41_RestoredStoreAnswersTheSame) {
  // Byte-equal GET after a journal round trip (the restart itself is an end-to-end row).
  const std::string bytes = store.to_bytes();
  topology_store restored;
  auto set = topology_store::from_bytes(bytes);
  ASSERT_TRUE(set) << set.error();
  restored.apply(*set);
  EXPECT_EQ(restored.to_json(), store.to_json());
  index_pd_view view = view_of(index, request.tenant_id);
  stepping_clock c(t0);
  expect(select_pd_route(request, *restored.current(), policy::resolved_policy::no_policy(), view, c),
         scenario1);
}

TEST_F(PdRouteScenarios, Scenario42_SelectionNeverCreditsLfu) {
  auto lfu = policy::resolved_policy::no_policy();
  lfu.eviction = policy::eviction_mode::lfu;
  index.set_tenant_policy("serving", lfu);
  const auto before = index.find_entry("serving", "m", "vllm", "", K, "p-1")->access_count;
  for (int i = 0; i < 100; ++i) expect(run(lfu), scenario1);
  EXPECT_EQ(index.find_entry("serving", "m", "vllm", "", K, "p-1")->access_count, before);
}

TEST_F(PdRouteScenarios, Scenario44_IdenticalCallsGiveIdenticalAnswers) {
  const auto first = run();
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(run(), first);
}

TEST_F(PdRouteScenarios, EmptyStoreAnswersUnknownTopology) {
  topology_store empty;
  index_pd_view view = view_of(index, request.tenant_id);
  stepping_clock c(t0);
  expect_empty(select_pd_route(request, *empty.current(), policy::resolved_policy::no_policy(), view, c),
               "UNKNOWN_TOPOLOGY");
}

TEST(PdReason, HintUsedOnlyForPositiveCodes) {
  for (const char* c : {"PREFIX_MATCH", "AFFINITY_HINT", "LOCAL_PREFILL"}) EXPECT_TRUE(hint_used(c));
  for (const char* c : {"NO_HINT", "TIMEOUT", "UNKNOWN_TOPOLOGY", "UNKNOWN_TENANT",
                        "POLICY_REQUIRES_CHAIN"}) {
    EXPECT_FALSE(hint_used(c));
  }
}

}  // namespace
}  // namespace ic::topology
