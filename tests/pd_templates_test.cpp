// /topology, /templates, LookupPDRoute and RenderTemplate against the real binary over real
// gRPC and HTTP (pd-templates.md §2.8 rows 19, 37, 40, 41 and the push rows 31, 43; §3.8
// rows 22, 26, 27): push via HTTP, ingest via ReportCacheState / PublishEvent, restart,
// journal unavailable (the test-hook binary's fault file), 400 / 405 / 401, startup files.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <thread>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "tests/support/http_client.hpp"
#include "tests/support/server_process.hpp"
#include "tests/support/test_paths.hpp"

namespace ic {
namespace {

using namespace std::chrono_literals;
namespace v1 = inferencecache::v1alpha1;

const std::string K("\x01\x02\x03\x04\x05\x06\x07\x08", 8);

/// Fixture F's topology (§2.8): prefill p = [p-0,p-1,p-2], decode d = [d-0,d-1], h100/nvidia.
const std::string kTopology =
    R"({"version":1,"topologies":[{"namespace":"serving","name":"pd","hashScheme":"vllm",)"
    R"("prefillPools":[{"name":"p","acceleratorType":"h100","replicaIds":["p-0","p-1","p-2"],"replicas":3}],)"
    R"("decodePools":[{"name":"d","acceleratorType":"h100","replicaIds":["d-0","d-1"]}],)"
    R"("acceleratorTypes":[{"name":"h100","vendor":"nvidia","model":"H100"}]}]})";

/// T1 of §3.7.
const std::string kTemplates =
    R"({"version":1,"templates":[{"namespace":"serving","name":"support-agent",)"
    R"("body":"You are a helpful support agent for {{ product }}.\nConversation so far:\n{{ history }}\n",)"
    R"("slots":[{"name":"product","type":"Stable","required":true,"description":"fixed per deployment"},)"
    R"({"name":"history","type":"Mutable"}]}]})";

std::string from_hex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::int64_t unix_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class PdTemplates : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::make_temp_dir("ic_pd"); }
  void TearDown() override {
    server_.reset();
    test::remove_tree(dir_);
  }

  std::vector<std::string> base_args() const {
    return {"--grpc-bind-address=127.0.0.1:0", "--http-bind-address=127.0.0.1:0",
            "--snapshot-bind-address=127.0.0.1:0", "--data-dir=" + dir_ + "/data"};
  }

  void start(std::vector<std::string> extra = {"--insecure-disable-auth"},
             const char* binary = ic::test::executable("inferencecache-server")) {
    auto args = base_args();
    args.insert(args.end(), extra.begin(), extra.end());
    extra_ = extra;
    binary_ = binary;
    server_ = test::server_process::start(binary, args);
    ASSERT_NE(server_, nullptr);
    ASSERT_TRUE(server_->wait_ready(30s)) << server_->logs();
    channel_ = grpc::CreateChannel(server_->grpc_target(), grpc::InsecureChannelCredentials());
    stub_ = v1::InferenceCache::NewStub(channel_);
  }

  /// Stops the server with `sig` (SIGTERM: final snapshot; SIGKILL: journal replay) and
  /// starts it again on the same data directory.
  void restart(int sig) {
    ASSERT_NE(server_->terminate(sig, 20s), -1);
    stub_.reset();
    channel_.reset();
    start(extra_, binary_);
  }

  test::http_result admin(const std::string& method, const std::string& path,
                          const std::string& body = "",
                          const std::map<std::string, std::string>& headers = {}) {
    return test::http_call(server_->snapshot_port(), method, path, headers, body);
  }

  /// One replica's report: stats (pressure) at `ts` (0 = now) and optionally K held.
  void report(const std::string& replica, float pressure, std::int32_t tokens = 0,
              std::int64_t ts = 0) {
    v1::CacheStateUpdate u;
    u.set_replica_id(replica);
    u.set_model_id("m");
    u.set_tenant_id("serving");
    u.set_hash_scheme("vllm");
    u.set_timestamp_us(ts);
    if (tokens > 0) {
      auto* p = u.add_prefixes();
      p->set_prefix_hash(K);
      p->set_token_count(tokens);
    }
    u.mutable_stats()->set_pressure(pressure);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::Ack ack;
    auto writer = stub_->ReportCacheState(&ctx, &ack);
    ASSERT_TRUE(writer->Write(u));
    writer->WritesDone();
    ASSERT_TRUE(writer->Finish().ok());
    ASSERT_TRUE(ack.accepted()) << ack.reason_code();
  }

