// The journal: a durable, sequenced log of opaque records plus chunked index snapshots,
// stored in one RocksDB directory.
//
// Producers `append()` batches of records; each batch gets dense sequence numbers (the first
// record ever is 1) and is one atomic RocksDB WriteBatch in the WAL before `append()`
// returns. Concurrent appenders are group-committed: one leader writes the batches of every
// waiting caller as a single WriteBatch (and, with `fsync`, a single fsync). On start the
// owner loads the newest complete snapshot and replays `read(snapshot.covering_seq + 1)`.
// Periodically it writes a new snapshot (streamed in chunks, so memory stays bounded),
// then `truncate_through()` the snapshot's sequence so disk use follows the live index size.
//
//   auto opened = ic::journal::log::open("./data", {});
//   if (!opened.ok()) { std::cerr << opened.status().to_string() << "\n"; return 2; }
//   std::unique_ptr<ic::journal::log> log = std::move(*opened);
//   auto first = log->append({{/*type=*/1, bytes}});  // errc::unavailable when disk is full
//   log->read(1, [](const ic::journal::record_view& r) { apply(r); return true; });
//
// Errors are values (journal/status.hpp). Every method is thread-safe unless noted. The
// on-disk format is in journal/README.md and journal/format.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "journal/status.hpp"

namespace rocksdb {
class Env;
}  // namespace rocksdb

namespace ic::journal {

/// One record to append: a record type (numbered forever by the record schema) and its
/// opaque bytes, which must stay valid until `append()` returns.
struct record_in {
  std::uint32_t type = 0;
  std::string_view payload;
};

/// A record handed to a `read()` visitor; `payload` is valid only during the call.
struct record_view {
  std::uint64_t seq = 0;
  std::uint32_t type = 0;
  std::string_view payload;
};

/// A record that owns its bytes (`read_range()`).
struct record {
  std::uint64_t seq = 0;
  std::uint32_t type = 0;
  std::string payload;
};

/// How to open a journal. Config belongs to the composition root; this is its typed form.
struct options {
  /// true: fsync the WAL before an append is acknowledged (survives power loss; appends
  /// that wait together share one fsync). false: the write is in the WAL in the OS page
  /// cache (survives a process crash, not a power loss). Default false.
  bool fsync = false;
  /// Create the directory and an empty journal when `dir` does not exist or is empty.
  /// Default true.
  bool create_if_missing = true;
  /// Verify every record's checksum during `open()` (a full scan) and refuse on the first
  /// bad one. Default false: open checks only the last record (torn tail); `read()` checks
  /// every record it returns, so a replay still refuses on corruption.
  bool verify_on_open = false;
  /// After `truncate_through()` / snapshot deletion, compact the deleted key range so the
  /// disk space comes back at once. Default true.
  bool compact_after_delete = true;
  /// Upper bound on the payload bytes one group commit combines (a single larger batch is
  /// still written, alone). Default 4 MiB.
  std::size_t max_group_bytes = std::size_t{4} << 20;
  /// RocksDB write buffer (memtable) size per column family. Default 64 MiB.
  std::size_t write_buffer_bytes = std::size_t{64} << 20;
  /// RocksDB background flush + compaction threads. Default 2 (the 2-core target box).
  int background_jobs = 2;
  /// The RocksDB environment; tests pass a fault-injecting one (journal/fault_env.hpp).
  /// Not owned; must outlive the log. Default nullptr: rocksdb::Env::Default().
  rocksdb::Env* env = nullptr;
  /// The records live in another log (JetStream, journal/record_log.hpp): this directory
  /// keeps only snapshots, whose covering position may then be any value (not bounded by
  /// last_sequence()). Default false.
  bool external_positions = false;
};

/// What `open()` found on disk.
struct open_info {
  /// True when this open created a new, empty journal.
  bool created = false;
  /// The format version stored in the journal (≤ format::current_version).
  std::uint32_t format_version = 0;
  /// The highest sequence number in the journal (or truncated away); 0 when empty.
  std::uint64_t last_sequence = 0;
  /// Records ≤ this were truncated (covered by a snapshot); 0 when never truncated.
  std::uint64_t truncated_through = 0;
  /// Set when the last record failed its checksum and was dropped as a torn tail.
  std::optional<std::uint64_t> dropped_torn_tail;
  /// Why the dropped record was bad (empty when nothing was dropped).
  std::string torn_tail_reason;
};

/// One stored snapshot as `list_snapshots()` sees it (headers and footers only).
struct snapshot_info {
  /// Allocated in increasing order, never reused.
  std::uint64_t id = 0;
  /// The state in the snapshot includes every record ≤ this sequence number.
  std::uint64_t covering_seq = 0;
  /// True when the footer ("complete" marker, written last) is present and valid.
  bool complete = false;
  /// From the footer (0 when incomplete).
  std::uint64_t chunk_count = 0;
  /// From the footer: the sum of chunk payload sizes (0 when incomplete).
  std::uint64_t total_bytes = 0;
  /// Non-empty when the header or footer failed to decode (the snapshot is unusable).
  std::string problem;
};

/// Group-commit counters since open (for benchmarks and metrics).
struct append_stats {
  std::uint64_t appends = 0;  ///< successful append() calls
  std::uint64_t records = 0;  ///< records they carried
  std::uint64_t groups = 0;   ///< RocksDB writes that carried them (≤ appends)
  std::uint64_t failed = 0;   ///< append() calls that returned an error
};

class log;

/// Streams one snapshot into the journal, chunk by chunk; obtained from
/// `log::begin_snapshot()`. Not thread-safe (one producer); must not outlive its log
/// object (after `close()` its calls fail with `invalid_argument`).
/// Destroying it unfinished deletes what it wrote (best effort; leftovers stay listed as
/// incomplete and `prune_snapshots()` removes them).
class snapshot_writer {
 public:
  snapshot_writer(snapshot_writer&&) noexcept;
  snapshot_writer& operator=(snapshot_writer&&) noexcept;
  ~snapshot_writer();

