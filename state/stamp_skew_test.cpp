// The clock cross-check of spec/scaleout.md §3.4 (state/stamp_skew.hpp).
#include "state/stamp_skew.hpp"

#include <gtest/gtest.h>

namespace ic::state {
namespace {

constexpr index::micros kT0 = 1'700'000'000'000'000;
constexpr std::int64_t kT0ns = kT0 * 1000;

TEST(StampSkew, KeepsTheLastDifferenceAndCountsThoseOverOneSecond) {
  stamp_skew s;
  EXPECT_EQ(s.last_us(), 0);
  s.observe(kT0ns + 2'000'000, kT0);  // stored 2 ms after its stamp: publish latency
  EXPECT_EQ(s.last_us(), 2'000);
  EXPECT_EQ(s.over_threshold(), 0u);
  s.observe(kT0ns, kT0 + 3'000'000);  // the producer's clock runs 3 s ahead
  EXPECT_EQ(s.last_us(), -3'000'000);
  EXPECT_EQ(s.over_threshold(), 1u);
  s.observe(kT0ns + 1'500'000'000, kT0);  // stored 1.5 s late (or that clock is behind)
  EXPECT_EQ(s.last_us(), 1'500'000);
  EXPECT_EQ(s.over_threshold(), 2u);
  s.observe(kT0ns + 1'000'000'000, kT0);  // exactly the threshold: not over it
  EXPECT_EQ(s.over_threshold(), 2u);
}

TEST(StampSkew, IgnoresBatchesWithoutAStreamTimeOrAStamp) {
  stamp_skew s;
  s.observe(0, kT0);
  s.observe(kT0ns, 0);
  s.observe(-1, kT0);
  EXPECT_EQ(s.last_us(), 0);
  EXPECT_EQ(s.over_threshold(), 0u);
}

}  // namespace
}  // namespace ic::state
