// N server replicas on one JetStream journal (issue #15, spec/scaleout.md §3): a real
// nats-server (JetStream, own store dir in a temp dir, free loopback port, stopped by PID:
// journal/jetstream/nats_fixture) and two real servers with --journal=jetstream
// --nats-replicas=1. Skipped when nats-server is not installed.
#include <cmath>
#include <csignal>
#include <fstream>
#include <map>
#include <future>
#include <iostream>
#include <thread>

#include <gtest/gtest.h>

#include "journal/jetstream/jetstream_log.hpp"
#include "journal/jetstream/shared_snapshot.hpp"
#include "proto/record_codec.hpp"
#include "tests/jetstream_support.hpp"
#include "tests/support/chain_requests.hpp"
#include "tests/support/http_client.hpp"
#include "tests/support/test_paths.hpp"

namespace ic {
namespace {

using namespace std::chrono_literals;
namespace v1 = inferencecache::v1alpha1;
using steady = std::chrono::steady_clock;
using test::converges;
using test::journal_position;
using test::lookup;
using test::metric_value;
using test::report;
using test::stub;

/// The value of the unlabeled series `name` on the server on `http_port` (-1: absent).
double metric(int http_port, const std::string& name) {
  auto m = test::http_call(http_port, "GET", "/metrics");
  const std::string key = "\n" + name + " ";
  auto at = m.body.find(key);
  return at == std::string::npos ? -1 : std::atof(m.body.c_str() + at + key.size());
}

/// Polls `pred` every 20 ms until it holds or `bound` passed; returns its last value.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds bound) {
  const auto deadline = steady::now() + bound;
  while (!pred() && steady::now() < deadline) std::this_thread::sleep_for(20ms);
  return pred();
}

/// Short shared-snapshot cadence for tests; no periodic sweeps (the stream stays still
/// once ingest stops, so /snapshot bodies can be compared).
const std::vector<std::string> kSharedFlags = {"--shared-snapshot-interval=1s",
                                               "--snapshot-interval=1s", "--sweep-interval=24h"};

std::string policy_body(const std::string& ns, const std::string& eviction = "lru") {
  return R"({"version":7,"policies":[{"namespace":")" + ns + R"(","eviction":")" + eviction +
         R"("}],"tenants":[]})";
}

/// Polls until GET /policy answers the same on both servers (bounded); returns that body.
std::string converged_policy(const test::server_process& a, const test::server_process& b,
                             std::chrono::milliseconds bound) {
  const auto deadline = steady::now() + bound;
  while (steady::now() < deadline) {
    auto pa = test::http_call(a.snapshot_port(), "GET", "/policy");
    auto pb = test::http_call(b.snapshot_port(), "GET", "/policy");
    if (pa.status == 200 && pa.body == pb.body) return pa.body;
    std::this_thread::sleep_for(10ms);
  }
  return "(no convergence)";
}

// One NATS node (--nats-replicas=1); tests/jetstream_support.hpp starts and stops it all.
class JetStreamReplicas : public test::replicas_fixture {};

// Ingest on A: A's Ack means applied on A (read-your-writes), and B converges.
// Both start-up sweeps fall in one 24 h slot: the stream keeps one (Msg-Id sweep.<slot>).
TEST_F(JetStreamReplicas, IngestOnOneReplicaIsServedByTheOther) {
  a_ = start(dir_a_, "ra", {"--sweep-interval=24h"});
  b_ = start(dir_b_, "rb", {"--sweep-interval=24h"});
  ASSERT_TRUE(a_ && b_);
  std::this_thread::sleep_for(300ms);  // both start-up sweeps published
  auto sa = stub(*a_), sb = stub(*b_);
  for (int i = 0; i < 20; ++i) {
    const std::string blk = "k" + std::to_string(i);
    auto ack = report(*sa, "gpu-a", {blk + "x", blk + "y"});
    ASSERT_TRUE(ack.accepted()) << ack.reason_code() << a_->logs();
    auto here = lookup(*sa, {blk + "x", blk + "y"});  // no poll: applied before the Ack
    ASSERT_EQ(here.reason_code(), "PREFIX_MATCH") << i;
  }
  EXPECT_TRUE(converges(*sb, {"k19x", "k19y"}, "gpu-a", 5s)) << b_->logs();
  // Every earlier update too (stream order): no poll needed once the last one is there.
  for (int i = 0; i < 19; ++i)
    EXPECT_EQ(lookup(*sb, {"k" + std::to_string(i) + "x"}).reason_code(), "PREFIX_MATCH") << i;
  // One sweep + 20 updates in the stream.
  auto metrics = test::http_call(b_->http_port(), "GET", "/metrics");
  EXPECT_NE(metrics.body.find("inferencecache_journal_position{kind=\"stream_last\"} 21"),
            std::string::npos)
      << metrics.body;
  // And the other way round.
  ASSERT_TRUE(report(*sb, "gpu-b", {"from-b"}).accepted());
  EXPECT_TRUE(converges(*sa, {"from-b"}, "gpu-b", 5s));
  // One clock: the stream's times and the producers' stamps agree within 1 s.
  for (const auto* s : {a_.get(), b_.get()}) {
    EXPECT_EQ(metric_value(s->http_port(), "inferencecache_journal_stamp_skew_over_1s_total"), 0);
    EXPECT_LT(std::abs(metric_value(s->http_port(), "inferencecache_journal_stamp_skew_seconds")), 1.0);
  }
  EXPECT_EQ(a_->terminate(), 0);
  EXPECT_EQ(b_->terminate(), 0);
}

