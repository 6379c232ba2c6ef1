#include "actors/runtime.hpp"

#include <algorithm>
#include <atomic>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <unordered_map>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/deadline_timer.hpp"
#include "actors/protocol.hpp"
#include "state/snapshot_io.hpp"
#include "state/tenant_state.hpp"
#include "actors/test_hooks.hpp"
#include "journal/log.hpp"

namespace ic::actors {
namespace {

using steady = std::chrono::steady_clock;

index::micros now_micros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Installs the fail-fast policy of the runtime's stateful actors: an exception escaping a
/// handler would silently kill the actor (later inputs would be journaled but never applied,
/// and reactors waiting for them would hang), so log it and abort; the next start recovers
/// everything acknowledged from the journal.
template <class Self>
void fail_fast_on_exceptions(Self* self, const char* name) {
  self->set_exception_handler([name](caf::scheduled_actor*, std::exception_ptr& eptr) -> caf::error {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(eptr);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    spdlog::critical("{} actor failed: {}; aborting (restart recovers from the journal)", name, what);
    spdlog::default_logger_raw()->flush();
    std::abort();
  });
}

/// The policy set in force, for callers that need a tenant's budget before asking (the
/// policy actor publishes every change here).
struct policy_cell {
  state::policy_ptr store;
  state::policy_ptr get() const { return std::atomic_load(&store); }
  void publish(state::policy_ptr p) { std::atomic_store(&store, std::move(p)); }
};

/// StreamCacheEvents subscribers. Tenant actors publish their changes here (each tenant's
/// changes from its one actor, so per-tenant order holds); offers never block.
class event_bus {
 public:
  void add(subscriber_ptr sub, runtime_probe* probe) {
    std::lock_guard<std::mutex> g(mu_);
    prune_locked(probe);
    subs_.push_back(std::move(sub));
    active_.store(true, std::memory_order_release);
  }
  /// True while anyone listens (tenant actors skip change logging otherwise).
  bool active() const { return active_.load(std::memory_order_acquire); }
  /// Drops ended subscribers, also those whose filter never matches again.
  void prune(runtime_probe* probe) {
    if (!active()) return;
    std::lock_guard<std::mutex> g(mu_);
    prune_locked(probe);
  }
  void publish(const index::change_log& changes, runtime_probe* probe) {
    if (changes.empty()) return;
    std::lock_guard<std::mutex> g(mu_);
    for (const auto& c : changes) {
      for (auto& sub : subs_) {
        if (sub && sub->filter().matches(c) && !sub->offer(c)) drop(sub, probe);
      }
    }
    prune_locked(probe);
  }

 private:
  static void drop(subscriber_ptr& sub, runtime_probe* probe) {
    if (sub && sub->overflowed() && probe) probe->on_subscriber_dropped();
    sub.reset();
  }
  void prune_locked(runtime_probe* probe) {
    for (auto& sub : subs_)
      if (sub && !sub->alive()) drop(sub, probe);
    subs_.erase(std::remove(subs_.begin(), subs_.end(), nullptr), subs_.end());
    active_.store(!subs_.empty(), std::memory_order_release);
  }

  std::mutex mu_;
  std::vector<subscriber_ptr> subs_;
  std::atomic<bool> active_{false};
};

/// Tenant name -> tenant actor, for the gateway's asks (written by the coordinator).
class tenant_directory {
 public:
  std::optional<tenant_actor> find(const std::string& tenant) const {
    std::shared_lock<std::shared_mutex> g(mu_);
    auto it = map_.find(tenant);
    if (it == map_.end()) return std::nullopt;
    return it->second;
  }
  void add(const std::string& tenant, tenant_actor a) {
    std::unique_lock<std::shared_mutex> g(mu_);
    map_.emplace(tenant, std::move(a));
  }
  std::vector<tenant_actor> all() const {
    std::shared_lock<std::shared_mutex> g(mu_);
    std::vector<tenant_actor> out;
    for (const auto& [_, a] : map_) out.push_back(a);
    return out;
  }

