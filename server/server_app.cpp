#include "server/server_app.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "grpc_gateway/inference_cache_service.hpp"
#include "server/admin_auth.hpp"
#include "server/http_server.hpp"
#include "server/logging.hpp"

namespace ic::server {
namespace {

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

}  // namespace

struct server_app::impl {
  explicit impl(server_config c) : cfg(std::move(c)), auth(cfg.admin_token, cfg.insecure_disable_auth) {}

  server_config cfg;
  admin_auth auth;
  std::atomic<bool> ready{false};
  bool stopped = false;

  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Gauge* up = nullptr;
  prometheus::Gauge* tls_enabled = nullptr;
  prometheus::Family<prometheus::Counter>* snapshot_auth = nullptr;
  prometheus::Family<prometheus::Counter>* policy_auth = nullptr;
  prometheus::Family<prometheus::Counter>* probe_auth = nullptr;

  grpc_gateway::inference_cache_service service;
  std::unique_ptr<grpc::Server> grpc_server;
  int grpc_port = 0;
  http_server http;
  http_server admin;

  void register_metrics() {
    up = &prometheus::BuildGauge()
              .Name("inferencecache_server_up")
              .Help("1 while the server is serving")
              .Register(*registry)
              .Add({});
    tls_enabled = &prometheus::BuildGauge()
                       .Name("inferencecache_server_grpc_tls_enabled")
                       .Help("1 when the gRPC listener uses TLS")
                       .Register(*registry)
                       .Add({});
    snapshot_auth = &prometheus::BuildCounter()
                         .Name("inferencecache_snapshot_auth_total")
                         .Help("Auth decisions on /snapshot")
                         .Register(*registry);
    policy_auth = &prometheus::BuildCounter()
                       .Name("inferencecache_policy_auth_total")
                       .Help("Auth decisions on /policy")
                       .Register(*registry);
    probe_auth = &prometheus::BuildCounter()
                      .Name("inferencecache_probe_auth_total")
                      .Help("Auth decisions on /probe")
                      .Register(*registry);
  }

  // Wraps an admin handler: auth first (before the method check, as the reference does).
  http_handler guarded(prometheus::Family<prometheus::Counter>* counter, http_handler inner) {
    return [this, counter, inner = std::move(inner)](const http_request& req) {
      if (auth.check(req.authorization) != auth_result::ok) {
        counter->Add({{"result", "unauth"}}).Increment();
        return http_response{401, "unauthorized\n"};
      }
      if (!auth.disabled()) counter->Add({{"result", "ok"}}).Increment();
      return inner(req);
    };
  }

  static http_response not_implemented(const http_request&) {
    return http_response{501, "not implemented yet\n"};
  }

  void register_routes() {
    http.route("/healthz", [](const http_request&) { return http_response{200, "ok\n"}; });
    http.route("/readyz", [this](const http_request&) {
      return ready.load() ? http_response{200, "ok\n"} : http_response{503, "not ready\n"};
    });
    http.route("/metrics", [this](const http_request&) {
      prometheus::TextSerializer serializer;
      http_response r{200, serializer.Serialize(registry->Collect())};
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
      return r;
    });
    admin.route("/snapshot", guarded(snapshot_auth, not_implemented));
    admin.route("/policy", guarded(policy_auth, not_implemented));
    admin.route("/probe", guarded(probe_auth, not_implemented));
  }

  int start_grpc() {
    std::shared_ptr<grpc::ServerCredentials> creds;
    if (!cfg.tls_cert_file.empty()) {
      std::string err;
      grpc::SslServerCredentialsOptions opts;
      grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
      pair.cert_chain = read_file(cfg.tls_cert_file, err);
      if (err.empty()) pair.private_key = read_file(cfg.tls_key_file, err);
      if (!err.empty()) {
        log_event(spdlog::level::err, "grpc_tls_load", {{"error", err}});
        return 1;
      }
      opts.pem_key_cert_pairs.push_back(std::move(pair));
      creds = grpc::SslServerCredentials(opts);
      tls_enabled->Set(1);
    } else {
      creds = grpc::InsecureServerCredentials();
    }
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    builder.AddListeningPort(grpc_listen_address(cfg.grpc_bind_address), creds, &grpc_port);
    builder.SetMaxReceiveMessageSize(cfg.max_recv_message_bytes);
    builder.RegisterService(&service);
    grpc_server = builder.BuildAndStart();
    if (!grpc_server || grpc_port == 0) {
      log_event(spdlog::level::err, "serve_error",
                {{"error", "cannot listen on gRPC address " + cfg.grpc_bind_address}});
      return 1;
    }
    grpc_server->GetHealthCheckService()->SetServingStatus(false);
    return 0;
  }

  int start() {
    register_metrics();
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
    if (!cfg.tokenizer_models_dir.empty())
      log_event(spdlog::level::warn, "tokenizer_models_dir_ignored",
                {{"dir", cfg.tokenizer_models_dir},
                 {"reason", "no tokenizer is built in; prompt_text lookups fail open"}});

    if (auto err = http.start(http_listen_address(cfg.http_bind_address)); !err.empty()) {
      log_event(spdlog::level::err, "serve_error", {{"listener", "http"}, {"error", err}});
      return 1;
    }
    if (auto err = admin.start(http_listen_address(cfg.snapshot_bind_address)); !err.empty()) {
      log_event(spdlog::level::err, "serve_error", {{"listener", "snapshot"}, {"error", err}});
      return 1;
    }
    if (int rc = start_grpc(); rc != 0) return rc;

    log_event(spdlog::level::info, "startup",
              {{"version", server_version},
               {"grpc_addr", host_of(cfg.grpc_bind_address) + ":" + std::to_string(grpc_port)},
               {"grpc_tls", cfg.tls_cert_file.empty() ? "false" : "true"},
               {"http_addr", host_of(cfg.http_bind_address) + ":" + std::to_string(http.port())},
               {"snapshot_addr",
                host_of(cfg.snapshot_bind_address) + ":" + std::to_string(admin.port())},
               {"data_dir", cfg.data_dir}});

    // Recovery from the journal runs here once the journal lands; until then the index
    // starts empty.
    ready = true;
    up->Set(1);
    grpc_server->GetHealthCheckService()->SetServingStatus(true);
    log_event(spdlog::level::info, "ready");
    return 0;
  }

  void stop() {
    if (stopped) return;
    stopped = true;
    log_event(spdlog::level::info, "graceful_shutdown_started");
    ready = false;
    up->Set(0);
    if (grpc_server) {
      grpc_server->GetHealthCheckService()->SetServingStatus(false);
      grpc_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    }
    // civetweb's stop takes about a second per server; stop both at once.
    std::thread stop_admin([this] { admin.stop(); });
    http.stop();
    stop_admin.join();
    log_event(spdlog::level::info, "graceful_shutdown_done");
  }
};

server_app::server_app(server_config cfg) : impl_(std::make_unique<impl>(std::move(cfg))) {}

server_app::~server_app() { stop(); }

int server_app::start() { return impl_->start(); }

void server_app::stop() { impl_->stop(); }

}  // namespace ic::server
