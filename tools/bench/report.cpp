#include "tools/bench/report.hpp"

#include <iomanip>
#include <iostream>
#include <sstream>

namespace ic::tools::bench {

using json = nlohmann::json;

json to_json(const latency_summary& s) {
  return {{"count", s.count}, {"mean_us", s.mean}, {"p50_us", s.p50}, {"p90_us", s.p90},
          {"p99_us", s.p99}, {"p999_us", s.p999}, {"max_us", s.max}};
}

std::string fmt(double v, int precision) {
  std::ostringstream ss;
  ss << std::fixed << std::setprecision(precision) << v;
  return ss.str();
}

void print_latency_header() {
  std::cout << std::left << std::setw(30) << "phase" << std::right << std::setw(10) << "calls"
            << std::setw(8) << "errors" << std::setw(11) << "calls/s" << std::setw(10) << "p50 us"
            << std::setw(10) << "p90 us" << std::setw(10) << "p99 us" << std::setw(11) << "p99.9 us"
            << std::setw(10) << "max us" << "\n";
}

json latency_phase(const std::string& name, loop_result& r) {
  latency_summary s = summarize(r.latencies_us);
  const double rate = r.elapsed_s > 0 ? static_cast<double>(r.ok) / r.elapsed_s : 0;
  std::cout << std::left << std::setw(30) << name << std::right << std::setw(10) << r.ok
            << std::setw(8) << r.errors << std::setw(11) << fmt(rate, 0) << std::setw(10)
            << fmt(s.p50) << std::setw(10) << fmt(s.p90) << std::setw(10) << fmt(s.p99)
            << std::setw(11) << fmt(s.p999) << std::setw(10) << fmt(s.max) << "\n";
  json j = to_json(s);
  j["ok"] = r.ok;
  j["errors"] = r.errors;
  j["elapsed_s"] = r.elapsed_s;
  j["calls_per_s"] = rate;
  j["answers"] = r.labels;
  if (!r.first_error.empty()) j["first_error"] = r.first_error;
  return j;
}

json ratio(const std::string& what, const json& lookup, const json& base) {
  const double b50 = base.value("p50_us", 0.0), b99 = base.value("p99_us", 0.0);
  const double r50 = b50 > 0 ? lookup.value("p50_us", 0.0) / b50 : 0;
  const double r99 = b99 > 0 ? lookup.value("p99_us", 0.0) / b99 : 0;
  std::cout << what << ": p50 " << fmt(r50, 2) << "x, p99 " << fmt(r99, 2) << "x\n";
  return {{"p50", r50}, {"p99", r99}};
}

}  // namespace ic::tools::bench
