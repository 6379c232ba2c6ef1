// A small HTTP/1.1 server for the operations endpoints, on libmicrohttpd's epoll event loop.
//
// Routes are exact paths mapped to handlers that turn an `http_request` into an
// `http_response`; anything else is 404. The server knows nothing of auth or policies: the
// composition root wraps handlers for that.
//
// Why it holds under hostile clients (issue #16): one event-loop thread owns every socket,
// so idle or half-sent connections cost a file descriptor and a few KiB, never a thread.
// Handlers run either on the loop (`route_mode::loop`: must answer at once, e.g. /healthz) or
// on a bounded worker pool (`route_mode::worker`, the default: may block on the index); a
// worker request suspends its connection, so a slow handler never stalls the loop. A
// connection that has not delivered a complete request within `idle_timeout`, or that stays
// silent that long, is closed; at most `max_connections` are open at once and the rest are
// closed at accept (counted through `on_connection_rejected`, logged at most every 10 s).
//
//   http_server s;
//   s.route("/healthz", [](const http_request&) { return http_response{200, "ok\n"}; },
//           1 << 20, route_mode::loop);
//   auto err = s.start("127.0.0.1:0");   // "" on success; s.port() is the bound port
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

namespace ic::server {

/// One request as a handler sees it.
struct http_request {
  std::string method;
  std::string path;
  std::string query;          ///< decoded query arguments joined as k=v&k2=v2, or empty
  std::string authorization;  ///< the Authorization header, or empty
  std::string body;
  bool body_too_large = false;  ///< the body exceeded the route's limit and was not kept
};

/// One response; `headers` are extra lines such as {"Allow", "GET"}.
struct http_response {
  http_response(int status_code = 200, std::string body_text = {})
      : status(status_code), body(std::move(body_text)) {}

  int status;
  std::string body;
  std::string content_type = "text/plain; charset=utf-8";
  std::map<std::string, std::string> headers;
};

using http_handler = std::function<http_response(const http_request&)>;

/// Where a route's handler runs.
enum class route_mode {
  worker,  ///< on the bounded worker pool: may block (the default)
  loop,    ///< on the event-loop thread: must return at once and never block
};

/// Resource bounds of one listener.
struct http_limits {
  /// Listener name for logs and metric labels ("http", "admin").
  std::string name = "http";
  /// Worker threads for `route_mode::worker` handlers.
  int workers = 4;
  /// Requests waiting for a worker; beyond that a request is answered 503 at once.
  std::size_t max_queued = 64;
  /// Connections open at once; a new one beyond that is closed at accept.
  std::size_t max_connections = 1024;
  /// A connection without a complete request after this long, or silent this long, is
  /// closed (silence is checked in whole seconds, rounded up).
  std::chrono::milliseconds idle_timeout = std::chrono::seconds(10);
  /// Called (on the loop thread) once per connection closed by `max_connections`.
  std::function<void()> on_connection_rejected;
};

/// Serves registered routes on one listening address. Not copyable; stop() is idempotent.
class http_server {
 public:
  http_server();
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// Registers `handler` for exactly `path`; bodies over `max_body_bytes` are not kept.
  /// Call before start().
  void route(const std::string& path, http_handler handler, std::size_t max_body_bytes = 1 << 20,
             route_mode mode = route_mode::worker);

  /// Starts listening on "[host:]port" ("8080" = every IPv4 interface, "127.0.0.1:0",
  /// "[::1]:8081"). Returns "" on success, else a one-line reason.
  std::string start(const std::string& listen, const http_limits& limits = {});

  /// Returns the bound port (valid after a successful start()).
  int port() const { return port_; }

  /// Connections open now.
  std::size_t open_connections() const;

  /// Requests waiting for a worker now.
  std::size_t queued_requests() const;

  /// Connections closed at accept because `max_connections` were open (since start).
  std::uint64_t rejected_connections() const;

  /// Stops accepting and waits for in-flight handlers. The queries above stay safe to call
  /// from other threads during and after it (they answer 0 once stopped): the server state is
  /// freed by the destructor, not here.
  void stop();

 private:
  struct impl;
  struct route_entry {
    http_handler handler;
    std::size_t max_body_bytes;
    route_mode mode;
  };

  std::map<std::string, route_entry> routes_;
  std::unique_ptr<impl> impl_;
  /// impl_.get() from the end of a successful start() until stop() begins: what the queries
  /// read. Other threads call them (a /metrics scrape on the other port reads this server's
  /// open connections), also while stop() runs; TSan found stop() resetting impl_ under
  /// such a read (a use-after-free at shutdown).
  std::atomic<impl*> live_{nullptr};
  bool stopped_ = false;
  int port_ = 0;
};

}  // namespace ic::server
