// The coordinator: dispatches committed records in journal order to the tenant actors,
// keeps the global cap exact (headroom reservation; exclusive updates and the cap merge by
// messages), and runs snapshots and frozen reads at quiescent points. What to do when is
// decided by the plain classes of state/coordination.hpp (`dispatch_machine`, `cap_merge`,
// `snapshot_schedule`); this file sends the messages they ask for and feeds back the replies.
#include "actors/spawn.hpp"

#include <algorithm>
#include <deque>
#include <optional>
#include <unordered_map>

#include <caf/all.hpp>

#include "actors/fail_fast.hpp"
#include "journal/record_log.hpp"
#include "state/coordination.hpp"

namespace ic::actors {
namespace {

void log_snapshot(const snapshot_report& r) {
  if (r.ok)
    spdlog::info("snapshot written: covers seq {}, {} bytes, {:.3f} s; {}", r.covering_seq, r.bytes,
                 r.seconds, r.truncation);
  else
    spdlog::error("snapshot covering seq {} failed: {}", r.covering_seq, r.error);
}

/// A committed record waiting for dispatch, or a probe queued behind the records.
struct queued {
  tenant_record record;
  probe_call_ptr probe;
  /// A new state to swap in (a reload after a stream gap).
  reload_job_ptr reload;
};

/// A quiescent-point job: a snapshot (with its waiters) or a frozen read.
struct quiet_job {
  bool snapshot = false;
  read_job read;
  std::vector<caf::typed_response_promise<snapshot_report>> waiters;
};

struct coordinator_state : coordinator_config {
  std::deque<queued> queue;
  std::deque<quiet_job> jobs;
  state::dispatch_machine machine;
  // The exclusive update being capped, and its cap merge.
  std::optional<exclusive_done> excl;
  state::cap_merge merge;
  std::size_t holds_pending = 0;
  state::snapshot_schedule schedule;
  /// Stamps each decoded record with its effective time, in journal order.
  state::effective_clock clock;
};

/// Record `r` was handed to its appliers: a snapshot from now on covers it.
void mark_applied(coordinator_state& s, const tenant_record& r) {
  s.last_applied_seq = r.seq;
  s.effective_time = r.rec.applied_at_us;
}

/// What the phase machine needs to know of a queued item.
state::dispatch_item describe(const queued& q) {
  using kind = state::dispatch_item::kind;
  if (q.probe) return {kind::probe, 0};
  if (q.reload) return {kind::reload, 0};
  const auto& payload = q.record.rec.payload;
  if (const auto* u = std::get_if<index::cache_state_update>(&payload))
    return {kind::update, u->tenant_id == index::reserved_tenant ? 0 : state::max_growth(*u)};
  // A /topology or /templates record is a pointer swap applied in order, like an event.
  // So is a journaled LFU credit batch (per tenant, in order, no growth).
  if (std::holds_alternative<index::cache_event>(payload) || state::is_store_record(q.record.rec) ||
      std::holds_alternative<proto::credit_record>(payload))
    return {kind::event, 0};
  if (std::holds_alternative<proto::policy_record>(payload)) return {kind::policy, 0};
  return {kind::sweep, 0};
}

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
  auto actor = spawn_tenant_actor(self->system(), name, st, s.sh);
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
  s.machine.finished();
  pump(self);
}

/// One step of the cap merge (state::cap_merge, the pick_cap_step that state::enforce_cap
/// runs on replay): the tenant whose next victim is first evicts while it stays before every
/// other tenant's.
void evict_next(coordinator_pointer self) {
  auto& s = self->state;
  const std::int64_t excess = state::cap_excess(*s.sh->facts, s.sh->options.max_entries);
  const auto order = s.merge.next(excess);
  if (!order) {
    finish_exclusive(self);
    return;
  }
  const std::string name = order->tenant;
  self->request(s.tenants[name].first, caf::infinite, capevict_atom::value,
                cap_order{order->bound, excess, s.excl->ts})
      .then([=](cap_evicted& e) {
        auto& st = self->state;
        st.excl->result.cap_evicted_lru += e.lru;
        st.excl->result.cap_evicted_lfu += e.lfu;
        if (!st.merge.on_evicted(name, e.lru + e.lfu, std::move(e.next))) {
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
  std::vector<std::string> names;
  for (const auto& [name, _] : s.tenants)
    if (name != index::reserved_tenant) names.push_back(name);
  if (!s.merge.start(names)) {
    finish_exclusive(self);
    return;
  }
  for (const auto& name : names) {
    self->request(s.tenants[name].first, caf::infinite, caphead_atom::value)
        .then([=](cap_head_reply& r) {
          if (self->state.merge.on_head(name, std::move(r.head))) evict_next(self);
        });
  }
}

void release_all(coordinator_pointer self) {
  for (auto& [_, t] : self->state.tenants) self->send(t.first, release_atom::value);
}

void finish_job(coordinator_pointer self) {
  release_all(self);
  self->state.jobs.pop_front();
  self->state.machine.finished();
  pump(self);
}

/// Every tenant as it stands now (call only at a quiescent point).
frozen_view view_of(const coordinator_state& s) {
  frozen_view v{s.policies, s.sh->facts, {}, {}};
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
  snapshot_job sj{s.last_applied_seq, s.effective_time, view_of(s)};
  sj.view.stores = state::store_sections(*s.sh->stores);
  s.schedule.started(s.sh->timer_clock());
  auto finished = [=](snapshot_report r) {
    auto& st = self->state;
    if (r.ok) {
      st.last_snapshot_seq = r.covering_seq;
    } else {
      st.schedule.failed(st.sh->timer_clock());  // do not retry on every batch
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
    const bool started = i == 0 && s.machine.phase() == state::dispatch_phase::quiet;
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

/// Sends the front item to its tenant(s) and pops it; `item` is what `describe` said of it,
/// `alone` whether the machine made it the exclusive update.
void dispatch_front(coordinator_pointer self, const state::dispatch_item& item, bool alone) {
  auto& s = self->state;
  queued& q = s.queue.front();
  runtime_shared& sh = *s.sh;
  if (q.probe) {
    auto& t = ensure_tenant(self, std::string(index::reserved_tenant));
    sh.inflight.fetch_add(1);
    self->send(t, probe_atom::value, std::move(q.probe));
    s.queue.pop_front();
    return;
  }
  tenant_record& r = q.record;
  auto& payload = r.rec.payload;
  if (auto* u = std::get_if<index::cache_state_update>(&payload)) {
    auto& t = ensure_tenant(self, u->tenant_id);
    if (alone) {
      r.exclusive = true;
    } else {
      r.growth = item.growth;
      sh.pending_growth.fetch_add(item.growth);
    }
    sh.inflight.fetch_add(1);
    mark_applied(s, r);
    self->send(t, apply_atom::value, std::move(r));
  } else if (auto* e = std::get_if<index::cache_event>(&payload)) {
    auto it = s.tenants.find(e->tenant_id);
    mark_applied(s, r);
    if (it == s.tenants.end()) {
      ack(r);  // nothing of this tenant is held
    } else {
      sh.inflight.fetch_add(1);
      self->send(it->second.first, apply_atom::value, std::move(r));
    }
  } else if (auto* c = std::get_if<proto::credit_record>(&payload)) {
    // Each tenant gets its share, in journal order; credits of tenants not held are stale.
    mark_applied(s, r);
    for (auto& [name, part] : state::credits_by_tenant(*c)) {
      auto it = s.tenants.find(name);
      if (it == s.tenants.end()) continue;
      sh.inflight.fetch_add(1);
      self->send(it->second.first, apply_atom::value,
                 tenant_record{r.seq, proto::decoded_record{r.rec.applied_at_us, std::move(part)},
                               nullptr, 0});
    }
    ack(r);
  } else if (state::is_store_record(r.rec)) {
    // /topology, /templates: a pointer swap readers never wait on, applied here in journal
    // order before the push is answered (journaled, then visible).
    std::string why;
    if (!state::apply_store_record(*sh.stores, r.rec, &why))
      spdlog::error("journal record {} not applied: {}", r.seq, why);
    mark_applied(s, r);
    ack(r);
  } else {
    const index::micros at = r.rec.applied_at_us;
    for (auto& [_, t] : s.tenants) {
      sh.inflight.fetch_add(1);
      self->send(t.first, sweep_atom::value, sweep_order{at});
    }
    mark_applied(s, r);
  }
  s.queue.pop_front();
}

/// Nothing is in flight and every record queued before the reload was applied: swaps the
/// new state in for every tenant at once (the directory in one step, then the totals, the
/// policy set and the stores), retires the old tenant actors once they answered what was
/// queued to them, and ends StreamCacheEvents subscriptions (they would not see the jump).
void swap_state(coordinator_pointer self) {
  auto& s = self->state;
  runtime_shared& sh = *s.sh;
  reload_job_ptr job = std::move(s.queue.front().reload);
  s.queue.pop_front();
  state::tenant_set& set = *job->set;
  std::unordered_map<std::string, std::shared_ptr<tenant_entry>> entries;
  decltype(s.tenants) tenants;
  for (auto& [name, t] : set.release()) {
    std::shared_ptr<state::tenant_state> st(std::move(t));
    auto entry = spawn_tenant_entry(self->system(), st, &sh);
    tenants.emplace(name, std::make_pair(entry->actor, std::move(st)));
    entries.emplace(name, std::move(entry));
  }
  auto old = sh.directory.replace(std::move(entries));
  sh.retired_facts.push_back(sh.facts);
  sh.facts = set.facts();
  sh.publish_absent(std::make_shared<state::absent_tenant>(sh.options, sh.facts.get()));
  sh.policies.publish(set.policies());
  state::adopt_stores(*sh.stores, *set.stores());
  for (auto& [_, e] : old) self->send(e->actor, retire_atom::value);
  const std::size_t before = s.tenants.size();
  s.tenants = std::move(tenants);
  s.policies = set.policies();
  s.last_applied_seq = job->position;
  s.effective_time = set.effective_time();
  s.clock = state::effective_clock(s.effective_time);
  sh.bus.end_all("the index was reloaded from a shared snapshot after a journal gap (stream "
                 "position " + std::to_string(journal::stream_seq_of(job->position)) +
                 "): resubscribe and re-read GetCacheState");
  spdlog::warn("reload swapped in: {} tenants replace {}; applied through stream seq {}",
               s.tenants.size(), before, journal::stream_seq_of(job->position));
  if (job->done) job->done();
  s.machine.finished();
  pump(self);
}

/// Hands the front policy record to the policy actor, which applies and broadcasts it.
void apply_policy(coordinator_pointer self) {
  auto& s = self->state;
  auto& p = std::get<proto::policy_record>(s.queue.front().record.rec.payload);
  policy_change change{std::move(p.canonical_json), tenant_actors(s)};
  auto rec = std::make_shared<tenant_record>(std::move(s.queue.front().record));
  s.queue.pop_front();
  self->request(s.policy, caf::infinite, policy_atom::value, std::move(change))
      .then([=](policy_reply& reply) {
        auto& st = self->state;
        if (!reply.ok) spdlog::error("journal record {} not applied: {}", rec->seq, reply.error);
        st.policies = reply.policies;
        mark_applied(st, *rec);
        if (st.policy_applied) st.policy_applied->store(rec->seq);
        ack(*rec);
        st.machine.finished();
        pump(self);
      });
}

void pump(coordinator_pointer self) {
  auto& s = self->state;
  runtime_shared& sh = *s.sh;
  const std::function<bool()> drained = [&sh] { return sh.drained_now(); };
  for (;;) {
    std::optional<state::dispatch_item> front;
    if (!s.queue.empty()) front = describe(s.queue.front());
    switch (s.machine.next(front, !s.jobs.empty(), drained, sh.pending_growth.load(),
                           sh.facts->nonreserved_entries.load())) {
      case state::dispatch_action::idle:
      case state::dispatch_action::wait_drained:
        return;
      case state::dispatch_action::start_job:
        start_job(self);
        return;
      case state::dispatch_action::dispatch:
        dispatch_front(self, *front, false);
        break;
      case state::dispatch_action::dispatch_alone:
        dispatch_front(self, *front, true);
        return;
      case state::dispatch_action::apply_policy:
        apply_policy(self);
        return;
      case state::dispatch_action::swap_state:
        swap_state(self);
        return;
    }
  }
}

/// Queues a periodic snapshot when enough records or enough time passed.
void maybe_snapshot(coordinator_pointer self) {
  auto& s = self->state;
  if (snapshot_pending(s) || !s.writer) return;
  if (s.schedule.due(s.last_applied_seq - s.last_snapshot_seq, s.sh->timer_clock()))
    queue_snapshot(self, nullptr);
}

coordinator_actor::behavior_type coordinator_impl(coordinator_pointer self, coordinator_config cfg) {
  fail_fast_on_exceptions(self, "coordinator");
  static_cast<coordinator_config&>(self->state) = std::move(cfg);
  self->state.machine = state::dispatch_machine(self->state.sh->options.max_entries);
  self->state.clock = state::effective_clock(self->state.effective_time);
  self->state.schedule = state::snapshot_schedule(
      self->state.snap.interval, self->state.snap.every_records, self->state.timers_started);
  // Snapshots due by time are checked on every batch and, when none arrives, by a tick.
  const auto tick = std::min<std::chrono::nanoseconds>(self->state.snap.interval, std::chrono::seconds(1));
  if (tick.count() > 0) self->delayed_send(self, tick, snaptick_atom::value);
  return {
      [=](apply_atom, committed_batch& batch) {
        auto& s = self->state;
        bool skew_noted = s.stamp_skew == nullptr || batch.stored_at_ns == 0;
        for (auto& item : batch.items) {
          std::string error;
          auto rec = proto::decode_record(item.kind, item.bytes, &error);
          if (!rec) {
            spdlog::error("journal record {} cannot be applied: {}", item.seq, error);
            if (item.sink) item.sink->on_applied(item.slot, append_result{true, "", item.seq});
            continue;
          }
          if (!skew_noted && item.kind != static_cast<std::uint32_t>(proto::record_kind::sweep)) {
            s.stamp_skew->observe(batch.stored_at_ns, rec->applied_at_us);  // a sweep's is a slot
            skew_noted = true;
          }
          rec->applied_at_us = s.clock.advance(rec->applied_at_us);  // t_eff, spec §3.4
          queued q;
          q.record = tenant_record{item.seq, std::move(*rec), std::move(item.sink), item.slot};
          s.queue.push_back(std::move(q));
        }
        pump(self);
        maybe_snapshot(self);
        pump(self);
      },
      [=](drained_atom) {
        if (self->state.machine.drained()) pump(self);
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
      [=](snaptick_atom) {
        maybe_snapshot(self);
        pump(self);
        self->delayed_send(self, tick, snaptick_atom::value);
      },
      [=](reload_atom, reload_job_ptr& job) {
        queued q;
        q.reload = std::move(job);
        self->state.queue.push_back(std::move(q));
        pump(self);
      },
      [=](read_atom, read_job& job) {
        quiet_job q;
        q.read = std::move(job);
        self->state.jobs.push_back(std::move(q));
        pump(self);
      },
  };
}

}  // namespace

coordinator_actor spawn_coordinator(caf::actor_system& sys, coordinator_config cfg) {
  return sys.spawn(coordinator_impl, std::move(cfg));
}

}  // namespace ic::actors