  /// Returns the snapshot's id.
  std::uint64_t id() const;
  /// Returns the sequence number the snapshot covers.
  std::uint64_t covering_seq() const;

  /// Appends one chunk (any size; ~1 MiB is a good size). On `unavailable` nothing was
  /// written and the same chunk may be retried.
  status add_chunk(std::string_view payload);
  /// Writes the footer (fsynced) that marks the snapshot complete and returns its info.
  /// The writer is spent afterwards.
  result<snapshot_info> finish();
  /// Deletes everything written so far; the writer is spent afterwards.
  status abandon();

 private:
  friend class log;
  struct state;
  explicit snapshot_writer(std::unique_ptr<state> s);
  std::unique_ptr<state> state_;
};

/// The journal of one data directory. Owned by `actors::runtime` (or a test) and used by
/// recovery, the journal actor and the snapshot writer; open with `open()`, close with
/// `close()` or the destructor.
class log {
 public:
  /// Opens (or creates) the journal in `dir`. Recovers a torn WAL tail (RocksDB point-in-
  /// time recovery) and drops a last record that fails its checksum (reported in
  /// `info()`). Errors: `incompatible` (not a journal, newer format version; the message
  /// names the path and the problem), `corruption`, `unavailable` (I/O, locked by another
  /// process), `not_found` (missing and `create_if_missing` is false).
  static result<std::unique_ptr<log>> open(const std::string& dir, const options& opts = {});

  ~log();
  log(const log&) = delete;
  log& operator=(const log&) = delete;

  /// Syncs the WAL (skipped after a failed write) and closes the database; later calls fail
  /// with `invalid_argument`. Appends must have returned before calling. The destructor
  /// calls this.
  status close();

  /// Returns what open() found.
  const open_info& info() const;
  /// Returns the directory this journal lives in.
  const std::string& dir() const;

  /// Appends `records` atomically, after every append that returned before this call, and
  /// returns the sequence number of the first (the others follow densely). Errors:
  /// `invalid_argument` (empty batch), `unavailable` (disk full, I/O error: nothing was
  /// appended and no sequence number was used; a later call retries, reopening RocksDB
  /// to leave its background-error mode).
  result<std::uint64_t> append(const std::vector<record_in>& records);
  /// Appends `n` records starting at `records` (same contract as above).
  result<std::uint64_t> append(const record_in* records, std::size_t n);
  /// Appends one record (same contract as above).
  result<std::uint64_t> append(std::uint32_t type, std::string_view payload);

