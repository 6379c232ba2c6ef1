// The coordinator's rules without actors: the headroom rule and the snapshot schedule, with
// time as an argument (no clock, no sleeps).
#include "state/coordination.hpp"

#include <gtest/gtest.h>

namespace ic::state {
namespace {

using namespace std::chrono_literals;
using clock = snapshot_schedule::clock;

TEST(HeadroomRule, UpdatesApplyConcurrentlyOnlyWhileNoneInFlightCanReachTheCap) {
  EXPECT_FALSE(must_apply_alone(100, 20, 60, 20));  // 100 exactly: still within the cap
  EXPECT_TRUE(must_apply_alone(100, 20, 60, 21));
  EXPECT_TRUE(must_apply_alone(100, 0, 150, 0));    // already over (restart with a lower cap)
  EXPECT_FALSE(must_apply_alone(0, 1'000, 1'000'000, 1'000));  // unbounded
}

TEST(SnapshotSchedule, DueByRecordCountOrIntervalOnlyWhenSomethingIsNew) {
  const auto t0 = clock::time_point{} + 1h;
  snapshot_schedule s(10min, 1000, t0);
  EXPECT_FALSE(s.due(999, t0 + 1min));
  EXPECT_TRUE(s.due(1000, t0 + 1min));
  EXPECT_FALSE(s.due(1, t0 + 9min));
  EXPECT_TRUE(s.due(1, t0 + 10min));
  EXPECT_FALSE(s.due(0, t0 + 1h));  // nothing new
  s.started(t0 + 10min);
  EXPECT_FALSE(s.due(1, t0 + 19min));
  EXPECT_TRUE(s.due(1, t0 + 20min));
}

TEST(SnapshotSchedule, ZeroMeansNeverByThatTriggerAndDefaultIsNeverDue) {
  const auto t0 = clock::time_point{} + 1h;
  EXPECT_FALSE(snapshot_schedule(0s, 0, t0).due(1'000'000, t0 + 24h));
  EXPECT_FALSE(snapshot_schedule(0s, 100, t0).due(99, t0 + 24h));
  EXPECT_TRUE(snapshot_schedule(0s, 100, t0).due(100, t0));
  EXPECT_FALSE(snapshot_schedule().due(1'000'000, t0));
}

TEST(SnapshotSchedule, AFailureBacksOffAtLeastAMinuteOrTheInterval) {
  const auto t0 = clock::time_point{} + 1h;
  snapshot_schedule s(0s, 10, t0);
  s.failed(t0);
  EXPECT_FALSE(s.due(100, t0 + 59s));
  EXPECT_TRUE(s.due(100, t0 + 60s));
  snapshot_schedule slow(5min, 10, t0);
  slow.failed(t0);
  EXPECT_FALSE(slow.due(100, t0 + 4min));
  EXPECT_TRUE(slow.due(100, t0 + 5min));
}

}  // namespace
}  // namespace ic::state
