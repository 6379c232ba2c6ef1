// End to end: fake engine (ZMQ PUB + ROUTER, in this process) → the real subscriber binary
// → the real server binary over gRPC → LookupRoute as a gateway asks it (token_ids, so the
// server fingerprints on its own). Every process is started on free loopback ports and
// stopped by its PID; each test is bounded to a few seconds.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <poll.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "server/tls_test_support.hpp"
#include "tests/support/http_client.hpp"
#include "tests/support/server_process.hpp"
#include "tests/support/test_paths.hpp"
#include "tools/kvevent_subscriber/fake_engine.hpp"

namespace ic::kvevent {
namespace {

using namespace std::chrono_literals;
using namespace fake;
namespace v1 = inferencecache::v1alpha1;

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// A listening socket that accepts and never answers: a hung server (gRPC calls only time out).
struct hung_server {
  int fd = -1;
  int port = 0;
  hung_server() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd, 64);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~hung_server() { ::close(fd); }
};

// A one-route HTTP server that answers every request with `body` (an engine's /metrics).
struct metrics_endpoint {
  int fd = -1;
  int port = 0;
  std::string body;
  std::atomic<bool> stop{false};
  std::thread t;
  explicit metrics_endpoint(std::string b) : body(std::move(b)) {
    hung_server s;  // reuse the listener setup
    fd = s.fd;
    port = s.port;
    s.fd = ::socket(AF_INET, SOCK_STREAM, 0);  // the guard closes a spare socket instead
    t = std::thread([this] {
      while (!stop) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 20) <= 0) continue;
        int c = ::accept(fd, nullptr, nullptr);
        if (c < 0) continue;
        char buf[4096];
        (void)::read(c, buf, sizeof buf);
        std::string r = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
        (void)::write(c, r.data(), r.size());
        ::close(c);
      }
    });
  }
  ~metrics_endpoint() {
    stop = true;
    t.join();
    ::close(fd);
  }
};

bool eventually(const std::function<bool()>& f, std::chrono::milliseconds limit = 5s) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (f()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return f();
}

// Batch timestamps are the engine's wall clock: the real server ages entries by them.
double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::uint64_t E(int i) { return 0xE000ull + static_cast<std::uint64_t>(i); }

