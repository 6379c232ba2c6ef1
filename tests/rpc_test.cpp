// The eight RPCs, /policy and /snapshot against the real binary over real gRPC and HTTP.
#include <csignal>
#include <atomic>
#include <future>
#include <thread>

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "tests/support/chain_requests.hpp"
#include "tests/support/http_client.hpp"
#include "tests/support/server_process.hpp"
#include "tests/support/test_paths.hpp"

namespace ic {
namespace {

using namespace std::chrono_literals;
namespace v1 = inferencecache::v1alpha1;

class Rpc : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::make_temp_dir("ic_rpc"); }
  void TearDown() override {
    server_.reset();
    test::remove_tree(dir_);
  }

  void start(std::vector<std::string> extra = {},
             const char* binary = ic::test::executable("inferencecache-server")) {
    std::vector<std::string> args = {"--grpc-bind-address=127.0.0.1:0",
                                     "--http-bind-address=127.0.0.1:0",
                                     "--snapshot-bind-address=127.0.0.1:0",
                                     "--data-dir=" + dir_ + "/data", "--insecure-disable-auth",
                                     "--max-recv-message-bytes=1048576"};
    args.insert(args.end(), extra.begin(), extra.end());
    server_ = test::server_process::start(binary, args);
    ASSERT_NE(server_, nullptr);
    ASSERT_TRUE(server_->wait_ready(30s)) << server_->logs();
    channel_ = grpc::CreateChannel(server_->grpc_target(), grpc::InsecureChannelCredentials());
    stub_ = v1::InferenceCache::NewStub(channel_);
  }

  void restart(int sig) {
    ASSERT_NE(server_->terminate(sig, 20s), -1);
    stub_.reset();
    channel_.reset();
    start();
  }

  static void deadline(grpc::ClientContext& ctx, std::chrono::seconds s = 10s) {
    ctx.set_deadline(std::chrono::system_clock::now() + s);
  }

  static v1::CacheStateUpdate update(const std::string& replica,
                                     const std::vector<std::string>& blocks,
                                     const std::string& scheme = "vllm",
                                     const std::string& tenant = "team-a") {
    return test::chain_update_message(tenant, replica, blocks, scheme);
  }

  v1::Ack report(const std::vector<v1::CacheStateUpdate>& updates, grpc::Status* st_out = nullptr) {
    grpc::ClientContext ctx;
    deadline(ctx);
    v1::Ack ack;
    auto writer = stub_->ReportCacheState(&ctx, &ack);
    for (const auto& u : updates) EXPECT_TRUE(writer->Write(u));
    writer->WritesDone();
    grpc::Status st = writer->Finish();
    if (st_out) *st_out = st;
    else EXPECT_TRUE(st.ok()) << st.error_message();
    return ack;
  }

