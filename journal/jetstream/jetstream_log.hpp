// The record log on a NATS JetStream stream (spec/scaleout.md §3.2): the append side
// (`writer`) and the apply side (`reader`) of the journal that N server replicas share.
//
// A `writer` publishes one group commit as one envelope (journal/jetstream/envelope.hpp)
// with `Nats-Msg-Id = <replica-id>.<epoch>.<counter>` and returns after the PubAck. Lost
// or refused attempts (no responders while the stream has no leader, timeouts, a dropped
// connection) are republished with the *same* id until `append_timeout` runs out; the
// stream's de-duplication window folds the copies into one record. Past the budget the
// answer is `errc::unavailable` meaning **"outcome unknown; retry"**: the record may still
// be stored (spec §2.4 saw it once). Upstream this is Ack JOURNAL_UNAVAILABLE.
//
// A `reader` is an ordered consumer from a given stream sequence: it hands over every
// message in stream order (a replica's own appends included: a replica applies only what
// comes back from the stream) and refuses with `errc::out_of_range` when the first
// delivered sequence is not the one expected (a purged start is silent in NATS).
//
//   jetstream::options o;  o.servers = {"nats://127.0.0.1:4222"};  o.replica_id = "r1";
//   auto w = jetstream::writer::open(o);              // creates or validates IC_JOURNAL
//   auto ack = (*w)->append({{type, bytes}});         // ack->position = stream sequence
//   auto r = jetstream::reader::open(o, /*from=*/1);
//   auto b = (*r)->next(std::chrono::milliseconds(500));  // optional<delivered_batch>
//
// Errors are values (journal/status.hpp). No NATS header is included here.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "journal/jetstream/envelope.hpp"
#include "journal/log.hpp"
#include "journal/status.hpp"

namespace ic::journal::jetstream {

/// Where the journal lives and how hard to try. Filled by the composition root from the
/// flags of issue #15; this is their typed form.
struct options {
  /// NATS URLs, tried in this order (`--nats-servers`). Required.
  std::vector<std::string> servers;
  /// NATS credentials file (`--nats-creds-file`). Default empty: none.
  std::string creds_file;
  /// This replica's id (`--replica-id`), the origin of its envelopes; [A-Za-z0-9_-].
  /// Required for a writer; a reader uses it only to name its connection.
  std::string replica_id;
  /// Distinguishes this process's ids from an earlier run's. Default 0: the time of
  /// `writer::open` in µs since the epoch.
  std::uint64_t epoch = 0;
  /// The stream (`--nats-stream`). Default "IC_JOURNAL".
  std::string stream = "IC_JOURNAL";
  /// The stream's subjects are `<subject_prefix>.>`; envelopes go to `<subject_prefix>.b`.
  /// Default "ic.journal".
  std::string subject_prefix = "ic.journal";
  /// Stream replicas when the writer creates it (`--nats-replicas`); an existing stream
  /// must have the same. Default 3.
  int replicas = 3;
  /// Stream byte limit with Discard=new when the writer creates it: a full stream refuses
  /// appends instead of dropping records no snapshot covers. Default 1 GiB.
  std::int64_t max_bytes = std::int64_t{1} << 30;
  /// The Nats-Msg-Id de-duplication window. Retries and a later replay of an "outcome
  /// unknown" append must fall inside it. Default 120 s.
  std::chrono::seconds duplicate_window{120};
  /// The append budget (`--journal-append-timeout`): retries with the same id stop after
  /// it. Default 2 s.
  std::chrono::milliseconds append_timeout{2000};
  /// How long one publish attempt waits for its PubAck (capped by what is left of the
  /// budget). Default 500 ms.
  std::chrono::milliseconds attempt_timeout{500};
  /// How long `open()` keeps trying to connect and to create/find the stream (a cluster
  /// that just started needs a few seconds to elect its meta leader). Default 15 s.
  std::chrono::milliseconds open_timeout{15000};
};

/// What a successful append got back.
struct append_ack {
  /// The stream sequence of the envelope (every record of the group shares it).
  std::uint64_t position = 0;
  /// The envelope's Nats-Msg-Id.
  std::string msg_id;
  /// True when the stream answered "already stored" (an earlier attempt landed).
  bool duplicate = false;
  /// Publish attempts it took (1 = no retry).
  int attempts = 0;
};

/// The stream as its leader reports it.
struct stream_state {
  std::uint64_t first_seq = 0;
  std::uint64_t last_seq = 0;
  std::uint64_t msgs = 0;
  std::uint64_t bytes = 0;
  std::int64_t max_bytes = 0;
  std::int64_t replicas = 0;
  /// The server name of the stream leader ("" for a single server without clustering).
  std::string leader;
};

/// Counters since open (for metrics: spec §3.9 `_publish_retries_total`,
/// `_unknown_outcome_total`).
struct writer_stats {
  std::uint64_t appends = 0;           ///< acknowledged appends
  std::uint64_t duplicates = 0;        ///< of them, acknowledged as already stored
  std::uint64_t retries = 0;           ///< republished attempts
  std::uint64_t unknown_outcomes = 0;  ///< appends given up after the budget
  std::uint64_t refused = 0;           ///< appends the stream refused (full, too large)
};

/// The append side of one replica. Thread-safe: concurrent appends are published
/// concurrently on one connection (each waits for its own PubAck), so a caller that
/// wants pipelining runs several appenders.
class writer {
 public:
  /// Connects, then creates the stream (file storage, `replicas`, Discard=new,
  /// `max_bytes`, MaxAge 0, `duplicate_window`) or validates an existing one.
  /// Errors: invalid_argument (no servers, bad replica id), incompatible (the existing
  /// stream has other subjects, Discard=old, a MaxAge, other replicas, memory storage;
  /// the message names the field), unavailable (no server / JetStream in `open_timeout`).
  static result<std::unique_ptr<writer>> open(const options& opts);
  ~writer();
  writer(const writer&) = delete;
  writer& operator=(const writer&) = delete;

