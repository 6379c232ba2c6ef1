#include "server/server_app.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <grpc/grpc.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include "actors/runtime.hpp"
#include "actors/test_hooks.hpp"
#include "grpc_gateway/inference_cache_service.hpp"
#include "server/admin_auth.hpp"
#include "server/http_server.hpp"
#include "server/logging.hpp"
#include "server/metrics.hpp"
#include "server/probe_json.hpp"
#include "server/snapshot_json.hpp"
#include "server/store_routes.hpp"
#include "server/tls_credentials.hpp"
#include "tokenizer/tokenize_service.hpp"

#ifndef IC_GIT_COMMIT
#define IC_GIT_COMMIT "unknown"
#endif

namespace ic::server {
namespace {

using namespace std::chrono_literals;

std::string read_file(const std::string& path, std::string& error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot read \"" + path + "\"";
    return {};
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string host_of(const std::string& bind) {
  auto colon = bind.rfind(':');
  std::string host = bind.substr(0, colon);
  return host.empty() ? "0.0.0.0" : host;
}

const char* auth_label(auth_result r) { return r == auth_result::ok ? "ok" : "unauth"; }

http_response method_not_allowed(const std::string& allow) {
  http_response r{405, "method not allowed\n"};
  r.headers["Allow"] = allow;
  return r;
}

}  // namespace

struct server_app::impl {
  explicit impl(server_config c)
      : cfg(std::move(c)), auth(cfg.admin_token, cfg.insecure_disable_auth) {}

  server_config cfg;
  admin_auth auth;
  std::atomic<bool> ready{false};
  bool stopped = false;

  server_metrics metrics;
  std::unique_ptr<actors::runtime> runtime;
  // prompt_text tokenizations; the service holds a pointer to it. stop() ends it before the
  // runtime (its pending answers still ask the runtime).
  std::unique_ptr<tokenizer::tokenize_service> tokenizers;
  std::unique_ptr<grpc_gateway::inference_cache_service> service;
  std::unique_ptr<reloading_tls> tls;  // outlives grpc_server (declared before it)
  std::unique_ptr<grpc::Server> grpc_server;
  int grpc_port = 0;
  http_server http;
  http_server admin;

  // Returns the runtime for HTTP threads once recovery finished, else nullptr. `runtime` is
  // assigned by the starting thread before `ready` is stored, so reading `ready` first
  // makes the pointer safe to use (it lives until the app is destroyed).
  actors::runtime* live_runtime() const { return ready.load() ? runtime.get() : nullptr; }

  // /readyz?producer=1 (spec/scaleout.md §3.8): ready for producers only while the journal
  // is writable — the last journal write succeeded, NATS is connected, and (JetStream) the
  // apply lag is within --max-apply-lag. Plain /readyz ignores the journal (lookups serve).
  // Reads atomics only: it answers on the event loop.
  bool producer_ready() const {
    auto* rt = live_runtime();
    if (!rt || !metrics.journal_writable()) return false;
    const journal::log_stats st = rt->journal_stats();
    if (!st.connected) return false;
    const auto max_lag = cfg.journal.max_apply_lag;
    if (!st.replicated || max_lag.count() == 0) return true;
    const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    return journal::apply_lag_seconds(st, now_ns) <=
           std::chrono::duration<double>(max_lag).count();
  }

  // Refreshes the per-model entry gauge from the index (at scrape time, not per ingest).
  void refresh_index_gauge() {
    auto* rt = live_runtime();
    if (!rt) return;
    if (auto by_model = rt->entries_by_model_blocking(2s)) {
      metrics.set_index_entries(*by_model);
    } else {
      log_event(spdlog::level::warn, "index_gauge_stale",
                {{"reason", "the index did not answer in time; index_entries not refreshed"}});
    }
  }

  // Refreshes inferencecache_pd_topology_replicas from the stores and stats rows.
  void refresh_pd_gauge() {
    auto* rt = live_runtime();
    if (!rt) return;
    auto counts = rt->pd_members_blocking(2s);
    if (!counts) return;  // stale until the next scrape
    std::vector<server_metrics::pd_replicas_row> rows;
    for (const auto& c : *counts) {
      rows.push_back({c.topology, c.role, "live", static_cast<double>(c.live)});
      rows.push_back({c.topology, c.role, "stale", static_cast<double>(c.stale)});
      rows.push_back({c.topology, c.role, "desired", static_cast<double>(c.desired)});
    }
    metrics.set_pd_topology_replicas(rows);
  }

