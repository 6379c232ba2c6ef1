#include "server/http_server.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/http_client.hpp"

namespace ic::server {
namespace {

using namespace std::chrono_literals;

// Waits (bounded) until `done()` holds.
template <typename F>
bool eventually(F done, std::chrono::milliseconds limit = 10s) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}


// A handler that parks until released, so a test can hold a worker busy.
struct parked_handler {
  std::promise<void> entered;  // set when the first call arrives
  std::promise<void> opened;
  std::shared_future<void> gate = opened.get_future().share();
  std::atomic<int> calls{0};

  http_handler handler() {
    return [this](const http_request&) {
      if (calls++ == 0) entered.set_value();
      gate.wait();
      return http_response{200, "slow\n"};
    };
  }
  void release() { opened.set_value(); }
};

// Registers /slow (parked, on the workers) and /live (answers "live" on the loop).
void add_slow_and_live(http_server& s, parked_handler& slow) {
  s.route("/slow", slow.handler());
  s.route("/live", [](const http_request&) { return http_response{200, "live\n"}; }, 1 << 20,
          route_mode::loop);
}

TEST(HttpServer, ServesRoutesAnd404sEverythingElse) {
  http_server s;
  s.route("/healthz", [](const http_request&) { return http_response{200, "ok\n"}; });
  s.route("/echo", [](const http_request& r) {
    http_response resp{201, r.method + ":" + r.body};
    resp.headers["X-Test"] = "yes";
    return resp;
  });
  ASSERT_EQ(s.start("127.0.0.1:0"), "");
  ASSERT_GT(s.port(), 0);

  auto ok = test::http_call(s.port(), "GET", "/healthz");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "ok\n");

  auto echo = test::http_call(s.port(), "POST", "/echo", {}, "hello");
  EXPECT_EQ(echo.status, 201);
  EXPECT_EQ(echo.body, "POST:hello");
  EXPECT_EQ(echo.headers["x-test"], "yes");

  EXPECT_EQ(test::http_call(s.port(), "GET", "/nope").status, 404);
  EXPECT_EQ(test::http_call(s.port(), "GET", "/healthz/extra").status, 404);
  s.stop();
  EXPECT_EQ(test::http_call(s.port(), "GET", "/healthz").status, 0);
}

// TSan (s5-harden): at shutdown a /metrics scrape on :8080 read the admin server's open
// connections while admin.stop() freed its state. The queries stay safe during stop().
TEST(HttpServer, QueriesFromAnotherThreadStaySafeWhileItStops) {
  http_server s;
  s.route("/healthz", [](const http_request&) { return http_response{200, "ok\n"}; });
  ASSERT_EQ(s.start("127.0.0.1:0"), "");
  EXPECT_EQ(test::http_call(s.port(), "GET", "/healthz").status, 200);
  std::atomic<bool> done{false};
  std::atomic<long> reads{0};
  std::thread reader([&] {
    while (!done.load()) {
      (void)s.open_connections();
      (void)s.queued_requests();
      (void)s.rejected_connections();
      ++reads;
    }
  });
  while (reads.load() == 0) std::this_thread::yield();
  s.stop();
  done = true;
  reader.join();
  EXPECT_EQ(s.open_connections(), 0u);
  EXPECT_EQ(s.queued_requests(), 0u);
  EXPECT_EQ(s.rejected_connections(), 0u);
  s.stop();  // a second stop is a no-op
}

TEST(HttpServer, FlagsBodiesOverTheRouteLimit) {
  http_server s;
  s.route(
      "/small",
      [](const http_request& r) {
        return r.body_too_large ? http_response{413, "too large\n"} : http_response{200, r.body};
      },
      8);
  ASSERT_EQ(s.start("127.0.0.1:0"), "");
  EXPECT_EQ(test::http_call(s.port(), "POST", "/small", {}, "12345678").status, 200);
  EXPECT_EQ(test::http_call(s.port(), "POST", "/small", {}, "123456789").status, 413);
}

TEST(HttpServer, StartFailsWithAReasonOnABadAddress) {
  http_server s;
  EXPECT_NE(s.start("256.1.1.1:80"), "");
}

TEST(HttpServer, ASlowWorkerHandlerStallsNeitherOtherWorkersNorLoopRoutes) {
  parked_handler slow;
  http_server s;
  add_slow_and_live(s, slow);
  s.route("/fast", [](const http_request&) { return http_response{200, "fast\n"}; });
  http_limits limits;
  limits.workers = 2;
  ASSERT_EQ(s.start("127.0.0.1:0", limits), "");
  auto pending = std::async(std::launch::async, [&] { return test::http_call(s.port(), "GET", "/slow"); });
  slow.entered.get_future().wait();
  EXPECT_EQ(test::http_call(s.port(), "GET", "/fast").body, "fast\n");
  EXPECT_EQ(test::http_call(s.port(), "GET", "/live").body, "live\n");
  slow.release();
  EXPECT_EQ(pending.get().body, "slow\n");
}

