// Two server replicas on a 3-node loopback NATS cluster (stream R3), spec/scaleout.md §3.10
// checks 2 and 3: kill -9 of the stream leader node, of a follower node, and of a replica,
// each during streaming ingest. Every acknowledged update must be served by every replica
// afterwards; both replicas end identical (tests/jetstream_support.hpp: /snapshot,
// GetCacheState, 1 000 probe lookups, StreamCacheEvents). Every process is started and
// stopped by PID (nats_fixture, server_process); skipped when nats-server is not installed.
#include <csignal>
#include <cstdio>
#include <thread>

#include <gtest/gtest.h>

#include "tests/jetstream_support.hpp"

namespace ic {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
namespace v1 = test::v1;
using test::lookup;
using test::report;

/// Reports chains "<prefix><i>-0..3" held by "gpu-a" through one replica, one update per
/// ReportCacheState call, about every 5 ms, on its own thread until stop(); logs which
/// were acknowledged and which answered JOURNAL_UNAVAILABLE (outcome unknown).
class producer {
 public:
  producer(const test::server_process& s, std::string prefix)
      : stub_(test::stub(s)), prefix_(std::move(prefix)) {
    thread_ = std::thread([this] { run(); });
  }
  ~producer() { stop(); }
  /// Stops and joins (idempotent).
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  /// The chain of update `i`.
  std::vector<std::string> chain(int i) const {
    std::vector<std::string> out;
    for (int b = 0; b < 4; ++b) out.push_back(prefix_ + std::to_string(i) + "-" + std::to_string(b));
    return out;
  }
  /// Waits (≤ `bound`) until at least `n` updates were acknowledged.
  bool wait_acked(int n, std::chrono::milliseconds bound) const {
    const auto until = steady::now() + bound;
    while (acked_count_.load() < n && steady::now() < until) std::this_thread::sleep_for(10ms);
    return acked_count_.load() >= n;
  }
  int acked_count() const { return acked_count_.load(); }
  // Valid after stop().
  const std::vector<int>& acked() const { return acked_; }
  int unknown() const { return unknown_; }
  const std::string& other_error() const { return other_error_; }

 private:
  void run() {
    for (int i = 0; !stop_.load() && i < 100000; ++i) {
      grpc::Status rpc;
      const v1::Ack ack = report(*stub_, "gpu-a", chain(i), &rpc);
      if (rpc.ok() && ack.accepted()) {
        acked_.push_back(i);
        ++acked_count_;
      } else if (rpc.ok() && ack.reason_code() == "JOURNAL_UNAVAILABLE") {
        ++unknown_;
      } else if (other_error_.empty()) {
        other_error_ = rpc.ok() ? "refused: " + ack.reason_code() : "rpc: " + rpc.error_message();
      }
      std::this_thread::sleep_for(5ms);
    }
  }
  std::unique_ptr<v1::InferenceCache::Stub> stub_;
  std::string prefix_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> acked_count_{0};
  std::vector<int> acked_;
  int unknown_ = 0;
  std::string other_error_;
};

class JetStreamCluster : public test::replicas_fixture {
 protected:
  JetStreamCluster() { nodes_ = 3; }

  /// Every acknowledged chain of `p` is held by gpu-a on `s` (whole chain); "" or the first miss.
  static std::string all_acked_served(const test::server_process& s, const producer& p) {
    auto st = test::stub(s);
    for (int i : p.acked()) {
      const auto r = lookup(*st, p.chain(i));
      if (r.reason_code() != "PREFIX_MATCH" || r.replica_scores_size() != 1 ||
          r.replica_scores(0).matched_tokens() != 4 * 64)
        return "acknowledged chain " + std::to_string(i) + " not served: " + r.DebugString();
    }
    return {};
  }

  /// The probe set over `p`'s acknowledged chains.
  static std::vector<test::probe_prompt> probes_of(const producer& p) {
    std::vector<std::pair<std::string, std::string>> keys;
    for (int i : p.acked()) keys.emplace_back("t", p.chain(i).front());
    return test::probe_set(keys);
  }

