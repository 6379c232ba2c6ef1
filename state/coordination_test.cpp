// The coordinator's rules without actors: the phase machine, the headroom rule, the cap merge
// by messages, the snapshot and sweep schedules, with time as an argument (no clock, no sleeps).
#include "state/coordination.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

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

using kind = dispatch_item::kind;
using action = dispatch_action;

/// A drained() predicate that answers `value` and counts how often it was asked.
struct drain_probe {
  bool value = true;
  int asked = 0;
  std::function<bool()> fn() {
    return [this] {
      ++asked;
      return value;
    };
  }
};

TEST(DispatchMachine, FarFromTheCapEverythingButPolicyDispatchesWithoutAskingForADrain) {
  dispatch_machine m(1000);
  drain_probe d{false};
  for (kind k : {kind::update, kind::event, kind::sweep, kind::probe}) {
    EXPECT_EQ(m.next(dispatch_item{k, 10}, false, d.fn(), 100, 500), action::dispatch);
    EXPECT_EQ(m.phase(), dispatch_phase::running);
  }
  EXPECT_EQ(d.asked, 0);  // asking arms a drained notice: never without need
  EXPECT_EQ(m.next(std::nullopt, false, d.fn(), 0, 0), action::idle);
}

TEST(DispatchMachine, AnUpdateThatCouldReachTheCapDrainsThenAppliesAlone) {
  dispatch_machine m(1000);
  drain_probe d{false};
  const dispatch_item big{kind::update, 64};
  EXPECT_EQ(m.next(big, false, d.fn(), 0, 950), action::wait_drained);
  EXPECT_EQ(m.phase(), dispatch_phase::draining);
  EXPECT_EQ(m.next(big, false, d.fn(), 0, 950), action::idle);  // not running: nothing moves
  EXPECT_TRUE(m.drained());
  EXPECT_FALSE(m.drained());  // a repeated notice changes nothing
  d.value = true;
  EXPECT_EQ(m.next(big, false, d.fn(), 0, 950), action::dispatch_alone);
  EXPECT_EQ(m.phase(), dispatch_phase::exclusive);
  EXPECT_EQ(m.next(dispatch_item{kind::event}, false, d.fn(), 0, 950), action::idle);
  m.finished();
  EXPECT_EQ(m.phase(), dispatch_phase::running);
}

TEST(DispatchMachine, UnboundedCapNeverAppliesAlone) {
  dispatch_machine m(0);
  drain_probe d{false};
  EXPECT_EQ(m.next(dispatch_item{kind::update, 1'000'000}, false, d.fn(), 1'000'000, 1'000'000),
            action::dispatch);
  EXPECT_EQ(d.asked, 0);
}

TEST(DispatchMachine, PolicyRecordsAlwaysWaitForADrainThenEnterThePolicyPhase) {
  dispatch_machine m(0);
  drain_probe d{true};
  EXPECT_EQ(m.next(dispatch_item{kind::policy}, false, d.fn(), 0, 0), action::apply_policy);
  EXPECT_EQ(m.phase(), dispatch_phase::policy);
  EXPECT_EQ(d.asked, 1);
  m.finished();
  d.value = false;
  EXPECT_EQ(m.next(dispatch_item{kind::policy}, false, d.fn(), 0, 0), action::wait_drained);
}

TEST(DispatchMachine, AReloadWaitsForADrainThenSwapsAloneAtAQuiescentPoint) {
  dispatch_machine m(0);
  drain_probe d{false};
  EXPECT_EQ(m.next(dispatch_item{kind::reload}, false, d.fn(), 0, 0), action::wait_drained);
  EXPECT_EQ(m.phase(), dispatch_phase::draining);
  EXPECT_TRUE(m.drained());
  d.value = true;
  EXPECT_EQ(m.next(dispatch_item{kind::reload}, false, d.fn(), 0, 0), action::swap_state);
  EXPECT_EQ(m.phase(), dispatch_phase::quiet);
  // Nothing else is dispatched until the swap finished.
  EXPECT_EQ(m.next(dispatch_item{kind::event}, false, d.fn(), 0, 0), action::idle);
  m.finished();
  EXPECT_EQ(m.next(dispatch_item{kind::event}, false, d.fn(), 0, 0), action::dispatch);
}

TEST(DispatchMachine, AQueuedJobGoesBeforeTheQueueAndRunsAtAQuiescentPoint) {
  dispatch_machine m(1000);
  drain_probe d{false};
  EXPECT_EQ(m.next(dispatch_item{kind::event}, true, d.fn(), 0, 0), action::wait_drained);
  ASSERT_TRUE(m.drained());
  d.value = true;
  EXPECT_EQ(m.next(dispatch_item{kind::event}, true, d.fn(), 0, 0), action::start_job);
  EXPECT_EQ(m.phase(), dispatch_phase::quiet);
  m.finished();
  EXPECT_EQ(m.next(std::nullopt, true, d.fn(), 0, 0), action::start_job);  // empty queue too
}

index::cap_head head(std::uint32_t count, index::micros ts, const std::string& tenant) {
  return index::cap_head{count, ts, tenant};
}

