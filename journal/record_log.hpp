// The seam between the server and its journal (spec/scaleout.md §3.2): one interface that
// the journal actor, recovery (state/recover) and the snapshot writer use, with two
// implementations:
//
//   - `rocksdb_log` (journal/rocksdb_log.hpp): the embedded RocksDB journal of one data
//     directory. An append is durable and applied by the appender itself (the journal
//     actor hands the committed batch to the coordinator): `replicated() == false`.
//   - `jetstream_log` (journal/jetstream/jetstream_record_log.hpp): a NATS JetStream stream
//     shared by N replicas. An append is only *published*; every replica applies what
//     `follow()` delivers, in stream order, its own appends included:
//     `replicated() == true`. Snapshots stay local (RocksDB, records kept elsewhere).
//
// Positions. Every record has a position; positions increase in log order. rocksdb: the
// journal sequence number. jetstream: `record_position(stream_seq, i)` for the i-th record
// of the envelope at stream sequence `stream_seq`, so a snapshot taken between two records
// of one envelope still names exactly what it covers.
//
//   std::unique_ptr<record_log> log = ...;                  // one of the two
//   (void)log->read_after(snapshot_covering, apply);        // recovery: to the end as of now
//   auto first = log->append(records);                      // producer (one thread)
//   log->follow(deliver, stop);                             // replicated: the apply thread
//
// Errors are values (journal/status.hpp). Plain C++17: no RocksDB, NATS, CAF header here.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "journal/log.hpp"
#include "journal/status.hpp"

