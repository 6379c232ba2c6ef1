// The LookupRoute request and the CacheStateUpdate the integration tests send most: a chain
// of block hashes of 64 tokens each, model "llama", scheme "vllm" unless given, and the
// LookupRoute call with it. Header-only (the tests that use it link the generated protobuf and
// gRPC code themselves).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::test {

inline inferencecache::v1alpha1::LookupRouteRequest chain_lookup_request(
    const std::string& tenant, const std::vector<std::string>& blocks) {
  inferencecache::v1alpha1::LookupRouteRequest req;
  req.set_tenant_id(tenant);
  req.set_model_id("llama");
  req.set_hash_scheme("vllm");
  for (const auto& b : blocks) {
    req.add_block_hashes(b);
    req.add_block_token_counts(64);
  }
  return req;
}

/// LookupRoute of `chain_lookup_request(tenant, blocks)` under `deadline`; a failed call fails
/// the test (EXPECT) and returns an empty response.
inline inferencecache::v1alpha1::LookupRouteResponse chain_lookup(
    inferencecache::v1alpha1::InferenceCache::Stub& stub, const std::string& tenant,
    const std::vector<std::string>& blocks, std::chrono::milliseconds deadline) {
  const auto req = chain_lookup_request(tenant, blocks);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  inferencecache::v1alpha1::LookupRouteResponse resp;
  EXPECT_TRUE(stub.LookupRoute(&ctx, req, &resp).ok());
  return resp;
}

inline inferencecache::v1alpha1::CacheStateUpdate chain_update_message(
    const std::string& tenant, const std::string& replica, const std::vector<std::string>& blocks,
    const std::string& scheme = "vllm") {
  inferencecache::v1alpha1::CacheStateUpdate u;
  u.set_replica_id(replica);
  u.set_model_id("llama");
  u.set_tenant_id(tenant);
  u.set_hash_scheme(scheme);
  auto* p = u.add_prefixes();
  for (const auto& b : blocks) {
    p->add_block_hashes(b);
    p->add_block_token_counts(64);
  }
  return u;
}

}  // namespace ic::test
