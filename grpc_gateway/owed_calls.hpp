// Counts the RPCs whose answer the service still owes, so a graceful stop waits for answers,
// not for connections.
//
// grpc::Server::Shutdown(deadline) returns only once every call is done *and* every client
// connection is gone; a client that keeps its channel open (any long-lived gateway or
// producer does) holds a stop for the whole deadline, with nothing left to answer (measured:
// every SIGTERM under the soak's load took the full 5 s). The server therefore waits, within
// its grace period, until nothing is owed, and only then shuts gRPC down with a short
// deadline (server/server_app.cpp).
//
// Unary calls on the default reactor count from their handler to their Finish
// (`inference_cache_service::answer`); the service's own reactors (ReportCacheState,
// PublishEvent, the two server streams) from construction to OnDone.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace ic::grpc_gateway {

class owed_calls {
 public:
  void open() { n_.fetch_add(1, std::memory_order_relaxed); }
  void close() { n_.fetch_sub(1, std::memory_order_release); }
  /// Calls opened and not closed yet.
  std::int64_t count() const { return n_.load(std::memory_order_acquire); }
  /// Returns true once nothing is owed, false when `deadline` came first (polls every ms:
  /// this runs once, at shutdown).
  bool wait_until_none(std::chrono::steady_clock::time_point deadline) const {
    while (count() > 0) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }

 private:
  std::atomic<std::int64_t> n_{0};
};

}  // namespace ic::grpc_gateway
