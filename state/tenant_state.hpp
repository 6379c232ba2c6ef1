// The state one tenant actor owns, as plain classes: `tenant_state` (one tenant's index and
// the policy set it reads) and `tenant_set` (every tenant plus the cross-tenant facts, applied
// serially: recovery replays the journal through it, and tests use it as the oracle the
// actors must match).
//
// Each tenant has its own `index::tenant_index` (its entries, policy, quota and orders). The
// indexes share one `index::shared_facts` (total entries, reserved entries, total keys: the
// cold-start carve-out reads it) and leave the global cap (§4.6) to their owner: `tenant_set`
// merges the tenants' cap orders with `enforce_cap`, and the live runtime's coordinator actor
// runs the same merge by messages (actors/coordinator.cpp). Records are applied at their own
// recorded time, so replaying a journal rebuilds the same indexes.
//
//   tenant_set set(opts);
//   auto out = set.apply(*proto::decode_record(kind, bytes), &changes);   // serial, exact
//   auto resp = set.lookup(request, now_us);                       // decide + LFU credit
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "state/credit_batch.hpp"
#include "state/effective_clock.hpp"
#include "state/probe.hpp"
#include "proto/record_codec.hpp"
#include "index/tenant_index.hpp"
#include "index/route_lookup.hpp"
#include "index/types.hpp"
#include "policy/policy_store.hpp"
#include "state/options.hpp"
#include "state/pushed_stores.hpp"
#include "topology/pd_selector.hpp"

namespace ic::state {

/// What applying one record did.
struct apply_outcome {
  /// False when the record could not be applied (a policy body that no longer decodes).
  bool ok = true;
  std::string error;
  index::ingest_result ingest;
  index::event_result event;
  index::sweep_result sweep;
  /// The time the global cap an update may trigger runs at (its effective time).
  index::micros cap_ts = 0;
};

/// A lookup's answer and the LFU credit it earns once delivered (empty unless PREFIX_MATCH
/// in an LFU tenant).
struct lookup_outcome {
  index::lookup_route_response response;
  std::vector<index::scored_replica> credit;
};

/// The policy set in force, shared read-only by every tenant (replaced, never mutated).
using policy_ptr = std::shared_ptr<const policy::policy_store>;

/// Returns `base` with a journaled policy push (its canonical JSON) applied, or the error
/// when the bytes do not decode. The one policy-record rule: the policy actor (live), the
/// replay (`tenant_set::apply`) and the snapshot loader (over an empty store) use it.
policy::result<policy_ptr> apply_policy_record(const policy::policy_store& base,
                                               std::string_view canonical_json);

/// Returns the index options of one tenant's index: the global cap is left to the owner.
index::index_options tenant_index_options(const state_options& o, index::shared_facts* shared);

/// Returns an upper bound of the (key × replica) entries `u` can add (one replica per
/// update: at most one entry per key it names).
std::int64_t max_growth(const index::cache_state_update& u);

/// One tenant's index and the policy set it reads. Single-threaded: its actor (or the
/// recovery code) is the only caller; const calls may run concurrently with each other.
class tenant_state {
 public:
  /// An empty tenant.
  tenant_state(std::string tenant, const state_options& options, index::shared_facts* shared,
               policy_ptr policies);
  /// A tenant rebuilt from a snapshot or a split: takes `idx` as it is.
  tenant_state(std::string tenant, std::unique_ptr<index::tenant_index> idx,
               const state_options& options, policy_ptr policies);

  const std::string& tenant() const { return tenant_; }