// A replica stopped while the other ingests catches up from the stream after its restart
// (local snapshot + stream tail); one with an empty data dir replays the whole stream.
TEST_F(JetStreamReplicas, ARestartedReplicaRecoversFromTheStream) {
  a_ = start(dir_a_, "ra");
  b_ = start(dir_b_, "rb");
  ASSERT_TRUE(a_ && b_);
  auto sa = stub(*a_);
  ASSERT_TRUE(report(*sa, "gpu-a", {"before"}).accepted());
  {
    auto sb = stub(*b_);
    ASSERT_TRUE(converges(*sb, {"before"}, "gpu-a", 5s));
  }
  EXPECT_EQ(b_->terminate(), 0);  // writes its local snapshot
  ASSERT_TRUE(report(*sa, "gpu-a", {"while-down"}).accepted());
  b_ = start(dir_b_, "rb");
  ASSERT_TRUE(b_);
  auto sb = stub(*b_);
  EXPECT_EQ(lookup(*sb, {"before"}).reason_code(), "PREFIX_MATCH");
  EXPECT_TRUE(converges(*sb, {"while-down"}, "gpu-a", 5s)) << b_->logs();
  EXPECT_NE(b_->logs().find("snapshot_seq"), std::string::npos);
  EXPECT_EQ(b_->logs().find("\"snapshot_seq\":\"0\""), std::string::npos) << b_->logs();

  // kill -9 and restart on an empty data dir: everything from the stream alone.
  ASSERT_EQ(b_->terminate(SIGKILL), 128 + SIGKILL);
  test::remove_tree(dir_b_);
  dir_b_ = test::make_temp_dir("ic_js_b2");
  b_ = start(dir_b_, "rb");
  ASSERT_TRUE(b_);
  auto sb2 = stub(*b_);
  EXPECT_TRUE(converges(*sb2, {"while-down"}, "gpu-a", 5s)) << b_->logs();
  EXPECT_EQ(lookup(*sb2, {"before"}).reason_code(), "PREFIX_MATCH");
  EXPECT_EQ(a_->terminate(), 0);
  EXPECT_EQ(b_->terminate(), 0);
}

// NATS gone: appends get JOURNAL_UNAVAILABLE within the budget (the next ones at once),
// lookups keep serving what was applied, /readyz stays 200.
TEST_F(JetStreamReplicas, NatsDownRefusesProducersAndKeepsServingLookups) {
  a_ = start(dir_a_, "ra");
  ASSERT_TRUE(a_);
  auto sa = stub(*a_);
  ASSERT_TRUE(report(*sa, "gpu-a", {"kept"}).accepted());
  EXPECT_EQ(test::http_call(a_->http_port(), "GET", "/readyz?producer=1").status, 200);
  nats_->kill9(0);
  const auto t0 = steady::now();
  grpc::Status rpc;
  auto first = report(*sa, "gpu-a", {"lost-1"}, &rpc);
  const auto first_took = steady::now() - t0;
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();  // an Ack, never gRPC UNAVAILABLE
  EXPECT_FALSE(first.accepted());
  EXPECT_EQ(first.reason_code(), "JOURNAL_UNAVAILABLE");
  EXPECT_LT(first_took, 2500ms);  // --journal-append-timeout=1s (+ slack for the box)
  const auto t1 = steady::now();
  auto second = report(*sa, "gpu-a", {"lost-2"});
  EXPECT_EQ(second.reason_code(), "JOURNAL_UNAVAILABLE");
  EXPECT_LT(steady::now() - t1, 500ms);  // refused at once while disconnected
  EXPECT_EQ(lookup(*sa, {"kept"}).reason_code(), "PREFIX_MATCH");
  EXPECT_NE(lookup(*sa, {"lost-1"}).reason_code(), "PREFIX_MATCH");
  auto ready = test::http_call(a_->http_port(), "GET", "/readyz");
  EXPECT_EQ(ready.status, 200);
  // Spec §3.8: not ready for producers while the journal cannot be written.
  EXPECT_EQ(test::http_call(a_->http_port(), "GET", "/readyz?producer=1").status, 503);
  auto metrics = test::http_call(a_->http_port(), "GET", "/metrics");
  EXPECT_NE(metrics.body.find("inferencecache_journal_nats_connected 0"), std::string::npos)
      << metrics.body;
  EXPECT_EQ(a_->terminate(), 0);
}

// Spec §3.8, "replica far behind": an append whose batch is slow to come back from the
// stream (test hook: this replica's follower hands each batch over 3 s late; a consumer
// being recreated after a NATS node loss took 3-9 s here) is answered JOURNAL_UNAVAILABLE
// once it waited --max-apply-lag, not left to the client's deadline. The outcome was
// unknown to the producer: the record was stored, and is applied when it arrives.
TEST_F(JetStreamReplicas, AnAppendSlowToComeBackIsAnsweredAfterMaxApplyLag) {
  ::setenv("IC_TEST_FOLLOW_DELAY_MS", "3000", 1);
  a_ = start(dir_a_, "ra", {"--sweep-interval=24h", "--max-apply-lag=1s"},
             ic::test::executable("inferencecache-server-testhooks"));
  ::unsetenv("IC_TEST_FOLLOW_DELAY_MS");
  ASSERT_TRUE(a_);
  // Caught up (the start-up sweep applied, 3 s late) before the append: not refused as lagging.
  ASSERT_TRUE(eventually(
      [&] {
        const long long applied = journal_position(a_->http_port(), "applied");
        return applied >= 1 && applied == journal_position(a_->http_port(), "stream_last");
      },
      15s))
      << a_->logs();
  auto sa = stub(*a_);
  const auto t0 = steady::now();
  grpc::Status rpc;
  const auto ack = report(*sa, "gpu-a", {"late"}, &rpc);
  const auto took = steady::now() - t0;
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();  // an Ack, never a deadline
  EXPECT_EQ(ack.reason_code(), "JOURNAL_UNAVAILABLE") << a_->logs();
  EXPECT_GE(took, 900ms);   // it waited for its batch...
  EXPECT_LT(took, 2500ms);  // ...--max-apply-lag and one check (250 ms), not the 3 s delay
  EXPECT_TRUE(converges(*sa, {"late"}, "gpu-a", 10s)) << a_->logs();
  EXPECT_GE(metric(a_->http_port(), "inferencecache_journal_unknown_outcome_total"), 1.0);
  EXPECT_NE(a_->logs().find("not back from the stream within --max-apply-lag"),
            std::string::npos)
      << a_->logs();
  EXPECT_EQ(a_->terminate(), 0);
}

