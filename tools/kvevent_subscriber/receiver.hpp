// The ZMQ receiver thread (spec §4.3): every socket in one poll loop, nothing else.
//
// A SUB per source (connected, `rcvhwm` 100 000, `linger` 0, `maxmsgsize` 64 MiB) and, while
// the core asks for a replay, a DEALER per source to the engine's ROUTER (`linger` 0,
// `rcvhwm` 0). It only receives, splits frames (payload = last frame; sequence = the
// 8-byte frame before it; topic = frame 0 of 3) and pushes onto a bounded queue; when the
// queue is full it stops reading (ZMQ's HWM then drops at the PUB, and the sequence
// numbers show the gap). It never waits on gRPC. Sockets are created, used and closed in
// this thread only; `request_replay` / `cancel_replay` are commands it picks up.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tools/kvevent_subscriber/core.hpp"
#include "tools/kvevent_subscriber/core_metrics.hpp"
#include "tools/kvevent_subscriber/log.hpp"

namespace ic::kvevent {

/// One item from the receiver to the core.
struct inbound {
  enum class kind : std::uint8_t { live, replay, replay_end } k = kind::live;
  std::size_t source = 0;
  raw_message m;
};

/// A bounded blocking FIFO (one producer, one consumer).
class inbound_queue {
 public:
  /// At most `cap` items and `max_bytes` of payload (one item always fits): a burst of large
  /// batches cannot balloon the sidecar's memory; beyond it the receiver stops reading.
  explicit inbound_queue(std::size_t cap, std::size_t max_bytes = std::size_t{32} << 20)
      : cap_(cap), max_bytes_(max_bytes) {}
  /// Waits for room up to `timeout`; false when still full (the caller retries or stops).
  bool push(inbound&& x, std::chrono::milliseconds timeout);
  /// Waits for an item up to `timeout`.
  bool pop(inbound& out, std::chrono::milliseconds timeout);
  std::size_t size() const;
  void wake() { cv_.notify_all(); }

 private:
  std::size_t cap_;
  std::size_t max_bytes_;
  std::size_t bytes_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<inbound> q_;
};

class zmq_receiver : public replay_port {
 public:
  zmq_receiver(std::vector<std::string> endpoints, std::vector<std::string> replay_endpoints, std::string topic,
               inbound_queue& q, core_metrics& metrics, logger* log);
  ~zmq_receiver() override;

  /// Creates the SUB sockets (in the calling thread, which must then call `run`); false
  /// and `*err` when an endpoint is invalid.
  bool open(std::string* err);
  /// Polls until `stop()`.
  void run();
  void stop() { stop_ = true; }

  void request_replay(std::size_t source, std::uint64_t start_seq) override;
  void cancel_replay(std::size_t source) override;

  /// Monotonic ms of the last completed loop iteration (for /healthz).
  std::int64_t last_loop_ms() const { return last_loop_ms_.load(); }

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
  std::atomic<bool> stop_{false};
  std::atomic<std::int64_t> last_loop_ms_{0};
};

/// Monotonic milliseconds.
std::int64_t mono_ms();

}  // namespace ic::kvevent