  /// Check 2 for one node: ingest through A while B follows, kill -9 node `victim` (the stream
  /// leader when `leader`, else a follower) after 50 acknowledged updates, wait until 30 more
  /// were acknowledged (restarting the node after 20 s if the stream stays leaderless, as
  /// 2.9.10 sometimes does), restart it, and check that both replicas serve every
  /// acknowledged update and converge.
  void kill_node_during_ingest(bool leader) {
    const std::vector<std::string> flags = {"--sweep-interval=24h"};
    a_ = start(dir_a_, "ra", flags);
    b_ = start(dir_b_, "rb", flags);
    ASSERT_TRUE(a_ && b_);
    const std::string stream_leader = nats_->stream_leader("IC_JOURNAL");
    const int leader_index = nats_->index_of(stream_leader);
    ASSERT_GE(leader_index, 0) << "no stream leader in /jsz: '" << stream_leader << "'";
    const int victim = leader ? leader_index : (leader_index + 1) % 3;
    test::event_recorder ea(*a_), eb(*b_);
    producer p(*a_, "k");
    // Bounds, not timings: a stream just created on a loaded box (CI runs the ASan pass two
    // tests at a time) can take seconds to accept its first appends.
    ASSERT_TRUE(p.wait_acked(50, 30s)) << p.other_error() << a_->logs();
    const std::string meta_leader = nats_->meta_leader();
    nats_->kill9(victim);
    const int before = p.acked_count();
    const auto killed_at = steady::now();
    bool restarted_early = false;
    if (!p.wait_acked(before + 30, 20s)) {
      restarted_early = true;
      ASSERT_TRUE(nats_->restart(victim)) << nats_->logs();
    }
    ASSERT_TRUE(p.wait_acked(before + 30, 30s)) << "appends did not resume\n" << a_->logs()
                                                 << nats_->logs();
    const auto resumed_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - killed_at).count();
    if (!restarted_early) {
      ASSERT_TRUE(nats_->restart(victim)) << nats_->logs();
    }
    p.stop();
    // JOURNAL_UNAVAILABLE only, never an RPC error: an Ack whose batch is slow to come back
    // (the reader's consumer recreated after the node loss) is answered after --max-apply-lag.
    EXPECT_EQ(p.other_error(), "") << a_->logs();
    std::printf("%s %s killed after %d acks: %zu acked, %d unknown outcome, 30 more acks %lld ms "
                "after the kill%s; new leader %s; meta leader at the kill %s\n",
                leader ? "stream leader" : "follower", nats_->name(victim).c_str(), before,
                p.acked().size(), p.unknown(), static_cast<long long>(resumed_ms),
                restarted_early ? " (node restarted early)" : "",
                nats_->stream_leader("IC_JOURNAL").c_str(), meta_leader.c_str());

    ASSERT_EQ(test::wait_identical({a_.get(), b_.get()}, {"t"}, 30s), "");
    EXPECT_EQ(all_acked_served(*a_, p), "");
    EXPECT_EQ(all_acked_served(*b_, p), "");
    const auto probes = probes_of(p);
    auto sa = test::stub(*a_), sb = test::stub(*b_);
    EXPECT_EQ(test::compare_probes(*sa, *sb, probes), "");
    EXPECT_EQ(test::compare_events(ea.stop(), eb.stop()), "");
    EXPECT_EQ(a_->terminate(), 0);
    EXPECT_EQ(b_->terminate(), 0);
  }
};

TEST_F(JetStreamCluster, Kill9OfTheStreamLeaderLosesNoAcknowledgedUpdate) {
  kill_node_during_ingest(/*leader=*/true);
}

TEST_F(JetStreamCluster, Kill9OfAFollowerNodeLosesNoAcknowledgedUpdate) {
  kill_node_during_ingest(/*leader=*/false);
}

// Check 3 with the data dir kept: B is killed -9 while A ingests (after B wrote a local
// snapshot), restarts on its dir while the ingest goes on, recovers from the local snapshot
// plus the stream tail, serves every acknowledged update and ends identical to A.
TEST_F(JetStreamCluster, AReplicaKilledDuringIngestRecoversOnItsDataDirAndConverges) {
  const std::vector<std::string> flags = {"--sweep-interval=24h", "--snapshot-every-records=20"};
  a_ = start(dir_a_, "ra", flags);
  b_ = start(dir_b_, "rb", flags);
  ASSERT_TRUE(a_ && b_);
  producer p(*a_, "r");
  ASSERT_TRUE(p.wait_acked(60, 10s)) << p.other_error() << a_->logs();
  ASSERT_TRUE(b_->wait_for_log("snapshot written", 10s)) << b_->logs();
  ASSERT_EQ(b_->terminate(SIGKILL), 128 + SIGKILL);
  const int at_kill = p.acked_count();
  ASSERT_TRUE(p.wait_acked(at_kill + 20, 10s)) << p.other_error();
  b_ = start(dir_b_, "rb", flags);
  ASSERT_TRUE(b_);
  EXPECT_NE(b_->logs().find("snapshot_seq"), std::string::npos) << b_->logs();
  EXPECT_EQ(b_->logs().find("\"snapshot_seq\":\"0\""), std::string::npos)
      << "recovered without its local snapshot\n" << b_->logs();
  ASSERT_TRUE(p.wait_acked(p.acked_count() + 20, 10s)) << p.other_error();
  p.stop();
  EXPECT_EQ(p.other_error(), "");
  EXPECT_EQ(p.unknown(), 0);  // the stream itself stayed up
  ASSERT_EQ(test::wait_identical({a_.get(), b_.get()}, {"t"}, 30s), "");
  EXPECT_EQ(all_acked_served(*b_, p), "");
  const auto probes = probes_of(p);
  auto sa = test::stub(*a_), sb = test::stub(*b_);
  EXPECT_EQ(test::compare_probes(*sa, *sb, probes), "");
  EXPECT_EQ(a_->terminate(), 0);
  EXPECT_EQ(b_->terminate(), 0);
}

}  // namespace
}  // namespace ic
