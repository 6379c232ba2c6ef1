// The sender's delivery rules (A16–A18) against a scripted client: retries, refusals,
// soft reasons, permanent errors, splitting, and the resync decision after an outage.
#include "tools/kvevent_subscriber/sender.hpp"

#include <atomic>
#include <deque>
#include <thread>

#include <gtest/gtest.h>

namespace ic::kvevent {
namespace {

using namespace std::chrono_literals;

rpc_outcome ok() { return {}; }
rpc_outcome refused(const char* reason) {
  rpc_outcome o;
  o.accepted = false;
  o.reason = reason;
  return o;
}
rpc_outcome status(int code, const char* name) {
  rpc_outcome o;
  o.code = code;
  o.code_name = name;
  o.accepted = false;
  return o;
}

struct scripted_client : cache_client {
  std::mutex mu;
  std::vector<std::string> calls;  // "add:<ts>:<entries>" / "evict:<fp>" / "clear"
  std::deque<rpc_outcome> script;   // consumed per report/publish; empty = ok
  std::deque<std::optional<server_view>> states;  // consumed per get_state; empty = {1, true}
  std::atomic<int> state_calls{0};  // read by the test thread while the sender probes

  rpc_outcome next() {
    if (script.empty()) return ok();
    rpc_outcome o = script.front();
    script.pop_front();
    return o;
  }
  rpc_outcome report(const op& o) override {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back("add:" + std::to_string(o.ts_us) + ":" + std::to_string(o.entries.size()));
    return next();
  }
  rpc_outcome publish(const op& o) override {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back(o.type == op_type::clear ? "clear" : "evict:" + std::to_string(o.fp));
    return next();
  }
  std::optional<server_view> get_state() override {
    std::lock_guard<std::mutex> lock(mu);
    ++state_calls;
    if (states.empty()) return server_view{1, true};
    auto s = states.front();
    states.pop_front();
    return s;
  }
  std::vector<std::string> snapshot() {
    std::lock_guard<std::mutex> lock(mu);
    return calls;
  }
};

op add(std::int64_t ts, std::size_t n) {
  op o;
  o.ts_us = ts;
  for (std::size_t i = 0; i < n; ++i) o.entries.push_back({i + 1, 16, 0, tier::t1});
  return o;
}
op evict(std::uint64_t fp) {
  op o;
  o.type = op_type::evict;
  o.fp = fp;
  return o;
}

struct fixture {
  explicit fixture(resync_policy p = resync_policy::never) : metrics(1) {
    so.initial_backoff_ms = 1;
    so.idle_probe_ms = 0;  // off unless a test turns it on
    so.max_backoff_ms = 2;
    so.resync = p;
    snd = std::make_unique<sender>(
        so, log, client,
        [this](resync_reason r) {
          resyncs.push_back(r);
          std::vector<op> v;
          v.emplace_back();
          v.back().type = op_type::clear;
          log.replace(std::move(v));
        },
        metrics, rpcs, nullptr, [] {
          return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
        });
  }
  ~fixture() {
    if (thread.joinable()) {
      snd->abort();
      thread.join();
    }
  }
  void run() { thread = std::thread([this] { snd->run(); }); }
  // Waits (bounded) until the client saw `n` calls.
  bool calls_reach(std::size_t n) {
    for (int i = 0; i < 2000; ++i) {
      if (client.snapshot().size() >= n) return true;
      std::this_thread::sleep_for(1ms);
    }
    return false;
  }
  void drain() {
    snd->drain_until(0);
    thread.join();
  }