 private:
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, tenant_actor> map_;
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
  std::shared_ptr<index::shared_facts> facts;
  event_bus bus;
  policy_cell policies;
  tenant_directory directory;
  runtime_probe* probe = nullptr;
  deadline_timer* timer = nullptr;
  std::chrono::milliseconds test_delay{0};
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

void log_snapshot(const snapshot_report& r) {
  if (r.ok)
    spdlog::info("snapshot written: covers seq {}, {} bytes, {:.3f} s; journal truncated", r.covering_seq,
                 r.bytes, r.seconds);
  else
    spdlog::error("snapshot covering seq {} failed: {}", r.covering_seq, r.error);
}

// ------------------------------------------------------------------------ gateway hand-off

/// Messages an idle actor processes on the asking thread before handing it back: only the
/// ask itself. The asker's own answer leaves only when its handler returns, so anything
/// queued behind the ask (an apply, a sweep slice) must run on a worker, not here.
constexpr std::size_t inline_throughput = 1;

/// The execution unit of a gateway thread that asks a tenant actor. When the ask wakes an
/// idle actor, CAF hands the actor to the sender's execution unit (`exec_later`); this unit
/// runs it right here for one message instead of waking a scheduler worker (a cross-core
/// wake-up costs 10+ µs on a small VM, several times the lookup itself). The actor's
/// mailbox stays exclusive (CAF lets exactly one thread resume it), so this changes which
/// thread runs the handler, never the actor semantics. Anything else that becomes runnable
/// meanwhile, and an actor with more mail, goes to the scheduler as usual.
class gateway_unit final : public caf::execution_unit {
 public:
  void exec_later(caf::resumable* job) override {
    if (running_) {
      system().scheduler().enqueue(job);
      return;
    }
    running_ = true;
    const auto res = job->resume(this, inline_throughput);
    running_ = false;
    switch (res) {
      case caf::resumable::resume_later:
        system().scheduler().enqueue(job);  // keeps the reference
        break;
      default:
        caf::intrusive_ptr_release(job);
        break;
    }
  }
  /// Returns this thread's unit for `sys`.
  static gateway_unit& of(caf::actor_system& sys) {
    thread_local gateway_unit unit;
    if (!unit.running_) unit.system_ = &sys;  // never retarget a unit that is running
    return unit;
  }

