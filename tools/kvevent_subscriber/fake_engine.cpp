#include "tools/kvevent_subscriber/fake_engine.hpp"

#include <chrono>

#include <msgpack.hpp>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "index/fingerprint.hpp"
#include "tools/common/codec.hpp"

namespace ic::kvevent::fake {
namespace {


void pack(msgpack::packer<msgpack::sbuffer>& p, const mv& v) {
  switch (v.k) {
    case mv::kind::nil: p.pack_nil(); break;
    case mv::kind::boolean: v.b ? p.pack_true() : p.pack_false(); break;
    case mv::kind::uint: p.pack_uint64(v.u); break;
    case mv::kind::sint: p.pack_int64(v.i); break;
    case mv::kind::f64: p.pack_double(v.d); break;
    case mv::kind::str:
      p.pack_str(static_cast<std::uint32_t>(v.s.size()));
      p.pack_str_body(v.s.data(), static_cast<std::uint32_t>(v.s.size()));
      break;
    case mv::kind::bin:
      p.pack_bin(static_cast<std::uint32_t>(v.s.size()));
      p.pack_bin_body(v.s.data(), static_cast<std::uint32_t>(v.s.size()));
      break;
    case mv::kind::array:
      p.pack_array(static_cast<std::uint32_t>(v.items.size()));
      for (const auto& x : v.items) pack(p, x);
      break;
    case mv::kind::map:
      p.pack_map(static_cast<std::uint32_t>(v.pairs.size()));
      for (const auto& [k, x] : v.pairs) {
        pack(p, k);
        pack(p, x);
      }
      break;
  }
}

}  // namespace

mv nil() { return mv(); }
mv boolean(bool b) {
  mv v;
  v.k = mv::kind::boolean;
  v.b = b;
  return v;
}
mv bin(std::string bytes) {
  mv v;
  v.k = mv::kind::bin;
  v.s = std::move(bytes);
  return v;
}
mv arr(std::vector<mv> items) {
  mv v;
  v.k = mv::kind::array;
  v.items = std::move(items);
  return v;
}
mv map(std::vector<std::pair<mv, mv>> pairs) {
  mv v;
  v.k = mv::kind::map;
  v.pairs = std::move(pairs);
  return v;
}
mv tokens(std::uint32_t first, std::size_t n) {
  std::vector<mv> t;
  t.reserve(n);
  for (std::size_t i = 0; i < n; ++i) t.emplace_back(static_cast<std::uint64_t>(first + i));
  return arr(std::move(t));
}
mv hashes(std::vector<std::uint64_t> hs) {
  std::vector<mv> t;
  for (auto h : hs) t.emplace_back(h);
  return arr(std::move(t));
}
mv stored(std::vector<std::uint64_t> hs, mv parent, mv toks, int block_size, mv lora, std::vector<mv> extra) {
  std::vector<mv> e{mv("BlockStored"), hashes(std::move(hs)), std::move(parent), std::move(toks), mv(block_size),
                    std::move(lora)};
  for (auto& x : extra) e.push_back(std::move(x));
  return arr(std::move(e));
}
mv removed(std::vector<std::uint64_t> hs, std::vector<mv> extra) {
  std::vector<mv> e{mv("BlockRemoved"), hashes(std::move(hs))};
  for (auto& x : extra) e.push_back(std::move(x));
  return arr(std::move(e));
}
mv cleared() { return arr({mv("AllBlocksCleared")}); }
mv batch(double ts, std::vector<mv> events, mv rank, bool two_elements) {
  if (two_elements) return arr({mv(ts), arr(std::move(events))});
  return arr({mv(ts), arr(std::move(events)), std::move(rank)});
}

std::string encode(const mv& v) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> p(buf);
  pack(p, v);
  return std::string(buf.data(), buf.size());
}

// --- engine ----------------------------------------------------------------------------------

struct engine::impl {
  zmq::context_t ctx{1};
  zmq::socket_t pub{ctx, zmq::socket_type::xpub};
  std::unique_ptr<zmq::socket_t> router;
};

engine::engine(options o) : opts_(std::move(o)), impl_(std::make_unique<impl>()) {
  impl_->pub.set(zmq::sockopt::linger, 0);
  impl_->pub.set(zmq::sockopt::sndhwm, 100000);
  impl_->pub.bind(opts_.pub_bind);
  pub_endpoint_ = impl_->pub.get(zmq::sockopt::last_endpoint);
  if (!opts_.router_bind.empty()) {
    impl_->router = std::make_unique<zmq::socket_t>(impl_->ctx, zmq::socket_type::router);
    impl_->router->set(zmq::sockopt::linger, 0);
    impl_->router->bind(opts_.router_bind);
    router_endpoint_ = impl_->router->get(zmq::sockopt::last_endpoint);
    router_thread_ = std::thread([this] { serve(); });
  }
}