class Subscriber : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::make_temp_dir("ic_kvsub"); }
  void TearDown() override {
    sub_.reset();
    server_.reset();
    test::remove_tree(dir_);
  }

  void start_server(const std::string& data = "data", std::vector<std::string> extra = {},
                    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials()) {
    // The first server binds port 0 and the test learns the port from its startup line (a
    // port picked by free_port() could be taken before the server binds it); a restart binds
    // the same port again, where the subscriber reconnects.
    std::vector<std::string> args = {"--grpc-bind-address=127.0.0.1:" + std::to_string(grpc_port_),
                                     "--http-bind-address=127.0.0.1:0", "--snapshot-bind-address=127.0.0.1:0",
                                     "--data-dir=" + dir_ + "/" + data, "--insecure-disable-auth"};
    args.insert(args.end(), extra.begin(), extra.end());
    server_ = test::server_process::start(ic::test::executable("inferencecache-server"), args);
    ASSERT_NE(server_, nullptr);
    ASSERT_TRUE(server_->wait_ready(30s)) << server_->logs();
    if (grpc_port_ == 0) grpc_port_ = server_->grpc_port();
    ASSERT_GT(grpc_port_, 0) << server_->logs();
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port_), creds);
    stub_ = v1::InferenceCache::NewStub(channel_);
  }

  void start_subscriber(
      const std::string& pub, std::vector<std::string> extra = {},
      const char* binary = ic::test::executable("inferencecache-kvevent-subscriber")) {
    // Port 0, and the port from the subscriber's startup line: a port picked by free_port()
    // could be taken before the subscriber binds it (as the server's, above).
    std::vector<std::string> args = {"--engine-endpoint=" + pub,
                                     "--server=127.0.0.1:" + std::to_string(grpc_port_),
                                     "--replica-id=r0", "--model-id=m", "--tenant-id=t", "--hash-scheme=vllm",
                                     "--window=10ms", "--refresh-interval=0", "--stats-interval=1h",
                                     "--retry-initial-backoff=20ms", "--retry-max-backoff=200ms",
                                     "--http-bind-address=127.0.0.1:0",
                                     "--log-level=debug"};
    args.insert(args.end(), extra.begin(), extra.end());
    sub_ = test::server_process::start(binary, args);
    ASSERT_NE(sub_, nullptr);
    ASSERT_TRUE(sub_->wait_for_log("subscribed to engine KV events", 10s)) << sub_->logs();
    const std::string key = "\"http_port\":\"";  // in the startup line, logged after that
    ASSERT_TRUE(sub_->wait_for_log(key, 10s)) << sub_->logs();
    const std::string logs = sub_->logs();
    const auto at = logs.find(key);
    http_port_ = at == std::string::npos ? 0 : std::atoi(logs.c_str() + at + key.size());
    ASSERT_GT(http_port_, 0) << "no http_port in the startup line\n" << logs;
  }

  // LookupRoute as a gateway sends it: the prompt's token ids; the server fingerprints.
  v1::LookupRouteResponse lookup(std::uint32_t first, std::size_t n) {
    v1::LookupRouteRequest req;
    req.set_model_id("m");
    req.set_tenant_id("t");
    req.set_hash_scheme("vllm");
    for (std::size_t i = 0; i < n; ++i) req.add_token_ids(first + static_cast<std::uint32_t>(i));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 2s);
    v1::LookupRouteResponse resp;
    if (!stub_) {  // no server started: fail the check instead of crashing the test process
      ADD_FAILURE() << "lookup without a started server";
      return resp;
    }
    grpc::Status st = stub_->LookupRoute(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp;
  }
  int matched(std::uint32_t first, std::size_t n) {
    auto r = lookup(first, n);
    if (r.reason_code() != "PREFIX_MATCH") return 0;
    for (const auto& s : r.replica_scores())
      if (s.replica_id() == "r0") return s.matched_tokens();
    return 0;
  }
  // Server on `data`, subscriber on `eng`, and E0..E3 (tokens 0..63) indexed and matched.
  void start_with_indexed_prefix(engine& eng, const std::string& data) {
    ASSERT_NO_FATAL_FAILURE(start_server(data));
    ASSERT_NO_FATAL_FAILURE(start_subscriber(eng.pub_endpoint()));
    ASSERT_TRUE(eng.wait_for_subscriber(5000));
    eng.publish(encode(batch(now_s(), {stored({E(0), E(1), E(2), E(3)}, nil(), tokens(0, 64), 16)})));
    ASSERT_TRUE(eventually([&] { return matched(0, 64) == 64; })) << sub_->logs();
  }
  std::string metrics() { return test::http_call(http_port_, "GET", "/metrics").body; }
  bool metric_is(const std::string& series, const std::string& value) {
    return metrics().find(series + " " + value + "\n") != std::string::npos;
  }

  std::string dir_;
  int grpc_port_ = 0;
  int http_port_ = 0;
  std::unique_ptr<test::server_process> server_, sub_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::InferenceCache::Stub> stub_;
};

// Scenarios 18, 25, 27, 75: events in → PREFIX_MATCH; evictions lower it; a clear removes it.
TEST_F(Subscriber, EventsBecomePrefixMatchesForTheGateway) {
  ASSERT_NO_FATAL_FAILURE(start_server());
  engine eng(options{});
  ASSERT_NO_FATAL_FAILURE(start_subscriber(eng.pub_endpoint()));
  EXPECT_TRUE(eventually([&] { return test::http_call(http_port_, "GET", "/readyz").status == 200; }));
  EXPECT_TRUE(eventually([&] { return test::http_call(http_port_, "GET", "/healthz").status == 200; }));
  ASSERT_TRUE(eng.wait_for_subscriber(5000));
  eng.publish(encode(batch(now_s(), {stored({E(0), E(1), E(2)}, nil(), tokens(0, 48), 16)})));
  eng.publish(encode(batch(now_s(), {stored({E(3), E(4), E(5), E(6), E(7)}, mv(E(2)), tokens(48, 80), 16)})));
  ASSERT_TRUE(eventually([&] { return matched(0, 128) == 128; })) << sub_->logs();
  EXPECT_NE(lookup(5000, 64).reason_code(), "PREFIX_MATCH");  // a new prompt
  eng.publish(encode(batch(now_s(), {removed({E(6), E(7)})})));
  EXPECT_TRUE(eventually([&] { return matched(0, 128) == 96; })) << sub_->logs();
  EXPECT_TRUE(metric_is("inferencecache_adapter_events_total{type=\"BlockStored\",medium=\"GPU\"}", "2"));
  EXPECT_TRUE(metric_is("inferencecache_adapter_zmq_messages_total{source=\"0\"}", "3"));
  eng.publish(encode(batch(now_s(), {cleared()})));
  EXPECT_TRUE(eventually([&] { return matched(0, 128) == 0; })) << sub_->logs();
  EXPECT_EQ(sub_->terminate(), 0);
}

