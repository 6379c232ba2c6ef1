// The coordinator's decisions as plain classes, so they have synchronous tests: the phase
// machine that says what to do with the front of the dispatch queue (`dispatch_machine`,
// with the headroom rule `must_apply_alone`), the §4.6 cap merge run by messages after an
// exclusive update (`cap_merge`), and the snapshot schedule (`snapshot_schedule`). The
// coordinator actor (actors/coordinator.cpp) holds one of each and only executes what they
// decide: it sends the messages and feeds the replies back. The journal actor holds the
// TTL sweep's timer (`sweep_schedule`) the same way.
//
//   switch (machine.next(front_item, jobs_queued, drained_now, pending_growth, nonreserved)) {
//     case dispatch_action::dispatch: /* send the front item */ break;
//     case dispatch_action::dispatch_alone: /* send it; cap merge on its reply */ return;
//     ...
//   }
//   if (schedule.due(fresh_records, clock.now())) queue_snapshot();
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "index/index_types.hpp"

namespace ic::state {

/// Where the coordinator's dispatch stands.
enum class dispatch_phase {
  /// Dispatching queued records and probes in journal order.
  running,
  /// Waiting until nothing dispatched is in flight (before an exclusive update, a policy
  /// change or a quiescent job).
  draining,
  /// One update applied alone, then the cap merged over every tenant.
  exclusive,
  /// Waiting for the policy actor to apply and broadcast a policy change.
  policy,
  /// Every tenant holds its LFU credits while a snapshot or frozen read runs.
  quiet,
};

/// The headroom rule (§4.6 exact under concurrency): returns true when an update that may
/// add `growth` entries must be applied alone — when even if every update in flight added all
/// it names (`pending_growth`) the non-reserved total could pass the cap. Far from the cap
/// updates apply concurrently; an index already over the cap (a restart with a lower cap)
/// applies every update alone. `cap` <= 0: unbounded, never alone.
inline bool must_apply_alone(std::int64_t cap, std::int64_t pending_growth,
                             std::int64_t nonreserved, std::int64_t growth) {
  return cap > 0 && pending_growth + nonreserved + growth > cap;
}

/// What the front of the dispatch queue is (all the phase machine needs to know of it).
struct dispatch_item {
  enum class kind {
    update,  ///< a cache_state_update (may grow the index by `growth` entries)
    event,   ///< a cache_event
    policy,  ///< a policy record (applied by the policy actor, alone)
    sweep,   ///< a journaled TTL sweep (sent to every tenant)
    probe,   ///< a /probe call under the reserved tenant
    reload,  ///< a whole new state (a reload after a stream gap), swapped in alone
  };
  kind what = kind::update;
  /// For an update: the most entries it can add (`max_growth`; 0 for the reserved tenant).
  std::int64_t growth = 0;
};

/// What the coordinator does next (`dispatch_machine::next`).
enum class dispatch_action {
  idle,            ///< nothing to do (queue empty, or not running): stop pumping
  wait_drained,    ///< phase is now `draining`: stop until everything in flight is applied
  start_job,       ///< phase is now `quiet`: hold every tenant's credits, run the front job
  dispatch,        ///< send the front item concurrently (reserve its growth) and go on
  dispatch_alone,  ///< phase is now `exclusive`: send the front update alone, then cap merge
  apply_policy,    ///< phase is now `policy`: hand the front policy record to the policy actor
  swap_state,      ///< phase is now `quiet`: nothing in flight; swap every tenant's state at once
};

/// The coordinator's phase machine. Dispatch runs in journal order while `running`; an
/// update that the headroom rule says must apply alone, a policy record and a queued
/// quiescent job (snapshot, frozen read) first drain everything in flight, then enter their
/// own phase, which ends with `finished()`. Not thread-safe (the coordinator actor's state).
class dispatch_machine {
 public:
  /// `cap`: the global entry cap (§4.6; <= 0 unbounded).
  explicit dispatch_machine(std::int64_t cap = 0) : cap_(cap) {}

  /// Returns the current phase.
  dispatch_phase phase() const { return phase_; }

  /// Decides what to do with the front of the queue (`front`: nullopt when it is empty) and
  /// moves to the phase the action names. `jobs_queued`: a quiescent job waits (it goes
  /// before the queue); `drained()`: returns true when nothing dispatched is in flight
  /// (called only when the action depends on it: asking may arm a drained notice);
  /// `pending_growth`: growth reserved by updates in flight; `nonreserved`: the non-reserved
  /// entries now. Outside `running` it returns `idle` and changes nothing.
  dispatch_action next(const std::optional<dispatch_item>& front, bool jobs_queued,
                       const std::function<bool()>& drained, std::int64_t pending_growth,
                       std::int64_t nonreserved);
  /// Everything in flight was applied: returns true (and runs again) when the machine was
  /// `draining`, false otherwise (a late or repeated notice changes nothing).
  bool drained();
  /// The exclusive update (with its cap merge), the policy change or the quiescent job ended:
  /// back to `running`.
  void finished() { phase_ = dispatch_phase::running; }

