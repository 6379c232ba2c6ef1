// The composition root: owns every long-lived component of inferencecache-server and runs
// its lifecycle.
//
// start() brings components up in order (HTTP listeners with /readyz at 503, gRPC with
// health NOT_SERVING, recovery, then ready); stop() takes them down in reverse order.
//
//   server_app app(cfg);
//   if (int rc = app.start(); rc != 0) return rc;
//   wait_for_signal();
//   app.stop();
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "server/config.hpp"

namespace ic::server {

/// Runs one server instance. Not copyable; stop() is idempotent.
class server_app {
 public:
  explicit server_app(server_config cfg);
  ~server_app();
  server_app(const server_app&) = delete;
  server_app& operator=(const server_app&) = delete;

  /// Starts everything; returns 0, or the process exit code after logging the failure once.
  int start();

  /// Graceful stop: not ready, drain in-flight RPCs (bounded), stop listeners.
  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace ic::server
