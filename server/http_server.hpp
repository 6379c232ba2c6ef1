// A small HTTP/1.1 server for the operations endpoints, on civetweb.
//
// Routes are exact paths mapped to handlers that turn an `http_request` into an
// `http_response`; anything else is 404. Handlers run on civetweb's worker threads and must
// be thread-safe. The server knows nothing of auth or policies: the composition root wraps
// handlers for that.
//
//   http_server s;
//   s.route("/healthz", [](const http_request&) { return http_response{200, "ok\n"}; });
//   auto err = s.start("127.0.0.1:0");   // "" on success; s.port() is the bound port
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <string>

struct mg_connection;
struct mg_context;

namespace ic::server {

/// One request as a handler sees it.
struct http_request {
  std::string method;
  std::string path;
  std::string query;
  std::string authorization;  ///< the Authorization header, or empty
  std::string body;
  bool body_too_large = false;  ///< the body exceeded the route's limit and was not read
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

/// Serves registered routes on one listening address. Not copyable; stop() is idempotent.
class http_server {
 public:
  http_server();
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// Registers `handler` for exactly `path`; bodies over `max_body_bytes` are not read.
  /// Call before start().
  void route(const std::string& path, http_handler handler, std::size_t max_body_bytes = 1 << 20);

  /// Starts listening on a civetweb address ("8080", "127.0.0.1:0"). Returns "" on success,
  /// else a one-line reason.
  std::string start(const std::string& listen, int threads = 2);

  /// Returns the bound port (valid after a successful start()).
  int port() const { return port_; }

  /// Stops accepting and waits for in-flight handlers.
  void stop();

 private:
  struct route_entry {
    http_handler handler;
    std::size_t max_body_bytes;
  };
  static int dispatch(::mg_connection* conn, void* self);

  std::map<std::string, route_entry> routes_;
  ::mg_context* ctx_ = nullptr;
  int port_ = 0;
};

}  // namespace ic::server
