#include "server/http_server.hpp"

#include <gtest/gtest.h>

#include "tests/support/http_client.hpp"

namespace ic::server {
namespace {

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

}  // namespace
}  // namespace ic::server
