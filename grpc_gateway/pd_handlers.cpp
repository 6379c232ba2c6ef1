// RenderTemplate and LookupPDRoute (pd-templates.md §2, §3): translate, ask, translate back.
// Kept beside the LookupRoute path in inference_cache_service.cpp, not inside it.
#include <chrono>

#include "grpc_gateway/deadline.hpp"
#include "grpc_gateway/inference_cache_service.hpp"
#include "index/types.hpp"

namespace ic::grpc_gateway {

namespace v1 = inferencecache::v1alpha1;
using steady = std::chrono::steady_clock;

namespace {

double seconds_since(steady::time_point start) {
  return std::chrono::duration<double>(steady::now() - start).count();
}

topology::pd_route_request from_proto(const v1::LookupPDRouteRequest& req) {
  topology::pd_route_request r;
  r.model_id = req.model_id();
  r.tenant_id = req.tenant_id();
  r.prefix_hash = req.prefix_hash();
  r.prefix_token_count = req.prefix_token_count();
  r.pd_topology_ref = req.pd_topology_ref();
  return r;
}

void to_proto(const topology::pd_route_response& r, v1::LookupPDRouteResponse* resp) {
  resp->set_prefill_replica_id(r.prefill_replica_id);
  resp->set_decode_replica_id(r.decode_replica_id);
  resp->set_transport_hint(r.transport_hint);
  resp->set_reason_code(r.reason_code);
}

templates::render_request from_proto(const v1::RenderTemplateRequest& req) {
  templates::render_request r;
  r.template_ref = req.template_ref();
  r.tenant_id = req.tenant_id();
  r.variables.reserve(static_cast<std::size_t>(req.variables_size()));
  for (const auto& [k, v] : req.variables()) r.variables.emplace_back(k, v);  // unique keys
  return r;
}

void to_proto(const templates::render_response& r, v1::RenderTemplateResponse* resp) {
  resp->set_rendered_prompt(r.rendered_prompt);
  resp->set_stable_prefix_hash(r.stable_prefix_hash);
  resp->set_tenant_namespace(r.tenant_namespace);
  resp->set_reason_code(r.reason_code);
  resp->set_template_revision(r.template_revision);
}

}  // namespace

grpc::ServerUnaryReactor* inference_cache_service::RenderTemplate(
    grpc::CallbackServerContext* ctx, const v1::RenderTemplateRequest* req,
    v1::RenderTemplateResponse* resp) {
  const auto start = steady::now();
  auto* reactor = open_unary(ctx);
  actors::runtime* rt = runtime_or_recovering(reactor);
  if (rt == nullptr) return reactor;
  // The store is an immutable snapshot and rendering is O(output): answered on this thread.
  to_proto(rt->render(from_proto(*req)), resp);
  if (probe_) probe_->on_render(resp->reason_code(), seconds_since(start));
  answer(reactor, grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* inference_cache_service::LookupPDRoute(
    grpc::CallbackServerContext* ctx, const v1::LookupPDRouteRequest* req,
    v1::LookupPDRouteResponse* resp) {
  const auto start = steady::now();
  auto* reactor = open_unary(ctx);
  actors::runtime* rt = runtime_or_recovering(reactor);
  if (rt == nullptr) return reactor;
  // S1: deadline = min(client deadline, now + the tenant's lookupTimeoutMs).
  const auto deadline = lookup_deadline(ctx, start, rt->policy_of(req->tenant_id()));
  std::string model = req->model_id();
  rt->pd_route(from_proto(*req), deadline.value_or(start + options_.max_lookup_wait),
               [this, reactor, resp, start, model = std::move(model)](
                   std::optional<topology::pd_route_response> r) {
                 if (r) {
                   to_proto(*r, resp);
                 } else {  // the deadline passed first: fail open, all fields empty
                   resp->Clear();
                   resp->set_reason_code(std::string(index::reason::timeout));
                 }
                 if (probe_)
                   probe_->on_pd_lookup(model, resp->reason_code(),
                                        topology::hint_used(resp->reason_code()),
                                        seconds_since(start));
                 answer(reactor, grpc::Status::OK);
               });
  return reactor;
}

}  // namespace ic::grpc_gateway
