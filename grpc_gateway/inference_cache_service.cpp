#include "grpc_gateway/inference_cache_service.hpp"

namespace ic::grpc_gateway {

namespace v1 = inferencecache::v1alpha1;

grpc::ServerUnaryReactor* inference_cache_service::RenderTemplate(
    grpc::CallbackServerContext* ctx, const v1::RenderTemplateRequest*,
    v1::RenderTemplateResponse* resp) {
  resp->set_reason_code("OK");
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* inference_cache_service::LookupPDRoute(
    grpc::CallbackServerContext* ctx, const v1::LookupPDRouteRequest*,
    v1::LookupPDRouteResponse* resp) {
  resp->set_reason_code("NO_HINT");
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace ic::grpc_gateway
