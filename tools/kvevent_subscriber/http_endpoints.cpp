#include "tools/kvevent_subscriber/http_endpoints.hpp"

#include <cstring>

#include <civetweb.h>

namespace ic::kvevent {

int http_endpoints::dispatch(mg_connection* conn, void* cbdata) {
  auto* self = static_cast<http_endpoints*>(cbdata);
  const mg_request_info* info = mg_get_request_info(conn);
  std::string path = info->local_uri ? info->local_uri : "/";
  http_reply r;
  auto it = self->routes_.find(path);
  if (it == self->routes_.end()) {
    r = http_reply{404, "text/plain; charset=utf-8", "404 page not found\n"};
  } else if (std::strcmp(info->request_method, "GET") != 0 && std::strcmp(info->request_method, "HEAD") != 0) {
    r = http_reply{405, "text/plain; charset=utf-8", "method not allowed\n"};
  } else {
    try {
      r = it->second();
    } catch (const std::exception& e) {
      r = http_reply{500, "text/plain; charset=utf-8", std::string("internal error: ") + e.what() + "\n"};
    }
  }
  mg_printf(conn, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", r.status,
            mg_get_response_code_text(conn, r.status), r.content_type.c_str(), r.body.size());
  if (std::strcmp(info->request_method, "HEAD") != 0) mg_write(conn, r.body.data(), r.body.size());
  return r.status;
}

std::string http_endpoints::start(const std::string& bind_address) {
  static const bool initialised = (mg_init_library(0), true);
  (void)initialised;
  std::string listen = bind_address;
  if (!listen.empty() && listen[0] == ':') listen = "0.0.0.0" + listen;
  const char* options[] = {"listening_ports", listen.c_str(), "num_threads", "1", "request_timeout_ms", "5000",
                           "enable_keep_alive", "no", nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = [](const mg_connection*, const char*) { return 1; };
  ctx_ = mg_start(&callbacks, this, options);
  if (!ctx_) return "cannot listen on \"" + bind_address + "\"";
  mg_set_request_handler(ctx_, "/", &http_endpoints::dispatch, this);
  mg_server_port ports[4];
  std::memset(ports, 0, sizeof ports);
  int n = mg_get_server_ports(ctx_, 4, ports);
  port_ = n > 0 ? ports[0].port : 0;
  return "";
}

void http_endpoints::stop() {
  if (ctx_) {
    mg_stop(ctx_);
    ctx_ = nullptr;
  }
}

}  // namespace ic::kvevent
