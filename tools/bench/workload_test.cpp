// The benchmark's workload shapes and latency summaries.
#include "tools/bench/workload.hpp"

#include <unistd.h>

#include <set>

#include <gtest/gtest.h>

#include "tools/bench/stats.hpp"

namespace ic::tools::bench {
namespace {

TEST(Workload, ChainsOfATenantShareTheSystemPromptAndNothingElse) {
  workload_shape s;
  s.tenants = 2;
  s.chain_blocks = 8;
  s.system_blocks = 3;
  workload w(s);
  std::vector<std::uint64_t> a, b, other;
  w.chain(0, 8, &a);
  w.chain(1, 8, &b);  // same group: same tenant
  w.chain(kChainsPerGroup, 8, &other);  // next group: the other tenant
  ASSERT_EQ(w.tenant_of(0), w.tenant_of(1));
  ASSERT_NE(w.tenant_of(0), w.tenant_of(kChainsPerGroup));
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(a[j], b[j]);
    EXPECT_NE(a[j], other[j]);
  }
  for (int j = 3; j < 8; ++j) EXPECT_NE(a[j], b[j]);
}

TEST(Workload, SameSeedSameHashesDifferentSeedDifferentHashes) {
  workload_shape s;
  workload w1(s), w2(s);
  s.seed = 2;
  workload w3(s);
  EXPECT_EQ(w1.block_hash(5, 20), w2.block_hash(5, 20));
  EXPECT_NE(w1.block_hash(5, 20), w3.block_hash(5, 20));
}

TEST(Workload, EntryCountsInvertEachOther) {
  workload_shape s;  // 4 tenants, 8 replicas, 64 blocks, 16 system blocks
  workload w(s);
  EXPECT_EQ(w.entries_for_chains(1), 64u);
  EXPECT_EQ(w.entries_for_chains(2), 64u + 48u);
  for (std::uint64_t n : {1ull, 1000ull, 1000000ull, 10000000ull}) {
    std::uint64_t c = w.chains_for_entries(n);
    EXPECT_GE(w.entries_for_chains(c), n);
    if (c > 0) {
      EXPECT_LT(w.entries_for_chains(c - 1), n);
    }
  }
}

TEST(Workload, SessionsGrowTurnByTurnToTheFullChain) {
  workload_shape s;
  s.chain_blocks = 64;
  s.system_blocks = 16;
  s.turns = 4;
  workload w(s);
  EXPECT_EQ(w.turn_length(0), 28);
  EXPECT_EQ(w.turn_length(1), 40);
  EXPECT_EQ(w.turn_length(3), 64);
  EXPECT_EQ(validate(s), "");
  s.turns = 0;
  EXPECT_NE(validate(s), "");
}

TEST(Stats, NearestRankPercentiles) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  latency_summary s = summarize(v);
  EXPECT_EQ(s.count, 100u);
  EXPECT_DOUBLE_EQ(s.p50, 50);
  EXPECT_DOUBLE_EQ(s.p90, 90);
  EXPECT_DOUBLE_EQ(s.p99, 99);
  EXPECT_DOUBLE_EQ(s.max, 100);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  std::vector<double> empty;
  EXPECT_EQ(summarize(empty).count, 0u);
}

TEST(Stats, ReadsOwnResidentMemory) { EXPECT_GT(read_rss_bytes(::getpid()), 0); }

TEST(Stats, ReadsOwnCpuTimeWhichGrowsWithWork) {
  const double before = read_cpu_seconds(::getpid());
  ASSERT_GE(before, 0);
  volatile std::uint64_t x = 0;
  double after = before;
  for (int round = 0; round < 100 && after < before + 0.02; ++round) {
    for (std::uint64_t i = 0; i < 20'000'000; ++i) x = x + i;
    after = read_cpu_seconds(::getpid());
  }
  EXPECT_GE(after, before + 0.02);
  EXPECT_EQ(read_cpu_seconds(-1), -1);
}

}  // namespace
}  // namespace ic::tools::bench
