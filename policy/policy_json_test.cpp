#include "policy/policy_json.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ic::policy {
namespace {

policy_set parse_ok(const std::string& body) {
  auto got = parse_policy_body(body);
  EXPECT_TRUE(got.has_value()) << body << "\n-> " << (got ? "" : got.error());
  return got ? *got : policy_set{};
}

policy_strategy strategy_of(std::optional<bool> chain, std::optional<bool> require,
                            std::optional<bool> hot) {
  policy_strategy s;
  s.enable_chain_matching = chain;
  s.require_chain = require;
  s.enable_tenant_hot = hot;
  return s;
}

// ---- versions and back-fill (spec/operations.md §2.2) ----------------------------------

struct backfill_case {
  int version;
  cache_policy want;  // for the body {"namespace":"a"} and nothing else
};

TEST(PolicyJson, BackFillsFieldsMissingInOlderVersions) {
  cache_policy v3;
  v3.namespace_name = "a";
  v3.minimum_matched_tokens = 64;
  v3.routing_floor_score = 0.1f;
  v3.strategy = strategy_of(true, false, true);
  v3.affinity_routing = true;

  cache_policy v4 = v3;
  v4.minimum_matched_tokens = 0;  // v4 has minimumMatchedTokens: absent is a real 0

  cache_policy v5 = v4;
  v5.routing_floor_score.reset();  // v5 has routingFloorScore: absent stays nil

  cache_policy v6 = v5;
  v6.strategy.reset();  // v6 has strategy: absent stays nil

  cache_policy v7 = v6;
  v7.affinity_routing.reset();  // v7 stored verbatim

  const backfill_case cases[] = {{3, v3}, {4, v4}, {5, v5}, {6, v6}, {7, v7}};
  for (const auto& c : cases) {
    const auto set = parse_ok(R"({"version":)" + std::to_string(c.version) +
                              R"(,"policies":[{"namespace":"a"}]})");
    EXPECT_EQ(set.version, c.version);
    ASSERT_EQ(set.policies.size(), 1u) << "version " << c.version;
    EXPECT_EQ(set.policies[0], c.want) << "version " << c.version;
  }
}

TEST(PolicyJson, BackFillOnlyReplacesMissingOrZeroValues) {
  const auto set = parse_ok(R"({"version":3,"policies":[{"namespace":"a",
      "minimumMatchedTokens":100,"routingFloorScore":0,"affinityRouting":false,
      "strategy":{"requireChain":true}}]})");
  ASSERT_EQ(set.policies.size(), 1u);
  const auto& p = set.policies[0];
  EXPECT_EQ(p.minimum_matched_tokens, 100);
  EXPECT_EQ(p.routing_floor_score, std::optional<float>(0.0f));
  EXPECT_EQ(p.affinity_routing, std::optional<bool>(false));
  EXPECT_EQ(p.strategy, std::optional<policy_strategy>(strategy_of(true, true, true)));
}

TEST(PolicyJson, VersionSixFillsNestedStrategyNilsButKeepsSetOnes) {
  const auto v5 = parse_ok(R"({"version":5,"policies":[{"namespace":"a",
      "strategy":{"enableTenantHot":false}}]})");
  EXPECT_EQ(v5.policies.at(0).strategy,
            std::optional<policy_strategy>(strategy_of(true, false, false)));
  const auto v6 = parse_ok(R"({"version":6,"policies":[{"namespace":"a",
      "strategy":{"enableTenantHot":false}}]})");
  EXPECT_EQ(v6.policies.at(0).strategy,
            std::optional<policy_strategy>(strategy_of(std::nullopt, std::nullopt, false)));
  EXPECT_EQ(v6.policies.at(0).affinity_routing, std::optional<bool>(true));  // v<7
}

TEST(PolicyJson, BackFillIsIdempotentAndNoOpForVersionSeven) {
  policy_set set;
  set.version = 3;
  set.policies.push_back(cache_policy{});
  backfill(set);
  const policy_set once = set;
  backfill(set);
  EXPECT_EQ(set, once);
  EXPECT_EQ(set.policies[0].minimum_matched_tokens, 64);

  policy_set v7;
  v7.policies.push_back(cache_policy{});
  backfill(v7);
  EXPECT_EQ(v7.policies[0], cache_policy{});
}

