// The actor runtime of inferencecache-server, behind a CAF-free facade.
//
// `runtime::start` recovers every tenant from the journal (newest snapshot, then the tail
// replayed serially through `state::tenant_set`, then one TTL sweep at the current time), spawns the
// actors and returns; from then on callers ask through this class:
//
//   - the journal actor (single writer, detached thread) appends inputs in group commits and
//     hands each committed batch to the coordinator;
//   - the coordinator dispatches records to the tenant actors in journal order, creating a
//     tenant's actor on its first record, keeps the global cap and the cold-start carve-out
//     exact, sequences policy changes, and takes snapshots at quiescent points;
//   - one tenant actor per tenant owns that tenant's index (`state::tenant_state`): it applies its
//     records, answers its lookups and GetCacheState, and publishes its changes;
//   - the policy actor holds the policy set and broadcasts changes to the tenant actors;
//   - a sweep timer journals a TTL sweep every `sweep_interval`.
//
// Every method is thread-safe and none blocks on an actor except the `*_blocking` helpers
// (for HTTP threads). `lookup` and `cache_state` ask the tenant's actor and answer by the
// deadline: `done` runs on the actor's thread, or on the deadline timer's thread with
// nullopt when the deadline passed first. Append callbacks run on actor threads.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "journal/record_log.hpp"
#include "state/probe.hpp"
#include "state/recover.hpp"
#include "proto/record_codec.hpp"
#include "index/types.hpp"
#include "policy/resolved_policy.hpp"
#include "templates/template_store.hpp"
#include "topology/pd_selector.hpp"
#include "topology/pool_members.hpp"

namespace rocksdb {
class Env;
}  // namespace rocksdb

namespace ic::actors {

/// The journal record type tags `append` takes (proto/record_codec.hpp), part of this
/// facade's vocabulary.
using proto::record_kind;

/// How CAF's workers pick up work.
enum class scheduler_policy {
  /// Idle workers sleep on a condition variable (CAF's `sharing`): a lookup's hop to its
  /// tenant actor wakes one at once.
  sharing,
  /// CAF's work-stealing default: idle workers poll with 50 µs sleeps, which a lookup's hop
  /// would wait out (kept for comparisons).
  stealing,
};

/// Runtime configuration (from the server's flags).
struct runtime_options {
  /// Journal directory (RocksDB). Created if missing.
  std::string journal_dir;
  /// `--journal-fsync`. Default false.
  bool fsync = false;
  /// `--max-index-entries`, `--default-ttl`, `--engine-block-size` (defaults: state_options).
  state::state_options state;
  /// `--sweep-interval`. Default 1 min.
  std::chrono::nanoseconds sweep_interval = std::chrono::minutes(1);
  /// CAF worker threads; 0 = one per core (at least 2). Default 0.
  std::size_t workers = 0;
  /// CAF scheduler. Default `sharing`.
  scheduler_policy scheduler = scheduler_policy::sharing;
  /// The wall clock (Unix µs) that stamps journal records and gives lookups, the start-up
  /// sweep and /probe their `now`; empty = the system clock. Tests pass a fake to control
  /// time. Default empty.
  std::function<index::micros()> clock;
  /// The monotonic clock the runtime's timers are measured on: the snapshot interval and
  /// the back-off after a failed snapshot (checked on every applied batch), and the TTL
  /// sweep's `sweep_interval` (checked on every append and on the journal actor's wake-ups,
  /// which sleep until the next sweep is due on this clock); empty =
  /// std::chrono::steady_clock. Tests pass a fake to trigger a timed snapshot or sweep
  /// without waiting. Default empty.
  std::function<std::chrono::steady_clock::time_point()> timer_clock;
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

  // --- the journal seam (issue #15) ---
  /// Opens the journal; empty = the RocksDB journal in `journal_dir` (fsync, journal_env).
  /// The composition root passes a JetStream log here (`--journal=jetstream`); a replicated
  /// log's batches are applied from a stream follower thread. Default empty.
  std::function<journal::result<std::unique_ptr<journal::record_log>>()> open_journal;
  /// Replicated log only: refuse appends while the apply lag exceeds this (`--max-apply-lag`);
  /// 0 = never. Default 0 (the server passes its flag).
  std::chrono::nanoseconds max_apply_lag{0};
  /// Replicated log only: lookups' LFU credits are collected and published as one record
  /// this often (`--lfu-credit-interval`); every replica applies them from the stream
  /// (spec/scaleout.md §3.4). Default 1 s. The RocksDB journal credits at once, as before.
  std::chrono::nanoseconds lfu_credit_interval = std::chrono::seconds(1);
  /// Replicated log only (`--lfu-credit=local-off`): lookups credit no LFU counter, so LFU
  /// tenants evict like LRU and nothing is published. Default false.
  bool lfu_credits_off = false;
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
  /// What happened to the log below the snapshot, for the log line ("journal truncated
  /// through N"; a replicated stream is not purged by this build).
  std::string truncation;
};

/// What recovery found (state/recover.hpp), part of this facade's vocabulary.
using state::recovery_info;

/// The running actor system. Create with `start`; `stop` (or the destructor) shuts down in
/// reverse order: stop accepting, stop the journal actor, take a final snapshot, stop the
/// coordinator, the tenant actors, the policy actor and the writer, close the journal.
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

