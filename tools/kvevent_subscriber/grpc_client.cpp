#include "tools/kvevent_subscriber/grpc_client.hpp"

#include <chrono>
#include <fstream>
#include <sstream>

#include "index/fingerprint.hpp"

namespace ic::kvevent {
namespace v1 = inferencecache::v1alpha1;
namespace {

void set_deadline(grpc::ClientContext& ctx, std::int64_t ms) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
}

rpc_outcome outcome_of(const grpc::Status& st, const v1::Ack& ack, double seconds) {
  rpc_outcome o;
  o.code = static_cast<int>(st.error_code());
  o.code_name = grpc_code_name(st.error_code());
  o.message = st.error_message();
  o.accepted = st.ok() && ack.accepted();
  o.reason = ack.reason_code();
  o.seconds = seconds;
  return o;
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::string grpc_code_name(grpc::StatusCode c) {
  switch (c) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

std::shared_ptr<grpc::Channel> make_channel(const std::string& target, const std::string& ca_file,
                                            const std::string& server_name, std::string* err) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);  // gRPC's default 120 s delays recovery
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (ca_file.empty()) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    std::ifstream in(ca_file);
    if (!in) {
      *err = "cannot read --server-tls-ca-file \"" + ca_file + "\"";
      return nullptr;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = ss.str();
    creds = grpc::SslCredentials(o);
    if (!server_name.empty()) args.SetSslTargetNameOverride(server_name);
  }
  return grpc::CreateCustomChannel(target, creds, args);
}

grpc_cache_client::grpc_cache_client(std::shared_ptr<grpc::Channel> channel, identity id,
                                     const adapter_registry& adapters, std::int64_t rpc_timeout_ms)
    : channel_(std::move(channel)),
      stub_(v1::InferenceCache::NewStub(channel_)),
      id_(std::move(id)),
      adapters_(adapters),
      timeout_ms_(rpc_timeout_ms) {}

v1::CacheStateUpdate grpc_cache_client::header(std::int64_t ts_us) const {
  v1::CacheStateUpdate u;
  u.set_replica_id(id_.replica_id);
  u.set_model_id(id_.model_id);
  u.set_tenant_id(id_.tenant_id);
  u.set_hash_scheme(id_.hash_scheme);
  u.set_timestamp_us(ts_us);
  return u;
}

v1::CacheStateUpdate grpc_cache_client::to_update(const op& o) const {
  v1::CacheStateUpdate u = header(o.ts_us);
  u.mutable_prefixes()->Reserve(static_cast<int>(o.entries.size()));
  std::uint16_t last_adapter = 0xffff;
  std::string last_name;
  for (const auto& e : o.entries) {
    auto* p = u.add_prefixes();
    p->set_prefix_hash(ic::index::to_wire(e.fp));
    p->set_token_count(static_cast<std::int32_t>(e.tokens));
    p->set_tier(static_cast<v1::CacheTier>(static_cast<int>(e.t)));
    if (e.adapter != 0) {
      if (e.adapter != last_adapter) {
        last_adapter = e.adapter;
        last_name = adapters_.name(e.adapter);
      }
      p->set_adapter_id(last_name);
    }
  }
  return u;  // CacheStateUpdate.adapter_id stays "" [REF]
}

rpc_outcome grpc_cache_client::send_update(const v1::CacheStateUpdate& u) {
  auto t0 = std::chrono::steady_clock::now();
  grpc::ClientContext ctx;
  set_deadline(ctx, timeout_ms_);
  v1::Ack ack;
  auto writer = stub_->ReportCacheState(&ctx, &ack);
  if (writer->Write(u)) writer->WritesDone();
  grpc::Status st = writer->Finish();  // also after a failed write: the real status (A17)
  return outcome_of(st, ack, since(t0));
}

rpc_outcome grpc_cache_client::report(const op& o) { return send_update(to_update(o)); }

rpc_outcome grpc_cache_client::publish(const op& o) {
  auto t0 = std::chrono::steady_clock::now();
  v1::CacheEvent e;
  e.set_type(o.type == op_type::clear ? v1::CacheEvent::ALL_CLEARED : v1::CacheEvent::PREFIX_EVICTED);
  e.set_replica_id(id_.replica_id);
  e.set_model_id(id_.model_id);
  e.set_tenant_id(id_.tenant_id);
  e.set_timestamp_us(o.ts_us);
  if (o.type == op_type::evict) {
    e.set_prefix_hash(ic::index::to_wire(o.fp));
    if (o.adapter != 0) e.set_adapter_id(adapters_.name(o.adapter));
  }
  grpc::ClientContext ctx;
  set_deadline(ctx, timeout_ms_);
  v1::Ack ack;
  grpc::Status st = stub_->PublishEvent(&ctx, e, &ack);
  return outcome_of(st, ack, since(t0));
}

std::optional<server_view> grpc_cache_client::get_state() {
  v1::GetCacheStateRequest req;
  req.set_model_id(id_.model_id);
  req.set_tenant_id(id_.tenant_id);
  grpc::ClientContext ctx;
  set_deadline(ctx, timeout_ms_);
  v1::GetCacheStateResponse resp;
  if (!stub_->GetCacheState(&ctx, req, &resp).ok()) return std::nullopt;
  server_view v;
  v.total_prefixes = resp.summary().total_prefixes();
  for (const auto& r : resp.replicas())
    if (r.replica_id() == id_.replica_id) v.has_replica = true;
  return v;
}

rpc_outcome grpc_cache_client::report_stats(const stats_sample& s, const std::string& client_version) {
  v1::CacheStateUpdate u = header(std::chrono::duration_cast<std::chrono::microseconds>(
                                      std::chrono::system_clock::now().time_since_epoch()).count());
  auto* st = u.mutable_stats();
  st->set_replica_id(id_.replica_id);
  st->set_cache_memory_bytes(s.cache_memory_bytes);
  st->set_hit_rate(static_cast<float>(s.hit_rate));
  st->set_pressure(static_cast<float>(s.pressure));
  st->set_t2_hit_tokens(s.t2_hit_tokens);
  st->set_t2_query_tokens(s.t2_query_tokens);
  st->set_client_version(client_version);
  return send_update(u);
}

}  // namespace ic::kvevent
