// `inferencecache-bench lag`: cross-replica apply lag in JetStream mode (issue #15: "apply
// lag p99 ≤ 50 ms at 100 k blocks/s on the other replica"). While paced producers offer
// `--ingest-rate` blocks/s through --addr (replica A), a marker loop reports one marked
// update (its own tenant, one fresh block) through A about `markers_per_s` times a second
// and, once A acknowledged it (A applied it), polls the follower (replica B) with
// LookupRoute until the block is served. The lag of a marker is Ack on A → first answer
// PREFIX_MATCH on B: what a client switching replicas sees, measured end to end (poll
// resolution ≈ one lookup round trip plus `poll_interval`).
//
//   follower_lag_options o;  o.follower = "127.0.0.1:9091";  o.ingest.rate_blocks_per_s = 100000;
//   follower_lag_result r = run_follower_lag(o, w, channels_to_a);
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/channel.h>

#include "tools/bench/runner.hpp"
#include "tools/bench/workload.hpp"

namespace ic::tools::bench {

/// What a lag run needs besides the workload and the channels to replica A.
struct follower_lag_options {
  std::string follower;                  ///< replica B, host:port
  ingest_options ingest;                 ///< the producers on A (rate: blocks/s offered)
  double duration_s = 20;                ///< how long markers are sent
  int markers_per_s = 20;                ///< default 20
  double marker_timeout_s = 5;           ///< a marker not on B by then counts as missed
  std::chrono::microseconds poll_interval{200};
};

/// The figures of a lag run.
struct follower_lag_result {
  ingest_result ingest;                  ///< the background producers on A
  std::vector<double> lag_us;            ///< per marker: Ack on A → served by B
  std::vector<double> marker_ack_us;     ///< per marker: send → Ack on A
  std::uint64_t markers_refused = 0;     ///< not acknowledged by A (not measured)
  std::uint64_t markers_missed = 0;      ///< acknowledged, not on B within the timeout
  std::string error;                     ///< first marker or lookup error
};

/// Runs the producers and the marker loop for `o.duration_s`; bounded (every marker by
/// its timeout, the producers by the duration).
follower_lag_result run_follower_lag(const follower_lag_options& o, const workload& w,
                                     const std::vector<std::shared_ptr<grpc::Channel>>& channels);

}  // namespace ic::tools::bench
