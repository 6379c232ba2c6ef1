// Structured logging for the server, on top of spdlog's default logger.
//
// `configure_logging` installs a formatter that writes every line to stderr either as one
// JSON object ({"time","level","msg",...fields}) or as text ("time LEVEL msg k=v ...").
// Plain `spdlog::info("...")` calls anywhere in the process get the same envelope, and so do
// gRPC core's own messages (event "grpc_core"); `log_event` adds typed key/value fields:
//
//   ic::server::log_event(spdlog::level::info, "startup", {{"version", "0.1.0"}});
#pragma once

#include <initializer_list>
#include <string>
#include <utility>

#include <spdlog/common.h>

#include "server/config.hpp"

namespace ic::server {

/// Installs the stderr logger with `format` at `level` ("debug", "info", "warn", "error").
void configure_logging(log_format format, const std::string& level);

/// Logs one event named `msg` with string fields, in the configured format.
/// Logs a lifecycle event (startup, recovered, ready, graceful_shutdown_*) at info even when
/// the configured level is higher: operators and tests read the bound addresses from it.
void log_lifecycle(const std::string& msg,
                   std::initializer_list<std::pair<std::string, std::string>> fields = {});

void log_event(spdlog::level::level_enum level, const std::string& msg,
               std::initializer_list<std::pair<std::string, std::string>> fields = {});

}  // namespace ic::server
