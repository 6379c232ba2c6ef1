// The tenant actor: sole owner of one tenant's state::tenant_state. Applies its records,
// sweeps in slices (answering lookups between them), answers lookups and GetCacheState,
// takes part in the cap merge and in quiescent reads. Handlers delegate to tenant_state.
#include "actors/spawn.hpp"

#include <deque>
#include <functional>
#include <thread>

#include <caf/all.hpp>

#include "actors/fail_fast.hpp"
#include "actors/gateway_ask.hpp"

namespace ic::actors {
namespace {

using steady = std::chrono::steady_clock;

/// Key slots per TTL sweep slice (~0.3 ms); lookups are answered between slices.
constexpr std::size_t sweep_slice_keys = 65536;

struct tenant_actor_state {
  /// The tenant's state is `entry->st` (the gateway's fast path reads it too); `st` is that
  /// same object, for brevity.
  tenant_entry* entry = nullptr;
  state::tenant_state* st = nullptr;
  runtime_shared* sh = nullptr;
  index::change_log changes;
  /// LFU credits wait here while a frozen read runs (`entry->held`).
  std::vector<index::scored_replica> held_credits;
  /// A sweep in slices; mutations that arrive meanwhile wait in `deferred`, in order.
  bool sweeping = false;
  index::tenant_index::sweep_cursor cursor;
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

/// The one deferral rule of the tenant actor: while a sweep runs in slices, every mutation
/// (and probe) waits in `deferred`, in arrival order, until the sweep completes. Returns true
/// when the work `make_work()` builds was deferred; false when the caller runs it now
/// (`make_work` is then not called, so nothing is copied on the common path).
template <class MakeWork>
bool deferred_while_sweeping(tenant_actor_state& s, MakeWork make_work) {
  if (!s.sweeping) return false;
  s.deferred.emplace_back(make_work());
  return true;
}

void apply_record(tenant_pointer self, tenant_record& r) {
  auto& s = self->state;
  index::change_log* changes = change_sink(s);
  append_result ack;
  ack.seq = r.seq;
  state::apply_outcome out = s.st->apply(r.rec, changes);  // as tenant_set::apply replays it
  const index::ingest_result& ingest = out.ingest;
  const index::micros ts = out.cap_ts;
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
  if (credit.empty() || s.sh->lfu_credits_off) return;
  if (s.sh->journaled_credits) {  // replicated: applied when the journaled batch comes back
    s.st->collect_credit(credit, *s.sh->journaled_credits);
    return;
  }
  if (s.entry->held) {
    s.held_credits.insert(s.held_credits.end(), std::make_move_iterator(credit.begin()),
                          std::make_move_iterator(credit.end()));
  } else {
    s.st->credit(credit);
  }
}

/// Every handler runs as the writer of the tenant's read gate (so the gateway's fast-path
/// readers never see a change half-made), and first applies the LFU credits that fast-path
/// lookups left in the entry, so whatever the handler does or reads comes after them.
class writing {
 public:
  explicit writing(tenant_actor_state& s) : s_(s) {
    s_.entry->gate.write();
    auto credit = s_.entry->take_credits();
    give_credit(s_, credit);
  }
  ~writing() { s_.entry->gate.end_write(); }
  writing(const writing&) = delete;
  writing& operator=(const writing&) = delete;