TEST(PolicyJson, DecodesEveryFieldOfAVersionSevenBody) {
  const auto set = parse_ok(R"({
    "version": 7,
    "policies": [{
      "namespace": "team-a", "evictionTTL": 3600000000000, "minimumPrefixTokens": 32,
      "minimumMatchedTokens": 128, "routingFloorScore": 0.25, "lookupTimeoutMs": 20,
      "affinityRouting": false, "eviction": "lfu",
      "strategy": {"enableChainMatching": true, "requireChain": true, "enableTenantHot": false}
    }],
    "tenants": [{"tenantID": "team-a", "maxIndexEntries": 5000, "isolationMode": "Fairness"}]
  })");
  ASSERT_EQ(set.policies.size(), 1u);
  const auto& p = set.policies[0];
  EXPECT_EQ(p.namespace_name, "team-a");
  EXPECT_EQ(p.eviction_ttl_ns, 3'600'000'000'000);
  EXPECT_EQ(p.minimum_prefix_tokens, 32);
  EXPECT_EQ(p.minimum_matched_tokens, 128);
  EXPECT_EQ(p.routing_floor_score, std::optional<float>(0.25f));
  EXPECT_EQ(p.lookup_timeout_ms, 20);
  EXPECT_EQ(p.affinity_routing, std::optional<bool>(false));
  EXPECT_EQ(p.eviction, "lfu");
  EXPECT_EQ(p.strategy, std::optional<policy_strategy>(strategy_of(true, true, false)));
  ASSERT_EQ(set.tenants.size(), 1u);
  EXPECT_EQ(set.tenants[0], (cache_tenant{"team-a", 5000, "Fairness"}));
}

TEST(PolicyJson, AbsentOrNullCollectionsAreEmpty) {
  for (const char* body : {R"({"version":7})", R"({"version":7,"policies":null,"tenants":null})",
                           R"({"version":7,"policies":[],"tenants":[]})"}) {
    const auto set = parse_ok(body);
    EXPECT_TRUE(set.policies.empty()) << body;
    EXPECT_TRUE(set.tenants.empty()) << body;
  }
}

TEST(PolicyJson, NullMeansNilForPointersAndZeroForPlainFields) {
  const auto set = parse_ok(R"({"version":7,"policies":[{"namespace":"a",
      "evictionTTL":null,"minimumMatchedTokens":null,"routingFloorScore":null,
      "affinityRouting":null,"eviction":null,"strategy":null}, null],
      "tenants":[{"tenantID":"t","maxIndexEntries":null}]})");
  ASSERT_EQ(set.policies.size(), 2u);
  cache_policy want;
  want.namespace_name = "a";
  EXPECT_EQ(set.policies[0], want);
  EXPECT_EQ(set.policies[1], cache_policy{});  // null element = zero entry (dropped later)
  EXPECT_EQ(set.tenants.at(0).max_index_entries, 0);  // not omitempty: absent/null = 0
}

TEST(PolicyJson, TenantWithoutMaxIndexEntriesHasZero) {
  const auto set = parse_ok(R"({"version":7,"tenants":[{"tenantID":"t"}]})");
  ASSERT_EQ(set.tenants.size(), 1u);
  EXPECT_EQ(set.tenants[0].max_index_entries, 0);
}

TEST(PolicyJson, MatchesKeysCaseInsensitivelyLikeGo) {
  const auto set = parse_ok(R"({"VERSION":7,"Policies":[{"Namespace":"a",
      "evictionttl":5,"STRATEGY":{"requirechain":true}}],"TENANTS":[{"tenantid":"t",
      "MaxIndexEntries":3}]})");
  ASSERT_EQ(set.policies.size(), 1u);
  EXPECT_EQ(set.policies[0].namespace_name, "a");
  EXPECT_EQ(set.policies[0].eviction_ttl_ns, 5);
  EXPECT_EQ(set.policies[0].strategy->require_chain, std::optional<bool>(true));
  EXPECT_EQ(set.tenants.at(0), (cache_tenant{"t", 3, ""}));
}

TEST(PolicyJson, RepeatedKeysLastOneWinsLikeGo) {
  EXPECT_EQ(parse_ok(R"({"version":2,"version":7})").version, 7);
  // Case variants of one key are the same field; the later one in the body wins.
  const auto set = parse_ok(R"({"version":7,"Version":3,"policies":[{"namespace":"a"}]})");
  EXPECT_EQ(set.version, 3);
  EXPECT_EQ(set.policies.at(0).minimum_matched_tokens, 64);  // so the v3 back-fill applies
}

TEST(PolicyJson, IgnoresBytesAfterTheFirstValueLikeTheReference) {
  const auto set = parse_ok(R"({"version":7,"policies":[{"namespace":"a"}]} trailing junk)");
  EXPECT_EQ(set.policies.size(), 1u);
  EXPECT_EQ(parse_ok(R"({"version":7} {"version":2})").version, 7);
}