  // Refreshes the gauges read at scrape time (/metrics and StreamMetrics).
  void refresh_scrape_gauges() {
    refresh_index_gauge();
    if (auto* rt = live_runtime()) metrics.set_journal_stats(rt->journal_stats());
    refresh_pd_gauge();
    metrics.set_http_connections_open("http", http.open_connections());
    metrics.set_http_connections_open("admin", admin.open_connections());
  }

  // Wraps an admin handler: auth first (before the method check, as the reference does).
  http_handler guarded(admin_route route, http_handler inner) {
    return [this, route, inner = std::move(inner)](const http_request& req) {
      auto result = auth.check(req.authorization);
      if (!auth.disabled()) metrics.on_auth(route, auth_label(result));
      if (result != auth_result::ok) {
        log_event(spdlog::level::debug, "admin_auth_rejected", {{"path", req.path}});
        return http_response{401, "unauthorized\n"};
      }
      return inner(req);
    };
  }

  // /policy, /topology, /templates: GET reads the store, POST/PUT push (store_routes.hpp).
  http_response handle_store(const store_route& store, const http_request& req) {
    const std::string event = store.name;
    if (req.method == "GET" || req.method == "HEAD") {
      auto* rt = live_runtime();
      if (!rt) return unavailable((event + "_unavailable").c_str(), rt);
      http_response r{200, store.listing(*rt) + "\n"};
      r.content_type = "application/json";
      return r;
    }
    if (req.method != "POST" && req.method != "PUT") return method_not_allowed(store.allow);
    const push_outcome out = req.body_too_large ? push_outcome{400, store.too_large_message}
                                                : push_store_body(store, req.body, live_runtime());
    if (store.kind != actors::record_kind::policy) metrics.on_store_push(store.name, out.result());
    if (out.status == 204) return http_response{204, ""};
    if (out.status == 400) log_event(spdlog::level::warn, event + "_rejected", {{"error", out.message}});
    else log_event(spdlog::level::err, event + "_unavailable", {{"error", out.message}});
    return http_response{out.status, out.message + "\n"};
  }

  http_response handle_snapshot(const http_request& req) {
    if (req.method != "GET") return method_not_allowed("GET");
    auto* rt = live_runtime();
    auto view = rt ? rt->snapshot_blocking(10s) : std::nullopt;
    if (!view) return unavailable("snapshot_unavailable", rt);
    http_response r{200, snapshot_json(*view) + "\n"};
    r.content_type = "application/json";
    return r;
  }

  // Answers 503 for an admin request the index could not serve; a timeout of a running
  // index is logged (before recovery and during shutdown 503 is the expected answer).
  http_response unavailable(const char* event, actors::runtime* rt) {
    if (!rt) return http_response{503, "index not ready\n"};
    log_event(spdlog::level::warn, event, {{"error", "the index did not answer in time"}});
    return http_response{503, "the index did not answer in time\n"};
  }

  // /probe (spec/operations.md §2.5): strict body, then one self-test inside the reserved tenant's actor.
  http_response handle_probe(const http_request& req) {
    if (req.method != "POST") return method_not_allowed("POST");
    auto parsed = req.body_too_large
                      ? probe_parse_result::failure("decode probe request: http: request body too large")
                      : parse_probe_body(req.body);
    if (!parsed.ok()) {
      log_event(spdlog::level::debug, "probe_rejected", {{"error", parsed.error()}});
      return http_response{400, parsed.error() + "\n"};
    }
    auto* rt = live_runtime();
    auto out = rt ? rt->probe_blocking(parsed.value(), 4s) : std::nullopt;
    if (!out) return unavailable("probe_unavailable", rt);
    if (out->passed()) {
      log_event(spdlog::level::debug, "probe_passed", {{"backend", out->backend}});
    } else {
      const auto& first = out->errors.front();
      log_event(spdlog::level::warn, "probe_failed",
                {{"backend", out->backend},
                 {"model", parsed.value().model},
                 {"stage", first.stage},
                 {"error", first.message}});
    }
    http_response r{200, encode_probe_outcome(*out) + "\n"};
    r.content_type = "application/json";
    return r;
  }