 private:
  bool running_ = false;
};

/// Sends `xs` to `dest` from a gateway thread (see `gateway_unit`).
template <class Handle, class... Ts>
void ask_from_gateway(caf::actor_system& sys, const Handle& dest, Ts&&... xs) {
  auto* actor = caf::actor_cast<caf::abstract_actor*>(dest);
  actor->enqueue(caf::make_mailbox_element(nullptr, caf::make_message_id(), {},
                                           std::forward<Ts>(xs)...),
                 &gateway_unit::of(sys));
}

/// Asks a tenant actor with a deadline. The timer is armed first. `run_here` lets an idle
/// actor answer on this thread (gateway_unit); gRPC sends an answer given inside the handler
/// only when the handler returns, so only asks whose decision is certain to be short may
/// run here — a long one would hold its own answer past the deadline.
template <class Call, class Atom, class Question, class Done>
void ask_tenant(caf::actor_system& sys, deadline_timer& timer, const tenant_actor& actor, Atom atom,
                std::chrono::steady_clock::time_point deadline, Question question, Done done,
                bool run_here) {
  auto call = std::make_shared<Call>();
  call->deadline = deadline;
  call->question = std::move(question);
  call->done = std::move(done);
  timer.schedule(call);
  if (run_here) {
    ask_from_gateway(sys, actor, atom, std::move(call));
  } else {
    caf::anon_send(actor, atom, std::move(call));
  }
}

/// Lookups small enough to decide on the gateway thread (well under a millisecond: a
/// 4096-block chain walk, or fingerprinting 64 Ki tokens).
bool short_decision(const index::lookup_route_request& r) {
  return r.block_hashes.size() <= 4096 && r.block_token_counts.size() <= 4096 &&
         r.token_ids.size() <= 65536;
}

// ------------------------------------------------------------------------- snapshot writer

snapshot_actor::behavior_type snapshot_actor_impl(snapshot_actor::pointer, journal::log* log,
                                                  std::size_t keep) {
  return {
      [=](snapwrite_atom, snapshot_job& job) -> snapshot_report {
        const auto t0 = steady::now();
        snapshot_report r;
        r.covering_seq = job.covering_seq;
        auto fail = [&](const journal::status& st) {
          r.ok = false;
          r.error = st.to_string();
          return r;
        };
        auto writer = log->begin_snapshot(job.covering_seq);
        if (!writer.ok()) return fail(writer.status());
        journal::status add_error = journal::status::success();
        const bool ok = state::write_state_snapshot(*job.view.policies, job.view.list(), [&](std::string_view c) {
          r.bytes += c.size();
          add_error = writer->add_chunk(c);
          return add_error.ok();
        });
        if (!ok) return fail(add_error);
        auto info = writer->finish();
        if (!info.ok()) return fail(info.status());
        if (auto pruned = log->prune_snapshots(keep); !pruned.ok()) return fail(pruned.status());
        if (auto st = log->truncate_through(job.covering_seq); !st.ok()) return fail(st);
        r.ok = true;
        r.seconds = std::chrono::duration<double>(steady::now() - t0).count();
        return r;
      },
      [](read_atom, read_job& job) -> bool {
        job.run(job.view);
        return true;
      },
  };
}

// ---------------------------------------------------------------------------- policy actor

policy_actor::behavior_type policy_actor_impl(policy_actor::pointer self, runtime_shared* sh) {
  fail_fast_on_exceptions(self, "policy");
  return {
      [=](policy_atom, policy_change& change) -> policy_reply {
        policy_reply reply;
        auto set = policy::policy_store::from_bytes(change.canonical_json);
        if (!set.has_value()) {
          reply.ok = false;
          reply.error = set.error();
          reply.policies = sh->policies.get();
          return reply;
        }
        auto next = std::make_shared<policy::policy_store>(*sh->policies.get());
        next->apply(set.value());
        reply.policies = std::move(next);
        // Tenants hear of it before the coordinator dispatches anything newer (it waits for
        // this reply), so every tenant applies the change in journal order.
        for (auto& t : change.tenants) self->send(t, policy_atom::value, reply.policies);
        sh->policies.publish(reply.policies);
        return reply;
      },
  };
}

// ---------------------------------------------------------------------------- tenant actor

/// Key slots per TTL sweep slice (~0.3 ms); lookups are answered between slices.
constexpr std::size_t sweep_slice_keys = 65536;

struct tenant_actor_state {
  std::shared_ptr<state::tenant_state> st;
  runtime_shared* sh = nullptr;
  index::change_log changes;
  /// LFU credits wait here while a frozen read runs.
  bool held = false;
  std::vector<index::scored_replica> held_credits;
  /// A sweep in slices; mutations that arrive meanwhile wait in `deferred`, in order.
  bool sweeping = false;
  index::cache_index::sweep_cursor cursor;
  index::micros sweep_at = 0;
  index::sweep_result sweep_result;
  std::deque<std::function<void()>> deferred;
};

using tenant_pointer = tenant_actor::stateful_pointer<tenant_actor_state>;

index::change_log* change_sink(tenant_actor_state& s) {
  s.changes.clear();
  if (!s.sh->bus.active()) return nullptr;
  s.sh->bus.prune(s.sh->probe);
  return s.sh->bus.active() ? &s.changes : nullptr;
}

void publish(tenant_actor_state& s) {
  if (s.changes.empty()) return;
  s.sh->bus.publish(s.changes, s.sh->probe);
  if (s.changes.capacity() > (std::size_t{1} << 16)) index::change_log().swap(s.changes);
  s.changes.clear();
}

void run_deferred(tenant_actor_state& s) {
  while (!s.sweeping && !s.deferred.empty()) {
    auto work = std::move(s.deferred.front());
    s.deferred.pop_front();
    work();
  }
}

void apply_record(tenant_pointer self, tenant_record& r) {
  auto& s = self->state;
  index::change_log* changes = change_sink(s);
  append_result ack;
  ack.seq = r.seq;
  index::ingest_result ingest;
  index::micros ts = r.rec.applied_at_us;
  if (auto* u = std::get_if<index::cache_state_update>(&r.rec.payload)) {
    ingest = s.st->ingest(*u, r.rec.applied_at_us, changes);
    if (u->timestamp_us != 0) ts = u->timestamp_us;
  } else if (auto* e = std::get_if<index::cache_event>(&r.rec.payload)) {
    s.st->apply_event(*e, r.rec.applied_at_us, changes);
  }
  publish(s);
  if (r.exclusive) {
    // The coordinator runs the global cap, then answers the sink and the metrics.
    self->send(s.sh->coordinator, exclusive_done_atom::value, exclusive_done{std::move(r), ingest, ts});
    s.sh->finished_one(0);
    return;
  }
  if (s.sh->probe && std::holds_alternative<index::cache_state_update>(r.rec.payload))
    s.sh->probe->on_ingest(s.st->tenant(), ingest);
  ack.reason_code = std::string(ingest.first_drop_reason);
  if (r.sink) r.sink->on_applied(r.slot, ack);
  s.sh->finished_one(r.growth);
}

void sweep_slice(tenant_pointer self) {
  auto& s = self->state;
  index::change_log* changes = change_sink(s);
  const bool done = s.st->sweep_step(s.sweep_at, s.cursor, sweep_slice_keys, changes, s.sweep_result);
  publish(s);
  if (!done) {
    self->send(self, sweep_more_atom::value);
    return;
  }
  s.sweeping = false;
  if (s.sh->probe) s.sh->probe->on_sweep(s.sweep_result);
  s.sh->finished_one(0);
  run_deferred(s);
}

void start_sweep(tenant_pointer self, index::micros at) {
  auto& s = self->state;
  s.sweeping = true;
  s.cursor = {};
  s.sweep_at = at;
  s.sweep_result = {};
  sweep_slice(self);
}

void give_credit(tenant_actor_state& s, std::vector<index::scored_replica>& credit) {
  if (credit.empty()) return;
  if (s.held) {
    s.held_credits.insert(s.held_credits.end(), std::make_move_iterator(credit.begin()),
                          std::make_move_iterator(credit.end()));
  } else {
    s.st->credit(credit);
  }
}

tenant_actor::behavior_type tenant_actor_impl(tenant_pointer self, std::shared_ptr<state::tenant_state> st,
                                              runtime_shared* sh) {
  fail_fast_on_exceptions(self, "tenant");
  self->state.st = std::move(st);
  self->state.sh = sh;
  return {
      [=](apply_atom, tenant_record& r) {
        if (self->state.sweeping) {
          auto held = std::make_shared<tenant_record>(std::move(r));
          self->state.deferred.emplace_back([self, held] { apply_record(self, *held); });
          return;
        }
        apply_record(self, r);
      },
      [=](sweep_atom, sweep_order order) {
        if (self->state.sweeping) {
          self->state.deferred.emplace_back([self, order] { start_sweep(self, order.at); });
          return;
        }
        start_sweep(self, order.at);
      },
      [=](sweep_more_atom) { sweep_slice(self); },
      [=](policy_atom, state::policy_ptr& p) {
        if (self->state.sweeping) {
          self->state.deferred.emplace_back([self, p] { self->state.st->set_policies(p); });
          return;
        }
        self->state.st->set_policies(std::move(p));
      },
      [=](probe_atom, probe_call_ptr& call) {
        auto run = [self, call] {
          call->done(self->state.st->probe(call->request, now_micros()));
          self->state.sh->finished_one(0);
        };
        if (self->state.sweeping) {
          self->state.deferred.emplace_back(run);
          return;
        }
        run();
      },
      [=](lookup_atom, lookup_call_ptr& call) {
        if (call->claimed.load()) return;  // the deadline answered already
        auto& s = self->state;
        if (s.sh->test_delay.count() > 0) std::this_thread::sleep_for(s.sh->test_delay);
        const auto deadline = call->deadline;
        state::lookup_outcome out =
            s.st->decide(call->question, now_micros(), [deadline] { return steady::now() > deadline; });
        if (!call->claim()) return;  // TIMEOUT was delivered: no LFU credit
        // The timer keeps the call until its deadline: keep only the shell there.
        call->question = {};
        s.sh->timer->note_settled();
        std::exchange(call->done, nullptr)(std::move(out.response));
        give_credit(s, out.credit);
      },
      [=](cache_state_atom, state_call_ptr& call) {
        if (call->claimed.load()) return;
        auto view = self->state.st->cache_state(call->question);
        if (!call->claim()) return;
        self->state.sh->timer->note_settled();
        std::exchange(call->done, nullptr)(std::move(view));
      },
      [=](caphead_atom) { return cap_head_reply{self->state.st->cap_victim()}; },
      [=](capevict_atom, const cap_order& order) {
        auto& s = self->state;
        index::change_log* changes = change_sink(s);
        index::ingest_result r;
        s.st->evict_cap(order.bound, order.max, order.ts, changes, r);
        publish(s);
        return cap_evicted{r.cap_evicted_lru, r.cap_evicted_lfu, s.st->cap_victim()};
      },
      [=](hold_atom) {
        self->state.held = true;
        return true;
      },
      [=](release_atom) {
        auto& s = self->state;
        s.held = false;
        if (!s.held_credits.empty()) {
          s.st->credit(s.held_credits);
          s.held_credits.clear();
        }
      },
  };
}

// ----------------------------------------------------------------------------- coordinator

/// When the coordinator takes snapshots.
struct snapshot_policy {
  std::chrono::nanoseconds interval{};
  std::uint64_t every_records = 0;
};

struct coordinator_config {
  runtime_shared* sh = nullptr;
  policy_actor policy;
  snapshot_actor writer;
  state::policy_ptr policies;
  std::map<std::string, std::pair<tenant_actor, std::shared_ptr<state::tenant_state>>> tenants;
  snapshot_policy snap;
  std::uint64_t last_applied_seq = 0;
  std::uint64_t last_snapshot_seq = 0;
};

/// A committed record waiting for dispatch, or a probe queued behind the records.
struct queued {
  tenant_record record;
  probe_call_ptr probe;
};

/// A quiescent-point job: a snapshot (with its waiters) or a frozen read.
struct quiet_job {
  bool snapshot = false;
  read_job read;
  std::vector<caf::typed_response_promise<snapshot_report>> waiters;
};

enum class phase { running, draining, exclusive, policy, quiet };

struct coordinator_state : coordinator_config {
  std::deque<queued> queue;
  std::deque<quiet_job> jobs;
  phase now = phase::running;
  // The exclusive update being capped.
  std::optional<exclusive_done> excl;
  std::map<std::string, std::optional<index::cap_head>> heads;
  std::size_t heads_pending = 0;
  std::size_t holds_pending = 0;
  steady::time_point last_snapshot_at = steady::now();
  steady::time_point snapshot_backoff_until{};
};

/// True when a snapshot is queued or running (a job stays at the front until it finished).
bool snapshot_pending(const coordinator_state& s) {
  return std::any_of(s.jobs.begin(), s.jobs.end(), [](const quiet_job& j) { return j.snapshot; });
}

using coordinator_pointer = coordinator_actor::stateful_pointer<coordinator_state>;

void pump(coordinator_pointer self);

tenant_actor& ensure_tenant(coordinator_pointer self, const std::string& name) {
  auto& s = self->state;
  auto it = s.tenants.find(name);
  if (it != s.tenants.end()) return it->second.first;
  auto st = std::make_shared<state::tenant_state>(name, s.sh->options, s.sh->facts.get(), s.policies);
  auto actor = self->system().spawn(tenant_actor_impl, st, s.sh);
  s.sh->directory.add(name, actor);
  return s.tenants.emplace(name, std::make_pair(actor, std::move(st))).first->second.first;
}

std::vector<tenant_actor> tenant_actors(const coordinator_state& s) {
  std::vector<tenant_actor> out;
  for (const auto& [_, t] : s.tenants) out.push_back(t.first);
  return out;
}

void ack(const tenant_record& r, std::string reason = {}) {
  if (r.sink) r.sink->on_applied(r.slot, append_result{true, std::move(reason), r.seq});
}

/// Ends the exclusive update: answers its sink and the metrics, resumes dispatch.
void finish_exclusive(coordinator_pointer self) {
  auto& s = self->state;
  exclusive_done done = std::move(*s.excl);
  s.excl.reset();
  if (s.sh->probe) {
    const auto& u = std::get<index::cache_state_update>(done.item.rec.payload);
    s.sh->probe->on_ingest(u.tenant_id, done.result);
  }
  ack(done.item, std::string(done.result.first_drop_reason));
  s.now = phase::running;
  pump(self);
}

/// One step of the cap merge: the tenant whose next victim is first evicts while it stays
/// before every other tenant's next victim (the order of state::enforce_cap in state::tenant_state.cpp).
void evict_next(coordinator_pointer self) {
  auto& s = self->state;
  const std::int64_t excess = state::cap_excess(*s.sh->facts, s.sh->options.max_entries);
  const std::string* best = nullptr;
  std::optional<index::cap_head> bound;
  for (const auto& [name, h] : s.heads) {
    if (!h) continue;
    if (best == nullptr || index::cap_before(*h, *s.heads[*best])) {
      if (best != nullptr && (!bound || index::cap_before(*s.heads[*best], *bound)))
        bound = s.heads[*best];
      best = &name;
    } else if (!bound || index::cap_before(*h, *bound)) {
      bound = h;
    }
  }
  if (excess <= 0 || best == nullptr) {
    finish_exclusive(self);
    return;
  }
  const std::string name = *best;
  self->request(s.tenants[name].first, caf::infinite, capevict_atom::value,
                cap_order{bound, excess, s.excl->ts})
      .then([=](cap_evicted& e) {
        auto& st = self->state;
        st.excl->result.cap_evicted_lru += e.lru;
        st.excl->result.cap_evicted_lfu += e.lfu;
        st.heads[name] = std::move(e.next);
        if (e.lru + e.lfu == 0) {
          finish_exclusive(self);
          return;
        }
        evict_next(self);
      });
}

/// The tenant applied an exclusive update; nothing else is in flight. Runs the global cap.
void on_exclusive_done(coordinator_pointer self, exclusive_done& done) {
  auto& s = self->state;
  s.excl = std::move(done);
  if (state::cap_excess(*s.sh->facts, s.sh->options.max_entries) == 0) {
    finish_exclusive(self);
    return;
  }
  s.heads.clear();
  s.heads_pending = 0;
  for (auto& [name, t] : s.tenants) {
    if (name == index::reserved_tenant) continue;
    ++s.heads_pending;
    const std::string tenant = name;
    self->request(t.first, caf::infinite, caphead_atom::value).then([=](cap_head_reply& r) {
      self->state.heads[tenant] = std::move(r.head);
      if (--self->state.heads_pending == 0) evict_next(self);
    });
  }
  if (s.heads_pending == 0) finish_exclusive(self);
}

void release_all(coordinator_pointer self) {
  for (auto& [_, t] : self->state.tenants) self->send(t.first, release_atom::value);
}

void finish_job(coordinator_pointer self) {
  release_all(self);
  self->state.jobs.pop_front();
  self->state.now = phase::running;
  pump(self);
}

/// Every tenant as it stands now (call only at a quiescent point).
frozen_view view_of(const coordinator_state& s) {
  frozen_view v{s.policies, s.sh->facts, {}};
  for (const auto& [_, t] : s.tenants) v.tenants.push_back(t.second);
  return v;
}

/// Every tenant holds its credits and nothing is in flight: run the front job.
void run_job(coordinator_pointer self) {
  auto& s = self->state;
  quiet_job& job = s.jobs.front();
  if (!job.snapshot) {
    job.read.view = view_of(s);
    self->request(s.writer, caf::infinite, read_atom::value, std::move(job.read))
        .then([=](bool) { finish_job(self); }, [=](caf::error&) { finish_job(self); });
    return;
  }
  if (s.last_applied_seq == s.last_snapshot_seq) {
    snapshot_report r;
    r.ok = true;
    r.skipped = true;
    r.covering_seq = s.last_snapshot_seq;
    for (auto& w : job.waiters) w.deliver(r);
    finish_job(self);
    return;
  }
  snapshot_job sj{s.last_applied_seq, view_of(s)};
  s.last_snapshot_at = steady::now();
  auto finished = [=](snapshot_report r) {
    auto& st = self->state;
    if (r.ok) {
      st.last_snapshot_seq = r.covering_seq;
    } else {
      // Do not retry on every batch: wait an interval (at least a minute) first.
      st.snapshot_backoff_until =
          steady::now() + std::max<steady::duration>(
                              std::chrono::minutes(1),
                              std::chrono::duration_cast<steady::duration>(st.snap.interval));
    }
    log_snapshot(r);
    for (auto& w : st.jobs.front().waiters) w.deliver(r);
    finish_job(self);
  };
  self->request(s.writer, caf::infinite, snapwrite_atom::value, std::move(sj))
      .then([=](snapshot_report& r) { finished(r); },
            [=](caf::error& err) {
              snapshot_report r;
              r.covering_seq = self->state.last_applied_seq;
              r.error = "snapshot writer: " + caf::to_string(err);
              finished(r);
            });
}

/// Drained: tell every tenant to hold its LFU credits, then run the front job.
void start_job(coordinator_pointer self) {
  auto& s = self->state;
  s.now = phase::quiet;
  s.holds_pending = s.tenants.size();
  if (s.holds_pending == 0) {
    run_job(self);
    return;
  }
  for (auto& [_, t] : s.tenants) {
    self->request(t.first, caf::infinite, hold_atom::value).then([=](bool) {
      if (--self->state.holds_pending == 0) run_job(self);
    });
  }
}

void queue_snapshot(coordinator_pointer self, caf::typed_response_promise<snapshot_report>* waiter) {
  auto& s = self->state;
  // A snapshot that has not started yet serves every request made before it starts.
  for (std::size_t i = 0; i < s.jobs.size(); ++i) {
    const bool started = i == 0 && s.now == phase::quiet;
    if (s.jobs[i].snapshot && !started) {
      if (waiter) s.jobs[i].waiters.push_back(*waiter);
      return;
    }
  }
  quiet_job job;
  job.snapshot = true;
  if (waiter) job.waiters.push_back(*waiter);
  s.jobs.push_back(std::move(job));
}

/// Dispatches one queued item; false when dispatch must stop (a barrier was entered).
bool dispatch_front(coordinator_pointer self) {
  auto& s = self->state;
  queued& q = s.queue.front();
  runtime_shared& sh = *s.sh;
  if (q.probe) {
    auto& t = ensure_tenant(self, std::string(index::reserved_tenant));
    sh.inflight.fetch_add(1);
    self->send(t, probe_atom::value, std::move(q.probe));
    s.queue.pop_front();
    return true;
  }
  tenant_record& r = q.record;
  auto& payload = r.rec.payload;
  if (auto* u = std::get_if<index::cache_state_update>(&payload)) {
    auto& t = ensure_tenant(self, u->tenant_id);
    const std::int64_t growth = u->tenant_id == index::reserved_tenant ? 0 : state::max_growth(*u);
    const std::int64_t cap = sh.options.max_entries;
    // Far from the cap (even if every update in flight adds all it names) no update can
    // trigger it, so tenants apply concurrently. Otherwise — and whenever the index is
    // already over the cap, e.g. after a restart with a lower cap — this update is applied
    // alone and the cap merged over the tenants, as the serial replay does.
    if (cap > 0 && sh.pending_growth.load() + sh.facts->nonreserved_entries.load() + growth > cap) {
      if (!sh.drained_now()) {
        s.now = phase::draining;
        return false;
      }
      r.exclusive = true;
      s.now = phase::exclusive;
      sh.inflight.fetch_add(1);
      s.last_applied_seq = r.seq;
      self->send(t, apply_atom::value, std::move(r));
      s.queue.pop_front();
      return false;
    }
    r.growth = growth;
    sh.pending_growth.fetch_add(growth);
    sh.inflight.fetch_add(1);
    s.last_applied_seq = r.seq;
    self->send(t, apply_atom::value, std::move(r));
  } else if (auto* e = std::get_if<index::cache_event>(&payload)) {
    auto it = s.tenants.find(e->tenant_id);
    s.last_applied_seq = r.seq;
    if (it == s.tenants.end()) {
      ack(r);  // nothing of this tenant is held
    } else {
      sh.inflight.fetch_add(1);
      self->send(it->second.first, apply_atom::value, std::move(r));
    }
  } else if (auto* p = std::get_if<proto::policy_record>(&payload)) {
    // Drain first: no tenant is then mid-sweep (which would defer the change), so every
    // tenant installs it from its mailbox before any lookup sent after the push's 204.
    if (!sh.drained_now()) {
      s.now = phase::draining;
      return false;
    }
    s.now = phase::policy;
    policy_change change{std::move(p->canonical_json), tenant_actors(s)};
    auto rec = std::make_shared<tenant_record>(std::move(r));
    s.queue.pop_front();
    self->request(s.policy, caf::infinite, policy_atom::value, std::move(change))
        .then([=](policy_reply& reply) {
          auto& st = self->state;
          if (!reply.ok)
            spdlog::error("journal record {} not applied: {}", rec->seq, reply.error);
          st.policies = reply.policies;
          st.last_applied_seq = rec->seq;
          ack(*rec);
          st.now = phase::running;
          pump(self);
        });
    return false;
  } else {
    const index::micros at = r.rec.applied_at_us;
    for (auto& [_, t] : s.tenants) {
      sh.inflight.fetch_add(1);
      self->send(t.first, sweep_atom::value, sweep_order{at});
    }
    s.last_applied_seq = r.seq;
  }
  s.queue.pop_front();
  return true;
}

void pump(coordinator_pointer self) {
  auto& s = self->state;
  while (s.now == phase::running) {
    if (!s.jobs.empty()) {
      if (!s.sh->drained_now()) {
        s.now = phase::draining;
        return;
      }
      start_job(self);
      return;
    }
    if (s.queue.empty()) return;
    if (!dispatch_front(self)) return;
  }
}

/// Queues a periodic snapshot when enough records or enough time passed.
void maybe_snapshot(coordinator_pointer self) {
  auto& s = self->state;
  if (snapshot_pending(s) || !s.writer) return;
  const std::uint64_t fresh = s.last_applied_seq - s.last_snapshot_seq;
  const bool due = fresh > 0 && ((s.snap.every_records > 0 && fresh >= s.snap.every_records) ||
                                 (s.snap.interval.count() > 0 &&
                                  steady::now() - s.last_snapshot_at >= s.snap.interval));
  if (due && steady::now() >= s.snapshot_backoff_until) queue_snapshot(self, nullptr);
}

coordinator_actor::behavior_type coordinator_impl(coordinator_pointer self, coordinator_config cfg) {
  fail_fast_on_exceptions(self, "coordinator");
  static_cast<coordinator_config&>(self->state) = std::move(cfg);
  return {
      [=](apply_atom, committed_batch& batch) {
        auto& s = self->state;
        for (auto& item : batch.items) {
          std::string error;
          auto rec = proto::decode_record(item.kind, item.bytes, &error);
          if (!rec) {
            spdlog::error("journal record {} cannot be applied: {}", item.seq, error);
            if (item.sink) item.sink->on_applied(item.slot, append_result{true, "", item.seq});
            continue;
          }
          queued q;
          q.record = tenant_record{item.seq, std::move(*rec), std::move(item.sink), item.slot};
          s.queue.push_back(std::move(q));
        }
        pump(self);
        maybe_snapshot(self);
        pump(self);
      },
      [=](drained_atom) {
        auto& s = self->state;
        if (s.now != phase::draining) return;
        s.now = phase::running;
        pump(self);
      },
      [=](exclusive_done_atom, exclusive_done& done) { on_exclusive_done(self, done); },
      [=](probe_atom, probe_call_ptr& call) {
        queued q;
        q.probe = std::move(call);
        self->state.queue.push_back(std::move(q));
        pump(self);
      },
      [=](snapnow_atom) -> caf::result<snapshot_report> {
        auto& s = self->state;
        if (!s.writer) {
          snapshot_report r;
          r.ok = true;
          r.skipped = true;
          return r;
        }
        auto rp = self->make_response_promise<snapshot_report>();
        queue_snapshot(self, &rp);
        pump(self);
        return rp;
      },
      [=](read_atom, read_job& job) {
        quiet_job q;
        q.read = std::move(job);
        self->state.jobs.push_back(std::move(q));
        pump(self);
      },
  };
}

// ---------------------------------------------------------------------------- journal actor

struct journal_actor_state {
  journal::log* log = nullptr;
  coordinator_actor coordinator;
  runtime_probe* probe = nullptr;
  std::vector<append_msg> pending;
  bool flush_scheduled = false;
  bool unavailable = false;
  std::chrono::nanoseconds sweep_interval{};
};

/// Records per journal write; a longer queue is written in several groups.
constexpr std::size_t max_group_records = 4096;

journal_actor::behavior_type journal_actor_impl(
    journal_actor::stateful_pointer<journal_actor_state> self, journal::log* log,
    coordinator_actor coordinator, runtime_probe* probe, std::chrono::nanoseconds sweep_interval) {
  fail_fast_on_exceptions(self, "journal");
  self->state.log = log;
  self->state.coordinator = coordinator;
  self->state.probe = probe;
  self->state.sweep_interval = sweep_interval;
  self->delayed_send(self, sweep_interval, sweep_atom::value);
  auto schedule_flush = [self] {
    if (!self->state.flush_scheduled) {
      self->state.flush_scheduled = true;
      self->send(self, flush_atom::value);
    }
  };
  return {
      [=](append_atom, append_msg& msg) {
        self->state.pending.push_back(std::move(msg));
        schedule_flush();
      },
      [=](flush_atom) {
        auto& s = self->state;
        s.flush_scheduled = false;
        if (s.pending.empty()) return;
        const std::size_t n = std::min(s.pending.size(), max_group_records);
        const index::micros now = now_micros();
        std::vector<std::string> bytes(n);
        std::vector<journal::record_in> records(n);
        for (std::size_t i = 0; i < n; ++i) {
          bytes[i] = proto::encode_record(s.pending[i].kind, now, s.pending[i].payload);
          records[i] = journal::record_in{static_cast<std::uint32_t>(s.pending[i].kind), bytes[i]};
        }
        if (s.unavailable) s.log->resume();
        auto first = s.log->append(records);
        if (s.probe) s.probe->on_journal_write(first.ok(), n);
        if (!first.ok()) {
          if (!s.unavailable)
            spdlog::error("journal unavailable: {}", first.status().to_string());
          s.unavailable = true;
          for (std::size_t i = 0; i < n; ++i) {
            if (s.pending[i].sink)
              s.pending[i].sink->on_applied(
                  s.pending[i].slot, append_result{false, ack_reason::journal_unavailable, 0});
          }
        } else {
          if (s.unavailable) spdlog::info("journal available again");
          s.unavailable = false;
          committed_batch batch;
          batch.items.reserve(n);
          for (std::size_t i = 0; i < n; ++i) {
            batch.items.push_back(committed{first.value() + i,
                                            static_cast<std::uint32_t>(s.pending[i].kind),
                                            std::move(bytes[i]), std::move(s.pending[i].sink),
                                            s.pending[i].slot});
          }
          self->send(s.coordinator, apply_atom::value, std::move(batch));
        }
        s.pending.erase(s.pending.begin(), s.pending.begin() + static_cast<std::ptrdiff_t>(n));
        if (!s.pending.empty()) schedule_flush();
      },
      [=](sweep_atom) {
        self->state.pending.push_back(append_msg{proto::record_kind::sweep, {}, nullptr, 0});
        schedule_flush();
        self->delayed_send(self, self->state.sweep_interval, sweep_atom::value);
      },
  };
}

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

}  // namespace

struct runtime::impl {
  impl(std::size_t workers, scheduler_policy policy)
      : system(configure(config, workers, policy)) {}

