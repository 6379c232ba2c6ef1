// A bounded, thread-safe queue in front of one server-streaming reactor.
//
// Producers (an actor thread, the metrics ticker) `push` messages from any thread; the
// channel writes them one at a time in order. When the buffer is full the stream is ended
// with RESOURCE_EXHAUSTED (the subscriber resubscribes) instead of slowing the producer.
// `close` ends the stream with a status after the write in flight. The reactor calls
// `on_write_done` / `on_done`; after `on_done` every push returns false.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

#include "grpc_gateway/owed_calls.hpp"

namespace ic::grpc_gateway {

/// Something that can be ended from outside (server shutdown).
class closable {
 public:
  virtual ~closable() = default;
  virtual void close(const grpc::Status& status) = 0;
};

template <class T>
class stream_channel final : public closable {
 public:
  explicit stream_channel(std::size_t capacity) : capacity_(capacity) {}

  /// Binds the reactor that writes (call once, before any push).
  void attach(grpc::ServerWriteReactor<T>* reactor) {
    std::lock_guard<std::mutex> lock(mu_);
    reactor_ = reactor;
  }

  /// Queues `msg`; false when the stream is over (closed, cancelled, or just overflowed).
  bool push(T msg) {
    std::unique_lock<std::mutex> lock(mu_);
    if (ending_ || reactor_ == nullptr) return false;
    if (queue_.size() >= capacity_) {
      overflowed_ = true;
      begin_end(lock, grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                   "subscriber fell behind its buffer; resubscribe"));
      return false;
    }
    queue_.push_back(std::move(msg));
    if (writing_) return true;
    writing_ = true;
    T* next = &queue_.front();
    auto* r = reactor_;
    lock.unlock();
    r->StartWrite(next);
    return true;
  }

  /// Ends the stream with `status` once the write in flight (if any) completes.
  void close(const grpc::Status& status) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (ending_ || reactor_ == nullptr) return;
    begin_end(lock, status);
  }

  /// True once the stream is ending or over (nothing more will be written).
  bool ended() const {
    std::lock_guard<std::mutex> lock(mu_);
    return ending_ || reactor_ == nullptr;
  }

  /// True when the stream ended because the buffer overflowed.
  bool overflowed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return overflowed_;
  }

  /// Reactor callback: the last write finished.
  void on_write_done(bool ok) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!queue_.empty()) queue_.pop_front();
    if (!ok && !ending_) {
      ending_ = true;
      status_ = grpc::Status(grpc::StatusCode::CANCELLED, "write failed");
    }
    if (ending_) {
      writing_ = false;
      finish(lock);
      return;
    }
    if (queue_.empty()) {
      writing_ = false;
      return;
    }
    T* next = &queue_.front();
    auto* r = reactor_;
    lock.unlock();
    r->StartWrite(next);
  }

  /// Reactor callback: the RPC is over; the reactor is about to be deleted.
  void on_done() {
    std::lock_guard<std::mutex> lock(mu_);
    ending_ = true;
    reactor_ = nullptr;
    queue_.clear();
  }

 private:
  void begin_end(std::unique_lock<std::mutex>& lock, grpc::Status status) {
    ending_ = true;
    status_ = std::move(status);
    if (!writing_) finish(lock);
  }

  void finish(std::unique_lock<std::mutex>& lock) {
    if (finished_ || reactor_ == nullptr) return;
    finished_ = true;
    auto* r = reactor_;
    grpc::Status st = status_.value_or(grpc::Status::OK);
    lock.unlock();
    r->Finish(st);
  }

  mutable std::mutex mu_;
  grpc::ServerWriteReactor<T>* reactor_ = nullptr;
  bool overflowed_ = false;
  std::deque<T> queue_;
  std::size_t capacity_;
  bool writing_ = false;
  bool ending_ = false;
  bool finished_ = false;
  std::optional<grpc::Status> status_;
};

/// The reactor of a server stream fed by a `stream_channel`.
template <class T>
class channel_reactor final : public grpc::ServerWriteReactor<T> {
 public:
  /// `owed` (may be null) counts this stream from construction to OnDone (owed_calls.hpp).
  channel_reactor(std::shared_ptr<stream_channel<T>> channel, owed_calls* owed)
      : channel_(std::move(channel)), owed_(owed) {
    if (owed_) owed_->open();
    channel_->attach(this);
  }
  void OnWriteDone(bool ok) override { channel_->on_write_done(ok); }
  void OnCancel() override {
    channel_->close(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
  }
  void OnDone() override {
    channel_->on_done();
    if (owed_) owed_->close();
    delete this;
  }

 private:
  std::shared_ptr<stream_channel<T>> channel_;
  owed_calls* owed_;
};

}  // namespace ic::grpc_gateway
