// The journal actor: group commit. Appends queued inputs in batches, refuses them with
// JOURNAL_UNAVAILABLE on a write error (resuming by itself), hands committed batches to the
// coordinator, and journals the periodic TTL sweep (on the runtime's timer clock). In replicated
// mode (JetStream) it only publishes: the stream follower (actors/replication.hpp) applies what
// comes back.
#include "actors/spawn.hpp"

#include <algorithm>
#include <functional>
#include <vector>

#include <caf/all.hpp>

#include "actors/fail_fast.hpp"
#include "actors/replication.hpp"
#include "proto/record_codec.hpp"
#include "state/coordination.hpp"

namespace ic::actors {
namespace {

struct journal_actor_state {
  journal::record_log* log = nullptr;
  /// Replicated mode only (nullptr: the RocksDB journal, applied from here).
  replication_link* repl = nullptr;
  bool lagging = false;
  /// Acks are being answered late-batch JOURNAL_UNAVAILABLE (logged once per episode).
  bool acks_expiring = false;
  coordinator_actor coordinator;
  runtime_probe* probe = nullptr;
  std::vector<append_msg> pending;
  bool flush_scheduled = false;
  bool unavailable = false;
  std::chrono::nanoseconds sweep_interval{};
  /// When the next TTL sweep is due, on `timer_clock`.
  state::sweep_schedule sweep;
  /// Last reported count of LFU credit entries dropped (full batches).
  std::uint64_t credits_dropped = 0;
  /// Stamps each record with the time it is journaled (runtime_options::clock).
  std::function<index::micros()> clock;
  /// Measures the sweep interval (runtime_options::timer_clock).
  std::function<std::chrono::steady_clock::time_point()> timer_clock;
};

/// Records per journal write; a longer queue is written in several groups.
constexpr std::size_t max_group_records = 4096;

void refuse(journal_actor_state& s, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (s.pending[i].sink)
      s.pending[i].sink->on_applied(s.pending[i].slot,
                                    append_result{false, ack_reason::journal_unavailable, 0});
  }
}

// --- replicated mode (JetStream) -------------------------------------------------------
/// Publishes the first `n` queued inputs as one batch. Their sinks wait in the pending map
/// until the stream follower delivers the batch (Ack after this replica applied it); when
/// the append fails they are answered JOURNAL_UNAVAILABLE ("outcome unknown; retry": the
/// batch may still arrive and is then applied without them).
void publish_replicated(journal_actor_state& s, const std::vector<journal::record_in>& records,
                        std::size_t n, bool conditional) {
  if (s.repl->halted.load()) {  // the follower stopped (gap): nothing would be applied
    if (s.probe) s.probe->on_journal_write(false, n);
    refuse(s, n);
    return;
  }
  const auto max_lag = s.repl->max_apply_lag;
  if (max_lag.count() > 0) {
    const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    const double lag = journal::apply_lag_seconds(s.log->stats(), now_ns);
    const bool lagging = lag > std::chrono::duration<double>(max_lag).count();
    if (lagging != s.lagging)
      spdlog::warn(lagging ? "apply lag {:.3f} s over --max-apply-lag: refusing appends"
                           : "apply lag {:.3f} s back under --max-apply-lag", lag);
    s.lagging = lagging;
    if (lagging) {
      if (s.probe) s.probe->on_journal_write(false, n);
      refuse(s, n);
      return;
    }
  }
  std::string id = s.log->next_batch_id();
  std::vector<pending_batches::item> items(n);
  for (std::size_t i = 0; i < n; ++i) items[i] = {s.pending[i].sink, s.pending[i].slot};
  s.repl->pending.add(id, std::move(items));
  auto first = conditional
                   ? s.log->append_conditional(
                         records, journal::policy_scope,
                         journal::stream_seq_of(s.repl->policy_applied.load()))
                   : s.log->append(records);
  if (s.probe) s.probe->on_journal_write(first.ok(), n);
  if (first.ok()) {
    if (s.unavailable) spdlog::info("journal available again");
    s.unavailable = false;
    return;
  }
  const bool lost_race = first.status().code() == journal::errc::conflict;
  if (lost_race) {
    spdlog::warn("policy push not journaled: {}", first.status().to_string());
  } else {
    if (!s.unavailable) spdlog::error("journal unavailable: {}", first.status().to_string());
    s.unavailable = true;
  }
  const char* reason = lost_race ? ack_reason::conflict : ack_reason::journal_unavailable;
  if (auto back = s.repl->pending.take(id)) {  // not delivered meanwhile
    for (auto& it : *back)
      if (it.sink) it.sink->on_applied(it.slot, append_result{false, reason, 0});
  }
}

/// Replicated mode: how many of the first `n` queued inputs go into the next batch. A
/// policy push is published alone, with the compare-and-set of its scope (spec §3.4).
std::size_t replicated_group(const std::vector<append_msg>& pending, std::size_t n,
                             bool* conditional) {
  *conditional = pending.front().kind == proto::record_kind::policy;
  if (*conditional) return 1;
  std::size_t i = 1;
  while (i < n && pending[i].kind != proto::record_kind::policy) ++i;
  return i;
}
/// Every replica's sweep timer publishes Sweep{at = slot × interval} keyed
/// `sweep.<interval µs>.<slot>`, slot = floor(now / interval): the stream's de-duplication
/// window folds the replicas' copies into one record (spec §3.4).
void publish_sweep(journal_actor_state& s) {
  const auto interval_us = std::max<index::micros>(
      1, std::chrono::duration_cast<std::chrono::microseconds>(s.sweep_interval).count());
  const index::micros now = s.clock();
  const auto slot = static_cast<std::uint64_t>(now / interval_us);
  const std::string bytes = proto::encode_record(
      proto::record_kind::sweep, static_cast<index::micros>(slot) * interval_us, {});
  const journal::record_in in{static_cast<std::uint32_t>(proto::record_kind::sweep), bytes};
  auto pos = s.log->append_keyed({in}, journal::dedup_key{"sweep", std::uint64_t(interval_us), slot});
  if (s.probe) s.probe->on_journal_write(pos.ok(), 1);
  if (!pos.ok()) spdlog::warn("sweep of slot {} not published: {}", slot, pos.status().to_string());
}
/// Publishes the LFU credits this replica's lookups collected since the last call as one
/// record (no sink); every replica applies it when it comes back (spec §3.4). Credits of a
/// failed publish are dropped: nothing or an unknown record was stored, the same for all.
void publish_credits(journal_actor_state& s) {
  std::vector<proto::lfu_credit> due = s.repl->credits.take();
  if (due.empty()) return;
  const std::string bytes = proto::encode_record(proto::record_kind::lfu_credits, s.clock(),
                                                 proto::encode_credits(due));
  const journal::record_in in{static_cast<std::uint32_t>(proto::record_kind::lfu_credits), bytes};
  auto pos = s.log->append({in});
  if (s.probe) s.probe->on_journal_write(pos.ok(), 1);
  if (!pos.ok())
    spdlog::warn("{} LFU credits not published: {}", due.size(), pos.status().to_string());
  const std::uint64_t dropped = s.repl->credits.dropped();
  if (dropped != s.credits_dropped)
    spdlog::warn("LFU credit batches full: {} entries dropped so far", dropped);
  s.credits_dropped = dropped;
}
/// How often the journal actor looks for Acks whose batch is overdue: a quarter of the bound,
/// within [50 ms, 1 s].
std::chrono::nanoseconds ack_expiry_tick(std::chrono::nanoseconds bound) {
  using namespace std::chrono_literals;
  return std::clamp<std::chrono::nanoseconds>(bound / 4, 50ms, 1s);
}
/// Answers JOURNAL_UNAVAILABLE ("outcome unknown; retry") to every sink whose batch was
/// published more than `--max-apply-lag` ago and has not come back from the stream (a
/// consumer being recreated after a NATS node loss took 3-9 s here): a producer gets an
/// answer within its deadline. The batch is stored and is applied without them when it
/// arrives, as after a publish that ran out of budget.
void expire_acks(journal_actor_state& s) {
  const auto bound = s.repl->max_apply_lag;
  auto late = s.repl->pending.take_registered_before(
      pending_batches::clock::now() -
      std::chrono::duration_cast<pending_batches::clock::duration>(bound));
  if (late.empty()) {
    if (s.acks_expiring) spdlog::info("stream deliveries back within --max-apply-lag");
    s.acks_expiring = false;
    return;
  }
  if (!s.acks_expiring)
    spdlog::warn("{} appends not back from the stream within --max-apply-lag ({:.3f} s): "
                 "answered JOURNAL_UNAVAILABLE (outcome unknown; applied when they arrive)",
                 late.size(), std::chrono::duration<double>(bound).count());
  s.acks_expiring = true;
  s.repl->acks_expired += late.size();
  for (auto& it : late)
    if (it.sink)
      it.sink->on_applied(it.slot, append_result{false, ack_reason::journal_unavailable, 0});
}
// --- end of replicated mode --------------------------------------------------------------

/// Journals the TTL sweep when it is due on the timer clock: published (replicated) or
/// queued before whatever is queued next. Returns true when it queued one.
bool sweep_if_due(journal_actor_state& s) {
  if (!s.sweep.take_due(s.timer_clock())) return false;
  if (s.repl) {
    publish_sweep(s);
    return false;
  }
  s.pending.push_back(append_msg{proto::record_kind::sweep, {}, nullptr, 0});
  return true;
}

journal_actor::behavior_type journal_actor_impl(
    journal_actor::stateful_pointer<journal_actor_state> self, journal::record_log* log,
    replication_link* repl, coordinator_actor coordinator, runtime_probe* probe,
    std::chrono::nanoseconds sweep_interval, std::function<index::micros()> clock,
    std::function<std::chrono::steady_clock::time_point()> timer_clock) {
  fail_fast_on_exceptions(self, "journal");
  self->state.log = log;
  self->state.repl = repl;
  self->state.coordinator = coordinator;
  self->state.probe = probe;
  self->state.sweep_interval = sweep_interval;
  self->state.clock = std::move(clock);
  self->state.timer_clock = std::move(timer_clock);
  // Replicated: the start-up sweep is published like any other record (recovery applies
  // none of its own, every replica must see the same records).
  const auto started = self->state.timer_clock();
  const auto first =
      started +
      (repl ? std::chrono::steady_clock::duration::zero()
            : std::chrono::duration_cast<std::chrono::steady_clock::duration>(sweep_interval));
  self->state.sweep = state::sweep_schedule(sweep_interval, first);
  self->delayed_send(self, self->state.sweep.wait(started), sweep_atom::value);
  if (repl) self->delayed_send(self, repl->credit_interval, credit_atom::value);
  if (repl && repl->max_apply_lag.count() > 0)
    self->delayed_send(self, ack_expiry_tick(repl->max_apply_lag), ack_expiry_atom::value);
  auto schedule_flush = [self] {
    if (!self->state.flush_scheduled) {
      self->state.flush_scheduled = true;
      self->send(self, flush_atom::value);
    }
  };
  return {
      [=](append_atom, append_msg& msg) {
        sweep_if_due(self->state);  // a sweep due by now goes before this input
        self->state.pending.push_back(std::move(msg));
        schedule_flush();
      },
      [=](flush_atom) {
        auto& s = self->state;
        s.flush_scheduled = false;
        if (s.pending.empty()) return;
        bool conditional = false;
        std::size_t n = std::min(s.pending.size(), max_group_records);
        if (s.repl) n = replicated_group(s.pending, n, &conditional);
        const index::micros now = s.clock();
        std::vector<std::string> bytes(n);
        std::vector<journal::record_in> records(n);
        for (std::size_t i = 0; i < n; ++i) {
          bytes[i] = proto::encode_record(s.pending[i].kind, now, s.pending[i].payload);
          records[i] = journal::record_in{static_cast<std::uint32_t>(s.pending[i].kind), bytes[i]};
        }
        // A group larger than one batch may carry (JetStream: the server's max_payload) is
        // split: the rest waits for the next flush.
        if (const std::size_t fit = s.log->fitting_prefix(records); fit < n) {
          n = fit;
          records.resize(n);
        }
        if (s.repl) {
          publish_replicated(s, records, n, conditional);
          s.pending.erase(s.pending.begin(), s.pending.begin() + static_cast<std::ptrdiff_t>(n));
          if (!s.pending.empty()) schedule_flush();
          return;
        }
        // A resume that fails shows as the append's own error just below.
        if (s.unavailable) (void)s.log->resume();
        auto first = s.log->append(records);
        if (s.probe) s.probe->on_journal_write(first.ok(), n);
        if (!first.ok()) {
          if (!s.unavailable)
            spdlog::error("journal unavailable: {}", first.status().to_string());
          s.unavailable = true;
          refuse(s, n);
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
      [=](sweep_atom) {  // the wake-up; exactly one is scheduled at any time
        if (sweep_if_due(self->state)) schedule_flush();
        self->delayed_send(self, self->state.sweep.wait(self->state.timer_clock()),
                           sweep_atom::value);
      },
      [=](credit_atom) {  // replicated mode only
        publish_credits(self->state);
        self->delayed_send(self, self->state.repl->credit_interval, credit_atom::value);
      },
      [=](ack_expiry_atom) {  // replicated mode with a --max-apply-lag only
        expire_acks(self->state);
        self->delayed_send(self, ack_expiry_tick(self->state.repl->max_apply_lag),
                           ack_expiry_atom::value);
      },
  };
}

}  // namespace

journal_actor spawn_journal_actor(
    caf::actor_system& sys, journal::record_log* log, replication_link* repl,
    coordinator_actor coordinator, runtime_probe* probe, std::chrono::nanoseconds sweep_interval,
    std::function<index::micros()> clock,
    std::function<std::chrono::steady_clock::time_point()> timer_clock) {
  return sys.spawn<caf::detached>(journal_actor_impl, log, repl, coordinator, probe, sweep_interval,
                                  std::move(clock), std::move(timer_clock));
}

}  // namespace ic::actors
