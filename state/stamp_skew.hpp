// The clock cross-check of spec/scaleout.md §3.4. A replicated record carries two times:
// the stamp its producer journaled it at (`applied_at_us`, that replica's wall clock) and
// the time the stream stored it (set by the stream leader). Records apply at t_eff (the
// stamps, state/effective_clock.hpp), never at the stream's time, so a producer whose clock
// runs fast pulls TTL time forward for everyone: this is how an operator sees it. The
// coordinator observes the first stamped record of each batch it applies; the metrics
// (`inferencecache_journal_stamp_skew_seconds`, `_stamp_skew_over_1s_total`) read it from
// any thread. A batch published late (same-id retries across a NATS outage) counts too.
#pragma once

#include <atomic>
#include <cstdint>

#include "index/types.hpp"

namespace ic::state {

class stamp_skew {
 public:
  /// Batches whose two times differ by more than this are counted (spec §3.4: 1 s).
  static constexpr index::micros threshold_us = 1'000'000;

  /// Notes one batch: stored at `stored_at_ns` (ns since the epoch; <= 0 = unknown, ignored)
  /// and stamped `stamp_us` by its producer (<= 0 = none, ignored).
  void observe(std::int64_t stored_at_ns, index::micros stamp_us) {
    if (stored_at_ns <= 0 || stamp_us <= 0) return;
    const std::int64_t skew = stored_at_ns / 1000 - stamp_us;
    last_us_.store(skew, std::memory_order_relaxed);
    if (skew > threshold_us || skew < -threshold_us) over_.fetch_add(1, std::memory_order_relaxed);
  }
  /// Stream time minus stamp of the last observed batch, in µs (0 before the first):
  /// negative when its producer's clock ran ahead of the stream leader's.
  std::int64_t last_us() const { return last_us_.load(std::memory_order_relaxed); }
  /// Observed batches whose times differed by more than `threshold_us`.
  std::uint64_t over_threshold() const { return over_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> last_us_{0};
  std::atomic<std::uint64_t> over_{0};
};

}  // namespace ic::state