TEST(PolicyJson, AcceptsTypeRangeBoundaries) {
  const auto set = parse_ok(R"({"version":7,"policies":[{"namespace":"a",
      "evictionTTL":9223372036854775807,"minimumPrefixTokens":2147483647,
      "minimumMatchedTokens":-2147483648,"lookupTimeoutMs":-1,"routingFloorScore":-0.5}],
      "tenants":[{"tenantID":"t","maxIndexEntries":-9223372036854775808}]})");
  const auto& p = set.policies.at(0);
  EXPECT_EQ(p.eviction_ttl_ns, std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(p.minimum_prefix_tokens, std::numeric_limits<std::int32_t>::max());
  EXPECT_EQ(p.minimum_matched_tokens, std::numeric_limits<std::int32_t>::min());
  EXPECT_EQ(p.lookup_timeout_ms, -1);                      // clamped only at resolution
  EXPECT_EQ(p.routing_floor_score, std::optional<float>(-0.5f));
  EXPECT_EQ(set.tenants.at(0).max_index_entries, std::numeric_limits<std::int64_t>::min());
}

TEST(PolicyJson, RoutingFloorScoreAcceptsIntegersAndFloat32Range) {
  const auto set = parse_ok(R"({"version":7,"policies":[{"namespace":"a","routingFloorScore":100},
      {"namespace":"b","routingFloorScore":3.4028235e38},{"namespace":"c","routingFloorScore":1e-50}]})");
  EXPECT_EQ(set.policies.at(0).routing_floor_score, std::optional<float>(100.0f));
  EXPECT_EQ(set.policies.at(1).routing_floor_score,
            std::optional<float>(std::numeric_limits<float>::max()));
  EXPECT_EQ(set.policies.at(2).routing_floor_score, std::optional<float>(0.0f));  // underflow
}

// ---- invalid bodies --------------------------------------------------------------------

struct invalid_case {
  const char* name;
  std::string body;
  std::string want_error;  // exact message
};

