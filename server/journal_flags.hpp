// The journal flags of issue #15 (`--journal=rocksdb|jetstream` and the NATS settings),
// kept apart from config.cpp so the JetStream wiring stays one compact block: declared on
// the CLI11 app by `add_journal_flags`, checked by `finish_journal_flags` after parsing.
// Each default is written once, here or in journal/jetstream/jetstream_log.hpp `options`.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "journal/jetstream/jetstream_log.hpp"
#include "journal/record_log.hpp"

namespace CLI {
class App;
}  // namespace CLI

namespace ic::server {

/// Which journal implementation of the record_log seam the server runs on.
enum class journal_kind { rocksdb, jetstream };

struct journal_config {
  /// `--journal`, default rocksdb (the embedded journal under --data-dir).
  journal_kind kind = journal_kind::rocksdb;
  /// `--nats-servers=nats://h:p,...`: required with --journal=jetstream.
  std::vector<std::string> nats_servers;
  /// `--replica-id`, default the host name (characters outside [A-Za-z0-9_-] become '-',
  /// cut at the first dot); unique per replica.
  std::string replica_id;
  /// `--nats-stream`, default IC_JOURNAL.
  std::string nats_stream = journal::jetstream::options{}.stream;
  /// `--nats-replicas`, default 3 (1 for a one-node NATS); 1..5.
  int nats_replicas = journal::jetstream::options{}.replicas;
  /// `--nats-creds-file`, default none.
  std::string nats_creds_file;
  /// `--journal-append-timeout`, default 2s: the publish budget before JOURNAL_UNAVAILABLE.
  std::chrono::nanoseconds append_timeout = journal::jetstream::options{}.append_timeout;
  /// `--shared-snapshot-interval`, default 2m: the snapshotter lease holder uploads its
  /// local snapshot this often, then purges the stream (journal/jetstream/README.md).
  std::chrono::nanoseconds shared_snapshot_interval = std::chrono::minutes(2);
  /// `--max-apply-lag`, default 10s: appends are refused while this replica lags more;
  /// 0 = never.
  std::chrono::nanoseconds max_apply_lag = std::chrono::seconds(10);
  /// `--lfu-credit-interval`, default 1s: lookups' LFU credits are journaled as one record
  /// per replica this often and applied from the stream (spec/scaleout.md §3.4).
  std::chrono::nanoseconds lfu_credit_interval = std::chrono::seconds(1);
  /// `--lfu-credit=journal|local-off`, default journal (the line above). local-off: lookups
  /// credit no LFU counter at all, so LFU tenants evict like LRU tenants, identically on
  /// every replica, with no credit records in the stream (a semantic change, spec §3.4).
  bool lfu_credits_off = false;
  /// `--journal-reset`, default false: at start-up, when the stream was purged past this
  /// replica and no snapshot covers it, accept the loss (rebuild from the stream's first
  /// sequence, then upload the shared snapshot at once) instead of refusing to start.
  bool journal_reset = false;
};

/// Text of the flags as parsed, before validation.
struct journal_flag_text {
  std::string kind;
  std::string servers;
  std::string append_timeout;
  std::string shared_snapshot_interval;
  std::string max_apply_lag;
  std::string lfu_credit_interval;
  std::string lfu_credit;
};

/// Declares the journal flags on `app`; `text` receives the raw values.
void add_journal_flags(CLI::App& app, journal_config& cfg, journal_flag_text& text);

/// Validates and converts after parsing; returns the one-line error of an invalid value or
/// combination (exit 2), nullopt when fine.
std::optional<std::string> finish_journal_flags(const CLI::App& app, const journal_flag_text& text,
                                                journal_config& cfg);

/// Returns the opener of the JetStream journal for `actors::runtime_options::open_journal`
/// (snapshots in `<data_dir>/snapshots`), or an empty function for --journal=rocksdb.
std::function<journal::result<std::unique_ptr<journal::record_log>>()> journal_opener(
    const journal_config& cfg, const std::string& data_dir, bool fsync);

/// The local snapshot period to run: in JetStream mode at most the shared snapshot
/// interval (an upload is the local snapshot read back), else `snapshot_interval`.
std::chrono::nanoseconds local_snapshot_interval(const journal_config& cfg,
                                                 std::chrono::nanoseconds snapshot_interval);

/// Returns `d` as the shortest duration text ("2m", "10s", "250ms").
std::string duration_text(std::chrono::nanoseconds d);

}  // namespace ic::server
