#include "actors/event_bus.hpp"

#include <algorithm>

namespace ic::actors {

void event_bus::add(subscriber_ptr sub, runtime_probe* probe) {
  std::lock_guard<std::mutex> g(mu_);
  prune_locked(probe);
  subs_.push_back(std::move(sub));
  active_.store(true, std::memory_order_release);
}

void event_bus::prune(runtime_probe* probe) {
  if (!active()) return;
  std::lock_guard<std::mutex> g(mu_);
  prune_locked(probe);
}

void event_bus::end_all(const std::string& why) {
  std::vector<subscriber_ptr> ended;
  {
    std::lock_guard<std::mutex> g(mu_);
    ended.swap(subs_);
    active_.store(false, std::memory_order_release);
  }
  for (auto& sub : ended)
    if (sub) sub->end(why);
}

void event_bus::publish(const index::change_log& changes, runtime_probe* probe) {
  if (changes.empty()) return;
  std::lock_guard<std::mutex> g(mu_);
  for (const auto& c : changes) {
    for (auto& sub : subs_) {
      if (sub && sub->filter().matches(c) && !sub->offer(c)) drop(sub, probe);
    }
  }
  prune_locked(probe);
}

void event_bus::drop(subscriber_ptr& sub, runtime_probe* probe) {
  if (sub && sub->overflowed() && probe) probe->on_subscriber_dropped();
  sub.reset();
}

void event_bus::prune_locked(runtime_probe* probe) {
  for (auto& sub : subs_)
    if (sub && !sub->alive()) drop(sub, probe);
  subs_.erase(std::remove(subs_.begin(), subs_.end(), nullptr), subs_.end());
  active_.store(!subs_.empty(), std::memory_order_release);
}

}  // namespace ic::actors
