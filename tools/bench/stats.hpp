// Latency percentiles over recorded samples (microseconds), and resident memory and CPU time
// of a process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ic::tools::bench {

/// Summary of a set of latency samples, all in microseconds.
struct latency_summary {
  std::uint64_t count = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, p999 = 0, max = 0;
};

/// Summarises `samples` (sorted in place); nearest-rank percentiles; all zero when empty.
latency_summary summarize(std::vector<double>& samples);

/// VmRSS of process `pid` in bytes from /proc/<pid>/status; -1 when unreadable.
std::int64_t read_rss_bytes(int pid);

/// CPU time (user + system, all threads) of process `pid` in seconds from /proc/<pid>/stat;
/// -1 when unreadable.
double read_cpu_seconds(int pid);

}  // namespace ic::tools::bench