TEST(PolicyJson, RejectsInvalidBodiesWithOneLineReason) {
  const std::string p = "decode policy snapshot: ";
  const std::vector<invalid_case> cases = {
      // Malformed JSON / empty body.
      {"empty body", "", p + "EOF"},
      {"whitespace body", " \n\t", p + "EOF"},
      // Unknown fields at every level.
      {"unknown top-level", R"({"version":7,"generation":3})",
       p + R"(json: unknown field "generation")"},
      {"unknown policy field", R"({"version":7,"policies":[{"namespace":"a","ttl":5}]})",
       p + R"(json: unknown field "ttl" in policies[0])"},
      {"unknown strategy field",
       R"({"version":7,"policies":[{"namespace":"a","strategy":{"chain":true}}]})",
       p + R"(json: unknown field "chain" in policies[0].strategy)"},
      {"unknown tenant field", R"({"version":7,"tenants":[{"tenantID":"t","quota":1}]})",
       p + R"(json: unknown field "quota" in tenants[0])"},
      {"crd spelling is not the wire", R"({"version":7,"policies":[{"namespace":"a","spec":{}}]})",
       p + R"(json: unknown field "spec" in policies[0])"},
      // Wrong types.
      {"top-level array", "[]", p + "json: cannot unmarshal array into policy snapshot of type object"},
      {"top-level number", "7", p + "json: cannot unmarshal number 7 into policy snapshot of type object"},
      {"version string", R"({"version":"7"})",
       p + "json: cannot unmarshal string into field version of type int"},
      {"version float", R"({"version":7.0})",
       p + "json: cannot unmarshal number 7.0 into field version of type int"},
      {"policies object", R"({"version":7,"policies":{}})",
       p + "json: cannot unmarshal object into field policies of type array"},
      {"policy element number", R"({"version":7,"policies":[1]})",
       p + "json: cannot unmarshal number 1 into field policies[0] of type object"},
      {"namespace number", R"({"version":7,"policies":[{"namespace":5}]})",
       p + "json: cannot unmarshal number 5 into field policies[0].namespace of type string"},
      {"int32 as string", R"({"version":7,"policies":[{"minimumMatchedTokens":"64"}]})",
       p + "json: cannot unmarshal string into field policies[0].minimumMatchedTokens of type int32"},
      {"int32 as fraction", R"({"version":7,"policies":[{"minimumPrefixTokens":1.5}]})",
       p + "json: cannot unmarshal number 1.5 into field policies[0].minimumPrefixTokens of type int32"},
      {"int32 overflow", R"({"version":7,"policies":[{"lookupTimeoutMs":3000000000}]})",
       p + "json: cannot unmarshal number 3000000000 into field policies[0].lookupTimeoutMs of type int32"},
      {"int32 underflow", R"({"version":7,"policies":[{"minimumMatchedTokens":-2147483649}]})",
       p + "json: cannot unmarshal number -2147483649 into field policies[0].minimumMatchedTokens of type int32"},
      {"ttl as duration string", R"({"version":7,"policies":[{"evictionTTL":"30m"}]})",
       p + "json: cannot unmarshal string into field policies[0].evictionTTL of type int64"},
      {"ttl exponent", R"({"version":7,"policies":[{"evictionTTL":1e3}]})",
       p + "json: cannot unmarshal number 1000.0 into field policies[0].evictionTTL of type int64"},
      {"floor as string", R"({"version":7,"policies":[{"routingFloorScore":"0.1"}]})",
       p + "json: cannot unmarshal string into field policies[0].routingFloorScore of type float32"},
      {"floor beyond float32", R"({"version":7,"policies":[{"routingFloorScore":1e39}]})",
       p + "json: cannot unmarshal number 1e+39 into field policies[0].routingFloorScore of type float32"},
      {"affinity as string", R"({"version":7,"policies":[{"affinityRouting":"Enabled"}]})",
       p + "json: cannot unmarshal string into field policies[0].affinityRouting of type bool"},
      {"affinity as number", R"({"version":7,"policies":[{"affinityRouting":1}]})",
       p + "json: cannot unmarshal number 1 into field policies[0].affinityRouting of type bool"},
      {"eviction as bool", R"({"version":7,"policies":[{"eviction":true}]})",
       p + "json: cannot unmarshal bool into field policies[0].eviction of type string"},
      {"strategy as array", R"({"version":7,"policies":[{"strategy":[]}]})",
       p + "json: cannot unmarshal array into field policies[0].strategy of type object"},
      {"strategy field as string",
       R"({"version":7,"policies":[{"strategy":{"requireChain":"yes"}}]})",
       p + "json: cannot unmarshal string into field policies[0].strategy.requireChain of type bool"},
      {"tenants as string", R"({"version":7,"tenants":"t"})",
       p + "json: cannot unmarshal string into field tenants of type array"},
      {"tenantID as number", R"({"version":7,"tenants":[{"tenantID":1}]})",
       p + "json: cannot unmarshal number 1 into field tenants[0].tenantID of type string"},
      {"quota beyond int64", R"({"version":7,"tenants":[{"maxIndexEntries":18446744073709551615}]})",
       p + "json: cannot unmarshal number 18446744073709551615 into field tenants[0].maxIndexEntries of type int64"},
      {"second element wrong", R"({"version":7,"tenants":[{"tenantID":"a"},{"tenantID":false}]})",
       p + "json: cannot unmarshal bool into field tenants[1].tenantID of type string"},
      // The first problem in document order wins; decoding errors beat the version check.
      {"first error wins", R"({"version":7,"policies":[{"a":1}],"bogus":1})",
       p + R"(json: unknown field "a" in policies[0])"},
      {"decode error before version", R"({"version":2,"x":1})", p + R"(json: unknown field "x")"},
      // Version outside 3..7.
      {"version absent", R"({"policies":[]})", "unsupported policy snapshot version 0 (accepted 3..7)"},
      {"version null body", "null", "unsupported policy snapshot version 0 (accepted 3..7)"},
      {"version 2", R"({"version":2})", "unsupported policy snapshot version 2 (accepted 3..7)"},
      {"version 8", R"({"version":8})", "unsupported policy snapshot version 8 (accepted 3..7)"},
      {"version negative", R"({"version":-3})", "unsupported policy snapshot version -3 (accepted 3..7)"},
  };
  for (const auto& c : cases) {
    const auto got = parse_policy_body(c.body);
    ASSERT_FALSE(got.has_value()) << c.name;
    EXPECT_EQ(got.error(), c.want_error) << c.name;
  }
}

TEST(PolicyJson, RejectsMalformedJsonWithTheParserReason) {
  const char* bodies[] = {"{", "{\"version\":7,}", "{\n\"version\"\n:\n}", "nul", "{\"version\":7",
                          "{\"namespace\":\"\xff\"}", "'single'"};
  for (const char* body : bodies) {
    const auto got = parse_policy_body(body);
    ASSERT_FALSE(got.has_value()) << body;
    EXPECT_EQ(got.error().rfind("decode policy snapshot: ", 0), 0u) << got.error();
    EXPECT_NE(got.error().find("parse error"), std::string::npos) << got.error();
    EXPECT_EQ(got.error().find('\n'), std::string::npos) << "not one line: " << got.error();
    EXPECT_EQ(got.error().find("[json.exception"), std::string::npos) << got.error();
  }
}

