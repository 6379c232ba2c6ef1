#include "actors/snapshot_io.hpp"

#include <gtest/gtest.h>

#include "actors/test_support.hpp"
#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::actors {
namespace {

namespace v1 = inferencecache::v1alpha1;
constexpr index::micros kT0 = 1'700'000'000'000'000;

decoded_record update_record(index::micros at, const std::string& tenant, const std::string& replica,
                             const std::vector<std::string>& blocks) {
  auto u = testing::chain_update(replica, blocks, "vllm", tenant, 16);
  u.mutable_stats()->set_hit_rate(0.25f);
  return testing::as_record(u, at);
}

std::vector<std::string> chunks_of(const index_state& st, std::size_t chunk_bytes) {
  std::vector<std::string> out;
  EXPECT_TRUE(write_state_snapshot(st, [&](std::string_view c) {
    out.emplace_back(c);
    return true;
  }, chunk_bytes));
  return out;
}

TEST(StateSnapshot, RoundTripRestoresIndexAndPolicies) {
  index_state st;
  st.apply(*decode_record(3, encode_record(record_kind::policy, kT0,
                                           R"({"version":7,"policies":[{"namespace":"a",)"
                                           R"("lookupTimeoutMs":30,"eviction":"lfu"}],)"
                                           R"("tenants":[{"tenantID":"a","maxIndexEntries":100}]})")));
  st.apply(update_record(kT0, "a", "r1", {"x", "y", "z"}));
  st.apply(update_record(kT0 + 5, "b", "r2", {"x"}));
  for (std::size_t chunk : {std::size_t{7}, std::size_t{1} << 20}) {
    state_loader loader{index_state_options{}};
    std::string err;
    for (const auto& c : chunks_of(st, chunk)) ASSERT_TRUE(loader.feed(c, &err)) << err;
    auto restored = loader.finish(&err);
    ASSERT_NE(restored, nullptr) << err;
    EXPECT_EQ(restored->index().canonical_dump(), st.index().canonical_dump());
    EXPECT_EQ(restored->policies().to_json(), st.policies().to_json());
    EXPECT_EQ(restored->policy_of("a").lookup_timeout_ms, 30);
    EXPECT_EQ(restored->policies().quota("a"), std::optional<std::int64_t>(100));
  }
}

TEST(StateSnapshot, RefusesABadHeaderAndAMissingHeader) {
  std::string err;
  state_loader bad{index_state_options{}};
  EXPECT_FALSE(bad.feed("not a snapshot header", &err));
  EXPECT_NE(err.find("magic"), std::string::npos);
  state_loader empty{index_state_options{}};
  EXPECT_EQ(empty.finish(&err), nullptr);
  EXPECT_NE(err.find("header"), std::string::npos);
}

}  // namespace
}  // namespace ic::actors
