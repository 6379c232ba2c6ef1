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
#include <condition_variable>
#include <functional>
#include <map>
#include <optional>
#include <thread>
#include <utility>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "journal/jetstream/jetstream_log.hpp"
#include "journal/jetstream/shared_snapshot.hpp"
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

  // Shared snapshots, lease, marks and purge (spec §3.6–3.7; journal/jetstream/README.md).
  /// `--shared-snapshot-interval`: how often the lease holder uploads the local snapshot
  /// (at the next local snapshot after the interval). 0 = none of the duties: no shared
  /// snapshot is read or written, no lease, no marks, no purge.
  std::chrono::milliseconds shared_snapshot_interval{0};
  /// Bucket names, chunk size, lease and mark TTLs.
  shared_snapshot_config shared;
  /// Lease renew (and acquire retry) period. Default 3 s (TTL 10 s).
  std::chrono::milliseconds lease_renew{3000};
  /// How often this replica writes its mark (and reads the stream's first sequence and
  /// the manifest for metrics). Default 5 s (mark TTL 30 s).
  std::chrono::milliseconds mark_interval{5000};
  /// Purge below min(covering, lowest mark) − margin + 1. Default 0: marks and manifests
  /// already name the last sequence not needed.
  std::uint64_t purge_margin = 0;
  /// `--journal-reset`: at start-up, when the stream lost what this replica needs and no
  /// local or shared snapshot covers it (start_source::uncovered), accept the loss instead
  /// of refusing to start: read_newest_snapshot logs the lost range, counts
  /// `journal_resets` and answers not_found with reset_through() = just before the
  /// stream's first sequence (recovery: an empty state plus everything the stream holds);
  /// the next local snapshot is then uploaded as the shared one at once, lease or not, so
  /// halted replicas reload it. Only the first read_newest_snapshot (start-up) may reset;
  /// when a snapshot covers, it starts normally and logs that no reset was needed.
  /// Default false.
  bool reset_uncovered = false;
  /// One line per duty event (lease taken/lost, shared snapshot written or loaded, purge,
  /// gap); `warn` false = info. Default: none.
  std::function<void(bool warn, const std::string&)> on_event;
};

class jetstream_log final : public record_log {
 public:
  /// Opens the writer (creating or validating the stream) and the local snapshot directory.
  static result<std::unique_ptr<jetstream_log>> open(const jetstream_log_options& opts);
  ~jetstream_log() override;

