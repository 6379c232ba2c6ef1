// The state one index actor owns, as a plain class: the cache index, the policy store, and
// the application of journal records to both.
//
// Every mutation arrives as a decoded journal record and is applied by `apply`, live and on
// replay alike, at the record's own time — so replaying a journal rebuilds the same index.
// Lookups, GetCacheState and /snapshot read it. Single-threaded: the owning actor (or the
// recovery code before the actors start) is the only caller.
//
//   index_state st(opts);
//   auto out = st.apply(*decode_record(kind, bytes), &changes);
//   auto resp = st.lookup(request, now_us, [&] { return deadline_passed(); });
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "actors/record_codec.hpp"
#include "index/cache_index.hpp"
#include "index/route_lookup.hpp"
#include "index/types.hpp"
#include "policy/policy_store.hpp"

namespace ic::actors {

/// Construction parameters (from the server's flags).
struct index_state_options {
  /// `--max-index-entries`; 0 = unbounded. Default 1,000,000.
  std::int64_t max_entries = 1'000'000;
  /// `--default-ttl`. Default 30 min.
  std::chrono::nanoseconds default_ttl = std::chrono::minutes(30);
  /// `--engine-block-size`. Default 16.
  int block_size = 16;
};

/// What applying one record did.
struct apply_outcome {
  /// False when the record could not be applied (a policy body that no longer decodes).
  bool ok = true;
  std::string error;
  index::ingest_result ingest;
  index::event_result event;
  index::sweep_result sweep;
};

/// A lookup's answer and the LFU credit it earns once delivered (empty unless PREFIX_MATCH
/// in an LFU tenant).
struct lookup_outcome {
  index::lookup_route_response response;
  std::vector<index::scored_replica> credit;
};

/// One actor's index, policies and quotas.
class index_state {
 public:
  explicit index_state(index_state_options options = {});

  /// Applies one decoded journal record at its own time, recording index changes.
  apply_outcome apply(const decoded_record& record, index::change_log* changes = nullptr);

  /// Decides LookupRoute at `now_us` without changing anything, so concurrent readers may
  /// call it (never concurrently with a mutation). `expired` is asked after the index
  /// decision: when it says the deadline passed, the answer is TIMEOUT with no credit.
  lookup_outcome decide(const index::lookup_route_request& request, index::micros now_us,
                        const std::function<bool()>& expired = {}) const;

  /// Gives the LFU credit of a delivered lookup (stale entries are skipped).
  void credit(const std::vector<index::scored_replica>& hits);

  /// `decide` then `credit`, for single-threaded callers.
  index::lookup_route_response lookup(const index::lookup_route_request& request,
                                      index::micros now_us,
                                      const std::function<bool()>& expired = {});

  /// Returns the resolved policy of `tenant` (no-policy defaults when none was pushed).
  policy::resolved_policy policy_of(std::string_view tenant) const {
    return policies_.resolve(tenant);
  }

  /// Read access for GetCacheState, /snapshot, metrics and tests.
  const index::cache_index& index() const { return index_; }
  const policy::policy_store& policies() const { return policies_; }

  /// Runs the self-test probe's ingest/lookup/clear under the reserved tenant (not journaled:
  /// the reserved tenant never outlives the probe).
  index::cache_index& mutable_index() { return index_; }

 private:
  void apply_policy(const policy::policy_set& set);

  index_state_options options_;
  index::cache_index index_;
  policy::policy_store policies_;
  index::route_options route_options_;
};

}  // namespace ic::actors
