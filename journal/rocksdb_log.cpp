#include "journal/rocksdb_log.hpp"

namespace ic::journal {

result<std::unique_ptr<rocksdb_log>> rocksdb_log::open(const std::string& dir,
                                                       const options& opts) {
  auto opened = log::open(dir, opts);
  if (!opened.ok()) return opened.status();
  return std::make_unique<rocksdb_log>(std::move(opened).value());
}

rocksdb_log::rocksdb_log(std::unique_ptr<log> l) : log_(std::move(l)) {}

std::string rocksdb_log::describe() const { return "journal " + log_->dir(); }

result<std::uint64_t> rocksdb_log::append(const std::vector<record_in>& records) {
  return log_->append(records);
}

status rocksdb_log::resume() { return log_->resume(); }

status rocksdb_log::read_after(std::uint64_t after,
                               const std::function<bool(const record_view&)>& visit) {
  return log_->read(after + 1, visit);
}

status rocksdb_log::follow(const std::function<void(const log_batch&)>&,
                           const std::atomic<bool>&) {
  return status{errc::invalid_argument,
                describe() + " is not replicated: its appender applies what it appends"};
}

std::uint64_t rocksdb_log::last_position() const { return log_->last_sequence(); }
std::uint64_t rocksdb_log::truncated_through() const { return log_->truncated_through(); }

std::string rocksdb_log::torn_tail() const {
  return log_->info().dropped_torn_tail ? log_->info().torn_tail_reason : std::string();
}

result<snapshot_writer> rocksdb_log::begin_snapshot(std::uint64_t covering_position) {
  return log_->begin_snapshot(covering_position);
}

result<snapshot_info> rocksdb_log::read_newest_snapshot(
    const std::function<void(const snapshot_info&)>& on_begin,
    const std::function<status(std::string_view)>& on_chunk,
    std::vector<status>* skipped) const {
  return log_->read_newest_snapshot(on_begin, on_chunk, skipped);
}

result<std::size_t> rocksdb_log::prune_snapshots(std::size_t keep) {
  return log_->prune_snapshots(keep);
}

status rocksdb_log::truncate_through(std::uint64_t position) {
  return log_->truncate_through(position);
}

log_stats rocksdb_log::stats() const {
  log_stats s;
  s.log_position = log_->last_sequence();
  s.delivered_position = s.log_position;
  return s;
}

status rocksdb_log::close() { return log_->close(); }

}  // namespace ic::journal
