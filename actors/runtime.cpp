// The runtime facade: start (state::recover(), then spawn the actors of spawn.hpp), the
// asks and blocking helpers, shutdown in reverse order.
#include "actors/runtime.hpp"

#include <algorithm>
#include <atomic>
#include <future>
#include <thread>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/deadline_timer.hpp"
#include "actors/gateway_ask.hpp"
#include "actors/protocol.hpp"
#include "actors/shared.hpp"
#include "actors/spawn.hpp"
#include "actors/test_hooks.hpp"
#include "actors/replication.hpp"
#include "journal/record_log.hpp"
#include "state/recover.hpp"

namespace ic::actors {
namespace {

using steady = std::chrono::steady_clock;

/// Delivers an append result to a promise (for the blocking helpers).
class promise_sink final : public append_sink {
 public:
  void on_applied(std::size_t, const append_result& r) override { promise_.set_value(r); }
  std::future<append_result> future() { return promise_.get_future(); }

 private:
  std::promise<append_result> promise_;
};

caf::actor_system_config& configure(caf::actor_system_config& cfg, std::size_t workers,
                                    scheduler_policy policy) {
  if (workers == 0) workers = std::max<std::size_t>(2, std::thread::hardware_concurrency());
  cfg.set("scheduler.max-threads", workers);
  cfg.set("scheduler.policy", policy == scheduler_policy::stealing ? caf::atom("stealing")
                                                                   : caf::atom("sharing"));
  cfg.set("logger.verbosity", caf::atom("quiet"));
  return cfg;
}

/// The read fast path: runs `decide(st)` on this gateway thread over the tenant's state
/// when the tenant actor neither writes nor waits to write (`read_gate::try_read`), so a
/// short decision costs no message, no worker wake-up and no deadline timer, and several
/// gateway threads decide for one tenant at once. False when the gate is taken: the caller
/// asks the actor instead (queued behind the write, in order). Never blocks.
template <class Decide>
bool read_here(tenant_entry& e, Decide&& decide) {
  if (!e.gate.try_read()) return false;
  struct leave {
    read_gate& g;
    ~leave() { g.end_read(); }
  } guard{e.gate};
  decide(*e.st);
  return true;
}

}  // namespace

struct runtime::impl {
  impl(std::size_t workers, scheduler_policy policy)
      : system(configure(config, workers, policy)) {}

