#include "server/http_server.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include <microhttpd.h>

#include "server/logging.hpp"

namespace ic::server {
namespace {

using clock_type = std::chrono::steady_clock;

// One TCP connection (MHD's socket context), created and destroyed on the loop thread.
struct conn_state {
  int fd;
  clock_type::time_point accepted;
  bool request_received = false;  // a complete request arrived: never cut for slowness now
  bool cut = false;               // shut down by the sweeper
};

// Splits "[host:]port" and resolves it to one socket address. Dotted numbers must be a
// valid IPv4 address (no DNS lookup for "256.1.1.1"); "" means every IPv4 interface.
std::string resolve_listen(const std::string& listen, sockaddr_storage& out, bool& ipv6) {
  std::string host, port = listen;
  if (auto colon = listen.rfind(':'); colon != std::string::npos) {
    host = listen.substr(0, colon);
    port = listen.substr(colon + 1);
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (port.empty() || !std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c); }))
    return "bad port \"" + port + "\"";
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  hints.ai_family = host.empty() ? AF_INET : AF_UNSPEC;
  const bool numeric_looking =
      !host.empty() && std::all_of(host.begin(), host.end(), [](unsigned char c) {
        return std::isdigit(c) || c == '.' || c == ':';
      });
  if (numeric_looking) hints.ai_flags |= AI_NUMERICHOST;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0 || !found) return std::string("bad address: ") + ::gai_strerror(rc);
  std::memcpy(&out, found->ai_addr, found->ai_addrlen);
  ipv6 = found->ai_family == AF_INET6;
  ::freeaddrinfo(found);
  return "";
}

}  // namespace

struct http_server::impl {
  // One request (MHD's con_cls), created on the first handler call and freed when MHD
  // reports the request complete.
  struct request_state {
    const route_entry* route = nullptr;  // nullptr: 404
    http_request req;
    bool dispatched = false;  // handed to a worker; the connection is suspended
    bool ready = false;       // `resp` is final
    http_response resp;
  };
  struct job {
    request_state* rs;
    MHD_Connection* conn;
  };

  impl(http_server* o, http_limits l) : owner(o), limits(std::move(l)) {}

  http_server* owner;
  http_limits limits;
  MHD_Daemon* daemon = nullptr;
  std::string last_mhd_error;  // MHD's last log line (reported when start fails)

  // Open connections; the loop thread adds and removes, the sweeper reads.
  mutable std::mutex conns_mu;
  std::unordered_set<conn_state*> conns;
  std::atomic<std::uint64_t> rejected{0};
  clock_type::time_point last_limit_log{};  // loop thread only
  std::uint64_t rejected_at_last_log = 0;

  // The worker pool.
  mutable std::mutex pool_mu;
  std::condition_variable pool_cv;
  std::deque<job> queue;
  bool stopping = false;
  std::vector<std::thread> workers;

  // The sweeper (closes connections whose request is overdue).
  std::mutex sweep_mu;
  std::condition_variable sweep_cv;
  bool sweep_stop = false;
  std::thread sweeper;

  static http_response run_handler(const route_entry& route, const http_request& req) {
    try {
      return route.handler(req);
    } catch (const std::exception& e) {
      log_event(spdlog::level::err, "http_handler_error", {{"path", req.path}, {"error", e.what()}});
      return http_response{500, std::string("internal error: ") + e.what() + "\n"};
    }
  }

