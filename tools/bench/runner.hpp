// The load machinery of inferencecache-bench: a closed-loop driver for unary calls over the
// gRPC callback API (LookupRoute and Health/Check go through the very same code, so their
// latencies compare), and multi-threaded ReportCacheState producers (optionally paced).
//
// Every loop is bounded: it stops at its deadline or after its request budget, whichever
// comes first, and waits for every call in flight before returning.
//
//   auto channels = make_channels("127.0.0.1:9090", 2);
//   health_calls health(channels, concurrency);
//   loop_result r = run_closed_loop(health, concurrency, {5.0, 0}, "baseline");
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include "grpc/health/v1/health.grpc.pb.h"
#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "tools/bench/pd_workload.hpp"
#include "tools/bench/workload.hpp"

namespace ic::tools::bench {

namespace v1 = inferencecache::v1alpha1;

/// When a loop stops: after `duration_s` seconds or `max_requests` calls (0 = no count limit).
struct limits {
  double duration_s = 5;
  std::uint64_t max_requests = 0;
};

/// Opens `n` channels to `target`, each with its own TCP connection.
std::vector<std::shared_ptr<grpc::Channel>> make_channels(const std::string& target, int n);

/// One kind of unary call that the closed loop drives, slot by slot.
class unary_calls {
 public:
  virtual ~unary_calls() = default;
  /// Builds the next request of `slot` (not timed).
  virtual void prepare(int slot) = 0;
  /// Starts the call of `slot`; gRPC calls `done` exactly once.
  virtual void start(int slot, grpc::ClientContext* ctx, std::function<void(grpc::Status)> done) = 0;
  /// A label for the answer just received on `slot` (a reason code), tallied by the loop.
  virtual std::string label(int slot) = 0;
};

/// Health/Check calls: the transport's floor.
class health_calls final : public unary_calls {
 public:
  health_calls(const std::vector<std::shared_ptr<grpc::Channel>>& channels, int slots);
  void prepare(int) override {}
  void start(int slot, grpc::ClientContext* ctx, std::function<void(grpc::Status)> done) override;
  std::string label(int slot) override;

 private:
  std::vector<std::unique_ptr<grpc::health::v1::Health::Stub>> stubs_;
  std::vector<grpc::health::v1::HealthCheckRequest> req_;
  std::vector<grpc::health::v1::HealthCheckResponse> resp_;
};

/// One CacheStateUpdate per (tenant, replica) placement, for a message of several chains.
using updates_by_place = std::map<std::pair<int, int>, v1::CacheStateUpdate>;

/// Appends the first `blocks` blocks of `chain` (tier T1) to the update of the chain's
/// placement in `by_place`, creating that update with the workload's names when new.
void add_chain_report(const workload& w, std::uint64_t chain, int blocks, updates_by_place* by_place);

/// Sets `req` to the LookupRoute of the whole chain `chain` of `w` (cleared first).
void whole_chain_lookup(const workload& w, std::uint64_t chain, v1::LookupRouteRequest* req);

/// Sets `req` to the LookupPDRoute of chain `chain` of `w` against the tenant's `bench-pd`
/// topology: the deepest block's hash and the chain's token count (pd-templates.md §2.1).
void whole_chain_pd_lookup(const workload& w, std::uint64_t chain, v1::LookupPDRouteRequest* req);

/// Chains drawn uniformly from the first `chains` chains, one generator per slot; two
/// pickers with the same seed draw the same chains slot by slot.
class chain_picker {
 public:
  chain_picker(int slots, std::uint64_t chains, std::uint64_t seed);
  std::uint64_t next(int slot);

 private:
  std::uint64_t chains_;
  std::vector<std::mt19937_64> rng_;
};

/// LookupRoute calls for whole chains drawn by a chain_picker.
class lookup_calls final : public unary_calls {
 public:
  lookup_calls(const std::vector<std::shared_ptr<grpc::Channel>>& channels, int slots,
               const workload& w, std::uint64_t chains, std::uint64_t seed);
  void prepare(int slot) override;
  void start(int slot, grpc::ClientContext* ctx, std::function<void(grpc::Status)> done) override;
  std::string label(int slot) override;

  /// The server's own `lookup_latency_us` of every answer so far (all slots merged).
  std::vector<double> server_latencies_us() const;

 private:
  const workload& w_;
  chain_picker picker_;
  std::vector<std::unique_ptr<v1::InferenceCache::Stub>> stubs_;
  std::vector<v1::LookupRouteRequest> req_;
  std::vector<v1::LookupRouteResponse> resp_;
  std::vector<std::vector<double>> server_us_;
};

/// LookupPDRoute calls for the chains a lookup_calls of the same seed draws; each answer is
/// labelled by pd_answer_label against the replica that holds its chain.
class pd_calls final : public unary_calls {
 public:
  pd_calls(const std::vector<std::shared_ptr<grpc::Channel>>& channels, int slots,
           const workload& w, const pd_shape& shape, std::uint64_t chains, std::uint64_t seed);
  void prepare(int slot) override;
  void start(int slot, grpc::ClientContext* ctx, std::function<void(grpc::Status)> done) override;
  std::string label(int slot) override;

 private:
  const workload& w_;
  pd_shape shape_;
  chain_picker picker_;
  std::vector<std::unique_ptr<v1::InferenceCache::Stub>> stubs_;
  std::vector<v1::LookupPDRouteRequest> req_;
  std::vector<v1::LookupPDRouteResponse> resp_;
  std::vector<std::string> holder_;  ///< the replica holding the slot's chain
};

/// What a closed loop measured.
struct loop_result {
  std::vector<double> latencies_us;  ///< successful calls only
  std::uint64_t ok = 0;
  std::uint64_t errors = 0;
  double elapsed_s = 0;
  std::string first_error;
  std::map<std::string, std::uint64_t> labels;  ///< answers by label (reason code)
};

/// Adds the calls, samples, time and labels of `r` to `*into` (phases of one kind merged).
void merge_into(loop_result* into, const loop_result& r);

/// Drives `calls` with `concurrency` calls always in flight until `lim`; `name` tags progress
/// lines on stderr.
loop_result run_closed_loop(unary_calls& calls, int concurrency, limits lim, const std::string& name);

/// How ReportCacheState producers behave.
struct ingest_options {
  int producers = 2;               ///< concurrent streams; default 2
  int messages_per_stream = 8;     ///< CacheStateUpdate messages per stream; default 8
  int chains_per_message = 16;     ///< sessions advanced per message; default 16
  double rate_blocks_per_s = 0;    ///< total target rate; 0 = as fast as possible
  std::uint64_t first_chain = 0;   ///< first chain id used
  std::uint64_t max_chains = 0;    ///< stop after this many chains were started; 0 = no limit
  limits lim;                      ///< max_requests counts messages
};

/// What the producers measured.
struct ingest_result {
  std::uint64_t blocks_acked = 0;   ///< blocks in streams that ended with an accepting Ack
  std::uint64_t messages = 0;
  std::uint64_t streams = 0;
  std::uint64_t errors = 0;
  std::uint64_t chains_started = 0;
  double elapsed_s = 0;
  std::vector<double> stream_latency_us;  ///< first write to Ack
  std::vector<double> ack_wait_us;        ///< WritesDone to Ack
  std::string first_error;
  std::map<std::string, std::uint64_t> ack_reasons;
};

/// Runs the producers until `opts.lim`, `opts.max_chains` or `*stop` (may be null).
ingest_result run_ingest(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                         const workload& w, const ingest_options& opts,
                         const std::atomic<bool>* stop, const std::string& name);

}  // namespace ic::tools::bench
