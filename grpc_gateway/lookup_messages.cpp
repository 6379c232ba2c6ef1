#include "grpc_gateway/lookup_messages.hpp"

#include <memory>
#include <string>

namespace ic::grpc_gateway {

namespace v1 = inferencecache::v1alpha1;

namespace {

/// About what the two messages of one call hold (what Clear() keeps): their serialized size,
/// which the generated code computes over every field, so a new field is counted too.
std::size_t held_bytes(const v1::LookupRouteRequest& q, const v1::LookupRouteResponse& r) {
  return q.ByteSizeLong() + r.ByteSizeLong();
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
