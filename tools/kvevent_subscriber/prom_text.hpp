// A Prometheus text-format (0.0.4) parser, enough for an engine's /metrics (A23).
//
// Handles `# HELP` / `# TYPE` / `# EOF` lines, label escapes (`\\`, `\"`, `\n`), the values
// NaN / +Inf / -Inf, an optional timestamp, and UTF-8 metric names such as `vllm:foo`.
// Debian ships no C++ parser (prometheus-cpp only serialises), hence this one.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ic::kvevent {

/// One sample line.
struct prom_sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

/// Parses `body`; nullopt (and `*err`) on a malformed line.
std::optional<std::vector<prom_sample>> parse_prom_text(std::string_view body, std::string* err);

}  // namespace ic::kvevent