TEST(HttpServer, AnswersBusyWhenTheWorkerQueueIsFullButLoopRoutesStillAnswer) {
  parked_handler slow;
  http_server s;
  add_slow_and_live(s, slow);
  http_limits limits;
  limits.workers = 1;
  limits.max_queued = 1;
  ASSERT_EQ(s.start("127.0.0.1:0", limits), "");
  auto first = std::async(std::launch::async, [&] { return test::http_call(s.port(), "GET", "/slow"); });
  slow.entered.get_future().wait();  // the only worker is busy
  auto second = std::async(std::launch::async, [&] { return test::http_call(s.port(), "GET", "/slow"); });
  ASSERT_TRUE(eventually([&] { return s.queued_requests() == 1; }));  // the queue (of 1) is full
  EXPECT_EQ(test::http_call(s.port(), "GET", "/slow").status, 503);
  EXPECT_EQ(test::http_call(s.port(), "GET", "/live").status, 200);
  slow.release();
  EXPECT_EQ(first.get().status, 200);
  EXPECT_EQ(second.get().status, 200);
}

TEST(HttpServer, AHandlerSlowerThanTheIdleTimeoutStillAnswers) {
  http_server s;
  s.route("/slow", [](const http_request&) {
    std::this_thread::sleep_for(1500ms);  // the slowness under test, longer than the timeout
    return http_response{200, "done\n"};
  });
  http_limits limits;
  limits.idle_timeout = 1s;
  ASSERT_EQ(s.start("127.0.0.1:0", limits), "");
  EXPECT_EQ(test::http_call(s.port(), "GET", "/slow").body, "done\n");
}

TEST(HttpServer, ClosesIdleHalfSentAndTricklingConnectionsAfterTheTimeout) {
  http_server s;
  s.route("/healthz", [](const http_request&) { return http_response{200, "ok\n"}; });
  http_limits limits;
  limits.idle_timeout = 300ms;
  ASSERT_EQ(s.start("127.0.0.1:0", limits), "");
  int idle = test::open_connection(s.port());
  int half = test::open_connection(s.port());
  int trickle = test::open_connection(s.port());
  ASSERT_GE(idle, 0);
  ASSERT_GE(half, 0);
  ASSERT_GE(trickle, 0);
  const std::string head = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
  ASSERT_EQ(::send(half, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  // One header byte every 50 ms keeps the connection busy but never completes a request.
  std::atomic<bool> stop{false};
  std::thread dripper([&] {
    while (!stop && ::send(trickle, "X", 1, MSG_NOSIGNAL) == 1) std::this_thread::sleep_for(50ms);
  });
  EXPECT_TRUE(test::closed_by_peer(idle));
  EXPECT_TRUE(test::closed_by_peer(half));
  EXPECT_TRUE(test::closed_by_peer(trickle));
  stop = true;
  dripper.join();
  for (int fd : {idle, half, trickle}) ::close(fd);
  EXPECT_TRUE(eventually([&] { return s.open_connections() == 0; }));
  EXPECT_EQ(test::http_call(s.port(), "GET", "/healthz").status, 200);
}

TEST(HttpServer, ConnectionsBeyondTheBoundAreClosedAtAcceptAndCounted) {
  std::atomic<int> rejected{0};
  http_server s;
  s.route("/healthz", [](const http_request&) { return http_response{200, "ok\n"}; }, 1 << 20,
          route_mode::loop);
  http_limits limits;
  limits.max_connections = 3;
  limits.on_connection_rejected = [&] { ++rejected; };
  ASSERT_EQ(s.start("127.0.0.1:0", limits), "");
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) held.push_back(test::open_connection(s.port()));
  ASSERT_TRUE(eventually([&] { return s.open_connections() == 3; }));
  EXPECT_EQ(test::http_call(s.port(), "GET", "/healthz").status, 0);  // accepted, then closed
  EXPECT_EQ(rejected.load(), 1);
  EXPECT_EQ(s.rejected_connections(), 1u);
  ::close(held.back());
  held.pop_back();
  ASSERT_TRUE(eventually([&] { return s.open_connections() == 2; }));
  EXPECT_EQ(test::http_call(s.port(), "GET", "/healthz").status, 200);
  for (int fd : held) ::close(fd);
}

}  // namespace
}  // namespace ic::server