  void register_routes() {
    // Probes answer on the event loop (they never block), so no slow handler can delay them.
    http.route("/healthz", [](const http_request&) { return http_response{200, "ok\n"}; },
               1 << 20, route_mode::loop);
    http.route(
        "/readyz",
        [this](const http_request& req) {
          if (!ready.load()) return http_response{503, "not ready\n"};
          if (req.query.find("producer=1") != std::string::npos && !producer_ready())
            return http_response{503, "not ready for producers: journal not writable\n"};
          return http_response{200, "ok\n"};
        },
        1 << 20, route_mode::loop);
    http.route("/metrics", [this](const http_request&) {
      refresh_scrape_gauges();
      http_response r{200, metrics.render()};
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
      return r;
    });
    admin.route("/snapshot",
                guarded(admin_route::snapshot, [this](const http_request& r) { return handle_snapshot(r); }));
    for (const store_route& store : store_routes()) {
      const admin_route route = store.kind == actors::record_kind::policy     ? admin_route::policy
                                : store.kind == actors::record_kind::topology ? admin_route::topology
                                                                              : admin_route::templates;
      admin.route(std::string("/") + store.name,
                  guarded(route, [this, &store](const http_request& r) { return handle_store(store, r); }),
                  store.max_body_bytes);
    }
    admin.route("/probe",
                guarded(admin_route::probe, [this](const http_request& r) { return handle_probe(r); }),
                probe_max_body_bytes);
  }

  http_limits http_limits_for(const std::string& listener) {
    http_limits l;
    l.name = listener;
    l.max_connections = static_cast<std::size_t>(cfg.http_max_connections);
    l.idle_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(cfg.http_idle_timeout);
    l.on_connection_rejected = [this, listener] { metrics.on_http_connection_rejected(listener); };
    return l;
  }

  int start_grpc() {
    std::shared_ptr<grpc::ServerCredentials> creds;
    if (!cfg.tls_cert_file.empty()) {
      // Loaded and checked now (failure: exit 1); re-read whenever the files change.
      std::string err;
      tls = reloading_tls::create(cfg.tls_cert_file, cfg.tls_key_file, &err);
      if (!tls) {
        log_event(spdlog::level::err, "grpc_tls_load", {{"error", err}});
        return 1;
      }
      creds = tls->credentials();
      metrics.set_tls_enabled(true);
    } else {
      creds = grpc::InsecureServerCredentials();
    }
    grpc_gateway::service_options sopts;
    sopts.metrics_interval = cfg.metrics_stream_interval;
    sopts.tokenizer = tokenizers.get();
    service = std::make_unique<grpc_gateway::inference_cache_service>(
        &metrics,
        [this] {
          refresh_scrape_gauges();
          return metrics.samples();
        },
        sopts);
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    builder.AddListeningPort(grpc_listen_address(cfg.grpc_bind_address), creds, &grpc_port);
    builder.SetMaxReceiveMessageSize(cfg.max_recv_message_bytes);
    builder.RegisterService(service.get());
    grpc_server = builder.BuildAndStart();
    if (!grpc_server || grpc_port == 0) {
      log_event(spdlog::level::err, "serve_error",
                {{"error", "cannot listen on gRPC address " + cfg.grpc_bind_address}});
      return 1;
    }
    grpc_server->GetHealthCheckService()->SetServingStatus(false);
    return 0;
  }

  /// Loads every model under --tokenizer-models-dir (eagerly; each failure is logged and
  /// that model's prompt_text lookups fail open). Without the flag prompt_text fails open.
  void load_tokenizers() {
    tokenizer::model_registry models;
    if (!cfg.tokenizer_models_dir.empty()) {
      const auto t0 = std::chrono::steady_clock::now();
      tokenizer::registry_report report;
      models = tokenizer::model_registry::load(cfg.tokenizer_models_dir, report);
      if (!report.root_error.empty())
        log_event(spdlog::level::err, "tokenizer_models_dir_error",
                  {{"dir", cfg.tokenizer_models_dir}, {"error", report.root_error}});
      for (const auto& [id, why] : report.failed)
        log_event(spdlog::level::err, "tokenizer_model_failed", {{"model", id}, {"error", why}});
      for (const auto& id : report.loaded)
        log_event(spdlog::level::info, "tokenizer_model_loaded", {{"model", id}});
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
      log_lifecycle("tokenizer_models_loaded",
                    {{"dir", cfg.tokenizer_models_dir},
                     {"loaded", std::to_string(report.loaded.size())},
                     {"failed", std::to_string(report.failed.size())},
                     {"seconds", std::to_string(took.count())}});
    }
    tokenizers = std::make_unique<tokenizer::tokenize_service>(std::move(models));
  }

