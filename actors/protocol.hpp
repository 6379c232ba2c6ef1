// The actors' protocol: every message the runtime's actors exchange, and their typed
// interfaces (sender, handler, reply). Included only inside actors/ (the actor files and
// runtime.cpp): callers use the CAF-free facade in actors/runtime.hpp.
//
//   runtime::append        -> journal actor       append(append_msg)
//   journal actor          -> coordinator         apply(committed_batch)      in journal order
//   coordinator            -> tenant actor        apply(tenant_record) / sweep(at)
//   coordinator            -> policy actor        policy(policy_change) -> policy_reply
//   policy actor           -> tenant actors       policy(policy_ptr)           (broadcast)
//   tenant actor           -> coordinator         drained() / excldone(exclusive_done)   [exclusive_done_atom]
//   coordinator            -> tenant actors       caphead() / capevict(cap_order) / hold() / release()
//   coordinator            -> snapshot writer     snapwrite(snapshot_job) / read(read_job)
//   gateway thread         -> tenant actor        lookup(lookup_call) / cstate(state_call)  [cache_state_atom]
//   gateway thread         -> tenant actor        pdroute(pd_call)                           [pd_route_atom]
//   HTTP thread            -> coordinator         probe(probe_call) / snapnow() / read(read_job)
//
// Messages are local only (never serialised), so types are allowed with
// CAF_ALLOW_UNSAFE_MESSAGE_TYPE instead of inspect().
//
// Requests inside the runtime (coordinator -> tenant, policy actor, snapshot writer) carry
// no timeout (`caf::infinite`): every receiver is a local actor that always answers, and a
// handler that throws aborts the process (fail-fast exception policy), so a reply cannot be
// lost while the process lives. A deadline there would only turn a bug into a silent stall
// of dispatch. Asks from outside (gateway, HTTP threads) are bounded by the deadline timer
// or by the blocking helper's timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/deadline_timer.hpp"
#include "actors/messages.hpp"
#include "state/probe.hpp"
#include "proto/record_codec.hpp"
#include "actors/runtime.hpp"
#include "state/snapshot_io.hpp"
#include "state/tenant_state.hpp"
#include "index/tenant_index.hpp"
#include "index/types.hpp"

