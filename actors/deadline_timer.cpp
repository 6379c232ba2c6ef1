#include "actors/deadline_timer.hpp"

namespace ic::actors {

deadline_timer::deadline_timer() : thread_([this] { run(); }) {}

deadline_timer::~deadline_timer() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
  // Calls still pending expire now: nobody else will answer them.
  while (!heap_.empty()) {
    heap_.top()->expire();
    heap_.pop();
  }
}

void deadline_timer::schedule(std::shared_ptr<expiring> call) {
  call->armed.store(true, std::memory_order_relaxed);
  bool earliest;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (heap_.size() >= 4096 && settled_.load(std::memory_order_relaxed) > heap_.size() / 2) {
      std::vector<std::shared_ptr<expiring>> live;
      live.reserve(heap_.size() / 2);
      while (!heap_.empty()) {
        if (!heap_.top()->settled()) live.push_back(heap_.top());
        heap_.pop();
      }
      settled_.store(0, std::memory_order_relaxed);
      heap_ = decltype(heap_)(later{}, std::move(live));
    }
    earliest = heap_.empty() || call->deadline < heap_.top()->deadline;
    heap_.push(std::move(call));
  }
  if (earliest) cv_.notify_one();
}

void deadline_timer::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (heap_.empty()) {
      cv_.wait(lock);
      continue;
    }
    const auto when = heap_.top()->deadline;
    if (std::chrono::steady_clock::now() < when) {
      cv_.wait_until(lock, when);
      continue;
    }
    auto call = heap_.top();
    heap_.pop();
    lock.unlock();
    call->expire();
    call.reset();
    lock.lock();
  }
}

}  // namespace ic::actors
