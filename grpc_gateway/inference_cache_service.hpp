// The `inferencecache.v1alpha1.InferenceCache` gRPC service (callback API).
//
// Handlers only translate protobuf to domain requests, ask the actor runtime, and translate
// back; they never block a gRPC callback thread (every answer is delivered from the
// runtime's callback). Fail-open outcomes are normal responses: a lookup whose deadline
// (min(client deadline, the tenant's lookupTimeoutMs)) passes answers TIMEOUT, never an
// error. A lookup that reads `prompt_text` is tokenized first by the tokenize service (its
// own threads, under the same deadline, 5 s when there is no other), then asked like a
// token_ids lookup. LookupPDRoute asks the request tenant's actor under the same deadline
// rule (TIMEOUT, never an error; no LFU credit); RenderTemplate answers on the gRPC thread
// from the /templates snapshot (no actor hop; pd-templates.md §2, §3).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <condition_variable>
#include <vector>

#include "actors/runtime.hpp"
#include "grpc_gateway/lookup_messages.hpp"
#include "grpc_gateway/owed_calls.hpp"
#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "tokenizer/tokenize_service.hpp"

namespace ic::grpc_gateway {

/// Observes the gateway for metrics (implemented by the composition root).
class gateway_probe {
 public:
  virtual ~gateway_probe() = default;
  /// One LookupRoute answered (exactly one call per RPC).
  virtual void on_lookup(const std::string& /*model*/, const std::string& /*reason_code*/,
                         bool /*hint_used*/, double /*seconds*/) {}
  /// Inputs dropped before reaching the journal (RESERVED_TENANT), by reason.
  virtual void on_dropped(const std::string& /*reason*/, std::int64_t /*count*/) {}
  /// One prompt_text tokenization ended (`outcome` = tokenizer::outcome_name).
  virtual void on_tokenize(std::string_view /*outcome*/, double /*seconds*/) {}
  /// One LookupPDRoute answered (exactly one call per RPC).
  virtual void on_pd_lookup(const std::string& /*model*/, const std::string& /*reason_code*/,
                            bool /*hint_used*/, double /*seconds*/) {}
  /// One RenderTemplate answered.
  virtual void on_render(const std::string& /*reason_code*/, double /*seconds*/) {}
};

/// One current metric series for StreamMetrics (spec/extensions.md §6).
struct metric_sample {
  std::string name;
  std::string type;  ///< "counter" | "gauge" | "histogram"
  std::map<std::string, std::string> labels;
  double value = 0;
  /// The family name a filter entry may name (e.g. "..._latency_seconds" for its _bucket).
  std::string family;
};

/// Service options, from the server's flags.
struct service_options {
  /// Upper bound on a lookup without any deadline (client or policy). Default 10 s.
  std::chrono::milliseconds max_lookup_wait{10'000};
  /// Bound on GetCacheState. Default 10 s.
  std::chrono::milliseconds state_timeout{10'000};
  /// In-flight ReportCacheState messages per stream before reading pauses. Default 256.
  std::size_t max_inflight_per_stream = 256;
  /// Buffered messages per StreamCacheEvents / StreamMetrics subscriber. Default 4096.
  std::size_t stream_buffer = 4096;
  /// `--metrics-stream-interval`. Default 5 s.
  std::chrono::nanoseconds metrics_interval = std::chrono::seconds(5);
  /// Tokenizes `prompt_text` (not owned; outlives the service). Default none: prompt_text
  /// lookups fail open.
  tokenizer::tokenize_service* tokenizer = nullptr;
  /// Bound on a prompt_text lookup without any other deadline (spec/lookup.md H2). Default 5 s.
  std::chrono::milliseconds default_tokenize_bound{5'000};
};

class stream_registry;

/// The InferenceCache service. Thread-safe; owned by the composition root, registered with
/// one grpc::Server, and outlived by the runtime it asks.
class inference_cache_service final
    : public inferencecache::v1alpha1::InferenceCache::CallbackService {
 public:
  /// A service that answers UNAVAILABLE until `attach` hands it the recovered runtime.
  inference_cache_service(gateway_probe* probe,
                          std::function<std::vector<metric_sample>()> metrics_source,
                          service_options options = {});
  ~inference_cache_service() override;

  /// Starts serving from `runtime` (after recovery); it must outlive the gRPC server.
  void attach(actors::runtime* runtime) { runtime_.store(runtime); }

  /// Ends every open server stream (UNAVAILABLE) and stops the metrics ticker; call before
  /// grpc::Server::Shutdown so shutdown does not wait for long-lived streams.
  void close_streams();

  /// RPCs whose answer is still owed (owed_calls.hpp); a graceful stop waits for zero.
  const owed_calls& owed() const { return owed_; }

  grpc::ServerUnaryReactor* RenderTemplate(
      grpc::CallbackServerContext* ctx, const inferencecache::v1alpha1::RenderTemplateRequest* req,
      inferencecache::v1alpha1::RenderTemplateResponse* resp) override;

  grpc::ServerUnaryReactor* LookupRoute(
      grpc::CallbackServerContext* ctx, const inferencecache::v1alpha1::LookupRouteRequest* req,
      inferencecache::v1alpha1::LookupRouteResponse* resp) override;

  grpc::ServerUnaryReactor* LookupPDRoute(
      grpc::CallbackServerContext* ctx, const inferencecache::v1alpha1::LookupPDRouteRequest* req,
      inferencecache::v1alpha1::LookupPDRouteResponse* resp) override;

  grpc::ServerUnaryReactor* GetCacheState(
      grpc::CallbackServerContext* ctx, const inferencecache::v1alpha1::GetCacheStateRequest* req,
      inferencecache::v1alpha1::GetCacheStateResponse* resp) override;

  grpc::ServerReadReactor<inferencecache::v1alpha1::CacheStateUpdate>* ReportCacheState(
      grpc::CallbackServerContext* ctx, inferencecache::v1alpha1::Ack* ack) override;

  grpc::ServerUnaryReactor* PublishEvent(grpc::CallbackServerContext* ctx,
                                         const inferencecache::v1alpha1::CacheEvent* event,
                                         inferencecache::v1alpha1::Ack* ack) override;

  grpc::ServerWriteReactor<inferencecache::v1alpha1::CacheEvent>* StreamCacheEvents(
      grpc::CallbackServerContext* ctx,
      const inferencecache::v1alpha1::StreamEventsRequest* req) override;

  grpc::ServerWriteReactor<inferencecache::v1alpha1::Metric>* StreamMetrics(
      grpc::CallbackServerContext* ctx,
      const inferencecache::v1alpha1::StreamMetricsRequest* req) override;

 private:
  void metrics_ticker();
  /// Asks the runtime for `request` and finishes the RPC with its answer (TIMEOUT, echoing
  /// any prompt tokens, when `deadline` passes first).
  void ask_lookup(actors::runtime* rt, index::lookup_route_request request,
                  std::chrono::steady_clock::time_point deadline, grpc::ServerUnaryReactor* reactor,
                  inferencecache::v1alpha1::LookupRouteResponse* resp,
                  std::chrono::steady_clock::time_point start);
  /// The default reactor of a unary call, now owed an answer (owed_calls.hpp).
  grpc::ServerUnaryReactor* open_unary(grpc::CallbackServerContext* ctx);
  /// The attached runtime, or nullptr after answering UNAVAILABLE (still recovering).
  actors::runtime* runtime_or_recovering(grpc::ServerUnaryReactor* reactor);
  /// Finishes a unary call on the default reactor and stops owing it.
  void answer(grpc::ServerUnaryReactor* reactor, const grpc::Status& status);
  /// Finishes a LookupRoute with `resp` as filled (latency and metrics added here).
  void finish_lookup(grpc::ServerUnaryReactor* reactor,
                     inferencecache::v1alpha1::LookupRouteResponse* resp, const std::string& model,
                     std::chrono::steady_clock::time_point start);

  std::atomic<actors::runtime*> runtime_{nullptr};
  gateway_probe* probe_;
  std::function<std::vector<metric_sample>()> metrics_source_;
  service_options options_;
  std::shared_ptr<stream_registry> streams_;
  owed_calls owed_;
  /// LookupRoute's request and response live on pooled arenas (lookup_messages.hpp).
  lookup_message_pool lookup_messages_;
  std::mutex ticker_mu_;
  std::condition_variable ticker_cv_;
  bool ticker_stop_ = false;
  std::thread ticker_;
};

}  // namespace ic::grpc_gateway