namespace ic::journal {

/// Bits of a replicated record position that hold the record's index in its envelope.
inline constexpr unsigned record_index_bits = 16;
/// The most records one replicated append may carry.
inline constexpr std::size_t max_records_per_batch = std::size_t{1} << record_index_bits;

/// Returns the position of record `index` of the envelope at stream sequence `stream_seq`.
constexpr std::uint64_t record_position(std::uint64_t stream_seq, std::uint64_t index) {
  return (stream_seq << record_index_bits) | index;
}
/// Returns the stream sequence a replicated position belongs to.
constexpr std::uint64_t stream_seq_of(std::uint64_t position) {
  return position >> record_index_bits;
}
/// Returns the record index within its envelope of a replicated position.
constexpr std::uint64_t record_index_of(std::uint64_t position) {
  return position & ((std::uint64_t{1} << record_index_bits) - 1);
}

/// One group commit as `follow()` delivers it. Views are valid during the call only.
struct log_batch {
  /// The batch's id (the envelope's Nats-Msg-Id): how an appender finds its own batches.
  std::string_view batch_id;
  /// The records in append order; `seq` is each record's position.
  const std::vector<record_view>* records = nullptr;
  /// When the log stored it (ns since the epoch; 0 when unknown): a cross-check for the
  /// apply lag, never a clock records are applied at.
  std::int64_t stored_at_ns = 0;
};

/// A caller-chosen batch identity: replicas appending the same key inside the log's
/// de-duplication window store one batch (spec §3.4, TTL sweeps `sweep.<period>.<slot>`).
struct dedup_key {
  std::string scope;          ///< [A-Za-z0-9_-]+, e.g. "sweep"
  std::uint64_t period = 0;   ///< e.g. the sweep interval in µs
  std::uint64_t slot = 0;     ///< e.g. floor(now / period)
};

/// The scope of policy pushes in append_conditional (spec §3.4: a push from a replica that
/// has not applied the newest policy loses; JetStream subject `<prefix>.policy`).
inline constexpr const char* policy_scope = "policy";

/// Counters and gauges for metrics (spec §3.9); fields a log does not have stay 0.
/// Positions here are in the log's own numbering (rocksdb: sequence; jetstream: stream
/// sequence), as operators compare them with `nats stream info`.
struct log_stats {
  bool replicated = false;
  /// False while the connection to the replicated log is down (always true for rocksdb).
  bool connected = true;
  /// The highest position known to exist (rocksdb: last sequence; jetstream: the highest
  /// stream sequence seen in an ack, a delivery or the stream's state).
  std::uint64_t log_position = 0;
  /// The position of the last batch handed over by read_after()/follow().
  std::uint64_t delivered_position = 0;
  /// When the log stored that batch (ns since the epoch; 0 = unknown).
  std::int64_t last_stored_at_ns = 0;
  /// Since when (ns since the epoch) log_position is ahead of delivered_position; 0 = not.
  std::int64_t behind_since_ns = 0;
  std::uint64_t publish_retries = 0;
  std::uint64_t unknown_outcomes = 0;
  std::uint64_t consumer_resets = 0;
  /// Times follow()/read_after() stopped at a gap (purged past this replica).
  std::uint64_t gaps = 0;
  /// Start-ups that accepted losing records after an operator's reset (reset_through()).
  std::uint64_t journal_resets = 0;
  /// Filled by the runtime (actors/replication.hpp), not the log: true while this replica
  /// stopped applying after a gap (reloading, or no shared snapshot covers it yet), and the
  /// live reloads after a gap that completed.
  bool halted = false;
  std::uint64_t reloads = 0;
  /// Also the runtime's: stream time minus producer stamp of the last applied batch (µs),
  /// and the batches where the two differed by more than 1 s (state/stamp_skew.hpp).
  std::int64_t stamp_skew_us = 0;
  std::uint64_t stamp_skew_over = 0;
  /// Batches that were not valid envelopes (skipped identically on every replica).
  std::uint64_t skipped_batches = 0;
  /// The log's first position still held (jetstream: the stream's first sequence, as of
  /// the last look); 0 = unknown or never truncated.
  std::uint64_t first_position = 0;
  /// Shared snapshots (jetstream with --shared-snapshot-interval): the last one this
  /// replica uploaded (bytes, seconds), when it first saw the current manifest (ns since
  /// the epoch; 0 = none) and whether it holds the snapshotter lease.
  bool shared_snapshots = false;
  std::uint64_t shared_snapshot_bytes = 0;
  double shared_snapshot_seconds = 0;
  std::int64_t shared_snapshot_seen_ns = 0;
  bool lease_holder = false;
};

/// The apply lag at `now_ns` (ns since the epoch): 0 when everything known was handed over,
/// else the time since the later of "the last handed-over batch was stored" and "this
/// replica fell behind" (after an idle hour, a fresh append is not an hour of lag).
inline double apply_lag_seconds(const log_stats& s, std::int64_t now_ns) {
  if (s.delivered_position >= s.log_position) return 0.0;
  const std::int64_t since = std::max(s.last_stored_at_ns, s.behind_since_ns);
  return since > 0 && now_ns > since ? double(now_ns - since) / 1e9 : 0.0;
}

/// A sequenced record log plus local snapshots. Thread-safety: `append`/`resume`/
/// `next_batch_id` from one producer thread; `read_after` then `follow` from one reader
/// thread; snapshot calls from the snapshot writer; `stats` from any thread.
class record_log {
 public:
  virtual ~record_log() = default;

  /// Names the log for messages ("journal <dir>", "stream IC_JOURNAL").
  virtual std::string describe() const = 0;
  /// True when appends are applied from follow(), not by the appender.
  virtual bool replicated() const = 0;

