// The `killloop` mode of inferencecache-bench (issue #16): SIGKILL the server at random
// moments while producers stream ReportCacheState, restart it on the same data dir, and
// check that every acknowledged update survived and that lookups answer as before the kill.
//
// Each chain is reported once (whole) by exactly one producer stream; a chain counts as
// acknowledged when its stream's Ack said accepted. After every restart each acknowledged
// chain is looked up whole: it must answer PREFIX_MATCH naming its replica first with every
// token matched (else it is "lost"), and its answer (reason, replica ids, matched tokens,
// tiers; not the time-dependent scores) must equal the one the previous server process gave
// (else it "changed"). Chains share no blocks (system prompt off), so later ingest cannot
// change an earlier chain's answer. Unacknowledged chains may or may not survive; both are
// fine. The server runs with --max-index-entries=0 unless `server_args` sets a cap (a cap
// evicts acknowledged chains by design, and the loop then reports them lost).
//
//   killloop_options o; o.server_binary = ...; o.cycles = 5;
//   killloop_report r = run_killloop(o, w, &std::cout);   // r.ok()
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/bench/workload.hpp"

namespace ic::tools::bench {

/// How the kill loop runs.
struct killloop_options {
  std::string server_binary;
  std::vector<std::string> server_args;  ///< extra server flags
  std::string data_dir;                  ///< empty: a fresh temporary dir, removed afterwards
  int cycles = 5;                        ///< SIGKILLs (each followed by a restart and a check)
  std::uint64_t seed = 1;                ///< picks the kill moments
  int producers = 2;                     ///< concurrent ReportCacheState streams
  int messages_per_stream = 4;
  int chains_per_message = 8;
  double ingest_rate_blocks_per_s = 100000;  ///< total, paced
  double kill_after_min_s = 0.05;        ///< the kill comes this long after ingest starts ...
  double kill_after_max_s = 0.5;         ///< ... at most this long (uniform)
  double restart_timeout_s = 60;         ///< give up when a start takes longer
};

/// What the kill loop saw.
struct killloop_report {
  int cycles_done = 0;
  std::uint64_t acked_chains = 0;     ///< chains whose stream was acknowledged
  std::uint64_t lookups = 0;          ///< verification lookups made
  std::uint64_t lost = 0;             ///< acknowledged chains a restarted server did not hold
  std::uint64_t changed = 0;          ///< answers that differed from the previous process's
  std::uint64_t stream_errors = 0;    ///< streams cut by the kill (expected)
  std::string error;                  ///< why the loop could not run (start, recovery, ...)
  std::string first_problem;          ///< the first lost or changed chain, described
  nlohmann::json cycles = nlohmann::json::array();

  bool ok() const { return error.empty() && lost == 0 && changed == 0 && acked_chains > 0; }
};

/// Runs the loop; progress lines go to `out`.
killloop_report run_killloop(const killloop_options& o, const workload& w, std::ostream& out);

}  // namespace ic::tools::bench
