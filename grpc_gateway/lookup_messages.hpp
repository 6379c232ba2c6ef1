// Arena-backed LookupRoute messages: the callback API's message allocator for the hottest RPC.
//
// gRPC parses each LookupRoute request into messages this pool hands out. Every holder owns a
// protobuf arena whose first block lives inside the holder, so parsing a request (64 block
// hashes are 64 strings) and building its response allocate nothing on the heap; when gRPC is
// done with the call (`Release`) the arena is reset and the holder goes back to the pool.
//
//   lookup_message_pool pool;                          // outlives the grpc::Server
//   service.SetMessageAllocatorFor_LookupRoute(&pool);
//
// Requests larger than the inline block (long token_ids or prompt_text) spill into heap
// blocks of the arena, freed at the reset. Thread-safe.
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
