// The subscriber's command line: every reference flag (spec §3.2, same names, defaults and
// validation) plus the new flags of §4.2, parsed and validated once.
//
// `parse_config` never exits and never prints: it returns the config, or the exit code and
// the one line to print (2 for invalid input; 0 after --help, with the help text). Bool
// flags take Go's forms (`--x`, `--x=true`, `--x=false`); durations Go's syntax (`100ms`,
// `1h30m`).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tools/kvevent_subscriber/core.hpp"
#include "tools/kvevent_subscriber/log.hpp"

namespace ic::kvevent {

/// Which usage gauge the stats path reads (`--cache-tier`).
enum class cache_tier_flag { automatic, kv, gpu, cpu };
enum class resync_policy { automatic, always, never };

struct config {
  // [REF] §3.2
  std::string engine_endpoint = "tcp://127.0.0.1:5557";
  std::string topic = "kv-events";
  std::string server = "127.0.0.1:9090";
  std::string replica_id, model_id, tenant_id;
  std::string hash_scheme = "vllm";
  std::int64_t window_ms = 100;
  std::string engine_metrics_url = "http://127.0.0.1:8000/metrics";
  std::int64_t stats_interval_ms = 10000;
  std::int64_t engine_cache_size_bytes = 0;
  std::int64_t max_concurrency_ceiling = 256;
  cache_tier_flag cache_tier = cache_tier_flag::automatic;
  std::string engine_model_name;
  bool ignore_block_removed = false;
  std::map<std::int64_t, std::string> lora_names;
  // [NEW] §4.2
  std::string replay_endpoint;
  std::int64_t replay_timeout_ms = 2000;
  int replay_max_rounds = 8;
  bool startup_replay = true;
  bool clear_on_start = true;
  bool gap_clear = true;
  int dp_size = 1;
  bool topic_exact = false;
  int routing_block_size = 0;
  std::vector<std::string> kv_spec_kinds{"full_attention"};
  std::vector<std::int64_t> kv_groups{0};
  bool extra_keys_drop = true;
  bool lora_name_as_adapter = false;
  std::size_t max_tracked_blocks = 524288;
  std::int64_t t2_retention_ms = 30 * 60 * 1000;
  std::size_t max_batch_entries = 4096;
  std::int64_t rpc_timeout_ms = 5000;
  std::size_t max_pending_ops = 100000;
  std::int64_t retry_initial_backoff_ms = 100;
  std::int64_t retry_max_backoff_ms = 5000;
  resync_policy resync_after_outage = resync_policy::automatic;
  std::int64_t refresh_interval_ms = 10 * 60 * 1000;
  std::string http_bind_address = ":9465";
  std::string client_version;
  std::string server_tls_ca_file, server_tls_server_name;
  bool log_json = true;
  log_level level = log_level::info;
  std::int64_t shutdown_timeout_ms = 5000;

  /// Warnings to log once the logger exists (e.g. an unknown --hash-scheme).
  std::vector<std::string> warnings;

  /// The PUB endpoint of each DP rank (vLLM's port+rank rule, §2.1).
  std::vector<std::string> engine_endpoints;
  /// The replay endpoint of each DP rank; empty when replay is off.
  std::vector<std::string> replay_endpoints;

  /// True when the stats path reads the SGLang profile.
  bool sglang_profile() const { return hash_scheme == "sglang"; }
  /// The core's settings.
  core_options core() const;
};

/// The result of parsing: a config, or {exit code, text to print}.
struct parse_exit {
  int code;
  std::string text;
};
std::variant<config, parse_exit> parse_config(int argc, const char* const* argv);

/// Parses `--lora-adapter-names` (`id=name,…`); nullopt and `*err` on bad input [REF].
std::optional<std::map<std::int64_t, std::string>> parse_lora_names(const std::string& text, std::string* err);

/// Shifts `endpoint` for DP rank `rank` (tcp: port + rank; inproc: suffix `_dp<rank>`);
/// nullopt when the transport has no such rule.
std::optional<std::string> endpoint_for_rank(const std::string& endpoint, int rank);

}  // namespace ic::kvevent
