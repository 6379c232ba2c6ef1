#include "actors/runtime.hpp"

#include <atomic>
#include <future>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/index_state.hpp"
#include "actors/protocol.hpp"
#include "actors/rw_lock.hpp"
#include "actors/snapshot_io.hpp"
#include "actors/test_hooks.hpp"
#include "journal/log.hpp"

namespace ic::actors {
namespace {

using steady = std::chrono::steady_clock;

snapshot_actor::behavior_type snapshot_actor_impl(snapshot_actor::pointer, journal::log* log,
                                                  std::size_t keep) {
  return {
      [=](snapwrite_atom, snapshot_job& job) -> snapshot_report {
        const auto t0 = std::chrono::steady_clock::now();
        snapshot_report r;
        r.covering_seq = job.covering_seq;
        auto fail = [&](const journal::status& st) {
          r.ok = false;
          r.error = st.to_string();
          return r;
        };
        auto fail_and_stop = [&](const journal::status& st) {
          job.pipe->abort();
          return fail(st);
        };
        auto writer = log->begin_snapshot(job.covering_seq);
        if (!writer.ok()) return fail_and_stop(writer.status());
        std::string chunk;
        while (job.pipe->pop(chunk)) {
          r.bytes += chunk.size();
          if (auto st = writer->add_chunk(chunk); !st.ok()) return fail_and_stop(st);
        }
        if (!job.pipe->complete())
          return fail(journal::status(journal::errc::internal, "snapshot serialisation aborted"));
        auto info = writer->finish();
        if (!info.ok()) return fail(info.status());
        if (auto pruned = log->prune_snapshots(keep); !pruned.ok()) return fail(pruned.status());
        if (auto st = log->truncate_through(job.covering_seq); !st.ok()) return fail(st);
        r.ok = true;
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return r;
      },
  };
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

index::micros now_micros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Shared, read-mostly policy view for callers that need a tenant's budget before asking.
struct policy_cell {
  std::shared_ptr<const policy::policy_store> store;
  policy::resolved_policy resolve(const std::string& tenant) const {
    auto s = std::atomic_load(&store);
    return s->resolve(tenant);
  }
  void publish(const policy::policy_store& current) {
    std::atomic_store(&store, std::shared_ptr<const policy::policy_store>(
                                  std::make_shared<policy::policy_store>(current)));
  }
};

/// When the index actor takes snapshots.
struct snapshot_policy {
  std::chrono::nanoseconds interval{};
  std::uint64_t every_records = 0;
};

/// What the index actor starts with (after recovery).
struct index_actor_config {
  std::shared_ptr<index_state> st;
  /// LFU credits from the lookup threads, drained by `credit()`.
  credit_buffer* credits = nullptr;
  /// Guards `st` against concurrent lookups: this actor takes the write side to mutate; its
  /// own reads need no lock (it is the only writer).
  rw_lock* lock = nullptr;
  runtime_probe* probe = nullptr;
  policy_cell* policies = nullptr;
  snapshot_actor writer;
  snapshot_policy snap;
  std::uint64_t last_applied_seq = 0;
  std::uint64_t last_snapshot_seq = 0;
};

/// The index actor's state: its configuration plus what it tracks while running.
struct index_actor_state : index_actor_config {
  std::vector<subscriber_ptr> subscribers;
  index::change_log changes;
  steady::time_point last_snapshot_at = steady::now();
  steady::time_point snapshot_backoff_until{};
  bool snapshot_running = false;
  /// `snapnow` requests waiting for the running snapshot to finish.
  std::vector<caf::typed_response_promise<snapshot_report>> snapshot_waiters;
};

void log_snapshot(const snapshot_report& r) {
  if (r.ok)
    spdlog::info("snapshot written: covers seq {}, {} bytes, {:.3f} s; journal truncated", r.covering_seq,
                 r.bytes, r.seconds);
  else
    spdlog::error("snapshot covering seq {} failed: {}", r.covering_seq, r.error);
}

/// Forgets one subscriber (counting it when it fell behind its buffer).
void drop_subscriber(index_actor_state& s, subscriber_ptr& sub) {
  if (sub && sub->overflowed() && s.probe) s.probe->on_subscriber_dropped();
  sub.reset();
}

/// Drops every subscriber that ended, also those whose filter never matches again.
void prune_subscribers(index_actor_state& s) {
  for (auto& sub : s.subscribers)
    if (sub && !sub->alive()) drop_subscriber(s, sub);
  s.subscribers.erase(std::remove(s.subscribers.begin(), s.subscribers.end(), nullptr),
                      s.subscribers.end());
}

/// Key slots per write-lock hold of a TTL sweep (~0.3 ms each; 59 ms for a whole 10 M-entry
/// sweep).
constexpr std::size_t kSweepSliceKeys = 65536;

/// Chunks buffered between the serialiser and the snapshot writer (1 MiB each).
constexpr std::size_t kSnapshotPipeChunks = 8;

/// Starts a snapshot covering everything applied so far: asks the writer to store it, then
/// serialises into the pipe on the index actor's thread. Ingest waits meanwhile (the pipe
/// drains at journal speed, ~1 s per 10 M entries); lookups do not, as they read under the
/// shared lock and serialising only reads. Calls `done` with the writer's report.
template <class Self>
void take_snapshot(Self* self, std::function<void(const snapshot_report&)> done) {
  auto& s = self->state;
  s.snapshot_running = true;
  s.last_snapshot_at = steady::now();
  snapshot_job job{s.last_applied_seq, std::make_shared<chunk_pipe>(kSnapshotPipeChunks)};
  auto pipe = job.pipe;
  auto finished = [=](snapshot_report& r) mutable {
    self->state.snapshot_running = false;
    if (r.ok) {
      self->state.last_snapshot_seq = r.covering_seq;
    } else {
      // Do not retry on every batch: wait an interval (at least a minute) first.
      self->state.snapshot_backoff_until =
          steady::now() + std::max<steady::duration>(
                              std::chrono::minutes(1),
                              std::chrono::duration_cast<steady::duration>(self->state.snap.interval));
    }
    log_snapshot(r);
    done(r);
    // Requests that arrived while this snapshot ran (a stop's final snapshot) get a snapshot
    // of their own when anything was applied since this one covered.
    auto& st = self->state;
    if (!st.snapshot_waiters.empty()) {
      auto waiters = std::move(st.snapshot_waiters);
      st.snapshot_waiters.clear();
      auto deliver_all = [waiters](const snapshot_report& report) mutable {
        for (auto& w : waiters) w.deliver(report);
      };
      if (st.last_applied_seq != st.last_snapshot_seq) {
        take_snapshot(self, deliver_all);
      } else {
        deliver_all(r);
      }
    }
  };
  self->request(s.writer, caf::infinite, snapwrite_atom::value, std::move(job))
      .then(finished, [=](caf::error& err) mutable {
        snapshot_report r;
        r.covering_seq = self->state.last_applied_seq;
        r.error = "snapshot writer: " + caf::to_string(err);
        finished(r);
      });
  write_state_snapshot(*s.st, [&](std::string_view c) { return pipe->push(std::string(c)); });
  pipe->close();
}

index_actor::behavior_type index_actor_impl(index_actor::stateful_pointer<index_actor_state> self,
                                            index_actor_config cfg) {
  fail_fast_on_exceptions(self, "index");
  static_cast<index_actor_config&>(self->state) = std::move(cfg);
  return {
      [=](apply_atom, committed_batch& batch) {
        auto& s = self->state;
        // Apply each record under the write lock (taken per record, so a lookup waits for at
        // most one record, not the whole group), then tell subscribers and sinks: an Ack
        // implies the change is visible.
        std::vector<append_result> results(batch.items.size());
        s.changes.clear();
        prune_subscribers(s);  // ended subscribers must not keep change logging on
        index::change_log* changes = s.subscribers.empty() ? nullptr : &s.changes;
        bool policy_changed = false;
        for (std::size_t i = 0; i < batch.items.size(); ++i) {
          const auto& item = batch.items[i];
          results[i].seq = item.seq;
          std::string error;
          auto rec = decode_record(item.kind, item.bytes, &error);
          if (!rec) {
            spdlog::error("journal record {} cannot be applied: {}", item.seq, error);
            continue;
          }
          apply_outcome out;
          if (std::holds_alternative<sweep_record>(rec->payload)) {
            // A TTL sweep walks the whole index: run it in slices, releasing the write lock
            // between them so lookups are not held for its whole duration. Nothing else
            // mutates in between, so the result equals index_state::apply's one-shot sweep
            // (index/sliced_sweep_test.cpp), which replay uses.
            index::cache_index::sweep_cursor cursor;
            bool done = false;
            while (!done) {
              std::lock_guard<rw_lock> write(*s.lock);
              done = s.st->mutable_index().sweep_step(rec->applied_at_us, cursor,
                                                      kSweepSliceKeys, changes, out.sweep);
            }
          } else {
            std::lock_guard<rw_lock> write(*s.lock);
            out = s.st->apply(*rec, changes);
          }
          if (!out.ok) spdlog::error("journal record {} not applied: {}", item.seq, out.error);
          results[i].reason_code = std::string(out.ingest.first_drop_reason);
          if (s.probe) {
            if (auto* u = std::get_if<index::cache_state_update>(&rec->payload))
              s.probe->on_ingest(u->tenant_id, out.ingest);
            if (std::holds_alternative<sweep_record>(rec->payload)) s.probe->on_sweep(out.sweep);
          }
          policy_changed |= std::holds_alternative<policy_record>(rec->payload);
        }
        if (policy_changed) s.policies->publish(s.st->policies());
        if (!s.changes.empty()) {
          for (const auto& c : s.changes) {
            for (auto& sub : s.subscribers) {
              if (sub && sub->filter().matches(c) && !sub->offer(c)) drop_subscriber(s, sub);
            }
          }
          prune_subscribers(s);
          // A big sweep can leave a huge change log; do not keep its capacity.
          if (s.changes.capacity() > (std::size_t{1} << 16)) index::change_log().swap(s.changes);
        }
        for (std::size_t i = 0; i < batch.items.size(); ++i) {
          auto& item = batch.items[i];
          if (item.sink) item.sink->on_applied(item.slot, results[i]);
          s.last_applied_seq = item.seq;
        }
        // Periodic snapshot: enough records, or enough time with something new.
        const std::uint64_t fresh = s.last_applied_seq - s.last_snapshot_seq;
        const bool due =
            fresh > 0 && ((s.snap.every_records > 0 && fresh >= s.snap.every_records) ||
                          (s.snap.interval.count() > 0 &&
                           steady::now() - s.last_snapshot_at >= s.snap.interval));
        if (due && !s.snapshot_running && s.writer && steady::now() >= s.snapshot_backoff_until)
          take_snapshot(self, [](const snapshot_report&) {});
      },
      [=](credit_atom) {
        credit_list hits;
        {
          std::lock_guard<std::mutex> guard(self->state.credits->mu);
          hits.swap(self->state.credits->hits);
          self->state.credits->scheduled = false;
        }
        std::lock_guard<rw_lock> write(*self->state.lock);
        self->state.st->credit(hits);
      },
      [=](sub_atom, subscriber_ptr& sub) {
        prune_subscribers(self->state);
        self->state.subscribers.push_back(std::move(sub));
      },
      [=](snapnow_atom) -> caf::result<snapshot_report> {
        auto& s = self->state;
        if (s.writer && s.snapshot_running) {
          // Answered once the running snapshot finished (and, if needed, a newer one).
          s.snapshot_waiters.push_back(self->template make_response_promise<snapshot_report>());
          return s.snapshot_waiters.back();
        }
        if (!s.writer || s.last_applied_seq == s.last_snapshot_seq) {
          snapshot_report r;
          r.skipped = true;
          r.ok = true;
          r.covering_seq = s.last_snapshot_seq;
          return r;
        }
        auto rp = self->make_response_promise<snapshot_report>();
        take_snapshot(self, [rp](const snapshot_report& r) mutable { rp.deliver(r); });
        return rp;
      },
      [=](probe_atom, const probe_request& req) {
        std::lock_guard<rw_lock> write(*self->state.lock);
        return run_probe(self->state.st->mutable_index(), req, now_micros());
      },
  };
}

struct journal_actor_state {
  journal::log* log = nullptr;
  index_actor index;
  runtime_probe* probe = nullptr;
  std::vector<append_msg> pending;
  bool flush_scheduled = false;
  bool unavailable = false;
  std::chrono::nanoseconds sweep_interval{};
};

/// Records per journal write; a longer queue is written in several groups.
constexpr std::size_t max_group_records = 4096;

journal_actor::behavior_type journal_actor_impl(
    journal_actor::stateful_pointer<journal_actor_state> self, journal::log* log, index_actor index,
    runtime_probe* probe, std::chrono::nanoseconds sweep_interval) {
  fail_fast_on_exceptions(self, "journal");
  self->state.log = log;
  self->state.index = index;
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
        std::size_t n = std::min(s.pending.size(), max_group_records);
        const index::micros now = now_micros();
        std::vector<std::string> bytes(n);
        std::vector<journal::record_in> records(n);
        for (std::size_t i = 0; i < n; ++i) {
          bytes[i] = encode_record(s.pending[i].kind, now, s.pending[i].payload);
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
          self->send(s.index, apply_atom::value, std::move(batch));
        }
        s.pending.erase(s.pending.begin(), s.pending.begin() + static_cast<std::ptrdiff_t>(n));
        if (!s.pending.empty()) schedule_flush();
      },
      [=](sweep_atom) {
        self->state.pending.push_back(append_msg{record_kind::sweep, {}, nullptr, 0});
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

caf::actor_system_config& configure(caf::actor_system_config& cfg, std::size_t workers) {
  if (workers == 0) workers = std::max<std::size_t>(2, std::thread::hardware_concurrency());
  cfg.set("scheduler.max-threads", workers);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  return cfg;
}

}  // namespace

struct runtime::impl {
  explicit impl(std::size_t workers) : system(configure(config, workers)) {}

  caf::actor_system_config config;
  caf::actor_system system;
  std::unique_ptr<journal::log> log;
  policy_cell policies;
  index_actor index;
  journal_actor journal;
  snapshot_actor writer;
  /// The index state, shared with the index actor: lookups read it under `index_lock`.
  std::shared_ptr<index_state> state;
  rw_lock index_lock;
  credit_buffer credits;
  std::chrono::milliseconds test_delay{0};
  bool snapshot_on_stop = true;
  std::atomic<bool> shutting_down{false};
  bool stopped = false;
};

runtime::runtime(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

runtime::~runtime() { stop(); }

std::unique_ptr<runtime> runtime::start(const runtime_options& options, runtime_probe* probe,
                                        std::string* error, recovery_info* info) {
  auto fail = [&](const std::string& why) -> std::unique_ptr<runtime> {
    if (error) *error = why;
    return nullptr;
  };
  const auto t0 = steady::now();
  journal::options jopts;
  jopts.fsync = options.fsync;
  jopts.env = options.journal_env;
  // The journal is written once and read at recovery: small memtables keep its share of the
  // server's memory low (64 MiB, RocksDB's default, is ~6 B per entry at 10 M entries).
  jopts.write_buffer_bytes = std::size_t{16} << 20;
  auto opened = journal::log::open(options.journal_dir, jopts);
  if (!opened.ok()) return fail(opened.status().to_string());
  std::unique_ptr<journal::log> log = std::move(opened).value();

  index_state_options sopts;
  sopts.max_entries = options.max_entries;
  sopts.default_ttl = options.default_ttl;
  sopts.block_size = options.block_size;
  recovery_info rec_info;

  // Recovery, step 1: the newest usable snapshot (corrupt ones fall back to older ones).
  std::shared_ptr<index_state> state;
  std::unique_ptr<state_loader> loader;
  std::uint64_t snapshot_id = 0;
  std::vector<journal::status> skipped;
  auto snap = log->read_newest_snapshot(
      [&](const journal::snapshot_info& si) {
        loader = std::make_unique<state_loader>(sopts);
        snapshot_id = si.id;
        rec_info.snapshot_seq = si.covering_seq;
      },
      [&](std::string_view chunk) -> journal::status {
        std::string why;
        if (!loader->feed(chunk, &why)) return journal::status(journal::errc::corruption, why);
        return journal::status::success();
      },
      &skipped);
  for (const auto& sk : skipped) rec_info.skipped_snapshots.push_back(sk.to_string());
  if (snap.ok()) {
    std::string why;
    state = loader->finish(&why);
    if (!state)
      return fail("journal " + options.journal_dir + ": snapshot " + std::to_string(snapshot_id) +
                  " cannot be loaded: " + why);
  } else if (snap.status().code() == journal::errc::not_found && log->truncated_through() == 0) {
    state = std::make_shared<index_state>(sopts);  // a journal that was never truncated
    rec_info.snapshot_seq = 0;
  } else if (snap.status().code() == journal::errc::not_found) {
    return fail("journal " + options.journal_dir + ": truncated through " +
                std::to_string(log->truncated_through()) +
                " but no usable snapshot covers it; refusing to start with a partial index");
  } else {
    return fail("journal " + options.journal_dir + ": snapshot " + std::to_string(snapshot_id) +
                ": " + snap.status().to_string());
  }

  // Recovery, step 2: replay the journal after the snapshot through the live apply path.
  std::string replay_error;
  auto st = log->read(std::max(rec_info.snapshot_seq, log->truncated_through()) + 1,
                      [&](const journal::record_view& r) {
    std::string why;
    auto rec = decode_record(r.type, r.payload, &why);
    if (!rec) {
      replay_error = "journal " + options.journal_dir + ": record " + std::to_string(r.seq) +
                     " cannot be decoded: " + why;
      return false;
    }
    auto out = state->apply(*rec);
    if (!out.ok) {
      replay_error = "journal " + options.journal_dir + ": record " + std::to_string(r.seq) +
                     " cannot be applied: " + out.error;
      return false;
    }
    ++rec_info.records_replayed;
    return true;
  });
  if (!st.ok()) return fail(st.to_string());
  if (!replay_error.empty()) return fail(replay_error);

  // One journaled TTL sweep at the current time, so nothing expired comes back.
  const index::micros now = now_micros();
  std::string sweep = encode_record(record_kind::sweep, now, {});
  auto sweep_seq = log->append(static_cast<std::uint32_t>(record_kind::sweep), sweep);
  if (!sweep_seq.ok()) return fail("journal " + options.journal_dir + ": " + sweep_seq.status().to_string());
  state->apply(*decode_record(static_cast<std::uint32_t>(record_kind::sweep), sweep));

  rec_info.last_sequence = log->last_sequence();
  rec_info.entries = state->index().facts().total_entries;
  if (log->info().dropped_torn_tail)
    rec_info.torn_tail = log->info().torn_tail_reason;
  rec_info.seconds = std::chrono::duration<double>(steady::now() - t0).count();
  if (info) *info = rec_info;

  auto p = std::make_unique<impl>(options.workers);
  p->log = std::move(log);
  p->snapshot_on_stop = options.snapshot_on_stop;
  p->test_delay = test_lookup_delay();
  p->policies.publish(state->policies());
  p->writer = p->system.spawn<caf::detached>(snapshot_actor_impl, p->log.get(),
                                             std::max<std::size_t>(1, options.snapshots_kept));
  index_actor_config icfg;
  icfg.st = state;
  p->state = state;
  icfg.probe = probe;
  icfg.policies = &p->policies;
  icfg.lock = &p->index_lock;
  icfg.credits = &p->credits;
  icfg.writer = p->writer;
  icfg.snap = snapshot_policy{options.snapshot_interval, options.snapshot_every_records};
  icfg.last_applied_seq = p->log->last_sequence();
  icfg.last_snapshot_seq = rec_info.snapshot_seq;
  p->index = p->system.spawn(index_actor_impl, std::move(icfg));
  p->journal = p->system.spawn<caf::detached>(journal_actor_impl, p->log.get(), p->index, probe,
                                              options.sweep_interval);
  return std::unique_ptr<runtime>(new runtime(std::move(p)));
}

void runtime::append(record_kind kind, std::string payload, std::shared_ptr<append_sink> sink,
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
  // Lookups run on the caller's thread under the shared side of the index lock: no actor
  // hop, and the deadline also bounds the wait for a writer to finish its group.
  if (steady::now() > deadline || !impl_->index_lock.try_lock_shared_until(deadline)) {
    done(std::nullopt);
    return;
  }
  lookup_outcome out;
  {
    std::shared_lock<rw_lock> read(impl_->index_lock, std::adopt_lock);
    if (impl_->test_delay.count() > 0) std::this_thread::sleep_for(impl_->test_delay);
    out = impl_->state->decide(request, now_micros(),
                               [deadline] { return steady::now() > deadline; });
  }
  // The answer is certain to be delivered now, so its LFU credit may be given.
  if (!out.credit.empty()) {
    bool send;
    {
      std::lock_guard<std::mutex> guard(impl_->credits.mu);
      auto& hits = impl_->credits.hits;
      hits.insert(hits.end(), std::make_move_iterator(out.credit.begin()),
                  std::make_move_iterator(out.credit.end()));
      send = !impl_->credits.scheduled;
      impl_->credits.scheduled = true;
    }
    if (send) caf::anon_send(impl_->index, credit_atom::value);
  }
  done(std::move(out.response));
}

void runtime::cache_state(std::string tenant, std::string model, steady::time_point deadline,
                          std::function<void(std::optional<index::cache_state_view>)> done) {
  // Read on the caller's thread, like lookups (bounded by the deadline).
  if (steady::now() > deadline || !impl_->index_lock.try_lock_shared_until(deadline)) {
    done(std::nullopt);
    return;
  }
  std::optional<index::cache_state_view> view;
  {
    std::shared_lock<rw_lock> read(impl_->index_lock, std::adopt_lock);
    view = impl_->state->index().get_cache_state(tenant, model);
  }
  done(std::move(view));
}

void runtime::subscribe(std::shared_ptr<event_subscriber> subscriber) {
  caf::anon_send(impl_->index, sub_atom::value, std::move(subscriber));
}

policy::resolved_policy runtime::policy_of(const std::string& tenant) const {
  return impl_->policies.resolve(tenant);
}

namespace {

template <class T, class... Ts>
std::optional<T> ask_blocking(caf::actor_system& sys, const index_actor& idx,
                              std::chrono::milliseconds timeout, Ts&&... xs) {
  caf::scoped_actor self{sys};
  std::optional<T> out;
  self->request(idx, timeout, std::forward<Ts>(xs)...)
      .receive([&](T& v) { out = std::move(v); }, [&](caf::error&) {});
  return out;
}

}  // namespace

namespace {

/// Runs `read` on the index state under the shared side of the index lock, waiting at most
/// `timeout` for a writer; nullopt when the lock was not had in time.
template <class F>
auto read_state(rw_lock& lock, const index_state& state, std::chrono::milliseconds timeout, F read)
    -> std::optional<decltype(read(state))> {
  if (!lock.try_lock_shared_until(steady::now() + timeout)) return std::nullopt;
  std::shared_lock<rw_lock> guard(lock, std::adopt_lock);
  return read(state);
}

}  // namespace

std::optional<index::snapshot_view> runtime::snapshot_blocking(std::chrono::milliseconds timeout) {
  return read_state(impl_->index_lock, *impl_->state, timeout,
                    [](const index_state& st) { return st.index().snapshot(); });
}

std::optional<std::string> runtime::policy_json_blocking(std::chrono::milliseconds timeout) {
  return read_state(impl_->index_lock, *impl_->state, timeout,
                    [](const index_state& st) { return st.policies().to_json(); });
}

std::optional<std::vector<std::pair<std::string, std::int64_t>>>
runtime::entries_by_model_blocking(std::chrono::milliseconds timeout) {
  return read_state(impl_->index_lock, *impl_->state, timeout,
                    [](const index_state& st) { return st.index().entries_by_model(); });
}

std::optional<probe_outcome> runtime::probe_blocking(const probe_request& request,
                                                     std::chrono::milliseconds timeout) {
  return ask_blocking<probe_outcome>(impl_->system, impl_->index, timeout, probe_atom::value,
                                     request);
}

std::optional<append_result> runtime::append_blocking(record_kind kind, std::string payload,
                                                      std::chrono::milliseconds timeout) {
  auto sink = std::make_shared<promise_sink>();
  auto fut = sink->future();
  append(kind, std::move(payload), sink, 0);
  if (fut.wait_for(timeout) != std::future_status::ready) return std::nullopt;
  return fut.get();
}

std::optional<snapshot_report> runtime::snapshot_now_blocking(std::chrono::milliseconds timeout) {
  return ask_blocking<snapshot_report>(impl_->system, impl_->index, timeout, snapnow_atom::value);
}

void runtime::begin_shutdown() { impl_->shutting_down = true; }

void runtime::stop() {
  if (!impl_ || impl_->stopped) return;
  impl_->stopped = true;
  impl_->shutting_down = true;
  // Reverse order of start: the writer first (its queue is empty once the gRPC server
  // drained), then a final snapshot so the next start replays nothing, then the index and
  // the snapshot writer, then the journal files.
  caf::anon_send_exit(impl_->journal, caf::exit_reason::user_shutdown);
  if (impl_->snapshot_on_stop) {
    auto r = snapshot_now_blocking(std::chrono::seconds(30));
    if (!r) spdlog::error("final snapshot did not finish in time");
  }
  caf::anon_send_exit(impl_->index, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(impl_->writer, caf::exit_reason::user_shutdown);
  impl_->system.await_all_actors_done();
  if (impl_->log) {
    auto st = impl_->log->close();
    if (!st.ok()) spdlog::error("journal close: {}", st.to_string());
  }
}

}  // namespace ic::actors
