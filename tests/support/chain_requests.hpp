// The LookupRoute request the integration tests send most: a chain of block hashes of 64
// tokens each, model "llama", scheme "vllm". Header-only (the tests that use it link the
// generated protobuf code themselves).
#pragma once

#include <string>
#include <vector>

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

}  // namespace ic::test
