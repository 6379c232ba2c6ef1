// The gRPC side of the subscriber: one long-lived channel to the server, and the
// translation of operations and stats samples into the contract's messages (A1, A17).
//
// Each `ReportCacheState` is its own client stream carrying one CSU (write, writes-done,
// finish): the Ack arrives only when the stream finishes, so one CSU per stream is what
// lets the sender know exactly which update was accepted. A failed write is still followed
// by Finish to get the real status. The channel is lazy (the process starts while the
// server is down), reconnects with at most 5 s back-off, keepalive 30 s, and is TLS when
// a CA file is given.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "tools/kvevent_subscriber/ops.hpp"
#include "tools/kvevent_subscriber/sender.hpp"
#include "tools/kvevent_subscriber/stats.hpp"

namespace ic::kvevent {

/// Who this subscriber reports as; stamped on every message.
struct identity {
  std::string replica_id, model_id, tenant_id, hash_scheme;
};

/// Creates the channel; `*err` and nullptr when the CA file cannot be read.
std::shared_ptr<grpc::Channel> make_channel(const std::string& target, const std::string& ca_file,
                                            const std::string& server_name, std::string* err);

class grpc_cache_client : public cache_client {
 public:
  grpc_cache_client(std::shared_ptr<grpc::Channel> channel, identity id, const adapter_registry& adapters,
                    std::int64_t rpc_timeout_ms);

  rpc_outcome report(const op& o) override;
  rpc_outcome publish(const op& o) override;
  std::optional<server_view> get_state() override;

  /// One stats-only CSU (no prefixes, timestamp = now on our clock).
  rpc_outcome report_stats(const stats_sample& s, const std::string& client_version);

  /// The CSU an add/t2 op becomes (exposed for tests and the benchmark).
  inferencecache::v1alpha1::CacheStateUpdate to_update(const op& o) const;

 private:
  rpc_outcome send_update(const inferencecache::v1alpha1::CacheStateUpdate& u);
  /// A CSU with the identity fields and `ts_us` set (A1: on every update).
  inferencecache::v1alpha1::CacheStateUpdate header(std::int64_t ts_us) const;

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<inferencecache::v1alpha1::InferenceCache::Stub> stub_;
  identity id_;
  const adapter_registry& adapters_;
  std::int64_t timeout_ms_;
};

/// The name of a gRPC status code ("UNAVAILABLE", …).
std::string grpc_code_name(grpc::StatusCode c);

}  // namespace ic::kvevent