  /// Asks the tenant's actor for a lookup, answered by `deadline` (steady clock):
  /// `done(response)` with the index's answer, or `done(nullopt)` when the deadline passed
  /// first (the caller answers TIMEOUT; no LFU credit is then given). A tenant that holds
  /// nothing has no actor and is answered on the calling thread.
  void lookup(index::lookup_route_request request,
              std::chrono::steady_clock::time_point deadline,
              std::function<void(std::optional<index::lookup_route_response>)> done);

  /// GetCacheState of (tenant, model); nullopt when the index did not answer by `deadline`.
  void cache_state(std::string tenant, std::string model,
                   std::chrono::steady_clock::time_point deadline,
                   std::function<void(std::optional<index::cache_state_view>)> done);

  /// Asks the request tenant's actor for a LookupPDRoute decision (pd-templates.md §2.4)
  /// answered by `deadline`: `done(response)`, or `done(nullopt)` when the deadline passed
  /// first (the caller answers TIMEOUT). Never gives LFU credit. A tenant with no actor is
  /// answered on the calling thread.
  void pd_route(topology::pd_route_request request,
                std::chrono::steady_clock::time_point deadline,
                std::function<void(std::optional<topology::pd_route_response>)> done);

  /// Renders a template from the current /templates snapshot (no actor hop: the store is an
  /// immutable snapshot; pd-templates.md §3.3–§3.6). Never blocks.
  templates::render_response render(const templates::render_request& request) const;

  /// The current /topology snapshot (never null, never waits).
  std::shared_ptr<const topology::topology_snapshot> topologies() const;
  /// The GET /topology body: the canonical JSON of the last applied push (also its journal
  /// payload).
  std::string topology_json() const;
  /// The GET /templates body (the set plus each `templateRevision`).
  std::string templates_json() const;
  /// The canonical journal payload of the /templates set in force.
  std::string templates_payload() const;

  /// Registers an observer of index changes (dropped when `offer` returns false).
  void subscribe(std::shared_ptr<event_subscriber> subscriber);

  /// Returns the resolved policy of `tenant` as of the last applied policy push.
  policy::resolved_policy policy_of(const std::string& tenant) const;
  /// Returns the policy set of the last applied push as canonical JSON (never waits: the
  /// set is a shared immutable value).
  std::string policy_json() const;

  /// Blocking helpers for HTTP threads; nullopt on timeout. The views over every tenant
  /// (snapshot, entries by model, canonical dump) are read at a quiescent point: the
  /// coordinator pauses dispatch until they are done.
  std::optional<index::snapshot_view> snapshot_blocking(std::chrono::milliseconds timeout);
  std::optional<std::vector<std::pair<std::string, std::int64_t>>> entries_by_model_blocking(
      std::chrono::milliseconds timeout);
  /// Pool member counts of every topology (the `inferencecache_pd_topology_replicas` gauge),
  /// read at a quiescent point; empty without waiting when no topology is stored.
  std::optional<std::vector<topology::side_members>> pd_members_blocking(
      std::chrono::milliseconds timeout);
  /// Every tenant's index as one canonical dump (tests compare live and replayed state).
  std::optional<std::vector<std::string>> canonical_dump_blocking(
      std::chrono::milliseconds timeout);
  /// Runs the /probe self-test in the reserved tenant's actor (queued behind earlier inputs,
  /// not journaled) and waits for its outcome; nullopt on timeout.
  std::optional<state::probe_outcome> probe_blocking(const state::probe_request& request,
                                              std::chrono::milliseconds timeout);
  /// Appends and waits for the result (e.g. a /policy push); nullopt on timeout.
  std::optional<append_result> append_blocking(record_kind kind, std::string payload,
                                               std::chrono::milliseconds timeout);

  /// Takes a snapshot now (if anything was applied since the last one), writes it and
  /// truncates the journal; nullopt on timeout.
  std::optional<snapshot_report> snapshot_now_blocking(std::chrono::milliseconds timeout);

  /// The journal's counters and positions (metrics, spec §3.9). Never blocks on an actor.
  journal::log_stats journal_stats() const;
  /// True when the replicated journal already holds a policy push (JetStream mode:
  /// `--policy-file` then does not override it, spec §3.4); always false for RocksDB.
  bool journal_holds_policy() const;

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
