// The effective time of the record stream (spec/scaleout.md §3.4). Every journal record
// carries the time the server that appended it journaled it (`applied_at_us`, that
// server's wall clock). In log order those stamps may go backwards: several JetStream
// replicas with skewed clocks append to one stream, or one server's clock is stepped back.
// Every record is applied at
//
//     t_eff = max(t_eff of the record before, the record's stamp)
//
// a function of the log alone, so every replica and every replay computes the same time
// and TTL time never moves backwards. An update's or event's own `timestamp_us` still wins
// when it is set (index::effective_time, spec/lookup.md §2.6). The one place of this rule:
// the coordinator (live, actors/coordinator.cpp) and `tenant_set::apply` (replay, tests)
// both advance one of these; snapshots carry it (state/snapshot_io.hpp), so a replica
// restarted from a snapshot continues from the same t_eff.
#pragma once

#include "index/types.hpp"

namespace ic::state {

class effective_clock {
 public:
  explicit effective_clock(index::micros start = 0) : last_(start) {}
  /// Returns the effective time of the next record, stamped `stamped`, and moves to it.
  index::micros advance(index::micros stamped) {
    if (stamped > last_) last_ = stamped;
    return last_;
  }
  /// The effective time of the last record (0 before the first).
  index::micros last() const { return last_; }

 private:
  index::micros last_;
};

}  // namespace ic::state