// Spec §3.4 / §3.10 check 8. Concurrent /policy pushes to both replicas: each answers 204
// or 409, at least one wins, both end with the same policy. A replica that has not applied
// the newest push yet (test hook: its follower hands batches over 1.5 s late) loses its
// compare-and-set: 409, nothing changes. A --policy-file never overrides the policy the
// stream holds (at restart, nor on another replica).
TEST_F(JetStreamReplicas, PolicyPushesRaceAndAPolicyFileNeverOverridesTheStream) {
  const std::string file = dir_a_ + "/policy.json";
  std::ofstream(file) << policy_body("from-file");
  a_ = start(dir_a_, "ra", {"--policy-file=" + file});
  b_ = start(dir_b_, "rb");
  ASSERT_TRUE(a_ && b_);
  EXPECT_NE(a_->logs().find("policy_file_applied"), std::string::npos) << a_->logs();
  EXPECT_NE(converged_policy(*a_, *b_, 5s).find("from-file"), std::string::npos);
  auto push = [](int port, std::string body) {
    return test::http_call(port, "POST", "/policy", {}, body);
  };
  int wins = 0, losses = 0;
  for (int round = 0; round < 2; ++round) {
    auto fa = std::async(std::launch::async, push, a_->snapshot_port(),
                         policy_body("a" + std::to_string(round)));
    auto fb = std::async(std::launch::async, push, b_->snapshot_port(),
                         policy_body("b" + std::to_string(round)));
    const auto ra = fa.get(), rb = fb.get();
    for (const auto* r : {&ra, &rb}) {
      ASSERT_TRUE(r->status == 204 || r->status == 409) << r->status << " " << r->body;
      (r->status == 204 ? wins : losses) += 1;
    }
    ASSERT_TRUE(ra.status == 204 || rb.status == 204) << "round " << round << ": nobody won";
    ASSERT_NE(converged_policy(*a_, *b_, 5s), "(no convergence)") << "round " << round;
  }
  std::cout << "concurrent policy pushes: " << wins << " won, " << losses << " lost (409)\n";

  // B applies the stream late: A's push is stored and applied on A, B has not seen it.
  EXPECT_EQ(b_->terminate(), 0);
  ::setenv("IC_TEST_FOLLOW_DELAY_MS", "1500", 1);
  b_ = start(dir_b_, "rb", {}, ic::test::executable("inferencecache-server-testhooks"));
  ::unsetenv("IC_TEST_FOLLOW_DELAY_MS");
  ASSERT_TRUE(b_);
  ASSERT_EQ(push(a_->snapshot_port(), policy_body("newest")).status, 204);
  const auto lost = push(b_->snapshot_port(), policy_body("stale"));
  EXPECT_EQ(lost.status, 409) << lost.body;
  EXPECT_EQ(lost.body, "policy changed concurrently; GET and retry\n");
  const std::string last = converged_policy(*a_, *b_, 10s);
  EXPECT_NE(last.find("newest"), std::string::npos) << last;
  EXPECT_EQ(last.find("stale"), std::string::npos) << last;

  EXPECT_EQ(a_->terminate(), 0);
  // Item 4 of issue #15's follow-up: the final snapshot's line says what happened to the
  // stream (it used to claim "journal truncated").
  EXPECT_EQ(a_->logs().find("journal truncated"), std::string::npos) << a_->logs();
  EXPECT_NE(a_->logs().find("stream not purged"), std::string::npos) << a_->logs();
  a_ = start(dir_a_, "ra", {"--policy-file=" + file});  // restart: the stream's policy wins
  ASSERT_TRUE(a_);
  EXPECT_NE(a_->logs().find("policy_file_skipped"), std::string::npos) << a_->logs();
  EXPECT_EQ(test::http_call(a_->snapshot_port(), "GET", "/policy").body, last);
  EXPECT_EQ(b_->terminate(), 0);
  b_ = start(dir_b_, "rb", {"--policy-file=" + file});  // another replica's file neither
  ASSERT_TRUE(b_);
  EXPECT_NE(b_->logs().find("policy_file_skipped"), std::string::npos) << b_->logs();
  EXPECT_EQ(converged_policy(*a_, *b_, 5s), last);
  EXPECT_EQ(a_->terminate(), 0);
  EXPECT_EQ(b_->terminate(), 0);
}

// An LFU tenant "t" under a cap of 2 entries, "used" and "idle" reported through A, then
// lookups on A only; `expect_cap_victim` reports a third entry and checks which of the two
// the cap evicted on both replicas.
class JetStreamLfuCap : public JetStreamReplicas {
 protected:
  void start_pair(const std::string& lfu_credit) {
    const std::vector<std::string> flags = {"--max-index-entries=2", "--lfu-credit-interval=200ms",
                                            "--lfu-credit=" + lfu_credit, "--sweep-interval=24h"};
    a_ = start(dir_a_, "ra", flags);
    b_ = start(dir_b_, "rb", flags);
    ASSERT_TRUE(a_ && b_);
    ASSERT_EQ(test::http_call(a_->snapshot_port(), "POST", "/policy", {}, policy_body("t", "lfu")).status, 204);
    sa_ = stub(*a_);
    sb_ = stub(*b_);
    ASSERT_TRUE(report(*sa_, "gpu-1", {"used"}).accepted());
    ASSERT_TRUE(report(*sa_, "gpu-2", {"idle"}).accepted());
  }
  void expect_cap_victim(const std::string& evicted, const std::string& kept) {
    ASSERT_TRUE(report(*sa_, "gpu-3", {"new"}).accepted());  // over the cap: one entry goes
    ASSERT_TRUE(converges(*sb_, {"new"}, "gpu-3", 5s));
    for (auto* s : {sa_.get(), sb_.get()}) {
      EXPECT_NE(lookup(*s, {evicted}).reason_code(), "PREFIX_MATCH");
      EXPECT_EQ(lookup(*s, {kept}).reason_code(), "PREFIX_MATCH");
    }
    EXPECT_EQ(test::http_call(a_->snapshot_port(), "GET", "/snapshot").body,
              test::http_call(b_->snapshot_port(), "GET", "/snapshot").body);
    EXPECT_EQ(a_->terminate(), 0);
    EXPECT_EQ(b_->terminate(), 0);
  }
  std::unique_ptr<v1::InferenceCache::Stub> sa_, sb_;
};

