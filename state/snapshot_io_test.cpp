#include "state/snapshot_io.hpp"

#include <tuple>

#include <gtest/gtest.h>

#include "index/testing/combined_index.hpp"
#include "state/test_support.hpp"
#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::state {
namespace {

namespace v1 = inferencecache::v1alpha1;
constexpr index::micros kT0 = 1'700'000'000'000'000;

proto::decoded_record update_record(index::micros at, const std::string& tenant, const std::string& replica,
                             const std::vector<std::string>& blocks) {
  auto u = testing::chain_update(replica, blocks, "vllm", tenant, 16);
  u.mutable_stats()->set_hit_rate(0.25f);
  return testing::as_record(u, at);
}

std::vector<std::string> chunks_of(const tenant_set& st, std::size_t chunk_bytes) {
  std::vector<std::string> out;
  EXPECT_TRUE(write_state_snapshot(st, [&](std::string_view c) {
    out.emplace_back(c);
    return true;
  }, chunk_bytes));
  return out;
}

TEST(StateSnapshot, RoundTripRestoresIndexAndPolicies) {
  tenant_set st;
  st.apply(*proto::decode_record(3, proto::encode_record(proto::record_kind::policy, kT0,
                                           R"({"version":7,"policies":[{"namespace":"a",)"
                                           R"("lookupTimeoutMs":30,"eviction":"lfu"}],)"
                                           R"("tenants":[{"tenantID":"a","maxIndexEntries":100}]})")));
  st.apply(update_record(kT0, "a", "r1", {"x", "y", "z"}));
  st.apply(update_record(kT0 + 5, "b", "r2", {"x"}));
  for (std::size_t chunk : {std::size_t{7}, std::size_t{1} << 20}) {
    state_loader loader{state_options{}};
    std::string err;
    for (const auto& c : chunks_of(st, chunk)) ASSERT_TRUE(loader.feed(c, &err)) << err;
    auto restored = loader.finish(&err);
    ASSERT_NE(restored, nullptr) << err;
    EXPECT_EQ(restored->canonical_dump(), st.canonical_dump());
    EXPECT_EQ(restored->policies()->to_json(), st.policies()->to_json());
    EXPECT_EQ(restored->policy_of("a").lookup_timeout_ms, 30);
    EXPECT_EQ(restored->policies()->quota("a"), std::optional<std::int64_t>(100));
  }
}

TEST(StateSnapshot, ReadsAVersionOneSnapshotOfOneCombinedIndex) {
  // Version 1 (before tenants had indexes of their own): header + one combined index.
  tenant_set expected;
  index::combined_index combined;
  for (auto [tenant, replica, block, at] :
       {std::tuple{"a", "r1", "x", kT0}, std::tuple{"b", "r2", "y", kT0 + 5},
        std::tuple{"a", "r2", "z", kT0 + 9}}) {
    auto rec = update_record(at, tenant, replica, {block});
    expected.apply(rec);
    combined.ingest(std::get<index::cache_state_update>(rec.payload), at);
  }
  std::string header("ICSNAP01", 8);
  const std::string policy = expected.policies()->to_bytes();
  for (int i = 0; i < 4; ++i) header.push_back(static_cast<char>(i == 0 ? 1 : 0));
  for (int i = 0; i < 8; ++i) header.push_back(static_cast<char>(policy.size() >> (8 * i)));
  header += policy;
  state_loader loader{state_options{}};
  std::string err;
  ASSERT_TRUE(loader.feed(header, &err)) << err;
  ASSERT_TRUE(index::write_snapshot(combined, [&](std::string_view c) {
    return loader.feed(c, &err);
  }, 16)) << err;
  auto restored = loader.finish(&err);
  ASSERT_NE(restored, nullptr) << err;
  EXPECT_EQ(restored->tenants().size(), 2u);
  EXPECT_EQ(restored->canonical_dump(), expected.canonical_dump());
  EXPECT_EQ(restored->facts()->total_entries.load(), 3);
}

TEST(StateSnapshot, RefusesABadHeaderAndAMissingHeader) {
  std::string err;
  state_loader bad{state_options{}};
  EXPECT_FALSE(bad.feed("not a snapshot header", &err));
  EXPECT_NE(err.find("magic"), std::string::npos);
  state_loader empty{state_options{}};
  EXPECT_EQ(empty.finish(&err), nullptr);
  EXPECT_NE(err.find("header"), std::string::npos);
}

}  // namespace
}  // namespace ic::state
