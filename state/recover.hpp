// Recovery without actors: open the journal, load the newest usable snapshot, replay the
// journal tail serially through `tenant_set`, and journal one TTL sweep at `now`. The
// runtime (actors/runtime.cpp) then hands the recovered tenants to their actors. Recovery
// sees the journal only through the record_log seam (journal/record_log.hpp), so the same
// code recovers from the RocksDB journal and from a JetStream stream.
//
//   std::string error;
//   auto rec = recover(options, now_us, &error);      // nullopt: refuse to start (error says why)
//   rec->set->tenants();                             // every tenant, as of the journal's end
//   auto rec2 = recover(std::move(log), sopts, now_us, &error);   // an already opened log
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "index/types.hpp"
#include "journal/record_log.hpp"
#include "state/tenant_state.hpp"

namespace rocksdb {
class Env;
}  // namespace rocksdb

namespace ic::state {

/// What recovery needs.
struct recovery_options {
  /// Journal directory (RocksDB). Created if missing.
  std::string journal_dir;
  /// `--journal-fsync`. Default false.
  bool fsync = false;
  /// RocksDB environment for the journal (tests inject faults); nullptr = the default.
  rocksdb::Env* journal_env = nullptr;
  /// The tenants' options (cap, default TTL, block size).
  state_options state;
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

/// The recovered journal and state.
struct recovered {
  std::unique_ptr<journal::record_log> log;
  std::unique_ptr<tenant_set> set;
  recovery_info info;
};

/// Steps 1–2 of recovery, the one rule that builds a state from a log: loads the newest
/// usable snapshot (`read_newest_snapshot`: in JetStream mode the local one, or the shared
/// one when the stream was purged past it; none after an operator's reset, `reset_through`)
/// and replays every record after it up to the log's end as of the call, serially. Fills `info` (snapshot_seq, skipped snapshots,
/// records_replayed). Recovery calls it at start; the stream follower calls it again after a
/// gap while running, building the new state off to the side (actors/replication.hpp).
/// Returns nullptr with `error` set as recover() does.
std::unique_ptr<tenant_set> rebuild_state(journal::record_log& log, const state_options& sopts,
                                          recovery_info& info, std::string* error);

/// Recovers the state of `options.journal_dir` and appends (and applies) one TTL sweep
/// record at `now`, so nothing expired comes back. Returns nullopt with `error` set when the
/// journal cannot be opened, the newest usable snapshot cannot be loaded, the journal was
/// truncated but no snapshot covers it, or a record of the tail cannot be decoded or applied.
std::optional<recovered> recover(const recovery_options& options, index::micros now,
                                 std::string* error);

/// Recovers from an opened log (either implementation of the seam). A replicated log
/// replays up to the stream's end as of the call and journals no sweep here (every replica
/// must apply the same records: the journal actor publishes the start-up sweep instead).
std::optional<recovered> recover(std::unique_ptr<journal::record_log> log,
                                 const state_options& sopts, index::micros now,
                                 std::string* error);

}  // namespace ic::state