// The server dies mid-stream and comes back empty: nothing acknowledged is lost, the
// subscriber resyncs (auto) and the stores made during the outage arrive too.
TEST_F(Subscriber, ServerRestartMidStreamResyncs) {
  engine eng(options{});
  ASSERT_NO_FATAL_FAILURE(start_with_indexed_prefix(eng, "data-a"));
  ::kill(server_->pid(), SIGKILL);
  server_->wait_exit(5s);
  eng.publish(encode(batch(now_s(), {stored({E(4), E(5)}, mv(E(3)), tokens(64, 32), 16)})));
  eng.publish(encode(batch(now_s(), {stored({0xF000, 0xF001, 0xF002, 0xF003}, nil(), tokens(1000, 64), 16)})));
  std::this_thread::sleep_for(300ms);  // let the subscriber meet the outage (retries, not a condition)
  ASSERT_NO_FATAL_FAILURE(start_server("data-b"));              // a fresh, empty server on the same port
  EXPECT_TRUE(eventually([&] { return matched(0, 96) == 96 && matched(1000, 64) == 64; }, 8s)) << sub_->logs();
  EXPECT_TRUE(metric_is("inferencecache_adapter_resyncs_total{reason=\"outage\"}", "1")) << metrics();
  EXPECT_EQ(sub_->terminate(), 0);
}

// An idle subscriber (the engine sends nothing new) still notices that the server came back
// empty, through its idle probe, and resyncs.
TEST_F(Subscriber, IdleSubscriberResyncsAServerThatCameBackEmpty) {
  engine eng(options{});
  ASSERT_NO_FATAL_FAILURE(start_with_indexed_prefix(eng, "data-a"));
  EXPECT_EQ(server_->terminate(), 0);
  ASSERT_NO_FATAL_FAILURE(start_server("data-b"));
  EXPECT_TRUE(eventually([&] { return matched(0, 64) == 64; }, 12s)) << sub_->logs();
  EXPECT_TRUE(metric_is("inferencecache_adapter_resyncs_total{reason=\"outage\"}", "1")) << metrics();
  EXPECT_EQ(sub_->terminate(), 0);
}

// The same outage against a server that recovers its journal: no resync, only the retried log.
TEST_F(Subscriber, ServerRestartWithJournalNeedsNoResync) {
  engine eng(options{});
  ASSERT_NO_FATAL_FAILURE(start_with_indexed_prefix(eng, "data-a"));
  ::kill(server_->pid(), SIGKILL);
  server_->wait_exit(5s);
  eng.publish(encode(batch(now_s(), {stored({E(4)}, mv(E(3)), tokens(64, 16), 16)})));
  std::this_thread::sleep_for(300ms);
  ASSERT_NO_FATAL_FAILURE(start_server("data-a"));  // the journal brings the acknowledged state back
  EXPECT_TRUE(eventually([&] { return matched(0, 80) == 80; }, 8s)) << sub_->logs();
  EXPECT_TRUE(metric_is("inferencecache_adapter_resyncs_total{reason=\"outage\"}", "0")) << metrics();
  EXPECT_EQ(sub_->terminate(), 0);
}

// A publisher that restarts (sequence back to 0): the old incarnation's keys are cleared.
TEST_F(Subscriber, PublisherRestartClearsTheOldIncarnation) {
  ASSERT_NO_FATAL_FAILURE(start_server());
  engine eng(options{});
  ASSERT_NO_FATAL_FAILURE(start_subscriber(eng.pub_endpoint()));
  ASSERT_TRUE(eng.wait_for_subscriber(5000));
  // Lookups need 64 matched tokens (the server's default minimumMatchedTokens): 4 blocks.
  for (std::uint64_t i = 0; i < 4; ++i) {
    eng.publish(encode(batch(now_s(), {stored({0x100 + 4 * i, 0x101 + 4 * i, 0x102 + 4 * i, 0x103 + 4 * i}, nil(),
                                             tokens(static_cast<std::uint32_t>(i * 64), 64), 16)})));
  }
  ASSERT_TRUE(eventually([&] { return matched(192, 64) == 64; })) << sub_->logs();
  eng.restart();
  eng.publish(encode(batch(now_s(), {stored({0x900, 0x901, 0x902, 0x903}, nil(), tokens(5000, 64), 16)})));
  EXPECT_TRUE(eventually([&] { return matched(5000, 64) == 64 && matched(0, 64) == 0 && matched(192, 64) == 0; }))
      << sub_->logs();
  EXPECT_TRUE(metric_is("inferencecache_adapter_engine_restarts_total{source=\"0\"}", "1"));
  EXPECT_EQ(sub_->terminate(), 0);
}