 private:
  dispatch_action enter(dispatch_phase p, dispatch_action a) {
    phase_ = p;
    return a;
  }

  std::int64_t cap_;
  dispatch_phase phase_ = dispatch_phase::running;
};

/// The §4.6 cap merge over tenant actors, by messages (the same `index::pick_cap_step` that
/// `enforce_cap` runs on replay): collect every non-reserved tenant's next victim, then, while
/// the cap is exceeded, order the tenant whose victim is first to evict while its victims stay
/// before every other tenant's, and take its next victim from the reply.
///
///   merge.start(names);                 // ask each for its cap_victim()
///   if (merge.on_head(name, head)) ...  // all arrived:
///   while (auto o = merge.next(excess)) { /* evict_cap(o->bound, excess) at o->tenant */
///     if (!merge.on_evicted(o->tenant, evicted, next_head)) break; }
class cap_merge {
 public:
  /// One eviction order: `tenant` evicts while its next victim sorts before `bound`.
  struct order {
    std::string tenant;
    std::optional<index::cap_head> bound;
  };

  /// Starts a merge over `tenants` (the reserved tenant excluded by the caller); returns
  /// false when there is no tenant (nothing to merge).
  bool start(const std::vector<std::string>& tenants);
  /// Records `tenant`'s next victim (nullopt: none); returns true when it was the last head
  /// the merge waited for.
  bool on_head(const std::string& tenant, std::optional<index::cap_head> head);
  /// Returns the next eviction order while `excess` > 0 and some tenant has a victim, else
  /// nullopt (the merge is done).
  std::optional<order> next(std::int64_t excess) const;
  /// `tenant` evicted `evicted` entries and its next victim is now `head`; returns false when
  /// it evicted nothing (the merge stops rather than loop).
  bool on_evicted(const std::string& tenant, std::int64_t evicted,
                  std::optional<index::cap_head> head);

 private:
  std::map<std::string, std::optional<index::cap_head>> heads_;  // by name: a stable order
  std::size_t pending_ = 0;
};

/// When snapshots are taken: every `interval` (0 = never by time) or `every_records` applied
/// records (0 = never by count), whichever comes first, and only when anything new was
/// applied; after a failure, not again before max(1 min, interval).
class snapshot_schedule {
 public:
  using clock = std::chrono::steady_clock;

  /// Never due (no interval, no record count).
  snapshot_schedule() = default;
  snapshot_schedule(std::chrono::nanoseconds interval, std::uint64_t every_records,
                    clock::time_point start)
      : interval_(interval), every_records_(every_records), last_at_(start) {}

  /// Returns true when a snapshot is due at `now`, `fresh` records after the last one.
  bool due(std::uint64_t fresh, clock::time_point now) const {
    if (fresh == 0 || now < backoff_until_) return false;
    return (every_records_ > 0 && fresh >= every_records_) ||
           (interval_.count() > 0 && now - last_at_ >= interval_);
  }
  /// A snapshot started at `now` (the interval counts from here).
  void started(clock::time_point now) { last_at_ = now; }
  /// The snapshot failed at `now`: back off.
  void failed(clock::time_point now) {
    backoff_until_ = now + std::max<clock::duration>(
                               std::chrono::minutes(1),
                               std::chrono::duration_cast<clock::duration>(interval_));
  }
  std::chrono::nanoseconds interval() const { return interval_; }
  std::uint64_t every_records() const { return every_records_; }

 private:
  std::chrono::nanoseconds interval_{};
  std::uint64_t every_records_ = 0;
  clock::time_point last_at_{};
  clock::time_point backoff_until_{};
};

/// When the TTL sweep is journaled: first at `first_at`, then every `interval` after the
/// previous one was taken, on the runtime's timer clock (runtime_options::timer_clock). The
/// owner asks `take_due` on each of its wake-ups and on every append, and sleeps `wait`
/// between wake-ups, so an injected clock drives the sweep without real waiting.
class sweep_schedule {
 public:
  using clock = std::chrono::steady_clock;

  /// Never due.
  sweep_schedule() = default;
  /// An `interval` ≤ 0 is never due.
  sweep_schedule(std::chrono::nanoseconds interval, clock::time_point first_at)
      : interval_(std::chrono::duration_cast<clock::duration>(interval)), next_at_(first_at) {}

  /// Returns true when a sweep is due at `now`; the next one is then due `interval` later.
  bool take_due(clock::time_point now) {
    if (interval_.count() <= 0 || now < next_at_) return false;
    next_at_ = now + interval_;
    return true;
  }
  /// Returns how long after `now` the next sweep is due (zero when due; 24 h when never
  /// due, a bounded wake-up).
  clock::duration wait(clock::time_point now) const {
    if (interval_.count() <= 0) return std::chrono::hours(24);
    return std::max(clock::duration::zero(), next_at_ - now);
  }

 private:
  clock::duration interval_{};
  clock::time_point next_at_ = clock::time_point::max();
};

}  // namespace ic::state