engine::~engine() {
  stop_ = true;
  if (router_thread_.joinable()) router_thread_.join();
}

bool engine::wait_for_subscriber(int timeout_ms) {
  zmq::pollitem_t item{impl_->pub.handle(), 0, ZMQ_POLLIN, 0};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    zmq::poll(&item, 1, std::chrono::milliseconds(20));
    if (item.revents & ZMQ_POLLIN) {
      zmq::message_t m;
      (void)impl_->pub.recv(m, zmq::recv_flags::dontwait);
      if (m.size() >= 1 && static_cast<const char*>(m.data())[0] == 1) return true;  // subscribe
    }
  }
  return false;
}

void engine::send_live(std::uint64_t seq, const std::string& payload) {
  std::string s = ic::tools::be64(seq);
  impl_->pub.send(zmq::buffer(opts_.topic), zmq::send_flags::sndmore);
  impl_->pub.send(zmq::buffer(s), zmq::send_flags::sndmore);
  impl_->pub.send(zmq::buffer(payload), zmq::send_flags::none);
}

std::uint64_t engine::publish(const std::string& payload) {
  std::uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seq = next_seq_++;
    ring_[seq] = payload;
    while (ring_.size() > opts_.ring) ring_.erase(ring_.begin());
  }
  send_live(seq, payload);
  return seq;
}

std::uint64_t engine::ring_only(const std::string& payload) {
  std::lock_guard<std::mutex> lock(mu_);
  std::uint64_t seq = next_seq_++;
  ring_[seq] = payload;
  while (ring_.size() > opts_.ring) ring_.erase(ring_.begin());
  return seq;
}

void engine::publish_seq(std::uint64_t seq, const std::string& payload, bool into_ring) {
  if (into_ring) {
    std::lock_guard<std::mutex> lock(mu_);
    ring_[seq] = payload;
  }
  send_live(seq, payload);
}

void engine::restart() {
  std::lock_guard<std::mutex> lock(mu_);
  next_seq_ = 0;
  ring_.clear();
}

void engine::fault_next_round(std::set<std::uint64_t> seqs, bool drop_end) {
  std::lock_guard<std::mutex> lock(mu_);
  drop_seqs_ = std::move(seqs);
  drop_end_ = drop_end;
}

void engine::trim_ring_before(std::uint64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  ring_.erase(ring_.begin(), ring_.lower_bound(seq));
}

std::vector<std::uint64_t> engine::replay_requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

void engine::serve() {
  zmq::socket_t& r = *impl_->router;
  std::vector<zmq::message_t> frames;
  while (!stop_) {
    zmq::pollitem_t item{r.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(20));
    if (!(item.revents & ZMQ_POLLIN)) continue;
    frames.clear();
    if (!zmq::recv_multipart(r, std::back_inserter(frames), zmq::recv_flags::dontwait)) continue;
    if (frames.size() != 3 || frames[2].size() != 8) continue;  // "Invalid replay request": no answer
    std::uint64_t start = ic::index::from_wire(frames[2].to_string_view()).value_or(0);
    std::string id = frames[0].to_string();
    std::map<std::uint64_t, std::string> replies;
    std::set<std::uint64_t> drop;
    bool drop_end;
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(start);
      replies.insert(ring_.lower_bound(start), ring_.end());
      drop.swap(drop_seqs_);
      drop_end = drop_end_;
      drop_end_ = false;
    }
    auto send_reply = [&](const std::string& seq8, const std::string& payload) {
      r.send(zmq::buffer(id), zmq::send_flags::sndmore);
      r.send(zmq::message_t(), zmq::send_flags::sndmore);
      if (opts_.new_layout) r.send(zmq::buffer(opts_.topic), zmq::send_flags::sndmore);
      r.send(zmq::buffer(seq8), zmq::send_flags::sndmore);
      r.send(zmq::buffer(payload), zmq::send_flags::none);
    };
    for (const auto& [seq, payload] : replies) {
      if (drop.count(seq)) continue;
      send_reply(ic::tools::be64(seq), payload);
    }
    if (!drop_end) {
      const std::string end(8, '\xff');
      r.send(zmq::buffer(id), zmq::send_flags::sndmore);
      r.send(zmq::message_t(), zmq::send_flags::sndmore);
      if (opts_.new_layout) r.send(zmq::message_t(), zmq::send_flags::sndmore);
      r.send(zmq::buffer(end), zmq::send_flags::sndmore);
      r.send(zmq::message_t(), zmq::send_flags::none);
    }
  }
}

}  // namespace ic::kvevent::fake