// Spec §3.4: the credits of A's lookups are journaled (--lfu-credit-interval) and applied
// on both replicas, so the cap evicts the same (uncredited) entry on both. Had A credited
// locally, B would evict the credited one.
TEST_F(JetStreamLfuCap, LfuTenantsEvictIdenticallyOnBothReplicas) {
  ASSERT_NO_FATAL_FAILURE(start_pair("journal"));
  // B caught up without a lookup on B (a lookup there would credit "idle" too).
  const long long before = journal_position(a_->http_port(), "stream_last");
  auto caught_up = [&](long long pos) {
    const auto until = steady::now() + 5s;
    while (journal_position(b_->http_port(), "applied") < pos && steady::now() < until)
      std::this_thread::sleep_for(20ms);
    return journal_position(b_->http_port(), "applied") >= pos;
  };
  ASSERT_TRUE(caught_up(before)) << b_->logs();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(lookup(*sa_, {"used"}).reason_code(), "PREFIX_MATCH");
  // One credit record from A (within ~200 ms), applied on B: its position moves by one.
  ASSERT_TRUE(caught_up(before + 1)) << a_->logs();
  expect_cap_victim("idle", "used");
}

// --lfu-credit=local-off (spec §3.4's fallback): lookups credit nothing, so the same LFU
// tenant evicts like an LRU one: "used", looked up 3 times on A, is still the cap's victim
// (the oldest) on both replicas, and no credit record reaches the stream.
TEST_F(JetStreamLfuCap, WithLfuCreditLocalOffLfuTenantsEvictLikeLruOnBothReplicas) {
  ASSERT_NO_FATAL_FAILURE(start_pair("local-off"));
  const long long before = journal_position(a_->http_port(), "stream_last");
  for (int i = 0; i < 3; ++i) ASSERT_EQ(lookup(*sa_, {"used"}).reason_code(), "PREFIX_MATCH");
  std::this_thread::sleep_for(800ms);  // 4 credit intervals: a credit record would be out
  EXPECT_EQ(journal_position(a_->http_port(), "stream_last"), before) << a_->logs();
  expect_cap_victim("used", "idle");
}

