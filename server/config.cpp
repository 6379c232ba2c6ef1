#include "server/config.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "policy/duration.hpp"

namespace ic::server {
namespace {

std::string trim(std::string s) {
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Splits a Go-style "host:port" bind address; returns false when it is not one.
bool split_bind(const std::string& bind, std::string& host, std::string& port) {
  auto colon = bind.rfind(':');
  if (colon == std::string::npos) return false;
  host = bind.substr(0, colon);
  port = bind.substr(colon + 1);
  if (port.empty() || port.size() > 5) return false;
  if (!std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c); }))
    return false;
  if (std::stoi(port) > 65535) return false;
  if (!host.empty() && host.front() == '[' && host.back() != ']') return false;
  return host.find(' ') == std::string::npos;
}

early_exit invalid(const std::string& what) { return early_exit{2, what}; }

}  // namespace

std::string grpc_listen_address(const std::string& bind) {
  if (!bind.empty() && bind.front() == ':') return "0.0.0.0" + bind;
  return bind;
}

std::string http_listen_address(const std::string& bind) {
  if (!bind.empty() && bind.front() == ':') return bind.substr(1);
  return bind;
}

/// What the flags write into while CLI11 parses: the config and the raw text of the flags
/// that are validated after parsing.
struct command_line_parser::bound {
  server_config cfg;
  std::string log_format = "json";
  // The flags' text defaults as --help shows them; they parse to server_config's typed
  // defaults (ServerConfig.DefaultsMatchTheSpecWithInsecureAuth checks the parsed values).
  std::string default_ttl = "30m", sweep_interval = "1m", metrics_interval = "5s";
  std::string snapshot_interval = "10m";
  std::string allowed_sa;
  std::int64_t snapshot_every_records = static_cast<std::int64_t>(cfg.snapshot_every_records);
  std::string http_idle_timeout = "10s";
  journal_flag_text journal_text;
};

/// The CLI11 app with every flag bound to `values`, and the values as declared.
struct command_line_parser::state {
  bound values;
  bound defaults;  // `values` right after declaring (add_journal_flags sets its texts)
  CLI::App app{"inferencecache-server: cache-aware routing index for LLM inference"};
  state();
};

command_line_parser::state::state() {
  server_config& cfg = values.cfg;
  app.name("inferencecache-server");
  app.set_version_flag("--version", server_version);
  app.allow_windows_style_options(false);
  app.add_option("--grpc-bind-address", cfg.grpc_bind_address, "gRPC listen address")
      ->capture_default_str();
  app.add_option("--http-bind-address", cfg.http_bind_address,
                 "HTTP address for /healthz, /readyz, /metrics")
      ->capture_default_str();
  app.add_option("--snapshot-bind-address", cfg.snapshot_bind_address,
                 "admin HTTP address for /snapshot, /policy, /topology, /templates, /probe")
      ->capture_default_str();
  app.add_flag("--insecure-disable-auth", cfg.insecure_disable_auth,
               "leave the admin port unauthenticated (local development)");
  app.add_option("--admin-token-file", cfg.admin_token_file,
                 "file holding the bearer token for the admin port");
  app.add_option("--allowed-controller-sa", values.allowed_sa,
                 "not supported: Kubernetes TokenReview auth is replaced by --admin-token-file");
  app.add_option("--tls-cert-file", cfg.tls_cert_file, "PEM certificate for gRPC TLS");
  app.add_option("--tls-key-file", cfg.tls_key_file, "PEM private key for gRPC TLS");
  app.add_option("--engine-block-size", cfg.engine_block_size,
                 "tokens per block when fingerprinting token_ids (<=0 ignored)")
      ->capture_default_str();
  app.add_option("--log-format", values.log_format, "json | text")->capture_default_str();
  app.add_option("--log-level", cfg.log_level, "debug | info | warn | error")
      ->capture_default_str();
  app.add_option("--tokenizer-models-dir", cfg.tokenizer_models_dir,
                 "folder of model folders (<dir>/<model_id>/tokenizer.json + tokenizer_config.json) "
                 "for prompt_text lookups");
  app.add_option("--data-dir", cfg.data_dir, "journal and snapshot directory")
      ->capture_default_str();
  app.add_flag("--journal-fsync", cfg.journal_fsync,
               "fsync the journal (group commit) before acknowledging");
  app.add_option("--policy-file", cfg.policy_file, "a /policy JSON body applied at startup");
  app.add_option("--topology-file", cfg.topology_file, "a /topology JSON body applied at startup");
  app.add_option("--templates-file", cfg.templates_file,
                 "a /templates JSON body applied at startup");
  app.add_option("--max-index-entries", cfg.max_index_entries,
                 "global cap on (key x replica) entries; 0 = unbounded")
      ->capture_default_str();
  app.add_option("--default-ttl", values.default_ttl, "entry TTL when no policy sets one")
      ->capture_default_str();
  app.add_option("--sweep-interval", values.sweep_interval, "TTL sweep period")->capture_default_str();
  app.add_option("--snapshot-interval", values.snapshot_interval,
                 "snapshot the index (and truncate the journal) this often; 0 = never by time")
      ->capture_default_str();
  app.add_option("--snapshot-every-records", values.snapshot_every_records,
                 "snapshot after this many journal records; 0 = never by count")
      ->capture_default_str();
  app.add_option("--metrics-stream-interval", values.metrics_interval, "StreamMetrics push period")
      ->capture_default_str();
  app.add_option("--max-recv-message-bytes", cfg.max_recv_message_bytes,
                 "largest gRPC message accepted")
      ->capture_default_str();
  app.add_option("--http-idle-timeout", values.http_idle_timeout,
                 "close an HTTP connection without a complete request, or silent, after this long")
      ->capture_default_str();
  app.add_option("--http-max-connections", cfg.http_max_connections,
                 "open connections per HTTP port; more are closed at accept")
      ->capture_default_str();
  add_journal_flags(app, cfg.journal, values.journal_text);
  defaults = values;
}

