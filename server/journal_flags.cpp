#include "server/journal_flags.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "journal/jetstream/jetstream_record_log.hpp"
#include "policy/duration.hpp"

namespace ic::server {
namespace {

const char* const kNatsOnly[] = {"--nats-servers",   "--replica-id",
                                 "--nats-stream",    "--nats-replicas",
                                 "--nats-creds-file", "--journal-append-timeout",
                                 "--shared-snapshot-interval", "--max-apply-lag",
                                 "--lfu-credit-interval", "--lfu-credit",
                                 "--journal-reset"};

std::string default_replica_id() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "replica";
  std::string id(host);
  if (auto dot = id.find('.'); dot != std::string::npos) id.resize(dot);
  for (char& c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') c = '-';
  return id.empty() ? "replica" : id;
}

}  // namespace

std::string duration_text(std::chrono::nanoseconds d) {
  using namespace std::chrono;
  if (d.count() != 0 && d % minutes(1) == nanoseconds::zero())
    return std::to_string(duration_cast<minutes>(d).count()) + "m";
  if (d % seconds(1) == nanoseconds::zero())
    return std::to_string(duration_cast<seconds>(d).count()) + "s";
  return std::to_string(duration_cast<milliseconds>(d).count()) + "ms";
}

void add_journal_flags(CLI::App& app, journal_config& cfg, journal_flag_text& text) {
  text.kind = "rocksdb";
  text.append_timeout = duration_text(cfg.append_timeout);
  text.shared_snapshot_interval = duration_text(cfg.shared_snapshot_interval);
  text.max_apply_lag = duration_text(cfg.max_apply_lag);
  text.lfu_credit_interval = duration_text(cfg.lfu_credit_interval);
  text.lfu_credit = cfg.lfu_credits_off ? "local-off" : "journal";
  app.add_option("--journal", text.kind,
                 "rocksdb (embedded, one server) | jetstream (NATS JetStream, N replicas)")
      ->capture_default_str();
  app.add_option("--nats-servers", text.servers,
                 "NATS URLs for --journal=jetstream: nats://host:port,...");
  app.add_option("--replica-id", cfg.replica_id,
                 "this replica's id in the stream, unique per replica (default: the host name)");
  app.add_option("--nats-stream", cfg.nats_stream, "JetStream stream of the journal")
      ->capture_default_str();
  app.add_option("--nats-replicas", cfg.nats_replicas,
                 "stream replicas when the stream is created (1 for a one-node NATS)")
      ->capture_default_str();
  app.add_option("--nats-creds-file", cfg.nats_creds_file, "NATS credentials file");
  app.add_option("--journal-append-timeout", text.append_timeout,
                 "publish budget (same-id retries) before JOURNAL_UNAVAILABLE")
      ->capture_default_str();
  app.add_option("--shared-snapshot-interval", text.shared_snapshot_interval,
                 "how often the lease holder uploads its local snapshot to KV (then purges the stream)")
      ->capture_default_str();
  app.add_option("--max-apply-lag", text.max_apply_lag,
                 "refuse appends while this replica's apply lag is larger; 0 = never")
      ->capture_default_str();
  app.add_option("--lfu-credit-interval", text.lfu_credit_interval,
                 "journal lookups' LFU credits as one record per replica this often")
      ->capture_default_str();
  app.add_option("--lfu-credit", text.lfu_credit,
                 "journal (lookups' LFU credits go through the stream) | local-off (lookups "
                 "credit nothing: LFU tenants evict like LRU, on every replica alike)")
      ->capture_default_str();
  app.add_flag("--journal-reset", cfg.journal_reset,
               "start even when the stream was purged past this replica and no snapshot covers "
               "it: rebuild from the stream's first sequence (the rest is lost) and write the "
               "shared snapshot other halted replicas recover from; a no-op when covered");
}

std::optional<std::string> finish_journal_flags(const CLI::App& app, const journal_flag_text& text,
                                                journal_config& cfg) {
  if (text.kind == "rocksdb") {
    cfg.kind = journal_kind::rocksdb;
    for (const char* flag : kNatsOnly)
      if (app.count(flag) > 0) return std::string(flag) + " needs --journal=jetstream";
    return std::nullopt;
  }
  if (text.kind != "jetstream")
    return "invalid --journal \"" + text.kind + "\": want rocksdb or jetstream";
  cfg.kind = journal_kind::jetstream;
  cfg.nats_servers.clear();
  std::stringstream ss(text.servers);
  for (std::string url; std::getline(ss, url, ',');) {
    if (url.empty()) continue;
    if (url.rfind("nats://", 0) != 0 && url.rfind("tls://", 0) != 0)
      return "invalid --nats-servers entry \"" + url + "\": want nats://host:port or tls://host:port";
    cfg.nats_servers.push_back(url);
  }
  if (cfg.nats_servers.empty()) return "--journal=jetstream needs --nats-servers=nats://host:port,...";
  if (text.lfu_credit != "journal" && text.lfu_credit != "local-off")
    return "invalid --lfu-credit \"" + text.lfu_credit + "\": want journal or local-off";
  cfg.lfu_credits_off = text.lfu_credit == "local-off";
  if (cfg.replica_id.empty()) cfg.replica_id = default_replica_id();
  if (auto st = journal::jetstream::validate_origin(cfg.replica_id); !st.ok())
    return "invalid --replica-id \"" + cfg.replica_id + "\": " + st.message();
  if (cfg.nats_stream.empty() ||
      cfg.nats_stream.find_first_of(" .*>\t") != std::string::npos)
    return "invalid --nats-stream \"" + cfg.nats_stream + "\": a JetStream name without . * > or spaces";
  if (cfg.nats_replicas < 1 || cfg.nats_replicas > 5)
    return "invalid --nats-replicas " + std::to_string(cfg.nats_replicas) + ": want 1..5";
  if (!cfg.nats_creds_file.empty() && !std::ifstream(cfg.nats_creds_file))
    return "cannot read --nats-creds-file \"" + cfg.nats_creds_file + "\"";
  struct duration_flag {
    const char* name;
    const std::string& text;
    std::chrono::nanoseconds& out;
    bool zero_ok;
  };
  const duration_flag durations[] = {
      {"--journal-append-timeout", text.append_timeout, cfg.append_timeout, false},
      {"--shared-snapshot-interval", text.shared_snapshot_interval, cfg.shared_snapshot_interval,
       false},
      {"--max-apply-lag", text.max_apply_lag, cfg.max_apply_lag, true},
      {"--lfu-credit-interval", text.lfu_credit_interval, cfg.lfu_credit_interval, false},
  };
  for (const auto& d : durations) {
    auto parsed = ic::policy::parse_duration(d.text);
    if (!parsed.has_value())
      return std::string("invalid ") + d.name + " \"" + d.text + "\": " + parsed.error();
    const auto v = parsed.value();
    if (v < std::chrono::nanoseconds::zero() || (!d.zero_ok && v == std::chrono::nanoseconds::zero()))
      return std::string("invalid ") + d.name + " \"" + d.text + "\": must be positive";
    d.out = v;
  }
  return std::nullopt;
}

std::chrono::nanoseconds local_snapshot_interval(const journal_config& cfg,
                                                 std::chrono::nanoseconds snapshot_interval) {
  if (cfg.kind != journal_kind::jetstream) return snapshot_interval;
  if (snapshot_interval.count() == 0 || cfg.shared_snapshot_interval < snapshot_interval)
    return cfg.shared_snapshot_interval;
  return snapshot_interval;
}

std::function<journal::result<std::unique_ptr<journal::record_log>>()> journal_opener(
    const journal_config& cfg, const std::string& data_dir, bool fsync) {
  if (cfg.kind != journal_kind::jetstream) return {};
  using namespace std::chrono;
  journal::jetstream::jetstream_log_options o;
  o.nats.servers = cfg.nats_servers;
  o.nats.creds_file = cfg.nats_creds_file;
  o.nats.replica_id = cfg.replica_id;
  o.nats.stream = cfg.nats_stream;
  o.nats.replicas = cfg.nats_replicas;
  o.nats.append_timeout = duration_cast<milliseconds>(cfg.append_timeout);
  o.snapshot_dir = (std::filesystem::path(data_dir) / "snapshots").string();
  o.local.fsync = fsync;
  o.shared_snapshot_interval = duration_cast<milliseconds>(cfg.shared_snapshot_interval);
  o.reset_uncovered = cfg.journal_reset;
  o.on_event = [](bool warn, const std::string& line) {
    if (warn)
      spdlog::warn("{}", line);
    else
      spdlog::info("{}", line);
  };
  return [o]() -> journal::result<std::unique_ptr<journal::record_log>> {
    auto opened = journal::jetstream::jetstream_log::open(o);
    if (!opened.ok()) return opened.status();
    return std::unique_ptr<journal::record_log>(std::move(opened).value());
  };
}

}  // namespace ic::server
