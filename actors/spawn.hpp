// How each actor kind of the runtime is started (internal to actors/; runtime.cpp wires
// them, the coordinator spawns tenant actors on a tenant's first record). One file per
// actor kind implements its behaviour: snapshot_actor.cpp, policy_actor.cpp,
// tenant_actor.cpp, coordinator.cpp, journal_actor.cpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include <caf/actor_system.hpp>

#include "actors/protocol.hpp"
#include "actors/shared.hpp"
#include "journal/record_log.hpp"
#include "state/stamp_skew.hpp"
#include "state/tenant_state.hpp"

namespace ic::actors {

/// Spawns the snapshot writer (detached: it writes snapshots and runs frozen reads on its
/// own thread), keeping the newest `keep` snapshots.
snapshot_actor spawn_snapshot_writer(caf::actor_system& sys, journal::record_log* log,
                                      std::size_t keep);

/// Spawns the policy actor (applies journaled policy pushes, broadcasts them to tenants).
policy_actor spawn_policy_actor(caf::actor_system& sys, runtime_shared* sh);

/// Spawns the actor that owns `st` (tenant `name`) from now on and enters it in
/// `sh->directory` (with its read gate) for the gateway.
tenant_actor spawn_tenant_actor(caf::actor_system& sys, const std::string& name,
                                std::shared_ptr<state::tenant_state> st, runtime_shared* sh);

/// Spawns the actor that owns `st` from now on, without entering it in the directory (a
/// reload enters a whole new generation at once: tenant_directory::replace).
std::shared_ptr<tenant_entry> spawn_tenant_entry(caf::actor_system& sys,
                                                std::shared_ptr<state::tenant_state> st,
                                                runtime_shared* sh);

/// Applies the LFU credits fast-path lookups left in `e` (after one found `add_credit`
/// true: `tenant_entry::settle_hits` of them wait): right here when the gate is free and no frozen read holds the tenant, else by one
/// `credit` message to the tenant actor. Called by gateway threads, outside the gate.
void settle_credits(caf::actor_system& sys, tenant_entry& e);

/// When the coordinator takes snapshots.
struct snapshot_policy {
  std::chrono::nanoseconds interval{};
  std::uint64_t every_records = 0;
};

/// What the coordinator starts with.
struct coordinator_config {
  runtime_shared* sh = nullptr;
  policy_actor policy;
  snapshot_actor writer;
  state::policy_ptr policies;
  std::map<std::string, std::pair<tenant_actor, std::shared_ptr<state::tenant_state>>> tenants;
  snapshot_policy snap;
  std::uint64_t last_applied_seq = 0;
  /// t_eff of the record at last_applied_seq (state/effective_clock.hpp; recovery's).
  index::micros effective_time = 0;
  /// Replicated log only: where the coordinator notes the position of each policy record
  /// it applied (replication_link::policy_applied); nullptr otherwise.
  std::atomic<std::uint64_t>* policy_applied = nullptr;
  /// Replicated log only: the clock cross-check (replication_link::stamp_skew); nullptr
  /// otherwise.
  state::stamp_skew* stamp_skew = nullptr;
  std::uint64_t last_snapshot_seq = 0;
  /// When the snapshot interval starts counting (the timer clock, read in runtime::start: the
  /// actor's first activation may come later).
  std::chrono::steady_clock::time_point timers_started{};
};

/// Spawns the coordinator (journal order, the exact global cap, snapshots, quiescent reads).
coordinator_actor spawn_coordinator(caf::actor_system& sys, coordinator_config cfg);

/// Spawns the journal actor (detached: group commit on its own thread); it journals a TTL
/// sweep every `sweep_interval`, stamps records with `clock` and hands committed batches to
/// `coordinator` — or, with `repl` (replicated log), only publishes them (the stream
/// follower of actors/replication.hpp applies what comes back).
struct replication_link;
journal_actor spawn_journal_actor(
    caf::actor_system& sys, journal::record_log* log, replication_link* repl,
    coordinator_actor coordinator, runtime_probe* probe, std::chrono::nanoseconds sweep_interval,
    std::function<index::micros()> clock,
    std::function<std::chrono::steady_clock::time_point()> timer_clock);

}  // namespace ic::actors