  /// Applies an update or event record of this tenant at `at`, its effective time
  /// (state/effective_clock.hpp; ingest and quota, or the event; not the global cap, which
  /// the owner merges over every tenant at `cap_ts`), or this tenant's share of a journaled
  /// LFU credit record. The one per-tenant application: the tenant actor (live) and
  /// `tenant_set::apply` (replay) both call it. Policy and sweep records are not per-tenant
  /// (`ok` false).
  apply_outcome apply(const proto::decoded_record& record, index::micros at,
                      index::change_log* changes);
  /// Same, at `record.applied_at_us` (the coordinator stamped it with the effective time).
  apply_outcome apply(const proto::decoded_record& record, index::change_log* changes) {
    return apply(record, record.applied_at_us, changes);
  }
  /// Applies an update (ingest and quota; not the global cap).
  index::ingest_result ingest(const index::cache_state_update& u, index::micros at,
                              index::change_log* changes,
                              index::input_origin origin = index::input_origin::producer);
  /// Applies an event.
  index::event_result apply_event(const index::cache_event& e, index::micros at,
                                  index::change_log* changes);
  /// Runs the next slice of a TTL sweep (see tenant_index::sweep_step); true when complete.
  bool sweep_step(index::micros at, index::tenant_index::sweep_cursor& cursor, std::size_t max_keys,
                  index::change_log* changes, index::sweep_result& result);
  /// Installs a new policy set (this tenant's TTL, eviction mode, quota).
  void set_policies(policy_ptr policies);
  /// The cap merge (§4.6), see index::tenant_index::cap_victim / evict_cap.
  std::optional<index::cap_head> cap_victim() { return index_->cap_victim(); }
  std::int64_t evict_cap(const std::optional<index::cap_head>& bound, std::int64_t max,
                         index::micros ts, index::change_log* changes,
                         index::ingest_result& result) {
    return index_->evict_cap(bound, max, ts, changes, result);
  }
  /// Gives the LFU credit of a delivered lookup.
  void credit(const std::vector<index::scored_replica>& hits);
  /// Instead of crediting, adds a delivered lookup's credit to `batch` by entry name
  /// (JetStream mode: credits apply when their journaled batch comes back).
  void collect_credit(const std::vector<index::scored_replica>& hits, credit_batch& batch) const;
  /// Runs the /probe self-test (reserved tenant only; not journaled).
  probe_outcome probe(const probe_request& request, index::micros now);

  /// Decides LookupRoute at `now_us` without changing anything. `expired` is asked after
  /// the index decision: when it says the deadline passed, the answer is TIMEOUT, no credit.
  lookup_outcome decide(const index::lookup_route_request& request, index::micros now_us,
                        const std::function<bool()>& expired = {}) const;
  /// GetCacheState of (this tenant, model).
  index::cache_state_view cache_state(const std::string& model) const;
  /// Decides LookupPDRoute (pd-templates.md §2.4) over this tenant's index and policy and
  /// the topology snapshot `topologies`; `deadline_us` is the caller's deadline (Unix µs).
  /// Changes nothing (no LFU credit).
  topology::pd_route_response decide_pd(const topology::pd_route_request& request,
                                        const topology::topology_snapshot& topologies,
                                        const topology::clock& clock,
                                        std::optional<index::micros> deadline_us) const;

  const index::tenant_index& index() const { return *index_; }
  const policy::policy_store& policies() const { return *policies_; }
  const policy_ptr& policy_set() const { return policies_; }

 private:
  std::string tenant_;
  std::unique_ptr<index::tenant_index> index_;
  policy_ptr policies_;
  index::route_options route_options_;
};

/// Answers a lookup or GetCacheState of a tenant that holds nothing (no tenant actor yet):
/// the miss classifier still reads the shared totals (cold-start carve-out).
class absent_tenant {
 public:
  absent_tenant(const state_options& options, index::shared_facts* shared);
  lookup_outcome decide(const index::lookup_route_request& request, index::micros now_us,
                        const policy::policy_store& policies) const;
  /// LookupPDRoute of such a tenant (no stats rows, so at most a diagnostic or NO_HINT).
  topology::pd_route_response decide_pd(const topology::pd_route_request& request,
                                        const topology::topology_snapshot& topologies,
                                        const policy::policy_store& policies,
                                        const topology::clock& clock,
                                        std::optional<index::micros> deadline_us) const;

