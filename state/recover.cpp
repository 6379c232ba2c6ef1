#include "state/recover.hpp"

#include <algorithm>
#include <chrono>

#include "journal/rocksdb_log.hpp"
#include "proto/record_codec.hpp"
#include "state/snapshot_io.hpp"

namespace ic::state {

using steady = std::chrono::steady_clock;

std::optional<recovered> recover(const recovery_options& options, index::micros now,
                                 std::string* error) {
  journal::options jopts;
  jopts.fsync = options.fsync;
  jopts.env = options.journal_env;
  // The journal is written once and read at recovery: small memtables keep its share of the
  // server's memory low (64 MiB, RocksDB's default, is ~6 B per entry at 10 M entries).
  jopts.write_buffer_bytes = std::size_t{16} << 20;
  auto opened = journal::rocksdb_log::open(options.journal_dir, jopts);
  if (!opened.ok()) {
    if (error) *error = opened.status().to_string();
    return std::nullopt;
  }
  return recover(std::move(opened).value(), options.state, now, error);
}

std::unique_ptr<tenant_set> rebuild_state(journal::record_log& log_ref,
                                          const state_options& sopts, recovery_info& rec_info,
                                          std::string* error) {
  journal::record_log* log = &log_ref;
  auto fail = [&](const std::string& why) -> std::unique_ptr<tenant_set> {
    if (error) *error = why;
    return nullptr;
  };
  const std::string where = log->describe();

  // Recovery, step 1: the newest usable snapshot (corrupt ones fall back to older ones).
  std::unique_ptr<tenant_set> set;
  std::unique_ptr<state_loader> loader;
  std::uint64_t snapshot_id = 0;
  std::vector<journal::status> skipped;
  auto snap = log->read_newest_snapshot(
      [&](const journal::snapshot_info& si) {
        loader = std::make_unique<state_loader>(sopts);
        snapshot_id = si.id;
        rec_info.snapshot_seq = si.covering_seq;
      },
      [&](std::string_view chunk) -> journal::status {
        std::string why;
        if (!loader->feed(chunk, &why)) return journal::status(journal::errc::corruption, why);
        return journal::status::success();
      },
      &skipped);
  for (const auto& sk : skipped) rec_info.skipped_snapshots.push_back(sk.to_string());
  if (snap.ok()) {
    std::string why;
    set = loader->finish(&why);
    if (!set)
      return fail(where + ": snapshot " + std::to_string(snapshot_id) +
                  " cannot be loaded: " + why);
  } else if (snap.status().code() == journal::errc::not_found &&
             (log->truncated_through() == 0 || log->reset_through() > 0)) {
    // A journal that was never truncated, or one whose loss an operator accepted.
    set = std::make_unique<tenant_set>(sopts);
    rec_info.snapshot_seq = 0;
  } else if (snap.status().code() == journal::errc::not_found) {
    return fail(where + ": truncated through " + std::to_string(log->truncated_through()) +
                " but no usable snapshot covers it; refusing to start with a partial index");
  } else {
    return fail(where + ": snapshot " + std::to_string(snapshot_id) + ": " +
                snap.status().to_string());
  }

  // Recovery, step 2: replay the journal after the snapshot, serially (tenant_set applies
  // records exactly as the live actors do).
  std::string replay_error;
  auto st = log->read_after(std::max({rec_info.snapshot_seq, log->truncated_through(),
                                      log->reset_through()}),
                            [&](const journal::record_view& r) {
    std::string why;
    auto rec = proto::decode_record(r.type, r.payload, &why);
    if (!rec) {
      replay_error = where + ": record " + std::to_string(r.seq) + " cannot be decoded: " + why;
      return false;
    }
    auto out = set->apply(*rec);
    if (!out.ok) {
      replay_error =
          where + ": record " + std::to_string(r.seq) + " cannot be applied: " + out.error;
      return false;
    }
    ++rec_info.records_replayed;
    return true;
  });
  if (!st.ok()) return fail(st.to_string());
  if (!replay_error.empty()) return fail(replay_error);
  return set;
}

std::optional<recovered> recover(std::unique_ptr<journal::record_log> log,
                                 const state_options& sopts, index::micros now,
                                 std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<recovered> {
    if (error) *error = why;
    return std::nullopt;
  };
  const auto t0 = steady::now();
  const std::string where = log->describe();
  recovery_info rec_info;
  std::unique_ptr<tenant_set> set = rebuild_state(*log, sopts, rec_info, error);
  if (!set) return std::nullopt;

  // One journaled TTL sweep at the current time, so nothing expired comes back. A
  // replicated log gets it from the journal actor (applied when it comes back).
  if (!log->replicated()) {
    std::string sweep = proto::encode_record(proto::record_kind::sweep, now, {});
    const journal::record_in in{static_cast<std::uint32_t>(proto::record_kind::sweep), sweep};
    auto sweep_seq = log->append({in});
    if (!sweep_seq.ok()) return fail(where + ": " + sweep_seq.status().to_string());
    set->apply(*proto::decode_record(in.type, sweep));
  }

  rec_info.last_sequence = log->last_position();
  rec_info.entries = set->facts()->total_entries.load();
  rec_info.torn_tail = log->torn_tail();
  rec_info.seconds = std::chrono::duration<double>(steady::now() - t0).count();
  return recovered{std::move(log), std::move(set), std::move(rec_info)};
}

}  // namespace ic::state
