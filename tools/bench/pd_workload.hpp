// The prefill/decode side of the benchmark workload (`inferencecache-bench pd`), plain C++:
// the `/topology` body, the stats every replica reports, how one LookupPDRoute answer is
// classified, and the verdict that refuses to report a ratio over fail-open answers.
//
// Per tenant `t` one topology `<tenant_name(t)>/bench-pd` (the namespace must equal the
// tenant, pd-templates.md §2.4 S4): the prefill pool is the fill's replicas
// (`bench-replica-0..M-1`, M = `--replicas`), so every chain's deepest block is held by
// exactly one prefill replica; the decode pool is `decode` extra replicas
// (`bench-decode-0..D-1`) that hold nothing. Pools name their members by pattern
// (`bench-replica-*`, the glob path) or, with `explicit_ids`, by id list. Pressures are
// exact binary fractions with ties, so the decode pick exercises the SHA-256 tie-break.
//
//   workload w(shape);
//   pd_shape pd{64, false};
//   std::string body = pd_topology_json(w, pd);          // POST /topology
//   for (const pd_replica& r : pd_replicas(w, pd)) ...     // one stats report each
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tools/bench/workload.hpp"

namespace ic::tools::bench {

/// The decode side and how pools name members.
struct pd_shape {
  int decode = 64;            ///< decode replicas per topology; default 64
  bool explicit_ids = false;  ///< pools list every id instead of one pattern; default false
};

/// The topology name of every tenant (ref `bench-pd` = `<tenant>/bench-pd`).
inline constexpr const char* kPdTopologyName = "bench-pd";

/// The transport the topology declares (every positive answer must carry it).
inline constexpr const char* kPdTransport = "NIXL";

/// "bench-decode-<i>".
std::string decode_replica_name(int i);

/// Checks `s` against `w` and the store's limits; empty when valid, else one line.
std::string validate(const workload& w, const pd_shape& s);

/// One replica of a topology and the pressure it reports.
struct pd_replica {
  std::string id;
  float pressure = 0;
  bool decode = false;
};

/// The prefill replicas (the workload's, in order) then the decode replicas.
std::vector<pd_replica> pd_replicas(const workload& w, const pd_shape& s);

/// Pressure of prefill replica `i` (0, 1/8, 1/4, 3/8 in turn) or decode replica `i`
/// (1/4, 3/8, 1/2, 5/8 in turn: every fourth one ties for the lowest).
float pd_pressure(bool decode, int i);

/// The `/topology` body: one topology per tenant, stats valid for an hour (a run is ≤ 1 h
/// per phase and refreshes them before every phase).
std::string pd_topology_json(const workload& w, const pd_shape& s);

/// One LookupPDRoute answer as the loop sees it.
struct pd_answer {
  std::string reason_code, prefill, decode, transport;
};

/// The label an answer is tallied under: its reason code, or "WRONG_PREFILL" (a PREFIX_MATCH
/// whose prefill is not `holder`, the replica holding the chain), "WRONG_DECODE" (a
/// PREFIX_MATCH or AFFINITY_HINT whose decode is not one of the lowest-pressure decode
/// replicas) or "WRONG_TRANSPORT" (such an answer without `kPdTransport`).
std::string pd_answer_label(const pd_answer& a, const std::string& holder, const pd_shape& s);

/// Successful calls, failed calls and answers by label of one RPC over a run.
struct answer_tally {
  std::uint64_t ok = 0, errors = 0;
  std::map<std::string, std::uint64_t> labels;
};

/// Empty when both RPCs answered well enough for their ratio to mean anything: each had a
/// successful call, errors ≤ 1 % of calls, ≥ `min_match` of the answers PREFIX_MATCH, and no
/// PD answer WRONG_*. Otherwise one line naming the first failure and the answer tally.
std::string pd_verdict(const answer_tally& route, const answer_tally& pd, double min_match = 0.99);

}  // namespace ic::tools::bench
