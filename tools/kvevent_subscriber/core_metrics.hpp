// Counters and gauges the core, receiver and sender update and the HTTP thread reads.
//
// Plain atomics in fixed arrays (per source, per reason), relaxed: a scrape may see a
// slightly old value but never a torn one. Only the binary's HTTP module renders them as
// Prometheus text (`inferencecache_adapter_*`, spec A22).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <map>
#include <string>

#include "tools/kvevent_subscriber/events.hpp"

namespace ic::kvevent {

/// A fixed-size array of relaxed atomic counters.
class counter_array {
 public:
  explicit counter_array(std::size_t n = 1) : n_(n), v_(new std::atomic<std::uint64_t>[n]) {
    for (std::size_t i = 0; i < n; ++i) v_[i] = 0;
  }
  void add(std::size_t i, std::uint64_t d = 1) {
    if (i < n_) v_[i].fetch_add(d, std::memory_order_relaxed);
  }
  void set(std::size_t i, std::uint64_t x) {
    if (i < n_) v_[i].store(x, std::memory_order_relaxed);
  }
  std::uint64_t get(std::size_t i) const { return i < n_ ? v_[i].load(std::memory_order_relaxed) : 0; }
  std::size_t size() const { return n_; }

 private:
  std::size_t n_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> v_;
};

enum class batch_drop : std::uint8_t { decode, topic, frames, count_ };
enum class replay_result : std::uint8_t { ok, partial, truncated, timeout, unavailable, count_ };
enum class event_type_label : std::uint8_t { block_stored, block_removed, all_cleared, unknown, count_ };
enum class medium_label : std::uint8_t { gpu, cpu, storage, other, count_ };
enum class resync_reason : std::uint8_t { start, overflow, outage, count_ };

const char* batch_drop_name(batch_drop r);
const char* replay_result_name(replay_result r);
const char* event_type_name(event_type_label t);
const char* medium_label_name(medium_label m);
const char* resync_reason_name(resync_reason r);

/// Every counter of the subscriber (one instance per process; or per test).
struct core_metrics {
  explicit core_metrics(std::size_t sources)
      : sources(sources),
        zmq_messages(sources),
        batches_dropped(sources * static_cast<std::size_t>(batch_drop::count_)),
        events(static_cast<std::size_t>(event_type_label::count_) * static_cast<std::size_t>(medium_label::count_)),
        events_dropped(static_cast<std::size_t>(drop_reason::count_)),
        seq_gaps(sources),
        seq_missed(sources),
        replay_requests(sources * static_cast<std::size_t>(replay_result::count_)),
        engine_restarts(sources),
        last_event_ts_ms(sources),
        last_message_ms(sources),
        residency_keys(4),
        resyncs(static_cast<std::size_t>(resync_reason::count_)) {}

  std::size_t sources;
  counter_array zmq_messages;
  counter_array batches_dropped;   ///< [source][batch_drop]
  counter_array events;            ///< [event_type_label][medium_label]
  counter_array events_dropped;    ///< [drop_reason]
  counter_array seq_gaps, seq_missed;
  counter_array replay_requests;   ///< [source][replay_result]
  counter_array engine_restarts;
  counter_array last_event_ts_ms;  ///< engine ts of the last applied batch, ms
  counter_array last_message_ms;   ///< local monotonic ms of the last message
  counter_array residency_keys;    ///< [tier] gauge
  counter_array resyncs;           ///< [resync_reason]
  std::atomic<std::uint64_t> tracked_blocks{0}, tracked_evicted{0}, hash_conflicts{0};
  std::atomic<std::uint64_t> reported_keys{0};  ///< keys of R with a reported tier

  void drop_batch(std::size_t source, batch_drop r) {
    batches_dropped.add(source * static_cast<std::size_t>(batch_drop::count_) + static_cast<std::size_t>(r));
  }
  void replay(std::size_t source, replay_result r) {
    replay_requests.add(source * static_cast<std::size_t>(replay_result::count_) + static_cast<std::size_t>(r));
  }
  std::uint64_t replay_count(std::size_t source, replay_result r) const {
    return replay_requests.get(source * static_cast<std::size_t>(replay_result::count_) + static_cast<std::size_t>(r));
  }
  std::uint64_t dropped(drop_reason r) const { return events_dropped.get(static_cast<std::size_t>(r)); }
  std::uint64_t batch_dropped(std::size_t source, batch_drop r) const {
    return batches_dropped.get(source * static_cast<std::size_t>(batch_drop::count_) + static_cast<std::size_t>(r));
  }
};

}  // namespace ic::kvevent
