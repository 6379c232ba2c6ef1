// `inferencecache-bench pd`: LookupPDRoute beside LookupRoute on one filled index, in one run
// (issue #14's "p50 within 1.2x of LookupRoute"). After the fill it pushes the topology of
// pd_workload.hpp to `/topology` on the admin port, reports every prefill and decode replica's
// stats (checked with GetCacheState), then runs `rounds` pairs of phases of the same closed
// loop, same concurrency and the same chains (LookupRoute then LookupPDRoute, the next round
// the other way round, so drift cancels), refreshing the stats before every phase. The
// verdict (pd_verdict) fails the run when the answers are not real hits.
//
//   pd_bench_options o;  o.admin = {"127.0.0.1", 8081};  o.chains = filled_chains;
//   pd_bench_result r = run_pd_bench(o, w, channels);
//   if (!r.error.empty()) ...   // exit 1: nothing to compare, or fail-open answers
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/channel.h>
#include <nlohmann/json.hpp>

#include "tools/bench/pd_workload.hpp"
#include "tools/bench/runner.hpp"
#include "tools/common/codec.hpp"

namespace ic::tools::bench {

/// What a pd run needs besides the workload and the channels.
struct pd_bench_options {
  host_port admin;           ///< the server's admin port (/topology)
  std::string token;         ///< admin bearer token; "" = none
  pd_shape shape;
  int rounds = 2;            ///< pairs of phases; default 2
  int concurrency = 16;
  limits lim;                ///< per phase
  std::uint64_t chains = 0;  ///< chains the index holds (drawn from)
  std::uint64_t seed = 1;
  int server_pid = 0;        ///< read its CPU time around every phase (0 = don't)
};

/// The figures (`result`: "topology", per-round and merged phases, "ratio", answers; with a
/// server PID the server's CPU µs per call of each phase and their ratio) and,
/// when the run failed, one line in `error`.
struct pd_bench_result {
  nlohmann::json result;
  std::string error;
};

/// Runs the comparison; prints the table to stdout, progress to stderr.
pd_bench_result run_pd_bench(const pd_bench_options& o, const workload& w,
                             const std::vector<std::shared_ptr<grpc::Channel>>& channels);

}  // namespace ic::tools::bench