command_line_parser::command_line_parser() : state_(std::make_unique<state>()) {}
command_line_parser::~command_line_parser() = default;
command_line_parser::command_line_parser(command_line_parser&&) noexcept = default;
command_line_parser& command_line_parser::operator=(command_line_parser&&) noexcept = default;

std::variant<server_config, early_exit> parse_command_line(int argc, const char* const* argv) {
  return command_line_parser{}.parse(argc, argv);
}

std::variant<server_config, early_exit> command_line_parser::parse(int argc,
                                                                   const char* const* argv) {
  // Every parse starts from the declared defaults and with no results (counts, values) of
  // an earlier parse in the app.
  state_->values = state_->defaults;
  CLI::App& app = state_->app;
  app.clear();
  bound& v = state_->values;
  server_config& cfg = v.cfg;
  const std::string& log_format = v.log_format;
  const std::string& allowed_sa = v.allowed_sa;
  const std::string& http_idle_timeout = v.http_idle_timeout;
  const std::string &default_ttl = v.default_ttl, &sweep_interval = v.sweep_interval,
                    &metrics_interval = v.metrics_interval,
                    &snapshot_interval = v.snapshot_interval;
  const std::int64_t& snapshot_every_records = v.snapshot_every_records;
  const journal_flag_text& journal_text = v.journal_text;

  // Go's flag package also accepts a single dash; normalise "-flag" to "--flag".
  std::vector<std::string> args;
  for (int i = argc - 1; i >= 1; --i) {
    std::string a = argv[i];
    if (a.size() > 2 && a[0] == '-' && a[1] != '-') a = "-" + a;
    args.push_back(a);
  }
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp&) {
    return early_exit{0, app.help()};
  } catch (const CLI::CallForVersion&) {
    return early_exit{0, std::string("inferencecache-server ") + server_version + "\n"};
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    std::replace(msg.begin(), msg.end(), '\n', ' ');
    return invalid(trim(msg));
  }

  if (!allowed_sa.empty())
    return invalid(
        "--allowed-controller-sa is not supported: Kubernetes TokenReview auth is replaced by "
        "--admin-token-file (or pass --insecure-disable-auth for local development)");

  std::string fmt = lower(trim(log_format));
  if (fmt.empty() || fmt == "json") {
    cfg.format = log_format::json;
  } else if (fmt == "text") {
    cfg.format = log_format::text;
  } else {
    return invalid("invalid --log-format \"" + log_format + "\": want json or text");
  }
  std::string lvl = lower(trim(cfg.log_level));
  if (lvl == "warning") lvl = "warn";
  if (lvl != "debug" && lvl != "info" && lvl != "warn" && lvl != "error")
    return invalid("invalid --log-level \"" + cfg.log_level + "\": want debug, info, warn or error");
  cfg.log_level = lvl;

  for (auto* flag : {"--grpc-bind-address", "--http-bind-address", "--snapshot-bind-address"}) {
    std::string value = app.get_option(flag)->as<std::string>();
    std::string host, port;
    if (!split_bind(value, host, port))
      return invalid(std::string("invalid ") + flag + " \"" + value + "\": want [host]:port");
  }

  const bool have_token = !cfg.admin_token_file.empty();
  if (have_token == cfg.insecure_disable_auth)
    return invalid(
        have_token ? "pass either --admin-token-file or --insecure-disable-auth, not both"
                   : "the admin port needs auth: pass --admin-token-file=FILE, or "
                     "--insecure-disable-auth for local development");
  if (have_token) {
    std::ifstream in(cfg.admin_token_file);
    if (!in) return invalid("cannot read --admin-token-file \"" + cfg.admin_token_file + "\"");
    std::stringstream ss;
    ss << in.rdbuf();
    cfg.admin_token = trim(ss.str());
    if (cfg.admin_token.empty())
      return invalid("--admin-token-file \"" + cfg.admin_token_file + "\" holds no token");
  }

  if (cfg.tls_cert_file.empty() != cfg.tls_key_file.empty())
    return invalid("--tls-cert-file and --tls-key-file must be set together");

  if (cfg.engine_block_size <= 0) cfg.engine_block_size = server_config{}.engine_block_size;
  if (cfg.max_index_entries < 0)
    return invalid("invalid --max-index-entries " + std::to_string(cfg.max_index_entries) +
                   ": want 0 (unbounded) or more");
  if (cfg.max_recv_message_bytes <= 0)
    return invalid("invalid --max-recv-message-bytes " +
                   std::to_string(cfg.max_recv_message_bytes) + ": want a positive size");
  if (trim(cfg.data_dir).empty()) return invalid("--data-dir must not be empty");
  if (cfg.http_max_connections <= 0)
    return invalid("invalid --http-max-connections " + std::to_string(cfg.http_max_connections) +
                   ": want a positive count");
  auto idle = ic::policy::parse_duration(http_idle_timeout);
  if (!idle.has_value() || idle.value() <= std::chrono::nanoseconds::zero())
    return invalid("invalid --http-idle-timeout \"" + http_idle_timeout + "\": " +
                   (idle.has_value() ? std::string("must be positive") : idle.error()));
  cfg.http_idle_timeout = idle.value();

  struct duration_flag {
    const char* name;
    const std::string& text;
    std::chrono::nanoseconds& out;
    std::chrono::nanoseconds fallback;
  };
  const duration_flag durations[] = {
      {"--default-ttl", default_ttl, cfg.default_ttl, server_config{}.default_ttl},
      {"--sweep-interval", sweep_interval, cfg.sweep_interval, server_config{}.sweep_interval},
      {"--metrics-stream-interval", metrics_interval, cfg.metrics_stream_interval,
       server_config{}.metrics_stream_interval},
  };
  for (const auto& d : durations) {
    auto parsed = ic::policy::parse_duration(d.text);
    if (!parsed.has_value())
      return invalid(std::string("invalid ") + d.name + " \"" + d.text + "\": " + parsed.error());
    // Non-positive durations fall back to the default, as the reference clamps them.
    d.out = parsed.value() > std::chrono::nanoseconds::zero() ? parsed.value() : d.fallback;
  }
  auto snap = ic::policy::parse_duration(snapshot_interval);
  if (!snap.has_value() || snap.value() < std::chrono::nanoseconds::zero())
    return invalid("invalid --snapshot-interval \"" + snapshot_interval +
                   "\": " + (snap.has_value() ? std::string("must not be negative") : snap.error()));
  cfg.snapshot_interval = snap.value();
  if (snapshot_every_records < 0)
    return invalid("invalid --snapshot-every-records " + std::to_string(snapshot_every_records) +
                   ": want 0 (never by count) or more");
  cfg.snapshot_every_records = static_cast<std::uint64_t>(snapshot_every_records);
  if (auto bad = finish_journal_flags(app, journal_text, cfg.journal)) return invalid(*bad);
  return cfg;
}

}  // namespace ic::server