 private:
  tenant_actor_state& s_;
};

tenant_actor::behavior_type tenant_actor_impl(tenant_pointer self,
                                              std::shared_ptr<tenant_entry> entry,
                                              runtime_shared* sh) {
  fail_fast_on_exceptions(self, "tenant");
  self->state.entry = entry.get();
  self->state.st = entry->st.get();
  self->state.sh = sh;
  return {
      [=](apply_atom, tenant_record& r) {
        const writing w(self->state);
        if (deferred_while_sweeping(self->state, [&] {
              auto held = std::make_shared<tenant_record>(std::move(r));
              return [self, held] { apply_record(self, *held); };
            }))
          return;
        apply_record(self, r);
      },
      [=](sweep_atom, sweep_order order) {
        const writing w(self->state);
        auto run = [self, order] { start_sweep(self, order.at); };
        if (!deferred_while_sweeping(self->state, [&] { return run; })) run();
      },
      [=](sweep_more_atom) {
        const writing w(self->state);
        sweep_slice(self);
      },
      [=](policy_atom, state::policy_ptr& p) {
        const writing w(self->state);
        auto run = [self, p] { self->state.st->set_policies(p); };
        if (!deferred_while_sweeping(self->state, [&] { return run; })) run();
      },
      [=](probe_atom, probe_call_ptr& call) {
        const writing w(self->state);
        auto run = [self, call] {
          call->done(self->state.st->probe(call->request, self->state.sh->clock()));
          self->state.sh->finished_one(0);
        };
        if (!deferred_while_sweeping(self->state, [&] { return run; })) run();
      },
      [=](lookup_atom, lookup_call_ptr& call) {
        const writing w(self->state);
        if (call->claimed.load()) return;  // the deadline answered already
        auto& s = self->state;
        if (s.sh->test_delay.count() > 0) std::this_thread::sleep_for(s.sh->test_delay);
        const auto deadline = call->deadline;
        state::lookup_outcome out =
            s.st->decide(call->question, s.sh->clock(), [deadline] { return steady::now() > deadline; });
        if (!call->claim()) return;  // TIMEOUT was delivered: no LFU credit
        // The timer keeps the call until its deadline: keep only the shell there.
        call->question = {};
        s.sh->timer->note_settled(*call);
        std::exchange(call->done, nullptr)(std::move(out.response));
        give_credit(s, out.credit);
      },
      [=](pd_route_atom, pd_call_ptr& call) {
        const writing w(self->state);
        if (call->claimed.load()) return;  // the deadline answered already
        auto& s = self->state;
        if (s.sh->test_delay.count() > 0) std::this_thread::sleep_for(s.sh->test_delay);
        const wall_clock clock(s.sh->clock);
        auto resp = s.st->decide_pd(call->question, *s.sh->stores->topologies.current(), clock,
                                    clock.at(call->deadline));
        if (!call->claim()) return;  // TIMEOUT was delivered
        call->question = {};
        s.sh->timer->note_settled(*call);
        std::exchange(call->done, nullptr)(std::move(resp));
      },
      [=](cache_state_atom, state_call_ptr& call) {
        const writing w(self->state);
        if (call->claimed.load()) return;
        auto view = self->state.st->cache_state(call->question);
        if (!call->claim()) return;
        self->state.sh->timer->note_settled(*call);
        std::exchange(call->done, nullptr)(std::move(view));
      },
      [=](caphead_atom) {
        const writing w(self->state);
        return cap_head_reply{self->state.st->cap_victim()};
      },
      [=](capevict_atom, const cap_order& order) {
        const writing w(self->state);
        auto& s = self->state;
        index::change_log* changes = change_sink(s);
        index::ingest_result r;
        s.st->evict_cap(order.bound, order.max, order.ts, changes, r);
        publish(s);
        return cap_evicted{r.cap_evicted_lru, r.cap_evicted_lfu, s.st->cap_victim()};
      },
      [=](hold_atom) {
        const writing w(self->state);
        self->state.entry->held = true;
        return true;
      },
      [=](credit_atom) {
        const writing w(self->state);  // applies the fast-path credits, nothing else
      },
      // The behavior keeps the entry alive while the actor lives (a reload drops it from
      // the directory); quitting releases it.
      [self, keep = entry](retire_atom) { self->quit(); },
      [=](release_atom) {
        const writing w(self->state);
        auto& s = self->state;
        s.entry->held = false;
        if (!s.held_credits.empty()) {
          s.st->credit(s.held_credits);
          s.held_credits.clear();
        }
      },
  };
}

}  // namespace

void settle_credits(caf::actor_system& sys, tenant_entry& e) {
  if (e.gate.try_write()) {
    const bool here = !e.held;  // while held, only the actor keeps credits (held_credits)
    if (here) e.st->credit(e.take_credits());
    e.gate.end_write();
    if (here) return;
  }
  ask_from_gateway(sys, e.actor, credit_atom::value);
}

std::shared_ptr<tenant_entry> spawn_tenant_entry(caf::actor_system& sys,
                                                std::shared_ptr<state::tenant_state> st,
                                                runtime_shared* sh) {
  auto entry = std::make_shared<tenant_entry>(std::move(st));
  entry->actor = sys.spawn(tenant_actor_impl, entry, sh);
  return entry;
}

tenant_actor spawn_tenant_actor(caf::actor_system& sys, const std::string& name,
                                std::shared_ptr<state::tenant_state> st, runtime_shared* sh) {
  auto entry = spawn_tenant_entry(sys, std::move(st), sh);
  sh->directory.add(name, entry);  // entries live as long as the runtime (and `sh`)
  return entry->actor;
}

}  // namespace ic::actors
