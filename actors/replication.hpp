// The replicated journal's apply side (internal to actors/; spec/scaleout.md §3.2): in
// JetStream mode the journal actor only *publishes* a group commit; the stream follower
// (one thread) hands every batch that comes back from the stream to the coordinator, in
// stream order, its own replica's batches included. The sinks of this replica's appends
// wait in `pending_batches` under the batch id (the Nats-Msg-Id) until their batch is
// delivered, so a producer's Ack still means "journaled and applied here".
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "actors/protocol.hpp"
#include "journal/record_log.hpp"
#include "state/credit_batch.hpp"
#include "state/stamp_skew.hpp"
#include "state/options.hpp"

namespace ic::actors {

/// The sinks of published batches whose delivery has not been seen yet. Thread-safe.
class pending_batches {
 public:
  using clock = std::chrono::steady_clock;
  struct item {
    std::shared_ptr<append_sink> sink;
    std::size_t slot = 0;
  };
  /// Registers the sinks of batch `id` (one per record, in record order) before it is
  /// published (a delivery may beat the PubAck); its age counts from now.
  void add(std::string id, std::vector<item> items);
  /// Removes and returns the sinks of `id`; nullopt when unknown or already taken.
  std::optional<std::vector<item>> take(std::string_view id);
  /// Removes and returns the sinks of every batch registered before `cutoff`.
  std::vector<item> take_registered_before(clock::time_point cutoff);
  /// Removes and returns every registered sink.
  std::vector<item> take_all();
  std::size_t size() const;

 private:
  struct batch {
    std::vector<item> items;
    clock::time_point at;
  };
  mutable std::mutex mu_;
  std::unordered_map<std::string, batch> map_;
};

/// What the journal actor needs in replicated mode.
struct replication_link {
  pending_batches pending;
  /// Refuse appends (JOURNAL_UNAVAILABLE) while the apply lag exceeds this; 0 = never.
  /// Also the longest a producer's Ack waits for its published batch to come back from the
  /// stream: past it the Ack is JOURNAL_UNAVAILABLE (outcome unknown: the batch is stored
  /// and is applied without its sinks when it arrives), never a client deadline.
  std::chrono::nanoseconds max_apply_lag{0};
  /// Acks answered JOURNAL_UNAVAILABLE because their batch did not come back within
  /// `max_apply_lag` (counted with the log's unknown outcomes).
  std::atomic<std::uint64_t> acks_expired{0};
  /// Record position of the last policy record this replica applied (the coordinator sets
  /// it; recovery's from the log): a policy push expects it (spec §3.4).
  std::atomic<std::uint64_t> policy_applied{0};
  /// LFU credits of this replica's lookups, published every `credit_interval` (spec §3.4).
  state::credit_batch credits;
  std::chrono::nanoseconds credit_interval = std::chrono::seconds(1);
  /// Set while the stream follower does not apply (a gap: purged past this replica; it
  /// reloads from the shared snapshot meanwhile): appends are refused (JOURNAL_UNAVAILABLE).
  std::atomic<bool> halted{false};
  /// Live reloads after a gap that swapped a new state in.
  std::atomic<std::uint64_t> reloads{0};
  /// Stream time vs producer stamp of the applied batches (the coordinator observes).
  state::stamp_skew stamp_skew;
};

/// The follower thread: `log->follow()` → committed batches for `coordinator`. On a gap
/// (spec/scaleout.md §3.8) it stops applying (`halted`: producers refused), answers the
/// sinks still pending JOURNAL_UNAVAILABLE (outcome unknown), builds the new state off to
/// the side with `state::rebuild_state` (the newest shared snapshot covering the gap plus the
/// stream after it, as at start-up), has the coordinator swap it in at once (lookups serve
/// the old state until then), and follows on. When no shared snapshot covers the gap it
/// logs once and retries every `reload_retry` (a newer shared snapshot may come); producers
/// stay refused and lookups keep serving until then.
class stream_follower {
 public:
  stream_follower(journal::record_log* log, replication_link* link,
                  coordinator_actor coordinator, state::state_options sopts,
                  std::chrono::milliseconds reload_retry = std::chrono::seconds(5));
  /// Stops the thread (returns after it exited).
  ~stream_follower();
  stream_follower(const stream_follower&) = delete;
  stream_follower& operator=(const stream_follower&) = delete;
  void stop();

 private:
  void run();
  /// After a gap: rebuilds and swaps in a new state; false when stopped first.
  bool reload();
  /// Answers every pending sink JOURNAL_UNAVAILABLE (their batches may still be applied).
  void fail_pending();

  journal::record_log* log_;
  replication_link* link_;
  coordinator_actor coordinator_;
  state::state_options sopts_;
  std::chrono::milliseconds reload_retry_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace ic::actors
