// Shared by the JetStream replica tests (jetstream_replicas_test.cpp: one NATS node;
// jetstream_cluster_test.cpp: the 3-node loopback cluster): starting replicas of the real
// server on one stream, reporting and looking up over gRPC, waiting for a replica to catch
// up, and the convergence check of spec/scaleout.md §3.10 check 1 (identical /snapshot
// JSON, GetCacheState per tenant, LookupRoute answers on a probe set, StreamCacheEvents
// sequences per tenant).
//
//   replicas_fixture (nodes_ = 3):  a_ = start(dir_a_, "ra");  b_ = start(dir_b_, "rb");
//   event_recorder ea(*a_), eb(*b_);   ... workload ...
//   ASSERT_EQ(wait_identical({a_.get(), b_.get()}, {"t"}, 20s), "");
//   EXPECT_EQ(compare_probes(*sa, *sb, probe_set(keys)), "");
//   EXPECT_EQ(compare_events(ea.stop(), eb.stop()), "");
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/client_context.h>
#include <gtest/gtest.h>

#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "journal/jetstream/nats_fixture.hpp"
#include "tests/support/server_process.hpp"
#include "tests/support/test_paths.hpp"

namespace ic::test {

namespace v1 = inferencecache::v1alpha1;

/// The flags of one replica on `nats_urls` (comma-separated), with `nats_replicas` stream
/// replicas, its own data dir and free loopback ports.
std::vector<std::string> replica_args(const std::string& data_dir, const std::string& id,
                                      const std::string& nats_urls, int nats_replicas = 1);

/// Reports `blocks` (64 tokens each) as one prefix held by `replica` of tenant `tenant`
/// (model "llama", scheme "vllm") in one ReportCacheState stream; *rpc gets the status.
v1::Ack report(v1::InferenceCache::Stub& stub, const std::string& replica,
               const std::vector<std::string>& blocks, grpc::Status* rpc = nullptr,
               const std::string& tenant = "t");

/// LookupRoute of `blocks` (64 tokens each) for tenant `tenant`.
v1::LookupRouteResponse lookup(v1::InferenceCache::Stub& stub,
                               const std::vector<std::string>& blocks,
                               const std::string& tenant = "t");

/// Polls (bounded) until `blocks` fully match on `replica` only; false on timeout.
bool converges(v1::InferenceCache::Stub& stub, const std::vector<std::string>& blocks,
               const std::string& replica, std::chrono::milliseconds bound);

/// The value of one series of the server on `http_port`, e.g.
/// `inferencecache_journal_position{kind="applied"}`; NaN when absent.
double metric_value(int http_port, const std::string& series);
/// `inferencecache_journal_position{kind="<kind>"}` of the server on `http_port` (-1: absent).
long long journal_position(int http_port, const std::string& kind);

/// A stub on the server's gRPC port.
std::unique_ptr<v1::InferenceCache::Stub> stub(const server_process& s);

/// Waits (≤ `bound`) until every server applied the same stream position, equal to the
/// stream's last, and then reads /snapshot and GetCacheState of every tenant in `tenants`
/// twice around an unchanged position; returns "" when all are identical, else the last
/// difference seen (the position moves while sweeps or credits are published: retried).
std::string wait_identical(const std::vector<const server_process*>& servers,
                           const std::vector<std::string>& tenants,
                           std::chrono::milliseconds bound);

/// One probe lookup: a tenant and its blocks.
struct probe_prompt {
  std::string tenant;
  std::vector<std::string> blocks;
};

/// Returns `n` probes cycling over `keys` (tenant, first block): every key alone, the key
/// with a block nobody holds after it, and one unknown key in four.
std::vector<probe_prompt> probe_set(const std::vector<std::pair<std::string, std::string>>& keys,
                                    std::size_t n = 1000);

/// Asks every probe of `probes` on `a` and at once on `b` (interleaved, so the two answers
/// are close in time); returns "" when every pair agrees (reason code, replicas in order —
/// or by id when `by_id` — matched tokens, tier, and scores within `score_tolerance`
/// relative: a score carries the freshness at each replica's lookup time, which differs by
/// the time between the two lookups, or by a clock skew), else the first difference.
std::string compare_probes(v1::InferenceCache::Stub& a, v1::InferenceCache::Stub& b,
                           const std::vector<probe_prompt>& probes,
                           double score_tolerance = 1e-4, bool by_id = false);

/// Reads StreamCacheEvents (every tenant) of one server on its own thread from construction
/// (subscribed once the constructor returns) until stop().
class event_recorder {
 public:
  explicit event_recorder(const server_process& s);
  ~event_recorder();
  event_recorder(const event_recorder&) = delete;
  event_recorder& operator=(const event_recorder&) = delete;

  /// One event as "type replica prefix_hash timestamp_us".
  using rendered = std::string;
  /// Waits until no event arrived for `quiet` (≤ 10 s), cancels the stream and returns the
  /// events per tenant in arrival order; a stream that ended early adds an "ERROR ..." entry
  /// under tenant "".
  std::map<std::string, std::vector<rendered>> stop(std::chrono::milliseconds quiet =
                                                        std::chrono::milliseconds(500));
  /// Events received so far.
  std::size_t count() const { return count_.load(); }

 private:
  std::unique_ptr<v1::InferenceCache::Stub> stub_;
  grpc::ClientContext ctx_;
  std::thread reader_;
  mutable std::mutex mu_;
  std::map<std::string, std::vector<rendered>> events_;
  std::atomic<std::size_t> count_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<std::int64_t> last_event_ns_{0};
  std::string error_;
};

/// Returns "" when both recorders saw identical non-empty sequences for every tenant, else
/// the first difference.
std::string compare_events(const std::map<std::string, std::vector<event_recorder::rendered>>& a,
                           const std::map<std::string, std::vector<event_recorder::rendered>>& b);

/// A NATS fixture (`nodes_` nodes: 1, or 3 for the loopback cluster) and two replica slots
/// with their data dirs; skips when nats-server is not installed. Everything it started is
/// stopped by PID in TearDown (the replicas first).
class replicas_fixture : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  /// Starts `binary` (the server, or the test-hook server) as replica `id` on `dir` with
  /// every NATS node's URL, and waits until it is ready (a failure is recorded).
  std::unique_ptr<server_process> start(
      const std::string& dir, const std::string& id, std::vector<std::string> extra = {},
      const std::string& binary = ic::test::executable("inferencecache-server"));
  /// Every NATS node's client URL, comma-separated.
  std::string nats_urls() const;

  int nodes_ = 1;
  std::unique_ptr<journal::jetstream::testing::nats_cluster> nats_;
  std::string dir_a_, dir_b_;
  std::unique_ptr<server_process> a_, b_;
};

}  // namespace ic::test