  v1::LookupRouteResponse lookup(const std::vector<std::string>& blocks,
                                 const std::string& tenant = "team-a") {
    v1::LookupRouteRequest req = test::chain_lookup_request(tenant, blocks);
    grpc::ClientContext ctx;
    deadline(ctx);
    v1::LookupRouteResponse resp;
    grpc::Status st = stub_->LookupRoute(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp;
  }

  v1::Ack publish(v1::CacheEvent::Type type, const std::string& replica,
                  const std::string& tenant = "team-a") {
    v1::CacheEvent e;
    e.set_type(type);
    e.set_replica_id(replica);
    e.set_model_id("llama");
    e.set_tenant_id(tenant);
    grpc::ClientContext ctx;
    deadline(ctx);
    v1::Ack ack;
    grpc::Status st = stub_->PublishEvent(&ctx, e, &ack);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return ack;
  }

  std::string dir_;
  std::unique_ptr<test::server_process> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::InferenceCache::Stub> stub_;
};

TEST_F(Rpc, ReportedChainIsMatchedByTheNextLookup) {
  start();
  v1::Ack ack = report({update("r1", {"a", "b", "c"}), update("r2", {"a"})});
  EXPECT_TRUE(ack.accepted());
  EXPECT_EQ(ack.reason_code(), "");
  auto resp = lookup({"a", "b", "c"});
  EXPECT_EQ(resp.reason_code(), "PREFIX_MATCH");
  ASSERT_EQ(resp.replica_scores_size(), 2);
  EXPECT_EQ(resp.replica_scores(0).replica_id(), "r1");
  EXPECT_EQ(resp.replica_scores(0).matched_tokens(), 192);
  EXPECT_EQ(resp.replica_scores(0).tier(), v1::CACHE_TIER_T1);
  EXPECT_EQ(resp.replica_scores(1).replica_id(), "r2");
  EXPECT_EQ(resp.replica_scores(1).matched_tokens(), 64);
  EXPECT_GT(resp.replica_scores(0).score(), resp.replica_scores(1).score());
  EXPECT_GE(resp.lookup_latency_us(), 0);

  grpc::ClientContext ctx;
  deadline(ctx);
  v1::GetCacheStateRequest sreq;
  sreq.set_tenant_id("team-a");
  sreq.set_model_id("llama");
  v1::GetCacheStateResponse sresp;
  ASSERT_TRUE(stub_->GetCacheState(&ctx, sreq, &sresp).ok());
  EXPECT_TRUE(sresp.has_summary());
  EXPECT_EQ(sresp.summary().total_prefixes(), 3);
  EXPECT_EQ(sresp.summary().hot_prefixes(), 0);
}

TEST_F(Rpc, UnknownTenantAndModelAreDiagnosed) {
  start();
  report({update("r1", {"a"})});
  EXPECT_EQ(lookup({"a"}, "nobody").reason_code(), "UNKNOWN_TENANT");
  v1::LookupRouteRequest req;
  req.set_tenant_id("team-a");
  req.set_model_id("other-model");
  req.set_hash_scheme("vllm");
  req.add_block_hashes("a");
  req.add_block_token_counts(64);
  grpc::ClientContext ctx;
  deadline(ctx);
  v1::LookupRouteResponse resp;
  ASSERT_TRUE(stub_->LookupRoute(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.reason_code(), "UNKNOWN_MODEL");
}

TEST_F(Rpc, AckCarriesTheFirstDropReasonAndDropsAreCounted) {
  start();
  v1::CacheStateUpdate bad_chain = update("r1", {"a"});
  bad_chain.mutable_prefixes(0)->add_block_token_counts(16);  // 1 hash, 2 counts
  v1::Ack ack = report({update("r0", {"x"}), bad_chain, update("r2", {"a"}, "")});
  EXPECT_TRUE(ack.accepted());
  EXPECT_EQ(ack.reason_code(), "DROPPED_MALFORMED_CHAIN");
  EXPECT_EQ(lookup({"x"}).reason_code(), "PREFIX_MATCH");
  auto metrics = test::http_call(server_->http_port(), "GET", "/metrics");
  EXPECT_NE(metrics.body.find("inferencecache_ingest_dropped_total{reason=\"DROPPED_MALFORMED_CHAIN\"} 1"),
            std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("inferencecache_ingest_dropped_total{reason=\"DROPPED_EMPTY_HASH_SCHEME\"} 1"),
            std::string::npos);
}

TEST_F(Rpc, AllClearedEventRemovesTheReplica) {
  start();
  report({update("r1", {"a"}), update("r2", {"a"})});
  v1::Ack ack = publish(v1::CacheEvent::ALL_CLEARED, "r1");
  EXPECT_TRUE(ack.accepted());
  EXPECT_EQ(ack.reason_code(), "");
  auto resp = lookup({"a"});
  EXPECT_EQ(resp.reason_code(), "PREFIX_MATCH");
  ASSERT_EQ(resp.replica_scores_size(), 1);
  EXPECT_EQ(resp.replica_scores(0).replica_id(), "r2");
}

TEST_F(Rpc, ReservedProbeTenantIsRefusedEverywhere) {
  start();
  const std::string probe = "inferencecache.io/probe";
  v1::Ack ack = report({update("r1", {"a"}, "vllm", probe)});
  EXPECT_TRUE(ack.accepted());
  EXPECT_EQ(ack.reason_code(), "RESERVED_TENANT");
  auto resp = lookup({"a"}, probe);
  EXPECT_EQ(resp.reason_code(), "NO_HINT");
  EXPECT_EQ(resp.lookup_latency_us(), 0);
  EXPECT_EQ(publish(v1::CacheEvent::ALL_CLEARED, "r1", probe).reason_code(), "RESERVED_TENANT");
  grpc::ClientContext ctx;
  deadline(ctx);
  v1::GetCacheStateRequest sreq;
  sreq.set_tenant_id(probe);
  v1::GetCacheStateResponse sresp;
  ASSERT_TRUE(stub_->GetCacheState(&ctx, sreq, &sresp).ok());
  EXPECT_TRUE(sresp.has_summary());
  EXPECT_EQ(sresp.replicas_size(), 0);
}

TEST_F(Rpc, StreamCacheEventsDeliversFilteredChangesInOrder) {
  start();
  grpc::ClientContext ctx;
  deadline(ctx, 20s);
  v1::StreamEventsRequest req;
  req.set_tenant_id("team-a");
  req.add_types(v1::CacheEvent::PREFIX_ADDED);
  req.add_types(v1::CacheEvent::ALL_CLEARED);
  auto reader = stub_->StreamCacheEvents(&ctx, req);
  // The server sends headers once the subscription is in place.
  reader->WaitForInitialMetadata();
  report({update("r1", {"a", "b"}), update("rx", {"z"}, "vllm", "team-b")});
  publish(v1::CacheEvent::ALL_CLEARED, "r1");
  report({update("r1", {"a"})});  // a refresh after the clear re-adds the entry
  std::vector<v1::CacheEvent> got;
  v1::CacheEvent e;
  while (got.size() < 4 && reader->Read(&e)) got.push_back(e);
  ctx.TryCancel();
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].type(), v1::CacheEvent::PREFIX_ADDED);
  EXPECT_EQ(got[0].prefix_hash(), "a");
  EXPECT_EQ(got[1].type(), v1::CacheEvent::PREFIX_ADDED);
  EXPECT_EQ(got[1].prefix_hash(), "b");
  EXPECT_EQ(got[2].type(), v1::CacheEvent::ALL_CLEARED);
  EXPECT_EQ(got[3].type(), v1::CacheEvent::PREFIX_ADDED);
  for (const auto& ev : got) {
    EXPECT_EQ(ev.tenant_id(), "team-a");
    EXPECT_EQ(ev.replica_id(), "r1");
    EXPECT_EQ(ev.model_id(), "llama");
    EXPECT_GT(ev.timestamp_us(), 0);
  }
}