  int recover() {
    actors::runtime_options ro;
    ro.journal_dir = (std::filesystem::path(cfg.data_dir) / "journal").string();
    ro.fsync = cfg.journal_fsync;
    ro.state.max_entries = cfg.max_index_entries;
    ro.state.default_ttl = cfg.default_ttl;
    ro.sweep_interval = cfg.sweep_interval;
    ro.state.block_size = cfg.engine_block_size;
    ro.snapshot_interval = local_snapshot_interval(cfg.journal, cfg.snapshot_interval);
    ro.snapshot_every_records = cfg.snapshot_every_records;
    ro.open_journal = journal_opener(cfg.journal, cfg.data_dir, cfg.journal_fsync);  // #15
    ro.max_apply_lag = cfg.journal.max_apply_lag;
    ro.lfu_credit_interval = cfg.journal.lfu_credit_interval;
    ro.lfu_credits_off = cfg.journal.lfu_credits_off;
    ro.journal_env = actors::test_journal_env();  // nullptr outside the test-hook binary
    ro.clock = actors::test_clock();              // empty (system clock) outside it too
    std::string error;
    actors::recovery_info info;
    runtime = actors::runtime::start(ro, &metrics, &error, &info);
    if (!runtime) {
      log_event(spdlog::level::err, "recovery_failed", {{"error", error}});
      return 1;
    }
    if (!info.torn_tail.empty())
      log_event(spdlog::level::warn, "journal_torn_tail_dropped", {{"detail", info.torn_tail}});
    for (const auto& skipped : info.skipped_snapshots)
      log_event(spdlog::level::warn, "snapshot_skipped", {{"detail", skipped}});
    log_lifecycle("recovered",
              {{"snapshot_seq", std::to_string(info.snapshot_seq)},
               {"records_replayed", std::to_string(info.records_replayed)},
               {"last_sequence", std::to_string(info.last_sequence)},
               {"entries", std::to_string(info.entries)},
               {"seconds", std::to_string(info.seconds)}});
    // --policy-file, --topology-file, --templates-file: each body is pushed like an HTTP push.
    for (const auto& [kind, file] : {std::pair{actors::record_kind::policy, &cfg.policy_file},
                                     std::pair{actors::record_kind::topology, &cfg.topology_file},
                                     std::pair{actors::record_kind::templates, &cfg.templates_file}}) {
      if (file->empty()) continue;
      const store_route& store = store_route_of(kind);
      std::string err;
      std::string body = read_file(*file, err);
      // JetStream: the stream's policy is newer than any file (another replica's push, or
      // this file's earlier start); a file never overrides it (spec/scaleout.md §3.4).
      const bool stream_wins = kind == actors::record_kind::policy && runtime->journal_holds_policy();
      auto out = !err.empty()  ? push_outcome{400, err}
                 : stream_wins ? push_outcome{409, "the stream holds a policy already"}
                               : push_store_body(store, body, runtime.get());
      if (out.status == 409) {
        log_event(spdlog::level::info, std::string(store.name) + "_file_skipped",
                  {{"file", *file}, {"reason", out.message + "; stream policy wins"}});
        continue;
      }
      if (out.status != 204) {
        log_event(spdlog::level::err, std::string(store.name) + "_file_rejected",
                  {{"file", *file}, {"error", out.message}});
        return out.status == 400 ? 2 : 1;
      }
      log_event(spdlog::level::info, std::string(store.name) + "_file_applied", {{"file", *file}});
    }
    service->attach(runtime.get());
    return 0;
  }