  caf::actor_system_config config;
  caf::actor_system system;
  std::unique_ptr<journal::record_log> log;
  /// Replicated log only: the pending sinks and the follower thread.
  std::unique_ptr<replication_link> repl;
  std::unique_ptr<stream_follower> follower;
  runtime_shared shared;
  deadline_timer timer;
  coordinator_actor coordinator;
  policy_actor policy;
  journal_actor journal;
  snapshot_actor writer;
  bool snapshot_on_stop = true;
  std::atomic<bool> shutting_down{false};
  bool stopped = false;
};

runtime::runtime(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

runtime::~runtime() { stop(); }

std::unique_ptr<runtime> runtime::start(const runtime_options& options, runtime_probe* probe,
                                        std::string* error, recovery_info* info) {
  state::recovery_options ropts;
  ropts.journal_dir = options.journal_dir;
  ropts.fsync = options.fsync;
  ropts.journal_env = options.journal_env;
  ropts.state = options.state;
  const std::function<index::micros()> clock = options.clock ? options.clock : system_micros;
  std::optional<state::recovered> rec;
  if (options.open_journal) {
    auto opened = options.open_journal();
    if (!opened.ok()) {
      if (error) *error = opened.status().to_string();
      return nullptr;
    }
    rec = state::recover(std::move(opened).value(), ropts.state, clock(), error);
  } else {
    rec = state::recover(ropts, clock(), error);
  }
  if (!rec) return nullptr;
  if (info) *info = rec->info;
  std::unique_ptr<journal::record_log> log = std::move(rec->log);
  std::unique_ptr<state::tenant_set> set = std::move(rec->set);
  const state::state_options& sopts = ropts.state;
  const state::recovery_info& rec_info = rec->info;

  // Spawn: the snapshot writer, the policy actor, one actor per recovered tenant, the
  // coordinator, and last the journal actor (inputs flow from then on).
  auto p = std::make_unique<impl>(options.workers, options.scheduler);
  p->log = std::move(log);
  p->snapshot_on_stop = options.snapshot_on_stop;
  runtime_shared& sh = p->shared;
  sh.facts = set->facts();
  sh.clock = clock;
  if (options.timer_clock) sh.timer_clock = options.timer_clock;
  sh.probe = probe;
  sh.timer = &p->timer;
  sh.test_delay = test_lookup_delay();
  sh.options = sopts;
  sh.policies.publish(set->policies());
  sh.stores = set->stores();
  sh.publish_absent(std::make_shared<state::absent_tenant>(sopts, sh.facts.get()));
  p->writer = spawn_snapshot_writer(p->system, p->log.get(),
                                    std::max<std::size_t>(1, options.snapshots_kept));
  p->policy = spawn_policy_actor(p->system, &sh);
  coordinator_config ccfg;
  ccfg.sh = &sh;
  ccfg.policy = p->policy;
  ccfg.writer = p->writer;
  ccfg.policies = set->policies();
  ccfg.snap = snapshot_policy{options.snapshot_interval, options.snapshot_every_records};
  // Replicated positions carry the record index in their low bits: the record count of
  // --snapshot-every-records then counts group commits (journal/record_log.hpp).
  if (p->log->replicated()) ccfg.snap.every_records <<= journal::record_index_bits;
  ccfg.last_applied_seq = p->log->last_position();
  ccfg.effective_time = set->effective_time();
  ccfg.last_snapshot_seq = rec_info.snapshot_seq;
  ccfg.timers_started = sh.timer_clock();
  if (p->log->replicated()) {
    p->repl = std::make_unique<replication_link>();
    p->repl->max_apply_lag = options.max_apply_lag;
    p->repl->credit_interval = options.lfu_credit_interval;
    // What recovery applied (records before a local snapshot: asked of the stream).
    p->repl->policy_applied =
        journal::record_position(p->log->scope_position(journal::policy_scope), 0);
    sh.journaled_credits = &p->repl->credits;
    sh.lfu_credits_off = options.lfu_credits_off;
    ccfg.policy_applied = &p->repl->policy_applied;
    ccfg.stamp_skew = &p->repl->stamp_skew;
  }
  for (auto& [name, t] : set->release()) {
    std::shared_ptr<state::tenant_state> shared_t(std::move(t));
    auto actor = spawn_tenant_actor(p->system, name, shared_t, &sh);
    ccfg.tenants.emplace(name, std::make_pair(actor, std::move(shared_t)));
  }
  p->coordinator = spawn_coordinator(p->system, std::move(ccfg));
  sh.coordinator = p->coordinator;
  if (p->repl) {
    p->follower = std::make_unique<stream_follower>(p->log.get(), p->repl.get(),
                                                    p->coordinator, sopts);
  }
  p->journal = spawn_journal_actor(p->system, p->log.get(), p->repl.get(), p->coordinator,
                                   probe, options.sweep_interval, clock, sh.timer_clock);
  std::unique_ptr<runtime> rt(new runtime(std::move(p)));
  // After a journal reset (--journal-reset) the halted replicas wait for a shared snapshot
  // of this state: take the local snapshot now; the log uploads it at once.
  if (rt->impl_->log->reset_through() > 0) {
    auto r = rt->snapshot_now_blocking(std::chrono::seconds(30));
    if (!r || !r->ok)
      spdlog::error("{}: the snapshot after the journal reset failed ({}); the next one "
                    "uploads it", rt->impl_->log->describe(), r ? r->error : "timed out");
  }
  return rt;
}

void runtime::append(proto::record_kind kind, std::string payload, std::shared_ptr<append_sink> sink,
                     std::size_t slot) {
  if (impl_->shutting_down.load()) {
    if (sink) sink->on_applied(slot, append_result{false, ack_reason::shutting_down, 0});
    return;
  }
  caf::anon_send(impl_->journal, append_atom::value,
                 append_msg{kind, std::move(payload), std::move(sink), slot});
}

void runtime::lookup(index::lookup_route_request request, steady::time_point deadline,
                     std::function<void(std::optional<index::lookup_route_response>)> done) {
  if (steady::now() > deadline) {
    done(std::nullopt);
    return;
  }
  runtime_shared& sh = impl_->shared;
  auto entry = sh.directory.find(request.tenant_id);
  if (!entry) {
    // No actor: the tenant holds nothing. The answer depends only on the shared totals
    // (cold-start carve-out) and the policy, so it is given here.
    auto out = sh.absent()->decide(request, sh.clock(), *sh.policies.get());
    done(std::move(out.response));
    return;
  }
  // The test hook makes every decision slow: such asks go to a worker, like large ones.
  const bool short_one = sh.test_delay.count() == 0 && short_decision(request);
  if (short_one) {
    std::optional<index::lookup_route_response> answer;
    bool wake = false;
    if (read_here(*entry, [&](state::tenant_state& st) {
          auto out = st.decide(request, sh.clock(), [deadline] { return steady::now() > deadline; });
          answer = std::move(out.response);
          if (out.credit.empty() || sh.lfu_credits_off) return;
          if (sh.journaled_credits) st.collect_credit(out.credit, *sh.journaled_credits);
          else wake = entry->add_credit(std::move(out.credit));
        })) {
      done(std::move(answer));
      if (wake) settle_credits(impl_->system, *entry);
      return;
    }
  }
  ask_tenant<lookup_call>(impl_->system, impl_->timer, entry->actor, lookup_atom::value, deadline,
                          std::move(request), std::move(done), short_one);
}

void runtime::pd_route(topology::pd_route_request request, steady::time_point deadline,
                       std::function<void(std::optional<topology::pd_route_response>)> done) {
  if (steady::now() > deadline) {
    done(std::nullopt);
    return;
  }
  runtime_shared& sh = impl_->shared;
  auto entry = sh.directory.find(request.tenant_id);
  if (!entry) {
    // No actor: the tenant holds no stats rows and no entries; the answer reads only the
    // topology, the policy and the shared totals, so it is given here.
    const wall_clock clock(sh.clock);
    done(sh.absent()->decide_pd(request, *sh.stores->topologies.current(), *sh.policies.get(),
                                  clock, clock.at(deadline)));
    return;
  }
  const bool run_here = sh.test_delay.count() == 0;
  if (run_here) {
    std::optional<topology::pd_route_response> answer;
    const wall_clock clock(sh.clock);
    if (read_here(*entry, [&](state::tenant_state& st) {
          answer = st.decide_pd(request, *sh.stores->topologies.current(), clock, clock.at(deadline));
        })) {
      done(std::move(answer));
      return;
    }
  }
  ask_tenant<pd_call>(impl_->system, impl_->timer, entry->actor, pd_route_atom::value, deadline,
                      std::move(request), std::move(done), run_here);
}

templates::render_response runtime::render(const templates::render_request& request) const {
  return templates::render(*impl_->shared.stores->templates.current(), request);
}

std::shared_ptr<const topology::topology_snapshot> runtime::topologies() const {
  return impl_->shared.stores->topologies.current();
}

std::string runtime::topology_json() const { return impl_->shared.stores->topologies.to_json(); }

std::string runtime::templates_json() const { return impl_->shared.stores->templates.to_json(); }

std::string runtime::templates_payload() const {
  return impl_->shared.stores->templates.to_bytes();
}

void runtime::cache_state(std::string tenant, std::string model, steady::time_point deadline,
                          std::function<void(std::optional<index::cache_state_view>)> done) {
  if (steady::now() > deadline) {
    done(std::nullopt);
    return;
  }
  auto entry = impl_->shared.directory.find(tenant);
  if (!entry) {
    done(index::cache_state_view{});
    return;
  }
  std::optional<index::cache_state_view> answer;
  if (read_here(*entry, [&](state::tenant_state& st) { answer = st.cache_state(model); })) {
    done(std::move(answer));
    return;
  }
  ask_tenant<state_call>(impl_->system, impl_->timer, entry->actor, cache_state_atom::value, deadline,
                         std::move(model), std::move(done), /*run_here=*/true);
}

void runtime::subscribe(std::shared_ptr<event_subscriber> subscriber) {
  impl_->shared.bus.add(std::move(subscriber), impl_->shared.probe);
}

policy::resolved_policy runtime::policy_of(const std::string& tenant) const {
  return impl_->shared.policies.get()->resolve(tenant);
}

namespace {

/// Waits for `fut` at most `timeout`; nullopt on timeout or when the answering actor
/// stopped first (shutdown).
template <class T>
std::optional<T> wait_answer(std::future<T>& fut, std::chrono::milliseconds timeout) {
  if (fut.wait_for(timeout) != std::future_status::ready) return std::nullopt;
  try {
    return fut.get();
  } catch (const std::future_error&) {
    return std::nullopt;
  }
}

/// Runs `read` over every tenant at a quiescent point (the coordinator holds dispatch and
/// LFU credits meanwhile); nullopt when it did not finish in `timeout`.
template <class T>
std::optional<T> frozen_read(const coordinator_actor& coordinator, std::chrono::milliseconds timeout,
                             std::function<T(const frozen_view&)> read) {
  auto result = std::make_shared<std::promise<T>>();
  auto fut = result->get_future();
  caf::anon_send(coordinator, read_atom::value,
                 read_job{[result, read](const frozen_view& v) { result->set_value(read(v)); }, {}});
  return wait_answer(fut, timeout);
}

}  // namespace

std::optional<index::snapshot_view> runtime::snapshot_blocking(std::chrono::milliseconds timeout) {
  return frozen_read<index::snapshot_view>(
      impl_->coordinator, timeout, [](const frozen_view& v) { return state::merge_snapshots(v.list()); });
}

std::string runtime::policy_json() const {
  return impl_->shared.policies.get()->to_json();
}

std::optional<std::vector<std::pair<std::string, std::int64_t>>>
runtime::entries_by_model_blocking(std::chrono::milliseconds timeout) {
  return frozen_read<std::vector<std::pair<std::string, std::int64_t>>>(
      impl_->coordinator, timeout,
      [](const frozen_view& v) { return state::merge_entries_by_model(v.list()); });
}

std::optional<std::vector<topology::side_members>> runtime::pd_members_blocking(
    std::chrono::milliseconds timeout) {
  auto topologies = impl_->shared.stores->topologies.current();
  if (topologies->set().topologies.empty()) return std::vector<topology::side_members>{};
  const index::micros now = impl_->shared.clock();
  return frozen_read<std::vector<topology::side_members>>(
      impl_->coordinator, timeout, [topologies, now](const frozen_view& v) {
        return topology::count_members(
            *topologies,
            [&v](std::string_view tenant) -> const index::tenant_index* {
              for (const auto& t : v.tenants)
                if (t->tenant() == tenant) return &t->index();
              return nullptr;
            },
            now);
      });
}

std::optional<std::vector<std::string>> runtime::canonical_dump_blocking(
    std::chrono::milliseconds timeout) {
  return frozen_read<std::vector<std::string>>(
      impl_->coordinator, timeout,
      [](const frozen_view& v) { return state::merge_dumps(v.list(), *v.facts); });
}

std::optional<state::probe_outcome> runtime::probe_blocking(const state::probe_request& request,
                                                     std::chrono::milliseconds timeout) {
  auto result = std::make_shared<std::promise<state::probe_outcome>>();
  auto fut = result->get_future();
  auto call = std::make_shared<probe_call>();
  call->request = request;
  call->done = [result](const state::probe_outcome& o) { result->set_value(o); };
  caf::anon_send(impl_->coordinator, probe_atom::value, std::move(call));
  return wait_answer(fut, timeout);
}

std::optional<append_result> runtime::append_blocking(proto::record_kind kind, std::string payload,
                                                      std::chrono::milliseconds timeout) {
  auto sink = std::make_shared<promise_sink>();
  auto fut = sink->future();
  append(kind, std::move(payload), sink, 0);
  return wait_answer(fut, timeout);
}

std::optional<snapshot_report> runtime::snapshot_now_blocking(std::chrono::milliseconds timeout) {
  caf::scoped_actor self{impl_->system};
  std::optional<snapshot_report> out;
  self->request(impl_->coordinator, timeout, snapnow_atom::value)
      .receive([&](snapshot_report& r) { out = std::move(r); }, [&](caf::error&) {});
  return out;
}

journal::log_stats runtime::journal_stats() const {
  journal::log_stats st = impl_->log->stats();
  if (impl_->repl) {
    st.halted = impl_->repl->halted.load();
    st.reloads = impl_->repl->reloads.load();
    st.unknown_outcomes += impl_->repl->acks_expired.load();
    st.stamp_skew_us = impl_->repl->stamp_skew.last_us();
    st.stamp_skew_over = impl_->repl->stamp_skew.over_threshold();
  }
  return st;
}

bool runtime::journal_holds_policy() const {
  return impl_->log->replicated() && impl_->log->scope_position(journal::policy_scope) != 0;
}

void runtime::begin_shutdown() { impl_->shutting_down = true; }

void runtime::stop() {
  if (!impl_ || impl_->stopped) return;
  impl_->stopped = true;
  impl_->shutting_down = true;
  // Reverse order of start: the journal actor first (its queue is empty once the gRPC
  // server drained), then a final snapshot so the next start replays nothing, then the
  // coordinator, the tenants, the policy actor and the writer, then the journal files.
  caf::anon_send_exit(impl_->journal, caf::exit_reason::user_shutdown);
  if (impl_->snapshot_on_stop) {
    auto r = snapshot_now_blocking(std::chrono::seconds(30));
    if (!r) spdlog::error("final snapshot did not finish in time");
  }
  if (impl_->follower) impl_->follower->stop();  // nothing new reaches the coordinator
  caf::anon_send_exit(impl_->coordinator, caf::exit_reason::user_shutdown);
  {
    // The coordinator may still spawn a tenant for a record queued before its exit: wait
    // until it is gone, so the directory below names every tenant actor.
    caf::scoped_actor self{impl_->system};
    self->wait_for(impl_->coordinator);
  }
  for (auto& t : impl_->shared.directory.all())
    caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(impl_->policy, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(impl_->writer, caf::exit_reason::user_shutdown);
  impl_->system.await_all_actors_done();
  if (impl_->log) {
    auto st = impl_->log->close();
    if (!st.ok()) spdlog::error("journal close: {}", st.to_string());
  }
}

}  // namespace ic::actors

