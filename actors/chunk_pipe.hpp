// A bounded single-producer/single-consumer queue of snapshot chunks.
//
// The index actor serialises a snapshot into the pipe while the detached snapshot writer
// drains it into the journal, so at most `capacity` chunks (about `capacity` MiB) are in
// memory instead of the whole serialised index. Either side can end the transfer: the
// producer with `close()` (done) and the consumer with `abort()` (a write failed), after
// which `push` returns false and the producer stops serialising.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>

namespace ic::actors {

/// Bounded chunk queue; see the header comment. Thread-safe for one producer and one consumer.
class chunk_pipe {
 public:
  explicit chunk_pipe(std::size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  /// Queues a chunk, waiting while the pipe is full; false once the consumer aborted.
  bool push(std::string chunk) {
    std::unique_lock<std::mutex> lock(mu_);
    not_full_.wait(lock, [&] { return aborted_ || queue_.size() < capacity_; });
    if (aborted_) return false;
    queue_.push_back(std::move(chunk));
    not_empty_.notify_one();
    return true;
  }

  /// Marks the end of the chunks (producer side).
  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    not_empty_.notify_one();
  }

  /// Gives up (consumer side): the producer's next push fails.
  void abort() {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
    queue_.clear();
    not_full_.notify_one();
  }

  /// Takes the next chunk, waiting for one; false at the end (closed and drained) or after
  /// an abort.
  bool pop(std::string& out) {
    std::unique_lock<std::mutex> lock(mu_);
    not_empty_.wait(lock, [&] { return aborted_ || closed_ || !queue_.empty(); });
    if (aborted_ || queue_.empty()) return false;
    out = std::move(queue_.front());
    queue_.pop_front();
    not_full_.notify_one();
    return true;
  }

  /// True when the producer finished normally (meaningful after `pop` returned false).
  bool complete() const {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_ && !aborted_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<std::string> queue_;
  std::size_t capacity_;
  bool closed_ = false;
  bool aborted_ = false;
};

}  // namespace ic::actors
