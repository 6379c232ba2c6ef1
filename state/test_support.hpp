// Builders shared by the actors' tests (tests only).
#pragma once

#include <string>
#include <vector>

#include "proto/record_codec.hpp"
#include "index/types.hpp"
#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::state::testing {

/// A CacheStateUpdate of tenant "t", model "m": one chain entry of `blocks` × `count` tokens.
inline inferencecache::v1alpha1::CacheStateUpdate chain_update(
    const std::string& replica, const std::vector<std::string>& blocks,
    const std::string& scheme = "vllm", const std::string& tenant = "t", int count = 64) {
  inferencecache::v1alpha1::CacheStateUpdate u;
  u.set_replica_id(replica);
  u.set_model_id("m");
  u.set_tenant_id(tenant);
  u.set_hash_scheme(scheme);
  auto* p = u.add_prefixes();
  for (const auto& b : blocks) {
    p->add_block_hashes(b);
    p->add_block_token_counts(count);
  }
  return u;
}

/// The journal record of `u` applied at `at`, decoded as replay sees it.
inline proto::decoded_record as_record(const inferencecache::v1alpha1::CacheStateUpdate& u,
                                index::micros at) {
  return *proto::decode_record(static_cast<std::uint32_t>(proto::record_kind::update),
                        proto::encode_record(proto::record_kind::update, at, u.SerializeAsString()));
}

/// A chain LookupRoute request of tenant "t", model "m", 64 tokens per block.
inline index::lookup_route_request chain_lookup(const std::vector<std::string>& blocks) {
  index::lookup_route_request r;
  r.tenant_id = "t";
  r.model_id = "m";
  r.hash_scheme = "vllm";
  for (const auto& b : blocks) {
    r.block_hashes.push_back(b);
    r.block_token_counts.push_back(64);
  }
  return r;
}

}  // namespace ic::state::testing
