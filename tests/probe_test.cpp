// /probe (spec/operations.md §2.5) against the real binary: methods, strict decoding, the
// 200 shape, cleanup of the reserved replica, and the admin token.
#include <fstream>
#include <thread>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "tests/support/http_client.hpp"
#include "tests/support/server_process.hpp"
#include "tests/support/test_paths.hpp"

namespace ic {
namespace {

using namespace std::chrono_literals;
namespace v1 = inferencecache::v1alpha1;

const std::string kControllerBody =
    R"({"backend":"team-a/vllm-backend","model":"functional-self-test","hashScheme":"vllm"})";

class Probe : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::make_temp_dir("ic_probe"); }
  void TearDown() override {
    server_.reset();
    test::remove_tree(dir_);
  }

  void start(std::vector<std::string> extra = {"--insecure-disable-auth"}) {
    std::vector<std::string> args = {"--grpc-bind-address=127.0.0.1:0",
                                     "--http-bind-address=127.0.0.1:0",
                                     "--snapshot-bind-address=127.0.0.1:0",
                                     "--data-dir=" + dir_ + "/data"};
    args.insert(args.end(), extra.begin(), extra.end());
    server_ = test::server_process::start(ic::test::executable("inferencecache-server"), args);
    ASSERT_NE(server_, nullptr);
    ASSERT_TRUE(server_->wait_ready(30s)) << server_->logs();
  }

  test::http_result probe(const std::string& body, const std::string& method = "POST",
                          std::map<std::string, std::string> headers = {}) {
    headers["Content-Type"] = "application/json";
    return test::http_call(server_->snapshot_port(), method, "/probe", headers, body);
  }

  // Reports one chain for a real replica of tenant team-a over gRPC.
  void report_real_replica() {
    auto channel = grpc::CreateChannel(server_->grpc_target(), grpc::InsecureChannelCredentials());
    auto stub = v1::InferenceCache::NewStub(channel);
    v1::CacheStateUpdate u;
    u.set_replica_id("vllm-0");
    u.set_model_id("llama");
    u.set_tenant_id("team-a");
    u.set_hash_scheme("vllm");
    auto* p = u.add_prefixes();
    p->add_block_hashes("block-1");
    p->add_block_token_counts(64);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::Ack ack;
    auto writer = stub->ReportCacheState(&ctx, &ack);
    ASSERT_TRUE(writer->Write(u));
    writer->WritesDone();
    ASSERT_TRUE(writer->Finish().ok());
    ASSERT_TRUE(ack.accepted());
  }

  std::string dir_;
  std::unique_ptr<test::server_process> server_;
};

TEST_F(Probe, AnswersOnlyPost) {
  start();
  for (const char* method : {"GET", "PUT", "DELETE"}) {
    SCOPED_TRACE(method);
    auto r = probe(method == std::string("PUT") ? kControllerBody : "", method);
    EXPECT_EQ(r.status, 405);
    EXPECT_EQ(r.headers["allow"], "POST");
  }
}

TEST_F(Probe, RefusesBodiesThatDoNotDecodeStrictly) {
  start();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"unknown field", R"({"backend":"b","model":"m","hashScheme":"vllm","extra":"x"})"},
      {"trailing value", kControllerBody + R"({"backend":"b"})"},
      {"trailing garbage", kControllerBody + "x"},
      {"missing backend", R"({"model":"m","hashScheme":"vllm"})"},
      {"missing model", R"({"backend":"b","hashScheme":"vllm"})"},
      {"missing hashScheme", R"({"backend":"b","model":"m"})"},
      {"empty body", ""},
      {"malformed", "{\"backend\":"},
      {"not an object", "[1,2]"},
      {"wrong type", R"({"backend":7,"model":"m","hashScheme":"vllm"})"},
      {"over 4 KiB", R"({"backend":")" + std::string(5000, 'b') + R"(","model":"m","hashScheme":"v"})"},
  };
  for (const auto& [name, body] : cases) {
    SCOPED_TRACE(name);
    auto r = probe(body);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_FALSE(r.body.empty());
  }
  auto unknown = probe(R"({"backend":"b","model":"m","hashScheme":"vllm","extra":"x"})");
  EXPECT_NE(unknown.body.find("unknown field \"extra\""), std::string::npos) << unknown.body;
}