  /// The id the next append carries ("" when the log has no batch ids).
  virtual std::string next_batch_id() const = 0;
  /// How many leading records of `records` one batch can carry (at least 1; a single record
  /// too large is then refused by append() with its reason). The group commit splits a
  /// larger group. Default: all (RocksDB has no batch size limit).
  virtual std::size_t fitting_prefix(const std::vector<record_in>& records) const {
    return records.size();
  }
  /// Appends `records` as one batch; returns the first record's position. Errors:
  /// invalid_argument, unavailable (nothing stored — or, replicated, "outcome unknown;
  /// retry": it may be stored and then arrives through follow()).
  virtual result<std::uint64_t> append(const std::vector<record_in>& records) = 0;
  /// Appends `records` under `key`: a replicated log stores one batch per key within its
  /// de-duplication window (a repeat answers the first position); rocksdb appends
  /// normally (one writer: nothing to fold). Errors as append().
  virtual result<std::uint64_t> append_keyed(const std::vector<record_in>& records,
                                             const dedup_key& key) = 0;
  /// Appends `records` as one batch of `scope` ([a-z]+, e.g. "policy") only when the last
  /// batch of that scope in the log is `expected_last` (log numbering, as in log_stats; 0 =
  /// none): compare-and-set, spec §3.4 — the caller passes the last one it *applied*, so a
  /// policy push from a replica that has not applied the newest policy loses. Errors as
  /// append(), plus conflict (nothing stored). rocksdb: a plain append (one server applies
  /// its pushes in order: nothing to race with).
  virtual result<std::uint64_t> append_conditional(const std::vector<record_in>& records,
                                                   std::string_view scope,
                                                   std::uint64_t expected_last) = 0;
  /// The log numbering of the last batch of `scope` delivered by read_after()/follow() or
  /// found before read_after's start; 0 when there was none (rocksdb: always 0, scopes are
  /// not kept apart). After recovery this is what recovery applied.
  virtual std::uint64_t scope_position(std::string_view scope) const = 0;
  /// Tries to leave an error state after `unavailable` (rocksdb: log::resume).
  virtual status resume() = 0;

  /// Calls `visit` for each record with position > `after` up to the log's end as of the
  /// call, in order; stops early when `visit` returns false. Errors: out_of_range (records
  /// after `after` are gone: truncated / purged), corruption, unavailable.
  virtual status read_after(std::uint64_t after,
                            const std::function<bool(const record_view&)>& visit) = 0;
  /// Replicated only: delivers every later batch (after what read_after handed over) in
  /// order until `stop` is set, riding out disconnects. Returns the error that ended it
  /// (out_of_range: a gap). rocksdb returns `invalid_argument` at once (not replicated).
  virtual status follow(const std::function<void(const log_batch&)>& visit,
                        const std::atomic<bool>& stop) = 0;

  /// The last position in the log (rocksdb: last sequence; jetstream: the last position
  /// read_after handed over).
  virtual std::uint64_t last_position() const = 0;
  /// Positions ≤ this are gone (truncated); 0 when never truncated.
  virtual std::uint64_t truncated_through() const = 0;
  /// Positions ≤ this were given up at start-up by an operator's reset (jetstream
  /// `--journal-reset`): the log lost records the state needs and no snapshot covers them,
  /// so read_newest_snapshot answered not_found and recovery starts from an empty state,
  /// reading what follows. 0 = no reset (rocksdb: always).
  virtual std::uint64_t reset_through() const { return 0; }
  /// The reason a torn tail was dropped at open ("" when none).
  virtual std::string torn_tail() const = 0;

  // Snapshot hooks (both implementations keep snapshots in a local journal::log).
  virtual result<snapshot_writer> begin_snapshot(std::uint64_t covering_position) = 0;
  virtual result<snapshot_info> read_newest_snapshot(
      const std::function<void(const snapshot_info&)>& on_begin,
      const std::function<status(std::string_view)>& on_chunk,
      std::vector<status>* skipped) const = 0;
  virtual result<std::size_t> prune_snapshots(std::size_t keep) = 0;
  /// Drops records ≤ `position` that a complete snapshot covers (rocksdb:
  /// truncate_through; jetstream: the lease holder uploads the shared snapshot and purges
  /// below what it and the live replicas' marks cover, asynchronously).
  virtual status truncate_through(std::uint64_t position) = 0;

  virtual log_stats stats() const = 0;
  /// Closes the log; later calls fail. Idempotent.
  virtual status close() = 0;
};

}  // namespace ic::journal