  static MHD_Result queue_response(MHD_Connection* conn, const http_response& r) {
    MHD_Response* resp = MHD_create_response_from_buffer(
        r.body.size(), const_cast<char*>(r.body.data()), MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
    if (r.status != 204) MHD_add_response_header(resp, "Content-Type", r.content_type.c_str());
    for (const auto& [k, v] : r.headers) MHD_add_response_header(resp, k.c_str(), v.c_str());
    // One request per connection: a kept-alive socket would only hold a slot.
    MHD_add_response_header(resp, "Connection", "close");
    MHD_Result ok = MHD_queue_response(conn, static_cast<unsigned>(r.status), resp);
    MHD_destroy_response(resp);
    return ok;
  }

  void mark_received(MHD_Connection* conn) {
    const MHD_ConnectionInfo* info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (!info || !info->socket_context) return;
    std::lock_guard<std::mutex> lock(conns_mu);
    static_cast<conn_state*>(info->socket_context)->request_received = true;
  }

  // The request is complete: answer it on the loop, or suspend it and hand it to a worker.
  MHD_Result answer(MHD_Connection* conn, request_state* rs) {
    if (!rs->route) return queue_response(conn, http_response{404, "404 page not found\n"});
    if (rs->route->mode == route_mode::loop) return queue_response(conn, run_handler(*rs->route, rs->req));
    {
      std::lock_guard<std::mutex> lock(pool_mu);
      if (stopping || queue.size() >= limits.max_queued)
        return queue_response(conn, http_response{503, "server busy\n"});
      // Suspended before a worker can see the job, so its resume finds a suspended connection.
      MHD_suspend_connection(conn);
      rs->dispatched = true;
      queue.push_back(job{rs, conn});
    }
    pool_cv.notify_one();
    return MHD_YES;
  }

  void worker_loop() {
    for (;;) {
      job j;
      {
        std::unique_lock<std::mutex> lock(pool_mu);
        pool_cv.wait(lock, [this] { return stopping || !queue.empty(); });
        if (queue.empty()) return;  // stopping, and every queued request was answered
        j = queue.front();
        queue.pop_front();
      }
      j.rs->resp = run_handler(*j.rs->route, j.rs->req);
      j.rs->ready = true;  // published to the loop by MHD_resume_connection's lock
      MHD_resume_connection(j.conn);
    }
  }

  void sweep_loop() {
    const auto period = std::clamp<std::chrono::milliseconds>(limits.idle_timeout / 4,
                                                              std::chrono::milliseconds(50),
                                                              std::chrono::milliseconds(1000));
    std::unique_lock<std::mutex> lock(sweep_mu);
    while (!sweep_cv.wait_for(lock, period, [this] { return sweep_stop; })) {
      const auto now = clock_type::now();
      std::lock_guard<std::mutex> guard(conns_mu);
      for (conn_state* c : conns) {
        if (c->request_received || c->cut || now - c->accepted < limits.idle_timeout) continue;
        // The fd is still open: MHD reports CLOSED (which takes conns_mu) before closing it.
        // Shutting it down makes the loop see EOF and close the connection itself.
        ::shutdown(c->fd, SHUT_RDWR);
        c->cut = true;
      }
    }
  }

  // ---- MHD callbacks (all on the loop thread) ----

  static MHD_Result on_accept(void* cls, const sockaddr*, socklen_t) {
    auto* self = static_cast<impl*>(cls);
    std::size_t open;
    {
      std::lock_guard<std::mutex> lock(self->conns_mu);
      open = self->conns.size();
    }
    if (open < self->limits.max_connections) return MHD_YES;
    std::uint64_t total = ++self->rejected;
    if (self->limits.on_connection_rejected) self->limits.on_connection_rejected();
    const auto now = clock_type::now();
    if (self->rejected_at_last_log == 0 || now - self->last_limit_log >= std::chrono::seconds(10)) {
      log_event(spdlog::level::warn, "http_connection_limit_reached",
                {{"listener", self->limits.name},
                 {"max_connections", std::to_string(self->limits.max_connections)},
                 {"rejected_since_last_log", std::to_string(total - self->rejected_at_last_log)},
                 {"rejected_total", std::to_string(total)}});
      self->last_limit_log = now;
      self->rejected_at_last_log = total;
    }
    return MHD_NO;
  }

  static void on_connection(void* cls, MHD_Connection* conn, void** socket_context,
                            MHD_ConnectionNotificationCode code) {
    auto* self = static_cast<impl*>(cls);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
      const MHD_ConnectionInfo* info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
      auto* c = new conn_state{info ? info->connect_fd : -1, clock_type::now()};
      *socket_context = c;
      std::lock_guard<std::mutex> lock(self->conns_mu);
      self->conns.insert(c);
    } else if (auto* c = static_cast<conn_state*>(*socket_context)) {
      {
        std::lock_guard<std::mutex> lock(self->conns_mu);
        self->conns.erase(c);
      }
      delete c;
      *socket_context = nullptr;
    }
  }

