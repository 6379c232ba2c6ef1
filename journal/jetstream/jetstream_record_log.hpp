// `jetstream_log`: the record_log seam (journal/record_log.hpp) over a JetStream stream
// (journal/jetstream/jetstream_log.hpp `writer` + `reader`) plus a local RocksDB directory
// that keeps this replica's snapshots only (journal::options::external_positions).
//
// Positions are `record_position(stream_seq, index)`. `append` publishes one envelope and
// returns after the PubAck; it applies nothing: the caller applies what `follow()` hands
// over (its own batches included, found by `batch_id`). `read_after(p)` reads from the
// envelope of `p` (records ≤ p are skipped) to the stream's last sequence as of the call,
// then `follow()` continues from there with the same ordered consumer.
//
//   jetstream_log_options o;  o.nats.servers = {...};  o.nats.replica_id = "r1";
//   o.snapshot_dir = "/data/snapshots";
//   auto log = jetstream_log::open(o);    // errors: writer::open, log::open
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "journal/jetstream/jetstream_log.hpp"
#include "journal/record_log.hpp"

namespace ic::journal::jetstream {

struct jetstream_log_options {
  /// The stream and its connection (flags --nats-*, --replica-id, --journal-append-timeout).
  options nats;
  /// The local directory of this replica's snapshots (RocksDB, no records).
  std::string snapshot_dir;
  /// Local journal options (fsync, env); `external_positions` is forced on.
  journal::options local;
  /// How long recovery waits to read up to the stream's last sequence. Default 60 s.
  std::chrono::milliseconds catch_up_timeout{60000};
  /// The scopes of append_conditional (each its own subject `<prefix>.<scope>`); their
  /// last sequence before a snapshot is asked of the stream at read_after.
  std::vector<std::string> conditional_scopes{policy_scope};
};

class jetstream_log final : public record_log {
 public:
  /// Opens the writer (creating or validating the stream) and the local snapshot directory.
  static result<std::unique_ptr<jetstream_log>> open(const jetstream_log_options& opts);
  ~jetstream_log() override;

  std::string describe() const override;
  bool replicated() const override { return true; }
  std::string next_batch_id() const override;
  result<std::uint64_t> append(const std::vector<record_in>& records) override;
  /// Publishes with Msg-Id `<scope>.<period>.<slot>` (no epoch: the same on every replica).
  result<std::uint64_t> append_keyed(const std::vector<record_in>& records,
                                     const dedup_key& key) override;
  /// Publishes to `<prefix>.<scope>` expecting `expected_last` as its last sequence there.
  result<std::uint64_t> append_conditional(const std::vector<record_in>& records,
                                           std::string_view scope,
                                           std::uint64_t expected_last) override;
  std::uint64_t scope_position(std::string_view scope) const override;
  status resume() override { return status::success(); }
  status read_after(std::uint64_t after,
                    const std::function<bool(const record_view&)>& visit) override;
  status follow(const std::function<void(const log_batch&)>& visit,
                const std::atomic<bool>& stop) override;
  std::uint64_t last_position() const override { return delivered_.load(); }
  std::uint64_t truncated_through() const override { return 0; }
  std::string torn_tail() const override;
  result<snapshot_writer> begin_snapshot(std::uint64_t covering_position) override;
  result<snapshot_info> read_newest_snapshot(
      const std::function<void(const snapshot_info&)>& on_begin,
      const std::function<status(std::string_view)>& on_chunk,
      std::vector<status>* skipped) const override;
  result<std::size_t> prune_snapshots(std::size_t keep) override;
  /// Nothing: the stream is never purged by this build (purge needs a committed shared
  /// snapshot and the live replicas' marks, spec §3.6: not wired). Returns success.
  status truncate_through(std::uint64_t position) override;
  log_stats stats() const override;
  status close() override;

 private:
  jetstream_log() = default;
  /// Hands `b` over as records with positions > delivered_; false when visit stopped.
  template <typename Visit>
  bool deliver(const delivered_batch& b, Visit&& visit);
  /// Raises stream_last_; starts the "behind since" clock when it passes delivered_.
  void note_stream_last(std::uint64_t seq);
  /// Stops that clock once delivered_ reached stream_last_.
  void note_delivered();
  /// Remembers `b` as the last delivered batch of its scope (subjects other than `.b`).
  void note_scope(const delivered_batch& b);

  jetstream_log_options opts_;
  std::unique_ptr<writer> writer_;
  std::unique_ptr<reader> reader_;
  std::unique_ptr<journal::log> local_;
  /// Last record position handed over (read_after / follow).
  std::atomic<std::uint64_t> delivered_{0};
  /// Highest stream sequence this replica knows exists (acks, deliveries, state()).
  std::atomic<std::uint64_t> stream_last_{0};
  std::atomic<std::int64_t> last_stored_at_ns_{0};
  std::atomic<std::int64_t> behind_since_ns_{0};
  std::atomic<std::uint64_t> gaps_{0};
  std::atomic<std::uint64_t> skipped_{0};
  std::atomic<std::uint64_t> resets_{0};
  /// Stream sequence of the last delivered message per conditional scope.
  mutable std::mutex scopes_mu_;
  std::map<std::string, std::uint64_t, std::less<>> scopes_;
};

}  // namespace ic::journal::jetstream
