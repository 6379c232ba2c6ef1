// The server's command line: every flag of spec/extensions.md §2, typed, defaulted and
// validated once, here in the composition root. Libraries never read flags.
//
//   auto parsed = ic::server::parse_command_line(argc, argv);
//   if (auto* exit = std::get_if<ic::server::early_exit>(&parsed)) { ...print, return code }
//   const ic::server::server_config& cfg = std::get<ic::server::server_config>(parsed);
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>

#include "actors/runtime.hpp"
#include "server/journal_flags.hpp"

namespace ic::server {

/// Log line encoding (`--log-format`).
enum class log_format { json, text };

/// Everything the server is configured with; each field notes its flag and default.
struct server_config {
  /// `--grpc-bind-address`, default ":9090" (host may be empty = all interfaces).
  std::string grpc_bind_address = ":9090";
  /// `--http-bind-address`, default ":8080": /healthz, /readyz, /metrics.
  std::string http_bind_address = ":8080";
  /// `--snapshot-bind-address`, default ":8081": /snapshot, /policy, /probe (auth-gated).
  std::string snapshot_bind_address = ":8081";
  /// `--insecure-disable-auth`, default false: leave the admin port open (local dev only).
  bool insecure_disable_auth = false;
  /// `--admin-token-file`, default none: file holding the admin bearer token.
  std::string admin_token_file;
  /// The token read from `admin_token_file`, whitespace-trimmed (never empty when set).
  std::string admin_token;
  /// `--tls-cert-file` / `--tls-key-file`, default none: gRPC TLS, both or neither.
  std::string tls_cert_file;
  std::string tls_key_file;
  /// `--engine-block-size`, default 16; non-positive values are ignored (keep 16).
  int engine_block_size = actors::runtime_options{}.state.block_size;
  /// `--log-format`, default json.
  log_format format = log_format::json;
  /// `--log-level`, default "info": one of debug, info, warn, error.
  std::string log_level = "info";
  /// `--tokenizer-models-dir`, default none (prompt_text lookups fail open): every model
  /// folder under it (nested ids allowed) is loaded at startup; one that fails is logged and
  /// its lookups fail open.
  std::string tokenizer_models_dir;
  /// `--data-dir`, default "./data": journal and snapshots. Created if missing.
  std::string data_dir = "./data";
  /// `--journal-fsync`, default false: fsync (group-committed) before acknowledging.
  bool journal_fsync = false;
  /// `--policy-file`, default none: a /policy JSON body applied at startup.
  std::string policy_file;
  /// `--topology-file`, default none: a /topology JSON body applied at startup.
  std::string topology_file;
  /// `--templates-file`, default none: a /templates JSON body applied at startup.
  std::string templates_file;
  /// `--max-index-entries`, default 1000000: global (key x replica) cap; 0 = unbounded.
  std::int64_t max_index_entries = actors::runtime_options{}.state.max_entries;
  /// `--default-ttl`, default 30m: entry TTL when no policy sets one.
  std::chrono::nanoseconds default_ttl = actors::runtime_options{}.state.default_ttl;
  /// `--sweep-interval`, default 1m: TTL sweep period.
  std::chrono::nanoseconds sweep_interval = actors::runtime_options{}.sweep_interval;
  /// `--metrics-stream-interval`, default 5s: StreamMetrics push period.
  std::chrono::nanoseconds metrics_stream_interval = std::chrono::seconds(5);
  /// `--snapshot-interval`, default 10m: snapshot (then truncate the journal) this often when
  /// anything new was applied; 0 = never by time.
  std::chrono::nanoseconds snapshot_interval = actors::runtime_options{}.snapshot_interval;
  /// `--snapshot-every-records`, default 1000000: snapshot after this many journal records;
  /// 0 = never by count.
  std::uint64_t snapshot_every_records = actors::runtime_options{}.snapshot_every_records;
  /// `--max-recv-message-bytes`, default 16 MiB: larger gRPC messages get RESOURCE_EXHAUSTED.
  int max_recv_message_bytes = 16 * 1024 * 1024;
  /// `--http-idle-timeout`, default 10s: an HTTP connection (either port) that has not sent a
  /// complete request this long after it was accepted, or that stays silent this long, is
  /// closed. Must be positive.
  std::chrono::nanoseconds http_idle_timeout = std::chrono::seconds(10);
  /// `--http-max-connections`, default 1024: open connections per HTTP port; more are closed
  /// at accept and counted in inferencecache_http_connections_rejected_total. Must be > 0.
  int http_max_connections = 1024;
  /// `--journal` and the NATS flags (server/journal_flags.hpp).
  journal_config journal;
};

/// Parsing ended without a config: print `message` (to stdout for code 0, else one line on
/// stderr) and exit with `code` (0 for --help/--version, 2 for any invalid input).
struct early_exit {
  int code;
  std::string message;
};

/// Parses and validates `argv`; reads the admin token file. Never exits the process.
/// Declares every flag anew; `command_line_parser` declares them once for many parses.
std::variant<server_config, early_exit> parse_command_line(int argc, const char* const* argv);

/// The server's command line with every flag declared once, for callers that parse many
/// command lines (the fuzz target): declaring the ~45 CLI11 options costs more than a
/// parse. Each `parse` starts from the defaults, so nothing of one command line reaches the
/// next, and answers exactly as `parse_command_line` does. Not thread-safe: one per thread.
class command_line_parser {
 public:
  command_line_parser();
  ~command_line_parser();
  command_line_parser(command_line_parser&&) noexcept;
  command_line_parser& operator=(command_line_parser&&) noexcept;

  /// Parses and validates `argv` as `parse_command_line` does.
  std::variant<server_config, early_exit> parse(int argc, const char* const* argv);

 private:
  struct bound;
  struct state;
  std::unique_ptr<state> state_;
};

/// Returns "host:port" for gRPC from a Go-style bind address (":9090" -> "0.0.0.0:9090").
std::string grpc_listen_address(const std::string& bind);

/// Returns the http_server listen value ("[host:]port") for a Go-style bind address.
std::string http_listen_address(const std::string& bind);

/// The server's version string.
inline constexpr const char* server_version = "0.1.0";

}  // namespace ic::server