// Spec §3.10 check 7. Replica A's clock runs 3 s ahead (test hook IC_TEST_CLOCK_OFFSET_MS),
// both publish a TTL sweep every second, both ingest. Tenant "short" (TTL 2 s) is swept
// while the run goes on, tenant "long" keeps the 30 min default. Each sweep slot is stored
// once in the stream although both replicas publish it (A 3 s earlier); every record applies
// at t_eff = max(previous, stamp), so both replicas emit the identical event sequence with
// non-decreasing timestamps and end with identical state.
TEST_F(JetStreamReplicas, AReplicaWithASkewedClockSweepsOnceAndConverges) {
  const std::vector<std::string> flags = {"--sweep-interval=1s"};
  ::setenv("IC_TEST_CLOCK_OFFSET_MS", "3000", 1);
  a_ = start(dir_a_, "ra", flags, ic::test::executable("inferencecache-server-testhooks"));
  ::unsetenv("IC_TEST_CLOCK_OFFSET_MS");
  b_ = start(dir_b_, "rb", flags);
  ASSERT_TRUE(a_ && b_);
  test::event_recorder ea(*a_), eb(*b_);
  const std::string policies =
      R"({"version":7,"policies":[{"namespace":"short","eviction":"lru","evictionTTL":2000000000},)"
      R"({"namespace":"long","eviction":"lru"}],"tenants":[]})";
  ASSERT_EQ(test::http_call(b_->snapshot_port(), "POST", "/policy", {}, policies).status, 204);
  auto sa = stub(*a_), sb = stub(*b_);
  std::vector<std::pair<std::string, std::string>> long_keys;
  const auto run_until = steady::now() + 4s;
  for (int i = 0; steady::now() < run_until && i < 2000; ++i) {
    for (const char* tenant : {"short", "long"}) {
      const std::string k = std::string(tenant) + std::to_string(i);
      ASSERT_TRUE(report(*sa, "gpu-a", {k + "a"}, nullptr, tenant).accepted()) << a_->logs();
      ASSERT_TRUE(report(*sb, "gpu-b", {k + "b"}, nullptr, tenant).accepted()) << b_->logs();
      if (std::string(tenant) == "long") {
        long_keys.emplace_back(tenant, k + "a");
        long_keys.emplace_back(tenant, k + "b");
      }
    }
    std::this_thread::sleep_for(20ms);
  }
  std::this_thread::sleep_for(3s);  // the last "short" entries expire; sweeps remove them
  ASSERT_EQ(test::wait_identical({a_.get(), b_.get()}, {"short", "long"}, 20s), "");
  // Scores carry each replica's own lookup time: 3 s apart on a 30 min TTL (±0.2 %).
  EXPECT_EQ(test::compare_probes(*sa, *sb, test::probe_set(long_keys), 5e-3, /*by_id=*/true), "");
  const auto events_a = ea.stop(), events_b = eb.stop();
  EXPECT_EQ(test::compare_events(events_a, events_b), "");
  int evicted_short = 0;
  for (const auto& [tenant, events] : events_a) {
    long long prev = 0;
    for (const auto& e : events) {
      const long long ts = std::atoll(e.c_str() + e.rfind(' ') + 1);
      EXPECT_GE(ts, prev) << "t_eff went back in tenant " << tenant << ": " << e;
      prev = std::max(prev, ts);
      if (tenant == "short" && e.rfind("PREFIX_EVICTED", 0) == 0) ++evicted_short;
    }
  }
  EXPECT_GT(evicted_short, 0) << "no TTL sweep removed anything";

  // The stream: one sweep record per slot; A's slots (3 s ahead) are among them.
  journal::jetstream::options o;
  o.servers = nats_->urls();
  o.replica_id = "check";
  o.replicas = 1;
  const long long last = journal_position(b_->http_port(), "stream_last");
  auto r = journal::jetstream::reader::open(o, 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::map<std::uint64_t, int> sweeps_per_slot;
  const auto st = (*r)->follow(static_cast<std::uint64_t>(last), [&](const auto& b) {
    if (b.id.origin == "sweep") ++sweeps_per_slot[b.id.counter];
    return true;
  }, 10s);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_GE(sweeps_per_slot.size(), 4u);
  for (const auto& [slot, n] : sweeps_per_slot) EXPECT_EQ(n, 1) << "slot " << slot;
  const auto now_s = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_GE(static_cast<long long>(sweeps_per_slot.rbegin()->first), now_s + 1)
      << "no sweep from the replica whose clock runs ahead";
  // The cross-check sees A's clock: its updates are stamped ~3 s after the stream stored
  // them, on both replicas (each applies them).
  for (const auto* s : {a_.get(), b_.get()})
    EXPECT_GE(metric_value(s->http_port(), "inferencecache_journal_stamp_skew_over_1s_total"), 1);
  std::cout << "clock skew +3 s: " << sweeps_per_slot.size() << " sweep slots stored, "
            << evicted_short << " TTL evictions, stream 1.." << last << "\n";
  EXPECT_EQ(a_->terminate(), 0);
  EXPECT_EQ(b_->terminate(), 0);
}

// Checks of spec §3.10 for shared snapshots and purge (3 wiped, 4, 6). A holds the
// snapshotter lease (started first, alone); --shared-snapshot-interval=1s.
class JetStreamSharedSnapshots : public JetStreamReplicas {
 protected:
  /// Starts A, waits until it holds the lease.
  void start_holder() {
    a_ = start(dir_a_, "ra", kSharedFlags);
    ASSERT_TRUE(a_);
    ASSERT_TRUE(eventually([&] { return metric(a_->http_port(), "inferencecache_journal_lease_holder") == 1; }, 5s))
        << a_->logs();
  }
  void ingest(const std::string& prefix, int n) {
    auto sa = stub(*a_);
    for (int i = 0; i < n; ++i)
      ASSERT_TRUE(report(*sa, "gpu-a", {prefix + std::to_string(i)}).accepted()) << a_->logs();
  }
  /// Every block of `prefix`0..n-1 answers PREFIX_MATCH on `s`.
  static void expect_all(const test::server_process& s, const std::string& prefix, int n) {
    auto st = stub(s);
    ASSERT_TRUE(converges(*st, {prefix + std::to_string(n - 1)}, "gpu-a", 5s)) << s.logs();
    for (int i = 0; i < n; ++i)
      EXPECT_EQ(lookup(*st, {prefix + std::to_string(i)}).reason_code(), "PREFIX_MATCH") << i;
  }
  /// Both replicas applied the stream's end and serve byte-identical /snapshot JSON.
  void expect_identical() {
    const long long last = journal_position(a_->http_port(), "stream_last");
    EXPECT_TRUE(eventually([&] { return journal_position(b_->http_port(), "applied") >= last; }, 5s));
    EXPECT_TRUE(eventually([&] {
      return test::http_call(a_->snapshot_port(), "GET", "/snapshot").body ==
             test::http_call(b_->snapshot_port(), "GET", "/snapshot").body;
    }, 5s));
    EXPECT_EQ(test::http_call(a_->snapshot_port(), "GET", "/snapshot").body,
              test::http_call(b_->snapshot_port(), "GET", "/snapshot").body);
  }
  /// Waits until the committed shared snapshot covers up to A's stream_last − 1 (the
  /// upload after the last ingest); returns its covering_seq (0: timed out).
  std::uint64_t manifest_after_ingest() {
    const auto last = static_cast<std::uint64_t>(journal_position(a_->http_port(), "stream_last"));
    journal::jetstream::options o;
    o.servers = {nats_->url(0)};
    o.replica_id = "probe";
    o.replicas = 1;
    auto shared = journal::jetstream::shared_snapshots::open(o);
    EXPECT_TRUE(shared.ok()) << shared.status().to_string();
    if (!shared.ok()) return 0;
    std::uint64_t covering = 0;
    const bool ok = eventually([&] {
      auto m = (*shared)->latest();
      covering = m.ok() ? m->covering_seq : 0;
      return covering + 1 >= last;
    }, 10s);
    return ok ? covering : 0;
  }
  /// A writer of its own on the stream, to purge it by hand (nullptr: failure recorded).
  std::unique_ptr<journal::jetstream::writer> purger() {
    journal::jetstream::options o;
    o.servers = nats_->urls();
    o.replica_id = "purger";
    o.replicas = nodes_ == 1 ? 1 : 3;
    auto w = journal::jetstream::writer::open(o);
    EXPECT_TRUE(w.ok()) << w.status().to_string();
    return w.ok() ? std::move(w).value() : nullptr;
  }
  /// Waits until A purged the stream past sequence `past`.
  bool purged_past(long long past) {
    return eventually([&] { return journal_position(a_->http_port(), "stream_first") > past; }, 10s);
  }
  /// The probe keys (tenant "t", block) of ingest(p1, n1) and ingest(p2, n2).
  static std::vector<std::pair<std::string, std::string>> keys(const std::string& p1, int n1,
                                                               const std::string& p2, int n2) {
    std::vector<std::pair<std::string, std::string>> out;
    for (int i = 0; i < n1; ++i) out.emplace_back("t", p1 + std::to_string(i));
    for (int i = 0; i < n2; ++i) out.emplace_back("t", p2 + std::to_string(i));
    return out;
  }
};

// Check 4: A alone uploads its snapshot and purges; B on an empty dir loads the manifest,
// follows from covering + 1 (the reader asserts the first delivered sequence) and converges.
TEST_F(JetStreamSharedSnapshots, ALateJoinerAfterAPurgeLoadsTheSharedSnapshot) {
  start_holder();
  ingest("late", 20);
  ASSERT_TRUE(purged_past(1)) << a_->logs();
  EXPECT_NE(a_->logs().find("shared snapshot written"), std::string::npos) << a_->logs();
  EXPECT_GT(metric(a_->http_port(), "inferencecache_journal_snapshot_shared_bytes"), 0);
  b_ = start(dir_b_, "rb", kSharedFlags);
  ASSERT_TRUE(b_);
  EXPECT_NE(b_->logs().find("loaded the shared snapshot"), std::string::npos) << b_->logs();
  expect_all(*b_, "late", 20);
  expect_identical();
  EXPECT_EQ(metric(b_->http_port(), "inferencecache_journal_gaps_total"), 0);  // a joiner, not a gap
  EXPECT_EQ(metric(b_->http_port(), "inferencecache_journal_lease_holder"), 0);
  EXPECT_EQ(a_->terminate(), 0);
  EXPECT_EQ(b_->terminate(), 0);
}

// Check 3, data dir wiped: B killed -9 and restarted on an empty dir starts from the
// shared snapshot A uploaded plus the stream's tail (written while B was down).
TEST_F(JetStreamSharedSnapshots, AWipedReplicaRestartsFromTheSharedSnapshotAndTheTail) {
  start_holder();
  b_ = start(dir_b_, "rb", kSharedFlags);
  ASSERT_TRUE(b_);
  ingest("w", 10);
  expect_all(*b_, "w", 10);
  ASSERT_GT(manifest_after_ingest(), 0u) << a_->logs();
  ASSERT_EQ(b_->terminate(SIGKILL), 128 + SIGKILL);
  test::remove_tree(dir_b_);
  dir_b_ = test::make_temp_dir("ic_js_b2");
  ingest("tail", 5);
  b_ = start(dir_b_, "rb", kSharedFlags);
  ASSERT_TRUE(b_);
  EXPECT_NE(b_->logs().find("loaded the shared snapshot"), std::string::npos) << b_->logs();
  expect_all(*b_, "tail", 5);
  expect_all(*b_, "w", 10);
  expect_identical();
  EXPECT_EQ(a_->terminate(), 0);
  EXPECT_EQ(b_->terminate(), 0);
}

// Check 6: B stopped, the stream purged past B's local snapshot by hand (B's mark would
// hold the automatic purge for its 30 s TTL), B restarted: it detects the gap, loads the
// shared snapshot, converges; inferencecache_journal_gaps_total = 1.
TEST_F(JetStreamSharedSnapshots, AGapAtRestartReloadsTheSharedSnapshot) {
  start_holder();
  b_ = start(dir_b_, "rb", kSharedFlags);
  ASSERT_TRUE(b_);
  ingest("g", 5);
  expect_all(*b_, "g", 5);
  EXPECT_EQ(b_->terminate(), 0);  // local snapshot at stop
  ingest("after", 10);
  const std::uint64_t covering = manifest_after_ingest();
  ASSERT_GT(covering, 0u) << a_->logs();
  auto w = purger();
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->truncate_before(covering + 1).ok());
  b_ = start(dir_b_, "rb", kSharedFlags);
  ASSERT_TRUE(b_);
  EXPECT_NE(b_->logs().find("gap: "), std::string::npos) << b_->logs();
  EXPECT_NE(b_->logs().find("loaded the shared snapshot"), std::string::npos) << b_->logs();
  expect_all(*b_, "after", 10);
  expect_all(*b_, "g", 5);
  expect_identical();
  EXPECT_EQ(metric(b_->http_port(), "inferencecache_journal_gaps_total"), 1);
  EXPECT_EQ(a_->terminate(), 0);
  EXPECT_EQ(b_->terminate(), 0);
}