  /// Fixture F's stats and holders, reported now.
  void ingest_fixture() {
    report("p-0", 0.2f);
    report("p-1", 0.5f, 256);
    report("p-2", 0.1f);
    report("d-0", 0.4f, 256);
    report("d-1", 0.3f);
  }

  v1::LookupPDRouteResponse pd_route(const std::string& ref = "serving/pd",
                                     std::chrono::milliseconds client_deadline = 10s) {
    v1::LookupPDRouteRequest req;
    req.set_model_id("m");
    req.set_tenant_id("serving");
    req.set_prefix_hash(K);
    req.set_prefix_token_count(256);
    req.set_pd_topology_ref(ref);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + client_deadline);
    v1::LookupPDRouteResponse resp;
    grpc::Status st = stub_->LookupPDRoute(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp;
  }

  static void expect_pd(const v1::LookupPDRouteResponse& r, const std::string& reason,
                        const std::string& prefill, const std::string& decode,
                        const std::string& transport) {
    EXPECT_EQ(r.reason_code(), reason);
    EXPECT_EQ(r.prefill_replica_id(), prefill);
    EXPECT_EQ(r.decode_replica_id(), decode);
    EXPECT_EQ(r.transport_hint(), transport);
  }
  static void expect_row1(const v1::LookupPDRouteResponse& r) {
    expect_pd(r, "PREFIX_MATCH", "p-1", "d-1", "NIXL");
  }

  v1::RenderTemplateResponse render(const std::map<std::string, std::string>& vars,
                                    const std::string& ref = "serving/support-agent",
                                    const std::string& tenant = "serving") {
    v1::RenderTemplateRequest req;
    req.set_template_ref(ref);
    req.set_tenant_id(tenant);
    for (const auto& [k, v] : vars) (*req.mutable_variables())[k] = v;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::RenderTemplateResponse resp;
    grpc::Status st = stub_->RenderTemplate(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp;
  }

  static void expect_t1_row1(const v1::RenderTemplateResponse& r) {
    EXPECT_EQ(r.reason_code(), "OK");
    EXPECT_EQ(r.rendered_prompt(),
              "You are a helpful support agent for Acme.\nConversation so far:\nuser: hi\n");
    EXPECT_EQ(r.stable_prefix_hash(), from_hex("e814c61e33490731"));
    EXPECT_EQ(r.tenant_namespace(), "serving");
    EXPECT_EQ(r.template_revision(), "827a07b8803957c3e869357a82c0485f");
  }

  std::string write_file(const std::string& name, const std::string& body) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << body;
    return path;
  }

  std::string dir_;
  std::vector<std::string> extra_;
  const char* binary_ = ic::test::executable("inferencecache-server");
  std::unique_ptr<test::server_process> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::InferenceCache::Stub> stub_;
};