  int start() {
    register_routes();
    std::error_code ec;
    std::filesystem::create_directories(cfg.data_dir, ec);
    if (ec) {
      log_event(spdlog::level::err, "data_dir_error",
                {{"data_dir", cfg.data_dir}, {"error", ec.message()}});
      return 1;
    }
    if (cfg.insecure_disable_auth)
      log_event(spdlog::level::warn, "controller_auth_disabled",
                {{"reason", "--insecure-disable-auth: the admin port is unauthenticated"}});
    else
      log_event(spdlog::level::info, "controller_auth_enabled", {{"mode", "admin-token-file"}});
    load_tokenizers();

    if (auto err = http.start(http_listen_address(cfg.http_bind_address), http_limits_for("http"));
        !err.empty()) {
      log_event(spdlog::level::err, "serve_error", {{"listener", "http"}, {"error", err}});
      return 1;
    }
    if (auto err = admin.start(http_listen_address(cfg.snapshot_bind_address),
                               http_limits_for("admin"));
        !err.empty()) {
      log_event(spdlog::level::err, "serve_error", {{"listener", "snapshot"}, {"error", err}});
      return 1;
    }
    if (int rc = start_grpc(); rc != 0) return rc;

    log_lifecycle("startup",
              {{"version", server_version},
               {"commit", IC_GIT_COMMIT},
               {"grpc_addr", host_of(cfg.grpc_bind_address) + ":" + std::to_string(grpc_port)},
               {"grpc_tls", cfg.tls_cert_file.empty() ? "false" : "true"},
               {"http_addr", host_of(cfg.http_bind_address) + ":" + std::to_string(http.port())},
               {"snapshot_addr",
                host_of(cfg.snapshot_bind_address) + ":" + std::to_string(admin.port())},
               {"data_dir", cfg.data_dir},
               {"journal_fsync", cfg.journal_fsync ? "true" : "false"},
               {"journal", cfg.journal.kind == journal_kind::jetstream
                               ? "jetstream:" + cfg.journal.nats_stream + " as " + cfg.journal.replica_id
                               : "rocksdb"}});

    if (int rc = recover(); rc != 0) return rc;

    ready = true;
    metrics.set_up(true);
    grpc_server->GetHealthCheckService()->SetServingStatus(true);
    log_lifecycle("ready");
    return 0;
  }

  void stop() {
    if (stopped) return;
    stopped = true;
    log_lifecycle("graceful_shutdown_started");
    ready = false;
    metrics.set_up(false);
    if (runtime) runtime->begin_shutdown();
    if (service) service->close_streams();
    if (grpc_server) {
      grpc_server->GetHealthCheckService()->SetServingStatus(false);
      // Shutdown() refuses new calls at once but returns only when every client connection
      // is gone, so a client that keeps its channel open held every stop for the whole
      // grace period with nothing left to answer. Wait for the owed answers instead
      // (grpc_gateway/owed_calls.hpp), then cut the remaining connections.
      constexpr auto grace = 5s;
      std::thread shutdown([this, grace] { grpc_server->Shutdown(std::chrono::system_clock::now() + grace); });
      if (service && service->owed().wait_until_none(std::chrono::steady_clock::now() + grace)) {
        std::this_thread::sleep_for(50ms);  // the last statuses reach their sockets
        grpc_server_cancel_all_calls(grpc_server->c_server());
      } else if (service) {
        log_event(spdlog::level::warn, "grpc_calls_unanswered",
                  {{"count", std::to_string(service->owed().count())},
                   {"grace_seconds", std::to_string(grace.count())}});
      }
      shutdown.join();
    }
    // Pending tokenizations are answered (their lookups still reach the runtime) before
    // the runtime stops.
    tokenizers.reset();
    if (tls) tls->stop();
    // Each stop waits for its in-flight handlers; stop both at once.
    std::thread stop_admin([this] { admin.stop(); });
    http.stop();
    stop_admin.join();
    if (runtime) runtime->stop();
    log_lifecycle("graceful_shutdown_done");
  }
};

server_app::server_app(server_config cfg) : impl_(std::make_unique<impl>(std::move(cfg))) {}

server_app::~server_app() { stop(); }

int server_app::start() { return impl_->start(); }

void server_app::stop() { impl_->stop(); }

}  // namespace ic::server
