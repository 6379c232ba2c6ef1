// The fast path's waiting LFU credits (tenant_entry, actors/shared.hpp): when a lookup has to
// settle them, and that credits without hits are not kept.
#include "actors/shared.hpp"

#include <gtest/gtest.h>

namespace ic::actors {
namespace {

/// One lookup's credit: `replicas` scored replicas with `hits` LFU hits each.
std::vector<index::scored_replica> credit(std::size_t replicas, std::size_t hits) {
  std::vector<index::scored_replica> c(replicas);
  for (std::size_t i = 0; i < replicas; ++i) {
    c[i].score.replica_id = "r" + std::to_string(i);
    c[i].hits.resize(hits);
  }
  return c;
}

std::size_t hits_of(const std::vector<index::scored_replica>& c) {
  std::size_t n = 0;
  for (const auto& r : c) n += r.hits.size();
  return n;
}

TEST(TenantEntryCredits, CreditsWithoutHitsAreNotKeptAndNeverAskToSettle) {
  tenant_entry e(nullptr);
  for (int i = 0; i < 100000; ++i) EXPECT_FALSE(e.add_credit(credit(8, 0)));
  EXPECT_TRUE(e.take_credits().empty());
}

TEST(TenantEntryCredits, CreditsWaitUntilSettleHitsThenOneLookupSettlesThem) {
  tenant_entry e(nullptr);
  // 8 replicas x 64 hits = 520 counted per lookup: the 32nd reaches 16384, not before.
  const std::size_t per = 8 * 64 + 8;
  const std::size_t needed = (tenant_entry::settle_hits + per - 1) / per;
  for (std::size_t i = 1; i < needed; ++i) ASSERT_FALSE(e.add_credit(credit(8, 64))) << i;
  EXPECT_TRUE(e.add_credit(credit(8, 64)));
  EXPECT_FALSE(e.add_credit(credit(8, 64)));  // already asked: no second settle
  auto taken = e.take_credits();
  EXPECT_EQ(taken.size(), (needed + 1) * 8);
  EXPECT_EQ(hits_of(taken), (needed + 1) * 8 * 64);
  // Taking resets the count: the next batch waits again.
  EXPECT_FALSE(e.add_credit(credit(8, 64)));
  EXPECT_EQ(hits_of(e.take_credits()), 8u * 64);
}

TEST(TenantEntryCredits, ACreditWithoutAnyHitIsDroppedAndTheOthersKeptInOrder) {
  tenant_entry e(nullptr);
  EXPECT_FALSE(e.add_credit(credit(2, 1)));
  EXPECT_FALSE(e.add_credit(credit(3, 0)));
  EXPECT_FALSE(e.add_credit(credit(1, 2)));
  auto taken = e.take_credits();
  ASSERT_EQ(taken.size(), 3u);
  EXPECT_EQ(taken[0].score.replica_id, "r0");
  EXPECT_EQ(taken[1].score.replica_id, "r1");
  EXPECT_EQ(taken[2].hits.size(), 2u);
}

}  // namespace
}  // namespace ic::actors
