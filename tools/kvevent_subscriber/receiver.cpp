#include "tools/kvevent_subscriber/receiver.hpp"

#include <cerrno>
#include <chrono>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "index/fingerprint.hpp"
#include "tools/common/codec.hpp"

namespace ic::kvevent {
namespace {

// The 8-byte big-endian value of a frame (callers check the size).
std::uint64_t be8(const zmq::message_t& m) {
  return ic::index::from_wire(std::string_view(static_cast<const char*>(m.data()), m.size())).value_or(0);
}


constexpr std::uint64_t end_marker = 0xffffffffffffffffull;  // -1 as signed BE8

}  // namespace

std::int64_t mono_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// --- inbound_queue -----------------------------------------------------------------------------

bool inbound_queue::push(inbound&& x, std::chrono::milliseconds timeout) {
  const std::size_t n = x.m.payload.size();
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return q_.empty() || (q_.size() < cap_ && bytes_ + n <= max_bytes_); })) {
    return false;
  }
  bytes_ += n;
  q_.push_back(std::move(x));
  lock.unlock();
  cv_.notify_all();
  return true;
}

bool inbound_queue::pop(inbound& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !q_.empty(); })) return false;
  out = std::move(q_.front());
  q_.pop_front();
  bytes_ -= out.m.payload.size();
  lock.unlock();
  cv_.notify_all();
  return true;
}

std::size_t inbound_queue::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return q_.size();
}

// --- zmq_receiver ------------------------------------------------------------------------------

struct zmq_receiver::impl {
  std::vector<std::string> endpoints, replay_endpoints;
  std::string topic;
  inbound_queue& q;
  core_metrics& metrics;
  logger* log;
  zmq::context_t ctx{1};
  std::vector<zmq::socket_t> subs;
  std::vector<std::unique_ptr<zmq::socket_t>> dealers;

  struct command {
    bool cancel;
    std::size_t source;
    std::uint64_t start;
  };
  std::mutex cmd_mu;
  std::vector<command> commands;

  impl(std::vector<std::string> e, std::vector<std::string> r, std::string t, inbound_queue& q_, core_metrics& m,
       logger* l)
      : endpoints(std::move(e)), replay_endpoints(std::move(r)), topic(std::move(t)), q(q_), metrics(m), log(l) {}
};

zmq_receiver::zmq_receiver(std::vector<std::string> endpoints, std::vector<std::string> replay_endpoints,
                           std::string topic, inbound_queue& q, core_metrics& metrics, logger* log)
    : impl_(std::make_unique<impl>(std::move(endpoints), std::move(replay_endpoints), std::move(topic), q, metrics,
                                   log)) {}

zmq_receiver::~zmq_receiver() {
  impl_->dealers.clear();
  impl_->subs.clear();
}

bool zmq_receiver::open(std::string* err) {
  auto& d = *impl_;
  try {
    for (std::size_t s = 0; s < d.endpoints.size(); ++s) {
      zmq::socket_t sub(d.ctx, zmq::socket_type::sub);
      sub.set(zmq::sockopt::linger, 0);
      sub.set(zmq::sockopt::rcvhwm, 100000);
      sub.set(zmq::sockopt::maxmsgsize, std::int64_t{64} << 20);
      sub.set(zmq::sockopt::subscribe, d.topic);
      sub.connect(d.endpoints[s]);  // libzmq reconnects by itself (reconnect_ivl 100 ms)
      d.subs.push_back(std::move(sub));
      if (d.log) {
        d.log->info("subscribed to engine KV events",
                    {{"endpoint", d.endpoints[s]}, {"topic", d.topic}, {"source", std::to_string(s)}});
      }
    }
    d.dealers.resize(d.endpoints.size());
  } catch (const zmq::error_t& e) {
    *err = std::string("cannot connect to the engine endpoint: ") + e.what();
    return false;
  }
  return true;
}

void zmq_receiver::request_replay(std::size_t source, std::uint64_t start_seq) {
  std::lock_guard<std::mutex> lock(impl_->cmd_mu);
  impl_->commands.push_back({false, source, start_seq});
}

void zmq_receiver::cancel_replay(std::size_t source) {
  std::lock_guard<std::mutex> lock(impl_->cmd_mu);
  impl_->commands.push_back({true, source, 0});
}