  static MHD_Result on_request(void* cls, MHD_Connection* conn, const char* url, const char* method,
                               const char*, const char* upload, std::size_t* upload_size,
                               void** con_cls) {
    auto* self = static_cast<impl*>(cls);
    auto* rs = static_cast<request_state*>(*con_cls);
    if (!rs) {  // headers complete
      rs = new request_state;
      *con_cls = rs;
      rs->req.method = method ? method : "";
      rs->req.path = url ? url : "";
      if (const char* auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization"))
        rs->req.authorization = auth;
      MHD_get_connection_values(
          conn, MHD_GET_ARGUMENT_KIND,
          [](void* q, MHD_ValueKind, const char* k, const char* v) {
            auto* query = static_cast<std::string*>(q);
            if (!query->empty()) *query += '&';
            *query += k;
            if (v) *query += std::string("=") + v;
            return MHD_YES;
          },
          &rs->req.query);
      const auto& routes = self->owner->routes_;
      if (auto it = routes.find(rs->req.path); it != routes.end()) {
        rs->route = &it->second;
        const char* length = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        if (length && std::strtoull(length, nullptr, 10) > rs->route->max_body_bytes)
          rs->req.body_too_large = true;
      }
      return MHD_YES;
    }
    if (*upload_size > 0) {  // a body chunk: keep it while within the route's limit
      if (rs->route && !rs->req.body_too_large) {
        rs->req.body.append(upload, *upload_size);
        if (rs->req.body.size() > rs->route->max_body_bytes) {
          rs->req.body_too_large = true;
          rs->req.body.clear();
          rs->req.body.shrink_to_fit();
        }
      }
      *upload_size = 0;
      return MHD_YES;
    }
    if (rs->ready) return queue_response(conn, rs->resp);  // resumed by a worker
    if (rs->dispatched) return MHD_YES;
    self->mark_received(conn);
    return self->answer(conn, rs);
  }

  static void on_completed(void*, MHD_Connection*, void** con_cls, MHD_RequestTerminationCode) {
    delete static_cast<request_state*>(*con_cls);
    *con_cls = nullptr;
  }

  static void on_mhd_log(void* cls, const char* fmt, va_list ap) {
    char line[512];
    std::vsnprintf(line, sizeof line, fmt, ap);
    std::string text = line;
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    auto* self = static_cast<impl*>(cls);
    self->last_mhd_error = text;
    log_event(spdlog::level::debug, "http_server_log", {{"listener", self->limits.name}, {"detail", text}});
  }
};

http_server::http_server() = default;

http_server::~http_server() { stop(); }

void http_server::route(const std::string& path, http_handler handler, std::size_t max_body_bytes,
                        route_mode mode) {
  routes_[path] = route_entry{std::move(handler), max_body_bytes, mode};
}

std::string http_server::start(const std::string& listen, const http_limits& limits) {
  if (impl_) return "already started";
  sockaddr_storage addr{};
  bool ipv6 = false;
  if (auto err = resolve_listen(listen, addr, ipv6); !err.empty())
    return "cannot listen on \"" + listen + "\": " + err;
  auto state = std::make_unique<impl>(this, limits);
  if (state->limits.workers < 1) state->limits.workers = 1;
  const auto idle_ms = std::max<std::int64_t>(state->limits.idle_timeout.count(), 1);
  const unsigned idle_seconds = static_cast<unsigned>((idle_ms + 999) / 1000);
  unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
  if (ipv6) flags |= MHD_USE_IPv6;
  // MHD checks its own limit before our accept policy; keep it above ours so every
  // rejection passes through on_accept (and is counted).
  const unsigned mhd_limit = static_cast<unsigned>(state->limits.max_connections + 64);
  state->daemon = MHD_start_daemon(
      flags, 0, &impl::on_accept, state.get(), &impl::on_request, state.get(),
      MHD_OPTION_SOCK_ADDR, reinterpret_cast<const sockaddr*>(&addr),
      MHD_OPTION_CONNECTION_TIMEOUT, idle_seconds,
      MHD_OPTION_CONNECTION_LIMIT, mhd_limit,
      MHD_OPTION_NOTIFY_COMPLETED, &impl::on_completed, state.get(),
      MHD_OPTION_NOTIFY_CONNECTION, &impl::on_connection, state.get(),
      MHD_OPTION_EXTERNAL_LOGGER, &impl::on_mhd_log, state.get(),
      MHD_OPTION_END);
  if (!state->daemon) {
    std::string why = state->last_mhd_error.empty() ? "" : ": " + state->last_mhd_error;
    return "cannot listen on \"" + listen + "\"" + why;
  }
  const MHD_DaemonInfo* info = MHD_get_daemon_info(state->daemon, MHD_DAEMON_INFO_BIND_PORT);
  port_ = info ? info->port : 0;
  for (int i = 0; i < state->limits.workers; ++i)
    state->workers.emplace_back([s = state.get()] { s->worker_loop(); });
  state->sweeper = std::thread([s = state.get()] { s->sweep_loop(); });
  impl_ = std::move(state);
  live_.store(impl_.get(), std::memory_order_release);
  return "";
}

std::size_t http_server::open_connections() const {
  auto* s = live_.load(std::memory_order_acquire);
  if (!s) return 0;
  std::lock_guard<std::mutex> lock(s->conns_mu);
  return s->conns.size();
}

std::size_t http_server::queued_requests() const {
  auto* s = live_.load(std::memory_order_acquire);
  if (!s) return 0;
  std::lock_guard<std::mutex> lock(s->pool_mu);
  return s->queue.size();
}

std::uint64_t http_server::rejected_connections() const {
  auto* s = live_.load(std::memory_order_acquire);
  return s ? s->rejected.load() : 0;
}

void http_server::stop() {
  if (!impl_ || stopped_) return;
  stopped_ = true;
  live_.store(nullptr, std::memory_order_release);  // a query already past the load still
                                                   // finds impl_ alive: it is freed only
                                                   // by the destructor
  {
    std::lock_guard<std::mutex> lock(impl_->pool_mu);
    impl_->stopping = true;
  }
  impl_->pool_cv.notify_all();
  for (auto& t : impl_->workers) t.join();  // every dispatched request is answered first
  {
    std::lock_guard<std::mutex> lock(impl_->sweep_mu);
    impl_->sweep_stop = true;
  }
  impl_->sweep_cv.notify_all();
  impl_->sweeper.join();
  MHD_stop_daemon(impl_->daemon);
}

}  // namespace ic::server
