#include "journal/jetstream/jetstream_record_log.hpp"

#include <algorithm>
#include <optional>
#include <thread>

#include "journal/jetstream/replica_duties.hpp"

namespace ic::journal::jetstream {
namespace {

// How long the reader may keep failing (other than a gap) before follow() subscribes again.
constexpr std::chrono::seconds kResubscribeAfter{5};
// How long one such subscription may take. follow() cannot see `stop` while it waits, so a
// shutdown while NATS is unreachable waits at most this long (not the whole open_timeout);
// an attempt that runs out is tried again after another kResubscribeAfter.
constexpr std::chrono::milliseconds kResubscribeBudget{1000};

void raise(std::atomic<std::uint64_t>& a, std::uint64_t v) {
  std::uint64_t cur = a.load();
  while (cur < v && !a.compare_exchange_weak(cur, v)) {
  }
}

status too_many_records() {
  return status{errc::invalid_argument, "a replicated batch carries at most " +
                                            std::to_string(max_records_per_batch) + " records"};
}

std::int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

result<std::unique_ptr<jetstream_log>> jetstream_log::open(const jetstream_log_options& opts) {
  std::unique_ptr<jetstream_log> l(new jetstream_log());
  l->opts_ = opts;
  l->reset_armed_ = opts.reset_uncovered;
  auto w = writer::open(opts.nats);
  if (!w.ok()) return w.status();
  l->writer_ = std::move(w).value();
  journal::options local = opts.local;
  local.external_positions = true;
  auto lg = journal::log::open(opts.snapshot_dir, local);
  if (!lg.ok()) return lg.status();
  l->local_ = std::move(lg).value();
  if (opts.shared_snapshot_interval.count() > 0) {
    auto sh = shared_snapshots::open(opts.nats, opts.shared);
    if (!sh.ok()) return sh.status();
    l->shared_ = std::move(sh).value();
    l->duties_ = std::thread([p = l.get()] { p->run_duties(); });
  }
  return l;
}

jetstream_log::~jetstream_log() { (void)close(); }

std::string jetstream_log::describe() const { return "stream " + opts_.nats.stream; }

std::size_t jetstream_log::fitting_prefix(const std::vector<record_in>& records) const {
  return writer_ ? writer_->fitting_prefix(records) : records.size();
}

std::string jetstream_log::next_batch_id() const { return msg_id(writer_->peek_next_id()); }

result<std::uint64_t> jetstream_log::append(const std::vector<record_in>& records) {
  if (records.size() > max_records_per_batch) return too_many_records();
  auto ack = writer_->append(records);
  if (!ack.ok()) return ack.status();
  note_stream_last(ack->position);
  return record_position(ack->position, 0);
}

result<std::uint64_t> jetstream_log::append_keyed(const std::vector<record_in>& records,
                                                  const dedup_key& key) {
  if (records.size() > max_records_per_batch) return too_many_records();
  auto ack = writer_->append(records, batch_id{key.scope, key.period, key.slot});
  if (!ack.ok()) return ack.status();
  note_stream_last(ack->position);
  return record_position(ack->position, 0);
}

result<std::uint64_t> jetstream_log::append_conditional(const std::vector<record_in>& records,
                                                        std::string_view scope,
                                                        std::uint64_t expected_last) {
  if (records.size() > max_records_per_batch) return too_many_records();
  auto ack = writer_->append_conditional(records, std::string(scope), expected_last);
  if (!ack.ok()) return ack.status();
  note_stream_last(ack->position);
  return record_position(ack->position, 0);
}

std::uint64_t jetstream_log::scope_position(std::string_view scope) const {
  std::lock_guard<std::mutex> lk(scopes_mu_);
  auto it = scopes_.find(scope);
  return it == scopes_.end() ? 0 : it->second;
}

void jetstream_log::note_scope(const delivered_batch& b) {
  const std::string& prefix = opts_.nats.subject_prefix;
  if (b.subject.size() <= prefix.size() + 1 || b.subject.compare(0, prefix.size(), prefix) != 0)
    return;
  const std::string_view scope = std::string_view(b.subject).substr(prefix.size() + 1);
  if (scope == "b") return;
  std::lock_guard<std::mutex> lk(scopes_mu_);
  auto& last = scopes_[std::string(scope)];
  last = std::max(last, b.position);
}

void jetstream_log::note_stream_last(std::uint64_t seq) {
  raise(stream_last_, seq);
  std::int64_t zero = 0;
  if (stream_seq_of(delivered_.load()) < stream_last_.load())
    behind_since_ns_.compare_exchange_strong(zero, wall_ns());
}

void jetstream_log::note_delivered() {
  if (stream_seq_of(delivered_.load()) >= stream_last_.load()) behind_since_ns_ = 0;
}

template <typename Visit>
bool jetstream_log::deliver(const delivered_batch& b, Visit&& visit) {
  raise(stream_last_, b.position);
  last_stored_at_ns_ = b.stored_at_ns;
  note_scope(b);
  struct caught_up_check {
    jetstream_log* self;
    ~caught_up_check() { self->note_delivered(); }
  } check{this};
  if (!b.problem.ok()) {
    // The same bytes on every replica: skipped the same way everywhere (spec §3.8).
    ++skipped_;
    raise(delivered_, record_position(b.position, max_records_per_batch - 1));
    return true;
  }
  std::vector<record_view> views;
  views.reserve(b.records.size());
  for (std::size_t i = 0; i < b.records.size(); ++i) {
    const std::uint64_t pos = record_position(b.position, i);
    if (pos <= delivered_.load()) continue;  // already covered by the snapshot
    record_view v = b.records[i];
    v.seq = pos;
    views.push_back(v);
  }
  if (!views.empty()) delivered_ = views.back().seq;
  return visit(b, views);
}

status jetstream_log::read_after(std::uint64_t after,
                                 const std::function<bool(const record_view&)>& visit) {
  delivered_ = after;
  at_gap_ = false;
  marking_ = true;  // the mark holds the purge at what this replica still reads
  const std::uint64_t from = needed_from(after);
  auto st = writer_->state();
  if (!st.ok()) return st.status();
  note_stream_last(st->last_seq);
  // A conditional scope's last message before `from` is not delivered again: ask for it.
  // One after `from` is delivered below (and wins).
  for (const auto& scope : opts_.conditional_scopes) {
    auto last = writer_->last_on_subject(scope);
    if (!last.ok()) return last.status();
    if (*last != 0 && *last < from) {
      std::lock_guard<std::mutex> lk(scopes_mu_);
      scopes_[scope] = *last;
    }
  }
  stream_first_ = st->first_seq;
  if (st->first_seq > from && st->msgs > 0 && after > 0) {
    ++gaps_;
    return status{errc::out_of_range,
                  describe() + ": purged past this replica's snapshot (first sequence " +
                      std::to_string(st->first_seq) + ", needed " + std::to_string(from) + ")" +
                      (shared_ ? "" : "; shared snapshots are off (--shared-snapshot-interval)")};
  }
  auto r = reader::open(opts_.nats, from);
  if (!r.ok()) return r.status();
  reader_ = std::move(r).value();
  if (st->last_seq < from) return status::success();
  status s = reader_->follow(
      st->last_seq,
      [&](const delivered_batch& b) {
        return deliver(b, [&](const delivered_batch&, const std::vector<record_view>& views) {
          for (const auto& v : views)
            if (!visit(v)) return false;
          return true;
        });
      },
      opts_.catch_up_timeout);
  if (!s.ok() && s.code() == errc::out_of_range) ++gaps_;
  return s;
}

status jetstream_log::follow(const std::function<void(const log_batch&)>& visit,
                             const std::atomic<bool>& stop) {
  if (!reader_) return status{errc::invalid_argument, "follow() before read_after()"};
  using steady = std::chrono::steady_clock;
  std::uint64_t resets_before = 0;  // of readers replaced below
  std::optional<steady::time_point> failing_since;
  while (!stop.load()) {
    auto got = reader_->next(std::chrono::milliseconds(200));
    resets_ = resets_before + reader_->resets();
    if (!got.ok()) {
      if (got.status().code() == errc::out_of_range) {
        ++gaps_;
        live_gap_counted_ = true;
        at_gap_ = true;
        report_live_gap(got.status());
        return got.status();
      }
      // Reconnecting, or the library's ordered consumer could not be recreated. The library
      // usually heals it within a second; when the errors last longer, subscribe again from
      // the next expected sequence (the sequence check carries over, nothing is skipped).
      if (!failing_since) failing_since = steady::now();
      if (steady::now() - *failing_since >= kResubscribeAfter) {
        const std::uint64_t from = reader_->expected();
        options once = opts_.nats;
        once.open_timeout = std::min(once.open_timeout, kResubscribeBudget);
        auto r = reader::open(once, from);
        if (r.ok()) {
          resets_before += reader_->resets() + 1;
          reader_ = std::move(r).value();
          failing_since.reset();
          event(true, "the stream reader failed for " +
                          std::to_string(kResubscribeAfter.count()) + " s (" +
                          got.status().to_string() + "); subscribed again from sequence " +
                          std::to_string(from));
          continue;
        }
        failing_since = steady::now();  // try again after another interval
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    failing_since.reset();
    if (!got->has_value()) continue;
    deliver(**got, [&](const delivered_batch& b, const std::vector<record_view>& views) {
      if (views.empty()) return true;
      log_batch lb;
      lb.batch_id = b.msg_id;
      lb.records = &views;
      lb.stored_at_ns = b.stored_at_ns;
      visit(lb);
      return true;
    });
  }
  return status::success();
}

std::string jetstream_log::torn_tail() const {
  return local_->info().dropped_torn_tail ? local_->info().torn_tail_reason : std::string();
}

result<snapshot_writer> jetstream_log::begin_snapshot(std::uint64_t covering_position) {
  return local_->begin_snapshot(covering_position);
}

result<std::size_t> jetstream_log::prune_snapshots(std::size_t keep) {
  return local_->prune_snapshots(keep);
}

log_stats jetstream_log::stats() const {
  log_stats s;
  s.replicated = true;
  s.connected = writer_ && writer_->connected();
  s.log_position = stream_last_.load();
  s.delivered_position = stream_seq_of(delivered_.load());
  s.last_stored_at_ns = last_stored_at_ns_.load();
  s.behind_since_ns = behind_since_ns_.load();
  if (writer_) {
    const writer_stats w = writer_->stats();
    s.publish_retries = w.retries;
    s.unknown_outcomes = w.unknown_outcomes;
  }
  s.consumer_resets = resets_.load();
  s.gaps = gaps_.load();
  s.journal_resets = journal_resets_.load();
  s.skipped_batches = skipped_.load();
  s.first_position = stream_first_.load();
  s.shared_snapshots = shared_ != nullptr;
  s.shared_snapshot_bytes = shared_bytes_.load();
  s.shared_snapshot_seconds = shared_seconds_.load();
  s.shared_snapshot_seen_ns = shared_seen_ns_.load();
  s.lease_holder = lease_holder_.load();
  return s;
}

status jetstream_log::close() {
  stop_duties();
  shared_.reset();
  reader_.reset();
  writer_.reset();
  if (local_) {
    status s = local_->close();
    local_.reset();
    return s;
  }
  return status::success();
}

}  // namespace ic::journal::jetstream
