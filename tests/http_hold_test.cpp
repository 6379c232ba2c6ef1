// Both HTTP ports of the real binary under idle and slow clients (issue #16): probes, metrics
// and admin endpoints answer while hundreds of idle and half-sent connections are open; idle
// and half-sent connections are closed after --http-idle-timeout; connections beyond
// --http-max-connections are closed at accept, counted and logged.
//
// Latency is only bounded generously here (2 s); scripts/http_slow_clients_bench.py measures
// it (docs/benchmarks.md).
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "tests/support/http_client.hpp"
#include "tests/support/server_process.hpp"
#include "tests/support/test_paths.hpp"

namespace ic {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

const std::map<std::string, std::string> kAuth = {{"Authorization", "Bearer hold-token"}};

// Closes every fd it holds when it goes away.
struct held_sockets {
  std::vector<int> fds;
  ~held_sockets() {
    for (int fd : fds) ::close(fd);
  }
  // Opens `n` connections to `port`; when `prefix` is not empty each sends it and stops.
  void open(int port, int n, const std::string& prefix = "") {
    for (int i = 0; i < n; ++i) {
      int fd = test::open_connection(port);
      ASSERT_GE(fd, 0) << "connection " << i << " to " << port;
      if (!prefix.empty()) {
        ASSERT_EQ(::send(fd, prefix.data(), prefix.size(), MSG_NOSIGNAL),
                  static_cast<ssize_t>(prefix.size()));
      }
      fds.push_back(fd);
    }
  }
};

const std::string kHalfRequest = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";

// The value of the series line `series` (name plus labels) in a Prometheus text body, or -1.
double series_value(const std::string& body, const std::string& series) {
  auto at = body.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(body.substr(at + series.size() + 2));
}

// Calls and checks the answer came within `bound`.
test::http_result timed_call(int port, const std::string& method, const std::string& path,
                             const std::map<std::string, std::string>& headers = {},
                             const std::string& body = "",
                             std::chrono::milliseconds bound = 2000ms) {
  auto t0 = steady::now();
  auto r = test::http_call(port, method, path, headers, body);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t0);
  EXPECT_LT(took, bound) << method << " " << path;
  return r;
}


class HttpHold : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::make_temp_dir("ic_http_hold");
    std::ofstream(dir_ + "/token") << "hold-token\n";
  }
  void TearDown() override {
    server_.reset();
    test::remove_tree(dir_);
  }

  void start(std::vector<std::string> extra) {
    std::vector<std::string> args = {"--grpc-bind-address=127.0.0.1:0",
                                     "--http-bind-address=127.0.0.1:0",
                                     "--snapshot-bind-address=127.0.0.1:0",
                                     "--data-dir=" + dir_ + "/data",
                                     "--admin-token-file=" + dir_ + "/token"};
    args.insert(args.end(), extra.begin(), extra.end());
    server_ = test::server_process::start(ic::test::executable("inferencecache-server"), args);
    ASSERT_NE(server_, nullptr);
    ASSERT_TRUE(server_->wait_ready(30s)) << server_->logs();
  }

  std::string metrics() { return test::http_call(server_->http_port(), "GET", "/metrics").body; }

  std::string dir_;
  std::unique_ptr<test::server_process> server_;
};

