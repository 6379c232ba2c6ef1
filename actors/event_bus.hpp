// The event bus: StreamCacheEvents subscribers, fed by the tenant actors.
#pragma once

#include <atomic>
#include <mutex>
#include <vector>

#include "actors/messages.hpp"
#include "index/types.hpp"

namespace ic::actors {

/// StreamCacheEvents subscribers. Tenant actors publish their changes here (each tenant's
/// changes from its one actor, so per-tenant order holds); offers never block. Thread-safe.
class event_bus {
 public:
  /// Registers `sub` (and drops ended subscribers).
  void add(subscriber_ptr sub, runtime_probe* probe);
  /// True while anyone listens (tenant actors skip change logging otherwise).
  bool active() const { return active_.load(std::memory_order_acquire); }
  /// Drops ended subscribers, also those whose filter never matches again.
  void prune(runtime_probe* probe);
  /// Ends every subscriber with `why` (event_subscriber::end) and drops them.
  void end_all(const std::string& why);
  /// Offers every change to every subscriber whose filter it matches.
  void publish(const index::change_log& changes, runtime_probe* probe);

 private:
  static void drop(subscriber_ptr& sub, runtime_probe* probe);
  void prune_locked(runtime_probe* probe);

  std::mutex mu_;
  std::vector<subscriber_ptr> subs_;
  std::atomic<bool> active_{false};
};

}  // namespace ic::actors
