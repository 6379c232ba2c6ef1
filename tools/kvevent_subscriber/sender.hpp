// The sender: drains the op log to the server in order, with retry (A16–A18).
//
// One thread. It takes the oldest operation and delivers it before anything that follows:
// any gRPC status other than INVALID_ARGUMENT / UNIMPLEMENTED / PERMISSION_DENIED /
// UNAUTHENTICATED is retried with exponential back-off (×2, ±20 % jitter), and so is
// `Ack{accepted:false}` (JOURNAL_UNAVAILABLE, SHUTTING_DOWN, …); RESOURCE_EXHAUSTED on a CSU
// splits it in half. `Ack{accepted:true, reason_code≠""}` is final (counted by reason).
// After a failure the server is probed with GetCacheState before the operation is retried:
// once it answers, `--resync-after-outage` decides whether the core rebuilds the server's
// view (auto: only when the server lost its state). While idle it probes every
// `idle_probe_ms`, which also catches a fast restart that failed no call: prefixes the server
// had at the previous probe are gone while we still hold reported keys. It talks through
// `cache_client`, so its rules are unit-tested without gRPC.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>

#include "tools/kvevent_subscriber/config.hpp"
#include "tools/kvevent_subscriber/core_metrics.hpp"
#include "tools/kvevent_subscriber/log.hpp"
#include "tools/kvevent_subscriber/ops.hpp"

namespace ic::kvevent {

/// The outcome of one RPC. `code` is the gRPC status code (0 = OK), `code_name` its name.
struct rpc_outcome {
  int code = 0;
  std::string code_name = "OK";
  std::string message;
  bool accepted = true;
  std::string reason;
  double seconds = 0;
};

/// The server's view, as GetCacheState shows it.
struct server_view {
  std::int64_t total_prefixes = 0;
  bool has_replica = false;
};

/// The RPCs the sender and the stats thread need.
class cache_client {
 public:
  virtual ~cache_client() = default;
  /// One ReportCacheState stream carrying one CSU built from an add/t2 op.
  virtual rpc_outcome report(const op& o) = 0;
  /// One PublishEvent built from an evict/clear op.
  virtual rpc_outcome publish(const op& o) = 0;
  /// GetCacheState(tenant, model); nullopt when the call failed.
  virtual std::optional<server_view> get_state() = 0;
};

/// RPC counters of the sender and the stats thread (labels: rpc × result).
class rpc_metrics {
 public:
  void record(const char* rpc, const rpc_outcome& o);
  void ack_reason(const std::string& reason);
  void add_dropped(std::uint64_t n = 1) { dropped_ += n; }
  std::map<std::pair<std::string, std::string>, std::uint64_t> totals() const;
  std::map<std::string, std::uint64_t> ack_reasons() const;
  /// Histogram: bucket upper bounds, cumulative counts, sum, count; per rpc.
  struct histogram {
    std::vector<std::uint64_t> buckets;
    double sum = 0;
    std::uint64_t count = 0;
  };
  std::map<std::string, histogram> durations() const;
  static const std::vector<double>& bounds();
  std::uint64_t dropped() const { return dropped_.load(); }
  std::uint64_t count(const std::string& rpc, const std::string& result) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::uint64_t> totals_;
  std::map<std::string, std::uint64_t> reasons_;
  std::map<std::string, histogram> durations_;
  std::atomic<std::uint64_t> dropped_{0};
};

struct sender_options {
  std::int64_t initial_backoff_ms = 100;
  std::int64_t max_backoff_ms = 5000;
  resync_policy resync = resync_policy::automatic;
  std::int64_t stats_interval_ms = 10000;
  /// While the log is empty, probe the server with GetCacheState this often, so an outage
  /// (or a restart that lost the server's state) is noticed even when nothing is being sent:
  /// a subscriber whose engine only re-stores cached blocks may send nothing for minutes.
  std::int64_t idle_probe_ms = 5000;
};

class sender {
 public:
  using resync_fn = std::function<void(resync_reason)>;
  using clock_fn = std::function<std::int64_t()>;  ///< monotonic ms

  sender(sender_options o, op_log& log, cache_client& client, resync_fn resync, core_metrics& core,
         rpc_metrics& rpc, logger* log_, clock_fn clock);

  /// Delivers until `stop()`; then, until the log is empty or the drain deadline passes.
  void run();

  /// Ends `run` once the log is drained, or at `deadline_ms` at the latest.
  void drain_until(std::int64_t deadline_ms) { drain_deadline_ms_ = deadline_ms; stopping_ = true; log_.wake(); }
  /// Ends `run` at once (the second signal).
  void abort() { aborted_ = true; stopping_ = true; log_.wake(); }

  /// The stats thread delivered a sample at `now_ms` (input of the `auto` resync rule).
  void note_stats_delivered(std::int64_t now_ms) { last_stats_ms_ = now_ms; }

  bool failing() const { return failing_.load(); }
  std::int64_t failing_since_ms() const { return failing_since_ms_.load(); }
  /// True while an operation is taken from the log but not yet acknowledged.
  bool busy() const { return busy_.load(); }

 private:
  enum class result { delivered, dropped, abandoned };
  result deliver(op& o);
  rpc_outcome call(const op& o);
  bool recovered_after_outage(bool* resynced);
  void idle_probe();
  void backoff_sleep();
  bool should_quit() const;
  void wait_for_resync(std::uint64_t generation);

  sender_options opts_;
  op_log& log_;
  cache_client& client_;
  resync_fn resync_;
  core_metrics& core_;
  rpc_metrics& rpc_;
  logger* logger_;
  clock_fn clock_;

  std::atomic<bool> stopping_{false}, aborted_{false}, busy_{false}, failing_{false};
  std::atomic<std::int64_t> drain_deadline_ms_{0}, last_stats_ms_{0}, failing_since_ms_{0};
  std::int64_t backoff_ms_;
  bool outage_ = false;
  std::int64_t last_probe_ms_ = 0;
  std::int64_t last_total_ = -1;  ///< total_prefixes at the previous successful probe
  std::mt19937_64 rng_{0x5eed};
  std::map<std::string, bool> warned_reasons_;
};

}  // namespace ic::kvevent