namespace ic::actors {

// Atoms are at most 10 characters (CAF 0.17).
using append_atom = caf::atom_constant<caf::atom("append")>;
using flush_atom = caf::atom_constant<caf::atom("flush")>;
using sweep_atom = caf::atom_constant<caf::atom("sweep")>;
using sweep_more_atom = caf::atom_constant<caf::atom("sweepmore")>;
using apply_atom = caf::atom_constant<caf::atom("apply")>;
using drained_atom = caf::atom_constant<caf::atom("drained")>;
using exclusive_done_atom = caf::atom_constant<caf::atom("excldone")>;
using policy_atom = caf::atom_constant<caf::atom("policy")>;
using lookup_atom = caf::atom_constant<caf::atom("lookup")>;
using cache_state_atom = caf::atom_constant<caf::atom("cstate")>;
using caphead_atom = caf::atom_constant<caf::atom("caphead")>;
using capevict_atom = caf::atom_constant<caf::atom("capevict")>;
using hold_atom = caf::atom_constant<caf::atom("hold")>;
using release_atom = caf::atom_constant<caf::atom("release")>;
using snapnow_atom = caf::atom_constant<caf::atom("snapnow")>;
using snaptick_atom = caf::atom_constant<caf::atom("snaptick")>;
using snapwrite_atom = caf::atom_constant<caf::atom("snapwrite")>;
using read_atom = caf::atom_constant<caf::atom("read")>;
using probe_atom = caf::atom_constant<caf::atom("probe")>;
using pd_route_atom = caf::atom_constant<caf::atom("pdroute")>;
using credit_atom = caf::atom_constant<caf::atom("credit")>;
using ack_expiry_atom = caf::atom_constant<caf::atom("ackexpiry")>;
using reload_atom = caf::atom_constant<caf::atom("reload")>;
using retire_atom = caf::atom_constant<caf::atom("retire")>;

/// One input to journal (journal actor <- runtime::append).
struct append_msg {
  proto::record_kind kind = proto::record_kind::update;
  std::string payload;
  std::shared_ptr<append_sink> sink;
  std::size_t slot = 0;
};

/// One journaled record on its way to the coordinator.
struct committed {
  std::uint64_t seq = 0;
  std::uint32_t kind = 0;
  std::string bytes;
  std::shared_ptr<append_sink> sink;
  std::size_t slot = 0;
};

/// One group commit's records, in journal order.
struct committed_batch {
  std::vector<committed> items;
  /// Replicated log: when the stream stored the batch (ns since the epoch; 0 = unknown).
  std::int64_t stored_at_ns = 0;
};

/// A decoded record for one tenant (coordinator -> tenant actor).
struct tenant_record {
  std::uint64_t seq = 0;
  proto::decoded_record rec;
  std::shared_ptr<append_sink> sink;
  std::size_t slot = 0;
  /// Applied while nothing else is in flight; the tenant hands the result back to the
  /// coordinator (which runs the global cap and answers the sink) instead of answering.
  bool exclusive = false;
  /// Entries this update may add (reserved in the coordinator's headroom until applied).
  std::int64_t growth = 0;
};

/// A TTL sweep for one tenant.
struct sweep_order {
  index::micros at = 0;
};

/// An exclusive update applied by its tenant (tenant actor -> coordinator).
struct exclusive_done {
  tenant_record item;
  index::ingest_result result;
  /// The update's own time (cap change records carry it).
  index::micros ts = 0;
};

/// A tenant's next cap victim (reply to caphead).
struct cap_head_reply {
  std::optional<index::cap_head> head;
};

/// Evict while before `bound`, at most `max` (coordinator -> tenant actor).
struct cap_order {
  std::optional<index::cap_head> bound;
  std::int64_t max = 0;
  index::micros ts = 0;
};

/// What one capevict did (reply).
struct cap_evicted {
  std::int64_t lru = 0;
  std::int64_t lfu = 0;
  std::optional<index::cap_head> next;
};

/// A gateway ask with a deadline: answered once, by the tenant actor (which claims it) or
/// at the deadline by the timer (`done(nullopt)`).
template <class Answer, class Question>
struct ask_call final : expiring {
  Question question;
  std::function<void(std::optional<Answer>)> done;
  std::atomic<bool> claimed{false};
  bool claim() { return !claimed.exchange(true); }
  void expire() override {
    if (claim()) std::exchange(done, nullptr)(std::nullopt);
  }
  bool settled() const override { return claimed.load(); }
};
/// A LookupRoute ask.
using lookup_call = ask_call<index::lookup_route_response, index::lookup_route_request>;
using lookup_call_ptr = std::shared_ptr<lookup_call>;
/// A LookupPDRoute ask.
using pd_call = ask_call<topology::pd_route_response, topology::pd_route_request>;
using pd_call_ptr = std::shared_ptr<pd_call>;
/// A GetCacheState ask (the question is the model).
using state_call = ask_call<index::cache_state_view, std::string>;
using state_call_ptr = std::shared_ptr<state_call>;

/// A /probe run, queued with the journaled inputs so it never interleaves with them.
struct probe_call {
  state::probe_request request;
  std::function<void(const state::probe_outcome&)> done;
};
using probe_call_ptr = std::shared_ptr<probe_call>;

/// Every tenant (name order) at a quiescent point, owned for as long as a reader needs it
/// (a read may outlive the actors at shutdown).
struct frozen_view {
  state::policy_ptr policies;
  std::shared_ptr<index::shared_facts> facts;
  std::vector<std::shared_ptr<state::tenant_state>> tenants;
  /// The /topology and /templates sections (filled for snapshots only).
  state::store_section_list stores;
  /// The tenants as the merge functions of state/tenant_state.hpp take them.
  std::vector<const state::tenant_state*> list() const {
    std::vector<const state::tenant_state*> out;
    out.reserve(tenants.size());
    for (const auto& t : tenants) out.push_back(t.get());
    return out;
  }
};

/// A read of every tenant at a consistent point (run by the snapshot writer's thread).
struct read_job {
  std::function<void(const frozen_view&)> run;
  /// Filled in by the coordinator once every tenant is quiescent.
  frozen_view view;
};

/// A whole new state built off to the side after a stream gap (stream follower ->
/// coordinator): swapped in for every tenant at once, in journal order (after every record
/// queued before it), then `done()` runs on the coordinator's thread.
struct reload_job {
  std::shared_ptr<state::tenant_set> set;
  /// The position the new state includes (what the log handed over last).
  std::uint64_t position = 0;
  std::function<void()> done;
};
using reload_job_ptr = std::shared_ptr<reload_job>;

/// A snapshot to write: every tenant as of `covering_seq`.
struct snapshot_job {
  std::uint64_t covering_seq = 0;
  /// t_eff of the record at `covering_seq` (state/effective_clock.hpp).
  index::micros effective_time = 0;
  frozen_view view;
};

}  // namespace ic::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::append_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::committed_batch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::tenant_record)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::sweep_order)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::exclusive_done)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::cap_head_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::cap_order)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::cap_evicted)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::lookup_call_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::state_call_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::pd_call_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::probe_call_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::read_job)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::snapshot_job)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::reload_job_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::snapshot_report)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::state::policy_ptr)

