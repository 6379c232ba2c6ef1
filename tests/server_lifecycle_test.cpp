// The real inferencecache-server binary: start on free ports, health over gRPC and HTTP,
// reflection, exit code 2 on bad flags, orderly exit 0 on SIGTERM.
#include <csignal>
#include <fstream>

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include "grpc/health/v1/health.grpc.pb.h"
#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "tests/support/http_client.hpp"
#include "tests/support/server_process.hpp"
#include "tests/support/test_paths.hpp"

namespace ic {
namespace {

using namespace std::chrono_literals;
namespace v1 = inferencecache::v1alpha1;

std::vector<std::string> local_args(const std::string& data_dir) {
  return {"--grpc-bind-address=127.0.0.1:0", "--http-bind-address=127.0.0.1:0",
          "--snapshot-bind-address=127.0.0.1:0", "--data-dir=" + data_dir};
}

class ServerLifecycle : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::make_temp_dir("ic_lifecycle"); }
  void TearDown() override { test::remove_tree(dir_); }

  std::unique_ptr<test::server_process> start(std::vector<std::string> extra) {
    auto args = local_args(dir_ + "/data");
    args.insert(args.end(), extra.begin(), extra.end());
    auto p = test::server_process::start(ic::test::executable("inferencecache-server"), args);
    EXPECT_NE(p, nullptr);
    return p;
  }

  std::string dir_;
};