 private:
  index::shared_facts* shared_;
  index::route_options route_options_;
};

/// Every tenant, applied serially: the journal replay engine and the actors' oracle.
class tenant_set {
 public:
  explicit tenant_set(state_options options = {});

  /// Applies one decoded journal record at its effective time (max of the previous one and
  /// its stamp, state/effective_clock.hpp): ingest, quota, then the global cap merged over
  /// every tenant; a policy push; a sweep; a topology / templates push into `stores()`.
  /// Records index changes.
  apply_outcome apply(const proto::decoded_record& record, index::change_log* changes = nullptr);
  /// Decides and credits a lookup. For tests (the tenant actors answer lookups live).
  index::lookup_route_response lookup(const index::lookup_route_request& request,
                                      index::micros now_us,
                                      const std::function<bool()>& expired = {});

  /// Returns the tenant, or nullptr when it does not exist.
  tenant_state* find(const std::string& tenant);
  /// Returns the tenant, creating it (with the current policies) when it does not exist.
  tenant_state& get_or_create(const std::string& tenant);
  /// Installs a tenant rebuilt elsewhere (snapshot loading).
  void adopt(std::unique_ptr<tenant_state> t);

  /// Replaces the policy set (every tenant re-resolves).
  void set_policies(policy_ptr policies);
  const policy_ptr& policies() const { return policies_; }
  /// The effective time of the last applied record (snapshots carry it; the live
  /// coordinator continues from it).
  index::micros effective_time() const { return clock_.last(); }
  /// Continues from `t` (a snapshot's effective time).
  void set_effective_time(index::micros t) { clock_ = effective_clock(t); }
  policy::resolved_policy policy_of(std::string_view tenant) const {
    return policies_->resolve(tenant);
  }

  const state_options& options() const { return options_; }
  const std::shared_ptr<index::shared_facts>& facts() const { return facts_; }
  /// The /topology and /templates stores (the runtime hands them to its actors).
  const stores_ptr& stores() const { return stores_; }
  /// Tenants by name.
  const std::map<std::string, std::unique_ptr<tenant_state>>& tenants() const { return tenants_; }
  /// Moves every tenant out (the runtime hands them to their actors).
  std::map<std::string, std::unique_ptr<tenant_state>> release();

  /// Merged views over every tenant (see the free functions below).
  index::snapshot_view snapshot() const;
  std::vector<std::string> canonical_dump() const;

 private:
  state_options options_;
  std::shared_ptr<index::shared_facts> facts_;
  policy_ptr policies_;
  stores_ptr stores_;
  std::map<std::string, std::unique_ptr<tenant_state>> tenants_;
  absent_tenant absent_;
  effective_clock clock_;
};

/// Runs the §4.6 cap over `tenants` serially (the order of tenant_set::apply and of the
/// coordinator's message protocol): while the non-reserved total exceeds `max_entries`,
/// evicts from the tenant whose next victim is first, as long as it stays before every other
/// tenant's next victim.
void enforce_cap(const std::vector<tenant_state*>& tenants, const index::shared_facts& facts,
                 std::int64_t max_entries, index::micros ts, index::change_log* changes,
                 index::ingest_result& result);

/// The entries the cap must still remove (0 when within the cap or unbounded).
std::int64_t cap_excess(const index::shared_facts& facts, std::int64_t max_entries);

/// Merged /snapshot view of tenants given in name order.
index::snapshot_view merge_snapshots(const std::vector<const tenant_state*>& tenants);
/// Merged `entries_by_model` of tenants.
std::vector<std::pair<std::string, std::int64_t>> merge_entries_by_model(
    const std::vector<const tenant_state*>& tenants);
/// The canonical dump of several tenants as one index would print it.
std::vector<std::string> merge_dumps(const std::vector<const tenant_state*>& tenants,
                                     const index::shared_facts& facts);

}  // namespace ic::state
