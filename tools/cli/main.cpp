// inferencecache: the command-line client for an InferenceCache server.
//
// Verbs: lookup, report, evict, clear, state, watch, metrics, policy push|get, health.
// Exit codes: 0 ok, 1 RPC or server error, 2 usage error, 3 lookup gave no hint (only with
// --fail-on-no-hint). Errors are one line on stderr. See tools/README.md for examples.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/client_context.h>
#include <nlohmann/json.hpp>

#include "grpc/health/v1/health.grpc.pb.h"
#include "index/fingerprint.hpp"
#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "tools/cli/grpc_connect.hpp"
#include "tools/common/cli_parse.hpp"
#include "tools/common/codec.hpp"
#include "tools/common/http_client.hpp"

namespace ic::tools {
namespace {

namespace v1 = inferencecache::v1alpha1;
namespace health = grpc::health::v1;

constexpr int kExitOk = 0;
constexpr int kExitRpc = 1;
constexpr int kExitUsage = ic::tools::exit_usage;
constexpr int kExitNoHint = 3;

/// Options every verb shares.
struct global_options {
  connect_options conn;
  std::string timeout = "5s";              ///< per-RPC deadline; default 5s
  std::string admin_addr = "127.0.0.1:8081";  ///< admin HTTP port for `policy`
  std::string token;                       ///< admin bearer token; default none
  std::string token_file;                  ///< file holding the bearer token; default none
};

/// What a verb needs to run: the global options and the verb's name for messages.
struct verb_env {
  const global_options* g = nullptr;
  std::string verb;

  int usage(const std::string& msg) const {
    std::cerr << "inferencecache " << verb << ": " << msg << " (see --help)\n";
    return kExitUsage;
  }
  int fail(const std::string& msg) const {
    std::cerr << "inferencecache " << verb << ": " << msg << "\n";
    return kExitRpc;
  }
  int rpc_fail(const grpc::Status& st) const {
    return fail(std::string(code_name(st.error_code())) + ": " + st.error_message());
  }
  static const char* code_name(grpc::StatusCode c) {
    static const char* names[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT",
                                  "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
                                  "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                  "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
                                  "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
                                  "UNAUTHENTICATED"};
    int i = static_cast<int>(c);
    return i >= 0 && i <= 16 ? names[i] : "UNKNOWN";
  }
  /// Parses the --timeout value (validated once in main).
  double timeout_s() const {
    std::string err;
    return parse_seconds(g->timeout, &err).value_or(5.0);
  }
  void set_deadline(grpc::ClientContext& ctx) const {
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(static_cast<long>(timeout_s() * 1000)));
  }
  /// Opens the channel; nullptr after printing the error.
  std::unique_ptr<v1::InferenceCache::Stub> stub() const {
    std::string err;
    auto ch = make_channel(g->conn, &err);
    if (!ch) {
      fail(err);
      return nullptr;
    }
    return v1::InferenceCache::NewStub(ch);
  }
};

std::string to_json(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions o;
  o.always_print_primitive_fields = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  return out;
}

std::string tier_name(v1::CacheTier t) {
  switch (t) {
    case v1::CACHE_TIER_T1: return "T1";
    case v1::CACHE_TIER_T2: return "T2";
    case v1::CACHE_TIER_T3: return "T3";
    default: return "-";
  }
}

/// Parses a comma list of block hashes (hex or base64); false and `*err` on a bad item.
bool parse_hashes(const std::string& text, std::vector<std::string>* out, std::string* err) {
  for (const auto& item : split_list(text)) {
    auto h = decode_hash(item, err);
    if (!h) return false;
    out->push_back(*h);
  }
  if (out->empty()) {
    *err = "--hashes needs at least one hash";
    return false;
  }
  return true;
}

/// Sets up SIGINT/SIGTERM to flip a flag instead of killing the process (watch, metrics).
std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted.store(true); }

