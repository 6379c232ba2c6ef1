// Structured log lines for the subscriber: JSON (default) or text on stderr.
//
// The reference sidecar's messages and `event=` fields are kept word for word, because
// runbooks grep for them ("subscribed to engine KV events", "dropping undecodable event
// batch", `event=load_signal_stale`, …). Tests install a capture function instead of
// stderr. Thread-safe: one line is written under a lock.
//
//   log.warn("dropping undecodable event batch", {{"source", "0"}});
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace ic::kvevent {

enum class log_level { debug = 0, info = 1, warn = 2, error = 3 };

/// Key/value fields of one line (values are strings; numbers are written as given).
using log_fields = std::vector<std::pair<std::string, std::string>>;

class logger {
 public:
  /// A sink receives the level, the message and the fields (tests); default: stderr.
  using sink = std::function<void(log_level, const std::string&, const log_fields&)>;

  logger() = default;
  logger(bool json, log_level min) : json_(json), min_(min) {}

  void set_sink(sink s) { sink_ = std::move(s); }
  void set_level(log_level l) { min_ = l; }

  void log(log_level l, const std::string& msg, const log_fields& f = {});
  void debug(const std::string& m, const log_fields& f = {}) { log(log_level::debug, m, f); }
  void info(const std::string& m, const log_fields& f = {}) { log(log_level::info, m, f); }
  void warn(const std::string& m, const log_fields& f = {}) { log(log_level::warn, m, f); }
  void error(const std::string& m, const log_fields& f = {}) { log(log_level::error, m, f); }

 private:
  bool json_ = true;
  log_level min_ = log_level::info;
  sink sink_;
  std::mutex mu_;
};

/// Parses "debug|info|warn|error"; false on anything else.
bool parse_log_level(const std::string& s, log_level& out);

}  // namespace ic::kvevent
