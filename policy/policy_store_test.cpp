#include "policy/policy_store.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "policy/policy_json.hpp"
#include "tests/support/test_paths.hpp"

namespace ic::policy {
namespace {

using namespace std::chrono_literals;

policy_set parse_ok(const std::string& body) {
  auto got = parse_policy_body(body);
  EXPECT_TRUE(got.has_value()) << (got ? "" : got.error());
  return got ? *got : policy_set{};
}

TEST(PolicyStore, StartsWithNoPolicyAndNoQuota) {
  const policy_store store{45min};
  EXPECT_FALSE(store.has_pushed());
  EXPECT_FALSE(store.has_policy("team-a"));
  EXPECT_EQ(store.resolve("team-a"), resolved_policy::no_policy(45min));
  EXPECT_EQ(store.resolve("team-a").eviction_ttl, 45min);
  EXPECT_EQ(store.quota("team-a"), std::nullopt);
  EXPECT_EQ(store.default_ttl(), 45min);
  EXPECT_EQ(store.to_json(), R"({"version":7,"policies":[],"tenants":[]})");
}

TEST(PolicyStore, DefaultsToThirtyMinuteTtl) {
  const policy_store store;
  EXPECT_EQ(store.resolve("x").eviction_ttl, 30min);
}

TEST(PolicyStore, ResolvesPushedPoliciesAndQuotas) {
  policy_store store{10min};
  store.apply(parse_ok(R"({"version":7,"policies":[{"namespace":"team-a",
      "minimumPrefixTokens":200,"lookupTimeoutMs":1,"eviction":"LFU"},{"namespace":"team-c"}],
      "tenants":[{"tenantID":"team-a","maxIndexEntries":100},{"tenantID":"team-z",
      "maxIndexEntries":-1}]})"));
  EXPECT_TRUE(store.has_pushed());
  const auto a = store.resolve("team-a");
  EXPECT_EQ(a.minimum_prefix_tokens, 200);
  EXPECT_EQ(a.lookup_timeout_ms, 1);
  EXPECT_EQ(a.eviction, eviction_mode::lfu);
  EXPECT_EQ(a.eviction_ttl, 10min);     // TTL absent ⇒ --default-ttl
  EXPECT_EQ(a.minimum_matched_tokens, 0);  // v7, absent ⇒ floor off
  // H19: a policy for team-a leaves team-b on the no-policy defaults.
  EXPECT_FALSE(store.has_policy("team-b"));
  EXPECT_EQ(store.resolve("team-b"), resolved_policy::no_policy(10min));
  // A policy with no fields set is still a policy.
  EXPECT_TRUE(store.has_policy("team-c"));
  EXPECT_EQ(store.resolve("team-c").minimum_matched_tokens, 0);
  EXPECT_EQ(store.quota("team-a"), tenant_quota{100});
  EXPECT_EQ(store.quota("team-z"), tenant_quota{0});  // negative clamped to 0
  EXPECT_EQ(store.quota("team-b"), std::nullopt);
}

TEST(PolicyStore, ApplyReplacesEverything) {
  policy_store store;
  store.apply(parse_ok(R"({"version":7,"policies":[{"namespace":"a","lookupTimeoutMs":5},
      {"namespace":"b","lookupTimeoutMs":6}],"tenants":[{"tenantID":"a","maxIndexEntries":1}]})"));
  ASSERT_EQ(store.resolve("a").lookup_timeout_ms, 5);
  ASSERT_EQ(store.quota("a"), tenant_quota{1});

  store.apply(parse_ok(R"({"version":7,"policies":[{"namespace":"b","lookupTimeoutMs":7}]})"));
  EXPECT_FALSE(store.has_policy("a"));                      // absent ⇒ reverts to defaults
  EXPECT_EQ(store.resolve("a"), resolved_policy::no_policy());
  EXPECT_EQ(store.quota("a"), std::nullopt);                // absent ⇒ unbounded
  EXPECT_EQ(store.resolve("b").lookup_timeout_ms, 7);       // replaced, not merged

  store.apply(parse_ok(R"({"version":7})"));
  EXPECT_FALSE(store.has_policy("b"));
  EXPECT_TRUE(store.resolved().policies.empty());
}

TEST(PolicyStore, NeverReportsAQuotaForTheReservedProbeTenant) {
  policy_store store;
  store.apply(parse_ok(R"({"version":7,"tenants":[{"tenantID":"inferencecache.io/probe",
      "maxIndexEntries":0},{"tenantID":"","maxIndexEntries":0}]})"));
  EXPECT_EQ(store.quota(reserved_probe_tenant), std::nullopt);
  EXPECT_EQ(store.quota(""), std::nullopt);
  EXPECT_TRUE(store.resolved().quotas.empty());
}