TEST_F(Rpc, StreamMetricsSendsSelectedSeriesOnSubscribe) {
  start({"--metrics-stream-interval=200ms"});
  lookup({"a"});
  grpc::ClientContext ctx;
  deadline(ctx, 20s);
  v1::StreamMetricsRequest req;
  req.add_names("inferencecache_lookup_route_latency_seconds");
  req.add_names("inferencecache_server_up");
  auto reader = stub_->StreamMetrics(&ctx, req);
  v1::Metric m;
  bool saw_up = false, saw_bucket = false, saw_count = false;
  int reads = 0;
  while (reads++ < 200 && reader->Read(&m)) {
    if (m.name() == "inferencecache_server_up") {
      saw_up = true;
      EXPECT_EQ(m.type(), "gauge");
      EXPECT_EQ(m.value(), 1.0);
    }
    if (m.name() == "inferencecache_lookup_route_latency_seconds_bucket") {
      saw_bucket = true;
      EXPECT_EQ(m.type(), "histogram");
      EXPECT_EQ(m.labels().count("le"), 1u);
    }
    if (m.name() == "inferencecache_lookup_route_latency_seconds_count") {
      saw_count = true;
      EXPECT_GE(m.value(), 1.0);
    }
    EXPECT_NE(m.name(), "inferencecache_index_entries");
    EXPECT_GT(m.timestamp_us(), 0);
    if (saw_up && saw_bucket && saw_count) break;
  }
  ctx.TryCancel();
  EXPECT_TRUE(saw_up);
  EXPECT_TRUE(saw_bucket);
  EXPECT_TRUE(saw_count);
}

TEST_F(Rpc, AcknowledgedUpdatesSurviveSigkillAndSigterm) {
  start();
  report({update("r1", {"a", "b"})});
  publish(v1::CacheEvent::REPLICA_UPDATED, "r1");
  auto before = lookup({"a", "b"});
  ASSERT_EQ(before.reason_code(), "PREFIX_MATCH");
  restart(SIGKILL);
  auto after_kill = lookup({"a", "b"});
  EXPECT_EQ(after_kill.reason_code(), "PREFIX_MATCH");
  ASSERT_EQ(after_kill.replica_scores_size(), 1);
  EXPECT_EQ(after_kill.replica_scores(0).replica_id(), "r1");
  EXPECT_EQ(after_kill.replica_scores(0).matched_tokens(), 128);
  report({update("r2", {"a"})});
  restart(SIGTERM);
  auto after_term = lookup({"a", "b"});
  EXPECT_EQ(after_term.replica_scores_size(), 2);
  // SIGTERM wrote a final snapshot, so the restart loaded it and replayed nothing.
  EXPECT_NE(server_->logs().find("\"recovered\""), std::string::npos);
  EXPECT_NE(server_->logs().find("\"records_replayed\":\"0\""), std::string::npos) << server_->logs();
  EXPECT_EQ(server_->logs().find("\"snapshot_seq\":\"0\""), std::string::npos) << server_->logs();
}