// Spec §3.8 row "gap", while running: B is stopped (SIGSTOP) and its NATS connection cut
// (the node restarted), A ingests and the stream is purged past B by hand; after SIGCONT
// B's ordered consumer is recreated from its next sequence and meets the gap. B reloads
// the shared snapshot off to the side, swaps it in, follows on and converges; its
// StreamCacheEvents subscription ends with ABORTED instead of skipping the jump silently.
class JetStreamLiveGap : public JetStreamSharedSnapshots {
 protected:
  /// B stopped, NATS restarted, `n` blocks of `prefix` ingested on A; purges the stream
  /// below `purge_below(covering of the manifest after the ingest, stream last)`, then
  /// resumes B.
  template <class PurgeBelow>
  void gap_while_running(const std::string& prefix, int n, PurgeBelow purge_below) {
    ASSERT_EQ(::kill(b_->pid(), SIGSTOP), 0);
    nats_->kill9(0);
    ASSERT_TRUE(nats_->restart(0, 10s));
    auto sa = stub(*a_);
    ASSERT_TRUE(eventually([&] { return report(*sa, "gpu-a", {prefix + "0"}).accepted(); }, 10s))
        << a_->logs();
    // A stepped down while NATS was gone; it takes the lease again once its old key's TTL
    // (10 s, kept by the restarted node) ran out.
    ASSERT_TRUE(eventually([&] { return metric(a_->http_port(), "inferencecache_journal_lease_holder") == 1; }, 15s))
        << a_->logs();
    ingest(prefix, n);
    const std::uint64_t covering = manifest_after_ingest();
    ASSERT_GT(covering, 0u) << a_->logs();
    auto w = purger();
    ASSERT_TRUE(w);
    const auto last = static_cast<std::uint64_t>(journal_position(a_->http_port(), "stream_last"));
    ASSERT_TRUE(w->truncate_before(purge_below(covering, last)).ok());
    if (purge_below(covering, last) > last) {
      // Purged empty: a gap shows only at the next delivery. A record of no known kind
      // is delivered but applies nothing, so A takes no new snapshot for it.
      const journal::record_in junk{9999, "not a record"};
      ASSERT_TRUE(w->append({junk}).ok());
    }
    ASSERT_EQ(::kill(b_->pid(), SIGCONT), 0);
  }
  /// A (lease holder) and B running, `n` blocks of `prefix` applied on both.
  void start_pair_with(const std::string& prefix, int n) {
    start_holder();
    b_ = start(dir_b_, "rb", kSharedFlags);
    ASSERT_TRUE(b_);
    ingest(prefix, n);
    expect_all(*b_, prefix, n);
  }
  /// The --journal-reset scenario (below), on `nodes_` NATS nodes.
  void reset_lets_the_other_halted_replica_recover();
  void TearDown() override {
    if (a_) ::kill(a_->pid(), SIGCONT);  // never leave a stopped process behind
    if (b_) ::kill(b_->pid(), SIGCONT);
    JetStreamSharedSnapshots::TearDown();
  }
};