TEST(PolicyStore, DropsEmptyNamespaceEntries) {
  policy_store store;
  store.apply(parse_ok(R"({"version":7,"policies":[{"namespace":"","lookupTimeoutMs":5},null]})"));
  EXPECT_FALSE(store.has_policy(""));
  EXPECT_EQ(store.resolve(""), resolved_policy::no_policy());
}

TEST(PolicyStore, BackFillsHandBuiltOlderSets) {
  policy_set set;
  set.version = 3;
  cache_policy p;
  p.namespace_name = "a";
  set.policies.push_back(p);
  policy_store store;
  store.apply(set);
  EXPECT_EQ(store.resolve("a").minimum_matched_tokens, 64);
  EXPECT_EQ(store.current().policies.at(0).minimum_matched_tokens, 64);
}

TEST(PolicyStore, OlderVersionsResolveLikeNoPolicyWhenFieldsAreMissing) {
  policy_store store{20min};
  store.apply(parse_ok(R"({"version":3,"policies":[{"namespace":"a"}]})"));
  EXPECT_EQ(store.resolve("a"), resolved_policy::no_policy(20min));
  store.apply(parse_ok(R"({"version":4,"policies":[{"namespace":"a"}]})"));
  EXPECT_EQ(store.resolve("a").minimum_matched_tokens, 0);
}

TEST(PolicyStore, SerialisationReplaysToAnIdenticalStore) {
  policy_store live{15min};
  live.apply(parse_ok(R"({"version":4,"policies":[{"namespace":"a","routingFloorScore":0.3,
      "eviction":"lfu","evictionTTL":60000000000},{"namespace":"b","minimumMatchedTokens":-4}],
      "tenants":[{"tenantID":"a","maxIndexEntries":12,"isolationMode":"Fairness"}]})"));
  const std::string bytes = live.to_bytes();

  const auto decoded = policy_store::from_bytes(bytes);
  ASSERT_TRUE(decoded.has_value()) << decoded.error();
  EXPECT_EQ(*decoded, live.current());

  policy_store replayed{15min};
  replayed.apply(*decoded);
  EXPECT_EQ(replayed.to_bytes(), bytes);
  for (const char* tenant : {"a", "b", "c"}) {
    EXPECT_EQ(replayed.resolve(tenant), live.resolve(tenant)) << tenant;
    EXPECT_EQ(replayed.quota(tenant), live.quota(tenant)) << tenant;
  }
  EXPECT_FLOAT_EQ(replayed.resolve("a").routing_floor_score, 0.3f);
}

TEST(PolicyStore, FromBytesRefusesCorruptRecords) {
  for (const char* bytes : {"", "{\"version\":7", "{\"version\":1}", "{\"version\":7,\"x\":1}"}) {
    const auto got = policy_store::from_bytes(bytes);
    EXPECT_FALSE(got.has_value()) << bytes;
  }
}

TEST(PolicyStore, ToJsonReturnsWhatWasPushed) {
  policy_store store;
  const std::string body =
      R"({"version":7,"policies":[{"namespace":"a","minimumMatchedTokens":128,)"
      R"("routingFloorScore":0.25,"affinityRouting":false,"strategy":{"requireChain":true}}],)"
      R"("tenants":[{"tenantID":"a","maxIndexEntries":-3}]})";
  store.apply(parse_ok(body));
  EXPECT_EQ(store.to_json(), body);  // canonical order, raw (unclamped) values
}

// The shipped sample body must stay a valid version-7 push.
TEST(PolicySample, DeploySampleIsAValidVersionSevenBody) {
  const std::filesystem::path path =
      std::filesystem::path(ic::test::source_dir()) / "deploy" / "policy.sample.json";
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  std::stringstream text;
  text << in.rdbuf();
  const auto set = parse_policy_body(text.str());
  ASSERT_TRUE(set.has_value()) << set.error();
  EXPECT_EQ(set->version, current_version);
  EXPECT_FALSE(set->policies.empty());
  EXPECT_FALSE(set->tenants.empty());
  policy_store store;
  store.apply(*set);
  EXPECT_TRUE(store.has_policy("team-a"));
}

// style.md habit 1: policy/ knows nothing of CAF, gRPC or generated protobuf.
TEST(PolicyComponent, IncludesNoCafGrpcOrProtobuf) {
  const std::filesystem::path dir = std::filesystem::path(ic::test::source_dir()) / "policy";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const auto ext = entry.path().extension();
    if (ext != ".hpp" && ext != ".cpp") continue;
    ++files;
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("#include", 0) != 0) continue;
      for (const char* banned : {"caf/", "grpc", "google/protobuf", ".pb.h", "actors/"}) {
        EXPECT_EQ(line.find(banned), std::string::npos) << entry.path() << ": " << line;
      }
    }
  }
  EXPECT_GT(files, 5);
}

}  // namespace
}  // namespace ic::policy
