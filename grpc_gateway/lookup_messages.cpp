#include "grpc_gateway/lookup_messages.hpp"

#include <google/protobuf/arena.h>

namespace ic::grpc_gateway {

namespace v1 = inferencecache::v1alpha1;

namespace {

/// Bytes of a holder's inline arena block: a 64-block chain request (64 strings and their
/// arrays) and an answer with a few dozen scores fit with room to spare.
constexpr std::size_t inline_block_bytes = 8192;

google::protobuf::ArenaOptions arena_options(char* block) {
  google::protobuf::ArenaOptions o;
  o.initial_block = block;
  o.initial_block_size = inline_block_bytes;
  o.start_block_size = inline_block_bytes;
  o.max_block_size = 64 * 1024;
  return o;
}

}  // namespace

/// One call's request and response on an arena whose first block is `block_`.
class lookup_message_pool::holder final
    : public grpc::MessageHolder<v1::LookupRouteRequest, v1::LookupRouteResponse> {
 public:
  explicit holder(lookup_message_pool* pool) : pool_(pool), arena_(arena_options(block_)) {
    create_messages();
  }
  void Release() override { pool_->recycle(this); }
  /// Frees everything the last call put on the arena and creates fresh messages.
  void reset() {
    arena_.Reset();
    create_messages();
  }

 private:
  void create_messages() {
    set_request(google::protobuf::Arena::CreateMessage<v1::LookupRouteRequest>(&arena_));
    set_response(google::protobuf::Arena::CreateMessage<v1::LookupRouteResponse>(&arena_));
  }

  lookup_message_pool* pool_;
  alignas(std::max_align_t) char block_[inline_block_bytes];
  google::protobuf::Arena arena_;  // after block_: its first block
};

lookup_message_pool::~lookup_message_pool() {
  for (holder* h : idle_) delete h;
}

grpc::MessageHolder<v1::LookupRouteRequest, v1::LookupRouteResponse>*
lookup_message_pool::AllocateMessages() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      holder* h = idle_.back();
      idle_.pop_back();
      return h;
    }
    ++created_;
  }
  return new holder(this);
}

std::size_t lookup_message_pool::created() const {
  std::lock_guard<std::mutex> lock(mu_);
  return created_;
}

void lookup_message_pool::recycle(holder* h) {
  h->reset();  // outside the lock: runs the arena's cleanups
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < max_idle_) {
      idle_.push_back(h);
      return;
    }
  }
  delete h;
}

}  // namespace ic::grpc_gateway
