#include "actors/replication.hpp"

#include <future>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/test_hooks.hpp"
#include "state/recover.hpp"

namespace ic::actors {

void pending_batches::add(std::string id, std::vector<item> items) {
  const auto at = clock::now();
  std::lock_guard<std::mutex> lk(mu_);
  map_[std::move(id)] = batch{std::move(items), at};
}

std::optional<std::vector<pending_batches::item>> pending_batches::take(std::string_view id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = map_.find(std::string(id));
  if (it == map_.end()) return std::nullopt;
  auto out = std::move(it->second.items);
  map_.erase(it);
  return out;
}

std::vector<pending_batches::item> pending_batches::take_registered_before(
    clock::time_point cutoff) {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<item> out;
  for (auto it = map_.begin(); it != map_.end();) {
    if (it->second.at >= cutoff) {
      ++it;
      continue;
    }
    for (auto& i : it->second.items) out.push_back(std::move(i));
    it = map_.erase(it);
  }
  return out;
}

std::size_t pending_batches::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return map_.size();
}

std::vector<pending_batches::item> pending_batches::take_all() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<item> out;
  for (auto& [_, b] : map_)
    for (auto& it : b.items) out.push_back(std::move(it));
  map_.clear();
  return out;
}

stream_follower::stream_follower(journal::record_log* log, replication_link* link,
                                 coordinator_actor coordinator, state::state_options sopts,
                                 std::chrono::milliseconds reload_retry)
    : log_(log), link_(link), coordinator_(std::move(coordinator)), sopts_(std::move(sopts)),
      reload_retry_(reload_retry) {
  thread_ = std::thread([this] { run(); });
}

stream_follower::~stream_follower() { stop(); }

void stream_follower::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void stream_follower::fail_pending() {
  for (auto& it : link_->pending.take_all())
    if (it.sink)
      it.sink->on_applied(it.slot, append_result{false, ack_reason::journal_unavailable, 0});
}

bool stream_follower::reload() {
  link_->halted = true;
  fail_pending();
  std::string last_error;
  for (;;) {
    if (stop_.load()) return false;
    const auto t0 = std::chrono::steady_clock::now();
    state::recovery_info info;
    std::string error;
    std::unique_ptr<state::tenant_set> set = state::rebuild_state(*log_, sopts_, info, &error);
    if (set) {
      auto job = std::make_shared<reload_job>();
      job->position = log_->last_position();
      job->set = std::move(set);
      auto swapped = std::make_shared<std::promise<void>>();
      auto fut = swapped->get_future();
      job->done = [swapped] { swapped->set_value(); };
      caf::anon_send(coordinator_, reload_atom::value, std::move(job));
      while (fut.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready)
        if (stop_.load()) return false;
      // What the new state applied of the policy scope (as recovery's, runtime.cpp).
      link_->policy_applied =
          journal::record_position(log_->scope_position(journal::policy_scope), 0);
      fail_pending();  // published between the gap and the halt taking effect
      link_->halted = false;
      ++link_->reloads;
      spdlog::warn("{}: reloaded after the gap: snapshot covering {} plus {} records, {:.3f} s; "
                   "applying and accepting producers again",
                   log_->describe(), journal::stream_seq_of(info.snapshot_seq),
                   info.records_replayed,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      return true;
    }
    if (error != last_error)
      spdlog::error("{}: reload after the gap failed: {}; producers stay refused "
                    "(JOURNAL_UNAVAILABLE), lookups serve the last applied state; retrying "
                    "every {} ms",
                    log_->describe(), error, reload_retry_.count());
    last_error = error;
    const auto until = std::chrono::steady_clock::now() + reload_retry_;
    while (std::chrono::steady_clock::now() < until)
      if (stop_.load()) return false;
      else std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void stream_follower::run() {
  const auto delay = test_follow_delay();
  for (;;) {
    auto st = log_->follow(
        [&](const journal::log_batch& b) {
          if (delay.count() > 0) std::this_thread::sleep_for(delay);
          auto sinks = link_->pending.take(b.batch_id);
          const auto& records = *b.records;
          // A batch of ours carries one sink per record; a partial delivery (the snapshot
          // covered its head) cannot be ours: ours are published after recovery.
          if (sinks && sinks->size() != records.size()) sinks.reset();
          committed_batch batch;
          batch.stored_at_ns = b.stored_at_ns;
          batch.items.reserve(records.size());
          for (std::size_t i = 0; i < records.size(); ++i) {
            committed c{records[i].seq, records[i].type, std::string(records[i].payload), nullptr, 0};
            if (sinks) {
              c.sink = std::move((*sinks)[i].sink);
              c.slot = (*sinks)[i].slot;
            }
            batch.items.push_back(std::move(c));
          }
          caf::anon_send(coordinator_, apply_atom::value, std::move(batch));
        },
        stop_);
    if (st.ok()) return;  // stopped
    if (st.code() == journal::errc::out_of_range && reload()) continue;  // a gap
    link_->halted = true;
    if (!stop_.load())
      spdlog::error("{}: the stream follower stopped, this replica no longer applies: {}",
                    log_->describe(), st.to_string());
    return;
  }
}

}  // namespace ic::actors
