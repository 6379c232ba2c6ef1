// The handler-level scenarios of spec/lookup.md §6.8 (H rows) against the real binary over
// gRPC. One server holds every scenario, each under its own tenant (and, where a metric is
// checked, its own model), so they cannot disturb each other; H1 runs first, on the empty
// index. Rows that need a tokenizer are covered by the index unit tests and end to end by
// tests/prompt_text_test.cpp; rows that need an injected slow index by the index unit
// tests (index/route_lookup_test.cpp) and by Rpc.MissedLookupBudgetAnswersTimeoutNotAnError.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include "index/fingerprint.hpp"
#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "tests/support/http_client.hpp"
#include "tests/support/server_process.hpp"
#include "tests/support/test_paths.hpp"

namespace ic {
namespace {

using namespace std::chrono_literals;
namespace v1 = inferencecache::v1alpha1;

// The policies of every scenario that names one (version 7: absent numbers are 0, absent
// pointers take their defaults).
constexpr const char* kPolicies = R"({"version":7,"policies":[
  {"namespace":"h13","minimumPrefixTokens":50},
  {"namespace":"h14","minimumPrefixTokens":200,"affinityRouting":false},
  {"namespace":"h19a","minimumPrefixTokens":200,"lookupTimeoutMs":1},
  {"namespace":"h21","minimumPrefixTokens":32,"minimumMatchedTokens":0},
  {"namespace":"h22","minimumPrefixTokens":200,"affinityRouting":false},
  {"namespace":"h23","strategy":{"requireChain":true}},
  {"namespace":"h25","minimumPrefixTokens":100,"affinityRouting":false,
   "strategy":{"enableChainMatching":false}},
  {"namespace":"h26","affinityRouting":false,"strategy":{"enableTenantHot":false}},
  {"namespace":"h29","affinityRouting":false},
  {"namespace":"h30","affinityRouting":false,"minimumMatchedTokens":64},
  {"namespace":"h32","affinityRouting":false,"minimumMatchedTokens":256},
  {"namespace":"h33","minimumMatchedTokens":0},
  {"namespace":"h34","minimumMatchedTokens":64},
  {"namespace":"h38","affinityRouting":false},
  {"namespace":"h40","affinityRouting":false,"routingFloorScore":100},
  {"namespace":"h41","routingFloorScore":0,"minimumMatchedTokens":0}],"tenants":[]})";


/// A client for one server: builders for the §6 notation.
class client {
 public:
  explicit client(const test::server_process& s)
      : server_(s),
        stub_(v1::InferenceCache::NewStub(
            grpc::CreateChannel(s.grpc_target(), grpc::InsecureChannelCredentials()))) {}

  /// I(replica, tenant/model/vllm, prefix=p:N) with an optional tier and stats.
  void legacy(const std::string& tenant, const std::string& replica, const std::string& p,
              int tokens, int tier = 1, const std::string& model = "m") {
    v1::CacheStateUpdate u = base(tenant, replica, model);
    auto* e = u.add_prefixes();
    e->set_prefix_hash(p);
    e->set_token_count(tokens);
    e->set_tier(static_cast<v1::CacheTier>(tier));
    report(u);
  }
  /// chain(blocks)×count for `replica`.
  void chain(const std::string& tenant, const std::string& replica,
             const std::vector<std::string>& blocks, int count, const std::string& model = "m") {
    v1::CacheStateUpdate u = base(tenant, replica, model);
    auto* e = u.add_prefixes();
    for (const auto& b : blocks) {
      e->add_block_hashes(b);
      e->add_block_token_counts(count);
    }
    report(u);
  }
  /// A warm replica: stats with `hit` and one prefix `other`:1.
  void warm(const std::string& tenant, const std::string& replica, float hit) {
    v1::CacheStateUpdate u = base(tenant, replica, "m");
    auto* e = u.add_prefixes();
    e->set_prefix_hash("other");
    e->set_token_count(1);
    u.mutable_stats()->set_hit_rate(hit);
    report(u);
  }
  void report(const v1::CacheStateUpdate& u) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::Ack ack;
    auto w = stub_->ReportCacheState(&ctx, &ack);
    ASSERT_TRUE(w->Write(u));
    w->WritesDone();
    ASSERT_TRUE(w->Finish().ok());
    ASSERT_TRUE(ack.accepted());
  }
  v1::LookupRouteResponse lookup(v1::LookupRouteRequest req) {
    if (req.model_id().empty()) req.set_model_id("m");
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::LookupRouteResponse resp;
    grpc::Status st = stub_->LookupRoute(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp;
  }
  static v1::LookupRouteRequest exact(const std::string& tenant, const std::string& p, int count) {
    v1::LookupRouteRequest r = request(tenant);
    r.set_prefix_hash(p);
    r.set_prefix_token_count(count);
    return r;
  }
  static v1::LookupRouteRequest chain_request(const std::string& tenant,
                                              const std::vector<std::string>& blocks, int count) {
    v1::LookupRouteRequest r = request(tenant);
    for (const auto& b : blocks) {
      r.add_block_hashes(b);
      r.add_block_token_counts(count);
    }
    return r;
  }
  static v1::LookupRouteRequest request(const std::string& tenant) {
    v1::LookupRouteRequest r;
    r.set_tenant_id(tenant);
    r.set_model_id("m");
    r.set_hash_scheme("vllm");
    return r;
  }
  v1::InferenceCache::Stub& stub() { return *stub_; }
  const test::server_process& server() const { return server_; }

 private:
  static v1::CacheStateUpdate base(const std::string& tenant, const std::string& replica,
                                   const std::string& model) {
    v1::CacheStateUpdate u;
    u.set_tenant_id(tenant);
    u.set_model_id(model);
    u.set_hash_scheme("vllm");
    u.set_replica_id(replica);
    return u;
  }
  const test::server_process& server_;
  std::unique_ptr<v1::InferenceCache::Stub> stub_;
};

