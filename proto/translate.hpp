// Protobuf <-> domain translation for the InferenceCache contract (used by the gRPC gateway
// and by the journal record codec).
//
// The only place where wire messages meet the index's plain structs (index/types.hpp). Every
// field is copied as is: raw enum values pass through unchanged (the index normalises them),
// and message presence (`stats`, `slo`) becomes std::optional.
#pragma once

#include "index/types.hpp"
#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::proto {

namespace v1 = ::inferencecache::v1alpha1;

/// Translates one ReportCacheState message.
index::cache_state_update from_proto(const v1::CacheStateUpdate& m);

/// Translates one PublishEvent request.
index::cache_event from_proto(const v1::CacheEvent& m);

/// Translates one LookupRoute request.
index::lookup_route_request from_proto(const v1::LookupRouteRequest& m);

/// Fills a LookupRoute response.
void to_proto(const index::lookup_route_response& r, v1::LookupRouteResponse* out);

/// Fills a GetCacheState response (the summary is always present).
void to_proto(const index::cache_state_view& v, v1::GetCacheStateResponse* out);

/// Fills a StreamCacheEvents message from one index change.
void to_proto(const index::cache_change& c, v1::CacheEvent* out);

}  // namespace ic::proto
