#include "grpc_gateway/lookup_messages.hpp"

#include <memory>
#include <string>

namespace ic::grpc_gateway {

namespace v1 = inferencecache::v1alpha1;

namespace {

/// Bytes a string field holds beyond its object (short strings live inside it).
std::size_t heap_bytes(const std::string& s) { return s.capacity() > 15 ? s.capacity() : 0; }

/// About what the two messages of one call hold (what Clear() keeps): the sizes of the fields
/// that grow with the request or the answer.
std::size_t held_bytes(const v1::LookupRouteRequest& q, const v1::LookupRouteResponse& r) {
  std::size_t n = heap_bytes(q.prompt_text()) + heap_bytes(q.prefix_hash()) +
                  heap_bytes(q.model_id()) + heap_bytes(q.tenant_id()) +
                  heap_bytes(q.hash_scheme()) + heap_bytes(q.adapter_id());
  n += static_cast<std::size_t>(q.block_hashes_size()) * sizeof(std::string);
  for (const auto& h : q.block_hashes()) n += heap_bytes(h);
  n += static_cast<std::size_t>(q.block_token_counts_size()) * sizeof(std::int32_t);
  n += static_cast<std::size_t>(q.token_ids_size()) * sizeof(std::uint32_t);
  n += static_cast<std::size_t>(r.replica_scores_size()) * sizeof(v1::ReplicaScore);
  for (const auto& s : r.replica_scores()) n += heap_bytes(s.replica_id());
  n += static_cast<std::size_t>(r.token_ids_size()) * sizeof(std::uint32_t);
  n += heap_bytes(r.reason_code()) + heap_bytes(r.adapter_id());
  return n;
}

}  // namespace

/// One call's request and response, cleared (not freed) between calls.
class lookup_message_pool::holder final
    : public grpc::MessageHolder<v1::LookupRouteRequest, v1::LookupRouteResponse> {
 public:
  explicit holder(lookup_message_pool* pool)
      : pool_(pool),
        request_(std::make_unique<v1::LookupRouteRequest>()),
        response_(std::make_unique<v1::LookupRouteResponse>()) {
    publish();
  }
  void Release() override { pool_->recycle(this); }
  /// Readies the messages for the next call: cleared, or new ones after a large call.
  void reset() {
    if (held_bytes(*request_, *response_) > max_kept_bytes) {
      request_ = std::make_unique<v1::LookupRouteRequest>();
      response_ = std::make_unique<v1::LookupRouteResponse>();
      publish();
      return;
    }
    request_->Clear();
    response_->Clear();
  }

 private:
  void publish() {
    set_request(request_.get());
    set_response(response_.get());
  }

  lookup_message_pool* pool_;
  std::unique_ptr<v1::LookupRouteRequest> request_;
  std::unique_ptr<v1::LookupRouteResponse> response_;
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
  h->reset();  // outside the lock
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
