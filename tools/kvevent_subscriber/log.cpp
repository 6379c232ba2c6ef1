#include "tools/kvevent_subscriber/log.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>

#include <nlohmann/json.hpp>

namespace ic::kvevent {
namespace {

const char* level_name(log_level l) {
  switch (l) {
    case log_level::debug: return "DEBUG";
    case log_level::info: return "INFO";
    case log_level::warn: return "WARN";
    default: return "ERROR";
  }
}

std::string now_rfc3339() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

}  // namespace

void logger::log(log_level l, const std::string& msg, const log_fields& f) {
  if (l < min_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (sink_) {
    sink_(l, msg, f);
    return;
  }
  std::string line;
  if (json_) {
    nlohmann::json j;
    j["time"] = now_rfc3339();
    j["level"] = level_name(l);
    j["msg"] = msg;
    for (const auto& [k, v] : f) j[k] = v;
    line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    line = now_rfc3339() + " " + level_name(l) + " " + msg;
    for (const auto& [k, v] : f) line += " " + k + "=" + v;
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

bool parse_log_level(const std::string& s, log_level& out) {
  if (s == "debug") out = log_level::debug;
  else if (s == "info") out = log_level::info;
  else if (s == "warn") out = log_level::warn;
  else if (s == "error") out = log_level::error;
  else return false;
  return true;
}

}  // namespace ic::kvevent