  std::string describe() const override;
  bool replicated() const override { return true; }
  std::size_t fitting_prefix(const std::vector<record_in>& records) const override;
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
  std::uint64_t reset_through() const override { return reset_through_.load(); }
  std::string torn_tail() const override;
  result<snapshot_writer> begin_snapshot(std::uint64_t covering_position) override;
  /// With shared snapshots: the newest local snapshot when the stream still follows it,
  /// else the shared one (a late joiner, or a gap: counted in stats().gaps), else
  /// out_of_range (purged past this replica and no shared snapshot covers it) — or, the
  /// first time with `reset_uncovered`, not_found after a journal reset (reset_through()).
  result<snapshot_info> read_newest_snapshot(
      const std::function<void(const snapshot_info&)>& on_begin,
      const std::function<status(std::string_view)>& on_chunk,
      std::vector<status>* skipped) const override;
  result<std::size_t> prune_snapshots(std::size_t keep) override;
  /// Called after the local snapshot covering `position` was written. The lease holder,
  /// when `shared_snapshot_interval` passed since its last upload, reads that snapshot
  /// back and queues it for the duties thread, which uploads it (manifest CAS) and then
  /// purges the stream below min(its covering, live marks) + 1. Never purges otherwise.
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
  /// The duties thread: lease, marks, uploads and purge.
  void run_duties();
  /// Uploads `blob` (the local snapshot covering `position`) unless a manifest covering as
  /// much is committed; then purges when `may_purge` (the lease holder). A `forced` upload
  /// (after a journal reset) that does not commit re-arms force_upload_.
  void upload_and_purge(std::uint64_t position, const std::string& blob, bool forced,
                        bool may_purge);
  /// Logs "shared snapshot not written: why" (a warning when `warn`); a `forced` upload
  /// arms force_upload_ again, so the next local snapshot tries again.
  void shared_not_written(bool forced, bool warn, const std::string& why) const;
  /// At start-up with `reset_uncovered` and nothing covering: logs the lost range and arms
  /// the forced upload; returns read_newest_snapshot's not_found.
  status accept_loss(std::uint64_t stream_first, std::uint64_t stream_msgs,
                     std::optional<std::uint64_t> local_pos,
                     std::optional<std::uint64_t> manifest_covering) const;
  /// Purges below min(committed_covering_, live marks) + 1 when that is past `first`.
  void purge(std::uint64_t first);
  /// Refreshes stream_first_ and the manifest seen (for the age metric).
  void observe_shared();
  /// Loads the shared snapshot into the callbacks (read_newest_snapshot's `shared` case).
  result<snapshot_info> load_shared(const std::function<void(const snapshot_info&)>& on_begin,
                                    const std::function<status(std::string_view)>& on_chunk) const;
  void event(bool warn, const std::string& line) const;
  /// One line for a gap met while following: whether a shared snapshot covers it.
  void report_live_gap(const status& gap);
  void stop_duties();

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
  mutable std::atomic<std::uint64_t> gaps_{0};
  /// Set when follow() counted a gap: the reload's read_newest_snapshot then does not.
  mutable std::atomic<bool> live_gap_counted_{false};
  std::atomic<std::uint64_t> skipped_{0};
  std::atomic<std::uint64_t> resets_{0};
  /// `reset_uncovered` until the first read_newest_snapshot (start-up) used it.
  mutable std::atomic<bool> reset_armed_{false};
  /// The journal reset at start-up: positions given up, and how many resets (0 or 1).
  mutable std::atomic<std::uint64_t> reset_through_{0};
  mutable std::atomic<std::uint64_t> journal_resets_{0};
  /// Set by a reset until a shared snapshot covering the reset state is committed: the
  /// next local snapshot is uploaded at once, by a lease holder or not.
  mutable std::atomic<bool> force_upload_{false};
  /// Stream sequence of the last delivered message per conditional scope.
  mutable std::mutex scopes_mu_;
  std::map<std::string, std::uint64_t, std::less<>> scopes_;

  // Duties (shared_snapshot_interval > 0).
  std::unique_ptr<shared_snapshots> shared_;
  std::thread duties_;
  std::mutex duty_mu_;
  std::condition_variable duty_cv_;
  bool stop_duties_ = false;
  /// The next upload.
  struct upload_job {
    std::uint64_t position = 0;  ///< the record position the blob covers
    std::string blob;
    bool forced = false;  ///< after a journal reset: upload even without the lease
  };
  std::optional<upload_job> upload_;
  /// Set when follow() stopped at a gap, cleared when read_after starts again (a reload
  /// found a snapshot): a replica that does not apply never holds the lease, since its
  /// uploads stop while a live one could take them over.
  std::atomic<bool> at_gap_{false};
  /// Marks are written once read_after started (delivered_ is then meaningful).
  std::atomic<bool> marking_{false};
  std::atomic<bool> lease_holder_{false};
  /// steady-clock ns of the last upload queued (0 = none yet).
  std::atomic<std::int64_t> last_upload_ns_{0};
  std::atomic<std::uint64_t> stream_first_{0};
  std::atomic<std::uint64_t> shared_bytes_{0};
  std::atomic<double> shared_seconds_{0};
  /// Wall ns when this replica first saw (or committed) the current manifest; 0 = none.
  std::atomic<std::int64_t> shared_seen_ns_{0};
  std::atomic<std::uint64_t> shared_seen_covering_{0};
  /// covering_seq of the last manifest this replica committed (duties thread only).
  std::optional<std::uint64_t> committed_covering_;
};

}  // namespace ic::journal::jetstream
