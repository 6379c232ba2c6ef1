// inferencecache-kvevent-fake-engine: a stand-in for vLLM's KV-event publisher.
//
// Like the reference's kvevent-fake-engine: one batch of `--events` chained BlockStored
// events of `--num-blocks` blocks each (tokens from `--start-token`, engine hashes
// 0xE000+i), re-published every `--interval` with the next sequence number (which also
// covers ZMQ's slow joiner). With `--replay-bind` it serves replay on a ROUTER. It prints
// the fingerprints a gateway would look up (`EXPECT prefix_hash[i]=<hex> token_count=N`).
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>

#include "index/fingerprint.hpp"
#include "tools/kvevent_subscriber/fake_engine.hpp"

namespace {
volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }
}  // namespace

int main(int argc, char** argv) {
  using namespace ic::kvevent::fake;
  std::string bind = "tcp://0.0.0.0:5557", replay_bind, topic = "kv-events";
  int block_size = 16, num_blocks = 4, events = 1, count = 0;
  std::uint32_t start_token = 0;
  double interval_s = 0.5;
  bool omit_tokens = false;
  std::string layout = "old";
  CLI::App app{"inferencecache-kvevent-fake-engine: publishes vLLM-style KV events"};
  app.add_option("--bind", bind, "PUB bind address")->capture_default_str();
  app.add_option("--replay-bind", replay_bind, "ROUTER bind address for replay (\"\" = none)")->capture_default_str();
  app.add_option("--topic", topic, "topic frame")->capture_default_str();
  app.add_option("--block-size", block_size, "tokens per block")->capture_default_str()->check(CLI::Range(1, 1 << 16));
  app.add_option("--num-blocks", num_blocks, "blocks per event")->capture_default_str()->check(CLI::Range(1, 1 << 16));
  app.add_option("--events", events, "chained events in the batch")->capture_default_str()->check(CLI::Range(1, 1 << 16));
  app.add_option("--start-token", start_token, "first token id")->capture_default_str();
  app.add_option("--interval", interval_s, "seconds between re-publications")->capture_default_str();
  app.add_option("--count", count, "publications before exiting (0 = until SIGTERM)")->capture_default_str();
  app.add_flag("--omit-token-ids", omit_tokens, "send empty token_ids (nothing indexable)");
  app.add_option("--layout", layout, "replay reply layout: old|new (vLLM >= 0.26)")->capture_default_str()
      ->check(CLI::IsMember({"old", "new"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (static_cast<std::uint64_t>(block_size) * num_blocks * events > (1u << 24)) {
    std::cerr << "inferencecache-kvevent-fake-engine: at most 2^24 tokens\n";
    return 2;
  }
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);

  options o;
  o.pub_bind = bind;
  o.router_bind = replay_bind;
  o.topic = topic;
  o.new_layout = layout == "new";
  engine eng(o);

  std::vector<mv> evs;
  std::vector<std::uint32_t> all_tokens;
  std::uint64_t next_hash = 0xE000;
  mv parent = nil();
  std::uint32_t tok = start_token;
  for (int e = 0; e < events; ++e) {
    std::vector<std::uint64_t> hs;
    for (int b = 0; b < num_blocks; ++b) hs.push_back(next_hash++);
    std::size_t n = static_cast<std::size_t>(block_size) * static_cast<std::size_t>(num_blocks);
    for (std::size_t i = 0; i < n; ++i) all_tokens.push_back(tok + static_cast<std::uint32_t>(i));
    evs.push_back(stored(hs, parent, omit_tokens ? arr({}) : tokens(tok, n), block_size));
    parent = mv(static_cast<std::uint64_t>(hs.back()));
    tok += static_cast<std::uint32_t>(n);
  }
  const std::string payload = encode(batch(0.0, evs));
  auto fps = ic::index::fingerprint_chain(all_tokens.data(), all_tokens.size(), block_size);
  for (std::size_t i = 0; i < fps.size(); ++i) {
    std::printf("EXPECT prefix_hash[%zu]=%016llx token_count=%zu\n", i, static_cast<unsigned long long>(fps[i]),
                (i + 1) * static_cast<std::size_t>(block_size));
  }
  std::printf("publishing on %s (replay %s), topic \"%s\", every %.3fs\n", eng.pub_endpoint().c_str(),
              replay_bind.empty() ? "off" : eng.router_endpoint().c_str(), topic.c_str(), interval_s);
  std::fflush(stdout);
  for (int sent = 0; !g_stop && (count == 0 || sent < count); ++sent) {
    std::uint64_t seq = eng.publish(payload);
    std::printf("published seq=%llu\n", static_cast<unsigned long long>(seq));
    std::fflush(stdout);
    auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(interval_s);
    while (!g_stop && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}