TEST_F(Probe, PassesIngestAndRoutingAndSkipsT2) {
  start();
  auto r = probe(kControllerBody);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers["content-type"], "application/json");
  EXPECT_EQ(r.body,
            R"({"backend":"team-a/vllm-backend","ingest":"ok","routing":"ok","t2":"skipped"})"
            "\n");
  // backendType is optional; LMCache backends still skip t2 (no tier-2 prober is wired).
  auto lm = probe(
      R"({"backend":"team-b/lm","model":"functional-self-test","hashScheme":"vllm","backendType":"LMCache"})");
  ASSERT_EQ(lm.status, 200) << lm.body;
  auto j = nlohmann::json::parse(lm.body);
  EXPECT_EQ(j["t2"], "skipped");
  EXPECT_FALSE(j.contains("errors"));
}

TEST_F(Probe, LeavesNoProbeReplicaInSnapshotOrMetrics) {
  start();
  report_real_replica();
  auto before = test::http_call(server_->snapshot_port(), "GET", "/snapshot");
  ASSERT_EQ(before.status, 200);
  ASSERT_EQ(probe(kControllerBody).status, 200);
  auto after = test::http_call(server_->snapshot_port(), "GET", "/snapshot");
  ASSERT_EQ(after.status, 200);
  EXPECT_EQ(after.body, before.body);
  EXPECT_EQ(after.body.find("__probe-"), std::string::npos) << after.body;
  EXPECT_EQ(after.body.find("inferencecache.io/probe"), std::string::npos) << after.body;
  auto snap = nlohmann::json::parse(after.body);
  ASSERT_EQ(snap["replicas"].size(), 1u);
  EXPECT_EQ(snap["replicas"][0]["replicaId"], "vllm-0");

  auto metrics = test::http_call(server_->http_port(), "GET", "/metrics");
  EXPECT_EQ(metrics.body.find("functional-self-test"), std::string::npos);
}

TEST_F(Probe, ConcurrentProbesAllPass) {
  start();
  std::vector<std::thread> threads;
  std::vector<test::http_result> results(8);
  for (std::size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] {
      // Half of them probe the same (backend, model).
      std::string backend = i % 2 == 0 ? "team-a/same" : "team-a/b" + std::to_string(i);
      results[i] = probe(R"({"backend":")" + backend +
                         R"(","model":"functional-self-test","hashScheme":"vllm"})");
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) {
    ASSERT_EQ(r.status, 200) << r.body;
    auto j = nlohmann::json::parse(r.body);
    EXPECT_EQ(j["ingest"], "ok");
    EXPECT_EQ(j["routing"], "ok");
  }
  auto snap = nlohmann::json::parse(
      test::http_call(server_->snapshot_port(), "GET", "/snapshot").body);
  EXPECT_TRUE(snap["replicas"].is_null()) << snap.dump();
}

TEST_F(Probe, NeedsTheAdminTokenBeforeTheMethodCheck) {
  std::string token_file = dir_ + "/token";
  std::ofstream(token_file) << "probe-token\n";
  start({"--admin-token-file=" + token_file});
  EXPECT_EQ(probe(kControllerBody).status, 401);
  EXPECT_EQ(probe("", "GET").status, 401);  // auth runs before the method check
  EXPECT_EQ(probe(kControllerBody, "POST", {{"Authorization", "Bearer nope"}}).status, 401);
  auto ok = probe(kControllerBody, "POST", {{"Authorization", "Bearer probe-token"}});
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(probe("", "GET", {{"Authorization", "Bearer probe-token"}}).status, 405);

  auto metrics = test::http_call(server_->http_port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("inferencecache_probe_auth_total{result=\"unauth\"} 3"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("inferencecache_probe_auth_total{result=\"ok\"} 2"), std::string::npos)
      << metrics;
}

}  // namespace
}  // namespace ic
