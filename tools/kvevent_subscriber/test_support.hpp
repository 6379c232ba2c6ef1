// Test support for the subscriber core: a harness that feeds encoded batches to a kv_core
// and reads back the operations it queued (no sockets), plus the spec §3.5 fingerprints.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tools/kvevent_subscriber/core.hpp"
#include "tools/kvevent_subscriber/fake_engine.hpp"

namespace ic::kvevent::testing {

// Fingerprints of spec §3.5 (hex of the BE8).
inline constexpr std::uint64_t F0_127[8] = {0xd47a8f41c833328aull, 0xbf15dffb16447f38ull, 0xa4dda066f3c1e1a0ull,
                                            0x35f7c0d119848950ull, 0xc1607bdebd234f78ull, 0x16c4802cff5e65faull,
                                            0xe0990c4c93ae274bull, 0x9608e89678d1b23aull};
inline constexpr std::uint64_t F16_31_root = 0xd43939178abd00dbull;
inline constexpr std::uint64_t F0_63_bs64 = 0x304d910e689e42bfull;
inline constexpr std::uint64_t F1000[2] = {0xf7e6c5a1896bad24ull, 0x3d5ff0dd2a93fd39ull};
inline constexpr std::uint64_t E(int i) { return 0xE000ull + static_cast<std::uint64_t>(i); }

/// Records replay requests and cancels.
struct recording_port : replay_port {
  std::vector<std::pair<std::size_t, std::uint64_t>> requests;
  int cancels = 0;
  void request_replay(std::size_t s, std::uint64_t start) override { requests.emplace_back(s, start); }
  void cancel_replay(std::size_t) override { ++cancels; }
};

/// Base options of spec §5.0 (window 10ms, no clear-on-start, no refresh).
inline core_options base_options() {
  core_options o;
  o.window_ms = 10;
  o.clear_on_start = false;
  o.refresh_interval_ms = 0;
  return o;
}

struct harness {
  explicit harness(core_options o = base_options(), std::size_t max_ops = 100000)
      : opts(o), log(max_ops), metrics(o.sources) {
        lg.set_sink([this](log_level l, const std::string& m, const log_fields&) {
          if (l >= log_level::warn) warnings.push_back(m);
        });
        core = std::make_unique<kv_core>(opts, log, adapters, metrics, &port, &lg);
      }

  void start() { core->start(now); }
  /// Publishes `b` as the next message of `source` (sequence counted per source).
  void send(const fake::mv& b, std::size_t source = 0) { send_seq(next_seq[source]++, b, source); }
  void send_seq(std::uint64_t seq, const fake::mv& b, std::size_t source = 0) {
    core->on_live(source, raw_message{"kv-events", true, seq, fake::encode(b)}, now);
  }
  void send_raw(std::uint64_t seq, const std::string& payload, const std::string& topic = "kv-events") {
    core->on_live(0, raw_message{topic, true, seq, payload}, now);
  }
  /// Flushes the pending adds and returns every queued operation (oldest first).
  std::vector<op> ops() {
    core->flush();
    std::vector<op> out;
    op o;
    while (log.pop(o, std::chrono::milliseconds(0))) out.push_back(o);
    return out;
  }
  /// All add/t2 entries of `v`, flattened.
  static std::vector<prefix_add> adds(const std::vector<op>& v) {
    std::vector<prefix_add> out;
    for (const auto& o : v)
      if (o.type == op_type::add || o.type == op_type::t2) out.insert(out.end(), o.entries.begin(), o.entries.end());
    return out;
  }
  static int count(const std::vector<op>& v, op_type t) {
    int n = 0;
    for (const auto& o : v) n += o.type == t;
    return n;
  }
  std::uint64_t dropped(drop_reason r) const { return metrics.dropped(r); }

  core_options opts;
  op_log log;
  adapter_registry adapters;
  core_metrics metrics;
  recording_port port;
  logger lg;
  std::vector<std::string> warnings;
  std::unique_ptr<kv_core> core;
  std::int64_t now = 1000;
  std::uint64_t next_seq[8] = {};
};

}  // namespace ic::kvevent::testing