std::vector<std::string> replicas_of(const v1::LookupRouteResponse& r) {
  std::vector<std::string> out;
  for (const auto& s : r.replica_scores()) out.push_back(s.replica_id());
  return out;
}

std::vector<std::uint32_t> tokens(std::uint32_t from, std::uint32_t n) {
  std::vector<std::uint32_t> t(n);
  for (std::uint32_t i = 0; i < n; ++i) t[i] = from + i;
  return t;
}

TEST(HandlerScenarios, PolicyGatesFloorsDiagnosticsAndDualInputOverGrpc) {
  const std::string dir = test::make_temp_dir("ic_handler");
  auto server = test::server_process::start(
      ic::test::executable("inferencecache-server"),
      {"--grpc-bind-address=127.0.0.1:0", "--http-bind-address=127.0.0.1:0",
       "--snapshot-bind-address=127.0.0.1:0", "--data-dir=" + dir, "--insecure-disable-auth"});
  ASSERT_TRUE(server->wait_ready(30s)) << server->logs();
  client c(*server);
  {
    SCOPED_TRACE("H1 empty index, only model_id");
    v1::LookupRouteRequest r;
    r.set_model_id("m");
    auto resp = c.lookup(r);
    EXPECT_EQ(resp.reason_code(), "NO_HINT");
    EXPECT_EQ(resp.replica_scores_size(), 0);
  }
  ASSERT_EQ(test::http_call(server->snapshot_port(), "POST", "/policy", {}, kPolicies).status, 204);
  {
    SCOPED_TRACE("H2 exact match");
    c.legacy("h2", "r1", "p", 128);
    auto resp = c.lookup(client::exact("h2", "p", 128));
    EXPECT_EQ(resp.reason_code(), "PREFIX_MATCH");
    EXPECT_EQ(replicas_of(resp), std::vector<std::string>{"r1"});
    EXPECT_EQ(resp.replica_scores(0).tier(), v1::CACHE_TIER_T1);
  }
  {
    SCOPED_TRACE("H3 TENANT_HOT");
    c.warm("h3", "warm", 0.8f);
    auto resp = c.lookup(client::exact("h3", "novel", 128));
    EXPECT_EQ(resp.reason_code(), "TENANT_HOT");
    ASSERT_EQ(replicas_of(resp), std::vector<std::string>{"warm"});
    EXPECT_EQ(resp.replica_scores(0).matched_tokens(), 0);
    EXPECT_EQ(resp.replica_scores(0).tier(), v1::CACHE_TIER_UNSPECIFIED);
  }
  {
    SCOPED_TRACE("H4 tiers over the wire");
    const std::vector<std::pair<int, v1::CacheTier>> tiers = {
        {1, v1::CACHE_TIER_T1}, {2, v1::CACHE_TIER_T2}, {0, v1::CACHE_TIER_T1},
        {99, v1::CACHE_TIER_UNSPECIFIED}, {-1, v1::CACHE_TIER_UNSPECIFIED}};
    for (std::size_t i = 0; i < tiers.size(); ++i) {
      const std::string tenant = "h4-" + std::to_string(i);
      c.legacy(tenant, "r", "p", 128, tiers[i].first);
      auto resp = c.lookup(client::exact(tenant, "p", 128));
      EXPECT_EQ(resp.reason_code(), "PREFIX_MATCH") << tiers[i].first;
      ASSERT_EQ(resp.replica_scores_size(), 1);
      EXPECT_EQ(resp.replica_scores(0).tier(), tiers[i].second) << tiers[i].first;
    }
  }
  {
    SCOPED_TRACE("H5 empty hash_scheme");
    c.warm("h5", "warm", 0.9f);
    auto req = client::exact("h5", "novel", 128);
    req.set_hash_scheme("");
    EXPECT_EQ(c.lookup(req).reason_code(), "NO_HINT");
  }
  {
    SCOPED_TRACE("H6 tight SLO raises the score");
    c.legacy("h6", "r", "p", 128);
    auto base = c.lookup(client::exact("h6", "p", 128));
    auto tight_req = client::exact("h6", "p", 128);
    tight_req.mutable_slo()->set_ttft_ms(50);
    auto tight = c.lookup(tight_req);
    EXPECT_EQ(base.reason_code(), "PREFIX_MATCH");
    EXPECT_EQ(tight.reason_code(), "PREFIX_MATCH");
    ASSERT_EQ(base.replica_scores_size(), 1);
    ASSERT_EQ(tight.replica_scores_size(), 1);
    EXPECT_GT(tight.replica_scores(0).score(), base.replica_scores(0).score());
  }
  {
    SCOPED_TRACE("H8 a cancelled stream gets no Ack");
    grpc::ClientContext ctx;
    v1::Ack ack;
    auto w = c.stub().ReportCacheState(&ctx, &ack);
    v1::CacheStateUpdate u;
    u.set_tenant_id("h8");
    u.set_replica_id("r");
    w->Write(u);
    ctx.TryCancel();
    EXPECT_EQ(w->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  {
    SCOPED_TRACE("H10 GetCacheState");
    v1::CacheStateUpdate u;
    u.set_tenant_id("h10");
    u.set_model_id("m");
    u.set_hash_scheme("vllm");
    u.set_replica_id("replica-a");
    auto* e = u.add_prefixes();
    e->set_prefix_hash("p");
    e->set_token_count(10);
    u.mutable_stats()->set_cache_memory_bytes(2048);
    u.mutable_stats()->set_hit_rate(0.5f);
    u.mutable_stats()->set_t2_hit_tokens(600);
    u.mutable_stats()->set_t2_query_tokens(1000);
    u.mutable_stats()->set_client_version("dropped");
    c.report(u);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::GetCacheStateRequest req;
    req.set_tenant_id("h10");
    req.set_model_id("m");
    v1::GetCacheStateResponse resp;
    ASSERT_TRUE(c.stub().GetCacheState(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.summary().total_prefixes(), 1);
    ASSERT_EQ(resp.replicas_size(), 1);
    EXPECT_EQ(resp.replicas(0).replica_id(), "replica-a");
    EXPECT_EQ(resp.replicas(0).cache_memory_bytes(), 2048);
    EXPECT_EQ(resp.replicas(0).t2_hit_tokens(), 600);
    EXPECT_EQ(resp.replicas(0).t2_query_tokens(), 1000);
    EXPECT_EQ(resp.replicas(0).client_version(), "");
  }
  {
    SCOPED_TRACE("H12 PREFIX_EVICTED removes one holder");
    c.legacy("h12", "a", "p", 10);
    c.legacy("h12", "b", "p", 10);
    v1::CacheEvent ev;
    ev.set_type(v1::CacheEvent::PREFIX_EVICTED);
    ev.set_tenant_id("h12");
    ev.set_model_id("m");
    ev.set_replica_id("a");
    ev.set_prefix_hash("p");
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::Ack ack;
    ASSERT_TRUE(c.stub().PublishEvent(&ctx, ev, &ack).ok());
    EXPECT_TRUE(ack.accepted());
    EXPECT_EQ(replicas_of(c.lookup(client::exact("h12", "p", 10))), std::vector<std::string>{"b"});
  }
  {
    SCOPED_TRACE("H13 minPrefix 50, other fields zero");
    c.legacy("h13", "r", "p", 100);
    EXPECT_EQ(c.lookup(client::exact("h13", "p", 100)).reason_code(), "PREFIX_MATCH");
  }
  {
    SCOPED_TRACE("H14 minPrefix 200, affinity off");
    c.legacy("h14", "r", "p", 10);
    EXPECT_EQ(c.lookup(client::exact("h14", "p", 10)).reason_code(), "NO_HINT");
  }
  {
    SCOPED_TRACE("H19 another tenant's policy does not apply");
    c.legacy("h19b", "r", "p", 128);
    EXPECT_EQ(c.lookup(client::exact("h19b", "p", 128)).reason_code(), "PREFIX_MATCH");
  }
  {
    SCOPED_TRACE("H20 longest leading run");
    c.chain("h20", "r", {"b1", "b2", "b3"}, 64);
    auto resp = c.lookup(client::chain_request("h20", {"b1", "b2", "b3", "x4", "x5"}, 64));
    EXPECT_EQ(resp.reason_code(), "PREFIX_MATCH");
    ASSERT_EQ(resp.replica_scores_size(), 1);
    EXPECT_EQ(resp.replica_scores(0).matched_tokens(), 192);
  }
  {
    SCOPED_TRACE("H21 minPrefix 32, minMatched 0, chain sum 48");
    c.chain("h21", "r", {"c1", "c2", "c3"}, 16);
    EXPECT_EQ(c.lookup(client::chain_request("h21", {"c1", "c2", "c3"}, 16)).reason_code(),
              "PREFIX_MATCH");
  }
  {
    SCOPED_TRACE("H22 minPrefix 200, affinity off, chain sum 32");
    c.chain("h22", "r", {"c1", "c2"}, 16);
    EXPECT_EQ(c.lookup(client::chain_request("h22", {"c1", "c2"}, 16)).reason_code(), "NO_HINT");
  }
  {
    SCOPED_TRACE("H23 requireChain refuses everything but a valid chain");
    c.chain("h23", "r", {"c1"}, 64);
    auto legacy = client::exact("h23", "c1", 64);
    auto malformed = client::chain_request("h23", {"c1", "c2"}, 64);
    malformed.mutable_block_token_counts()->RemoveLast();
    auto toks = client::request("h23");
    for (auto t : tokens(1, 32)) toks.add_token_ids(t);
    auto text = client::request("h23");
    text.set_prompt_text("hello");
    for (const auto& r : {legacy, malformed, toks, text})
      EXPECT_EQ(c.lookup(r).reason_code(), "POLICY_REQUIRES_CHAIN");
    EXPECT_EQ(c.lookup(client::chain_request("h23", {"c1"}, 64)).reason_code(), "PREFIX_MATCH");
  }
  {
    SCOPED_TRACE("H25 chain matching off: the legacy count gates");
    c.legacy("h25", "r", "p", 10);
    auto r = client::exact("h25", "p", 10);
    r.add_block_hashes("x1");
    r.add_block_hashes("x2");
    r.add_block_token_counts(100);
    r.add_block_token_counts(100);
    EXPECT_EQ(c.lookup(r).reason_code(), "NO_HINT");
  }
  {
    SCOPED_TRACE("H26 enableTenantHot false");
    c.warm("h26", "warm", 0.9f);
    EXPECT_EQ(c.lookup(client::exact("h26", "novel", 128)).reason_code(), "NO_HINT");
  }
  {
    SCOPED_TRACE("H27 malformed chain never gets TENANT_HOT");
    c.warm("h27", "warm", 0.9f);
    auto r = client::chain_request("h27", {"x1", "x2"}, 16);
    r.mutable_block_token_counts()->RemoveLast();
    EXPECT_EQ(c.lookup(r).reason_code(), "NO_HINT");
  }
  {
    SCOPED_TRACE("H29 chain nobody holds, affinity off");
    c.warm("h29", "warm", 0.9f);
    EXPECT_EQ(c.lookup(client::chain_request("h29", {"n1", "n2"}, 16)).reason_code(), "NO_HINT");
  }
  {
    SCOPED_TRACE("H30 matched floor 64 with p:16, and its metric");
    c.legacy("h30", "r", "p", 16, 1, "m30");
    auto r = client::exact("h30", "p", 16);
    r.set_model_id("m30");
    EXPECT_EQ(c.lookup(r).reason_code(), "NO_HINT");
    auto metrics = test::http_call(server->http_port(), "GET", "/metrics").body;
    EXPECT_NE(metrics.find("inferencecache_lookup_route_calls_total{hint_used=\"false\",model=\"m30\","
                           "reason_code=\"NO_HINT\"} 1"),
              std::string::npos)
        << metrics;
    EXPECT_EQ(metrics.find("model=\"m30\",reason_code=\"PREFIX_MATCH\""), std::string::npos);
  }
  {
    SCOPED_TRACE("H31 no policy, p:64 passes the default floor");
    c.legacy("h31", "r", "p", 64);
    auto resp = c.lookup(client::exact("h31", "p", 64));
    EXPECT_EQ(resp.reason_code(), "PREFIX_MATCH");
    ASSERT_EQ(resp.replica_scores_size(), 1);
    EXPECT_EQ(resp.replica_scores(0).matched_tokens(), 64);
  }
  {
    SCOPED_TRACE("H32 matched floor 256, affinity off");
    c.legacy("h32", "r", "p", 100);
    EXPECT_EQ(c.lookup(client::exact("h32", "p", 100)).reason_code(), "NO_HINT");
  }
  {
    SCOPED_TRACE("H33 matched floor off, p:1");
    c.legacy("h33", "r", "p", 1);
    auto resp = c.lookup(client::exact("h33", "p", 1));
    EXPECT_EQ(resp.reason_code(), "PREFIX_MATCH");
    ASSERT_EQ(resp.replica_scores_size(), 1);
    EXPECT_EQ(resp.replica_scores(0).matched_tokens(), 1);
  }
  {
    SCOPED_TRACE("H34 the floor prunes the short holder");
    c.chain("h34", "A", {"b1", "b2", "b3", "b4"}, 16);
    c.chain("h34", "B", {"b1"}, 16);
    auto resp = c.lookup(client::chain_request("h34", {"b1", "b2", "b3", "b4"}, 16));
    EXPECT_EQ(resp.reason_code(), "PREFIX_MATCH");
    EXPECT_EQ(replicas_of(resp), std::vector<std::string>{"A"});
    EXPECT_EQ(resp.replica_scores(0).matched_tokens(), 64);
  }
  {
    SCOPED_TRACE("H38 everyone holds it: score 0 < 0.1");
    for (const char* r : {"r0", "r1", "r2"}) c.legacy("h38", r, "rag-corpus-header", 1500);
    EXPECT_EQ(c.lookup(client::exact("h38", "rag-corpus-header", 1500)).reason_code(), "NO_HINT");
  }
  {
    SCOPED_TRACE("H39/H40 distinguishing power and the routing floor");
    for (const char* t : {"h39", "h40"}) {
      c.legacy(t, "r0", "unique", 64);
      c.legacy(t, "r1", "other", 32);
      c.legacy(t, "r2", "other", 32);
    }
    auto h39 = c.lookup(client::exact("h39", "unique", 64));
    EXPECT_EQ(h39.reason_code(), "PREFIX_MATCH");
    EXPECT_EQ(replicas_of(h39), std::vector<std::string>{"r0"});
    EXPECT_NEAR(h39.replica_scores(0).score(), 42.67, 0.1);
    EXPECT_EQ(c.lookup(client::exact("h40", "unique", 64)).reason_code(), "NO_HINT");
  }
  {
    SCOPED_TRACE("H41 routing floor 0 keeps zero scores");
    for (const char* r : {"r0", "r1", "r2"}) c.legacy("h41", r, "chat", 16);
    auto resp = c.lookup(client::exact("h41", "chat", 16));
    EXPECT_EQ(resp.reason_code(), "PREFIX_MATCH");
    EXPECT_EQ(resp.replica_scores_size(), 3);
  }
  {
    SCOPED_TRACE("H42 single solo holder");
    c.legacy("h42", "solo", "p", 64);
    EXPECT_EQ(c.lookup(client::exact("h42", "p", 64)).reason_code(), "PREFIX_MATCH");
  }
  {
    SCOPED_TRACE("H46/H49/H53 token_ids are fingerprinted like the subscriber");
    const auto stored = tokens(1000, 64);
    const auto chain = index::fingerprint_chain(stored.data(), stored.size(), 16);
    v1::CacheStateUpdate u;
    u.set_tenant_id("h46");
    u.set_model_id("m");
    u.set_hash_scheme("vllm");
    u.set_replica_id("r1");
    for (std::size_t i = 0; i < chain.size(); ++i) {
      auto* e = u.add_prefixes();  // one legacy entry per block, cumulative counts
      e->set_prefix_hash(index::to_wire(chain[i]));
      e->set_token_count(static_cast<int>(16 * (i + 1)));
    }
    c.report(u);
    c.legacy("h46", "r2", "elsewhere", 16);  // a second serving replica for affinity
    auto by_tokens = client::request("h46");
    for (auto t : stored) by_tokens.add_token_ids(t);
    auto a = c.lookup(by_tokens);
    EXPECT_EQ(a.reason_code(), "PREFIX_MATCH");
    ASSERT_GE(a.replica_scores_size(), 1);
    EXPECT_EQ(a.replica_scores(0).replica_id(), "r1");
    EXPECT_EQ(a.replica_scores(0).matched_tokens(), 64);
    EXPECT_EQ(a.token_ids_size(), 0);
    std::vector<std::string> wire;
    for (auto h : chain) wire.push_back(index::to_wire(h));
    auto b = c.lookup(client::chain_request("h46", wire, 16));
    EXPECT_EQ(b.reason_code(), "PREFIX_MATCH");
    EXPECT_EQ(b.replica_scores(0).matched_tokens(), 64);
    auto novel = client::request("h46");
    for (auto t : tokens(5000, 64)) novel.add_token_ids(t);
    auto n = c.lookup(novel);
    EXPECT_EQ(n.reason_code(), "AFFINITY_HINT");
    ASSERT_EQ(n.replica_scores_size(), 1);
    EXPECT_EQ(n.replica_scores(0).matched_tokens(), 0);
    auto both = client::chain_request("h46", wire, 16);
    for (auto t : tokens(5000, 64)) both.add_token_ids(t);
    EXPECT_EQ(c.lookup(both).reason_code(), "PREFIX_MATCH");
  }
  {
    SCOPED_TRACE("H47/H51 too few tokens, counts only");
    c.warm("h47", "warm", 0.9f);
    auto few = client::request("h47");
    for (auto t : tokens(1, 8)) few.add_token_ids(t);
    EXPECT_EQ(c.lookup(few).reason_code(), "NO_HINT");
    auto counts_only = client::request("h47");
    counts_only.add_block_token_counts(16);
    counts_only.add_block_token_counts(16);
    EXPECT_EQ(c.lookup(counts_only).reason_code(), "NO_HINT");
  }
  {
    SCOPED_TRACE("H52/H59 oversized input and prompt_text without a tokenizer fail open");
    auto huge = client::request("h52");
    for (std::uint32_t t = 0; t < (1u << 20) + 1; ++t) huge.add_token_ids(t);
    auto resp = c.lookup(huge);
    EXPECT_EQ(resp.reason_code(), "NO_HINT");
    EXPECT_EQ(resp.token_ids_size(), 0);
    auto text = client::request("h52");
    text.set_prompt_text("hello world");
    auto t = c.lookup(text);
    EXPECT_EQ(t.reason_code(), "NO_HINT");
    EXPECT_EQ(t.token_ids_size(), 0);
  }
  EXPECT_EQ(server->terminate(), 0);
  test::remove_tree(dir);
}

// H55: the server fingerprints token_ids with --engine-block-size.
TEST(HandlerScenarios, EngineBlockSizeDecidesHowTokenIdsAreFingerprinted) {
  const auto stored = tokens(1000, 64);
  const auto chain32 = index::fingerprint_chain(stored.data(), stored.size(), 32);
  for (int block : {32, 16}) {
    SCOPED_TRACE(block);
    const std::string dir = test::make_temp_dir("ic_h55");
    auto server = test::server_process::start(
        ic::test::executable("inferencecache-server"),
        {"--grpc-bind-address=127.0.0.1:0", "--http-bind-address=127.0.0.1:0",
         "--snapshot-bind-address=127.0.0.1:0", "--data-dir=" + dir, "--insecure-disable-auth",
         "--engine-block-size=" + std::to_string(block)});
    ASSERT_TRUE(server->wait_ready(30s)) << server->logs();
    client c(*server);
    std::vector<std::string> wire;
    for (auto h : chain32) wire.push_back(index::to_wire(h));
    c.chain("h55", "r1", wire, 32);
    auto req = client::request("h55");
    for (auto t : stored) req.add_token_ids(t);
    auto resp = c.lookup(req);
    if (block == 32) {
      EXPECT_EQ(resp.reason_code(), "PREFIX_MATCH");
    } else {
      EXPECT_NE(resp.reason_code(), "PREFIX_MATCH");
    }
    EXPECT_EQ(server->terminate(), 0);
    test::remove_tree(dir);
  }
}

}  // namespace
}  // namespace ic
