// A small civetweb HTTP server for the subscriber's own endpoints (A22): GET handlers by
// exact path, one worker thread, never authenticated. It listens on `--http-bind-address`
// (`:9465` = every interface; `host:port`; port 0 picks a free port).
#pragma once

#include <functional>
#include <map>
#include <string>

struct mg_context;
struct mg_connection;

namespace ic::kvevent {

struct http_reply {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class http_endpoints {
 public:
  using handler = std::function<http_reply()>;
  ~http_endpoints() { stop(); }

  void route(const std::string& path, handler h) { routes_[path] = std::move(h); }
  /// Starts listening; "" on success, else the reason.
  std::string start(const std::string& bind_address);
  void stop();
  int port() const { return port_; }

 private:
  static int dispatch(mg_connection* conn, void* self);
  std::map<std::string, handler> routes_;
  mg_context* ctx_ = nullptr;
  int port_ = 0;
};

}  // namespace ic::kvevent