TEST(CapMergeMessages, WaitsForEveryHeadThenOrdersTheFirstVictimBoundedByTheSecond) {
  cap_merge m;
  EXPECT_FALSE(m.start({}));
  ASSERT_TRUE(m.start({"a", "b", "c"}));
  EXPECT_FALSE(m.on_head("b", head(0, 50, "b")));
  EXPECT_FALSE(m.on_head("a", std::nullopt));  // a holds nothing
  EXPECT_TRUE(m.on_head("c", head(0, 20, "c")));
  auto o = m.next(10);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->tenant, "c");
  ASSERT_TRUE(o->bound);
  EXPECT_EQ(o->bound->tenant, "b");
  EXPECT_EQ(o->bound->last_seen, 50);
  EXPECT_FALSE(m.next(0));  // within the cap: done
  // c evicted up to b's victim; its next one is newer than b's, so b evicts next, unbounded
  // by a (nothing) and bounded by c.
  EXPECT_TRUE(m.on_evicted("c", 3, head(0, 70, "c")));
  o = m.next(7);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->tenant, "b");
  ASSERT_TRUE(o->bound);
  EXPECT_EQ(o->bound->tenant, "c");
  EXPECT_FALSE(m.on_evicted("b", 0, head(0, 60, "b")));  // evicted nothing: stop
}

TEST(CapMergeMessages, EqualVictimsBreakTiesByTenantName) {
  cap_merge m;
  ASSERT_TRUE(m.start({"zeta", "alpha"}));
  m.on_head("zeta", head(2, 10, "zeta"));
  m.on_head("alpha", head(2, 10, "alpha"));
  const auto o = m.next(1);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->tenant, "alpha");
}

TEST(CapMergeMessages, RandomMergesEvictInTheGlobalOrder) {
  // Each tenant's victims as a sorted list; evicting by the merge's orders must visit the
  // union in cap_before order, exactly `excess` of them.
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    std::map<std::string, std::vector<index::cap_head>> victims;
    std::vector<index::cap_head> all;
    for (const char* t : {"a", "b", "c", "d"}) {
      const int n = static_cast<int>(rng() % 6);
      for (int i = 0; i < n; ++i) {
        victims[t].push_back(head(rng() % 3, static_cast<index::micros>(rng() % 20), t));
      }
      std::sort(victims[t].begin(), victims[t].end(), [](const auto& x, const auto& y) {
        return index::cap_before(x, y);
      });
      all.insert(all.end(), victims[t].begin(), victims[t].end());
    }
    std::sort(all.begin(), all.end(),
              [](const auto& x, const auto& y) { return index::cap_before(x, y); });
    std::int64_t excess = static_cast<std::int64_t>(rng() % (all.size() + 2));
    const std::int64_t want = std::min<std::int64_t>(excess, static_cast<std::int64_t>(all.size()));
    cap_merge m;
    std::map<std::string, std::size_t> next;
    std::vector<std::string> names;
    for (auto& [t, v] : victims) names.push_back(t);
    if (names.empty()) continue;
    ASSERT_TRUE(m.start(names));
    for (auto& [t, v] : victims)
      m.on_head(t, v.empty() ? std::nullopt : std::optional<index::cap_head>(v[0]));
    std::vector<index::cap_head> evicted;
    while (auto o = m.next(excess)) {
      // The tenant evicts (like evict_cap) while its victim sorts before the bound, >= 1.
      auto& v = victims[o->tenant];
      std::size_t& i = next[o->tenant];
      std::int64_t n = 0;
      do {
        evicted.push_back(v[i++]);
        ++n;
        --excess;
      } while (excess > 0 && i < v.size() && (!o->bound || index::cap_before(v[i], *o->bound)));
      const auto h = i < v.size() ? std::optional<index::cap_head>(v[i]) : std::nullopt;
      ASSERT_TRUE(m.on_evicted(o->tenant, n, h));
    }
    ASSERT_EQ(static_cast<std::int64_t>(evicted.size()), want) << "round " << round;
    for (std::size_t i = 0; i < evicted.size(); ++i) {
      EXPECT_EQ(evicted[i].tenant, all[i].tenant) << "round " << round << " victim " << i;
      EXPECT_EQ(evicted[i].last_seen, all[i].last_seen);
      EXPECT_EQ(evicted[i].count, all[i].count);
    }
  }
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

TEST(SweepSchedule, DueFromTheFirstTimeThenOneIntervalAfterEachSweepTaken) {
  const auto t0 = clock::time_point{} + 1h;
  sweep_schedule s(1min, t0 + 1min);
  EXPECT_EQ(s.wait(t0), clock::duration(1min));
  EXPECT_FALSE(s.take_due(t0 + 59s));
  EXPECT_TRUE(s.take_due(t0 + 90s));  // late: the next one counts from here
  EXPECT_FALSE(s.take_due(t0 + 90s));
  EXPECT_EQ(s.wait(t0 + 100s), clock::duration(50s));
  EXPECT_FALSE(s.take_due(t0 + 149s));
  EXPECT_TRUE(s.take_due(t0 + 150s));
  EXPECT_EQ(s.wait(t0 + 1h), clock::duration::zero());
}

TEST(SweepSchedule, StartUpSweepIsDueAtOnceAndNoIntervalIsNeverDue) {
  const auto t0 = clock::time_point{} + 1h;
  sweep_schedule at_start(1min, t0);
  EXPECT_EQ(at_start.wait(t0), clock::duration::zero());
  EXPECT_TRUE(at_start.take_due(t0));
  EXPECT_FALSE(sweep_schedule(0s, t0).take_due(t0 + 24h));
  EXPECT_FALSE(sweep_schedule().take_due(t0 + 24h));
  EXPECT_GT(sweep_schedule().wait(t0), clock::duration::zero());
}

}  // namespace
}  // namespace ic::state
