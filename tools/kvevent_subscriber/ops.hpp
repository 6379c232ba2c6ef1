// The ordered operation log between the core (producer) and the sender (consumer), A16.
//
// An operation is one RPC: `add`/`t2` = one `CacheStateUpdate` on its own ReportCacheState
// stream (t2 is an inferred-T2 report kept in its own CSU at the eviction ts), `evict` =
// PublishEvent(PREFIX_EVICTED), `clear` = PublishEvent(ALL_CLEARED). The log is strict FIFO:
// the sender sends an operation only after every earlier one was acknowledged, which keeps
// the per-replica order without tracking keys. It is bounded by `--max-pending-ops`; on
// overflow the whole log is discarded and `resync_needed` is set (A16): while it is set
// the core keeps its tables current but queues nothing, and the next successful delivery
// leads to a resync (A18) that rebuilds the server's view from the residency table.
//
// Adapter names are interned in an append-only `adapter_registry` (index 0 = ""), so an
// entry is 16 bytes and both threads can resolve an index without copying strings.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace ic::kvevent {

/// Residency tiers, numbered as the contract's CacheTier (0 = absent).
enum class tier : std::uint8_t { absent = 0, t1 = 1, t2 = 2, t3 = 3 };

/// One PrefixEntry of an ADD: legacy form (prefix hash + cumulative tokens, no chain).
struct prefix_add {
  std::uint64_t fp = 0;
  std::uint32_t tokens = 0;
  std::uint16_t adapter = 0;
  tier t = tier::t1;
};

enum class op_type : std::uint8_t { add, t2, evict, clear };

/// One RPC to send, in log order.
struct op {
  op_type type = op_type::add;
  std::int64_t ts_us = 0;
  std::vector<prefix_add> entries;  ///< add / t2
  std::uint64_t fp = 0;             ///< evict
  std::uint16_t adapter = 0;        ///< evict
};

/// Append-only adapter-name table shared by the core and the sender (thread-safe).
class adapter_registry {
 public:
  adapter_registry() { names_.push_back(""); index_.emplace("", 0); }
  /// Returns the index of `name`, adding it when new.
  std::uint16_t intern(const std::string& name);
  /// Returns the name of index `i` ("" when out of range).
  std::string name(std::uint16_t i) const;

 private:
  mutable std::mutex mu_;
  std::deque<std::string> names_;
  std::unordered_map<std::string, std::uint16_t> index_;
};

/// The bounded FIFO of operations (thread-safe; one producer, one consumer).
class op_log {
 public:
  explicit op_log(std::size_t max_ops) : max_ops_(max_ops) {}

  /// Appends `o`. False when it was not queued: the log overflowed now (it is discarded
  /// and `resync_needed` set) or is waiting for a resync.
  bool push(op o);

  /// Waits until an operation is available or `timeout` passes; moves it into `out`.
  bool pop(op& out, std::chrono::milliseconds timeout);

  /// Replaces the whole log by `ops` (a resync), clears `resync_needed` and bumps the
  /// generation the sender waits on.
  void replace(std::vector<op> ops);

  /// Discards everything queued (counted as dropped) and sets `resync_needed`.
  void overflow();

  std::size_t size() const;
  bool resync_needed() const { return resync_needed_.load(); }
  std::uint64_t generation() const { return generation_.load(); }
  std::uint64_t dropped() const { return dropped_.load(); }

  /// Wakes a waiting pop (shutdown).
  void wake();

 private:
  std::size_t max_ops_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<op> q_;
  std::atomic<bool> resync_needed_{false};
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<std::uint64_t> dropped_{0};
};

}  // namespace ic::kvevent
