#include "tools/bench/follower_lag.hpp"

#include <atomic>
#include <chrono>
#include <thread>

namespace ic::tools::bench {

namespace {

using steady = std::chrono::steady_clock;

double us_between(steady::time_point a, steady::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

// The 8-byte block hash of marker `i` (big endian, high bit set: not a workload hash).
std::string marker_block(std::uint64_t i) {
  std::string h(8, '\0');
  const std::uint64_t v = i | (std::uint64_t{1} << 63);
  for (int k = 0; k < 8; ++k) h[static_cast<std::size_t>(k)] = static_cast<char>(v >> (56 - 8 * k));
  return h;
}

}  // namespace

follower_lag_result run_follower_lag(const follower_lag_options& o, const workload& w,
                                     const std::vector<std::shared_ptr<grpc::Channel>>& channels) {
  follower_lag_result out;
  std::atomic<bool> stop{false};
  ingest_options io = o.ingest;
  io.lim = {o.duration_s + 2 * o.marker_timeout_s + 5, 0};
  std::thread ingest([&] { out.ingest = run_ingest(channels, w, io, &stop, "ingest"); });

  auto a = v1::InferenceCache::NewStub(channels.front());
  auto b = v1::InferenceCache::NewStub(make_channels(o.follower, 1).front());
  const std::string tenant = "lag-marker";
  const std::string model = w.shape().model;
  const auto run_end = steady::now() + std::chrono::duration<double>(o.duration_s);
  const auto period = std::chrono::duration<double>(1.0 / std::max(1, o.markers_per_s));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // producers at their pace
  auto next = steady::now();
  for (std::uint64_t i = 0; steady::now() < run_end; ++i) {
    std::this_thread::sleep_until(next);
    next += std::chrono::duration_cast<steady::duration>(period);
    v1::CacheStateUpdate u;
    u.set_replica_id("marker");
    u.set_model_id(model);
    u.set_tenant_id(tenant);
    u.set_hash_scheme("vllm");
    auto* p = u.add_prefixes();
    p->add_block_hashes(marker_block(i));
    p->add_block_token_counts(64);  // one block of 64 tokens: above the minimum match
    grpc::ClientContext rctx;
    rctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::Ack ack;
    const auto sent = steady::now();
    auto writer = a->ReportCacheState(&rctx, &ack);
    writer->Write(u);
    writer->WritesDone();
    const grpc::Status st = writer->Finish();
    const auto acked = steady::now();
    if (!st.ok() || !ack.accepted()) {
      ++out.markers_refused;
      if (out.error.empty())
        out.error = st.ok() ? "marker refused: " + ack.reason_code() : st.error_message();
      continue;
    }
    out.marker_ack_us.push_back(us_between(sent, acked));
    v1::LookupRouteRequest req;
    req.set_model_id(model);
    req.set_tenant_id(tenant);
    req.set_hash_scheme("vllm");
    req.add_block_hashes(marker_block(i));
    req.add_block_token_counts(64);  // one block of 64 tokens: above the minimum match
    const auto give_up = acked + std::chrono::duration_cast<steady::duration>(
                                     std::chrono::duration<double>(o.marker_timeout_s));
    bool seen = false;
    while (!seen && steady::now() < give_up) {
      grpc::ClientContext lctx;
      lctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
      v1::LookupRouteResponse resp;
      const grpc::Status ls = b->LookupRoute(&lctx, req, &resp);
      if (ls.ok() && resp.reason_code() == "PREFIX_MATCH") {
        out.lag_us.push_back(us_between(acked, steady::now()));
        seen = true;
      } else {
        if (!ls.ok() && out.error.empty()) out.error = "follower lookup: " + ls.error_message();
        std::this_thread::sleep_for(o.poll_interval);
      }
    }
    if (!seen) ++out.markers_missed;
  }
  stop.store(true);
  ingest.join();
  return out;
}

}  // namespace ic::tools::bench
