// ic_jetstream_bench: the JetStream record log's client-level figures on a 3-node loopback
// cluster that it starts itself (nats_fixture; stopped by PID at exit).
//
//   ic_jetstream_bench [seconds_per_case=3] [record_bytes=768]
//
// 1. Throughput: T appender threads, each publishing envelopes of R records and waiting for
//    each PubAck (writer::append), for `seconds_per_case`. A record is sized like one
//    ReportCacheState of 64 blocks (768 B: 64 × 10 B block hashes in protobuf + token counts
//    + ids), so blocks/s = records/s × 64.
// 2. Latency at a fixed rate: records "arrive" at a fixed rate; one appender (the journal
//    actor's shape) takes everything that arrived while its previous append was in flight
//    (≤ 4096 records) as one envelope; a reader on *another* node (a second replica)
//    stamps each record when it is delivered. Reported: arrival → delivered on the other
//    replica, and PubAck → delivered, p50/p99/max. Apply time is not included.
// Both writer and reader run in this process with the 3 servers on the same 2 cores.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "journal/jetstream/jetstream_log.hpp"
#include "journal/jetstream/nats_fixture.hpp"
#include "tools/bench/stats.hpp"

namespace {

using ic::journal::record_in;
using namespace ic::journal::jetstream;
namespace jetstream = ic::journal::jetstream;
using steady = std::chrono::steady_clock;
using ic::tools::bench::summarize;

constexpr int blocks_per_record = 64;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now().time_since_epoch())
      .count();
}

void stamp(std::string* payload, std::int64_t t) { std::memcpy(payload->data(), &t, 8); }
std::int64_t stamp_of(std::string_view p) {
  std::int64_t t = 0;
  std::memcpy(&t, p.data(), 8);
  return t;
}

jetstream::options opts_for(const testing::nats_cluster& c, const std::string& id, int first_node) {
  jetstream::options o;
  o.servers = c.urls();
  std::rotate(o.servers.begin(), o.servers.begin() + first_node, o.servers.end());
  o.replica_id = id;
  o.replicas = 3;
  o.max_bytes = std::int64_t{1} << 30;
  o.append_timeout = std::chrono::seconds(10);
  o.open_timeout = std::chrono::seconds(20);
  return o;
}

// Empties the stream between cases (Discard=new would refuse appends once 1 GiB is stored),
// as the lease holder's purge below a shared snapshot does in production.
void purge(writer& w) {
  auto st = w.state();
  if (st.ok()) w.truncate_before(st->last_seq + 1);
}

bool throughput(const testing::nats_cluster& c, int threads, int records, int bytes,
                double seconds) {
  std::vector<std::unique_ptr<writer>> writers;
  for (int t = 0; t < threads; ++t) {
    auto w = writer::open(opts_for(c, "w" + std::to_string(t), t % 3));
    if (!w.ok()) {
      std::fprintf(stderr, "writer: %s\n", w.status().to_string().c_str());
      return false;
    }
    writers.push_back(std::move(*w));
  }
  std::atomic<std::uint64_t> envelopes{0}, failures{0};
  std::vector<std::vector<double>> lat(static_cast<std::size_t>(threads));
  const auto end = steady::now() + std::chrono::duration<double>(seconds);
  const auto t0 = steady::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<std::string> payloads(static_cast<std::size_t>(records),
                                        std::string(static_cast<std::size_t>(bytes), 'b'));
      std::vector<record_in> recs;
      for (const auto& p : payloads) recs.push_back({1, p});
      while (steady::now() < end) {
        const auto a = now_ns();
        auto ack = writers[static_cast<std::size_t>(t)]->append(recs);
        if (!ack.ok()) { ++failures; continue; }
        lat[static_cast<std::size_t>(t)].push_back(static_cast<double>(now_ns() - a) / 1e3);
        ++envelopes;
      }
    });
  }
  for (auto& th : pool) th.join();
  const double el = std::chrono::duration<double>(steady::now() - t0).count();
  purge(*writers.front());
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  auto s = summarize(all);
  const double env_s = static_cast<double>(envelopes.load()) / el;
  const double rec_s = env_s * records;
  std::printf("| %d | %d | %.0f | %.0f | %.0f k | %.1f | %.2f / %.2f | %llu |\n", threads,
              records, env_s, rec_s, rec_s * blocks_per_record / 1e3,
              rec_s * bytes / 1e6, s.p50 / 1e3, s.p99 / 1e3,
              static_cast<unsigned long long>(failures.load()));
  std::fflush(stdout);
  return true;
}

