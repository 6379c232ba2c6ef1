// Unit tests of the soak's model and checking rules (tools/bench/soak_model.hpp).
#include "tools/bench/soak_model.hpp"

#include <thread>

#include <gtest/gtest.h>

namespace ic::tools::bench {
namespace {

answer_view answer(const std::string& reason, std::vector<std::pair<std::string, int>> replicas) {
  answer_view a;
  a.rpc_ok = true;
  a.reason = reason;
  a.replicas = std::move(replicas);
  return a;
}

TEST(SoakModel, ChainsStartUnknownAndTakeTheAcknowledgedOutcome) {
  soak_model m(4);
  EXPECT_EQ(m.read(0).state, chain_state::unknown);
  m.begin({0, 1});
  EXPECT_TRUE(m.read(0).busy);
  m.end({0, 1}, true, chain_state::held);
  EXPECT_EQ(m.read(0).state, chain_state::held);
  EXPECT_FALSE(m.read(1).busy);
  m.begin({1});
  m.end({1}, true, chain_state::absent);
  EXPECT_EQ(m.read(1).state, chain_state::absent);
  auto n = m.count();
  EXPECT_EQ(n.held, 1u);
  EXPECT_EQ(n.absent, 1u);
  EXPECT_EQ(n.unknown, 2u);
}

TEST(SoakModel, AnUnacknowledgedOperationMakesTheChainUnknown) {
  soak_model m(2);
  m.begin({0});
  m.end({0}, true, chain_state::held);
  m.begin({0});
  m.end({0}, false, chain_state::absent);  // the eviction's Ack never came
  EXPECT_EQ(m.read(0).state, chain_state::unknown);
}

TEST(SoakModel, OnlyIdleUnchangedKnownChainsAreDecidable) {
  soak_model m(1);
  m.begin({0});
  m.end({0}, true, chain_state::held);
  const chain_view idle = m.read(0);
  EXPECT_TRUE(decidable(idle, m.read(0)));
  m.begin({0});
  const chain_view busy = m.read(0);
  EXPECT_FALSE(decidable(idle, busy));  // an operation started during the lookup
  EXPECT_FALSE(decidable(busy, busy));
  m.end({0}, true, chain_state::held);
  EXPECT_FALSE(decidable(idle, m.read(0)));  // it ran and ended during the lookup
  EXPECT_TRUE(decidable(m.read(0), m.read(0)));
  soak_model u(1);
  EXPECT_FALSE(decidable(u.read(0), u.read(0)));  // never acknowledged: nothing to expect
}

TEST(SoakModel, ConcurrentOwnersAndReadersKeepEntriesConsistent) {
  soak_model m(64);
  std::thread owner([&] {
    for (int i = 0; i < 2000; ++i) {
      m.begin({static_cast<std::uint64_t>(i % 64)});
      m.end({static_cast<std::uint64_t>(i % 64)}, true, i % 2 ? chain_state::held : chain_state::absent);
    }
  });
  std::uint64_t last_version = 0;
  for (int i = 0; i < 2000; ++i) {
    auto v = m.read(5);
    EXPECT_GE(v.version, last_version);  // versions never go back
    last_version = v.version;
  }
  owner.join();
  EXPECT_EQ(m.read(5).version, 2000u / 64 + 1);  // 5, 69, ... : 32 operations on chain 5
  EXPECT_EQ(m.count().unknown, 0u);
}

TEST(SoakCheck, HeldChainMustMatchWhollyOnItsReplicaFirst) {
  std::string why;
  EXPECT_EQ(check_answer(chain_state::held, "r1", 256, answer("PREFIX_MATCH", {{"r1", 256}}), &why),
            verdict::agree);
  EXPECT_EQ(check_answer(chain_state::held, "r1", 256, answer("PREFIX_MATCH", {{"r1", 240}}), &why),
            verdict::lost);
  EXPECT_NE(why.find("r1:240"), std::string::npos);
  EXPECT_EQ(check_answer(chain_state::held, "r1", 256, answer("PREFIX_MATCH", {{"r2", 256}, {"r1", 256}}),
                         nullptr),
            verdict::lost);
  EXPECT_EQ(check_answer(chain_state::held, "r1", 256, answer("NO_HINT", {}), nullptr), verdict::lost);
}

TEST(SoakCheck, AbsentChainMustMatchNothing) {
  EXPECT_EQ(check_answer(chain_state::absent, "r1", 256, answer("NO_HINT", {}), nullptr),
            verdict::agree);
  // An affinity hint names a replica without matched tokens: fine for a removed chain.
  EXPECT_EQ(check_answer(chain_state::absent, "r1", 256, answer("AFFINITY_HINT", {{"r3", 0}}), nullptr),
            verdict::agree);
  std::string why;
  EXPECT_EQ(check_answer(chain_state::absent, "r1", 256, answer("AFFINITY_HINT", {{"r1", 16}}), &why),
            verdict::wrong);
  EXPECT_NE(why.find("removed"), std::string::npos);
  EXPECT_EQ(check_answer(chain_state::absent, "r1", 256, answer("PREFIX_MATCH", {{"r1", 256}}), nullptr),
            verdict::wrong);
}

TEST(SoakCheck, UnknownChainsAndFailedCallsAreNoVerdict) {
  EXPECT_EQ(check_answer(chain_state::unknown, "r1", 256, answer("NO_HINT", {}), nullptr),
            verdict::not_decidable);
  answer_view failed;  // rpc_ok false
  EXPECT_EQ(check_answer(chain_state::held, "r1", 256, failed, nullptr), verdict::not_decidable);
}

soak_row r(int minute, std::int64_t rss_mib) {
  soak_row x;
  x.minute = minute;
  x.rss_bytes = rss_mib << 20;
  return x;
}

TEST(SoakVerdict, RssGrowthIsThePeakAfterWarmupOverTheWarmupRow) {
  std::vector<soak_row> rows{r(1, 30), r(2, 100), r(3, 100), r(4, 103), r(5, 101)};
  auto g = rss_growth_after(rows, 2);
  ASSERT_TRUE(g.applicable);
  EXPECT_EQ(g.baseline, 100 << 20);
  EXPECT_EQ(g.peak, 103 << 20);
  EXPECT_NEAR(g.growth, 0.03, 1e-9);
  EXPECT_EQ(soak_verdict(soak_row{}, 0, g, 0.05), "");
  rows.push_back(r(6, 105));
  g = rss_growth_after(rows, 2);
  EXPECT_NE(soak_verdict(soak_row{}, 0, g, 0.05).find("RSS grew 5.0 %"), std::string::npos);
  // Too short for a warm-up: not applicable, so not a failure.
  EXPECT_FALSE(rss_growth_after({r(1, 30)}, 5).applicable);
  EXPECT_FALSE(rss_growth_after({r(1, 30), r(2, 31)}, 2).applicable);
}

TEST(SoakVerdict, ErrorsLostAndWrongAnswersFail) {
  soak_row last;
  EXPECT_EQ(soak_verdict(last, 0, rss_growth{}, 0.05), "");
  last.errors = 2;
  last.lost = 1;
  const std::string v = soak_verdict(last, 3, rss_growth{}, 0.05);
  EXPECT_NE(v.find("2 errors"), std::string::npos);
  EXPECT_NE(v.find("1 lost"), std::string::npos);
  EXPECT_NE(v.find("3 answers"), std::string::npos);
}

TEST(SoakTable, RowsCarryEveryColumn) {
  soak_row x = r(7, 64);
  x.open_fds = 41;
  x.journal_bytes = 3u << 20;
  x.acked = 1234;
  x.lookups = 999;
  x.errors = 0;
  x.lost = 0;
  x.server_pid = 4242;
  const std::string line = table_line(x);
  for (const char* want : {"7", "4242", "64.0", "41", "3.0", "1234", "999"})
    EXPECT_NE(line.find(want), std::string::npos) << want;
  EXPECT_EQ(markdown_line(x), "| 7 | 4242 | 64.0 | 41 | 3.0 | 1234 | 999 | 0 | 0 |");
  EXPECT_NE(markdown_header().find("lost"), std::string::npos);
}

}  // namespace
}  // namespace ic::tools::bench
