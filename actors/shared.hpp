// What the runtime's actors share besides messages (runtime_shared): the coordinator's
// in-flight gauge and headroom reservation, the cross-tenant totals, the event bus, the
// published policy set and the tenant directory (with each tenant's read gate). Internal to actors/.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <caf/send.hpp>

#include "actors/deadline_timer.hpp"
#include "actors/event_bus.hpp"
#include "actors/messages.hpp"
#include "actors/protocol.hpp"
#include "actors/read_gate.hpp"
#include "index/tenant_index.hpp"
#include "state/tenant_state.hpp"

namespace ic::actors {

/// Returns the system wall clock in Unix µs (the runtime's clock unless a test injects one).
inline index::micros system_micros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// The LookupPDRoute selector's clock: a runtime's wall clock (`runtime_shared::clock`).
class wall_clock final : public topology::clock {
 public:
  explicit wall_clock(const std::function<index::micros()>& now) : now_(now) {}
  index::micros now() const override { return now_(); }
  /// Returns a steady-clock deadline on this clock (Unix µs), as read now.
  index::micros at(std::chrono::steady_clock::time_point deadline) const {
    return now() + std::chrono::duration_cast<std::chrono::microseconds>(
                       deadline - std::chrono::steady_clock::now())
                       .count();
  }

 private:
  const std::function<index::micros()>& now_;
};

/// The policy set in force, for callers that need a tenant's budget before asking (the
/// policy actor publishes every change here).
struct policy_cell {
  state::policy_ptr store;
  state::policy_ptr get() const { return std::atomic_load(&store); }
  void publish(state::policy_ptr p) { std::atomic_store(&store, std::move(p)); }
};

/// One tenant as the gateway sees it: its actor, and its state for the read fast path.
/// Whoever holds `gate` as the writer may change `st`: the actor in every handler, or a
/// gateway thread applying waiting LFU credits (`settle_credits`, tenant_actor.cpp) when
/// `try_write()` finds the gate free and no frozen read holds the tenant. A gateway thread
/// may decide a short lookup (or PD route, or GetCacheState) right on `st` while
/// `gate.try_read()` holds, and otherwise asks the actor. LFU credits of lookups decided
/// that way wait in the entry until the actor's next handler applies them (before anything
/// else it does, so every later mutation and read sees them), or are settled once
/// `settle_hits` of them wait.
struct tenant_entry {
  explicit tenant_entry(std::shared_ptr<state::tenant_state> s) : st(std::move(s)) {}
  std::shared_ptr<state::tenant_state> st;
  tenant_actor actor;
  read_gate gate;
  /// True while a frozen read (snapshot, /snapshot, per-model metric) reads `st` from the
  /// snapshot thread: credits then wait (the actor's `held_credits`). Read and written
  /// only by the gate's writer.
  bool held = false;

  /// Waiting LFU hits (and their replicas) that make a fast-path lookup settle them
  /// (`settle_credits`) rather than leave them for the actor's next handler. Bounds what
  /// waits (~24 B a hit, ~64 B a replica) without taking the gate as the writer for every
  /// lookup, which turned concurrent readers away to the actor's mailbox (docs/benchmarks.md,
  /// issue #13).
  static constexpr std::size_t settle_hits = 16384;

  /// Adds a fast-path lookup's credit (called inside `gate.try_read()`); true when the
  /// waiting hits reached `settle_hits` and none was asked to settle them yet: the caller
  /// then settles them (`settle_credits`). Below that they wait for the actor's next
  /// handler, which applies them before anything it changes or reads. A credit without hits (every lookup of a tenant that does not evict by LFU) changes
  /// nothing (`tenant_index::credit_lfu`) and is not kept.
  bool add_credit(std::vector<index::scored_replica>&& credit) {
    std::size_t hits = 0;
    for (const auto& r : credit) hits += r.hits.size();
    if (hits == 0) return false;
    hits += credit.size();  // each waiting replica costs its name too
    std::lock_guard<std::mutex> g(credit_mu_);
    if (credits_.empty()) credits_ = std::move(credit);
    else credits_.insert(credits_.end(), std::make_move_iterator(credit.begin()),
                         std::make_move_iterator(credit.end()));
    waiting_hits_ += hits;
    if (credit_sent_ || waiting_hits_ < settle_hits) return false;
    credit_sent_ = true;
    return true;
  }
  /// Takes the waiting credits (the actor, holding `gate` as the writer).
  std::vector<index::scored_replica> take_credits() {
    std::lock_guard<std::mutex> g(credit_mu_);
    credit_sent_ = false;
    waiting_hits_ = 0;
    return std::exchange(credits_, {});
  }

