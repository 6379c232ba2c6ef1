#include "server/http_server.hpp"

#include <cstring>
#include <string>

#include <civetweb.h>

#include "server/logging.hpp"

namespace ic::server {
namespace {

const char* reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Status";
  }
}

void send(mg_connection* conn, const http_response& r, bool head_only) {
  std::string head = "HTTP/1.1 " + std::to_string(r.status) + " " + reason_phrase(r.status) + "\r\n";
  if (r.status != 204) {
    head += "Content-Type: " + r.content_type + "\r\n";
    head += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  }
  for (const auto& [k, v] : r.headers) head += k + ": " + v + "\r\n";
  head += "Connection: close\r\n\r\n";
  mg_write(conn, head.data(), head.size());
  if (!head_only && r.status != 204 && !r.body.empty()) mg_write(conn, r.body.data(), r.body.size());
}

}  // namespace

http_server::http_server() = default;

http_server::~http_server() { stop(); }

void http_server::route(const std::string& path, http_handler handler, std::size_t max_body_bytes) {
  routes_[path] = route_entry{std::move(handler), max_body_bytes};
}

int http_server::dispatch(mg_connection* conn, void* self_ptr) {
  auto* self = static_cast<http_server*>(self_ptr);
  const mg_request_info* info = mg_get_request_info(conn);
  http_request req;
  req.method = info->request_method ? info->request_method : "";
  req.path = info->local_uri ? info->local_uri : "";
  req.query = info->query_string ? info->query_string : "";
  if (const char* auth = mg_get_header(conn, "Authorization")) req.authorization = auth;

  auto it = self->routes_.find(req.path);
  if (it == self->routes_.end()) {
    send(conn, http_response{404, "404 page not found\n"}, req.method == "HEAD");
    return 404;
  }
  if (info->content_length > 0 &&
      static_cast<std::size_t>(info->content_length) > it->second.max_body_bytes) {
    req.body_too_large = true;
  } else {
    char buf[8192];
    int n;
    while ((n = mg_read(conn, buf, sizeof buf)) > 0) {
      req.body.append(buf, static_cast<std::size_t>(n));
      if (req.body.size() > it->second.max_body_bytes) {
        req.body_too_large = true;
        req.body.clear();
        break;
      }
    }
  }
  http_response resp;
  try {
    resp = it->second.handler(req);
  } catch (const std::exception& e) {
    log_event(spdlog::level::err, "http_handler_error", {{"path", req.path}, {"error", e.what()}});
    resp = http_response{500, std::string("internal error: ") + e.what() + "\n"};
  }
  send(conn, resp, req.method == "HEAD");
  return resp.status;
}

std::string http_server::start(const std::string& listen, int threads) {
  if (ctx_) return "already started";
  static const bool initialised = (mg_init_library(0), true);
  (void)initialised;
  std::string nthreads = std::to_string(threads);
  const char* options[] = {"listening_ports", listen.c_str(),  "num_threads",
                           nthreads.c_str(),  "request_timeout_ms", "5000",
                           "enable_keep_alive", "no",          nullptr};
  mg_callbacks callbacks{};
  // Silence civetweb's own stderr logging; failures are reported by our caller.
  callbacks.log_message = [](const mg_connection*, const char*) { return 1; };
  ctx_ = mg_start(&callbacks, this, options);
  if (!ctx_) return "cannot listen on \"" + listen + "\"";
  mg_set_request_handler(ctx_, "/", &http_server::dispatch, this);
  mg_server_port ports[4];
  std::memset(ports, 0, sizeof ports);
  int n = mg_get_server_ports(ctx_, 4, ports);
  port_ = n > 0 ? ports[0].port : 0;
  return "";
}

void http_server::stop() {
  if (ctx_) {
    mg_stop(ctx_);
    ctx_ = nullptr;
  }
}

}  // namespace ic::server
