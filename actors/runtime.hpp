// The actor runtime of inferencecache-server, behind a CAF-free facade.
//
// `runtime::start` recovers the index from the journal (replaying every record through the
// same code as the live path, then one TTL sweep at the current time), spawns the actors and
// returns; from then on callers ask through this class:
//
//   - the journal actor (single writer, detached thread) appends inputs in group commits
//     and hands each committed batch to the index actor;
//   - the index actor owns the index, the policies and quotas (`index_state`), applies
//     committed records, answers lookups and views, and tells subscribers what changed;
//   - a sweep timer journals a TTL sweep every `sweep_interval`.
//
// Every method is thread-safe. `append` and `subscribe` never block; `lookup` and
// `cache_state` read the index on the caller's thread under the shared side of the index
// lock and call `done` before returning (waiting for a writer at most until the deadline);
// the `*_blocking` helpers are for HTTP threads. Append callbacks run on actor threads.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "actors/probe.hpp"
#include "actors/record_codec.hpp"
#include "index/types.hpp"
#include "policy/resolved_policy.hpp"

namespace rocksdb {
class Env;
}  // namespace rocksdb

namespace ic::actors {

/// Runtime configuration (from the server's flags).
struct runtime_options {
  /// Journal directory (RocksDB). Created if missing.
  std::string journal_dir;
  /// `--journal-fsync`. Default false.
  bool fsync = false;
  /// `--max-index-entries`. Default 1,000,000; 0 = unbounded.
  std::int64_t max_entries = 1'000'000;
  /// `--default-ttl`. Default 30 min.
  std::chrono::nanoseconds default_ttl = std::chrono::minutes(30);
  /// `--sweep-interval`. Default 1 min.
  std::chrono::nanoseconds sweep_interval = std::chrono::minutes(1);
  /// `--engine-block-size`. Default 16.
  int block_size = 16;
  /// CAF worker threads; 0 = one per core (at least 2). Default 0.
  std::size_t workers = 0;
  /// RocksDB environment for the journal (tests inject faults); nullptr = the default.
  rocksdb::Env* journal_env = nullptr;
  /// Take a snapshot (then truncate the journal) this often when anything new was applied;
  /// 0 = never by time. Default 10 min.
  std::chrono::nanoseconds snapshot_interval = std::chrono::minutes(10);
  /// Take a snapshot once this many records were applied since the last one; 0 = never by
  /// count. Default 1,000,000.
  std::uint64_t snapshot_every_records = 1'000'000;
  /// Complete snapshots kept in the journal (older ones are deleted). Default 2.
  std::size_t snapshots_kept = 2;
  /// Take a final snapshot on stop() so the next start replays nothing. Default true.
  bool snapshot_on_stop = true;
};

/// The outcome of one snapshot.
struct snapshot_report {
  bool ok = false;
  /// True when there was nothing new to snapshot (or one was already running).
  bool skipped = false;
  std::string error;
  std::uint64_t covering_seq = 0;
  std::uint64_t bytes = 0;
  double seconds = 0;
};

/// What recovery found, for the startup log.
struct recovery_info {
  /// Sequence the loaded snapshot covers (0 = none loaded).
  std::uint64_t snapshot_seq = 0;
  /// Snapshots skipped as corrupt before a usable one was found (one line each).
  std::vector<std::string> skipped_snapshots;
  std::uint64_t records_replayed = 0;
  std::uint64_t last_sequence = 0;
  std::int64_t entries = 0;
  double seconds = 0;
  std::string torn_tail;  ///< non-empty when a torn tail was dropped
};

/// The running actor system. Create with `start`; `stop` (or the destructor) shuts down in
/// reverse order: stop accepting, drain the journal actor, stop the index actor, close the
/// journal.
class runtime {
 public:
  /// Opens the journal, recovers, spawns the actors. On failure returns nullptr with a
  /// one-line `error` naming the file and the problem.
  static std::unique_ptr<runtime> start(const runtime_options& options, runtime_probe* probe,
                                        std::string* error, recovery_info* info = nullptr);
  ~runtime();
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  /// Appends one input; `sink->on_applied(slot, …)` fires once it is journaled and applied,
  /// or refused (JOURNAL_UNAVAILABLE, SHUTTING_DOWN). Inputs from one thread are applied in
  /// call order.
  void append(record_kind kind, std::string payload, std::shared_ptr<append_sink> sink,
              std::size_t slot);

  /// Answers a lookup by `deadline` (steady clock), on the calling thread: `done(response)`
  /// with the index's answer, or with nullopt when the deadline passed first (the caller
  /// answers TIMEOUT).
  void lookup(index::lookup_route_request request,
              std::chrono::steady_clock::time_point deadline,
              std::function<void(std::optional<index::lookup_route_response>)> done);

  /// GetCacheState of (tenant, model); nullopt when the index did not answer by `deadline`.
  void cache_state(std::string tenant, std::string model,
                   std::chrono::steady_clock::time_point deadline,
                   std::function<void(std::optional<index::cache_state_view>)> done);

  /// Registers an observer of index changes (dropped when `offer` returns false).
  void subscribe(std::shared_ptr<event_subscriber> subscriber);

  /// Returns the resolved policy of `tenant` as of the last applied policy push.
  policy::resolved_policy policy_of(const std::string& tenant) const;

  /// Blocking helpers for HTTP threads; nullopt on timeout.
  std::optional<index::snapshot_view> snapshot_blocking(std::chrono::milliseconds timeout);
  std::optional<std::string> policy_json_blocking(std::chrono::milliseconds timeout);
  std::optional<std::vector<std::pair<std::string, std::int64_t>>> entries_by_model_blocking(
      std::chrono::milliseconds timeout);
  /// Runs the /probe self-test inside the index actor (one message, not journaled) and
  /// waits for its outcome; nullopt on timeout.
  std::optional<probe_outcome> probe_blocking(const probe_request& request,
                                              std::chrono::milliseconds timeout);
  /// Appends and waits for the result (e.g. a /policy push); nullopt on timeout.
  std::optional<append_result> append_blocking(record_kind kind, std::string payload,
                                               std::chrono::milliseconds timeout);

  /// Takes a snapshot now (if anything was applied since the last one), writes it and
  /// truncates the journal; nullopt on timeout.
  std::optional<snapshot_report> snapshot_now_blocking(std::chrono::milliseconds timeout);

  /// Refuses new appends with SHUTTING_DOWN from now on.
  void begin_shutdown();

  /// Shuts everything down; idempotent.
  void stop();

 private:
  struct impl;
  explicit runtime(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace ic::actors