  caf::actor_system_config config;
  caf::actor_system system;
  std::unique_ptr<journal::log> log;
  runtime_shared shared;
  /// Answers lookups of tenants that hold nothing (no actor yet).
  std::unique_ptr<state::absent_tenant> absent;
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
  ropts.state.max_entries = options.max_entries;
  ropts.state.default_ttl = options.default_ttl;
  ropts.state.block_size = options.block_size;
  auto rec = state::recover(ropts, now_micros(), error);
  if (!rec) return nullptr;
  if (info) *info = rec->info;
  std::unique_ptr<journal::log> log = std::move(rec->log);
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
  sh.probe = probe;
  sh.timer = &p->timer;
  sh.test_delay = test_lookup_delay();
  sh.options = sopts;
  sh.policies.publish(set->policies());
  p->absent = std::make_unique<state::absent_tenant>(sopts, sh.facts.get());
  p->writer = p->system.spawn<caf::detached>(snapshot_actor_impl, p->log.get(),
                                             std::max<std::size_t>(1, options.snapshots_kept));
  p->policy = p->system.spawn(policy_actor_impl, &sh);
  coordinator_config ccfg;
  ccfg.sh = &sh;
  ccfg.policy = p->policy;
  ccfg.writer = p->writer;
  ccfg.policies = set->policies();
  ccfg.snap = snapshot_policy{options.snapshot_interval, options.snapshot_every_records};
  ccfg.last_applied_seq = p->log->last_sequence();
  ccfg.last_snapshot_seq = rec_info.snapshot_seq;
  for (auto& [name, t] : set->release()) {
    std::shared_ptr<state::tenant_state> shared_t(std::move(t));
    auto actor = p->system.spawn(tenant_actor_impl, shared_t, &sh);
    sh.directory.add(name, actor);
    ccfg.tenants.emplace(name, std::make_pair(actor, std::move(shared_t)));
  }
  p->coordinator = p->system.spawn(coordinator_impl, std::move(ccfg));
  sh.coordinator = p->coordinator;
  p->journal = p->system.spawn<caf::detached>(journal_actor_impl, p->log.get(), p->coordinator,
                                              probe, options.sweep_interval);
  return std::unique_ptr<runtime>(new runtime(std::move(p)));
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
  auto actor = impl_->shared.directory.find(request.tenant_id);
  if (!actor) {
    // No actor: the tenant holds nothing. The answer depends only on the shared totals
    // (cold-start carve-out) and the policy, so it is given here.
    auto out = impl_->absent->decide(request, now_micros(), *impl_->shared.policies.get());
    done(std::move(out.response));
    return;
  }
  // The test hook makes every decision slow: such asks go to a worker, like large ones.
  const bool run_here = impl_->shared.test_delay.count() == 0 && short_decision(request);
  ask_tenant<lookup_call>(impl_->system, impl_->timer, *actor, lookup_atom::value, deadline,
                          std::move(request), std::move(done), run_here);
}

void runtime::cache_state(std::string tenant, std::string model, steady::time_point deadline,
                          std::function<void(std::optional<index::cache_state_view>)> done) {
  if (steady::now() > deadline) {
    done(std::nullopt);
    return;
  }
  auto actor = impl_->shared.directory.find(tenant);
  if (!actor) {
    done(index::cache_state_view{});
    return;
  }
  ask_tenant<state_call>(impl_->system, impl_->timer, *actor, cache_state_atom::value, deadline,
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