  /// Publishes `records` as one envelope with the next id of this writer and waits for the
  /// PubAck, retrying with the same id within `append_timeout`. Errors: invalid_argument
  /// (empty batch; an envelope larger than the server's max_payload), unavailable — with
  /// a message starting "outcome unknown; retry" after the budget ran out (the record may
  /// be stored), "stream full" when Discard=new refused it (not stored), or "journal
  /// unavailable" at once — not published — while the connection is down after an append
  /// ran out of budget (no queueing behind an outage; the next ack clears it).
  result<append_ack> append(const std::vector<record_in>& records);
  /// The same with an explicit id: a caller that got "outcome unknown" repeats an append
  /// with its old id, and a duplicate inside the window is acked with the first position.
  result<append_ack> append(const std::vector<record_in>& records, const batch_id& id);

  /// Publishes `records` as one envelope (next id) to `<subject_prefix>.<scope>`, stored
  /// only when the stream's last message on that subject is `expected_last` (0: none yet;
  /// ExpectLastSubjectSeq / ExpectNoMessage, spec §2.6). Retries as append() (same id: a
  /// repeat of a stored attempt is acked as a duplicate before the check). Errors as
  /// append(), plus conflict (JetStream 10071: another message on the subject came first;
  /// not stored).
  result<append_ack> append_conditional(const std::vector<record_in>& records,
                                        const std::string& scope, std::uint64_t expected_last);
  /// The stream sequence of the last message on `<subject_prefix>.<scope>` (0: none).
  /// Errors: unavailable.
  result<std::uint64_t> last_on_subject(const std::string& scope) const;

  /// Purges every stream message below `position` (js_PurgeStream, Purge.Sequence):
  /// the caller guarantees a committed shared snapshot covers position - 1 (spec §3.6).
  /// Errors: unavailable.
  status truncate_before(std::uint64_t position);

  /// Returns the id the next `append(records)` will use, without taking it.
  batch_id peek_next_id() const;
  /// Asks the stream leader for the stream's state. Errors: unavailable.
  result<stream_state> state() const;
  /// Returns the counters.
  writer_stats stats() const;
  /// True while the connection to NATS is up.
  bool connected() const;
  /// How many leading records fit one envelope under the server's max_payload (at least 1;
  /// all of them while the limit is unknown).
  std::size_t fitting_prefix(const std::vector<record_in>& records) const;

 private:
  struct impl;
  explicit writer(std::unique_ptr<impl> p);
  /// The one publish loop: to `subject`, with `expected_last` as the subject condition
  /// when set.
  result<append_ack> publish(const std::vector<record_in>& records, const batch_id& id,
                             const std::string& subject,
                             std::optional<std::uint64_t> expected_last);
  std::unique_ptr<impl> impl_;
};

/// One stream message as a reader hands it over. Records point into the message, which
/// the batch owns (moving the batch keeps them valid).
struct delivered_batch {
  /// The stream sequence; every record of the envelope carries it as `seq`.
  std::uint64_t position = 0;
  /// The subject it was published to.
  std::string subject;
  /// Its Nats-Msg-Id header ("" when the publisher set none): a replica finds its own
  /// pending appends by it, never by waiting for the PubAck (deliveries beat PubAcks).
  std::string msg_id;
  /// When the stream leader stored it (ns since the epoch): a cross-check, not a clock.
  std::int64_t stored_at_ns = 0;
  /// Non-ok when the body is not a valid envelope (corruption / incompatible): every
  /// replica sees the same problem at the same position and skips it the same way.
  journal::status problem;
  /// The decoded envelope's id (empty when `problem`).
  batch_id id;
  /// The records in envelope order (empty when `problem`).
  std::vector<record_view> records;
  /// Owns the message bytes the views point into.
  std::shared_ptr<const void> owner;
};

/// The apply side of one replica: an ordered consumer over `<subject_prefix>.>` from a
/// stream sequence. Not thread-safe: one thread (the stream reader) calls it.
class reader {
 public:
  /// Subscribes from stream sequence `from` (≥ 1), on its own connection. Errors:
  /// invalid_argument (from = 0, no servers), not_found (no such stream after
  /// `open_timeout`), unavailable.
  static result<std::unique_ptr<reader>> open(const options& opts, std::uint64_t from);
  ~reader();
  reader(const reader&) = delete;
  reader& operator=(const reader&) = delete;

  /// Returns the next message in stream order, or nullopt when none arrived within `wait`
  /// (also while the library recreates the consumer after a reset). Errors: out_of_range
  /// when the delivered sequence is not the expected one (the stream was purged past it:
  /// load a shared snapshot; the reader stays failed), unavailable.
  result<std::optional<delivered_batch>> next(std::chrono::milliseconds wait);

  /// Calls `visit` for every message up to and including stream sequence `until`, in
  /// order; stops early (ok) when `visit` returns false. Errors: as next(), and
  /// unavailable when `until` was not reached within `timeout`.
  status follow(std::uint64_t until, const std::function<bool(const delivered_batch&)>& visit,
                std::chrono::milliseconds timeout);

  /// The stream sequence the next message must have.
  std::uint64_t expected() const;
  /// How many consumer resets (heartbeat miss, sequence mismatch) the library handled.
  std::uint64_t resets() const;
  /// How many messages came again below the next expected sequence (skipped, not a gap).
  std::uint64_t redelivered() const;

 private:
  struct impl;
  explicit reader(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace ic::journal::jetstream
