#include "actors/replication.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/test_hooks.hpp"

namespace ic::actors {

void pending_batches::add(std::string id, std::vector<item> items) {
  std::lock_guard<std::mutex> lk(mu_);
  map_[std::move(id)] = std::move(items);
}

std::optional<std::vector<pending_batches::item>> pending_batches::take(std::string_view id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = map_.find(std::string(id));
  if (it == map_.end()) return std::nullopt;
  auto out = std::move(it->second);
  map_.erase(it);
  return out;
}

std::size_t pending_batches::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return map_.size();
}

stream_follower::stream_follower(journal::record_log* log, replication_link* link,
                                 coordinator_actor coordinator)
    : log_(log), link_(link), coordinator_(std::move(coordinator)) {
  thread_ = std::thread([this] { run(); });
}

stream_follower::~stream_follower() { stop(); }

void stream_follower::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void stream_follower::run() {
  const auto delay = test_follow_delay();
  auto st = log_->follow(
      [&](const journal::log_batch& b) {
        if (delay.count() > 0) std::this_thread::sleep_for(delay);
        auto sinks = link_->pending.take(b.batch_id);
        const auto& records = *b.records;
        // A batch of ours carries one sink per record; a partial delivery (the snapshot
        // covered its head) cannot be ours: ours are published after recovery.
        if (sinks && sinks->size() != records.size()) sinks.reset();
        committed_batch batch;
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
  if (!st.ok()) link_->halted = true;
  if (!st.ok())
    spdlog::error("{}: the stream follower stopped, this replica no longer applies: {}",
                  log_->describe(), st.to_string());
}

}  // namespace ic::actors
