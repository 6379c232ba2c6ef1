// inferencecache-kvevent-bench: throughput and memory of the subscriber's pipeline.
//
//   throughput: pre-encoded vLLM batches (one BlockStored of --blocks-per-event chained
//     blocks each) are decoded, fingerprinted and turned into operations by the core on this
//     thread, while the sender thread delivers them over gRPC to a real server (--server).
//     The clock stops when the server acknowledged the last CSU. Run it pinned to one core
//     (`taskset -c 0`) with the server on another to measure "on one core".
//   pipeline: the whole binary. This tool plays the engine (XPUB at --bind), a separately
//     started inferencecache-kvevent-subscriber connects to it and reports to the server; the
//     clock runs from the first published batch until GetCacheState(--tenant, --model) shows
//     every block. Pin the subscriber alone on one core.
//   memory: fills the core to --max-tracked-blocks root blocks (no RPC) and reports the RSS
//     growth and the total RSS per tracked block.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include <CLI/CLI.hpp>

#include "tools/kvevent_subscriber/core.hpp"
#include "tools/kvevent_subscriber/fake_engine.hpp"
#include "tools/kvevent_subscriber/grpc_client.hpp"
#include "tools/kvevent_subscriber/receiver.hpp"
#include "tools/kvevent_subscriber/sender.hpp"

