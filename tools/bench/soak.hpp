// The `soak` mode of inferencecache-bench (issue #16): a mixed workload against the real
// server binary for a given duration, checked against an exact model (soak_model.hpp).
//
// Threads: `producers` owners (ReportCacheState streams of their placements' chains, every
// block of a chain evicted by PublishEvent PREFIX_EVICTED, now and then an ALL_CLEARED of a
// placement), a paced LookupRoute checker, a /policy pusher, StreamCacheEvents and
// StreamMetrics subscribers that open, read for a random few seconds and go. In every period
// of `restart_every_s` the server is stopped once by SIGTERM (at 1/3) and once by SIGKILL (at
// 2/3) and restarted on the same data dir; after each restart every decidable chain is looked
// up. The data dir lives on a tmpfs of `journal_fs_bytes` (mounted here; needs root). Once,
// half-way through the first period, the tmpfs is filled with a ballast file until writes
// fail, held until the server refuses an update (JOURNAL_UNAVAILABLE) or `fill_hold_max_s`,
// and drained; the server must accept updates again. Each minute a row goes to `out`.
//
//   soak_options o; o.server_binary = ...; o.duration_s = 60;
//   soak_report r = run_soak(o, std::cout);   // r.verdict.empty() == passed
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/bench/soak_model.hpp"

namespace ic::tools::bench {

/// How the soak runs.
struct soak_options {
  std::string server_binary;
  std::vector<std::string> server_args;  ///< extra server flags
  double duration_s = 60;
  double restart_every_s = 600;          ///< one SIGTERM and one SIGKILL restart per period
  int producers = 3;
  int tenants = 4;
  int replicas = 8;
  int chain_blocks = 16;
  std::uint64_t chains = 0;              ///< pool size; 0 = one group per placement
  double ingest_rate_blocks_per_s = 5000;  ///< total report rate, paced
  double lookup_rate_per_s = 200;
  double policy_every_s = 20;
  double evict_share = 0.15;             ///< share of producer operations that evict a chain
  double clear_every_s = 30;             ///< per producer, one ALL_CLEARED of a placement
  std::uint64_t journal_fs_bytes = 128ull << 20;  ///< tmpfs size; 0 = no tmpfs, no fill
  double fill_hold_max_s = 120;
  double fill_at_s = -1;                 ///< when the fill starts; < 0 = half-way through the first period
  std::size_t crash_tail_lines = 40;     ///< server output printed when it dies by itself
  double snapshot_every_s = 30;          ///< the server's --snapshot-interval (truncates the journal)
  int warmup_minutes = 5;
  double max_rss_growth = 0.05;
  std::uint64_t seed = 1;
  std::string markdown_file;             ///< also write the table as Markdown here
};

/// What the soak saw.
struct soak_report {
  std::vector<soak_row> rows;
  soak_row last;                         ///< the final counters
  std::uint64_t wrong = 0;               ///< answers saying a removed chain is held
  std::uint64_t undecidable = 0;         ///< lookups of chains busy or unknown at the time
  std::uint64_t refused = 0;             ///< updates refused while the journal was full
  std::uint64_t cut = 0;                 ///< calls cut by a restart (expected)
  std::uint64_t events_received = 0, metrics_received = 0, subscriptions = 0;
  std::uint64_t policy_pushes = 0;
  int term_restarts = 0, kill_restarts = 0;
  int crashes = 0;                       ///< the server exited without being told (an error)
  std::string fill;                      ///< what the journal fill did, one line
  std::vector<std::string> problems;     ///< the first few errors, described
  rss_growth rss;
  std::string verdict;                   ///< "" = passed
  nlohmann::json to_json() const;
};

/// Runs the soak; progress and the per-minute table go to `out`.
soak_report run_soak(const soak_options& o, std::ostream& out);

}  // namespace ic::tools::bench
