// The human table and the JSON figures of a measured phase, shared by the bench modes: one
// latency row per phase (stdout) and the same figures as JSON, and a p50/p99 ratio line.
//
//   print_latency_header();
//   json a = latency_phase("LookupRoute", route_result);
//   json b = latency_phase("Health/Check", health_result);
//   json r = ratio("LookupRoute / Health", a, b);   // {"p50": 1.4, "p99": 1.7}
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tools/bench/runner.hpp"
#include "tools/bench/stats.hpp"

namespace ic::tools::bench {

/// A summary as JSON: count, mean_us, p50_us, p90_us, p99_us, p999_us, max_us.
nlohmann::json to_json(const latency_summary& s);

/// `v` with `precision` decimals.
std::string fmt(double v, int precision = 1);

/// Prints the header of the latency table.
void print_latency_header();

/// Prints one latency row for `r` (its samples get sorted) and returns its figures: the
/// summary, ok, errors, elapsed_s, calls_per_s, answers (by label), first_error.
nlohmann::json latency_phase(const std::string& name, loop_result& r);

/// Ratio `a`/`b` at p50 and p99 of two latency_phase results, printed as "`what`: p50 ..x,
/// p99 ..x" and returned as {"p50", "p99"} (0 when `b` has no samples).
nlohmann::json ratio(const std::string& what, const nlohmann::json& a, const nlohmann::json& b);

}  // namespace ic::tools::bench