namespace {

using namespace ic::kvevent;

std::uint64_t rss_bytes() {
  std::ifstream in("/proc/self/statm");
  std::uint64_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

std::vector<std::string> make_batches(std::size_t blocks, int per_event, int block_size, std::uint32_t first_token) {
  using namespace ic::kvevent::fake;
  std::vector<std::string> out;
  std::uint64_t hash = 1;
  std::uint32_t tok = first_token;
  for (std::size_t done = 0; done < blocks; done += static_cast<std::size_t>(per_event)) {
    std::vector<std::uint64_t> hs;
    for (int b = 0; b < per_event; ++b) hs.push_back(hash++);
    std::size_t n = static_cast<std::size_t>(per_event) * static_cast<std::size_t>(block_size);
    out.push_back(encode(batch(0.0, {stored(hs, nil(), tokens(tok, n), block_size, nil(), {mv("GPU")})})));
    tok += static_cast<std::uint32_t>(n);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "throughput", server = "127.0.0.1:9090", bind = "tcp://127.0.0.1:5557";
  std::string tenant = "bench", model = "bench-model";
  std::size_t blocks = 500000, max_tracked = 524288;
  int per_event = 16, block_size = 16;
  CLI::App app{"inferencecache-kvevent-bench: subscriber throughput and memory"};
  app.add_option("--mode", mode, "throughput|pipeline|memory")->capture_default_str()
      ->check(CLI::IsMember({"throughput", "pipeline", "memory"}));
  app.add_option("--bind", bind, "PUB address the subscriber connects to (pipeline)")->capture_default_str();
  app.add_option("--tenant", tenant, "tenant the subscriber reports (pipeline)")->capture_default_str();
  app.add_option("--model", model, "model the subscriber reports (pipeline)")->capture_default_str();
  app.add_option("--server", server, "InferenceCache gRPC address (throughput)")->capture_default_str();
  app.add_option("--blocks", blocks, "BlockStored blocks to push (throughput)")->capture_default_str();
  app.add_option("--blocks-per-event", per_event, "blocks per BlockStored event")->capture_default_str();
  app.add_option("--block-size", block_size, "tokens per block")->capture_default_str();
  app.add_option("--max-tracked-blocks", max_tracked, "reverse-map bound (memory)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  core_options o;
  o.window_ms = 100;
  o.clear_on_start = false;
  o.refresh_interval_ms = 0;
  adapter_registry adapters;
  core_metrics metrics(1);

  if (mode == "memory") {
    o.max_tracked_blocks = max_tracked;
    op_log log(1);  // overflows at once: operations are not kept, only the tables grow
    kv_core core(o, log, adapters, metrics, nullptr, nullptr);
    // Encoded one at a time, so the RSS is the subscriber's own; 1/8 more blocks than the
    // bound, so the LRU drop runs and the tables are at their steady size.
    std::uint64_t before = rss_bytes();
    std::uint64_t seq = 0;
    const std::size_t total = max_tracked + max_tracked / 8;
    for (std::size_t i = 0; i < total; ++i) {
      using namespace ic::kvevent::fake;
      std::string p = encode(batch(0.0, {stored({i + 1}, nil(), tokens(static_cast<std::uint32_t>(i) * 16u, 16), block_size)}));
      core.on_live(0, raw_message{"kv-events", true, seq++, std::move(p)}, 0);
    }
    core.tick(1);
    std::uint64_t after = rss_bytes();
    std::printf("memory: tracked_blocks=%zu residency_keys=%zu table_bytes=%zu rss_before=%llu rss_after=%llu\n",
                core.tracked_blocks(), core.residency_size(), core.table_bytes(),
                static_cast<unsigned long long>(before), static_cast<unsigned long long>(after));
    std::printf("memory: %.1f B/block RSS growth, %.1f B/block total RSS, %.1f B/block tables\n",
                static_cast<double>(after - before) / static_cast<double>(core.tracked_blocks()),
                static_cast<double>(after) / static_cast<double>(core.tracked_blocks()),
                static_cast<double>(core.table_bytes()) / static_cast<double>(core.tracked_blocks()));
    return 0;
  }

  if (mode == "pipeline") {
    std::string err;
    auto channel = make_channel(server, "", "", &err);
    grpc_cache_client probe(channel, identity{"bench-probe", model, tenant, "vllm"}, adapters, 10000);
    auto base = probe.get_state();
    if (!base) {
      std::fprintf(stderr, "inferencecache-kvevent-bench: server %s not reachable\n", server.c_str());
      return 1;
    }
    ic::kvevent::fake::options fo;
    fo.pub_bind = bind;
    fo.ring = 1;
    ic::kvevent::fake::engine eng(fo);
    std::printf("pipeline: waiting for a subscriber on %s\n", eng.pub_endpoint().c_str());
    std::fflush(stdout);
    if (!eng.wait_for_subscriber(60000)) return 1;
    auto batches = make_batches(blocks, per_event, block_size, 1u << 21);
    auto t0 = std::chrono::steady_clock::now();
    for (const auto& b : batches) eng.publish(b);
    auto t_pub = std::chrono::steady_clock::now();
    std::int64_t want = base->total_prefixes + static_cast<std::int64_t>(blocks);
    std::int64_t seen = 0;
    while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120)) {
      auto st = probe.get_state();
      if (st) seen = st->total_prefixes;
      if (seen >= want) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    auto t1 = std::chrono::steady_clock::now();
    double pub_s = std::chrono::duration<double>(t_pub - t0).count();
    double total_s = std::chrono::duration<double>(t1 - t0).count();
    std::printf("pipeline: %zu blocks published in %.3f s; server holds %lld of %lld after %.3f s (%.0f blocks/s)\n",
                blocks, pub_s, static_cast<long long>(seen), static_cast<long long>(want), total_s,
                static_cast<double>(blocks) / total_s);
    return seen >= want ? 0 : 1;
  }

  o.max_tracked_blocks = blocks + 1024;
  op_log log(1000000);
  kv_core core(o, log, adapters, metrics, nullptr, nullptr);
  std::string err;
  auto channel = make_channel(server, "", "", &err);
  grpc_cache_client client(channel, identity{"bench-r0", "bench-model", "bench", "vllm"}, adapters, 10000);
  if (!client.get_state()) {
    std::fprintf(stderr, "inferencecache-kvevent-bench: server %s not reachable\n", server.c_str());
    return 1;
  }
  rpc_metrics rpcs;
  sender_options so;
  sender snd(so, log, client, [&](resync_reason r) { core.request_resync(r); }, metrics, rpcs, nullptr, mono_ms);
  auto batches = make_batches(blocks, per_event, block_size, 1u << 20);
  std::thread sender_thread([&] { snd.run(); });
  auto t0 = std::chrono::steady_clock::now();
  std::uint64_t seq = 0;
  for (auto& b : batches) core.on_live(0, raw_message{"kv-events", true, seq++, std::move(b)}, 0);
  core.flush();
  auto t_core = std::chrono::steady_clock::now();
  while (log.size() > 0 || snd.busy()) std::this_thread::sleep_for(std::chrono::microseconds(200));
  auto t1 = std::chrono::steady_clock::now();
  snd.drain_until(0);
  sender_thread.join();
  double core_s = std::chrono::duration<double>(t_core - t0).count();
  double total_s = std::chrono::duration<double>(t1 - t0).count();
  std::uint64_t csus = rpcs.count("ReportCacheState", "ok");
  std::printf("throughput: %zu blocks in %zu events, %llu CSUs acknowledged\n", blocks, batches.size(),
              static_cast<unsigned long long>(csus));
  std::printf("throughput: decode+fingerprint+queue %.3f s (%.0f blocks/s); end to end incl. server acks %.3f s (%.0f blocks/s)\n",
              core_s, static_cast<double>(blocks) / core_s, total_s, static_cast<double>(blocks) / total_s);
  return csus > 0 ? 0 : 1;
}