  sender_options so;
  op_log log{1000};
  scripted_client client;
  core_metrics metrics;
  rpc_metrics rpcs;
  std::vector<resync_reason> resyncs;
  std::unique_ptr<sender> snd;
  std::thread thread;
};

// 60: accepted=false is retried with the same CSU; nothing after it goes out first.
TEST(Sender, S60RefusalsAreRetriedInOrder) {
  fixture f;
  f.client.script = {refused("JOURNAL_UNAVAILABLE"), refused("SHUTTING_DOWN")};
  f.log.push(add(7, 3));
  f.log.push(evict(9));
  f.run();
  ASSERT_TRUE(f.calls_reach(4));
  f.drain();
  EXPECT_EQ(f.client.snapshot(), (std::vector<std::string>{"add:7:3", "add:7:3", "add:7:3", "evict:9"}));
  EXPECT_EQ(f.rpcs.count("ReportCacheState", "not_accepted"), 2u);
}

// 61: an accepted Ack with a reason is final and counted.
TEST(Sender, S61SoftReasonIsNotRetried) {
  fixture f;
  rpc_outcome soft;
  soft.reason = "DROPPED_EMPTY_HASH_SCHEME";
  f.client.script = {soft};
  f.log.push(add(1, 1));
  f.log.push(evict(2));
  f.run();
  ASSERT_TRUE(f.calls_reach(2));
  f.drain();
  EXPECT_EQ(f.client.snapshot(), (std::vector<std::string>{"add:1:1", "evict:2"}));
  EXPECT_EQ(f.rpcs.ack_reasons().at("DROPPED_EMPTY_HASH_SCHEME"), 1u);
}

// 57: INTERNAL forever: retried, counted, never a crash or a skipped operation.
TEST(Sender, S57FailingServerIsRetried) {
  fixture f;
  for (int i = 0; i < 5; ++i) f.client.script.push_back(status(13, "INTERNAL"));
  f.log.push(add(1, 1));
  f.run();
  ASSERT_TRUE(f.calls_reach(6));
  f.drain();
  EXPECT_EQ(f.rpcs.count("ReportCacheState", "INTERNAL"), 5u);
  EXPECT_EQ(f.rpcs.count("ReportCacheState", "ok"), 1u);
}

// Permanent errors are dropped; RESOURCE_EXHAUSTED splits a CSU in half, first half first.
TEST(Sender, PermanentErrorsDropAndLargeCsusSplit) {
  fixture f;
  f.client.script = {status(3, "INVALID_ARGUMENT"), status(8, "RESOURCE_EXHAUSTED")};
  f.log.push(evict(1));
  f.log.push(add(5, 4));
  f.run();
  ASSERT_TRUE(f.calls_reach(4));
  f.drain();
  EXPECT_EQ(f.client.snapshot(), (std::vector<std::string>{"evict:1", "add:5:4", "add:5:2", "add:5:2"}));
  EXPECT_EQ(f.rpcs.dropped(), 1u);
}

// 58, 64: after a transport failure the server is probed first; auto resyncs only when the
// server lost its state, never keeps the retried log.
TEST(Sender, S64AutoResyncWhenTheServerCameBackEmpty) {
  fixture f(resync_policy::automatic);
  f.metrics.reported_keys = 5;
  f.client.script = {status(14, "UNAVAILABLE")};
  f.client.states = {std::nullopt, server_view{0, false}};
  f.log.push(add(1, 5));
  f.run();
  ASSERT_TRUE(f.calls_reach(2));
  f.drain();
  ASSERT_EQ(f.resyncs.size(), 1u);
  EXPECT_EQ(f.resyncs[0], resync_reason::outage);
  EXPECT_EQ(f.client.snapshot(), (std::vector<std::string>{"add:1:5", "clear"}));  // the resync replaced it
}

TEST(Sender, S58NeverResyncRetriesTheLogInOrder) {
  fixture f(resync_policy::never);
  f.client.script = {status(14, "UNAVAILABLE"), status(14, "UNAVAILABLE")};
  f.client.states = {std::nullopt, server_view{0, false}};
  f.log.push(add(1, 8));
  f.log.push(evict(7));
  f.run();
  ASSERT_TRUE(f.calls_reach(4));
  f.drain();
  EXPECT_TRUE(f.resyncs.empty());
  EXPECT_EQ(f.client.snapshot(), (std::vector<std::string>{"add:1:8", "add:1:8", "add:1:8", "evict:7"}));
}

TEST(Sender, AutoKeepsTheLogWhenTheServerKeptItsState) {
  fixture f(resync_policy::automatic);
  f.metrics.reported_keys = 5;
  f.client.script = {status(14, "UNAVAILABLE")};
  f.client.states = {server_view{5, true}};
  f.log.push(add(1, 5));
  f.run();
  ASSERT_TRUE(f.calls_reach(2));
  f.drain();
  EXPECT_TRUE(f.resyncs.empty());
  EXPECT_EQ(f.client.snapshot(), (std::vector<std::string>{"add:1:5", "add:1:5"}));
}

// An idle subscriber notices a server that lost its state between two probes (no call failed).
TEST(Sender, IdleProbeNoticesAServerThatLostItsState) {
  fixture f(resync_policy::automatic);
  f.so.idle_probe_ms = 1;
  f.snd = std::make_unique<sender>(
      f.so, f.log, f.client,
      [&](resync_reason r) {
        f.resyncs.push_back(r);
        f.log.replace({});
      },
      f.metrics, f.rpcs, nullptr, [] {
        return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
      });
  f.metrics.reported_keys = 3;
  f.client.states = {server_view{3, true}, server_view{0, false}};  // restarted between two probes
  f.run();
  for (int i = 0; i < 2000 && f.client.state_calls < 3; ++i) std::this_thread::sleep_for(1ms);
  f.drain();
  ASSERT_GE(f.resyncs.size(), 1u);
  EXPECT_EQ(f.resyncs[0], resync_reason::outage);
}

// 59: after an overflow the sender asks for a resync once the server answers.
TEST(Sender, OverflowLeadsToResyncOnceReachable) {
  fixture f;
  f.log.overflow();
  f.run();
  ASSERT_TRUE(f.calls_reach(1));
  f.drain();
  ASSERT_EQ(f.resyncs.size(), 1u);
  EXPECT_EQ(f.resyncs[0], resync_reason::overflow);
  EXPECT_EQ(f.client.snapshot(), (std::vector<std::string>{"clear"}));
}

}  // namespace
}  // namespace ic::kvevent
