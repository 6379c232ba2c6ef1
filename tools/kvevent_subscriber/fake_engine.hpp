// A fake inference engine for tests, the benchmark and the quickstart: it publishes
// KV-event batches exactly as vLLM/SGLang do (spec §2.2, §2.6) and serves replay.
//
// The PUB side is an XPUB bound at `pub_bind` (subscribers see a plain PUB; the XPUB lets
// `wait_for_subscriber` see the subscription arrive, so tests need no sleep for ZMQ's slow
// joiner). Messages are `[topic, BE8(seq), payload]`; seq starts at 0 and counts up. Every
// batch sent (or only put in the ring) is kept in a replay ring served by a ROUTER at
// `router_bind` from its own thread: `[id, "", BE8(start)]` → one reply per buffered batch
// ≥ start (`old` layout `[id,"",seq,payload]`, `new` adds the topic frame), then END.
// Faults for tests: drop chosen seqs and/or the END of the next replay round.
//
// Payloads are encoded with msgpack-cxx (an encoder independent of the subscriber's own
// decoder) from `mv`, a small value tree:
//
//   using namespace ic::kvevent::fake;
//   std::string p = encode(batch(1000.0, {stored({0xE000, 0xE001}, nil(), tokens(0, 32), 16)}));
//   engine.publish(p);
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

namespace ic::kvevent::fake {

/// A msgpack value to encode.
struct mv {
  enum class kind { nil, boolean, uint, sint, f64, str, bin, array, map } k = kind::nil;
  bool b = false;
  std::uint64_t u = 0;
  std::int64_t i = 0;
  double d = 0;
  std::string s;
  std::vector<mv> items;                     ///< array
  std::vector<std::pair<mv, mv>> pairs;      ///< map

  mv() = default;
  mv(int v) : k(v < 0 ? kind::sint : kind::uint), u(static_cast<std::uint64_t>(v)), i(v) {}
  mv(std::int64_t v) : k(v < 0 ? kind::sint : kind::uint), u(static_cast<std::uint64_t>(v)), i(v) {}
  mv(std::uint64_t v) : k(kind::uint), u(v) {}
  mv(double v) : k(kind::f64), d(v) {}
  mv(const char* v) : k(kind::str), s(v) {}
  mv(std::string v) : k(kind::str), s(std::move(v)) {}
  mv(std::initializer_list<mv> v) : k(kind::array), items(v) {}
};

mv nil();
mv boolean(bool v);
mv bin(std::string bytes);
mv arr(std::vector<mv> items);
mv map(std::vector<std::pair<mv, mv>> pairs);
/// Tokens `first .. first+n-1` as an array of uints.
mv tokens(std::uint32_t first, std::size_t n);
/// An array of uint hashes.
mv hashes(std::vector<std::uint64_t> hs);

/// `["BlockStored", hashes, parent, tokens, block_size, lora]` (vLLM 0.9 layout) plus
/// `extra` elements appended (medium, lora_name, …).
mv stored(std::vector<std::uint64_t> hs, mv parent, mv toks, int block_size, mv lora = nil(),
          std::vector<mv> extra = {});
/// `["BlockRemoved", hashes]` plus `extra` (medium, group_idx).
mv removed(std::vector<std::uint64_t> hs, std::vector<mv> extra = {});
/// `["AllBlocksCleared"]`.
mv cleared();
/// The envelope `[ts, events, rank]` (`rank` nil-able); `two_elements` gives `[ts, events]`.
mv batch(double ts, std::vector<mv> events, mv rank = mv(0), bool two_elements = false);

/// Encodes `v` as msgpack (use_bin_type semantics: str as str, bin as bin).
std::string encode(const mv& v);

struct options {
  std::string pub_bind = "tcp://127.0.0.1:*";     ///< `*` port: pick a free one
  std::string router_bind;                        ///< "" = no replay ROUTER
  std::string topic = "kv-events";
  bool new_layout = false;                        ///< replies with the topic frame (vLLM ≥ 0.26)
  std::size_t ring = 10000;
};

class engine {
 public:
  explicit engine(options o);
  ~engine();
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  /// The bound endpoints (`tcp://127.0.0.1:<port>`).
  std::string pub_endpoint() const { return pub_endpoint_; }
  std::string router_endpoint() const { return router_endpoint_; }

  /// Waits until a subscriber's subscription arrived (XPUB); false on timeout.
  bool wait_for_subscriber(int timeout_ms);

  /// Publishes `payload` with the next seq (also into the ring); returns the seq.
  std::uint64_t publish(const std::string& payload);
  /// Takes the next seq and puts `payload` only into the ring (a "lost" live message).
  std::uint64_t ring_only(const std::string& payload);
  /// Publishes with an explicit seq (restart: seq 0 again) without touching the counter.
  void publish_seq(std::uint64_t seq, const std::string& payload, bool into_ring = true);
  /// Restarts the sequence at 0 and empties the ring (a new engine process).
  void restart();

  /// The next replay round drops replies for `seqs` and, if `drop_end`, its END.
  void fault_next_round(std::set<std::uint64_t> seqs, bool drop_end);
  /// Removes ring entries older than `seq` (a wrapped ring).
  void trim_ring_before(std::uint64_t seq);

  /// Start seqs of every replay request received, in order.
  std::vector<std::uint64_t> replay_requests() const;

 private:
  void serve();
  void send_live(std::uint64_t seq, const std::string& payload);

  options opts_;
  struct impl;
  std::unique_ptr<impl> impl_;
  std::string pub_endpoint_, router_endpoint_;
  std::uint64_t next_seq_ = 0;
  mutable std::mutex mu_;
  std::map<std::uint64_t, std::string> ring_;
  std::set<std::uint64_t> drop_seqs_;
  bool drop_end_ = false;
  std::vector<std::uint64_t> requests_;
  std::atomic<bool> stop_{false};
  std::thread router_thread_;
};

}  // namespace ic::kvevent::fake