void zmq_receiver::run() {
  auto& d = *impl_;
  std::vector<zmq::message_t> frames;
  while (!stop_) {
    // Commands from the core: open or close replay DEALERs.
    std::vector<impl::command> cmds;
    {
      std::lock_guard<std::mutex> lock(d.cmd_mu);
      cmds.swap(d.commands);
    }
    for (const auto& c : cmds) {
      if (c.source >= d.dealers.size()) continue;
      d.dealers[c.source].reset();
      if (c.cancel || c.source >= d.replay_endpoints.size()) continue;
      try {
        auto dealer = std::make_unique<zmq::socket_t>(d.ctx, zmq::socket_type::dealer);
        dealer->set(zmq::sockopt::linger, 0);
        dealer->set(zmq::sockopt::rcvhwm, 0);
        dealer->set(zmq::sockopt::maxmsgsize, std::int64_t{64} << 20);
        dealer->connect(d.replay_endpoints[c.source]);
        std::string start = ic::tools::be64(c.start);
        // A DEALER must send the empty delimiter itself (§2.6).
        dealer->send(zmq::message_t(), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
        dealer->send(zmq::buffer(start), zmq::send_flags::dontwait);
        d.dealers[c.source] = std::move(dealer);
        if (d.log) {
          d.log->info("replay requested", {{"source", std::to_string(c.source)}, {"from_seq", std::to_string(c.start)},
                                           {"endpoint", d.replay_endpoints[c.source]}});
        }
      } catch (const zmq::error_t& e) {
        if (d.log) d.log->warn("replay request failed", {{"error", e.what()}});
      }
    }

    std::vector<zmq::pollitem_t> items;
    std::vector<std::pair<bool, std::size_t>> who;  // (is_dealer, source)
    for (std::size_t s = 0; s < d.subs.size(); ++s) {
      items.push_back({d.subs[s].handle(), 0, ZMQ_POLLIN, 0});
      who.emplace_back(false, s);
    }
    for (std::size_t s = 0; s < d.dealers.size(); ++s) {
      if (!d.dealers[s]) continue;
      items.push_back({d.dealers[s]->handle(), 0, ZMQ_POLLIN, 0});
      who.emplace_back(true, s);
    }
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(20));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      throw;
    }
    last_loop_ms_ = mono_ms();
    for (std::size_t i = 0; i < items.size() && !stop_; ++i) {
      if (!(items[i].revents & ZMQ_POLLIN)) continue;
      auto [is_dealer, s] = who[i];
      zmq::socket_t& sock = is_dealer ? *d.dealers[s] : d.subs[s];
      // Bounded burst per socket so one busy source cannot starve the others.
      for (int burst = 0; burst < 256 && !stop_; ++burst) {
        frames.clear();
        std::optional<std::size_t> n;
        try {
          n = zmq::recv_multipart(sock, std::back_inserter(frames), zmq::recv_flags::dontwait);
        } catch (const zmq::error_t& e) {
          if (e.num() == EINTR) break;
          if (d.log) d.log->warn("zmq recv failed; reconnecting", {{"error", e.what()}});
          break;
        }
        if (!n) break;
        inbound in;
        in.source = s;
        if (!is_dealer) {
          if (frames.empty() || frames.back().size() == 0) {
            d.metrics.drop_batch(s, batch_drop::frames);
            continue;
          }
          in.k = inbound::kind::live;
          if (frames.size() >= 3) in.m.topic = frames.front().to_string();
          if (frames.size() >= 2 && frames[frames.size() - 2].size() == 8) {
            in.m.sequenced = true;
            in.m.seq = be8(frames[frames.size() - 2]);
          }
          in.m.payload = frames.back().to_string();
        } else {
          // ["", seq, payload] or ["", topic, seq, payload]; END has seq FF×8, empty payload.
          if (frames.size() < 3 || frames.front().size() != 0) continue;
          const auto& seq = frames[frames.size() - 2];
          if (seq.size() != 8) continue;
          std::uint64_t q = be8(seq);
          if (q == end_marker && frames.back().size() == 0) {
            in.k = inbound::kind::replay_end;
          } else {
            in.k = inbound::kind::replay;
            in.m.sequenced = true;
            in.m.seq = q;
            in.m.payload = frames.back().to_string();
          }
        }
        // Full queue: stop reading here (never drop the oldest) until the core catches up.
        while (!stop_ && !d.q.push(std::move(in), std::chrono::milliseconds(50))) {
          last_loop_ms_ = mono_ms();
        }
        if (is_dealer && !d.dealers[s]) break;
      }
    }
  }
}

}  // namespace ic::kvevent
