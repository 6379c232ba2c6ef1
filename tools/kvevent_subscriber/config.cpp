#include "tools/kvevent_subscriber/config.hpp"

#include <fstream>
#include <sstream>

#include <set>

#include "policy/duration.hpp"
#include "tools/common/codec.hpp"

namespace ic::kvevent {
namespace {

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// A Go-style bool: the forms strconv.ParseBool accepts.
bool parse_bool(const std::string& s, bool& out) {
  if (s == "1" || s == "t" || s == "T" || s == "true" || s == "TRUE" || s == "True") out = true;
  else if (s == "0" || s == "f" || s == "F" || s == "false" || s == "FALSE" || s == "False") out = false;
  else return false;
  return true;
}

struct invalid {
  std::string line;
};

std::int64_t duration_ms(const std::string& flag, const std::string& text) {
  auto d = ic::policy::parse_duration(text);
  if (!d) throw invalid{"invalid value \"" + text + "\" for flag " + flag + ": " + d.error()};
  return std::chrono::duration_cast<std::chrono::milliseconds>(*d).count();
}

}  // namespace

std::optional<std::map<std::int64_t, std::string>> parse_lora_names(const std::string& text, std::string* err) {
  std::map<std::int64_t, std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string::npos) {
      *err = "invalid --lora-adapter-names entry \"" + item + "\": want id=name";
      return std::nullopt;
    }
    std::string id_text = trim(item.substr(0, eq));
    std::string name = trim(item.substr(eq + 1));
    std::int64_t id = 0;
    try {
      std::size_t used = 0;
      id = std::stoll(id_text, &used, 10);
      if (used != id_text.size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      *err = "invalid --lora-adapter-names entry \"" + item + "\": id must be an integer";
      return std::nullopt;
    }
    if (name.empty()) {
      *err = "invalid --lora-adapter-names entry \"" + item + "\": empty adapter name";
      return std::nullopt;
    }
    if (!out.emplace(id, name).second) {
      *err = "invalid --lora-adapter-names: duplicate id " + std::to_string(id);
      return std::nullopt;
    }
  }
  return out;
}

