#include "actors/index_state.hpp"

#include <gtest/gtest.h>

#include "actors/test_support.hpp"
#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::actors {
namespace {

namespace v1 = inferencecache::v1alpha1;

constexpr index::micros kT0 = 1'700'000'000'000'000;

decoded_record update_record(index::micros at, const std::string& replica,
                             const std::vector<std::string>& blocks) {
  return testing::as_record(testing::chain_update(replica, blocks), at);
}

using testing::chain_lookup;

TEST(IndexState, AppliedUpdateIsVisibleToLookups) {
  index_state st;
  auto out = st.apply(update_record(kT0, "r1", {"a", "b"}));
  EXPECT_TRUE(out.ok);
  EXPECT_EQ(out.ingest.entries_added, 2);
  auto resp = st.lookup(chain_lookup({"a", "b"}), kT0 + 1000);
  EXPECT_EQ(resp.reason_code, "PREFIX_MATCH");
  ASSERT_FALSE(resp.replica_scores.empty());
  EXPECT_EQ(resp.replica_scores[0].replica_id, "r1");
  EXPECT_EQ(resp.replica_scores[0].matched_tokens, 128);
}

TEST(IndexState, ExpiredDeadlineAnswersTimeout) {
  index_state st;
  st.apply(update_record(kT0, "r1", {"a", "b"}));
  auto resp = st.lookup(chain_lookup({"a", "b"}), kT0 + 1000, [] { return true; });
  EXPECT_EQ(resp.reason_code, "TIMEOUT");
  EXPECT_TRUE(resp.replica_scores.empty());
}

TEST(IndexState, PolicyRecordReplacesPoliciesAndQuotas) {
  index_state st;
  auto push = [&](const std::string& json) {
    return st.apply(*decode_record(3, encode_record(record_kind::policy, kT0, json)));
  };
  ASSERT_TRUE(push(R"({"version":7,"policies":[{"namespace":"t","lookupTimeoutMs":25,)"
                   R"("minimumMatchedTokens":0}],"tenants":[]})")
                  .ok);
  EXPECT_EQ(st.policy_of("t").lookup_timeout_ms, 25);
  EXPECT_EQ(st.policy_of("t").minimum_matched_tokens, 0);
  ASSERT_TRUE(push(R"({"version":7,"policies":[],"tenants":[]})").ok);
  EXPECT_EQ(st.policy_of("t").lookup_timeout_ms, 0);
  EXPECT_EQ(st.policy_of("t").minimum_matched_tokens, 64);
  EXPECT_FALSE(push("not json").ok);
}

TEST(IndexState, SweepRecordRemovesExpiredEntries) {
  index_state_options o;
  o.default_ttl = std::chrono::seconds(10);
  index_state st(o);
  st.apply(update_record(kT0, "r1", {"a"}));
  EXPECT_EQ(st.index().facts().total_entries, 1);
  auto sweep = *decode_record(4, encode_record(record_kind::sweep, kT0 + 11'000'000, {}));
  auto out = st.apply(sweep);
  EXPECT_EQ(out.sweep.entries_removed_lru, 1);
  EXPECT_EQ(st.index().facts().total_entries, 0);
}

}  // namespace
}  // namespace ic::actors
