// Reused LookupRoute messages: the callback API's message allocator for the hottest RPC.
//
// gRPC parses each LookupRoute request into messages this pool hands out. A holder keeps one
// request and one response for its whole life and only clears them between calls, and
// protobuf's Clear() keeps what the fields allocated (the 64 strings of a chain's block
// hashes, the replica scores, string capacity), so the next call parses and answers into
// memory that is already there: no heap allocation and no per-string arena cleanup in the
// steady state (docs/benchmarks.md, issue #13).
//
//   lookup_message_pool pool;                          // outlives the grpc::Server
//   service.SetMessageAllocatorFor_LookupRoute(&pool);
//
// A call whose messages held more than `max_kept_bytes` (long token_ids or prompt_text, a
// long chain) gets its messages freed and new ones made, so an idle holder keeps at most
// about that much. Thread-safe.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

#include <grpcpp/support/message_allocator.h>

#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::grpc_gateway {

class lookup_message_pool final
    : public grpc::MessageAllocator<inferencecache::v1alpha1::LookupRouteRequest,
                                    inferencecache::v1alpha1::LookupRouteResponse> {
 public:
  /// Bytes a holder's messages may have held in one call and still be kept (cleared).
  static constexpr std::size_t max_kept_bytes = 16 * 1024;

  /// Keeps at most `max_idle` released holders for reuse (others are freed). Default 1024.
  explicit lookup_message_pool(std::size_t max_idle = 1024) : max_idle_(max_idle) {}
  ~lookup_message_pool() override;
  lookup_message_pool(const lookup_message_pool&) = delete;
  lookup_message_pool& operator=(const lookup_message_pool&) = delete;

  grpc::MessageHolder<inferencecache::v1alpha1::LookupRouteRequest,
                      inferencecache::v1alpha1::LookupRouteResponse>*
  AllocateMessages() override;

  /// Holders created so far (reused ones are not counted again); for tests.
  std::size_t created() const;

 private:
  class holder;
  void recycle(holder* h);

  mutable std::mutex mu_;
  std::vector<holder*> idle_;
  std::size_t max_idle_;
  std::size_t created_ = 0;
};

}  // namespace ic::grpc_gateway