// Scenario 52: live 0–2 and 10, 3–9 only in the ring; the first replay round loses 5–7 and
// its END; the subscriber times out, asks again from 5 and ends with the whole chain.
TEST_F(Subscriber, LossyReplayIsCompletedByReRequests) {
  ASSERT_NO_FATAL_FAILURE(start_server());
  options o;
  o.router_bind = "tcp://127.0.0.1:*";
  o.new_layout = true;  // vLLM >= 0.26 replies: [id, "", topic, seq, payload]
  engine eng(o);
  ASSERT_NO_FATAL_FAILURE(start_subscriber(eng.pub_endpoint(), {"--replay-endpoint=" + eng.router_endpoint(), "--replay-timeout=300ms",
                                        "--startup-replay=false"}));
  ASSERT_TRUE(eng.wait_for_subscriber(5000));
  mv parent = nil();
  for (int q = 0; q <= 10; ++q) {
    std::string p = encode(batch(now_s(), {stored({E(q)}, parent, tokens(static_cast<std::uint32_t>(q * 16), 16), 16)}));
    parent = mv(E(q));
    if (q <= 2 || q == 10) {
      if (q == 10) eng.fault_next_round({5, 6, 7}, true);
      eng.publish(p);
    } else {
      eng.ring_only(p);
    }
  }
  EXPECT_TRUE(eventually([&] { return matched(0, 176) == 176; }, 8s)) << sub_->logs();
  auto reqs = eng.replay_requests();
  ASSERT_GE(reqs.size(), 2u);
  EXPECT_EQ(reqs[0], 3u);
  EXPECT_EQ(reqs[1], 5u);
  EXPECT_TRUE(metric_is("inferencecache_adapter_seq_gaps_total{source=\"0\"}", "1"));
  EXPECT_EQ(sub_->terminate(), 0);
}

// Scenario 45: SIGTERM drains the pending adds (window 1h) before exiting 0.
TEST_F(Subscriber, ShutdownDrainsPendingAdds) {
  ASSERT_NO_FATAL_FAILURE(start_server());
  engine eng(options{});
  ASSERT_NO_FATAL_FAILURE(start_subscriber(eng.pub_endpoint(), {"--window=1h"}));
  ASSERT_TRUE(eng.wait_for_subscriber(5000));
  eng.publish(encode(batch(now_s(), {stored({E(0), E(1), E(2), E(3)}, nil(), tokens(0, 64), 16)})));
  ASSERT_TRUE(eventually([&] { return metric_is("inferencecache_adapter_events_total{type=\"BlockStored\",medium=\"GPU\"}", "1"); }));
  EXPECT_EQ(matched(0, 64), 0);  // still pending in the window
  EXPECT_EQ(sub_->terminate(15, 5s), 0);
  EXPECT_EQ(matched(0, 64), 64);
}

// Scenario 74: the engine comes up after the subscriber; libzmq reconnects by itself.
TEST_F(Subscriber, EngineComingUpLateIsPickedUp) {
  ASSERT_NO_FATAL_FAILURE(start_server());
  int port = free_port();
  ASSERT_NO_FATAL_FAILURE(start_subscriber("tcp://127.0.0.1:" + std::to_string(port)));
  std::this_thread::sleep_for(300ms);  // the subscriber is up with nothing to connect to
  options o;
  o.pub_bind = "tcp://127.0.0.1:" + std::to_string(port);
  engine eng(o);
  ASSERT_TRUE(eng.wait_for_subscriber(5000));
  eng.publish(encode(batch(now_s(), {stored({E(0), E(1), E(2), E(3)}, nil(), tokens(0, 64), 16)})));
  EXPECT_TRUE(eventually([&] { return matched(0, 64) == 64; })) << sub_->logs();
  EXPECT_EQ(sub_->terminate(), 0);
}

