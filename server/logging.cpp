#include "server/logging.hpp"

#include <chrono>
#include <ctime>

#include <grpc/support/log.h>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace ic::server {
namespace {

log_format g_format = log_format::json;

// The configured logger, kept alive for the whole process (never freed on purpose): gRPC's
// threads may still log while static objects, spdlog's registry included, are destroyed.
std::shared_ptr<spdlog::logger>* g_logger = nullptr;

spdlog::logger* current_logger() {
  return g_logger ? g_logger->get() : spdlog::default_logger_raw();
}

// Marks a payload that log_event already rendered, so the formatter only adds the envelope.
constexpr char kPreRendered = '\x1e';

std::string utc_now() {
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() %
            1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(ms));
  return out;
}

// Formats each record as one JSON object or one text line; see the header.
class line_formatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string payload(msg.payload.data(), msg.payload.size());
    std::string level(spdlog::level::to_string_view(msg.level).data(),
                      spdlog::level::to_string_view(msg.level).size());
    if (level == "warning") level = "warn";
    std::string line;
    const bool pre = !payload.empty() && payload.front() == kPreRendered;
    if (pre) payload.erase(0, 1);
    if (g_format == log_format::json) {
      nlohmann::ordered_json head;
      head["time"] = utc_now();
      head["level"] = level;
      if (pre) {
        // payload is a JSON object of msg + fields: splice it after time and level.
        std::string h = head.dump();
        h.pop_back();
        line = h + "," + payload.substr(1);
      } else {
        head["msg"] = payload;
        line = head.dump();
      }
    } else {
      for (auto& c : level) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      line = utc_now() + " " + level + " " + payload;
    }
    line += '\n';
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<line_formatter>();
  }
};

// Routes gRPC core's own messages (handshake failures, transport errors) through our
// formatter, so stderr stays one JSON object per line. gRPC's ERROR is mostly per-connection
// trouble caused by a peer (a plaintext or untrusting client), hence warn.
void grpc_log_bridge(gpr_log_func_args* args) {
  spdlog::level::level_enum level = spdlog::level::debug;
  if (args->severity == GPR_LOG_SEVERITY_ERROR) level = spdlog::level::warn;
  else if (args->severity == GPR_LOG_SEVERITY_INFO) level = spdlog::level::info;
  log_event(level, "grpc_core",
            {{"message", args->message ? args->message : ""},
             {"source", std::string(args->file ? args->file : "?") + ":" +
                            std::to_string(args->line)}});
}

}  // namespace

void configure_logging(log_format format, const std::string& level) {
  g_format = format;
  auto logger = std::make_shared<spdlog::logger>(
      "inferencecache", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_formatter(std::make_unique<line_formatter>());
  logger->set_level(spdlog::level::from_str(level == "warn" ? "warning" : level));
  logger->flush_on(spdlog::level::trace);
  if (!g_logger) g_logger = new std::shared_ptr<spdlog::logger>();
  *g_logger = logger;
  spdlog::set_default_logger(std::move(logger));
  gpr_set_log_function(&grpc_log_bridge);
}

namespace {

// Renders msg + fields in the configured format, marked as pre-rendered for the formatter.
std::string render(const std::string& msg,
                   std::initializer_list<std::pair<std::string, std::string>> fields) {
  std::string rendered(1, kPreRendered);
  if (g_format == log_format::json) {
    nlohmann::ordered_json obj;
    obj["msg"] = msg;
    for (const auto& [k, v] : fields) obj[k] = v;
    rendered += obj.dump();
  } else {
    rendered += msg;
    for (const auto& [k, v] : fields) rendered += " " + k + "=" + v;
  }
  return rendered;
}

}  // namespace

void log_event(spdlog::level::level_enum level, const std::string& msg,
               std::initializer_list<std::pair<std::string, std::string>> fields) {
  spdlog::logger* logger = current_logger();
  if (!logger->should_log(level)) return;
  logger->log(level, "{}", render(msg, fields));
}

void log_lifecycle(const std::string& msg,
                   std::initializer_list<std::pair<std::string, std::string>> fields) {
  spdlog::logger* logger = current_logger();
  const std::string rendered = render(msg, fields);
  if (logger->should_log(spdlog::level::info)) {
    logger->log(spdlog::level::info, "{}", rendered);
    return;
  }
  // Below the configured level: write straight to the sinks (still labelled info), so the
  // bound addresses and readiness are always in the log.
  spdlog::details::log_msg record(logger->name(), spdlog::level::info, rendered);
  for (auto& sink : logger->sinks()) sink->log(record);
  logger->flush();
}

}  // namespace ic::server
