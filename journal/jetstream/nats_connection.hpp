// Internal to journal/jetstream/ (not a public header: it includes <nats/nats.h>).
//
// One NATS connection plus its JetStream context, set up the way spec/scaleout.md §2.4
// verified: the server list in the given order (NoRandomize), reconnect forever every
// 100 ms, and a destructor that closes, then waits for the ClosedCB before freeing what the
// library's callback thread may still touch (the sample's use-after-free pitfall).
#pragma once

#include <nats/nats.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "journal/status.hpp"

namespace ic::journal::jetstream::detail {

/// Returns "<status text>[ (jetstream error <code>)][: <last error text>]" for messages.
std::string describe(natsStatus s, jsErrCode jerr = static_cast<jsErrCode>(0));

/// Milliseconds left until `deadline` (0 when past).
std::int64_t ms_left(std::chrono::steady_clock::time_point deadline);

/// A connected natsConnection + jsCtx. Thread-safe as libnats is.
class connection {
 public:
  /// Connects to `servers` (tried in order), retrying until `timeout`; `creds_file` may be
  /// empty. Errors: invalid_argument (no servers, bad creds file), unavailable (no server
  /// answered in time).
  static result<std::unique_ptr<connection>> open(const std::vector<std::string>& servers,
                                                  const std::string& name,
                                                  const std::string& creds_file,
                                                  std::chrono::milliseconds timeout);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  natsConnection* nc() const { return nc_; }
  jsCtx* js() const { return js_; }
  /// True while the connection is up (false while reconnecting).
  bool connected() const { return natsConnection_Status(nc_) == NATS_CONN_STATUS_CONNECTED; }

 private:
  connection() = default;
  static void on_closed(natsConnection*, void* self);

  natsOptions* opts_ = nullptr;
  natsConnection* nc_ = nullptr;
  jsCtx* js_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;
};

}  // namespace ic::journal::jetstream::detail
