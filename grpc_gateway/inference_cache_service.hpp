// The `inferencecache.v1alpha1.InferenceCache` gRPC service (callback API).
//
// Handlers only translate protobuf to domain requests, ask the actors, and translate back;
// they never block a gRPC callback thread. RPCs whose issue has not landed keep the
// generated default and answer UNIMPLEMENTED; RenderTemplate and LookupPDRoute answer the
// reference's fail-open values (spec/extensions.md §7).
#pragma once

#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"

namespace ic::grpc_gateway {

/// The InferenceCache service. Thread-safe; owned by the composition root and outlives
/// the grpc::Server it is registered with.
class inference_cache_service final
    : public inferencecache::v1alpha1::InferenceCache::CallbackService {
 public:
  /// RenderTemplate: `reason_code "OK"`, every other field empty (reference stub).
  grpc::ServerUnaryReactor* RenderTemplate(
      grpc::CallbackServerContext* ctx, const inferencecache::v1alpha1::RenderTemplateRequest* req,
      inferencecache::v1alpha1::RenderTemplateResponse* resp) override;

  /// LookupPDRoute: `reason_code "NO_HINT"`, every other field empty (reference stub).
  grpc::ServerUnaryReactor* LookupPDRoute(
      grpc::CallbackServerContext* ctx, const inferencecache::v1alpha1::LookupPDRouteRequest* req,
      inferencecache::v1alpha1::LookupPDRouteResponse* resp) override;
};

}  // namespace ic::grpc_gateway
