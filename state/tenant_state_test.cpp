#include "state/tenant_state.hpp"

#include <gtest/gtest.h>

#include "state/test_support.hpp"
#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::state {
namespace {

constexpr index::micros kT0 = 1'700'000'000'000'000;

proto::decoded_record update_record(index::micros at, const std::string& replica,
                             const std::vector<std::string>& blocks,
                             const std::string& tenant = "t") {
  return testing::as_record(testing::chain_update(replica, blocks, "vllm", tenant), at);
}

proto::decoded_record policy_record_of(const std::string& json) {
  return *proto::decode_record(3, proto::encode_record(proto::record_kind::policy, kT0, json));
}

using testing::chain_lookup;

TEST(TenantSet, AppliedUpdateIsVisibleToLookups) {
  tenant_set st;
  auto out = st.apply(update_record(kT0, "r1", {"a", "b"}));
  EXPECT_TRUE(out.ok);
  EXPECT_EQ(out.ingest.entries_added, 2);
  auto resp = st.lookup(chain_lookup({"a", "b"}), kT0 + 1000);
  EXPECT_EQ(resp.reason_code, "PREFIX_MATCH");
  ASSERT_FALSE(resp.replica_scores.empty());
  EXPECT_EQ(resp.replica_scores[0].replica_id, "r1");
  EXPECT_EQ(resp.replica_scores[0].matched_tokens, 128);
}

TEST(TenantSet, ExpiredDeadlineAnswersTimeout) {
  tenant_set st;
  st.apply(update_record(kT0, "r1", {"a", "b"}));
  auto resp = st.lookup(chain_lookup({"a", "b"}), kT0 + 1000, [] { return true; });
  EXPECT_EQ(resp.reason_code, "TIMEOUT");
  EXPECT_TRUE(resp.replica_scores.empty());
}

TEST(TenantSet, EachTenantHasItsOwnIndexAndTheTotalsAreShared) {
  tenant_set st;
  st.apply(update_record(kT0, "r1", {"a", "b"}, "t"));
  st.apply(update_record(kT0, "r1", {"c"}, "u"));
  ASSERT_EQ(st.tenants().size(), 2u);
  EXPECT_EQ(st.tenants().at("t")->index().facts().total_entries, 2);
  EXPECT_EQ(st.tenants().at("u")->index().facts().total_entries, 1);
  EXPECT_EQ(st.facts()->total_entries.load(), 3);
  EXPECT_EQ(st.facts()->total_keys.load(), 3);
}

TEST(TenantSet, UnknownTenantIsClassifiedAgainstTheWholeIndex) {
  tenant_set st;
  auto other = chain_lookup({"a"});
  other.tenant_id = "nobody";
  // Cold start: the whole index is empty, so a miss is a plain NONE.
  EXPECT_EQ(st.lookup(other, kT0).reason_code, "NO_HINT");
  st.apply(update_record(kT0, "r1", {"a"}, "t"));
  // Another tenant holds keys now: the unknown tenant is UNKNOWN_TENANT.
  EXPECT_EQ(st.lookup(other, kT0 + 1).reason_code, "UNKNOWN_TENANT");
}

TEST(TenantSet, GlobalCapEvictsAcrossTenantsInCapOrder) {
  state_options o;
  o.max_entries = 3;
  tenant_set st(o);
  st.apply(update_record(kT0, "r1", {"old"}, "b"));
  st.apply(update_record(kT0 + 1'000'000, "r1", {"mid"}, "a"));
  st.apply(update_record(kT0 + 2'000'000, "r1", {"new"}, "b"));
  auto out = st.apply(update_record(kT0 + 3'000'000, "r1", {"newest"}, "a"));
  EXPECT_EQ(out.ingest.cap_evicted_lru, 1);
  EXPECT_EQ(st.facts()->total_entries.load(), 3);
  // The oldest entry (tenant b's "old") went, although the ingest was tenant a's.
  EXPECT_FALSE(st.tenants().at("b")->index().find_entry("m", "vllm", "", "old", "r1"));
  EXPECT_TRUE(st.tenants().at("a")->index().find_entry("m", "vllm", "", "mid", "r1"));
}

TEST(TenantSet, PolicyRecordReplacesPoliciesAndQuotas) {
  tenant_set st;
  ASSERT_TRUE(st.apply(policy_record_of(R"({"version":7,"policies":[{"namespace":"t","lookupTimeoutMs":25,)"
                                        R"("minimumMatchedTokens":0}],"tenants":[]})"))
                  .ok);
  EXPECT_EQ(st.policy_of("t").lookup_timeout_ms, 25);
  EXPECT_EQ(st.policy_of("t").minimum_matched_tokens, 0);
  ASSERT_TRUE(st.apply(policy_record_of(R"({"version":7,"policies":[],"tenants":[]})")).ok);
  EXPECT_EQ(st.policy_of("t").lookup_timeout_ms, 0);
  EXPECT_EQ(st.policy_of("t").minimum_matched_tokens, 64);
  EXPECT_FALSE(st.apply(policy_record_of("not json")).ok);
}

TEST(TenantSet, SweepRecordRemovesExpiredEntries) {
  state_options o;
  o.default_ttl = std::chrono::seconds(10);
  tenant_set st(o);
  st.apply(update_record(kT0, "r1", {"a"}));
  EXPECT_EQ(st.facts()->total_entries.load(), 1);
  auto sweep = *proto::decode_record(4, proto::encode_record(proto::record_kind::sweep, kT0 + 11'000'000, {}));
  auto out = st.apply(sweep);
  EXPECT_EQ(out.sweep.entries_removed_lru, 1);
  EXPECT_EQ(st.facts()->total_entries.load(), 0);
}

TEST(TenantSet, MaxGrowthCountsEveryKeyAnUpdateNames) {
  index::cache_state_update u;
  index::prefix_entry a;
  a.prefix_hash = "p";
  a.block_hashes = {"x", "y"};
  u.prefixes = {a, index::prefix_entry{}};
  EXPECT_EQ(max_growth(u), 4);
}

TEST(TenantState, ApplyIngestsAnUpdateAndReportsTheCapTimeOfItsTimestamp) {
  index::shared_facts facts;
  tenant_state t("t", state_options{}, &facts, std::make_shared<policy::policy_store>());
  auto u = testing::chain_update("r1", {"a", "b"});
  u.set_timestamp_us(kT0 - 5);
  auto out = t.apply(testing::as_record(u, kT0), nullptr);
  EXPECT_TRUE(out.ok);
  EXPECT_EQ(out.ingest.entries_added, 2);
  EXPECT_EQ(out.cap_ts, kT0 - 5);
  out = t.apply(update_record(kT0 + 1, "r2", {"a"}), nullptr);
  EXPECT_EQ(out.cap_ts, kT0 + 1);  // no timestamp: the record's time
  EXPECT_FALSE(t.apply(policy_record_of(R"({"version":7,"policies":[],"tenants":[]})"), nullptr).ok);
}

TEST(TenantState, ApplyPolicyRecordKeepsTheBaseAndRefusesBadBytes) {
  policy::policy_store base;
  auto next = apply_policy_record(
      base, R"({"version":7,"policies":[{"namespace":"t","lookupTimeoutMs":40}],"tenants":[]})");
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next.value()->resolve("t").lookup_timeout_ms, 40);
  EXPECT_EQ(base.resolve("t").lookup_timeout_ms, 0);
  EXPECT_FALSE(apply_policy_record(base, "not json").has_value());
}

}  // namespace
}  // namespace ic::state
