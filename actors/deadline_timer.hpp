// A deadline timer thread for the gateway's asks: an expiring call fires at its deadline
// unless its actor answered first (whoever claims the call first answers it).
//
//   deadline_timer timer;
//   timer.schedule(call);        // call->expire() runs on the timer thread at call->deadline
//
// One thread and one min-heap: scheduling costs a mutex and a heap push; the thread is only
// woken when a call becomes the earliest deadline. Calls answered early stay in the heap
// until their deadline (or until most of the heap is answered calls, see `note_settled`)
// and are then skipped by `expire` itself.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

namespace ic::actors {

/// Something with a deadline.
class expiring {
 public:
  virtual ~expiring() = default;
  /// Called once, on the timer thread, at or after `deadline()`.
  virtual void expire() = 0;
  /// True once answered by someone else (the timer may forget it early).
  virtual bool settled() const = 0;
  std::chrono::steady_clock::time_point deadline{};
  /// Set by `deadline_timer::schedule` (a call answered before it was armed never is).
  std::atomic<bool> armed{false};
};

class deadline_timer {
 public:
  deadline_timer();
  ~deadline_timer();
  deadline_timer(const deadline_timer&) = delete;
  deadline_timer& operator=(const deadline_timer&) = delete;

  /// Calls `call->expire()` at `call->deadline`.
  void schedule(std::shared_ptr<expiring> call);
  /// Tells the timer that `call` was answered early; when most of the heap is answered
  /// calls, the next `schedule` drops them (so calls with long deadlines do not pile up at
  /// high rates). A call that was never scheduled is not counted.
  void note_settled(const expiring& call) {
    if (call.armed.load(std::memory_order_relaxed)) settled_.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  struct later {
    bool operator()(const std::shared_ptr<expiring>& a, const std::shared_ptr<expiring>& b) const {
      return a->deadline > b->deadline;
    }
  };
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<std::shared_ptr<expiring>, std::vector<std::shared_ptr<expiring>>, later> heap_;
  std::atomic<std::size_t> settled_{0};
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ic::actors
