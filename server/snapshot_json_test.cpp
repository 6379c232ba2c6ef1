#include "server/snapshot_json.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace ic::server {
namespace {

TEST(SnapshotJson, EmptyIndexHasNullListsAndZeroTotals) {
  EXPECT_EQ(snapshot_json({}),
            R"({"replicas":null,"tenants":null,"totalPrefixes":0,"hotPrefixes":0})");
}

TEST(SnapshotJson, RowsFollowTheReferenceShapeAndOmitemptyRules) {
  index::snapshot_view v;
  index::snapshot_replica with_stats;
  with_stats.replica_id = "vllm-0";
  with_stats.tenant = "team-a";
  with_stats.hit_rate = 0.1f;
  with_stats.pressure = 0.5f;
  with_stats.last_update = 1'700'000'000'123'400;
  with_stats.prefix_count = 120;
  with_stats.last_event_at = 1'700'000'000'000'000;
  with_stats.stats_reported = true;
  with_stats.t2_hit_tokens = 750;
  with_stats.t2_query_tokens = 1000;
  index::snapshot_replica bare;
  bare.replica_id = "r-no-tenant";
  v.replicas = {with_stats, bare};
  v.tenants = {{"team-a", 120, 0.1f, true}};
  v.total_prefixes = 120;
  std::string s = snapshot_json(v);
  EXPECT_EQ(
      s,
      R"({"replicas":[{"replicaId":"vllm-0","tenant":"team-a","cacheMemoryBytes":0,"hitRate":0.1,)"
      R"("pressure":0.5,"lastUpdate":"2023-11-14T22:13:20.1234Z","prefixCount":120,)"
      R"("lastEventAt":"2023-11-14T22:13:20Z","statsReported":true,"t2HitTokens":750,)"
      R"("t2QueryTokens":1000},{"replicaId":"r-no-tenant","cacheMemoryBytes":0,"hitRate":0,)"
      R"("pressure":0,"lastUpdate":"0001-01-01T00:00:00Z","prefixCount":0,)"
      R"("lastEventAt":"0001-01-01T00:00:00Z"}],"tenants":[{"tenantId":"team-a",)"
      R"("indexEntries":120,"hitRate":0.1,"hitRateReported":true,"memoryUsed":0}],)"
      R"("totalPrefixes":120,"hotPrefixes":0})");
  EXPECT_TRUE(nlohmann::json::accept(s));
}

TEST(SnapshotJson, Float32UsesGoShortestForm) {
  EXPECT_EQ(go_float32(0.1f), "0.1");
  EXPECT_EQ(go_float32(1.0f), "1");
  EXPECT_EQ(go_float32(0.0f), "0");
  EXPECT_EQ(go_float32(-2.5f), "-2.5");
  EXPECT_EQ(go_float32(1e-7f), "1e-07");
  EXPECT_EQ(go_float32(3e21f), "3e+21");
  EXPECT_EQ(go_float32(123456.7f), "123456.7");
}

TEST(SnapshotJson, TimesAreRfc3339InUtc) {
  EXPECT_EQ(go_time(std::nullopt), "0001-01-01T00:00:00Z");
  EXPECT_EQ(go_time(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(go_time(1'500'000), "1970-01-01T00:00:01.5Z");
}

}  // namespace
}  // namespace ic::server
