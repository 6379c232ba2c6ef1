// jetstream_log's shared-snapshot duties (spec/scaleout.md §3.6–3.8): start-up from the
// local or the shared snapshot, the lease, replica marks, uploads and purge. The decisions
// are plain functions in replica_duties.hpp; this file does the NATS calls around them.
#include <chrono>

#include "journal/jetstream/jetstream_record_log.hpp"
#include "journal/jetstream/replica_duties.hpp"

namespace ic::journal::jetstream {
namespace {

using steady = std::chrono::steady_clock;

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now().time_since_epoch())
      .count();
}

std::int64_t wall_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// The newest complete, readable local snapshot's covering position; nullopt when none.
result<std::optional<snapshot_info>> newest_local(const journal::log& local) {
  auto list = local.list_snapshots();
  if (!list.ok()) return list.status();
  std::optional<snapshot_info> out;
  for (const auto& si : *list)
    if (si.complete && si.problem.empty()) out = si;  // increasing id: the last one wins
  return out;
}

}  // namespace

void jetstream_log::event(bool warn, const std::string& line) const {
  if (opts_.on_event) opts_.on_event(warn, describe() + ": " + line);
}

result<snapshot_info> jetstream_log::read_newest_snapshot(
    const std::function<void(const snapshot_info&)>& on_begin,
    const std::function<status(std::string_view)>& on_chunk,
    std::vector<status>* skipped) const {
  // --journal-reset applies to the start-up only (the first call); reloads never reset.
  const bool may_reset = reset_armed_.exchange(false);
  if (!shared_) return local_->read_newest_snapshot(on_begin, on_chunk, skipped);
  auto local = newest_local(*local_);
  if (!local.ok()) return local.status();
  auto st = writer_->state();
  if (!st.ok()) return st.status();
  std::optional<std::uint64_t> covering;
  auto m = shared_->latest();
  if (m.ok())
    covering = m->covering_seq;
  else if (m.status().code() != errc::not_found)
    return m.status();
  std::optional<std::uint64_t> local_pos;
  if (*local) local_pos = (*local)->covering_seq;
  const start_plan plan = plan_start(local_pos, st->first_seq, covering);
  const std::string need =
      "the stream's first sequence is " + std::to_string(st->first_seq) + ", this replica needs " +
      std::to_string(needed_from(local_pos.value_or(0)));
  // A gap met while following was counted there already (one gap, one count).
  if (const bool counted = live_gap_counted_.exchange(false); plan.gap && !counted) ++gaps_;
  if (may_reset && plan.source == start_source::uncovered) {
    auto marks = shared_->live_marks();
    if (!marks.ok()) return marks.status();
    const auto holder = replica_holding_the_state(*marks, opts_.nats.replica_id, st->first_seq);
    if (!holder) return accept_loss(st->first_seq, st->msgs, local_pos, covering);
    event(true, "--journal-reset refused: replica " + holder->first + " is live with mark " +
                    std::to_string(holder->second) + " (the stream's first sequence is " +
                    std::to_string(st->first_seq) +
                    "): it lost nothing and uploads a covering shared snapshot itself; a "
                    "reset beside it would diverge from it");
  } else if (may_reset) {
    event(false, "--journal-reset not needed: the " +
                     std::string(plan.source == start_source::shared ? "shared snapshot"
                                 : plan.source == start_source::local ? "local snapshot"
                                                                      : "whole stream") +
                     " covers what this replica needs (" + need +
                     "); starting normally, nothing lost");
  }
  switch (plan.source) {
    case start_source::local:
    case start_source::stream:
      return local_->read_newest_snapshot(on_begin, on_chunk, skipped);
    case start_source::uncovered:
      return status{errc::out_of_range,
                    describe() + ": purged past this replica (" + need +
                        ") and no shared snapshot covers it (" +
                        (covering ? "newest covers " + std::to_string(*covering) : "none") +
                        "); refusing to start with a partial index (--journal-reset accepts "
                        "the loss)"};
    case start_source::shared:
      break;
  }
  if (plan.gap) event(true, "gap: " + need + "; loading the shared snapshot");
  return load_shared(on_begin, on_chunk);
}

status jetstream_log::accept_loss(std::uint64_t stream_first, std::uint64_t stream_msgs,
                                  std::optional<std::uint64_t> local_pos,
                                  std::optional<std::uint64_t> manifest_covering) const {
  // The stream holds `first` onwards; the best snapshot ends where the uncovered range
  // begins. The state starts empty just before `first` (reset_through; read_after reads
  // from `first`, needed_from).
  const std::uint64_t first = std::max<std::uint64_t>(1, stream_first);
  std::uint64_t lost_from = local_pos ? needed_from(*local_pos) : 1;
  if (manifest_covering) lost_from = std::max(lost_from, *manifest_covering + 1);
  reset_through_ = record_position(first, 0) - 1;
  ++journal_resets_;
  force_upload_ = true;
  event(true, "journal reset (--journal-reset): stream seq " + std::to_string(lost_from) + ".." +
                  std::to_string(first - 1) +
                  " is lost (purged; what of it no snapshot holds: the local one " +
                  (local_pos ? "needs " + std::to_string(needed_from(*local_pos))
                             : std::string("is absent")) +
                  ", the shared one " +
                  (manifest_covering ? "covers " + std::to_string(*manifest_covering)
                                     : std::string("is absent")) +
                  "); this replica drops everything before stream seq " + std::to_string(first) +
                  " and rebuilds from the " + std::to_string(stream_msgs) +
                  " messages the stream holds, then writes the shared snapshot that lets "
                  "halted replicas recover");
  return status{errc::not_found, describe() + ": journal reset: starting empty before stream seq " +
                                     std::to_string(first)};
}

