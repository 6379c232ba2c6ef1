// The stats path's decisions (spec §3.9, A23), without HTTP or gRPC: turning one engine
// /metrics body into a stats sample (vLLM or SGLang profile), and the stale-signal state
// machine with the reference's log lines.
//
//   stats_computer sc(opts);
//   auto r = sc.compute(body);        // stats_sample, or the scrape_result that failed it
//   stale_tracker st(log);  st.failure(); st.success();
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <variant>

#include "tools/kvevent_subscriber/config.hpp"
#include "tools/kvevent_subscriber/log.hpp"

namespace ic::kvevent {

/// Why a scrape failed (metric label `result`), or ok.
enum class scrape_result : std::uint8_t { ok, http_error, parse_error, unrecognized, incomplete, count_ };
const char* scrape_result_name(scrape_result r);

struct stats_options {
  bool sglang = false;
  cache_tier_flag tier = cache_tier_flag::automatic;
  std::string model_name;
  std::int64_t cache_size_bytes = 0;
  std::int64_t ceiling = 256;
};

/// What one stats-only CacheStateUpdate carries.
struct stats_sample {
  double hit_rate = 0;
  double pressure = 0;
  std::int64_t cache_memory_bytes = 0;
  std::int64_t t2_hit_tokens = 0;
  std::int64_t t2_query_tokens = 0;
};

/// Computes samples from scrape bodies; keeps the hit-rate baseline between scrapes.
class stats_computer {
 public:
  explicit stats_computer(stats_options o) : opts_(std::move(o)) {}
  /// A failed scrape never moves the baseline [REF].
  std::variant<stats_sample, scrape_result> compute(std::string_view body);

 private:
  stats_options opts_;
  std::optional<std::pair<double, double>> baseline_;  ///< (hits, queries)
};

/// Counts consecutive failed ticks and logs the reference's escalation.
class stale_tracker {
 public:
  explicit stale_tracker(logger* log) : log_(log) {}
  void failure(const std::string& why);
  void success();
  bool stale() const { return failures_ >= 3; }
  int failures() const { return failures_; }

 private:
  logger* log_;
  int failures_ = 0;
  bool delivered_ = false;
};

}  // namespace ic::kvevent