TEST_F(JetStreamLiveGap, AGapWhileRunningReloadsTheSharedSnapshotAndConverges) {
  start_pair_with("g", 5);
  ASSERT_FALSE(HasFatalFailure());
  auto eb = std::make_unique<test::event_recorder>(*b_);
  gap_while_running("after", 10, [](std::uint64_t covering, std::uint64_t) { return covering + 1; });
  ASSERT_TRUE(eventually([&] { return metric(b_->http_port(), "inferencecache_journal_reloads_total") == 1; }, 15s))
      << b_->logs();
  EXPECT_EQ(metric(b_->http_port(), "inferencecache_journal_gaps_total"), 1);
  EXPECT_EQ(metric(b_->http_port(), "inferencecache_journal_halted"), 0);
  EXPECT_NE(b_->logs().find("loaded the shared snapshot"), std::string::npos) << b_->logs();
  expect_all(*b_, "after", 10);
  expect_all(*b_, "g", 5);
  expect_identical();
  // Check 1 after the reload: the same GetCacheState and LookupRoute answers as A's.
  EXPECT_EQ(test::wait_identical({a_.get(), b_.get()}, {"t"}, 10s), "");
  EXPECT_EQ(test::compare_probes(*stub(*a_), *stub(*b_), test::probe_set(keys("g", 5, "after", 10))), "");
  // The subscription saw the jump as an end, not as silence.
  const auto events = eb->stop();
  ASSERT_EQ(events.count(""), 1u);
  EXPECT_NE(events.at("").back().find("reloaded from a shared snapshot"), std::string::npos)
      << events.at("").back();
  EXPECT_EQ(events.at("").back().rfind("ERROR stream ended: 10 ", 0), 0u) << events.at("").back();  // ABORTED
  // Producers on B again: applied on B, then on A.
  auto sb = stub(*b_);
  ASSERT_TRUE(report(*sb, "gpu-b", {"from-b"}).accepted()) << b_->logs();
  EXPECT_TRUE(converges(*stub(*a_), {"from-b"}, "gpu-b", 5s));
  EXPECT_EQ(a_->terminate(), 0);
  EXPECT_EQ(b_->terminate(), 0);
}

// The same gap, but purged past the newest shared snapshot too: B refuses producers
// (JOURNAL_UNAVAILABLE), serves lookups from what it applied, reports halted, and retries;
// once A (the lease holder) uploads a newer shared snapshot that covers the gap, B reloads.
TEST_F(JetStreamLiveGap, AnUncoveredGapRefusesProducersUntilASharedSnapshotCoversIt) {
  start_pair_with("g", 5);
  ASSERT_FALSE(HasFatalFailure());
  // Purge everything: the manifest (covering last − 1) no longer covers what follows.
  gap_while_running("after", 10, [](std::uint64_t, std::uint64_t last) { return last + 1; });
  ASSERT_TRUE(eventually([&] { return metric(b_->http_port(), "inferencecache_journal_halted") == 1; }, 15s))
      << b_->logs();
  // halted is set when the reload starts, the line below once its first attempt failed.
  EXPECT_TRUE(eventually([&] { return b_->logs().find("reload after the gap failed") != std::string::npos; }, 10s))
      << b_->logs();
  auto sb = stub(*b_);
  const auto refused = report(*sb, "gpu-b", {"refused"});
  EXPECT_FALSE(refused.accepted());
  EXPECT_EQ(refused.reason_code(), "JOURNAL_UNAVAILABLE");
  EXPECT_EQ(lookup(*sb, {"g0"}).reason_code(), "PREFIX_MATCH");   // the old state serves
  EXPECT_NE(lookup(*sb, {"after1"}).reason_code(), "PREFIX_MATCH");
  EXPECT_EQ(metric(b_->http_port(), "inferencecache_journal_reloads_total"), 0);
  // --journal-reset is refused beside A, which lost nothing: a third replica on an empty
  // dir with the flag exits like one without it (once A's mark, written every 5 s, shows it).
  {
    auto w = purger();
    ASSERT_TRUE(w);
    const auto st = w->state();
    ASSERT_TRUE(st.ok()) << st.status().to_string();
    journal::jetstream::options o;
    o.servers = nats_->urls();
    o.replica_id = "probe";
    o.replicas = 1;
    auto shared = journal::jetstream::shared_snapshots::open(o);
    ASSERT_TRUE(shared.ok()) << shared.status().to_string();
    ASSERT_TRUE(eventually([&] {
      auto marks = (*shared)->live_marks();
      if (!marks.ok()) return false;
      for (const auto& [id, mark] : *marks)
        if (id == "ra" && mark + 2 >= st->first_seq) return true;
      return false;
    }, 10s));
    const std::string dir_c = test::make_temp_dir("ic_js_c");
    auto args = test::replica_args(dir_c, "rc", nats_urls(), 1);
    args.insert(args.end(), kSharedFlags.begin(), kSharedFlags.end());
    args.push_back("--journal-reset");
    const auto [code, out] =
        test::run_to_exit(ic::test::executable("inferencecache-server"), args, 30s);
    test::remove_tree(dir_c);
    EXPECT_EQ(code, 1) << out;
    EXPECT_NE(out.find("--journal-reset refused: replica ra is live"), std::string::npos) << out;
    EXPECT_EQ(out.find("journal reset (--journal-reset)"), std::string::npos) << out;
  }
  // A applies more: a local snapshot of it is uploaded (at most one per
  // --shared-snapshot-interval, so A ingests until one was) and covers the gap.
  auto sa = stub(*a_);
  auto next_ingest = steady::now();
  ASSERT_TRUE(eventually([&] {
    if (steady::now() >= next_ingest) {
      EXPECT_TRUE(report(*sa, "gpu-a", {"more0"}).accepted());
      next_ingest = steady::now() + 500ms;
    }
    return metric(b_->http_port(), "inferencecache_journal_reloads_total") == 1;
  }, 20s)) << b_->logs() << "\n--- A:\n" << a_->logs();
  expect_all(*b_, "more", 1);
  expect_all(*b_, "after", 10);
  expect_identical();
  ASSERT_TRUE(report(*sb, "gpu-b", {"from-b"}).accepted()) << b_->logs();
  EXPECT_EQ(a_->terminate(), 0);
  EXPECT_EQ(b_->terminate(), 0);
}

