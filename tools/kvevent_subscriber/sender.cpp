#include "tools/kvevent_subscriber/sender.hpp"

#include <algorithm>
#include <thread>

namespace ic::kvevent {
namespace {

// gRPC codes the sender never retries (A16): the request itself is wrong.
bool permanent(int code) {
  return code == 3 /*INVALID_ARGUMENT*/ || code == 12 /*UNIMPLEMENTED*/ || code == 7 /*PERMISSION_DENIED*/ ||
         code == 16 /*UNAUTHENTICATED*/;
}
constexpr int resource_exhausted = 8;

const char* rpc_of(const op& o) {
  return (o.type == op_type::add || o.type == op_type::t2) ? "ReportCacheState" : "PublishEvent";
}

}  // namespace

// --- rpc_metrics -----------------------------------------------------------------------------

const std::vector<double>& rpc_metrics::bounds() {
  static const std::vector<double> b{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  return b;
}

void rpc_metrics::record(const char* rpc, const rpc_outcome& o) {
  std::string result = o.code != 0 ? o.code_name : (o.accepted ? "ok" : "not_accepted");
  std::lock_guard<std::mutex> lock(mu_);
  totals_[{rpc, result}]++;
  auto& h = durations_[rpc];
  if (h.buckets.empty()) h.buckets.assign(bounds().size(), 0);
  for (std::size_t i = 0; i < bounds().size(); ++i)
    if (o.seconds <= bounds()[i]) h.buckets[i]++;
  h.sum += o.seconds;
  h.count++;
}

void rpc_metrics::ack_reason(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  reasons_[reason]++;
}

std::map<std::pair<std::string, std::string>, std::uint64_t> rpc_metrics::totals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return totals_;
}

std::map<std::string, std::uint64_t> rpc_metrics::ack_reasons() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reasons_;
}

std::map<std::string, rpc_metrics::histogram> rpc_metrics::durations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return durations_;
}

std::uint64_t rpc_metrics::count(const std::string& rpc, const std::string& result) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = totals_.find({rpc, result});
  return it == totals_.end() ? 0 : it->second;
}

// --- sender ----------------------------------------------------------------------------------

sender::sender(sender_options o, op_log& log, cache_client& client, resync_fn resync, core_metrics& core,
               rpc_metrics& rpc, logger* logger, clock_fn clock)
    : opts_(o),
      log_(log),
      client_(client),
      resync_(std::move(resync)),
      core_(core),
      rpc_(rpc),
      logger_(logger),
      clock_(std::move(clock)),
      backoff_ms_(o.initial_backoff_ms) {}

bool sender::should_quit() const {
  if (aborted_) return true;
  if (!stopping_) return false;
  std::int64_t d = drain_deadline_ms_.load();
  return d > 0 && clock_() >= d;
}

void sender::run() {
  while (!should_quit()) {
    if (log_.resync_needed()) {
      // The log overflowed (A16): as soon as the server answers, rebuild from the tables.
      if (stopping_) return;
      std::uint64_t gen = log_.generation();
      if (client_.get_state()) {
        failing_ = false;
        outage_ = false;
        resync_(resync_reason::overflow);
        wait_for_resync(gen);
      } else {
        backoff_sleep();
      }
      continue;
    }
    op o;
    if (!log_.pop(o, std::chrono::milliseconds(20))) {
      if (stopping_) return;  // drained
      if (opts_.idle_probe_ms > 0 && clock_() - last_probe_ms_ >= opts_.idle_probe_ms) idle_probe();
      continue;
    }
    busy_ = true;
    deliver(o);
    busy_ = false;
  }
}

rpc_outcome sender::call(const op& o) {
  rpc_outcome out = (o.type == op_type::add || o.type == op_type::t2) ? client_.report(o) : client_.publish(o);
  rpc_.record(rpc_of(o), out);
  return out;
}