TEST_F(ServerLifecycle, ServesHealthOverGrpcAndHttpThenExitsZeroOnSigterm) {
  auto s = start({"--insecure-disable-auth"});
  ASSERT_TRUE(s->wait_ready(30s)) << s->logs();
  ASSERT_GT(s->grpc_port(), 0);

  auto channel = grpc::CreateChannel(s->grpc_target(), grpc::InsecureChannelCredentials());
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  grpc::health::v1::HealthCheckRequest req;
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status st = health->Check(&ctx, req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING);

  auto healthz = test::http_call(s->http_port(), "GET", "/healthz");
  EXPECT_EQ(healthz.status, 200);
  EXPECT_EQ(healthz.body, "ok\n");
  auto readyz = test::http_call(s->http_port(), "GET", "/readyz");
  EXPECT_EQ(readyz.status, 200);
  EXPECT_EQ(readyz.body, "ok\n");
  auto metrics = test::http_call(s->http_port(), "GET", "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("inferencecache_server_up 1"), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find("inferencecache_server_grpc_tls_enabled 0"), std::string::npos);
  EXPECT_EQ(test::http_call(s->http_port(), "GET", "/nope").status, 404);

  EXPECT_EQ(s->terminate(SIGTERM, 20s), 0) << s->logs();
  EXPECT_NE(s->logs().find("graceful_shutdown_done"), std::string::npos);
}

// With no stores pushed, both RPCs fail open (pd-templates.md §2.6, §3.6): a PD request
// without tenant or ref is NO_HINT, an unknown template TEMPLATE_NOT_FOUND (no longer the
// reference stub's OK), never a gRPC error.
TEST_F(ServerLifecycle, PdRouteAndRenderFailOpenWithoutStores) {
  auto s = start({"--insecure-disable-auth"});
  ASSERT_TRUE(s->wait_ready(30s)) << s->logs();
  auto stub = v1::InferenceCache::NewStub(
      grpc::CreateChannel(s->grpc_target(), grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::LookupPDRouteRequest req;
    req.set_model_id("m");
    v1::LookupPDRouteResponse resp;
    ASSERT_TRUE(stub->LookupPDRoute(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.reason_code(), "NO_HINT");
    EXPECT_TRUE(resp.prefill_replica_id().empty());
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::RenderTemplateRequest req;
    v1::RenderTemplateResponse resp;
    ASSERT_TRUE(stub->RenderTemplate(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.reason_code(), "TEMPLATE_NOT_FOUND");
    EXPECT_TRUE(resp.stable_prefix_hash().empty());
    EXPECT_TRUE(resp.rendered_prompt().empty());
    EXPECT_TRUE(resp.template_revision().empty());
  }
  EXPECT_EQ(s->terminate(), 0);
}

// Lists services through gRPC server reflection (v1alpha) with a raw bidi call.
TEST_F(ServerLifecycle, ReflectionListsTheInferenceCacheService) {
  auto s = start({"--insecure-disable-auth"});
  ASSERT_TRUE(s->wait_ready(30s)) << s->logs();
  auto channel = grpc::CreateChannel(s->grpc_target(), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  auto call = stub.PrepareCall(&ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  void* tag;
  bool ok;
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  // ServerReflectionRequest{list_services: ""} = field 7, length-delimited, empty.
  const char request_bytes[] = {0x3a, 0x00};
  grpc::Slice slice(request_bytes, sizeof request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  call->Write(request, reinterpret_cast<void*>(2));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(3));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (auto& sl : slices) bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  EXPECT_NE(bytes.find("inferencecache.v1alpha1.InferenceCache"), std::string::npos);
  EXPECT_NE(bytes.find("grpc.health.v1.Health"), std::string::npos);
  ctx.TryCancel();
  grpc::Status st;
  call->Finish(&st, reinterpret_cast<void*>(5));
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  EXPECT_EQ(s->terminate(), 0);
}

TEST_F(ServerLifecycle, AdminPortNeedsTheBearerTokenWhenConfigured) {
  std::string token_file = dir_ + "/token";
  std::ofstream(token_file) << "  t0ken-42\n";
  auto s = start({"--admin-token-file=" + token_file});
  ASSERT_TRUE(s->wait_ready(30s)) << s->logs();
  for (const char* path : {"/snapshot", "/policy", "/probe"}) {
    SCOPED_TRACE(path);
    EXPECT_EQ(test::http_call(s->snapshot_port(), "GET", path).status, 401);
    EXPECT_EQ(test::http_call(s->snapshot_port(), "GET", path,
                              {{"Authorization", "Bearer wrong"}}).status,
              401);
    EXPECT_NE(test::http_call(s->snapshot_port(), "GET", path,
                              {{"Authorization", "Bearer t0ken-42"}}).status,
              401);
  }
  // Health endpoints stay open.
  EXPECT_EQ(test::http_call(s->http_port(), "GET", "/healthz").status, 200);
  auto metrics = test::http_call(s->http_port(), "GET", "/metrics");
  EXPECT_NE(metrics.body.find("inferencecache_snapshot_auth_total{result=\"unauth\"} 2"),
            std::string::npos)
      << metrics.body;
  EXPECT_EQ(s->terminate(), 0);
}

TEST_F(ServerLifecycle, BadFlagsExitTwoWithOneLine) {
  const std::vector<std::vector<std::string>> cases = {
      {},                                                    // neither auth flag
      {"--insecure-disable-auth", "--bogus-flag"},           // unknown flag
      {"--insecure-disable-auth", "--default-ttl=10"},       // bare number
      {"--insecure-disable-auth", "--log-level=loud"},       // bad enum
      {"--insecure-disable-auth", "--tls-key-file=/x.key"},  // half of TLS
  };
  for (const auto& c : cases) {
    auto args = local_args(dir_ + "/data");
    args.insert(args.end(), c.begin(), c.end());
    auto [code, out] = test::run_to_exit(ic::test::executable("inferencecache-server"), args);
    EXPECT_EQ(code, 2) << out;
    ASSERT_FALSE(out.empty());
    EXPECT_EQ(out.find('\n'), out.size() - 1) << "more than one line: " << out;
  }
}

TEST_F(ServerLifecycle, SigintAlsoStopsGracefully) {
  auto s = start({"--insecure-disable-auth", "--log-format=text"});
  ASSERT_TRUE(s->wait_for_log("ready", 30s)) << s->logs();
  EXPECT_EQ(s->terminate(SIGINT, 20s), 0) << s->logs();
  EXPECT_NE(s->logs().find("INFO graceful_shutdown_done"), std::string::npos) << s->logs();
}

TEST_F(ServerLifecycle, LifecycleLinesAreLoggedEvenAtWarnLevel) {
  auto s = start({"--insecure-disable-auth", "--log-level=warn"});
  ASSERT_TRUE(s->wait_ready(30s)) << s->logs();
  EXPECT_GT(s->grpc_port(), 0);
  EXPECT_EQ(s->terminate(), 0);
  EXPECT_NE(s->logs().find("\"graceful_shutdown_done\""), std::string::npos) << s->logs();
  EXPECT_EQ(s->logs().find("\"level\":\"debug\""), std::string::npos);
}

TEST_F(ServerLifecycle, ListenerFailureExitsOne) {
  auto first = start({"--insecure-disable-auth"});
  ASSERT_TRUE(first->wait_ready(30s)) << first->logs();
  auto args = local_args(dir_ + "/data2");
  args.push_back("--insecure-disable-auth");
  args[1] = "--http-bind-address=127.0.0.1:" + std::to_string(first->http_port());
  auto [code, out] = test::run_to_exit(ic::test::executable("inferencecache-server"), args);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("serve_error"), std::string::npos) << out;
  EXPECT_EQ(first->terminate(), 0);
}

}  // namespace
}  // namespace ic
