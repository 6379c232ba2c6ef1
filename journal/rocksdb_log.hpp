// `rocksdb_log`: the record_log seam (journal/record_log.hpp) over the embedded RocksDB
// journal of one data directory (`journal::log`, unchanged). Positions are the journal's
// sequence numbers; an append is applied by its appender (`replicated() == false`).
//
//   auto opened = rocksdb_log::open(dir, opts);     // errors as log::open
//   std::unique_ptr<record_log> log = std::move(*opened);
#pragma once

#include <memory>
#include <string>

#include "journal/log.hpp"
#include "journal/record_log.hpp"

namespace ic::journal {

class rocksdb_log final : public record_log {
 public:
  /// Opens (or creates) the journal in `dir` (journal::log::open).
  static result<std::unique_ptr<rocksdb_log>> open(const std::string& dir, const options& opts);
  explicit rocksdb_log(std::unique_ptr<log> l);

  std::string describe() const override;
  bool replicated() const override { return false; }
  std::string next_batch_id() const override { return {}; }
  result<std::uint64_t> append(const std::vector<record_in>& records) override;
  result<std::uint64_t> append_keyed(const std::vector<record_in>& records,
                                     const dedup_key&) override {
    return append(records);
  }
  result<std::uint64_t> append_conditional(const std::vector<record_in>& records,
                                           std::string_view, std::uint64_t) override {
    return append(records);
  }
  std::uint64_t scope_position(std::string_view) const override { return 0; }
  status resume() override;
  status read_after(std::uint64_t after,
                    const std::function<bool(const record_view&)>& visit) override;
  status follow(const std::function<void(const log_batch&)>& visit,
                const std::atomic<bool>& stop) override;
  std::uint64_t last_position() const override;
  std::uint64_t truncated_through() const override;
  std::string torn_tail() const override;
  result<snapshot_writer> begin_snapshot(std::uint64_t covering_position) override;
  result<snapshot_info> read_newest_snapshot(
      const std::function<void(const snapshot_info&)>& on_begin,
      const std::function<status(std::string_view)>& on_chunk,
      std::vector<status>* skipped) const override;
  result<std::size_t> prune_snapshots(std::size_t keep) override;
  status truncate_through(std::uint64_t position) override;
  log_stats stats() const override;
  status close() override;

  /// The wrapped journal (tools and tests).
  log& journal() { return *log_; }

 private:
  std::unique_ptr<log> log_;
};

}  // namespace ic::journal