TEST(PolicyJson, EnforcesTheOneMebibyteBodyLimit) {
  const std::string head = R"({"version":7})";
  std::string at_limit = head + std::string(max_body_bytes - head.size(), ' ');
  ASSERT_EQ(at_limit.size(), max_body_bytes);
  EXPECT_TRUE(parse_policy_body(at_limit).has_value());

  const std::string over = at_limit + " ";
  const auto got = parse_policy_body(over);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error(),
            "decode policy snapshot: http: request body too large (limit 1048576 bytes)");
  // The journal path has no size limit.
  EXPECT_TRUE(decode_policy_set(over).has_value());
}

// ---- canonical encoding ----------------------------------------------------------------

TEST(PolicyJson, EncodesCanonicallyWithGoOmitEmptyRules) {
  const auto set = parse_ok(R"({"tenants":[{"isolationMode":"Fairness","maxIndexEntries":-4,
      "tenantID":"t"},{"tenantID":"u"}],"policies":[{"strategy":{"requireChain":false},
      "routingFloorScore":0.1,"namespace":"b","minimumMatchedTokens":0},{"namespace":"a",
      "eviction":"LFU","evictionTTL":90000000000,"affinityRouting":false}],"version":7})");
  EXPECT_EQ(encode_policy_set(set),
            R"({"version":7,"policies":[{"namespace":"b","routingFloorScore":0.1,)"
            R"("strategy":{"requireChain":false}},{"namespace":"a","evictionTTL":90000000000,)"
            R"("affinityRouting":false,"eviction":"LFU"}],"tenants":[{"tenantID":"t",)"
            R"("maxIndexEntries":-4,"isolationMode":"Fairness"},{"tenantID":"u",)"
            R"("maxIndexEntries":0}]})");
  EXPECT_EQ(encode_policy_set(policy_set{}), R"({"version":7,"policies":[],"tenants":[]})");
}

TEST(PolicyJson, EncodingRoundTripsEveryDecodedSet) {
  const char* bodies[] = {
      R"({"version":3,"policies":[{"namespace":"a"},{"namespace":""}],"tenants":[{"tenantID":"t"}]})",
      R"({"version":4,"policies":[{"namespace":"a","minimumMatchedTokens":-1}]})",
      R"({"version":5,"policies":[{"namespace":"a","routingFloorScore":0.3}]})",
      R"({"version":6,"policies":[{"namespace":"a","strategy":{}}]})",
      R"({"version":7,"policies":[{"namespace":"a","strategy":{},"routingFloorScore":-0.0}]})",
      R"({"version":7,"policies":[{"namespace":"a","routingFloorScore":16777217}]})",
      R"({"version":7,"policies":[{"namespace":"a","routingFloorScore":1.17549435e-38}]})",
      R"({"version":7,"policies":[{"namespace":"a","routingFloorScore":3.4028235e38}]})",
      R"({"version":7,"policies":[{"namespace":"\u00e9\u2603 \"q\"\n","eviction":"x"}]})",
      R"({"version":7,"policies":[{"namespace":"a","evictionTTL":-9223372036854775808,
          "minimumPrefixTokens":-2147483648,"lookupTimeoutMs":2147483647}],
          "tenants":[{"tenantID":"t","maxIndexEntries":9223372036854775807}]})",
  };
  for (const char* body : bodies) {
    const auto set = parse_ok(body);
    const std::string bytes = encode_policy_set(set);
    const auto back = decode_policy_set(bytes);
    ASSERT_TRUE(back.has_value()) << bytes << ": " << back.error();
    EXPECT_EQ(*back, set) << bytes;
    EXPECT_EQ(encode_policy_set(*back), bytes);  // a fixed point
  }
}

TEST(PolicyJson, EncodesFloorScoresInShortestForm) {
  policy_set set;
  cache_policy p;
  p.namespace_name = "a";
  for (const auto& [value, text] : std::vector<std::pair<float, std::string>>{
           {0.1f, "0.1"}, {0.25f, "0.25"}, {100.0f, "100.0"}, {1e-7f, "1e-07"}}) {
    p.routing_floor_score = value;
    set.policies = {p};
    const std::string bytes = encode_policy_set(set);
    EXPECT_NE(bytes.find("\"routingFloorScore\":" + text + "}"), std::string::npos) << bytes;
  }
}

}  // namespace
}  // namespace ic::policy