/// Cancels `ctx` on Ctrl-C or when `duration_s` (> 0) has passed; join before `ctx` dies.
class stream_guard {
 public:
  stream_guard(grpc::ClientContext* ctx, double duration_s) {
    std::signal(SIGINT, on_interrupt);
    std::signal(SIGTERM, on_interrupt);
    thread_ = std::thread([this, ctx, duration_s] {
      const auto start = std::chrono::steady_clock::now();
      while (!stop_.load()) {
        double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (g_interrupted.load() || (duration_s > 0 && elapsed >= duration_s)) {
          expired_.store(true);
          ctx->TryCancel();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  ~stream_guard() {
    stop_.store(true);
    thread_.join();
  }
  /// True when the guard (not the server) ended the stream.
  bool expired() const { return expired_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<bool> expired_{false};
  std::thread thread_;
};

// ---------------------------------------------------------------------------------------
// lookup

struct lookup_options {
  std::string tenant = "default", model, scheme = "vllm", adapter;
  std::string tokens, hashes, prefix, prompt;
  int block_tokens = 16;
  int prefix_tokens = 0;
  bool json = false;
  bool fail_on_no_hint = false;
};

int run_lookup(const verb_env& env, const lookup_options& o) {
  v1::LookupRouteRequest req;
  req.set_tenant_id(o.tenant);
  req.set_model_id(o.model);
  req.set_hash_scheme(o.scheme);
  req.set_adapter_id(o.adapter);
  std::string err;
  if (o.tokens.empty() && o.hashes.empty() && o.prefix.empty() && o.prompt.empty())
    return env.usage("give --tokens, --hashes, --prefix or --prompt");
  if (!o.tokens.empty() && !o.hashes.empty())
    return env.usage("--tokens and --hashes cannot be combined");
  if (!o.prompt.empty() && (!o.tokens.empty() || !o.hashes.empty() || !o.prefix.empty()))
    return env.usage("--prompt cannot be combined with --tokens, --hashes or --prefix");
  // The server applies the model's chat template to it (one user message) and tokenizes it.
  req.set_prompt_text(o.prompt);
  if (!o.tokens.empty()) {
    auto toks = parse_u32_list(o.tokens, &err);
    if (!toks) return env.usage(err);
    for (auto t : *toks) req.add_token_ids(t);
  }
  if (!o.hashes.empty()) {
    std::vector<std::string> hs;
    if (!parse_hashes(o.hashes, &hs, &err)) return env.usage(err);
    if (o.block_tokens <= 0) return env.usage("--block-tokens must be positive");
    for (auto& h : hs) {
      req.add_block_hashes(h);
      req.add_block_token_counts(o.block_tokens);
    }
  }
  if (!o.prefix.empty()) {
    auto p = decode_hash(o.prefix, &err);
    if (!p) return env.usage(err);
    req.set_prefix_hash(*p);
    req.set_prefix_token_count(o.prefix_tokens);
  }
  auto stub = env.stub();
  if (!stub) return kExitRpc;
  grpc::ClientContext ctx;
  env.set_deadline(ctx);
  v1::LookupRouteResponse resp;
  grpc::Status st = stub->LookupRoute(&ctx, req, &resp);
  if (!st.ok()) return env.rpc_fail(st);
  if (o.json) {
    std::cout << to_json(resp) << "\n";
  } else {
    std::cout << "reason: " << (resp.reason_code().empty() ? "NO_HINT" : resp.reason_code())
              << "   server latency: " << resp.lookup_latency_us() << " us\n";
    if (resp.replica_scores_size() > 0) {
      std::cout << std::left << std::setw(24) << "REPLICA" << std::setw(10) << "SCORE"
                << std::setw(16) << "MATCHED_TOKENS" << std::setw(10) << "HIT_PROB"
                << "TIER\n";
      for (const auto& s : resp.replica_scores()) {
        std::ostringstream score, prob;
        score << std::fixed << std::setprecision(4) << s.score();
        prob << std::fixed << std::setprecision(3) << s.estimated_cache_hit_prob();
        std::cout << std::left << std::setw(24) << s.replica_id() << std::setw(10) << score.str()
                  << std::setw(16) << s.matched_tokens() << std::setw(10) << prob.str()
                  << tier_name(s.tier()) << "\n";
      }
    }
    if (resp.token_ids_size() > 0) {  // prompt_text lookups echo the server's tokens
      std::cout << "tokens (" << resp.token_ids_size() << "): ";
      for (int i = 0; i < resp.token_ids_size(); ++i) std::cout << (i ? "," : "") << resp.token_ids(i);
      std::cout << "\n";
    }
  }
  // Like the reference gateway client, only PREFIX_MATCH with a replica is a routing hint.
  if (o.fail_on_no_hint && (resp.reason_code() != "PREFIX_MATCH" || resp.replica_scores_size() == 0))
    return kExitNoHint;
  return kExitOk;
}

// ---------------------------------------------------------------------------------------
// report

struct report_options {
  std::string file;
  std::string replica, tenant = "default", model, scheme = "vllm", adapter;
  std::string hashes, prefix, tokens, tier = "t1";
  int block_tokens = 16;
  int prefix_tokens = 0;
  bool json = false;
};

/// Parses a file of CacheStateUpdate in protobuf JSON: one object, an array, or JSONL.
bool parse_update_file(const std::string& text, std::vector<v1::CacheStateUpdate>* out,
                       std::string* err) {
  auto convert = [&](const std::string& one, const std::string& where) {
    v1::CacheStateUpdate u;
    auto st = google::protobuf::util::JsonStringToMessage(one, &u);
    if (!st.ok()) {
      *err = where + ": " + std::string(st.message());
      return false;
    }
    out->push_back(std::move(u));
    return true;
  };
  auto whole = nlohmann::json::parse(text, nullptr, false);
  if (!whole.is_discarded()) {
    if (whole.is_array()) {
      for (std::size_t i = 0; i < whole.size(); ++i)
        if (!convert(whole[i].dump(), "item " + std::to_string(i))) return false;
      return true;
    }
    return convert(whole.dump(), "update");
  }
  std::istringstream lines(text);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (!convert(line, "line " + std::to_string(n))) return false;
  }
  if (out->empty()) {
    *err = "no updates in the file";
    return false;
  }
  return true;
}

int run_report(const verb_env& env, const report_options& o) {
  std::vector<v1::CacheStateUpdate> updates;
  std::string err;
  if (!o.file.empty()) {
    if (!o.hashes.empty() || !o.prefix.empty() || !o.tokens.empty())
      return env.usage("--file cannot be combined with --hashes, --tokens or --prefix");
    std::string text;
    if (!read_file(o.file, &text, &err)) return env.usage(err);
    if (!parse_update_file(text, &updates, &err)) return env.usage(err);
  } else {
    if (o.replica.empty()) return env.usage("--replica is required (or give --file)");
    if (o.hashes.empty() && o.prefix.empty() && o.tokens.empty())
      return env.usage("give --hashes, --tokens or --prefix");
    if (!o.hashes.empty() && !o.tokens.empty())
      return env.usage("--hashes and --tokens cannot be combined");
    v1::CacheTier tier;
    if (o.tier == "t1" || o.tier == "T1") tier = v1::CACHE_TIER_T1;
    else if (o.tier == "t2" || o.tier == "T2") tier = v1::CACHE_TIER_T2;
    else if (o.tier == "t3" || o.tier == "T3") tier = v1::CACHE_TIER_T3;
    else return env.usage("--tier must be t1, t2 or t3");
    v1::CacheStateUpdate u;
    u.set_replica_id(o.replica);
    u.set_tenant_id(o.tenant);
    u.set_model_id(o.model);
    u.set_hash_scheme(o.scheme);
    u.set_adapter_id(o.adapter);
    u.set_timestamp_us(std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count());
    auto* p = u.add_prefixes();
    p->set_tier(tier);
    p->set_adapter_id(o.adapter);
    if (!o.hashes.empty()) {
      std::vector<std::string> hs;
      if (!parse_hashes(o.hashes, &hs, &err)) return env.usage(err);
      if (o.block_tokens <= 0) return env.usage("--block-tokens must be positive");
      for (auto& h : hs) {
        p->add_block_hashes(h);
        p->add_block_token_counts(o.block_tokens);
      }
    }
    if (!o.tokens.empty()) {
      // Fingerprinted here as an engine adapter would (--block-tokens must equal the
      // server's --engine-block-size for its lookups to match).
      auto toks = parse_u32_list(o.tokens, &err);
      if (!toks) return env.usage(err);
      if (o.block_tokens <= 0) return env.usage("--block-tokens must be positive");
      auto chain = ic::index::fingerprint_chain(toks->data(), toks->size(), o.block_tokens);
      if (chain.empty()) return env.usage("--tokens holds no full block of --block-tokens tokens");
      for (auto h : chain) {
        p->add_block_hashes(ic::index::to_wire(h));
        p->add_block_token_counts(o.block_tokens);
      }
    }
    if (!o.prefix.empty()) {
      auto ph = decode_hash(o.prefix, &err);
      if (!ph) return env.usage(err);
      p->set_prefix_hash(*ph);
      p->set_token_count(o.prefix_tokens);
    }
    updates.push_back(std::move(u));
  }
  auto stub = env.stub();
  if (!stub) return kExitRpc;
  grpc::ClientContext ctx;
  env.set_deadline(ctx);
  v1::Ack ack;
  auto writer = stub->ReportCacheState(&ctx, &ack);
  for (const auto& u : updates)
    if (!writer->Write(u)) break;
  writer->WritesDone();
  grpc::Status st = writer->Finish();
  if (!st.ok()) return env.rpc_fail(st);
  if (o.json) {
    std::cout << to_json(ack) << "\n";
  } else {
    std::cout << "accepted: " << (ack.accepted() ? "true" : "false")
              << "   reason: " << (ack.reason_code().empty() ? "-" : ack.reason_code())
              << "   updates sent: " << updates.size() << "\n";
  }
  if (!ack.accepted()) return env.fail("the server refused the updates: " + ack.reason_code());
  return kExitOk;
}

// ---------------------------------------------------------------------------------------
// evict, clear

struct event_options {
  std::string replica, tenant = "default", model, adapter, hashes;
  bool json = false;
};

int publish(const verb_env& env, v1::CacheEvent::Type type, const event_options& o) {
  if (o.replica.empty()) return env.usage("--replica is required");
  std::vector<std::string> hashes;
  std::string err;
  if (type == v1::CacheEvent::PREFIX_EVICTED) {
    if (o.hashes.empty()) return env.usage("--hashes is required");
    if (!parse_hashes(o.hashes, &hashes, &err)) return env.usage(err);
  } else {
    hashes.push_back("");
  }
  auto stub = env.stub();
  if (!stub) return kExitRpc;
  int rc = kExitOk;
  for (const auto& h : hashes) {
    v1::CacheEvent e;
    e.set_type(type);
    e.set_replica_id(o.replica);
    e.set_tenant_id(o.tenant);
    e.set_model_id(o.model);
    e.set_adapter_id(o.adapter);
    e.set_prefix_hash(h);
    e.set_timestamp_us(std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count());
    grpc::ClientContext ctx;
    env.set_deadline(ctx);
    v1::Ack ack;
    grpc::Status st = stub->PublishEvent(&ctx, e, &ack);
    if (!st.ok()) return env.rpc_fail(st);
    if (o.json) {
      std::cout << to_json(ack) << "\n";
    } else {
      std::cout << "accepted: " << (ack.accepted() ? "true" : "false")
                << "   reason: " << (ack.reason_code().empty() ? "-" : ack.reason_code());
      if (!h.empty()) std::cout << "   hash: " << to_hex(h);
      std::cout << "\n";
    }
    if (!ack.accepted()) rc = env.fail("the server refused the event: " + ack.reason_code());
  }
  return rc;
}

// ---------------------------------------------------------------------------------------
// state

struct state_options {
  std::string tenant = "default", model;
  bool json = false;
};

int run_state(const verb_env& env, const state_options& o) {
  auto stub = env.stub();
  if (!stub) return kExitRpc;
  v1::GetCacheStateRequest req;
  req.set_tenant_id(o.tenant);
  req.set_model_id(o.model);
  grpc::ClientContext ctx;
  env.set_deadline(ctx);
  v1::GetCacheStateResponse resp;
  grpc::Status st = stub->GetCacheState(&ctx, req, &resp);
  if (!st.ok()) return env.rpc_fail(st);
  if (o.json) {
    std::cout << to_json(resp) << "\n";
    return kExitOk;
  }
  std::cout << "total prefixes: " << resp.summary().total_prefixes()
            << "   hot prefixes: " << resp.summary().hot_prefixes() << "\n";
  if (resp.replicas_size() > 0) {
    std::cout << std::left << std::setw(24) << "REPLICA" << std::setw(14) << "CACHE_BYTES"
              << std::setw(10) << "HIT_RATE" << std::setw(10) << "PRESSURE" << "VERSION\n";
    for (const auto& r : resp.replicas()) {
      std::cout << std::left << std::setw(24) << r.replica_id() << std::setw(14)
                << r.cache_memory_bytes() << std::setw(10) << r.hit_rate() << std::setw(10)
                << r.pressure() << (r.client_version().empty() ? "-" : r.client_version()) << "\n";
    }
  }
  return kExitOk;
}

// ---------------------------------------------------------------------------------------
// watch and metrics: the two server streams

/// Reads a server stream opened by `start` until `count` messages (0 = no limit), the
/// `duration` (empty = none) or the stream's end, printing each with `print`.
template <class Msg, class Start, class Print>
int read_stream(const verb_env& env, const std::string& duration_text, long count, Start start,
                Print print) {
  double duration = 0;
  if (!duration_text.empty()) {
    std::string err;
    auto d = parse_seconds(duration_text, &err);
    if (!d) return env.usage(err);
    duration = *d;
  }
  if (count < 0) return env.usage("--count must not be negative");
  auto stub = env.stub();
  if (!stub) return kExitRpc;
  grpc::ClientContext ctx;
  auto reader = start(*stub, ctx);
  stream_guard guard(&ctx, duration);
  Msg m;
  long seen = 0;
  while ((count == 0 || seen < count) && reader->Read(&m)) {
    ++seen;
    print(m);
  }
  if (count > 0 && seen >= count) {
    ctx.TryCancel();
    (void)reader->Finish();
    return kExitOk;
  }
  grpc::Status st = reader->Finish();
  if (guard.expired() || st.ok()) return kExitOk;
  return env.rpc_fail(st);
}

struct watch_options {
  std::string tenant, model, types, duration;
  long count = 0;
  bool json = false;
};

bool parse_event_type(const std::string& name, v1::CacheEvent::Type* out) {
  std::string n;
  for (char c : name) n.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  if (n == "ADDED" || n == "PREFIX_ADDED") *out = v1::CacheEvent::PREFIX_ADDED;
  else if (n == "EVICTED" || n == "PREFIX_EVICTED") *out = v1::CacheEvent::PREFIX_EVICTED;
  else if (n == "UPDATED" || n == "REPLICA_UPDATED") *out = v1::CacheEvent::REPLICA_UPDATED;
  else if (n == "CLEARED" || n == "ALL_CLEARED") *out = v1::CacheEvent::ALL_CLEARED;
  else return false;
  return true;
}

int run_watch(const verb_env& env, const watch_options& o) {
  v1::StreamEventsRequest req;
  req.set_tenant_id(o.tenant);
  req.set_model_id(o.model);
  for (const auto& t : split_list(o.types)) {
    v1::CacheEvent::Type type;
    if (!parse_event_type(t, &type))
      return env.usage("unknown event type '" + t + "' (added, evicted, updated, cleared)");
    req.add_types(type);
  }
  return read_stream<v1::CacheEvent>(
      env, o.duration, o.count,
      [&](v1::InferenceCache::Stub& stub, grpc::ClientContext& ctx) {
        return stub.StreamCacheEvents(&ctx, req);
      },
      [&](const v1::CacheEvent& e) {
        if (o.json) {
          std::cout << to_json(e) << std::endl;
          return;
        }
        std::cout << e.timestamp_us() << "  " << std::left << std::setw(16)
                  << v1::CacheEvent::Type_Name(e.type()) << " tenant=" << e.tenant_id()
                  << " model=" << e.model_id() << " replica=" << e.replica_id();
        if (!e.prefix_hash().empty()) std::cout << " hash=" << to_hex(e.prefix_hash());
        if (!e.adapter_id().empty()) std::cout << " adapter=" << e.adapter_id();
        std::cout << std::endl;
      });
}

// ---------------------------------------------------------------------------------------
// metrics

struct metrics_options {
  std::string names, duration;
  long count = 0;
  bool json = false;
};

int run_metrics(const verb_env& env, const metrics_options& o) {
  v1::StreamMetricsRequest req;
  for (const auto& n : split_list(o.names)) req.add_names(n);
  return read_stream<v1::Metric>(
      env, o.duration, o.count,
      [&](v1::InferenceCache::Stub& stub, grpc::ClientContext& ctx) {
        return stub.StreamMetrics(&ctx, req);
      },
      [&](const v1::Metric& m) {
        if (o.json) {
          std::cout << to_json(m) << std::endl;
          return;
        }
        std::cout << m.name();
        if (m.labels_size() > 0) {
          std::map<std::string, std::string> sorted(m.labels().begin(), m.labels().end());
          std::cout << "{";
          bool first = true;
          for (const auto& [k, v] : sorted) {
            std::cout << (first ? "" : ",") << k << "=\"" << v << "\"";
            first = false;
          }
          std::cout << "}";
        }
        std::cout << " " << m.value() << "  (" << m.type() << ")" << std::endl;
      });
}

// ---------------------------------------------------------------------------------------
// policy

struct policy_options {
  std::string file;
  std::string method = "POST";
};

/// Resolves the admin target and bearer header; returns a usage exit code or -1 when fine.
int admin_request(const verb_env& env, http_request* req, http_response* res) {
  std::string err;
  auto target = parse_host_port(env.g->admin_addr, &err);
  if (!target) return env.usage(err);
  std::string token = env.g->token;
  if (!env.g->token_file.empty()) {
    if (!read_file(env.g->token_file, &token, &err)) return env.usage(err);
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.front()))) token.erase(0, 1);
  }
  if (!token.empty()) req->headers.push_back({"Authorization", "Bearer " + token});
  *res = http_call(*target, *req, env.timeout_s());
  if (!res->error.empty()) return env.fail(env.g->admin_addr + ": " + res->error);
  return -1;
}

int run_policy_push(const verb_env& env, const policy_options& o) {
  http_request req;
  std::string err;
  if (!read_file(o.file, &req.body, &err)) return env.usage(err);
  if (nlohmann::json::parse(req.body, nullptr, false).is_discarded())
    return env.usage(o.file + " is not valid JSON");
  req.method = o.method;
  req.path = "/policy";
  req.headers.push_back({"Content-Type", "application/json"});
  http_response res;
  if (int rc = admin_request(env, &req, &res); rc >= 0) return rc;
  if (res.status == 204 || res.status == 200) {
    std::cout << "policy applied (HTTP " << res.status << ")\n";
    return kExitOk;
  }
  std::string body = res.body;
  while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
  return env.fail("HTTP " + std::to_string(res.status) + ": " + body);
}

int run_policy_get(const verb_env& env) {
  http_request req;
  req.path = "/policy";
  http_response res;
  if (int rc = admin_request(env, &req, &res); rc >= 0) return rc;
  if (res.status != 200) return env.fail("HTTP " + std::to_string(res.status) + ": " + res.body);
  auto j = nlohmann::json::parse(res.body, nullptr, false);
  std::cout << (j.is_discarded() ? res.body : j.dump(2)) << "\n";
  return kExitOk;
}

// ---------------------------------------------------------------------------------------
// health

int run_health(const verb_env& env, const std::string& service) {
  std::string err;
  auto ch = make_channel(env.g->conn, &err);
  if (!ch) return env.fail(err);
  auto stub = health::Health::NewStub(ch);
  health::HealthCheckRequest req;
  req.set_service(service);
  health::HealthCheckResponse resp;
  grpc::ClientContext ctx;
  env.set_deadline(ctx);
  grpc::Status st = stub->Check(&ctx, req, &resp);
  if (!st.ok()) return env.rpc_fail(st);
  std::cout << health::HealthCheckResponse::ServingStatus_Name(resp.status()) << "\n";
  return resp.status() == health::HealthCheckResponse::SERVING ? kExitOk : kExitRpc;
}

int run(int argc, char** argv) {
  CLI::App app{"inferencecache: command-line client for an InferenceCache server"};
  app.name("inferencecache");
  app.require_subcommand(1);
  app.fallthrough();
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  global_options g;
  app.add_option("--addr", g.conn.addr, "gRPC address host:port")->capture_default_str();
  app.add_flag("--tls", g.conn.tls, "Use TLS for gRPC");
  app.add_option("--ca-file", g.conn.ca_file, "PEM root certificates for --tls");
  app.add_option("--timeout", g.timeout, "Per-call deadline (500ms, 5s, ...)")->capture_default_str();
  app.add_option("--admin-addr", g.admin_addr, "Admin HTTP address for `policy`")
      ->capture_default_str();
  app.add_option("--token", g.token, "Admin bearer token");
  app.add_option("--token-file", g.token_file, "File holding the admin bearer token");

  std::function<int(const verb_env&)> action;
  auto verb = [&](const std::string& name, const std::string& help) {
    return app.add_subcommand(name, help);
  };

  lookup_options lo;
  auto* lookup = verb("lookup", "Ask which replica holds a prompt's prefix (LookupRoute)");
  lookup->add_option("--tenant", lo.tenant, "Tenant id")->capture_default_str();
  lookup->add_option("--model", lo.model, "Model id");
  lookup->add_option("--scheme", lo.scheme, "Hash scheme")->capture_default_str();
  lookup->add_option("--adapter", lo.adapter, "Adapter (LoRA) id");
  lookup->add_option("--tokens", lo.tokens, "Token ids 1,2,3,... (the server fingerprints them)");
  lookup->add_option("--hashes", lo.hashes, "Block hashes, hex or base64, comma separated");
  lookup->add_option("--block-tokens", lo.block_tokens, "Tokens per block for --hashes")
      ->capture_default_str();
  lookup->add_option("--prefix", lo.prefix, "Exact prefix hash (hex or base64)");
  lookup->add_option("--prefix-tokens", lo.prefix_tokens, "Token count of --prefix");
  lookup->add_option("--prompt", lo.prompt,
                     "Prompt text: the server renders the model's chat template and tokenizes it "
                     "(needs --tokenizer-models-dir on the server)");
  lookup->add_flag("--json", lo.json, "Print the response as JSON");
  lookup->add_flag("--fail-on-no-hint", lo.fail_on_no_hint, "Exit 3 unless the answer is PREFIX_MATCH");
  lookup->callback([&] { action = [&](const verb_env& e) { return run_lookup(e, lo); }; });

  report_options ro;
  auto* report = verb("report", "Report what a replica caches (ReportCacheState)");
  report->add_option("--file", ro.file,
                     "JSON/JSONL file of CacheStateUpdate (protobuf JSON), '-' for stdin");
  report->add_option("--replica", ro.replica, "Replica id");
  report->add_option("--tenant", ro.tenant, "Tenant id")->capture_default_str();
  report->add_option("--model", ro.model, "Model id");
  report->add_option("--scheme", ro.scheme, "Hash scheme")->capture_default_str();
  report->add_option("--adapter", ro.adapter, "Adapter (LoRA) id");
  report->add_option("--hashes", ro.hashes, "Block hashes of one chain, hex or base64");
  report->add_option("--block-tokens", ro.block_tokens, "Tokens per block")->capture_default_str();
  report->add_option("--prefix", ro.prefix, "Exact prefix hash (hex or base64)");
  report->add_option("--prefix-tokens", ro.prefix_tokens, "Token count of --prefix");
  report->add_option("--tokens", ro.tokens,
                     "Token ids 1,2,3,... fingerprinted here into --block-tokens blocks");
  report->add_option("--tier", ro.tier, "Cache tier t1|t2|t3")->capture_default_str();
  report->add_flag("--json", ro.json, "Print the Ack as JSON");
  report->callback([&] { action = [&](const verb_env& e) { return run_report(e, ro); }; });

  event_options eo_evict, eo_clear;
  auto* evict = verb("evict", "Tell the server a replica evicted blocks (PREFIX_EVICTED)");
  evict->add_option("--replica", eo_evict.replica, "Replica id");
  evict->add_option("--tenant", eo_evict.tenant, "Tenant id")->capture_default_str();
  evict->add_option("--model", eo_evict.model, "Model id");
  evict->add_option("--adapter", eo_evict.adapter, "Adapter (LoRA) id");
  evict->add_option("--hashes", eo_evict.hashes, "Evicted block/prefix hashes (one event each)");
  evict->add_flag("--json", eo_evict.json, "Print the Ack as JSON");
  evict->callback([&] {
    action = [&](const verb_env& e) { return publish(e, v1::CacheEvent::PREFIX_EVICTED, eo_evict); };
  });
  auto* clear = verb("clear", "Tell the server a replica dropped its whole cache (ALL_CLEARED)");
  clear->add_option("--replica", eo_clear.replica, "Replica id");
  clear->add_option("--tenant", eo_clear.tenant, "Tenant id")->capture_default_str();
  clear->add_option("--model", eo_clear.model, "Model id");
  clear->add_flag("--json", eo_clear.json, "Print the Ack as JSON");
  clear->callback([&] {
    action = [&](const verb_env& e) { return publish(e, v1::CacheEvent::ALL_CLEARED, eo_clear); };
  });

  state_options so;
  auto* state = verb("state", "Show replicas and index summary (GetCacheState)");
  state->add_option("--tenant", so.tenant, "Tenant id (matched literally)")->capture_default_str();
  state->add_option("--model", so.model, "Model id (matched literally; empty is a model id too)");
  state->add_flag("--json", so.json, "Print the response as JSON");
  state->callback([&] { action = [&](const verb_env& e) { return run_state(e, so); }; });

  watch_options wo;
  auto* watch = verb("watch", "Print index changes live (StreamCacheEvents) until Ctrl-C");
  watch->add_option("--tenant", wo.tenant, "Only this tenant");
  watch->add_option("--model", wo.model, "Only this model");
  watch->add_option("--types", wo.types, "Event types: added,evicted,updated,cleared");
  watch->add_option("--count", wo.count, "Stop after N events");
  watch->add_option("--duration", wo.duration, "Stop after this long (10s, 2m)");
  watch->add_flag("--json", wo.json, "One JSON object per line");
  watch->callback([&] { action = [&](const verb_env& e) { return run_watch(e, wo); }; });

  metrics_options mo;
  auto* metrics = verb("metrics", "Print server metrics as they are streamed (StreamMetrics)");
  metrics->add_option("--names", mo.names, "Metric names or families, comma separated");
  metrics->add_option("--count", mo.count, "Stop after N metrics");
  metrics->add_option("--duration", mo.duration, "Stop after this long (10s, 2m)");
  metrics->add_flag("--json", mo.json, "One JSON object per line");
  metrics->callback([&] { action = [&](const verb_env& e) { return run_metrics(e, mo); }; });

  policy_options po;
  auto* policy = verb("policy", "Push or show the routing policy (admin HTTP port)");
  policy->require_subcommand(1);
  auto* push = policy->add_subcommand("push", "Apply a /policy JSON body from FILE or - (stdin)");
  push->add_option("file", po.file, "Policy JSON file, '-' for stdin")->required();
  push->add_option("--method", po.method, "POST or PUT")
      ->check(CLI::IsMember({"POST", "PUT"}))
      ->capture_default_str();
  push->callback([&] { action = [&](const verb_env& e) { return run_policy_push(e, po); }; });
  auto* get = policy->add_subcommand("get", "Print the current policy set");
  get->callback([&] { action = [&](const verb_env& e) { return run_policy_get(e); }; });

  std::string service;
  auto* hc = verb("health", "Check the server's gRPC health (grpc.health.v1.Health/Check)");
  hc->add_option("--service", service, "Service name (empty: the whole server)");
  hc->callback([&] { action = [&](const verb_env& e) { return run_health(e, service); }; });

  if (auto code = parse_command_line(app, argc, argv, "inferencecache")) return *code;
  std::string err;
  if (!parse_seconds(g.timeout, &err)) {
    std::cerr << "inferencecache: --timeout: " << err << "\n";
    return kExitUsage;
  }
  if (!parse_host_port(g.conn.addr, &err)) {
    std::cerr << "inferencecache: --addr: " << err << "\n";
    return kExitUsage;
  }
  if (!action) {
    std::cerr << "inferencecache: no verb given (see --help)\n";
    return kExitUsage;
  }
  verb_env env;
  env.g = &g;
  for (auto* sc : app.get_subcommands()) {
    env.verb = sc->get_name();
    for (auto* sub : sc->get_subcommands()) env.verb += " " + sub->get_name();
  }
  return action(env);
}

}  // namespace
}  // namespace ic::tools

int main(int argc, char** argv) { return ic::tools::run(argc, argv); }