sender::result sender::deliver(op& o) {
  while (!should_quit()) {
    if (outage_) {
      bool resynced = false;
      if (!recovered_after_outage(&resynced)) {
        backoff_sleep();
        continue;
      }
      if (resynced) return result::abandoned;  // the resync covers this operation
    }
    rpc_outcome r = call(o);
    if (r.code == 0 && r.accepted) {
      if (!r.reason.empty()) {
        rpc_.ack_reason(r.reason);
        if (!warned_reasons_[r.reason] && logger_) {
          warned_reasons_[r.reason] = true;
          logger_->warn("server accepted the report with a drop reason", {{"reason", r.reason}});
        }
      }
      backoff_ms_ = opts_.initial_backoff_ms;
      failing_ = false;
      return result::delivered;
    }
    if (r.code != 0 && permanent(r.code)) {
      rpc_.add_dropped();
      if (logger_) {
        logger_->error("server rejected the operation; dropping it",
                       {{"rpc", rpc_of(o)}, {"code", r.code_name}, {"error", r.message}});
      }
      return result::dropped;
    }
    if (r.code == resource_exhausted && o.entries.size() > 1) {
      // Too large for the server: split in half, first half first (order kept).
      op second = o;
      std::size_t half = o.entries.size() / 2;
      second.entries.assign(o.entries.begin() + static_cast<std::ptrdiff_t>(half), o.entries.end());
      o.entries.resize(half);
      if (deliver(o) == result::abandoned) return result::abandoned;
      return deliver(second);
    }
    if (!failing_) {
      failing_since_ms_ = clock_();
      if (logger_) {
        logger_->warn(r.code != 0 ? "report failed; will retry" : "server did not accept the report; will retry",
                      {{"rpc", rpc_of(o)}, {"code", r.code_name}, {"reason", r.reason}, {"error", r.message}});
      }
    }
    failing_ = true;
    // A refusal (accepted=false) comes from a live server that kept its state: retry it as
    // it is. A transport failure may hide a restart: probe before retrying.
    if (r.code != 0) outage_ = true;
    backoff_sleep();
  }
  return result::abandoned;
}

void sender::idle_probe() {
  last_probe_ms_ = clock_();
  if (outage_) {
    bool resynced = false;
    recovered_after_outage(&resynced);
    return;
  }
  auto view = client_.get_state();
  if (!view) {
    if (!failing_) {
      failing_since_ms_ = clock_();
      if (logger_) logger_->warn("server unreachable while idle; will retry", {});
    }
    failing_ = true;
    outage_ = true;
    return;
  }
  const bool lost = last_total_ > 0 && view->total_prefixes == 0 && core_.reported_keys.load() > 0;
  last_total_ = view->total_prefixes;
  if (lost && opts_.resync != resync_policy::never) {
    if (logger_) logger_->warn("server lost its state without a failed call; resyncing", {});
    std::uint64_t gen = log_.generation();
    resync_(resync_reason::outage);
    wait_for_resync(gen);
  }
}

bool sender::recovered_after_outage(bool* resynced) {
  auto view = client_.get_state();
  if (!view) return false;
  failing_ = false;
  last_total_ = view->total_prefixes;
  outage_ = false;
  bool resync = false;
  switch (opts_.resync) {
    case resync_policy::always: resync = true; break;
    case resync_policy::never: resync = false; break;
    default: {
      // auto (A18): resync only when the server evidently lost its state.
      std::int64_t stats = last_stats_ms_.load();
      bool lost_prefixes = view->total_prefixes == 0 && core_.reported_keys.load() > 0;
      bool lost_replica = !view->has_replica && stats > 0 &&
                          failing_since_ms_.load() - stats <= 2 * opts_.stats_interval_ms;
      resync = lost_prefixes || lost_replica;
      break;
    }
  }
  if (logger_) {
    logger_->info("server reachable again", {{"resync", resync ? "true" : "false"},
                                            {"total_prefixes", std::to_string(view->total_prefixes)}});
  }
  if (resync) {
    std::uint64_t gen = log_.generation();
    resync_(resync_reason::outage);
    wait_for_resync(gen);
    *resynced = true;
  }
  return true;
}

void sender::wait_for_resync(std::uint64_t generation) {
  while (log_.generation() == generation && !should_quit()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void sender::backoff_sleep() {
  std::uniform_real_distribution<double> jitter(0.8, 1.2);
  auto ms = static_cast<std::int64_t>(static_cast<double>(backoff_ms_) * jitter(rng_));
  backoff_ms_ = std::min(opts_.max_backoff_ms, backoff_ms_ * 2);
  std::int64_t until = clock_() + std::max<std::int64_t>(ms, 1);
  while (clock_() < until && !should_quit()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<std::int64_t>(5, until - clock_() + 1)));
  }
}

}  // namespace ic::kvevent