namespace ic::actors {

/// A tenant actor: sole owner of one tenant's `state::tenant_state`, created on the tenant's first
/// record and living until shutdown.
///   apply(record)        <- coordinator: applies, tells subscribers, answers the sink (or,
///                           exclusive, hands the result back with excldone)
///   sweep(order)         <- coordinator: TTL sweep in slices (sweepmore), lookups between
///   policy(set)          <- policy actor: the new policy set
///   probe(call)          <- coordinator: the /probe self-test (reserved tenant only)
///   lookup(call)         <- gateway: decide, claim, answer, credit LFU
///   cstate(call)         <- gateway: GetCacheState
///   pdroute(call)        <- gateway: LookupPDRoute (decide, claim, answer; no LFU credit)
///   caphead()            -> cap_head_reply            (coordinator, while nothing is in flight)
///   capevict(order)      -> cap_evicted
///   hold() -> bool / release()   LFU credits wait while a frozen read runs
///   retire()             <- coordinator, after a reload swapped in a new state: quit once
///                           everything queued before it was answered
using tenant_actor = caf::typed_actor<
    caf::reacts_to<apply_atom, tenant_record>, caf::reacts_to<sweep_atom, sweep_order>,
    caf::reacts_to<sweep_more_atom>, caf::reacts_to<policy_atom, state::policy_ptr>,
    caf::reacts_to<probe_atom, probe_call_ptr>, caf::reacts_to<lookup_atom, lookup_call_ptr>,
    caf::reacts_to<cache_state_atom, state_call_ptr>, caf::reacts_to<pd_route_atom, pd_call_ptr>,
    caf::replies_to<caphead_atom>::with<cap_head_reply>,
    caf::replies_to<capevict_atom, cap_order>::with<cap_evicted>,
    caf::replies_to<hold_atom>::with<bool>, caf::reacts_to<release_atom>,
    caf::reacts_to<credit_atom>, caf::reacts_to<retire_atom>>;

/// A policy change for the policy actor: the journaled JSON and the tenants to tell.
struct policy_change {
  std::string canonical_json;
  std::vector<tenant_actor> tenants;
};
/// The policy actor's answer: the new set (or why the JSON did not decode).
struct policy_reply {
  bool ok = true;
  std::string error;
  state::policy_ptr policies;
};

}  // namespace ic::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::policy_change)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ic::actors::policy_reply)

namespace ic::actors {

/// The policy actor: holds the policy set in force; applies a journaled change, broadcasts
/// it to every tenant actor and publishes it for the gateway's lookup budgets.
///   policy(change) -> policy_reply
using policy_actor =
    caf::typed_actor<caf::replies_to<policy_atom, policy_change>::with<policy_reply>>;

/// The coordinator: the small actor behind the cross-tenant facts. It dispatches committed
/// records to tenant actors in journal order (creating tenants on first use), keeps the
/// global cap exact (headroom while far from the cap; an exclusive update plus a cap merge
/// over the tenants' cap orders when close), broadcasts TTL sweeps, sequences policy changes
/// through the policy actor, and runs snapshots and frozen reads at quiescent points.
///   apply(batch)      <- journal actor
///   drained()         <- the tenant that finished the last record in flight
///   excldone(done)    <- the tenant of an exclusive update
///   probe(call)       <- HTTP thread (queued behind earlier records)
///   snapnow()         -> snapshot_report
///   snaptick()        <- itself, every min(--snapshot-interval, 1 s): a snapshot due by
///                        time is taken when no record arrives
///   read(job)         <- HTTP thread: run `job` when every tenant is quiescent
///   reload(job)       <- stream follower: swap in a new state (after a gap), in order
using coordinator_actor =
    caf::typed_actor<caf::reacts_to<apply_atom, committed_batch>, caf::reacts_to<drained_atom>,
                     caf::reacts_to<exclusive_done_atom, exclusive_done>,
                     caf::reacts_to<probe_atom, probe_call_ptr>,
                     caf::replies_to<snapnow_atom>::with<snapshot_report>,
                     caf::reacts_to<snaptick_atom>, caf::reacts_to<read_atom, read_job>,
                     caf::reacts_to<reload_atom, reload_job_ptr>>;

/// The journal actor: the single writer.
///   append(msg)  queues an input; a self-sent flush writes everything queued as one group
///   flush()      appends the queue to the journal, hands the batch to the coordinator
///   sweep()      queues a TTL sweep record and re-arms the timer
using journal_actor = caf::typed_actor<caf::reacts_to<append_atom, append_msg>,
                                       caf::reacts_to<flush_atom>, caf::reacts_to<sweep_atom>,
                                       caf::reacts_to<credit_atom>,
                                       caf::reacts_to<ack_expiry_atom>>;

/// The snapshot writer (detached: RocksDB writes block): serialises and stores a snapshot,
/// keeps the newest `keep`, truncates the journal through the snapshot's sequence; and runs
/// frozen reads (/snapshot, metrics) off the actors' threads.
///   snapwrite(job) -> snapshot_report
///   read(job)      -> bool
using snapshot_actor =
    caf::typed_actor<caf::replies_to<snapwrite_atom, snapshot_job>::with<snapshot_report>,
                     caf::replies_to<read_atom, read_job>::with<bool>>;

}  // namespace ic::actors
