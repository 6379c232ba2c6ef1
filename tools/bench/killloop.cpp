#include "tools/bench/killloop.hpp"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "tools/bench/runner.hpp"
#include "tools/bench/server_child.hpp"
#include "tools/common/codec.hpp"

namespace ic::tools::bench {
namespace {

using steady = std::chrono::steady_clock;

/// Acknowledged chains and the answer each last gave ("" until first verified).
class acked_set {
 public:
  void add(const std::vector<std::uint64_t>& chains) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto c : chains) answers_.emplace(c, std::string());
  }
  std::map<std::uint64_t, std::string>& answers() { return answers_; }  // no producer running
  std::size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return answers_.size();
  }

 private:
  std::mutex mu_;
  std::map<std::uint64_t, std::string> answers_;
};

/// The parts of an answer that must not change across a restart (scores decay with time).
std::string digest(const v1::LookupRouteResponse& r) {
  std::ostringstream s;
  s << r.reason_code();
  for (const auto& rs : r.replica_scores())
    s << " " << rs.replica_id() << ":" << rs.matched_tokens() << ":" << rs.tier();
  return s.str();
}

/// One producer: streams of `messages_per_stream` messages, each advancing
/// `chains_per_message` fresh chains, paced, until `stop`. Acked chains go to `acked`.
void produce(const killloop_options& o, const workload& w, std::shared_ptr<grpc::Channel> ch,
             std::atomic<std::uint64_t>& next_chain, const std::atomic<bool>& stop,
             acked_set& acked, std::atomic<std::uint64_t>& stream_errors) {
  auto stub = v1::InferenceCache::NewStub(ch);
  const double rate = o.ingest_rate_blocks_per_s / o.producers;
  const auto start = steady::now();
  std::uint64_t sent_blocks = 0;
  while (!stop) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::Ack ack;
    auto writer = stub->ReportCacheState(&ctx, &ack);
    std::vector<std::uint64_t> in_stream;
    bool ok = true;
    for (int m = 0; m < o.messages_per_stream && ok && !stop; ++m) {
      updates_by_place by_place;
      for (int i = 0; i < o.chains_per_message; ++i) {
        const std::uint64_t c = next_chain.fetch_add(1);
        add_chain_report(w, c, w.shape().chain_blocks, &by_place);
        in_stream.push_back(c);
        sent_blocks += static_cast<std::uint64_t>(w.shape().chain_blocks);
      }
      for (auto& [key, u] : by_place) {
        if (!writer->Write(u)) {
          ok = false;
          break;
        }
      }
      // Pace: sleep until this producer's share of the rate allows the next message.
      auto due = start + std::chrono::microseconds(static_cast<long>(sent_blocks / rate * 1e6));
      while (!stop && steady::now() < due) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (ok) writer->WritesDone();
    grpc::Status st = writer->Finish();
    if (st.ok() && ack.accepted()) {
      acked.add(in_stream);
    } else {
      ++stream_errors;
      if (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

}  // namespace

killloop_report run_killloop(const killloop_options& o, const workload& w, std::ostream& out) {
  killloop_report rep;
  std::string dir = o.data_dir;
  if (dir.empty()) {
    char tmpl[] = "/tmp/ic_bench_killloop_XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      rep.error = "cannot create a temporary data dir";
      return rep;
    }
    dir = tmpl;
  }
  std::vector<std::string> args = {"--insecure-disable-auth", "--data-dir=" + dir,
                                   "--grpc-bind-address=127.0.0.1:0",
                                   "--http-bind-address=127.0.0.1:0",
                                   "--snapshot-bind-address=127.0.0.1:0"};
  args.insert(args.end(), o.server_args.begin(), o.server_args.end());
  // The global cap would evict acknowledged chains (by design) once the loop has reported
  // more than it; lift it unless the caller sets one.
  if (std::none_of(o.server_args.begin(), o.server_args.end(), [](const std::string& a) {
        return a.find("max-index-entries") != std::string::npos;
      }))
    args.push_back("--max-index-entries=0");
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> kill_after(o.kill_after_min_s, o.kill_after_max_s);
  acked_set acked;
  std::atomic<std::uint64_t> next_chain{0};
  const auto timeout = std::chrono::milliseconds(static_cast<long>(o.restart_timeout_s * 1000));

  for (int cycle = 0; cycle <= o.cycles; ++cycle) {
    std::string err;
    auto server = server_child::start(o.server_binary, args, &err);
    if (!server) {
      rep.error = err;
      break;
    }
    const auto t0 = steady::now();
    if (server->wait_for_line("\"ready\"", timeout).empty()) {
      rep.error = "cycle " + std::to_string(cycle) + ": the server did not get ready: " + server->tail();
      break;
    }
    const double ready_s = std::chrono::duration<double>(steady::now() - t0).count();
    auto channel = grpc::CreateChannel(server->grpc_addr(), grpc::InsecureChannelCredentials());

    // Verify every chain acknowledged so far (no producer runs now).
    std::uint64_t lost = 0, changed = 0;
    auto stub = v1::InferenceCache::NewStub(channel);
    const std::int32_t whole = w.shape().chain_blocks * w.shape().block_tokens;
    for (auto& [chain, previous] : acked.answers()) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      v1::LookupRouteRequest req;
      whole_chain_lookup(w, chain, &req);
      v1::LookupRouteResponse resp;
      grpc::Status st = stub->LookupRoute(&ctx, req, &resp);
      ++rep.lookups;
      const bool held = st.ok() && resp.reason_code() == "PREFIX_MATCH" &&
                        resp.replica_scores_size() > 0 &&
                        resp.replica_scores(0).replica_id() == w.replica_name(w.replica_of(chain)) &&
                        resp.replica_scores(0).matched_tokens() == whole;
      const std::string now = st.ok() ? digest(resp) : "error " + st.error_message();
      if (!held) {
        ++lost;
        if (rep.first_problem.empty())
          rep.first_problem = "cycle " + std::to_string(cycle) + ": acknowledged chain " +
                              std::to_string(chain) + " answered \"" + now + "\"";
      } else if (!previous.empty() && previous != now) {
        ++changed;
        if (rep.first_problem.empty())
          rep.first_problem = "cycle " + std::to_string(cycle) + ": chain " + std::to_string(chain) +
                              " answered \"" + now + "\", before the kill \"" + previous + "\"";
      }
      previous = now;
    }
    rep.lost += lost;
    rep.changed += changed;
    nlohmann::json c{{"cycle", cycle},   {"ready_seconds", ready_s}, {"verified", acked.size()},
                     {"lost", lost},     {"changed", changed}};
    if (cycle == o.cycles) {  // the last start only verifies
      c["exit_code"] = server->stop(SIGTERM, std::chrono::seconds(30));
      out << "cycle " << cycle << ": ready after " << ready_s << " s, verified " << acked.size()
          << " acknowledged chains (lost " << lost << ", changed " << changed << "); SIGTERM exit "
          << c["exit_code"].get<int>() << "\n";
      rep.cycles.push_back(c);
      break;
    }

    // Stream, and SIGKILL at a random moment.
    const std::size_t before = acked.size();
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> stream_errors{0};
    std::vector<std::thread> producers;
    for (int p = 0; p < o.producers; ++p)
      producers.emplace_back([&] { produce(o, w, channel, next_chain, stop, acked, stream_errors); });
    const double after = kill_after(rng);
    std::this_thread::sleep_for(std::chrono::duration<double>(after));
    const int code = server->stop(SIGKILL, std::chrono::seconds(30));
    stop = true;
    for (auto& t : producers) t.join();
    server.reset();
    rep.stream_errors += stream_errors;
    const std::size_t added = acked.size() - before;
    c["kill_after_seconds"] = after;
    c["kill_exit_code"] = code;
    c["acked_chains_added"] = added;
    c["streams_cut"] = stream_errors.load();
    rep.cycles.push_back(c);
    ++rep.cycles_done;
    out << "cycle " << cycle << ": ready after " << ready_s << " s, verified " << before
        << " acknowledged chains (lost " << lost << ", changed " << changed << "); streamed, SIGKILL after "
        << after << " s (exit " << code << "): +" << added << " acknowledged, " << stream_errors
        << " streams cut\n";
    if (code != 128 + SIGKILL) {
      rep.error = "cycle " + std::to_string(cycle) + ": SIGKILL did not end the server (exit " +
                  std::to_string(code) + ")";
      break;
    }
  }
  rep.acked_chains = acked.size();
  if (o.data_dir.empty()) std::filesystem::remove_all(dir);
  return rep;
}

}  // namespace ic::tools::bench
