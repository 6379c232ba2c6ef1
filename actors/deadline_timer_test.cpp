#include "actors/deadline_timer.hpp"

#include <atomic>
#include <future>

#include <gtest/gtest.h>

namespace ic::actors {
namespace {

using namespace std::chrono_literals;

struct test_call final : expiring {
  std::atomic<bool> answered{false};
  std::promise<void> expired;
  std::atomic<int> expirations{0};
  void expire() override {
    ++expirations;
    if (!answered.exchange(true)) expired.set_value();
  }
  bool settled() const override { return answered.load(); }
};

TEST(DeadlineTimer, ExpiresACallAtItsDeadline) {
  deadline_timer timer;
  auto call = std::make_shared<test_call>();
  call->deadline = std::chrono::steady_clock::now() + 5ms;
  auto fut = call->expired.get_future();
  timer.schedule(call);
  ASSERT_EQ(fut.wait_for(10s), std::future_status::ready);
  EXPECT_GE(std::chrono::steady_clock::now(), call->deadline);
  EXPECT_EQ(call->expirations.load(), 1);
}

TEST(DeadlineTimer, AnEarlierDeadlineScheduledLaterFiresFirst) {
  deadline_timer timer;
  auto late = std::make_shared<test_call>();
  late->deadline = std::chrono::steady_clock::now() + 1h;
  timer.schedule(late);
  auto soon = std::make_shared<test_call>();
  soon->deadline = std::chrono::steady_clock::now() + 1ms;
  auto fut = soon->expired.get_future();
  timer.schedule(soon);
  ASSERT_EQ(fut.wait_for(10s), std::future_status::ready);
  EXPECT_FALSE(late->answered.load());
}

TEST(DeadlineTimer, AnsweredCallsAreDroppedWhenTheyDominateTheHeap) {
  deadline_timer timer;
  std::vector<std::weak_ptr<test_call>> answered;
  for (int i = 0; i < 5000; ++i) {
    auto c = std::make_shared<test_call>();
    c->deadline = std::chrono::steady_clock::now() + 1h;
    timer.schedule(c);
    c->answered = true;
    timer.note_settled(*c);
    answered.push_back(c);
  }
  // The next schedule compacts: the answered calls are released long before their deadline.
  auto c = std::make_shared<test_call>();
  c->deadline = std::chrono::steady_clock::now() + 1h;
  timer.schedule(c);
  std::size_t alive = 0;
  for (const auto& w : answered) alive += w.expired() ? 0 : 1;
  EXPECT_LT(alive, answered.size());
}

TEST(DeadlineTimer, PendingCallsExpireWhenTheTimerStops) {
  auto call = std::make_shared<test_call>();
  call->deadline = std::chrono::steady_clock::now() + 1h;
  {
    deadline_timer timer;
    timer.schedule(call);
  }
  EXPECT_EQ(call->expirations.load(), 1);
}

}  // namespace
}  // namespace ic::actors