TEST_F(HttpHold, EveryEndpointAnswersWhileHundredsOfIdleAndHalfSentConnectionsAreOpen) {
  start({"--http-idle-timeout=60s"});
  const int http = server_->http_port(), admin = server_->snapshot_port();
  held_sockets held;
  for (int port : {http, admin}) {
    held.open(port, 150);
    held.open(port, 150, kHalfRequest);
  }

  auto healthz = timed_call(http, "GET", "/healthz");
  EXPECT_EQ(healthz.status, 200);
  EXPECT_EQ(healthz.body, "ok\n");
  auto readyz = timed_call(http, "GET", "/readyz");
  EXPECT_EQ(readyz.status, 200);
  EXPECT_EQ(readyz.body, "ok\n");
  auto snapshot = timed_call(admin, "GET", "/snapshot", kAuth);
  EXPECT_EQ(snapshot.status, 200);
  EXPECT_EQ(snapshot.headers["content-type"], "application/json");
  EXPECT_EQ(timed_call(admin, "GET", "/snapshot").status, 401);
  EXPECT_EQ(timed_call(admin, "DELETE", "/policy", kAuth).headers["allow"], "POST, PUT");
  EXPECT_EQ(timed_call(admin, "POST", "/policy", kAuth, R"({"version":3,"policies":[]})").status, 204);
  auto m = timed_call(http, "GET", "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("inferencecache_server_up 1"), std::string::npos);
  // Every held connection was accepted and is still open (FIFO accept: they came first).
  EXPECT_GE(series_value(m.body, R"(inferencecache_http_connections_open{listener="admin"})"), 300);
  EXPECT_GE(series_value(m.body, R"(inferencecache_http_connections_open{listener="http"})"), 300);
  EXPECT_EQ(series_value(m.body, R"(inferencecache_http_connections_rejected_total{listener="http"})"), 0);
}

TEST_F(HttpHold, ConnectionsBeyondTheBoundAreClosedAtAcceptCountedAndLogged) {
  start({"--http-max-connections=40", "--http-idle-timeout=60s"});
  const int admin = server_->snapshot_port();
  const std::string open_series = R"(inferencecache_http_connections_open{listener="admin"})";
  const std::string rejected_series =
      R"(inferencecache_http_connections_rejected_total{listener="admin"})";
  EXPECT_EQ(series_value(metrics(), rejected_series), 0);
  held_sockets held;
  held.open(admin, 40);
  auto until = steady::now() + 10s;
  while (series_value(metrics(), open_series) < 40 && steady::now() < until)
    std::this_thread::sleep_for(20ms);
  ASSERT_EQ(series_value(metrics(), open_series), 40);

  EXPECT_EQ(timed_call(admin, "GET", "/snapshot", kAuth).status, 0);  // closed at accept
  EXPECT_EQ(series_value(metrics(), rejected_series), 1);
  EXPECT_TRUE(server_->wait_for_log("http_connection_limit_reached", 5s)) << server_->logs();
  EXPECT_NE(server_->logs().find(R"("listener":"admin")"), std::string::npos);
  // The other port keeps its own bound.
  EXPECT_EQ(timed_call(server_->http_port(), "GET", "/healthz").status, 200);

  ::close(held.fds.back());
  held.fds.pop_back();
  until = steady::now() + 10s;
  while (series_value(metrics(), open_series) > 39 && steady::now() < until)
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(timed_call(admin, "GET", "/snapshot", kAuth).status, 200);
}

TEST_F(HttpHold, IdleAndHalfSentConnectionsAreClosedAfterTheIdleTimeout) {
  start({"--http-idle-timeout=1s"});
  held_sockets held;
  for (int port : {server_->http_port(), server_->snapshot_port()}) {
    held.open(port, 5);
    held.open(port, 5, kHalfRequest);
  }
  auto t0 = steady::now();
  for (int fd : held.fds) EXPECT_TRUE(test::closed_by_peer(fd));
  auto took = steady::now() - t0;
  EXPECT_GE(took, 500ms);  // closed by the timeout, not at once
  EXPECT_LT(took, 5s);
  // The server forgets them too (it may close after the client saw EOF).
  const std::string open_series = R"(inferencecache_http_connections_open{listener="admin"})";
  auto until = steady::now() + 5s;
  while (series_value(metrics(), open_series) != 0 && steady::now() < until)
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(series_value(metrics(), open_series), 0);
  EXPECT_EQ(timed_call(server_->http_port(), "GET", "/healthz").status, 200);
}

}  // namespace
}  // namespace ic