// --journal-reset (spec §3.8): both replicas stopped, a NATS node restarted (their
// consumers are reset), and while they were away records were written and purged past the
// newest shared snapshot, then one more written: each meets a gap nothing covers and halts.
// B restarted with --journal-reset rebuilds from the stream's first sequence, names the lost
// range, accepts producers and writes a shared snapshot at once; A, still halted, finds it
// at its next 5 s retry and reloads by itself: both then serve the identical index (the
// records before the gap are gone on both). A restarted with the flag and no gap starts
// normally.
void JetStreamLiveGap::reset_lets_the_other_halted_replica_recover() {
  start_pair_with("g", 5);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_EQ(::kill(a_->pid(), SIGSTOP), 0);
  ASSERT_EQ(::kill(b_->pid(), SIGSTOP), 0);
  nats_->kill9(0);
  ASSERT_TRUE(nats_->restart(0, 10s));
  auto w = purger();
  ASSERT_TRUE(w);
  // One ReportCacheState record of `block` held by `replica`, as a replica journals it.
  auto append_update = [&](const std::string& replica, const std::string& block) {
    const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
    const std::string bytes = proto::encode_record(
        proto::record_kind::update, now_us,
        test::chain_update_message("t", replica, {block}).SerializeAsString());
    return w->append({journal::record_in{static_cast<std::uint32_t>(proto::record_kind::update), bytes}})
        .ok();
  };
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(append_update("gpu-x", "lost" + std::to_string(i)));
  const auto before = w->state();
  ASSERT_TRUE(before.ok()) << before.status().to_string();
  const std::uint64_t lost_through = before->last_seq;
  ASSERT_TRUE(w->truncate_before(lost_through + 1).ok());
  ASSERT_TRUE(append_update("gpu-r", "kept0"));  // the stream's first sequence now
  ASSERT_EQ(::kill(a_->pid(), SIGCONT), 0);
  ASSERT_EQ(::kill(b_->pid(), SIGCONT), 0);
  for (auto* s : {a_.get(), b_.get()})
    ASSERT_TRUE(eventually([&] { return s->logs().find("reload after the gap failed") != std::string::npos; }, 15s))
        << s->logs();
  EXPECT_EQ(metric(a_->http_port(), "inferencecache_journal_halted"), 1);

  // B accepts the loss.
  EXPECT_EQ(b_->terminate(), 0);
  const auto t_reset = steady::now();
  b_ = start(dir_b_, "rb", {kSharedFlags[0], kSharedFlags[1], kSharedFlags[2], "--journal-reset"});
  ASSERT_TRUE(b_);
  EXPECT_NE(b_->logs().find("journal reset (--journal-reset): stream seq "), std::string::npos) << b_->logs();
  EXPECT_NE(b_->logs().find(".." + std::to_string(lost_through) + " is lost"), std::string::npos) << b_->logs();
  EXPECT_EQ(metric(b_->http_port(), "inferencecache_journal_resets_total"), 1);
  EXPECT_EQ(metric(b_->http_port(), "inferencecache_journal_halted"), 0);
  auto sb = stub(*b_);
  EXPECT_TRUE(converges(*sb, {"kept0"}, "gpu-r", 5s));
  ASSERT_TRUE(report(*sb, "gpu-a", {"b0"}).accepted()) << b_->logs();
  // A recovers by itself from B's shared snapshot (its retry runs every 5 s).
  ASSERT_TRUE(eventually([&] { return metric(a_->http_port(), "inferencecache_journal_reloads_total") == 1; }, 15s))
      << a_->logs() << "\n--- B:\n" << b_->logs();
  std::cout << "journal reset: A recovered " << std::chrono::duration_cast<std::chrono::milliseconds>(
                   steady::now() - t_reset).count() << " ms after B's restart began\n";
  EXPECT_EQ(metric(a_->http_port(), "inferencecache_journal_halted"), 0);
  EXPECT_EQ(metric(a_->http_port(), "inferencecache_journal_resets_total"), 0);
  auto sa = stub(*a_);
  ASSERT_TRUE(report(*sa, "gpu-a", {"a0"}).accepted()) << a_->logs();
  EXPECT_TRUE(converges(*sb, {"a0"}, "gpu-a", 5s));
  EXPECT_TRUE(converges(*sa, {"b0"}, "gpu-a", 5s));
  const auto probe_keys = keys("kept", 1, "lost", 3);
  auto all_keys = keys("g", 5, "a", 1);
  all_keys.insert(all_keys.end(), probe_keys.begin(), probe_keys.end());
  all_keys.emplace_back("t", "b0");
  EXPECT_EQ(test::wait_identical({a_.get(), b_.get()}, {"t"}, 10s), "");
  EXPECT_EQ(test::compare_probes(*sa, *sb, test::probe_set(all_keys)), "");
  for (auto* st : {sa.get(), sb.get()}) {  // what the reset dropped is gone on both
    EXPECT_NE(lookup(*st, {"g0"}).reason_code(), "PREFIX_MATCH");
    EXPECT_NE(lookup(*st, {"lost0"}).reason_code(), "PREFIX_MATCH");
  }

  // The flag without a gap: nothing lost, a normal start, one line.
  EXPECT_EQ(a_->terminate(), 0);
  a_ = start(dir_a_, "ra", {kSharedFlags[0], kSharedFlags[1], kSharedFlags[2], "--journal-reset"});
  ASSERT_TRUE(a_);
  EXPECT_NE(a_->logs().find("--journal-reset not needed"), std::string::npos) << a_->logs();
  EXPECT_EQ(metric(a_->http_port(), "inferencecache_journal_resets_total"), 0);
  EXPECT_TRUE(converges(*stub(*a_), {"b0"}, "gpu-a", 5s));
  EXPECT_EQ(test::wait_identical({a_.get(), b_.get()}, {"t"}, 10s), "");
  EXPECT_EQ(a_->terminate(), 0);
  EXPECT_EQ(b_->terminate(), 0);
}

TEST_F(JetStreamLiveGap, AJournalResetOnOneReplicaLetsTheOtherHaltedReplicaRecover) {
  reset_lets_the_other_halted_replica_recover();
}

// The same on the 3-node loopback cluster (stream and buckets R3).
class JetStreamLiveGapCluster : public JetStreamLiveGap {
 protected:
  JetStreamLiveGapCluster() { nodes_ = 3; }
};

TEST_F(JetStreamLiveGapCluster, AJournalResetOnOneReplicaLetsTheOtherHaltedReplicaRecover) {
  reset_lets_the_other_halted_replica_recover();
}

}  // namespace
}  // namespace ic
