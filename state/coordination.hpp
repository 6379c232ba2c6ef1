// The coordinator's decisions as plain values, so they have synchronous tests: the dispatch
// phases, the headroom rule that decides whether an update may apply concurrently, and the
// snapshot schedule (when one is due, the back-off after a failure). The coordinator actor
// (actors/coordinator.cpp) holds one of each and only executes what they decide.
//
//   if (must_apply_alone(cap, pending_growth, nonreserved, growth)) { /* drain, exclusive */ }
//   if (schedule.due(fresh_records, steady::now())) queue_snapshot();
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

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

}  // namespace ic::state
