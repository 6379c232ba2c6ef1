// LookupPDRoute's selection (pd-templates.md §2.4–§2.6) as a pure function.
//
// `select_pd_route` reads only its inputs: the request, the current topology snapshot, the
// tenant's resolved policy, a narrow read-only view of the cache state (`pd_state_view`) and
// an injected clock. It never mutates anything (no LFU credit, S11), never throws, and
// always answers with a well-formed response (fail-open: every non-positive code leaves the
// three replica/transport fields empty).
//
//   ic::topology::index_pd_view view(&tenant_index, total_keys);  // or any pd_state_view
//   auto resp = ic::topology::select_pd_route(req, *store.current(), policy, view, clock,
//                                             caller_deadline_us);
//
// `index_pd_view` implements the view over the request tenant's `ic::index::tenant_index`:
// its stats rows with `last_seen` (`tenant_index::stats_rows`), its entries and the miss
// classifier (all the index's own functions). The server runs it in the tenant's actor
// (state::tenant_state::decide_pd).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "index/tenant_index.hpp"
#include "index/types.hpp"
#include "policy/resolved_policy.hpp"
#include "topology/topology_store.hpp"

namespace ic::topology {

using index::micros;

/// `LookupPDRouteRequest`.
struct pd_route_request {
  std::string model_id;
  std::string tenant_id;
  std::string prefix_hash;
  std::int32_t prefix_token_count = 0;
  std::string pd_topology_ref;
};

/// `LookupPDRouteResponse`.
struct pd_route_response {
  std::string prefill_replica_id;
  std::string decode_replica_id;
  std::string transport_hint;
  std::string reason_code;

  friend bool operator==(const pd_route_response& a, const pd_route_response& b) {
    return std::tie(a.prefill_replica_id, a.decode_replica_id, a.transport_hint, a.reason_code) ==
           std::tie(b.prefill_replica_id, b.decode_replica_id, b.transport_hint, b.reason_code);
  }
};

/// Reason codes new with PD (the shared ones are `ic::index::reason`).
namespace pd_reason {
inline constexpr std::string_view local_prefill = "LOCAL_PREFILL";
inline constexpr std::string_view unknown_topology = "UNKNOWN_TOPOLOGY";
}  // namespace pd_reason

/// Returns true for the three positive codes (metric label `hint_used`, §2.7).
bool hint_used(std::string_view reason_code);

/// One stats row of (tenant, model) as the selector needs it: replica id, pressure
/// (sanitised at ingest) and `last_seen` (refreshed by stats ingests and REPLICA_UPDATED
/// events, §2.3). The index's own row view.
using replica_row = index::stats_row_view;

/// One fresh holder of the exact key (tenant, model, scheme, adapter "", key).
struct prefix_holder {
  std::string replica_id;
  std::int32_t token_count = 0;
  /// freshness(now, last_seen, tenant TTL) > 0.
  float freshness = 0;
};

/// What the index says about the exact key: its fresh holders (any replica), or, when there
/// is none, the LookupRoute miss classification (lookup.md §3.8) of the scope.
struct prefix_probe {
  std::vector<prefix_holder> holders;
  /// unknown_tenant / unknown_model / unknown_hash_scheme, or none (known scope, cold start).
  index::lookup_strategy miss = index::lookup_strategy::none;
};

/// The read-only cache state the selector consults. Implementations must answer
/// consistently within one call of `select_pd_route` (e.g. from one frozen view).
class pd_state_view {
 public:
  virtual ~pd_state_view() = default;
  /// Appends every stats row of (tenant, model) to `out`, one per replica id, preferably
  /// sorted by id (the selector checks the order in one pass and sorts otherwise).
  virtual void stats_rows(std::string_view tenant, std::string_view model,
                          std::vector<replica_row>& out) const = 0;
  /// Returns the fresh holders of the exact key under the default adapter, else the miss
  /// classification, under `policy`'s TTL at `now`.
  virtual prefix_probe probe(std::string_view tenant, std::string_view model,
                             std::string_view scheme, std::string_view key,
                             const policy::resolved_policy& policy, micros now) const = 0;
};

/// `pd_state_view` over the request tenant's index: its stats rows, entries and classifier.
class index_pd_view : public pd_state_view {
 public:
  /// `tenant` is the request tenant's index (nullptr: the tenant holds nothing); `total_keys`
  /// every tenant's distinct keys (the shared totals, for the cold-start carve-out). The
  /// index must outlive the view; it is not copied.
  index_pd_view(const index::tenant_index* tenant, std::int64_t total_keys)
      : tenant_(tenant), total_keys_(total_keys) {}

  void stats_rows(std::string_view tenant, std::string_view model,
                  std::vector<replica_row>& out) const override;
  /// Runs the index's own exact lookup (lookup.md §3.3–§3.4, §3.8) once: PREFIX_MATCH scores
  /// are the fresh holders (matched_tokens = token_count, estimated_cache_hit_prob =
  /// freshness); UNKNOWN_* is the classification; TENANT_HOT implies a known scope (its
  /// candidates must serve the scope), hence no holder and miss none.
  prefix_probe probe(std::string_view tenant, std::string_view model, std::string_view scheme,
                     std::string_view key, const policy::resolved_policy& policy,
                     micros now) const override;

 private:
  const index::tenant_index* tenant_;
  std::int64_t total_keys_;
};

/// The time source of the selector (Unix µs).
class clock {
 public:
  virtual ~clock() = default;
  virtual micros now() const = 0;
};

/// Runs S0–S11 of §2.4 and returns the response. `caller_deadline` is the gRPC deadline in
/// Unix µs (nullopt: none); the effective deadline is min(it, start + lookupTimeoutMs). The
/// clock is read once at the start (liveness and freshness use that instant) and once
/// before answering (a breach there ⇒ TIMEOUT).
pd_route_response select_pd_route(const pd_route_request& request,
                                  const topology_snapshot& topologies,
                                  const policy::resolved_policy& policy,
                                  const pd_state_view& state, const clock& clock,
                                  std::optional<micros> caller_deadline = std::nullopt);

}  // namespace ic::topology