// Scenario 62: a server that never answers does not hold up ingestion.
TEST_F(Subscriber, HungServerDoesNotBlockIngestion) {
  hung_server hung;
  grpc_port_ = hung.port;
  engine eng(options{});
  ASSERT_NO_FATAL_FAILURE(start_subscriber(eng.pub_endpoint(), {"--rpc-timeout=200ms"}));
  ASSERT_TRUE(eng.wait_for_subscriber(5000));
  for (std::uint64_t i = 0; i < 10000; ++i) {
    eng.publish(encode(batch(now_s(), {stored({0x10000 + i}, nil(), tokens(static_cast<std::uint32_t>(i * 16), 16), 16)})));
  }
  EXPECT_TRUE(eventually([&] { return metric_is("inferencecache_adapter_zmq_messages_total{source=\"0\"}", "10000"); }, 10s))
      << metrics();
  EXPECT_TRUE(metric_is("inferencecache_adapter_seq_gaps_total{source=\"0\"}", "0"));
  // The RPCs fail (deadline or handshake: UNAVAILABLE) and are retried; none succeeds.
  EXPECT_TRUE(eventually([&] {
    std::string m = metrics();
    return m.find("inferencecache_adapter_rpc_total{") != std::string::npos &&
           m.find("rpc_total{rpc=\"PublishEvent\",result=\"ok\"}") == std::string::npos &&
           m.find("rpc_total{rpc=\"ReportCacheState\",result=\"ok\"}") == std::string::npos;
  })) << metrics();
  EXPECT_EQ(test::http_call(http_port_, "GET", "/healthz").status, 200);
  EXPECT_EQ(sub_->terminate(15, 10s), 0);
}

// Scenario 65 end to end: the engine's /metrics become the replica's stats row on the server.
TEST_F(Subscriber, EngineStatsReachTheServer) {
  ASSERT_NO_FATAL_FAILURE(start_server());
  metrics_endpoint m(
      "vllm:kv_cache_usage_perc{model_name=\"m\"} 0.42\nvllm:num_requests_running 2\nvllm:num_requests_waiting 0\n"
      "vllm:prefix_cache_hits_total 10\nvllm:prefix_cache_queries_total 20\n");
  engine eng(options{});
  ASSERT_NO_FATAL_FAILURE(start_subscriber(eng.pub_endpoint(), {"--stats-interval=100ms", "--engine-cache-size-bytes=1073741824",
                                        "--max-concurrency-ceiling=8", "--client-version=lmcache==0.5.3",
                                        "--engine-metrics-url=http://127.0.0.1:" + std::to_string(m.port) + "/metrics"}));
  v1::GetCacheStateResponse resp;
  EXPECT_TRUE(eventually([&] {
    v1::GetCacheStateRequest req;
    req.set_model_id("m");
    req.set_tenant_id("t");
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 2s);
    resp.Clear();
    if (!stub_->GetCacheState(&ctx, req, &resp).ok()) return false;
    for (const auto& r : resp.replicas())
      if (r.replica_id() == "r0" && r.cache_memory_bytes() == 450971566) return true;
    return false;
  })) << resp.DebugString() << sub_->logs();
  for (const auto& r : resp.replicas()) {
    if (r.replica_id() != "r0") continue;
    EXPECT_FLOAT_EQ(r.pressure(), 0.25f);
  }
  EXPECT_TRUE(metric_is("inferencecache_adapter_load_signal_stale", "0"));
  EXPECT_EQ(sub_->terminate(), 0);
}