bool latency(const testing::nats_cluster& c, double blocks_per_s, int bytes, double seconds) {
  auto w = writer::open(opts_for(c, "lat", 0));
  if (!w.ok()) return false;
  auto st = (*w)->state();
  if (!st.ok()) return false;
  auto r = reader::open(opts_for(c, "other", 2), st->last_seq + 1);
  if (!r.ok()) {
    std::fprintf(stderr, "reader: %s\n", r.status().to_string().c_str());
    return false;
  }
  const double rate = blocks_per_s / blocks_per_record;  // records per second
  const auto total = static_cast<std::uint64_t>(rate * seconds);
  std::vector<double> arrive_to_read, ack_to_read;
  std::mutex mu;
  std::vector<std::pair<std::uint64_t, std::int64_t>> acks;  // position -> PubAck time
  std::atomic<bool> done{false};
  std::vector<std::pair<std::uint64_t, std::int64_t>> reads;  // position -> delivery time
  std::thread rt([&] {
    std::uint64_t got = 0;
    const auto deadline = steady::now() + std::chrono::duration<double>(seconds + 30);
    while (got < total && steady::now() < deadline) {
      auto b = (*r)->next(std::chrono::milliseconds(200));
      if (!b.ok()) { std::fprintf(stderr, "%s\n", b.status().to_string().c_str()); return; }
      if (!b->has_value()) { if (done.load() && got >= total) break; continue; }
      const std::int64_t t = now_ns();
      for (const auto& rec : (*b)->records) {
        arrive_to_read.push_back(static_cast<double>(t - stamp_of(rec.payload)) / 1e3);
        ++got;
      }
      reads.emplace_back((*b)->position, t);
    }
  });
  const std::int64_t t0 = now_ns();
  std::uint64_t sent = 0, envelopes = 0;
  std::vector<std::string> payloads;
  while (sent < total) {
    const auto due = std::min<std::uint64_t>(
        total, static_cast<std::uint64_t>(static_cast<double>(now_ns() - t0) * rate / 1e9));
    if (due <= sent) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      continue;
    }
    const std::uint64_t n = std::min<std::uint64_t>(due - sent, 4096);
    payloads.assign(n, std::string(static_cast<std::size_t>(bytes), 'l'));
    std::vector<record_in> recs;
    for (std::uint64_t i = 0; i < n; ++i) {
      // The record arrived at its due time on the fixed-rate schedule.
      stamp(&payloads[i], t0 + static_cast<std::int64_t>(static_cast<double>(sent + i) * 1e9 / rate));
      recs.push_back({1, payloads[i]});
    }
    auto ack = (*w)->append(recs);
    if (!ack.ok()) {
      std::fprintf(stderr, "append: %s\n", ack.status().to_string().c_str());
      break;
    }
    acks.emplace_back(ack->position, now_ns());
    sent += n;
    ++envelopes;
  }
  const double el = static_cast<double>(now_ns() - t0) / 1e9;
  done = true;
  rt.join();
  purge(**w);
  std::sort(reads.begin(), reads.end());
  for (const auto& [pos, t_ack] : acks) {
    auto it = std::lower_bound(reads.begin(), reads.end(), std::make_pair(pos, std::int64_t{0}));
    if (it != reads.end() && it->first == pos) {
      ack_to_read.push_back(static_cast<double>(it->second - t_ack) / 1e3);
    }
  }
  const std::size_t before_ack = static_cast<std::size_t>(
      std::count_if(ack_to_read.begin(), ack_to_read.end(), [](double v) { return v <= 0; }));
  auto a = summarize(arrive_to_read);
  auto k = summarize(ack_to_read);
  std::printf("| %.0f k | %.0f k | %.1f | %llu / %llu | %.2f / %.2f / %.2f | %.3f / %.2f | %zu of %llu |\n",
              blocks_per_s / 1e3, static_cast<double>(sent) * blocks_per_record / el / 1e3,
              static_cast<double>(sent) / static_cast<double>(std::max<std::uint64_t>(1, envelopes)),
              static_cast<unsigned long long>(a.count), static_cast<unsigned long long>(total),
              a.p50 / 1e3, a.p99 / 1e3, a.max / 1e3, k.p50 / 1e3, k.p99 / 1e3, before_ack,
              static_cast<unsigned long long>(k.count));
  std::fflush(stdout);
  return a.count == total;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 3.0;
  const int bytes = argc > 2 ? std::atoi(argv[2]) : 768;
  if (seconds <= 0 || bytes < 16) {
    std::fprintf(stderr, "usage: ic_jetstream_bench [seconds_per_case>0] [record_bytes>=16]\n");
    return 2;
  }
  std::string why;
  auto c = testing::nats_cluster::start(3, &why);
  if (!c) {
    std::fprintf(stderr, "cannot start the 3-node cluster: %s\n", why.c_str());
    return 1;
  }
  std::printf("3-node loopback JetStream cluster (R3, file), records of %d B = 64 blocks, "
              "%.1f s per case\n\n", bytes, seconds);
  std::printf("| appenders | records/envelope | envelopes/s | records/s | blocks/s | MB/s | "
              "PubAck p50 / p99 ms | failed |\n|---|---|---|---|---|---|---|---|\n");
  bool ok = true;
  for (int threads : {1, 4}) {
    for (int records : {1, 16, 64, 256}) ok = throughput(*c, threads, records, bytes, seconds) && ok;
  }
  std::printf("\n| offered blocks/s | achieved blocks/s | records/envelope | delivered / sent | "
              "arrival → other replica p50 / p99 / max ms | PubAck → other replica p50 / p99 ms | "
              "delivered before PubAck |\n|---|---|---|---|---|---|---|\n");
  for (double rate : {100e3, 300e3, 1e6}) ok = latency(*c, rate, bytes, seconds * 2) && ok;
  return ok ? 0 : 1;
}
