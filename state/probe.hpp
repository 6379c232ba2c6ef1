// The `/probe` functional self-test (spec/operations.md §2.5) as plain code over the index.
//
// A probe proves, in process, that the index can take an ingest and route on it. It writes one
// chain entry for the replica `__probe-<backend>` under the reserved tenant
// `inferencecache.io/probe`, reads it back, routes on it, and always clears the replica again:
//
//   stage A "ingest":  ingest {block_hashes=[probe_hash], block_token_counts=[16]} plus stats
//                      {hit rate 1, pressure 0, memory 0}; verified by a direct entry read.
//   stage B "routing": the index's own lookup (no policy floors, no deadline: not the gRPC
//                      handler) must answer PREFIX_MATCH and include the probe replica.
//   stage C "t2":      no tier-2 prober is wired in this server, so always "skipped".
//
// `run_probe` is called by the reserved tenant's actor, which owns that tenant's index; the
// coordinator queues each probe behind the journaled inputs before it, so probes never
// interleave with each other (the reference's per-(backend, model) serialisation, made
// global). The probe is not journaled:
// the reserved tenant never outlives the message, and the index already keeps it out of the
// cap, quotas, /snapshot, metrics and the event stream.
//
//   ic::actors::probe_request req{"ns/backend", "functional-self-test", "vllm", ""};
//   ic::actors::probe_outcome out = ic::actors::run_probe(index, req, now_us);
//   if (out.passed()) ...
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "index/tenant_index.hpp"
#include "index/types.hpp"

namespace ic::state {

/// One /probe request body (every field already decoded; the three required are non-empty).
struct probe_request {
  std::string backend;       ///< `backend`: the controller sends "<namespace>/<name>"
  std::string model;         ///< `model`: the controller sends "functional-self-test"
  std::string hash_scheme;   ///< `hashScheme`: e.g. "vllm"
  std::string backend_type;  ///< `backendType` (optional): CacheBackend spec.type
};

/// The result of one stage.
enum class probe_stage_result { ok, failed, skipped };

/// Returns "ok", "failed" or "skipped".
std::string_view to_string(probe_stage_result r);

/// Why a stage failed.
struct probe_error {
  std::string stage;  ///< "ingest", "routing" or "t2"
  std::string message;
};

/// What one probe found (the /probe 200 body).
struct probe_outcome {
  std::string backend;
  probe_stage_result ingest = probe_stage_result::skipped;
  probe_stage_result routing = probe_stage_result::skipped;
  probe_stage_result t2 = probe_stage_result::skipped;
  std::vector<probe_error> errors;

  /// Returns true when every stage is ok or skipped.
  bool passed() const { return errors.empty(); }
};

/// Token count of the probe's single block.
inline constexpr std::int32_t probe_block_tokens = 16;

/// Returns the reserved replica id of `backend`: "__probe-<backend>".
std::string probe_replica_id(std::string_view backend);

/// Returns the 32-byte probe hash: SHA-256 of "inferencecache.io/probe/v1\n" followed by
/// uint32_be(len) ‖ bytes of hash_scheme, model and backend, in that order.
std::string probe_hash(const probe_request& request);

/// Runs stages A, B and C against `index` at `now` and clears the probe replica afterwards,
/// whatever happened. Never fails as a call: failures are stage results.
probe_outcome run_probe(index::tenant_index& index, const probe_request& request,
                        index::micros now);

}  // namespace ic::state
