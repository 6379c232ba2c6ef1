// count_members: live / stale / desired per topology side (the pd_topology_replicas gauge).
#include "topology/pool_members.hpp"

#include <gtest/gtest.h>

#include "index/test_support.hpp"
#include "topology/topology_json.hpp"

namespace ic::topology {
namespace {

using index::testing::t0;

TEST(PoolMembers, CountsExplicitIdsAndPatternRowsByLiveness) {
  auto set = parse_topology_body(
      R"({"version":1,"topologies":[{"namespace":"serving","name":"pd","hashScheme":"vllm",)"
      R"("prefillPools":[{"name":"p","acceleratorType":"h","replicaIds":["p-0","p-1"],"replicas":4}],)"
      R"("decodePools":[{"name":"d","acceleratorType":"h","replicaIdPatterns":["d-*"],"replicas":2}],)"
      R"("acceleratorTypes":[{"name":"h","vendor":"nvidia"}]}]})");
  ASSERT_TRUE(set) << set.error();
  topology_store store;
  store.apply(std::move(*set));
  index::tenant_index idx("serving");
  auto stats = [&](const std::string& id, index::micros at) {
    idx.ingest(index::testing::stats_only(id, index::testing::stats(0, 0.5f), "serving", "m"), at);
  };
  stats("p-0", t0);                   // live
  stats("d-0", t0);                   // live (pattern)
  stats("d-1", t0 - 61'000'000);      // stale (pattern)
  stats("x-9", t0);                   // not a member
  // p-1 has no row: an explicit member that is stale.
  auto counts = count_members(
      *store.current(),
      [&](std::string_view tenant) { return tenant == "serving" ? &idx : nullptr; }, t0);
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts[0].topology, "serving/pd");
  EXPECT_EQ(counts[0].role, "prefill");
  EXPECT_EQ(counts[0].live, 1);
  EXPECT_EQ(counts[0].stale, 1);
  EXPECT_EQ(counts[0].desired, 4);
  EXPECT_EQ(counts[1].role, "decode");
  EXPECT_EQ(counts[1].live, 1);
  EXPECT_EQ(counts[1].stale, 1);
  EXPECT_EQ(counts[1].desired, 2);
  // A tenant that holds nothing: explicit ids stale, no pattern members.
  auto none = count_members(*store.current(), [](std::string_view) { return nullptr; }, t0);
  EXPECT_EQ(none[0].stale, 2);
  EXPECT_EQ(none[1].live + none[1].stale, 0);
}

}  // namespace
}  // namespace ic::topology