// Scenario 76: two DP ranks on P and P+1; a key is evicted only when neither rank holds it.
TEST_F(Subscriber, DataParallelRanksShareOneReplica) {
  ASSERT_NO_FATAL_FAILURE(start_server());
  int p = 0;
  for (int attempt = 0; attempt < 20 && p == 0; ++attempt) {
    int c = free_port();
    try {
      options probe;
      probe.pub_bind = "tcp://127.0.0.1:" + std::to_string(c + 1);
      engine e(probe);
      p = c;
    } catch (...) {
    }
  }
  ASSERT_NE(p, 0);
  options o0, o1;
  o0.pub_bind = "tcp://127.0.0.1:" + std::to_string(p);
  o1.pub_bind = "tcp://127.0.0.1:" + std::to_string(p + 1);
  engine rank0(o0), rank1(o1);
  ASSERT_NO_FATAL_FAILURE(start_subscriber("tcp://127.0.0.1:" + std::to_string(p), {"--dp-size=2"}));
  ASSERT_TRUE(rank0.wait_for_subscriber(5000));
  ASSERT_TRUE(rank1.wait_for_subscriber(5000));
  std::string store = encode(batch(now_s(), {stored({E(0), E(1), E(2), E(3)}, nil(), tokens(0, 64), 16)}, mv(0)));
  rank0.publish(store);
  rank1.publish(store);
  ASSERT_TRUE(eventually([&] { return matched(0, 64) == 64; })) << sub_->logs();
  rank0.publish(encode(batch(now_s(), {removed({E(0)})})));
  EXPECT_TRUE(eventually([&] { return metric_is("inferencecache_adapter_zmq_messages_total{source=\"0\"}", "2"); }));
  EXPECT_EQ(matched(0, 64), 64);  // rank 1 still holds it
  rank1.publish(encode(batch(now_s(), {removed({E(0)})})));
  EXPECT_TRUE(eventually([&] { return matched(0, 64) == 0; })) << sub_->logs();
  EXPECT_EQ(sub_->terminate(), 0);
}

// TLS to the server: --server-tls-ca-file verifies the server's certificate.
TEST_F(Subscriber, ReportsOverTls) {
  namespace tls = ic::server::testing;
  if (!tls::have_openssl()) GTEST_SKIP() << "the openssl tool is not installed";
  ASSERT_TRUE(tls::make_ca(dir_, "ca1"));
  ASSERT_TRUE(tls::make_server_cert(dir_, "ca1", "server1"));
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = tls::read_text(dir_ + "/ca1.crt");
  ASSERT_NO_FATAL_FAILURE(start_server("data", {"--tls-cert-file=" + dir_ + "/server1.crt", "--tls-key-file=" + dir_ + "/server1.key"},
               grpc::SslCredentials(ssl)));
  engine eng(options{});
  ASSERT_NO_FATAL_FAILURE(start_subscriber(eng.pub_endpoint(), {"--server-tls-ca-file=" + dir_ + "/ca1.crt"}));
  ASSERT_TRUE(eng.wait_for_subscriber(5000));
  eng.publish(encode(batch(now_s(), {stored({E(0), E(1), E(2), E(3)}, nil(), tokens(0, 64), 16)})));
  EXPECT_TRUE(eventually([&] { return matched(0, 64) == 64; })) << sub_->logs();
  EXPECT_EQ(sub_->terminate(), 0);
}

// Scenario 75: /healthz and /readyz answer 200 while the server is unreachable; a stalled
// core thread (test hook) turns /healthz to 503 within 5 s.
TEST_F(Subscriber, HealthzFollowsTheCoreThreadNotTheServer) {
  grpc_port_ = free_port();  // nothing listens there
  engine eng(options{});
  ASSERT_NO_FATAL_FAILURE(start_subscriber(
      eng.pub_endpoint(), {}, ic::test::executable("inferencecache-kvevent-subscriber-testhooks")));
  EXPECT_TRUE(eventually([&] { return test::http_call(http_port_, "GET", "/healthz").status == 200; }));
  EXPECT_EQ(test::http_call(http_port_, "GET", "/readyz").status, 200);
  ::kill(sub_->pid(), SIGUSR2);
  EXPECT_TRUE(eventually([&] { return test::http_call(http_port_, "GET", "/healthz").status == 503; }, 8s));
  EXPECT_EQ(test::http_call(http_port_, "GET", "/readyz").status, 200);
}

// Scenario 73: configuration errors exit 2 with one line, before any socket is opened.
TEST(SubscriberFlags, InvalidConfigurationExitsTwoWithOneLine) {
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"--model-id=m"}, {"--replica-id=r"}, {"--replica-id=r", "--model-id=m", "--hash-scheme="},
           {"--replica-id=r", "--model-id=m", "--cache-tier=xyz"}, {"--replica-id=r", "--model-id=m", "--dp-size=0"},
           {"--replica-id=r", "--model-id=m", "--lora-adapter-names=1=a,1=b"}, {"--replica-id=r", "--model-id=m", "--nope"}}) {
    auto [code, out] =
        test::run_to_exit(ic::test::executable("inferencecache-kvevent-subscriber"), args, 10s);
    EXPECT_EQ(code, 2) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  }
}

}  // namespace
}  // namespace ic::kvevent