TEST_F(PdTemplates, PushThenLookupAnswersRow1AndGetReturnsTheCanonicalStore) {
  start();
  // Before any push: the stores are empty and the RPCs fail open.
  EXPECT_EQ(admin("GET", "/topology").body, "{\"version\":1,\"topologies\":[]}\n");
  EXPECT_EQ(pd_route().reason_code(), "UNKNOWN_TOPOLOGY");
  EXPECT_EQ(render({{"product", "Acme"}}).reason_code(), "TEMPLATE_NOT_FOUND");

  ASSERT_EQ(admin("POST", "/topology", kTopology).status, 204);
  ASSERT_EQ(admin("PUT", "/templates", kTemplates).status, 204);
  ingest_fixture();
  expect_row1(pd_route());
  expect_row1(pd_route("pd"));  // #13: bare name
  expect_pd(pd_route("serving/nope"), "UNKNOWN_TOPOLOGY", "", "", "");
  expect_t1_row1(render({{"product", "Acme"}, {"history", "user: hi"}}));
  expect_t1_row1(render({{"product", "Acme"}, {"history", "user: hi"}}, "support-agent"));

  auto topo = admin("GET", "/topology");
  EXPECT_EQ(topo.status, 200);
  EXPECT_EQ(topo.headers["content-type"], "application/json");
  EXPECT_NE(topo.body.find("\"serving\""), std::string::npos);
  EXPECT_NE(topo.body.find("\"replicas\":3"), std::string::npos) << topo.body;
  auto tmpl = admin("GET", "/templates");
  EXPECT_EQ(tmpl.status, 200);
  EXPECT_NE(tmpl.body.find("\"templateRevision\":\"827a07b8803957c3e869357a82c0485f\""),
            std::string::npos)
      << tmpl.body;
  // The GET body pushes back unchanged (and changes nothing).
  EXPECT_EQ(admin("POST", "/topology", topo.body).status, 204);
  EXPECT_EQ(admin("GET", "/topology").body, topo.body);
  EXPECT_EQ(admin("POST", "/templates", tmpl.body).status, 204);
  EXPECT_EQ(admin("GET", "/templates").body, tmpl.body);

  // §2.7 / §3.6 metrics.
  auto metrics = test::http_call(server_->http_port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("inferencecache_lookup_pd_route_calls_total{hint_used=\"true\",model=\"m\","
                         "reason_code=\"PREFIX_MATCH\"} 2"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("inferencecache_topology_push_total{result=\"ok\"} 2"), std::string::npos);
  EXPECT_NE(metrics.find("inferencecache_render_template_calls_total{reason_code=\"OK\"} 2"),
            std::string::npos);
  EXPECT_NE(metrics.find("inferencecache_lookup_pd_route_latency_seconds_count{model=\"m\"}"),
            std::string::npos);
  EXPECT_NE(metrics.find("inferencecache_pd_topology_replicas{role=\"prefill\",state=\"live\","
                         "topology=\"serving/pd\"} 3"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("inferencecache_pd_topology_replicas{role=\"prefill\",state=\"desired\","
                         "topology=\"serving/pd\"} 3"),
            std::string::npos);
  EXPECT_NE(metrics.find("inferencecache_pd_topology_replicas{role=\"decode\",state=\"live\","
                         "topology=\"serving/pd\"} 2"),
            std::string::npos);
}

TEST_F(PdTemplates, Row19_ReplicaUpdatedRefreshesLastSeen) {
  start();
  ASSERT_EQ(admin("POST", "/topology", kTopology).status, 204);
  ingest_fixture();
  report("d-1", 0.3f, 0, unix_us() - 90'000'000);  // d-1's stats 90 s old: not live
  expect_pd(pd_route(), "PREFIX_MATCH", "p-1", "d-0", "NIXL");
  v1::CacheEvent e;
  e.set_type(v1::CacheEvent::REPLICA_UPDATED);
  e.set_replica_id("d-1");
  e.set_model_id("m");
  e.set_tenant_id("serving");
  e.set_timestamp_us(unix_us() - 10'000'000);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  v1::Ack ack;
  ASSERT_TRUE(stub_->PublishEvent(&ctx, e, &ack).ok());
  ASSERT_TRUE(ack.accepted());
  expect_row1(pd_route());
}

TEST_F(PdTemplates, Row37_TenantLookupTimeoutAnswersTimeoutNeverAnError) {
  ::setenv("IC_TEST_LOOKUP_DELAY_MS", "1500", 1);
  start({"--insecure-disable-auth"}, ic::test::executable("inferencecache-server-testhooks"));
  ::unsetenv("IC_TEST_LOOKUP_DELAY_MS");
  ASSERT_EQ(admin("POST", "/topology", kTopology).status, 204);
  ingest_fixture();
  ASSERT_EQ(admin("POST", "/policy",
                  R"({"version":7,"policies":[{"namespace":"serving","lookupTimeoutMs":5}],"tenants":[]})")
                .status,
            204);
  const auto t0 = std::chrono::steady_clock::now();
  expect_pd(pd_route(), "TIMEOUT", "", "", "");
  // Answered at the tenant budget, not after the actor's 1.5 s stall.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1400ms);
}

TEST_F(PdTemplates, Rows40And26_JournalUnavailableIs503AndTheOldStoresKeepServing) {
  const std::string fault = dir_ + "/journal-fault";
  ::setenv("IC_TEST_JOURNAL_FAULT_FILE", fault.c_str(), 1);
  start({"--insecure-disable-auth"}, ic::test::executable("inferencecache-server-testhooks"));
  ::unsetenv("IC_TEST_JOURNAL_FAULT_FILE");
  ASSERT_EQ(admin("POST", "/topology", kTopology).status, 204);
  ASSERT_EQ(admin("POST", "/templates", kTemplates).status, 204);
  ingest_fixture();
  const std::string before_topo = admin("GET", "/topology").body;
  const std::string before_tmpl = admin("GET", "/templates").body;

  write_file("journal-fault", "on");
  std::this_thread::sleep_for(100ms);  // the hook polls the file every 10 ms
  auto topo = admin("POST", "/topology", R"({"version":1,"topologies":[]})");
  EXPECT_EQ(topo.status, 503) << topo.body;
  EXPECT_NE(topo.body.find("JOURNAL_UNAVAILABLE"), std::string::npos) << topo.body;
  auto tmpl = admin("PUT", "/templates", R"({"version":1,"templates":[]})");
  EXPECT_EQ(tmpl.status, 503) << tmpl.body;
  // Nothing changed: GET and both RPCs answer from the old stores.
  EXPECT_EQ(admin("GET", "/topology").body, before_topo);
  EXPECT_EQ(admin("GET", "/templates").body, before_tmpl);
  expect_row1(pd_route());
  expect_t1_row1(render({{"product", "Acme"}, {"history", "user: hi"}}));
  auto metrics = test::http_call(server_->http_port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("inferencecache_topology_push_total{result=\"journal_unavailable\"} 1"),
            std::string::npos);
  std::remove(fault.c_str());
}

TEST_F(PdTemplates, Rows41And27_StoresAreRecoveredExactlyFromTheJournalAndFromSnapshots) {
  start();
  ASSERT_EQ(admin("POST", "/topology", kTopology).status, 204);
  ASSERT_EQ(admin("POST", "/templates", kTemplates).status, 204);
  ingest_fixture();
  const std::string topo = admin("GET", "/topology").body;
  const std::string tmpl = admin("GET", "/templates").body;
  // SIGKILL: no final snapshot, the pushes come back by journal replay.
  restart(SIGKILL);
  EXPECT_EQ(admin("GET", "/topology").body, topo);
  EXPECT_EQ(admin("GET", "/templates").body, tmpl);
  expect_row1(pd_route());
  expect_t1_row1(render({{"product", "Acme"}, {"history", "user: hi"}}));
  // SIGTERM: a final snapshot truncates the journal; the stores come back from its sections.
  restart(SIGTERM);
  EXPECT_EQ(admin("GET", "/topology").body, topo);
  EXPECT_EQ(admin("GET", "/templates").body, tmpl);
  expect_row1(pd_route());
  expect_t1_row1(render({{"product", "Acme"}, {"history", "user: hi"}}));
  // #39 / #25: replace-on-write survives too.
  ASSERT_EQ(admin("POST", "/topology", R"({"version":1,"topologies":[]})").status, 204);
  restart(SIGTERM);
  EXPECT_EQ(pd_route().reason_code(), "UNKNOWN_TOPOLOGY");
  expect_t1_row1(render({{"product", "Acme"}, {"history", "user: hi"}}));
}

TEST_F(PdTemplates, Rows31_43_22_InvalidPushesAre400WithOneLineAndChangeNothing) {
  start();
  ASSERT_EQ(admin("POST", "/topology", kTopology).status, 204);
  ASSERT_EQ(admin("POST", "/templates", kTemplates).status, 204);
  const std::string topo = admin("GET", "/topology").body;
  const std::string tmpl = admin("GET", "/templates").body;
  struct bad {
    std::string path, body, names;
  };
  std::string amd = kTopology;
  amd.replace(amd.find(R"("decodePools":[{"name":"d","acceleratorType":"h100")"),
              std::string(R"("decodePools":[{"name":"d","acceleratorType":"h100")").size(),
              R"("decodePools":[{"name":"d","acceleratorType":"mi300")");
  amd.replace(amd.find("]}]}"), 4,
              R"(,{"name":"mi300","vendor":"amd"}]}]})");
  const std::vector<bad> cases = {
      {"/topology", amd, "\"d\""},                                                 // #31
      {"/topology", R"({"version":1,"topologies":[],"extra":1})", "extra"},     // #43 unknown field
      {"/topology", R"({"version":2,"topologies":[]})", "version"},             // #43 version
      {"/topology", "{not json", "topology"},                                    // malformed
      {"/templates", R"({"version":1,"templates":[{"namespace":"serving","name":"x","body":"{{ nope }}","slots":[]}]})",
       "nope"},                                                                  // #22 undeclared
      {"/templates", R"({"version":1,"templates":[{"namespace":"serving","name":"x","body":"","slots":[]}]})",
       "body"},                                                                  // #22 empty body
  };
  for (const auto& c : cases) {
    auto r = admin("POST", c.path, c.body);
    EXPECT_EQ(r.status, 400) << c.body;
    ASSERT_FALSE(r.body.empty());
    EXPECT_EQ(r.body.find('\n'), r.body.size() - 1) << "one line: " << r.body;
    EXPECT_NE(r.body.find(c.names), std::string::npos) << r.body;
  }
  EXPECT_EQ(admin("GET", "/topology").body, topo);
  EXPECT_EQ(admin("GET", "/templates").body, tmpl);
  // Over the size limit: 400 without reading the body.
  auto big = admin("POST", "/topology", std::string((1 << 20) + 10, ' '));
  EXPECT_EQ(big.status, 400);
  // Other methods: 405 with Allow.
  for (const char* path : {"/topology", "/templates"}) {
    auto r = admin("DELETE", path);
    EXPECT_EQ(r.status, 405) << path;
    EXPECT_EQ(r.headers["allow"], "GET, POST, PUT") << path;
  }
  auto metrics = test::http_call(server_->http_port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("inferencecache_topology_push_total{result=\"invalid\"} 5"),
            std::string::npos)
      << metrics;
}

TEST_F(PdTemplates, AdminRoutesNeedTheBearerToken) {
  const std::string token = write_file("token", "pd-token\n");
  start({"--admin-token-file=" + token});
  const std::map<std::string, std::string> good = {{"Authorization", "Bearer pd-token"}};
  for (const char* path : {"/topology", "/templates"}) {
    EXPECT_EQ(admin("GET", path).status, 401) << path;
    EXPECT_EQ(admin("POST", path, kTopology, {{"Authorization", "Bearer nope"}}).status, 401);
    EXPECT_EQ(admin("GET", path, "", good).status, 200) << path;
  }
  EXPECT_EQ(admin("POST", "/topology", kTopology, good).status, 204);
  EXPECT_EQ(admin("POST", "/templates", kTemplates, good).status, 204);
}

TEST_F(PdTemplates, StartupFilesApplyLikePushesAndInvalidOnesExit2) {
  const std::string topo = write_file("topology.json", kTopology);
  const std::string tmpl = write_file("templates.json", kTemplates);
  start({"--insecure-disable-auth", "--topology-file=" + topo, "--templates-file=" + tmpl});
  ingest_fixture();
  expect_row1(pd_route());
  expect_t1_row1(render({{"product", "Acme"}, {"history", "user: hi"}}));
  ASSERT_EQ(server_->terminate(SIGTERM, 20s), 0);
  server_.reset();

  const std::string bad = write_file("bad.json", R"({"version":2,"topologies":[]})");
  for (const char* flag : {"--topology-file=", "--templates-file="}) {
    auto args = base_args();
    args.push_back("--insecure-disable-auth");
    args.push_back(flag + bad);
    auto [code, out] = test::run_to_exit(ic::test::executable("inferencecache-server"), args);
    EXPECT_EQ(code, 2) << out;
    EXPECT_NE(out.find("version"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace ic