  /// Returns the highest acknowledged sequence number (0 when nothing was ever appended).
  std::uint64_t last_sequence() const;
  /// Returns the highest truncated sequence number (0 when never truncated).
  std::uint64_t truncated_through() const;

  /// Calls `visit` for each record with seq ≥ `from_seq` in order, verifying each record's
  /// checksum and that sequence numbers are dense; stops early when `visit` returns false.
  /// `visit` must not call this log's writing methods.
  /// Sees the records committed when the call starts. Errors: `out_of_range` (`from_seq`
  /// ≤ truncated_through(): those records are gone), `corruption` (names the sequence
  /// number, key and file), `unavailable`.
  status read(std::uint64_t from_seq, const std::function<bool(const record_view&)>& visit) const;
  /// Returns up to `max_records` records from `from_seq` (same checks as `read()`).
  result<std::vector<record>> read_range(std::uint64_t from_seq, std::size_t max_records) const;
  /// Verifies every stored record (a full scan). Errors as `read()`.
  status verify() const;

  /// Fsyncs the WAL (use with `fsync = false` before a planned stop).
  status sync();

  /// Starts a snapshot of the state that includes every record ≤ `covering_seq` (which must
  /// be ≤ last_sequence()). Errors: `invalid_argument`, `unavailable`.
  result<snapshot_writer> begin_snapshot(std::uint64_t covering_seq);
  /// Lists every stored snapshot, complete or not, by increasing id.
  result<std::vector<snapshot_info>> list_snapshots() const;
  /// Streams the chunks of complete snapshot `id` to `on_chunk` in order, verifying each
  /// chunk's checksum before handing it over and the footer's count, size and content
  /// checksum at the end. An error from `on_chunk` stops the read and is returned as is.
  /// Errors: `not_found` (no such snapshot), `invalid_argument` (incomplete), `corruption`
  /// (names the snapshot id, chunk index and byte offset, key and file).
  status read_snapshot(std::uint64_t id,
                       const std::function<status(std::string_view)>& on_chunk) const;
  /// Reads snapshot `id` without handing chunks anywhere (same errors as read_snapshot).
  status verify_snapshot(std::uint64_t id) const;
  /// Loads the newest usable snapshot: for each complete snapshot, newest first, calls
  /// `on_begin` (the caller resets its state) then streams the chunks; a `corruption` falls
  /// back to the next older one and is appended to `*skipped` (may be null). Snapshots
  /// older than truncated_through() are skipped too. Errors: `not_found` (none usable),
  /// `unavailable`, or an error from the callbacks.
  result<snapshot_info> read_newest_snapshot(
      const std::function<void(const snapshot_info&)>& on_begin,
      const std::function<status(std::string_view)>& on_chunk,
      std::vector<status>* skipped = nullptr) const;
  /// Deletes snapshot `id`. Errors: `not_found`, `invalid_argument` (being written, or it is
  /// the last complete snapshot covering truncated_through()).
  status delete_snapshot(std::uint64_t id);
  /// Keeps the newest `keep` (≥ 1) complete snapshots and deletes older and incomplete ones
  /// (except those being written); returns how many were deleted.
  result<std::size_t> prune_snapshots(std::size_t keep);

  /// Deletes records ≤ `seq` (one DeleteRange, then a compaction of the range when
  /// `compact_after_delete`). Requires a complete snapshot covering ≥ `seq`, so recovery
  /// never needs a deleted record. A `seq` ≤ truncated_through() is a no-op. Errors:
  /// `invalid_argument` (beyond last_sequence(), no covering snapshot), `unavailable`.
  status truncate_through(std::uint64_t seq);

  /// Tries to leave the error state after a disk-full or I/O error: writes a probe file,
  /// then closes and reopens RocksDB (never DB::Resume(), which can wait forever in 7.8).
  /// Every write does this
  /// by itself first; this is for a health probe. Errors: `unavailable`.
  status resume();

  /// Returns the group-commit counters.
  append_stats stats() const;
  /// Returns the bytes in live SST files (RocksDB "rocksdb.live-sst-files-size", all CFs);
  /// WAL files and memtables are not included.
  std::uint64_t sst_bytes() const;

 private:
  friend class snapshot_writer;
  struct impl;
  explicit log(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace ic::journal