std::optional<std::string> endpoint_for_rank(const std::string& endpoint, int rank) {
  if (rank == 0) return endpoint;
  if (endpoint.rfind("tcp://", 0) == 0) {
    auto colon = endpoint.rfind(':');
    if (colon == std::string::npos || colon < 6) return std::nullopt;
    try {
      int port = std::stoi(endpoint.substr(colon + 1));
      return endpoint.substr(0, colon + 1) + std::to_string(port + rank);
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  if (endpoint.rfind("inproc://", 0) == 0) return endpoint + "_dp" + std::to_string(rank);
  return std::nullopt;
}

core_options config::core() const {
  core_options o;
  o.sources = static_cast<std::size_t>(dp_size);
  o.dialect = hash_scheme == "sglang" ? wire_dialect::sglang : wire_dialect::vllm;
  o.topic = topic;
  o.topic_exact = topic_exact;
  o.ignore_block_removed = ignore_block_removed;
  o.lora_names = lora_names;
  o.lora_name_as_adapter = lora_name_as_adapter;
  o.extra_keys_drop = extra_keys_drop;
  o.kv_spec_kinds = kv_spec_kinds;
  o.kv_groups = kv_groups;
  o.routing_block_size = routing_block_size;
  o.max_tracked_blocks = max_tracked_blocks;
  o.t2_retention_ms = t2_retention_ms;
  o.max_batch_entries = max_batch_entries;
  o.window_ms = window_ms;
  o.refresh_interval_ms = refresh_interval_ms;
  o.replay = !replay_endpoint.empty();
  o.startup_replay = startup_replay;
  o.replay_timeout_ms = replay_timeout_ms;
  o.replay_max_rounds = replay_max_rounds;
  o.clear_on_start = clear_on_start;
  o.gap_clear = gap_clear;
  return o;
}

std::variant<config, parse_exit> parse_config(int argc, const char* const* argv) {
  config c;
  std::map<std::string, std::string> raw;  // flag → text, for the typed parse below
  struct spec {
    const char* name;
    const char* def;
    const char* help;
  };
  const spec flags[] = {
      {"--engine-endpoint", "tcp://127.0.0.1:5557", "engine ZMQ PUB endpoint to connect to"},
      {"--topic", "kv-events", "SUB topic prefix; \"\" = all"},
      {"--server", "127.0.0.1:9090", "InferenceCache gRPC address"},
      {"--replica-id", "", "replica_id on every report (required)"},
      {"--model-id", "", "model_id on every report (required)"},
      {"--tenant-id", "", "tenant_id on every report"},
      {"--hash-scheme", "vllm", "hash_scheme on every report; sglang selects the SGLang dialect and metrics profile"},
      {"--window", "100ms", "debounce and flush period for additions (<=0: 100ms)"},
      {"--engine-metrics-url", "http://127.0.0.1:8000/metrics", "engine Prometheus endpoint to scrape"},
      {"--stats-interval", "10s", "stats period (<=0: 10s)"},
      {"--engine-cache-size-bytes", "0", "multiplied by the usage ratio to give cache_memory_bytes"},
      {"--max-concurrency-ceiling", "256", "denominator of pressure; 0 = pressure 0"},
      {"--cache-tier", "auto", "auto|kv|gpu|cpu: which usage gauge to read"},
      {"--engine-model-name", "", "keep only metric series whose label model_name equals this"},
      {"--ignore-block-removed", "false", "the engine has an L2 tier: BlockRemoved -> T2 instead of eviction"},
      {"--lora-adapter-names", "", "id=name,... map from LoRA id to adapter name (unmapped ids fail closed)"},
      {"--replay-endpoint", "", "engine replay ROUTER, e.g. tcp://127.0.0.1:5558; \"\" disables replay"},
      {"--replay-timeout", "2s", "a replay round ends when nothing arrives for this long"},
      {"--replay-max-rounds", "8", "re-requests for one gap before it is unrecoverable"},
      {"--startup-replay", "true", "with a replay endpoint: replay from seq 0 at startup"},
      {"--clear-on-start", "true", "send ALL_CLEARED for this replica before the first report"},
      {"--on-unrecoverable-gap", "clear", "clear|keep"},
      {"--dp-size", "1", "data-parallel ranks: endpoints port+rank"},
      {"--topic-match", "prefix", "prefix|exact"},
      {"--routing-block-size", "0", "0 = fingerprint at the event's block_size; N = at N tokens"},
      {"--kv-spec-kinds", "full_attention", "hybrid models: kv_cache_spec_kind values to index"},
      {"--kv-groups", "0", "hybrid models without kinds: group_idx values to index"},
      {"--extra-keys-policy", "drop", "drop|ignore blocks with cache_salt/multimodal extra keys"},
      {"--lora-name-as-adapter", "false", "use lora_name as the adapter when the id is not mapped"},
      {"--max-tracked-blocks", "524288", "bound on reverse-map entries over all sources"},
      {"--t2-retention", "30m", "how long inferred or store-only T2 entries are kept locally"},
      {"--max-batch-entries", "4096", "most PrefixEntry per CacheStateUpdate"},
      {"--rpc-timeout", "5s", "per-RPC deadline"},
      {"--max-pending-ops", "100000", "bound on undelivered operations"},
      {"--retry-initial-backoff", "100ms", "first retry delay"},
      {"--retry-max-backoff", "5s", "largest retry delay"},
      {"--resync-after-outage", "auto", "auto|always|never"},
      {"--refresh-interval", "10m", "re-report resident T1/T3 keys this often; 0 disables"},
      {"--http-bind-address", ":9465", "/metrics, /healthz, /readyz, /statusz; \"\" disables"},
      {"--client-version", "", "copied into ReplicaStats.client_version"},
      {"--server-tls-ca-file", "", "TLS to the server with this CA bundle; plaintext when empty"},
      {"--server-tls-server-name", "", "TLS server name override"},
      {"--log-format", "json", "json|text"},
      {"--log-level", "info", "debug|info|warn|error"},
      {"--shutdown-timeout", "5s", "drain budget on SIGTERM"},
  };
  // Go's flag package, which the managed sidecar's arguments are written for: `--name=value`,
  // `--name value` (not for bools), one or two dashes, a bare bool flag means true, parsing
  // stops at `--`.
  static const std::set<std::string> bools = {"--ignore-block-removed", "--startup-replay", "--clear-on-start",
                                              "--lora-name-as-adapter"};
  std::set<std::string> seen;
  for (const auto& f : flags) raw[f.name] = f.def;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") break;
    if (a == "-h" || a == "--help" || a == "-help") {
      std::string text = "Usage of inferencecache-kvevent-subscriber:\n";
      for (const auto& f : flags) text += "  " + std::string(f.name) + " (default \"" + f.def + "\")\n      " + f.help + "\n";
      return parse_exit{0, text};
    }
    if (a.size() < 2 || a[0] != '-') {
      return parse_exit{2, "inferencecache-kvevent-subscriber: unexpected argument \"" + a + "\""};
    }
    std::string name = a.rfind("--", 0) == 0 ? a : "-" + a;
    std::optional<std::string> value;
    auto eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (raw.find(name) == raw.end()) {
      return parse_exit{2, "inferencecache-kvevent-subscriber: flag provided but not defined: " + name};
    }
    if (!value) {
      if (bools.count(name)) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return parse_exit{2, "inferencecache-kvevent-subscriber: flag needs an argument: " + name};
      }
    }
    raw[name] = *value;
    seen.insert(name);
  }
  auto text = [&](const char* name) { return raw[name]; };
  auto boolean = [&](const char* name) {
    std::string s = raw[name];
    bool v = false;
    if (!parse_bool(s, v)) throw invalid{"invalid boolean value \"" + s + "\" for flag " + std::string(name)};
    return v;
  };
  auto integer = [&](const char* name) -> std::int64_t {
    std::string s = raw[name];
    try {
      std::size_t used = 0;
      long long v = std::stoll(s, &used, 10);
      if (used != s.size()) throw std::invalid_argument("x");
      return v;
    } catch (const std::exception&) {
      throw invalid{"invalid value \"" + s + "\" for flag " + std::string(name) + ": parse error"};
    }
  };
  auto one_of = [&](const char* name, std::initializer_list<const char*> allowed) {
    std::string s = raw[name];
    for (const char* a : allowed)
      if (s == a) return s;
    std::string list;
    for (const char* a : allowed) list += (list.empty() ? "" : "|") + std::string(a);
    throw invalid{std::string(name) + " must be one of " + list + ", got \"" + s + "\""};
  };
  auto at_least = [&](const char* name, std::int64_t v, std::int64_t min) {
    if (v < min) throw invalid{std::string(name) + " must be >= " + std::to_string(min) + ", got " + std::to_string(v)};
    return v;
  };
  try {
    c.engine_endpoint = text("--engine-endpoint");
    c.topic = text("--topic");
    c.server = text("--server");
    c.replica_id = text("--replica-id");
    c.model_id = text("--model-id");
    c.tenant_id = text("--tenant-id");
    c.hash_scheme = text("--hash-scheme");
    c.window_ms = duration_ms("--window", text("--window"));
    if (c.window_ms <= 0) c.window_ms = 100;  // clamped [REF]
    c.engine_metrics_url = text("--engine-metrics-url");
    c.stats_interval_ms = duration_ms("--stats-interval", text("--stats-interval"));
    if (c.stats_interval_ms <= 0) c.stats_interval_ms = 10000;  // clamped [REF]
    c.engine_cache_size_bytes = integer("--engine-cache-size-bytes");
    c.max_concurrency_ceiling = integer("--max-concurrency-ceiling");
    std::string tier = one_of("--cache-tier", {"auto", "kv", "gpu", "cpu"});
    c.cache_tier = tier == "kv" ? cache_tier_flag::kv
                   : tier == "gpu" ? cache_tier_flag::gpu
                   : tier == "cpu" ? cache_tier_flag::cpu
                                   : cache_tier_flag::automatic;
    c.engine_model_name = text("--engine-model-name");
    c.ignore_block_removed = boolean("--ignore-block-removed");
    std::string err;
    auto lora = parse_lora_names(text("--lora-adapter-names"), &err);
    if (!lora) throw invalid{err};
    c.lora_names = *lora;
    if (c.replica_id.empty()) throw invalid{"--replica-id is required"};
    if (c.model_id.empty()) throw invalid{"--model-id is required"};
    if (c.hash_scheme.empty()) throw invalid{"--hash-scheme must not be empty"};
    if (c.hash_scheme != "vllm" && c.hash_scheme != "sglang") {
      c.warnings.push_back("unknown --hash-scheme \"" + c.hash_scheme + "\"; using the vLLM metrics profile and wire dialect");
    }

    c.replay_endpoint = text("--replay-endpoint");
    c.replay_timeout_ms = at_least("--replay-timeout", duration_ms("--replay-timeout", text("--replay-timeout")), 1);
    c.replay_max_rounds = static_cast<int>(at_least("--replay-max-rounds", integer("--replay-max-rounds"), 1));
    c.startup_replay = boolean("--startup-replay");
    c.clear_on_start = boolean("--clear-on-start");
    c.gap_clear = one_of("--on-unrecoverable-gap", {"clear", "keep"}) == "clear";
    c.dp_size = static_cast<int>(at_least("--dp-size", integer("--dp-size"), 1));
    if (c.dp_size > 64) throw invalid{"--dp-size must be <= 64"};
    c.topic_exact = one_of("--topic-match", {"prefix", "exact"}) == "exact";
    c.routing_block_size = static_cast<int>(at_least("--routing-block-size", integer("--routing-block-size"), 0));
    c.kv_spec_kinds = ic::tools::split_list(text("--kv-spec-kinds"));
    c.kv_groups.clear();
    for (const auto& g : ic::tools::split_list(text("--kv-groups"))) {
      try {
        std::size_t used = 0;
        c.kv_groups.push_back(std::stoll(g, &used));
        if (used != g.size()) throw std::invalid_argument("x");
      } catch (const std::exception&) {
        throw invalid{"invalid --kv-groups entry \"" + g + "\": want an integer"};
      }
    }
    c.extra_keys_drop = one_of("--extra-keys-policy", {"drop", "ignore"}) == "drop";
    c.lora_name_as_adapter = boolean("--lora-name-as-adapter");
    c.max_tracked_blocks = static_cast<std::size_t>(at_least("--max-tracked-blocks", integer("--max-tracked-blocks"), 1));
    c.t2_retention_ms = at_least("--t2-retention", duration_ms("--t2-retention", text("--t2-retention")), 1);
    c.max_batch_entries = static_cast<std::size_t>(at_least("--max-batch-entries", integer("--max-batch-entries"), 1));
    c.rpc_timeout_ms = at_least("--rpc-timeout", duration_ms("--rpc-timeout", text("--rpc-timeout")), 1);
    c.max_pending_ops = static_cast<std::size_t>(at_least("--max-pending-ops", integer("--max-pending-ops"), 1));
    c.retry_initial_backoff_ms =
        at_least("--retry-initial-backoff", duration_ms("--retry-initial-backoff", text("--retry-initial-backoff")), 1);
    c.retry_max_backoff_ms =
        at_least("--retry-max-backoff", duration_ms("--retry-max-backoff", text("--retry-max-backoff")), 1);
    if (c.retry_max_backoff_ms < c.retry_initial_backoff_ms) {
      throw invalid{"--retry-max-backoff must be >= --retry-initial-backoff"};
    }
    std::string rs = one_of("--resync-after-outage", {"auto", "always", "never"});
    c.resync_after_outage = rs == "always" ? resync_policy::always : rs == "never" ? resync_policy::never : resync_policy::automatic;
    c.refresh_interval_ms = at_least("--refresh-interval", duration_ms("--refresh-interval", text("--refresh-interval")), 0);
    c.http_bind_address = text("--http-bind-address");
    c.client_version = text("--client-version");
    c.server_tls_ca_file = text("--server-tls-ca-file");
    c.server_tls_server_name = text("--server-tls-server-name");
    if (!c.server_tls_ca_file.empty() && !std::ifstream(c.server_tls_ca_file).good()) {
      throw invalid{"cannot read --server-tls-ca-file \"" + c.server_tls_ca_file + "\""};
    }
    c.log_json = one_of("--log-format", {"json", "text"}) == "json";
    if (!parse_log_level(text("--log-level"), c.level)) {
      throw invalid{"--log-level must be one of debug|info|warn|error, got \"" + text("--log-level") + "\""};
    }
    c.shutdown_timeout_ms = at_least("--shutdown-timeout", duration_ms("--shutdown-timeout", text("--shutdown-timeout")), 0);
    for (int r = 0; r < c.dp_size; ++r) {
      auto e = endpoint_for_rank(c.engine_endpoint, r);
      if (!e) throw invalid{"--dp-size > 1 needs a tcp:// or inproc:// --engine-endpoint"};
      c.engine_endpoints.push_back(*e);
      if (!c.replay_endpoint.empty()) {
        auto re = endpoint_for_rank(c.replay_endpoint, r);
        if (!re) throw invalid{"--dp-size > 1 needs a tcp:// or inproc:// --replay-endpoint"};
        c.replay_endpoints.push_back(*re);
      }
    }
    if (c.hash_scheme == "sglang" && !c.lora_names.empty()) {
      c.warnings.push_back("--lora-adapter-names with --hash-scheme sglang: SGLang sends no lora_id, so its LoRA traffic cannot be partitioned");
    }
  } catch (const invalid& e) {
    return parse_exit{2, "inferencecache-kvevent-subscriber: " + e.line};
  }
  return c;
}

}  // namespace ic::kvevent