 private:
  std::mutex credit_mu_;
  std::vector<index::scored_replica> credits_;
  std::size_t waiting_hits_ = 0;
  bool credit_sent_ = false;
};

/// Tenant name -> tenant entry, for the gateway (written by `spawn_tenant_actor`; entries
/// live as long as the runtime, or until a reload replaces the whole map at once).
class tenant_directory {
 public:
  std::shared_ptr<tenant_entry> find(const std::string& tenant) const {
    std::shared_lock<std::shared_mutex> g(mu_);
    auto it = map_.find(tenant);
    if (it == map_.end()) return nullptr;
    return it->second;
  }
  void add(const std::string& tenant, std::shared_ptr<tenant_entry> e) {
    std::unique_lock<std::shared_mutex> g(mu_);
    map_.emplace(tenant, std::move(e));
  }
  /// Replaces every entry at once (a reload after a stream gap): a lookup finds either the
  /// old tenants or the new ones, never a mix. Returns the old entries.
  std::unordered_map<std::string, std::shared_ptr<tenant_entry>> replace(
      std::unordered_map<std::string, std::shared_ptr<tenant_entry>> next) {
    std::unique_lock<std::shared_mutex> g(mu_);
    map_.swap(next);
    return next;
  }
  std::vector<tenant_actor> all() const {
    std::shared_lock<std::shared_mutex> g(mu_);
    std::vector<tenant_actor> out;
    for (const auto& [_, e] : map_) out.push_back(e->actor);
    return out;
  }

 private:
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<tenant_entry>> map_;
};

/// What the actors share besides messages: the in-flight gauge of the coordinator's
/// dispatch, the cross-tenant totals, the event bus and the metrics probe.
struct runtime_shared {
  /// Records dispatched to tenant actors and not yet applied.
  std::atomic<std::int64_t> inflight{0};
  /// Entries those records may still add (the global cap's headroom reservation).
  std::atomic<std::int64_t> pending_growth{0};
  /// Set by the coordinator while it waits for `inflight` to reach 0.
  std::atomic<bool> wants_drain{false};
  coordinator_actor coordinator;
  /// The cross-tenant totals of the tenants in force. Read and replaced (by a reload) on
  /// the coordinator's thread only; each tenant's index points at its own generation's.
  std::shared_ptr<index::shared_facts> facts;
  /// Totals of generations a reload replaced: tenants of the old generation may still be
  /// read by a gateway thread that found them just before the swap.
  std::vector<std::shared_ptr<index::shared_facts>> retired_facts;
  /// Answers lookups of tenants that hold nothing (no actor), over `facts`; replaced with it.
  std::shared_ptr<const state::absent_tenant> absent_store;
  std::shared_ptr<const state::absent_tenant> absent() const { return std::atomic_load(&absent_store); }
  void publish_absent(std::shared_ptr<const state::absent_tenant> a) {
    std::atomic_store(&absent_store, std::move(a));
  }
  event_bus bus;
  policy_cell policies;
  /// The /topology and /templates stores: the coordinator applies their records, tenant
  /// actors and the gateway read their current snapshots.
  state::stores_ptr stores;
  tenant_directory directory;
  runtime_probe* probe = nullptr;
  deadline_timer* timer = nullptr;
  std::chrono::milliseconds test_delay{0};
  /// Replicated log only: where lookups' LFU credits wait for their journaled batch
  /// (state/credit_batch.hpp); nullptr = credit at once (RocksDB, one server).
  state::credit_batch* journaled_credits = nullptr;
  /// Replicated log with `--lfu-credit=local-off`: lookups' LFU credits are dropped.
  bool lfu_credits_off = false;
  /// The runtime's wall clock (runtime_options::clock, else system_micros).
  std::function<index::micros()> clock = system_micros;
  /// The runtime's timer clock (runtime_options::timer_clock, else the steady clock).
  std::function<std::chrono::steady_clock::time_point()> timer_clock = [] {
    return std::chrono::steady_clock::now();
  };
  state::state_options options;

  /// A tenant finished one dispatched record (after its effects are in the totals).
  void finished_one(std::int64_t growth) {
    if (growth != 0) pending_growth.fetch_sub(growth);
    if (inflight.fetch_sub(1) == 1 && wants_drain.exchange(false))
      caf::anon_send(coordinator, drained_atom::value);
  }
  /// True when nothing is in flight; otherwise `drained()` reaches the coordinator later.
  bool drained_now() {
    if (inflight.load() == 0) return true;
    wants_drain.store(true);
    return inflight.load() == 0 && wants_drain.exchange(false);
  }
};

}  // namespace ic::actors