TEST_F(Rpc, PolicyPushIsValidatedJournaledAndSurvivesRestart) {
  start();
  const int port = server_->snapshot_port();
  auto bad = test::http_call(port, "POST", "/policy", {}, R"({"version":7,"bogus":1})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("unknown field"), std::string::npos) << bad.body;
  EXPECT_EQ(test::http_call(port, "POST", "/policy", {}, R"({"version":2})").status, 400);
  EXPECT_EQ(test::http_call(port, "DELETE", "/policy").status, 405);
  auto ok = test::http_call(port, "POST", "/policy", {},
                            R"({"version":7,"policies":[{"namespace":"team-a","requireChain":true,)"
                            R"("strategy":{"requireChain":true}}],"tenants":[]})");
  // requireChain is only valid inside strategy: the first body is refused.
  EXPECT_EQ(ok.status, 400);
  ok = test::http_call(port, "PUT", "/policy", {},
                       R"({"version":7,"policies":[{"namespace":"team-a",)"
                       R"("strategy":{"requireChain":true}}],"tenants":[]})");
  EXPECT_EQ(ok.status, 204) << ok.body;
  // requireChain: an exact-key lookup is refused with POLICY_REQUIRES_CHAIN.
  auto check = [&] {
    v1::LookupRouteRequest req;
    req.set_tenant_id("team-a");
    req.set_model_id("llama");
    req.set_hash_scheme("vllm");
    req.set_prefix_hash("p");
    grpc::ClientContext ctx;
    deadline(ctx);
    v1::LookupRouteResponse resp;
    EXPECT_TRUE(stub_->LookupRoute(&ctx, req, &resp).ok());
    return resp.reason_code();
  };
  EXPECT_EQ(check(), "POLICY_REQUIRES_CHAIN");
  restart(SIGTERM);
  EXPECT_EQ(check(), "POLICY_REQUIRES_CHAIN");
  auto get = test::http_call(server_->snapshot_port(), "GET", "/policy");
  EXPECT_EQ(get.status, 200);
  EXPECT_NE(get.body.find("\"requireChain\":true"), std::string::npos) << get.body;
}

TEST_F(Rpc, SnapshotShowsReplicasAndTenants) {
  start();
  v1::CacheStateUpdate u = update("vllm-0", {"a", "b"});
  u.mutable_stats()->set_hit_rate(0.5f);
  report({u});
  auto snap = test::http_call(server_->snapshot_port(), "GET", "/snapshot");
  ASSERT_EQ(snap.status, 200);
  EXPECT_EQ(snap.headers["content-type"], "application/json");
  auto j = nlohmann::json::parse(snap.body);
  ASSERT_EQ(j["replicas"].size(), 1u);
  EXPECT_EQ(j["replicas"][0]["replicaId"], "vllm-0");
  EXPECT_EQ(j["replicas"][0]["tenant"], "team-a");
  EXPECT_EQ(j["replicas"][0]["prefixCount"], 2);
  EXPECT_EQ(j["replicas"][0]["statsReported"], true);
  EXPECT_EQ(j["tenants"][0]["tenantId"], "team-a");
  EXPECT_EQ(j["tenants"][0]["indexEntries"], 2);
  EXPECT_EQ(j["totalPrefixes"], 2);
  EXPECT_EQ(j["hotPrefixes"], 0);
  EXPECT_EQ(test::http_call(server_->snapshot_port(), "POST", "/snapshot").status, 405);
}

TEST_F(Rpc, OversizedAndGarbageRequestsGetAStatusAndTheServerStaysUp) {
  start();
  v1::CacheStateUpdate huge = update("r1", {"a"});
  huge.set_replica_id(std::string(2 * 1024 * 1024, 'x'));
  grpc::Status st;
  report({huge}, &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();

  grpc::GenericStub generic(channel_);
  // Invalid wire bytes, and a length prefix running past the end of the message.
  const std::vector<std::string> garbage_bodies = {std::string(4, '\xff'),
                                                   std::string("\x0a\x05" "ab", 4)};
  for (const std::string& garbage : garbage_bodies) {
    grpc::ClientContext ctx;
    deadline(ctx);
    grpc::Slice slice(garbage.data(), garbage.size());
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    std::promise<grpc::Status> done;
    generic.UnaryCall(&ctx, "/inferencecache.v1alpha1.InferenceCache/LookupRoute", {}, &request,
                      &response, [&done](grpc::Status s) { done.set_value(s); });
    grpc::Status gs = done.get_future().get();
    EXPECT_FALSE(gs.ok());
  }
  report({update("r1", {"a"})});
  EXPECT_EQ(lookup({"a"}).reason_code(), "PREFIX_MATCH");
}

TEST_F(Rpc, ConcurrentReadersAndWritersAllSucceed) {
  start();
  constexpr int kWriters = 4, kReaders = 4, kRounds = 50;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      auto stub = v1::InferenceCache::NewStub(channel_);
      for (int i = 0; i < kRounds; ++i) {
        grpc::ClientContext ctx;
        deadline(ctx);
        v1::Ack ack;
        auto writer = stub->ReportCacheState(&ctx, &ack);
        writer->Write(update("w" + std::to_string(w), {"shared", "w" + std::to_string(w) + "-" + std::to_string(i)}));
        writer->WritesDone();
        if (!writer->Finish().ok() || !ack.accepted()) ++failures;
      }
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&] {
      auto stub = v1::InferenceCache::NewStub(channel_);
      for (int i = 0; i < kRounds * 2; ++i) {
        v1::LookupRouteRequest req;
        req.set_tenant_id("team-a");
        req.set_model_id("llama");
        req.set_hash_scheme("vllm");
        req.add_block_hashes("shared");
        req.add_block_token_counts(64);
        grpc::ClientContext ctx;
        deadline(ctx);
        v1::LookupRouteResponse resp;
        if (!stub->LookupRoute(&ctx, req, &resp).ok() || resp.reason_code().empty()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  // Every writer's last block is held by that writer alone.
  for (int w = 0; w < kWriters; ++w) {
    auto resp = lookup({"w" + std::to_string(w) + "-" + std::to_string(kRounds - 1)});
    EXPECT_EQ(resp.reason_code(), "PREFIX_MATCH");
    ASSERT_EQ(resp.replica_scores_size(), 1);
    EXPECT_EQ(resp.replica_scores(0).replica_id(), "w" + std::to_string(w));
  }
  grpc::ClientContext ctx;
  deadline(ctx);
  v1::GetCacheStateRequest sreq;
  sreq.set_tenant_id("team-a");
  sreq.set_model_id("llama");
  v1::GetCacheStateResponse sresp;
  ASSERT_TRUE(stub_->GetCacheState(&ctx, sreq, &sresp).ok());
  EXPECT_EQ(sresp.summary().total_prefixes(), 1 + kWriters * kRounds);
}

TEST_F(Rpc, MissedLookupBudgetAnswersTimeoutNotAnError) {
  // The test-hooks server stalls every lookup decision in the tenant actor by 1.5 s; the
  // tenant's budget is 20 ms. TIMEOUT comes from the deadline timer, not after the decision
  // (H16/H17: "TIMEOUT within well under 1 s"), and is a normal answer, not an error.
  ::setenv("IC_TEST_LOOKUP_DELAY_MS", "1500", 1);
  start({}, ic::test::executable("inferencecache-server-testhooks"));
  ::unsetenv("IC_TEST_LOOKUP_DELAY_MS");
  report({update("r1", {"a"})});
  auto pushed = test::http_call(server_->snapshot_port(), "POST", "/policy", {},
                                R"({"version":7,"policies":[{"namespace":"team-a",)"
                                R"("lookupTimeoutMs":20}],"tenants":[]})");
  ASSERT_EQ(pushed.status, 204) << pushed.body;
  v1::LookupRouteRequest req;
  req.set_tenant_id("team-a");
  req.set_model_id("llama");
  req.set_hash_scheme("vllm");
  req.add_block_hashes("a");
  req.add_block_token_counts(64);
  req.set_adapter_id("lora-x");
  grpc::ClientContext ctx;
  deadline(ctx);
  v1::LookupRouteResponse resp;
  const auto t0 = std::chrono::steady_clock::now();
  grpc::Status st = stub_->LookupRoute(&ctx, req, &resp);
  const auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.reason_code(), "TIMEOUT");
  EXPECT_EQ(resp.replica_scores_size(), 0);
  EXPECT_EQ(resp.adapter_id(), "");
  EXPECT_GE(resp.lookup_latency_us(), 20000);
  EXPECT_LT(waited, std::chrono::milliseconds(1000));  // the 1.5 s decision is not waited for
  auto metrics = test::http_call(server_->http_port(), "GET", "/metrics");
  EXPECT_NE(metrics.body.find("reason_code=\"TIMEOUT\""), std::string::npos) << metrics.body;
}

// H36 / H37 over gRPC, with the global cap at 1 entry and an LFU tenant: a delivered
// PREFIX_MATCH credits its entry (it then outlives a newer one at the cap); a lookup that
// answered TIMEOUT credits nothing (the older entry is then the victim).
class RpcLfuCap : public Rpc {
 protected:
  /// Reports A (model llama), looks it up 3 times, reports B (model llama2); returns the
  /// (llama, llama2) prefix counts afterwards and the lookups' reason codes.
  std::pair<std::pair<std::int64_t, std::int64_t>, std::vector<std::string>> run(int budget_ms) {
    auto pushed = test::http_call(
        server_->snapshot_port(), "POST", "/policy", {},
        R"({"version":7,"policies":[{"namespace":"team-a","eviction":"lfu","minimumMatchedTokens":0,)"
        R"("lookupTimeoutMs":)" + std::to_string(budget_ms) + "}],\"tenants\":[]}");
    EXPECT_EQ(pushed.status, 204) << pushed.body;
    report({update("r-a", {"A"})});
    std::vector<std::string> reasons;
    for (int i = 0; i < 3; ++i) reasons.push_back(lookup({"A"}).reason_code());
    auto b = update("r-b", {"B"});
    b.set_model_id("llama2");
    report({b});
    return {{prefixes("llama"), prefixes("llama2")}, reasons};
  }
  std::int64_t prefixes(const std::string& model) {
    v1::GetCacheStateRequest req;
    req.set_tenant_id("team-a");
    req.set_model_id(model);
    grpc::ClientContext ctx;
    deadline(ctx);
    v1::GetCacheStateResponse resp;
    EXPECT_TRUE(stub_->GetCacheState(&ctx, req, &resp).ok());
    return resp.summary().total_prefixes();
  }
};

TEST_F(RpcLfuCap, DeliveredMatchesAreCreditedAndOutliveANewerEntry) {
  start({"--max-index-entries=1"});
  auto [counts, reasons] = run(10'000);
  EXPECT_EQ(reasons, std::vector<std::string>(3, "PREFIX_MATCH"));
  EXPECT_EQ(counts.first, 1);   // A (3 hits) survives
  EXPECT_EQ(counts.second, 0);  // B (0 hits) is the cap victim
}

TEST_F(RpcLfuCap, TimedOutLookupsAreNotCredited) {
  ::setenv("IC_TEST_LOOKUP_DELAY_MS", "200", 1);
  start({"--max-index-entries=1"}, ic::test::executable("inferencecache-server-testhooks"));
  ::unsetenv("IC_TEST_LOOKUP_DELAY_MS");
  auto [counts, reasons] = run(20);
  EXPECT_EQ(reasons, std::vector<std::string>(3, "TIMEOUT"));
  EXPECT_EQ(counts.first, 0);   // A, never credited and older, is the victim
  EXPECT_EQ(counts.second, 1);  // B survives
}

TEST_F(Rpc, SlowEventSubscriberIsCutOffWithoutSlowingIngest) {
  start();
  grpc::ClientContext ctx;
  deadline(ctx, 60s);
  v1::StreamEventsRequest req;
  auto reader = stub_->StreamCacheEvents(&ctx, req);
  reader->WaitForInitialMetadata();
  // Never read while 200k entries are added: far more than the subscriber's buffer plus what
  // the transport can hold.
  for (int m = 0; m < 4; ++m) {
    std::vector<std::string> blocks;
    for (int i = 0; i < 50000; ++i) blocks.push_back("m" + std::to_string(m) + "-" + std::to_string(i));
    v1::Ack ack = report({update("r1", blocks)});
    ASSERT_TRUE(ack.accepted());
  }
  v1::CacheEvent e;
  std::size_t n = 0;
  while (reader->Read(&e)) ++n;
  grpc::Status st = reader->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_GT(n, 0u);
  EXPECT_LT(n, 200000u);
  EXPECT_EQ(lookup({"m0-0"}).reason_code(), "PREFIX_MATCH");
}

}  // namespace
}  // namespace ic