result<snapshot_info> jetstream_log::load_shared(
    const std::function<void(const snapshot_info&)>& on_begin,
    const std::function<status(std::string_view)>& on_chunk) const {
  const auto t0 = steady::now();
  auto got = shared_->get();
  if (!got.ok()) return got.status();
  snapshot_info info;
  info.complete = true;
  info.total_bytes = got->second.size();
  bool begun = false;
  status s = decode_snapshot_blob(got->second, &info.covering_seq, [&](std::string_view c) {
    if (!begun) on_begin(info);
    begun = true;
    ++info.chunk_count;
    return on_chunk(c);
  });
  if (!s.ok()) return s;
  if (!begun) on_begin(info);
  const double secs = std::chrono::duration<double>(steady::now() - t0).count();
  event(false, "loaded the shared snapshot by " + got->first.writer + " covering stream seq " +
                   std::to_string(got->first.covering_seq) + " (" +
                   std::to_string(info.total_bytes) + " bytes, " + std::to_string(secs) +
                   " s); following from " + std::to_string(got->first.covering_seq + 1));
  return info;
}

status jetstream_log::truncate_through(std::uint64_t position) {
  // After a journal reset the halted replicas wait for this replica's state: upload the
  // first local snapshot at once, lease or not (the manifest CAS keeps two writers safe).
  const bool forced = shared_ && force_upload_.exchange(false);
  if (!shared_ || (!forced && !lease_holder_.load())) return status::success();
  const std::int64_t last = last_upload_ns_.load();
  const auto interval = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            opts_.shared_snapshot_interval)
                            .count();
  if (!forced && last != 0 && steady_ns() - last < interval) return status::success();
  // A failed upload never fails the local snapshot (it is logged; the next one retries).
  auto skip = [&](const std::string& why) {
    shared_not_written(forced, true, why);
    return status::success();
  };
  auto local = newest_local(*local_);
  if (!local.ok()) return skip(local.status().to_string());
  if (!*local || (*local)->covering_seq != position)
    return skip("no local snapshot covers " + std::to_string(position));
  // The same bytes as the local snapshot, read back (the coordinator still holds; the
  // upload itself runs on the duties thread).
  std::string blob = encode_snapshot_blob(position, {});
  blob.reserve(blob.size() + (*local)->total_bytes + 4 * (*local)->chunk_count);
  status s = local_->read_snapshot((*local)->id, [&](std::string_view c) {
    append_blob_chunk(&blob, c);
    return status::success();
  });
  if (!s.ok()) return skip(s.to_string());
  last_upload_ns_ = steady_ns();
  {
    std::lock_guard<std::mutex> lk(duty_mu_);
    const bool still_forced = forced || (upload_ && upload_->forced);  // not yet taken
    upload_ = upload_job{position, std::move(blob), still_forced};
  }
  duty_cv_.notify_all();
  return status::success();
}

void jetstream_log::shared_not_written(bool forced, bool warn, const std::string& why) const {
  event(warn, "shared snapshot not written: " + why);
  // A reset's forced upload that did not commit: the next local snapshot tries again.
  if (forced) force_upload_ = true;
}

void jetstream_log::upload_and_purge(std::uint64_t position, const std::string& blob,
                                     bool forced, bool may_purge) {
  const auto t0 = steady::now();
  const std::uint64_t covering = not_needed_through(position);
  auto st = writer_->state();
  const std::uint64_t first = st.ok() ? st->first_seq : 0;
  auto prev = shared_->latest();
  std::uint64_t revision = 0;
  if (prev.ok()) {
    if (prev->covering_seq >= covering) return;  // a newer (or the same) one is committed
    revision = prev->revision;
  } else if (prev.status().code() != errc::not_found) {
    shared_not_written(forced, true, prev.status().to_string());
    return;
  }
  auto m = shared_->put(covering, blob, revision, first);
  if (!m.ok()) {
    shared_not_written(forced, true, m.status().to_string());
    return;
  }
  if (!m->has_value()) {
    shared_not_written(forced, false, "another writer committed first");
    return;
  }
  const double secs = std::chrono::duration<double>(steady::now() - t0).count();
  shared_bytes_ = blob.size();
  shared_seconds_ = secs;
  shared_seen_covering_ = covering;
  shared_seen_ns_ = wall_now_ns();
  event(false, "shared snapshot written: covers stream seq " + std::to_string(covering) + ", " +
                   std::to_string(blob.size()) + " bytes, " + std::to_string(secs) + " s");
  committed_covering_ = covering;
  if (may_purge) purge(first);
}

void jetstream_log::purge(std::uint64_t first) {
  if (!committed_covering_) return;
  // Only below a manifest this replica committed and the live replicas' marks (spec
  // §3.6), this replica's own mark fresh first.
  if (status mk = shared_->put_mark(not_needed_through(delivered_.load())); !mk.ok()) {
    event(true, "stream not purged: " + mk.to_string());
    return;
  }
  auto low = shared_->min_live_mark();
  if (!low.ok()) {
    event(true, "stream not purged: " + low.status().to_string());
    return;
  }
  const std::uint64_t bound = purge_bound_of(committed_covering_, *low, opts_.purge_margin);
  if (bound == 0 || bound + 1 <= first) return;
  status p = writer_->truncate_before(bound + 1);
  if (!p.ok()) {
    event(true, "stream not purged: " + p.to_string());
    return;
  }
  stream_first_ = bound + 1;
  event(false, "stream purged below " + std::to_string(bound + 1));
}

void jetstream_log::observe_shared() {
  if (auto st = writer_->state(); st.ok()) stream_first_ = st->first_seq;
  auto m = shared_->latest();
  if (m.ok() && m->covering_seq != shared_seen_covering_.load()) {
    shared_seen_covering_ = m->covering_seq;
    shared_seen_ns_ = wall_now_ns();
  }
}

void jetstream_log::report_live_gap(const status& gap) {
  std::string cover = "shared snapshots are off";
  if (shared_) {
    auto m = shared_->latest();
    cover = m.ok() ? "the newest shared snapshot covers stream seq " +
                         std::to_string(m->covering_seq)
                   : "no shared snapshot (" + m.status().to_string() + ")";
  }
  event(true, gap.to_string() + "; stopped applying and refusing producers; " + cover +
                  "; reloading from it while lookups serve the last applied state");
}

void jetstream_log::run_duties() {
  lease_keeper keeper(opts_.lease_renew);
  auto next_mark = steady::now();
  std::unique_lock<std::mutex> lk(duty_mu_);
  while (!stop_duties_) {
    lk.unlock();
    const auto now = steady::now();
    // While NATS is unreachable every KV call would wait out the JetStream API timeout
    // (10 s) and hold up shutdown: skip the duties (a renew then fails later: step down).
    if (!writer_->connected()) {
      if (keeper.holder()) {
        keeper.failed(now);
        event(true, "NATS unreachable: stepped down from the snapshotter lease");
      }
      lease_holder_ = false;
      lk.lock();
      duty_cv_.wait_for(lk, std::chrono::milliseconds(200), [&] { return stop_duties_; });
      continue;
    }
    // Halted at a gap, this replica takes no new snapshots: let the lease expire (TTL) so a
    // replica that applies takes it and uploads the snapshot that covers the gap.
    const bool at_gap = at_gap_.load();
    if (at_gap && keeper.holder()) {
      keeper.failed(now);
      event(true, "halted at a gap: stepped down from the snapshotter lease");
    }
    switch (at_gap ? lease_keeper::action::none : keeper.next(now)) {
      case lease_keeper::action::acquire: {
        auto got = shared_->acquire_lease();
        if (got.ok())
          keeper.acquired(*got, now);
        else
          keeper.failed(now);
        if (keeper.holder()) event(false, "took the snapshotter lease");
        break;
      }
      case lease_keeper::action::renew: {
        auto got = shared_->renew_lease(*keeper.held());
        if (got.ok())
          keeper.renewed(*got, now);
        else
          keeper.failed(now);
        if (!keeper.holder()) event(true, "lost the snapshotter lease: stepped down");
        break;
      }
      case lease_keeper::action::none:
        break;
    }
    lease_holder_ = keeper.holder();
    if (marking_.load() && now >= next_mark) {
      observe_shared();
      // Marks move on between uploads: the holder purges as far as they allow now
      // (purge() writes its own mark first).
      if (keeper.holder() && committed_covering_)
        purge(stream_first_.load());
      else if (status s = shared_->put_mark(not_needed_through(delivered_.load())); !s.ok())
        event(true, "replica mark not written: " + s.to_string());
      next_mark = now + opts_.mark_interval;
    }
    lk.lock();
    auto job = std::move(upload_);
    upload_.reset();
    lk.unlock();
    if (job && (keeper.holder() || job->forced))
      upload_and_purge(job->position, job->blob, job->forced, keeper.holder());
    lk.lock();
    duty_cv_.wait_for(lk, std::chrono::milliseconds(200),
                      [&] { return stop_duties_ || upload_.has_value(); });
  }
}

void jetstream_log::stop_duties() {
  {
    std::lock_guard<std::mutex> lk(duty_mu_);
    stop_duties_ = true;
  }
  duty_cv_.notify_all();
  if (duties_.joinable()) duties_.join();
}

}  // namespace ic::journal::jetstream
