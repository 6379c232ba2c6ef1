// inferencecache-bench: load and benchmark generator for an InferenceCache server.
//
// Modes (subcommands): baseline, lookup, mixed, ingest, fill, recovery, killloop, soak, frames, pd, lag. Every run is bounded
// by --duration per phase and/or --requests; only loopback targets unless --allow-remote.
// A table goes to stdout, progress to stderr, and --json FILE writes every figure.
// Exit codes: 0 ok, 1 the run failed (no successful call, server error), 2 usage error.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "tools/bench/killloop.hpp"
#include "tools/bench/follower_lag.hpp"
#include "tools/bench/pd_bench.hpp"
#include "tools/bench/report.hpp"
#include "tools/bench/runner.hpp"
#include "tools/bench/server_child.hpp"
#include "tools/bench/soak.hpp"
#include "tools/bench/stats.hpp"
#include "tools/bench/workload.hpp"
#include "tools/common/cli_parse.hpp"
#include "tools/common/codec.hpp"
#include "tools/common/http_client.hpp"

namespace ic::tools::bench {
namespace {

using json = nlohmann::json;
using steady = std::chrono::steady_clock;

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = ic::tools::exit_usage;

/// Everything the command line sets.
struct options {
  std::string mode;
  std::string addr = "127.0.0.1:9090";   ///< gRPC target; default 127.0.0.1:9090
  bool allow_remote = false;             ///< permit non-loopback targets; default false
  int concurrency = 16;                  ///< calls in flight (lookup/baseline); default 16
  int channels = 2;                      ///< TCP connections; default 2
  std::string duration = "5s";           ///< per measured phase; default 5s
  std::uint64_t requests = 0;            ///< per measured phase (calls or messages); 0 = time only
  std::string json_file;                 ///< write results as JSON here; default none
  workload_shape shape;
  // lookup / mixed
  std::uint64_t entries = 100000;        ///< index size to prefill (lookup, mixed, fill, recovery)
  bool skip_fill = false;                ///< the index already holds `entries` of this shape
  double ingest_rate = 100000;           ///< mixed: background ingest blocks/s; default 100k
  // ingest / fill
  int producers = 2;                     ///< concurrent ReportCacheState streams; default 2
  int messages_per_stream = 8;           ///< default 8
  int chains_per_message = 16;           ///< ingest: sessions per message; default 16
  int batch_blocks = 16384;              ///< fill: blocks per message; default 16384
  int server_pid = 0;                    ///< read this PID's VmRSS around fills; default none
  // recovery
  std::string server_binary;
  std::vector<std::string> server_args;
  std::string data_dir;
  std::string signal_name = "term";
  std::string restart_timeout = "300s";
  bool duration_given = false;           ///< --duration was set explicitly (bounds `fill`)
  // killloop (also uses server_binary, server_args, data_dir, restart_timeout)
  int cycles = 5;                        ///< SIGKILLs; default 5
  bool stream_shape_given = false;       ///< --messages-per-stream or --chains-per-message set
  std::string kill_after_max = "500ms";  ///< latest kill moment after ingest starts
  // soak (also uses server_binary, server_args, producers, ingest_rate, shape)
  bool ingest_rate_given = false;
  bool chain_blocks_given = false;
  std::string restart_every = "10m";     ///< one SIGTERM + one SIGKILL restart per period
  double lookup_rate = 200;              ///< checked lookups per second
  std::string policy_every = "20s";
  std::uint64_t chains = 0;              ///< pool size; 0 = 256 per placement
  std::uint64_t journal_fs_mb = 128;     ///< tmpfs for the data dir; 0 = none
  std::string fill_hold_max = "120s";
  std::string snapshot_every = "30s";    ///< the server's --snapshot-interval
  std::string fill_at;                   ///< default: half of --restart-every
  int warmup_minutes = 5;
  double max_rss_growth = 0.05;
  std::string markdown_file;
  // frames
  std::string out_dir;                   ///< where the gRPC-framed request bodies go
  // lag
  std::string follower;                  ///< the replica whose apply lag is measured
  // pd
  std::string admin_addr;                ///< the server's admin port (/topology)
  std::string token;                     ///< admin bearer token; default none
  std::string token_file;                ///< file holding the token (trimmed); default none
  pd_shape pd;
  int rounds = 2;                        ///< pairs of LookupRoute/LookupPDRoute phases
  host_port admin;                       ///< admin_addr parsed
};

/// Returns `m` as one gRPC message frame: flag 0 (uncompressed), 4-byte big-endian length,
/// the serialised message (what an HTTP/2 client such as h2load sends as the request body).
std::string grpc_frame(const google::protobuf::MessageLite& m) {
  const std::string body = m.SerializeAsString();
  const auto n = static_cast<std::uint32_t>(body.size());
  std::string out;
  out.reserve(5 + body.size());
  out.push_back('\0');
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xff));
  return out + body;
}

double to_seconds_or(const std::string& text, double fallback) {
  std::string err;
  return parse_seconds(text, &err).value_or(fallback);
}

json ingest_summary(const std::string& name, ingest_result& r) {
  latency_summary stream = summarize(r.stream_latency_us);
  latency_summary ack = summarize(r.ack_wait_us);
  const double bps = r.elapsed_s > 0 ? static_cast<double>(r.blocks_acked) / r.elapsed_s : 0;
  std::cout << name << ": " << r.blocks_acked << " blocks acked in " << fmt(r.elapsed_s, 2)
            << " s = " << fmt(bps, 0) << " blocks/s; " << r.messages << " messages, " << r.streams
            << " streams, " << r.errors << " errors\n"
            << "  ack wait (WritesDone->Ack) p50/p90/p99/p99.9: " << fmt(ack.p50) << " / "
            << fmt(ack.p90) << " / " << fmt(ack.p99) << " / " << fmt(ack.p999) << " us"
            << "; whole stream p50/p99: " << fmt(stream.p50) << " / " << fmt(stream.p99) << " us\n";
  if (!r.first_error.empty()) std::cout << "  first error: " << r.first_error << "\n";
  json j{{"blocks_acked", r.blocks_acked}, {"blocks_per_s", bps},    {"messages", r.messages},
         {"streams", r.streams},           {"errors", r.errors},     {"elapsed_s", r.elapsed_s},
         {"chains_started", r.chains_started}, {"ack_wait", to_json(ack)},
         {"stream_latency", to_json(stream)}, {"ack_reasons", r.ack_reasons}};
  if (!r.first_error.empty()) j["first_error"] = r.first_error;
  return j;
}

/// Shared machinery for one run: target, channels, workload, results.
class bench_run {
 public:
  explicit bench_run(const options& o)
      : o_(o), w_(o.shape), duration_s_(to_seconds_or(o.duration, 5)) {}

  int run() {
    if (o_.mode != "recovery" && o_.mode != "killloop" && o_.mode != "soak") channels_ = make_channels(o_.addr, o_.channels);
    result_["mode"] = o_.mode;
    result_["config"] = config_json();
    int rc = kExitUsage;
    if (o_.mode == "baseline") rc = run_baseline();
    else if (o_.mode == "lookup") rc = run_lookup(false);
    else if (o_.mode == "mixed") rc = run_lookup(true);
    else if (o_.mode == "ingest") rc = run_ingest_mode();
    else if (o_.mode == "fill") rc = run_fill_mode();
    else if (o_.mode == "recovery") rc = run_recovery();
    else if (o_.mode == "killloop") rc = run_killloop_mode();
    else if (o_.mode == "soak") rc = run_soak_mode();
    else if (o_.mode == "frames") rc = run_frames_mode();
    else if (o_.mode == "pd") rc = run_pd_mode();
    else if (o_.mode == "lag") rc = run_lag_mode();
    result_["exit_code"] = rc;
    if (!o_.json_file.empty()) {
      std::ofstream out(o_.json_file);
      out << result_.dump(2) << "\n";
      if (!out) {
        std::cerr << "inferencecache-bench: cannot write " << o_.json_file << "\n";
        return kExitFailed;
      }
    }
    return rc;
  }

 private:
  json config_json() const {
    return {{"addr", o_.addr},
            {"concurrency", o_.concurrency},
            {"channels", o_.channels},
            {"duration_s", duration_s_},
            {"requests", o_.requests},
            {"tenants", o_.shape.tenants},
            {"replicas", o_.shape.replicas},
            {"chain_blocks", o_.shape.chain_blocks},
            {"system_blocks", o_.shape.system_blocks},
            {"block_tokens", o_.shape.block_tokens},
            {"turns", o_.shape.turns},
            {"entries", o_.entries},
            {"ingest_rate", o_.ingest_rate},
            {"producers", o_.producers},
            {"hardware_threads", std::thread::hardware_concurrency()}};
  }

  limits phase_limits() const { return {duration_s_, o_.requests}; }

  /// Fills the index with whole chains 0..chains-1 in big messages; returns the result.
  ingest_result fill(std::uint64_t entries, const std::vector<std::shared_ptr<grpc::Channel>>& ch,
                     double max_seconds) {
    ingest_options io;
    io.producers = o_.producers;
    io.messages_per_stream = o_.messages_per_stream;
    io.chains_per_message = std::max(1, o_.batch_blocks / o_.shape.chain_blocks);
    io.max_chains = w_.chains_for_entries(entries);
    io.lim = {max_seconds, 0};
    workload_shape one_turn = o_.shape;
    one_turn.turns = 1;
    workload w(one_turn);
    return run_ingest(ch, w, io, nullptr, "fill");
  }

  /// Prefills (unless --skip-fill) and returns the number of chains the index holds.
  std::uint64_t prefill() {
    const std::uint64_t chains = w_.chains_for_entries(o_.entries);
    if (o_.skip_fill || o_.entries == 0) return chains;
    ingest_result r = fill(o_.entries, channels_, 600);
    result_["prefill"] = ingest_summary("prefill", r);
    prefill_failed_ = r.blocks_acked == 0;
    if (prefill_failed_) prefill_error_ = r.first_error;
    return chains;
  }

  int run_baseline() {
    health_calls calls(channels_, o_.concurrency);
    loop_result r = run_closed_loop(calls, o_.concurrency, phase_limits(), "baseline");
    print_latency_header();
    result_["baseline"] = latency_phase("Health/Check", r);
    return r.ok > 0 ? kExitOk : fail_line("no successful Health/Check: " + r.first_error);
  }

  int run_lookup(bool mixed) {
    const std::uint64_t chains = prefill();
    if (prefill_failed_) return fail_line("prefill failed: " + prefill_error_);
    health_calls health(channels_, o_.concurrency);
    lookup_calls lookups(channels_, o_.concurrency, w_, chains, o_.shape.seed * 7919);
    loop_result base_idle = run_closed_loop(health, o_.concurrency, phase_limits(), "baseline");
    loop_result base_busy, look;
    ingest_result ing;
    if (mixed) {
      std::atomic<bool> stop{false};
      ingest_options io = stream_shape();
      io.rate_blocks_per_s = o_.ingest_rate;
      io.first_chain = chains;
      io.lim = {3 * duration_s_ + 60, 0};
      std::thread ingest([&] { ing = run_ingest(channels_, w_, io, &stop, "ingest"); });
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      base_busy = run_closed_loop(health, o_.concurrency, phase_limits(), "baseline+ingest");
      look = run_closed_loop(lookups, o_.concurrency, phase_limits(), "lookup+ingest");
      stop.store(true);
      ingest.join();
    } else {
      look = run_closed_loop(lookups, o_.concurrency, phase_limits(), "lookup");
    }
    std::cout << "\nindex: ~" << w_.entries_for_chains(chains) << " (key x replica) entries, "
              << chains << " chains of " << o_.shape.chain_blocks << " blocks; concurrency "
              << o_.concurrency << ", " << o_.channels << " channels\n";
    print_latency_header();
    json b = latency_phase("Health/Check (idle)", base_idle);
    result_["baseline"] = b;
    if (mixed) result_["baseline_under_ingest"] = latency_phase("Health/Check (ingesting)", base_busy);
    json l = latency_phase(mixed ? "LookupRoute (ingesting)" : "LookupRoute", look);
    result_["lookup"] = l;
    result_["ratio"] = ratio("LookupRoute / Health (idle)", l, b);
    if (mixed) {
      result_["ratio_vs_busy_baseline"] =
          ratio("LookupRoute / Health (both ingesting)", l, result_["baseline_under_ingest"]);
      result_["ingest"] = ingest_summary("background ingest", ing);
    }
    std::vector<double> server_us = lookups.server_latencies_us();
    latency_summary srv = summarize(server_us);
    result_["lookup_server_reported"] = to_json(srv);
    std::cout << "server-reported lookup_latency_us p50/p99/p99.9: " << fmt(srv.p50) << " / "
              << fmt(srv.p99) << " / " << fmt(srv.p999) << "\n";
    std::uint64_t matched = look.labels.count("PREFIX_MATCH") ? look.labels["PREFIX_MATCH"] : 0;
    std::cout << "PREFIX_MATCH answers: " << matched << " of " << look.ok << "\n";
    if (look.ok == 0) return fail_line("no successful LookupRoute: " + look.first_error);
    if (base_idle.ok == 0) return fail_line("no successful Health/Check: " + base_idle.first_error);
    return kExitOk;
  }

  /// The producers' stream shape of --producers, --messages-per-stream, --chains-per-message.
  ingest_options stream_shape() const {
    ingest_options io;
    io.producers = o_.producers;
    io.messages_per_stream = o_.messages_per_stream;
    io.chains_per_message = o_.chains_per_message;
    return io;
  }

  int run_ingest_mode() {
    ingest_options io = stream_shape();
    io.lim = phase_limits();
    ingest_result r = run_ingest(channels_, w_, io, nullptr, "ingest");
    result_["ingest"] = ingest_summary("ingest", r);
    if (r.blocks_acked == 0) return fail_line("no block was acknowledged: " + r.first_error);
    return kExitOk;
  }

  int run_fill_mode() {
    const std::int64_t rss_before = o_.server_pid > 0 ? read_rss_bytes(o_.server_pid) : -1;
    // A fill is bounded by --duration when given, else by 10 minutes.
    ingest_result r = fill(o_.entries, channels_, o_.duration_given ? duration_s_ : 600);
    const std::uint64_t chains = std::min(r.chains_started, w_.chains_for_entries(o_.entries));
    const std::uint64_t entries = w_.entries_for_chains(chains);
    json j = ingest_summary("fill", r);
    j["entries_estimated"] = entries;
    j["entries_per_s"] = r.elapsed_s > 0 ? static_cast<double>(entries) / r.elapsed_s : 0;
    std::cout << "filled ~" << entries << " (key x replica) entries of " << o_.entries
              << " requested (" << chains << " chains)\n";
    if (o_.server_pid > 0) {
      const std::int64_t rss_after = read_rss_bytes(o_.server_pid);
      j["rss_before_bytes"] = rss_before;
      j["rss_after_bytes"] = rss_after;
      if (rss_before > 0 && rss_after > 0 && entries > 0) {
        const double per = static_cast<double>(rss_after - rss_before) / static_cast<double>(entries);
        j["rss_bytes_per_entry"] = per;
        std::cout << "server RSS " << rss_before / (1 << 20) << " MiB -> " << rss_after / (1 << 20)
                  << " MiB: " << fmt(per, 1) << " bytes per entry\n";
      }
    }
    result_["fill"] = j;
    if (r.blocks_acked == 0) return fail_line("no block was acknowledged: " + r.first_error);
    return kExitOk;
  }

  /// Polls /readyz until 200; seconds since `t0`, or -1 after `timeout_s`.
  double wait_ready(const host_port& http, steady::time_point t0, double timeout_s) {
    while (std::chrono::duration<double>(steady::now() - t0).count() < timeout_s) {
      http_request req;
      req.path = "/readyz";
      if (http_call(http, req, 1.0).status == 200)
        return std::chrono::duration<double>(steady::now() - t0).count();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return -1;
  }

  /// Repeats one chain lookup until PREFIX_MATCH; seconds since `t0`, or -1 after `timeout_s`.
  double wait_first_match(const std::string& grpc_addr, steady::time_point t0, double timeout_s) {
    auto ch = make_channels(grpc_addr, 1);
    auto stub = v1::InferenceCache::NewStub(ch[0]);
    v1::LookupRouteRequest req;
    req.set_tenant_id(w_.tenant_name(w_.tenant_of(0)));
    req.set_model_id(o_.shape.model);
    req.set_hash_scheme(o_.shape.scheme);
    std::vector<std::uint64_t> hashes;
    w_.chain(0, o_.shape.chain_blocks, &hashes);
    for (auto h : hashes) {
      req.add_block_hashes(be64(h));
      req.add_block_token_counts(o_.shape.block_tokens);
    }
    while (std::chrono::duration<double>(steady::now() - t0).count() < timeout_s) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
      v1::LookupRouteResponse resp;
      if (stub->LookupRoute(&ctx, req, &resp).ok() && resp.reason_code() == "PREFIX_MATCH")
        return std::chrono::duration<double>(steady::now() - t0).count();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return -1;
  }

  int run_recovery() {
    std::string dir = o_.data_dir;
    if (dir.empty()) {
      char tmpl[] = "/tmp/ic_bench_recovery_XXXXXX";
      if (::mkdtemp(tmpl) == nullptr) return fail_line("cannot create a temporary data dir");
      dir = tmpl;
    }
    std::vector<std::string> args = {"--insecure-disable-auth", "--data-dir=" + dir,
                                     "--grpc-bind-address=127.0.0.1:0",
                                     "--http-bind-address=127.0.0.1:0",
                                     "--snapshot-bind-address=127.0.0.1:0"};
    args.insert(args.end(), o_.server_args.begin(), o_.server_args.end());
    const double timeout_s = to_seconds_or(o_.restart_timeout, 300);
    std::string err;
    auto first = server_child::start(o_.server_binary, args, &err);
    if (!first) return fail_line(err);
    if (first->wait_for_line("\"ready\"", std::chrono::seconds(60)).empty())
      return fail_line("the server did not get ready: " + first->tail());
    auto ch = make_channels(first->grpc_addr(), o_.channels);
    const std::int64_t rss_before = read_rss_bytes(first->pid());
    ingest_result filled = fill(o_.entries, ch, timeout_s);
    const std::int64_t rss_after = read_rss_bytes(first->pid());
    json f = ingest_summary("fill", filled);
    const std::uint64_t entries =
        w_.entries_for_chains(std::min(filled.chains_started, w_.chains_for_entries(o_.entries)));
    f["entries_estimated"] = entries;
    f["rss_before_bytes"] = rss_before;
    f["rss_after_bytes"] = rss_after;
    if (entries > 0 && rss_before > 0 && rss_after > 0) {
      f["rss_bytes_per_entry"] = static_cast<double>(rss_after - rss_before) / static_cast<double>(entries);
      std::cout << "server RSS " << rss_before / (1 << 20) << " MiB -> " << rss_after / (1 << 20)
                << " MiB over ~" << entries << " entries: "
                << fmt(f["rss_bytes_per_entry"].get<double>(), 1) << " bytes per entry\n";
    }
    result_["fill"] = f;
    ch.clear();
    const int sig = o_.signal_name == "kill" ? SIGKILL : SIGTERM;
    const auto stop_t0 = steady::now();
    const int code = first->stop(sig, std::chrono::seconds(60));
    const double stop_s = std::chrono::duration<double>(steady::now() - stop_t0).count();
    first.reset();

    const auto t0 = steady::now();
    auto second = server_child::start(o_.server_binary, args, &err);
    if (!second) return fail_line(err);
    if (second->wait_for_line("\"startup\"", std::chrono::seconds(30)).empty())
      return fail_line("the restarted server logged no startup line: " + second->tail());
    auto http = parse_host_port(second->http_addr(), &err);
    if (!http) return fail_line(err);
    const double ready_s = wait_ready(*http, t0, timeout_s);
    const double match_s = wait_first_match(second->grpc_addr(), t0, timeout_s);
    const std::string recovered = second->wait_for_line("\"recovered\"", std::chrono::seconds(1));
    const std::int64_t rss_restarted = read_rss_bytes(second->pid());
    second->stop(SIGTERM, std::chrono::seconds(60));
    if (o_.data_dir.empty()) std::filesystem::remove_all(dir);

    json r{{"signal", o_.signal_name}, {"stop_exit_code", code}, {"stop_seconds", stop_s},
           {"ready_seconds", ready_s}, {"first_match_seconds", match_s},
           {"entries_estimated", entries}, {"rss_after_restart_bytes", rss_restarted}};
    auto j = nlohmann::json::parse(recovered, nullptr, false);
    if (j.is_object()) r["server_recovered_line"] = j;
    result_["recovery"] = r;
    std::cout << "recovery after SIG" << (sig == SIGKILL ? "KILL" : "TERM") << " (exit " << code
              << ", stop took " << fmt(stop_s, 2) << " s) with ~" << entries << " entries:\n"
              << "  /readyz 200 after " << fmt(ready_s, 3) << " s; first PREFIX_MATCH after "
              << fmt(match_s, 3) << " s\n";
    if (j.is_object())
      std::cout << "  server: replayed " << j.value("records_replayed", "?") << " records in "
                << j.value("seconds", "?") << " s, " << j.value("entries", "?") << " entries\n";
    if (ready_s < 0 || match_s < 0) return fail_line("the restarted server did not serve in time");
    return kExitOk;
  }

  int run_killloop_mode() {
    killloop_options k;
    k.server_binary = o_.server_binary;
    k.server_args = o_.server_args;
    k.data_dir = o_.data_dir;
    k.cycles = o_.cycles;
    k.seed = o_.shape.seed;
    k.producers = o_.producers;
    // Short streams by default, so every cycle acknowledges some before its kill.
    k.messages_per_stream = o_.stream_shape_given ? o_.messages_per_stream : 2;
    k.chains_per_message = o_.stream_shape_given ? o_.chains_per_message : 4;
    k.ingest_rate_blocks_per_s = o_.ingest_rate;
    k.kill_after_max_s = to_seconds_or(o_.kill_after_max, 0.5);
    k.kill_after_min_s = std::min(0.05, k.kill_after_max_s);
    k.restart_timeout_s = to_seconds_or(o_.restart_timeout, 300);
    // Chains must share no block, so later ingest cannot change an earlier chain's answer.
    workload_shape shape = o_.shape;
    shape.system_blocks = 0;
    shape.turns = 1;
    killloop_report r = run_killloop(k, workload(shape), std::cout);
    result_["killloop"] = {{"cycles_done", r.cycles_done}, {"acked_chains", r.acked_chains},
                           {"lookups", r.lookups},         {"lost", r.lost},
                           {"changed", r.changed},         {"streams_cut", r.stream_errors},
                           {"cycles", r.cycles}};
    std::cout << "killloop: " << r.cycles_done << " SIGKILLs, " << r.acked_chains
              << " acknowledged chains, " << r.lookups << " verification lookups, lost " << r.lost
              << ", changed " << r.changed << "\n";
    if (!r.error.empty()) return fail_line(r.error);
    if (!r.first_problem.empty()) return fail_line(r.first_problem);
    if (r.acked_chains == 0) return fail_line("no stream was acknowledged before a kill");
    return kExitOk;
  }

  int run_soak_mode() {
    soak_options k;
    k.server_binary = o_.server_binary;
    k.server_args = o_.server_args;
    k.duration_s = duration_s_;
    k.restart_every_s = to_seconds_or(o_.restart_every, 600);
    k.producers = o_.producers;
    k.tenants = o_.shape.tenants;
    k.replicas = o_.shape.replicas;
    k.chain_blocks = o_.chain_blocks_given ? o_.shape.chain_blocks : 16;
    k.chains = o_.chains;
    k.ingest_rate_blocks_per_s = o_.ingest_rate_given ? o_.ingest_rate : 5000;
    k.lookup_rate_per_s = o_.lookup_rate;
    k.policy_every_s = to_seconds_or(o_.policy_every, 20);
    k.journal_fs_bytes = o_.journal_fs_mb << 20;
    k.fill_hold_max_s = to_seconds_or(o_.fill_hold_max, 120);
    k.snapshot_every_s = to_seconds_or(o_.snapshot_every, 30);
    if (!o_.fill_at.empty()) k.fill_at_s = to_seconds_or(o_.fill_at, -1);
    k.warmup_minutes = o_.warmup_minutes;
    k.max_rss_growth = o_.max_rss_growth;
    k.seed = o_.shape.seed;
    k.markdown_file = o_.markdown_file;
    soak_report r = run_soak(k, std::cout);
    result_["soak"] = r.to_json();
    std::cout << "soak: " << r.last.acked << " acknowledged updates, " << r.last.lookups
              << " lookups (" << r.undecidable << " not decidable), " << r.last.errors
              << " errors, " << r.last.lost << " lost, " << r.wrong << " wrong; " << r.term_restarts
              << " SIGTERM + " << r.kill_restarts << " SIGKILL restarts, " << r.crashes << " crashes, " << r.policy_pushes
              << " policy pushes, " << r.subscriptions << " subscriptions (" << r.events_received
              << " events, " << r.metrics_received << " metrics), " << r.cut
              << " calls cut by restarts\n";
    std::cout << "soak: journal fill: " << r.fill << "\n";
    if (r.rss.applicable)
      std::cout << "soak: RSS after warm-up (minute " << o_.warmup_minutes << "): "
                << fmt(r.rss.baseline / 1048576.0, 1) << " MiB, peak later "
                << fmt(r.rss.peak / 1048576.0, 1) << " MiB (" << fmt(r.rss.growth * 100, 2)
                << " %)\n";
    else
      std::cout << "soak: RSS growth not applicable (the run is shorter than warm-up + 1 minute)\n";
    std::cout << "soak: " << (r.verdict.empty() ? "PASSED" : "FAILED: " + r.verdict) << "\n";
    if (!r.verdict.empty()) return fail_line(r.verdict);
    return kExitOk;
  }

  /// Writes the request bodies of an independent HTTP/2 load generator (h2load): one
  /// Health/Check and one whole-chain LookupRoute of a chain the (pre)filled index holds,
  /// checked once over gRPC so a run never measures a miss by accident.
  int run_frames_mode() {
    const std::uint64_t chains = prefill();
    if (prefill_failed_) return fail_line("prefill failed: " + prefill_error_);
    if (chains == 0) return fail_line("--entries must be positive");
    const std::uint64_t chain = mix64(o_.shape.seed * 7919) % chains;
    v1::LookupRouteRequest lookup;
    whole_chain_lookup(w_, chain, &lookup);
    const std::vector<std::pair<std::string, std::string>> files = {
        {"health_check.bin", grpc_frame(grpc::health::v1::HealthCheckRequest{})},
        {"lookup_route.bin", grpc_frame(lookup)}};
    std::filesystem::create_directories(o_.out_dir);
    for (const auto& [name, bytes] : files) {
      std::ofstream out(o_.out_dir + "/" + name, std::ios::binary);
      out << bytes;
      if (!out) return fail_line("cannot write " + o_.out_dir + "/" + name);
    }
    auto stub = v1::InferenceCache::NewStub(channels_.front());
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));  // valgrind too
    v1::LookupRouteResponse resp;
    const grpc::Status st = stub->LookupRoute(&ctx, lookup, &resp);
    if (!st.ok()) return fail_line("LookupRoute of the framed request failed: " + st.error_message());
    if (resp.reason_code() != "PREFIX_MATCH")
      return fail_line("the framed LookupRoute answers " + resp.reason_code() +
                       ", not PREFIX_MATCH: is the index filled with this shape?");
    result_["frames"] = {{"out_dir", o_.out_dir}, {"chain", chain},
                         {"lookup_bytes", files[1].second.size()},
                         {"reason_code", resp.reason_code()},
                         {"replica_scores", resp.replica_scores_size()}};
    std::cout << "wrote " << o_.out_dir << "/{health_check,lookup_route}.bin; chain " << chain
              << " answers " << resp.reason_code() << " with " << resp.replica_scores_size()
              << " replica scores\n";
    return kExitOk;
  }

  /// Cross-replica apply lag under paced ingest (tools/bench/follower_lag.hpp).
  int run_lag_mode() {
    follower_lag_options l;
    l.follower = o_.follower;
    l.ingest = stream_shape();
    l.ingest.rate_blocks_per_s = o_.ingest_rate;
    l.duration_s = duration_s_;
    follower_lag_result r = run_follower_lag(l, w_, channels_);
    result_["ingest"] = ingest_summary("ingest offered " + fmt(o_.ingest_rate, 0) + " blocks/s", r.ingest);
    latency_summary lag = summarize(r.lag_us), ack = summarize(r.marker_ack_us);
    result_["lag"] = to_json(lag);
    result_["marker_ack"] = to_json(ack);
    result_["markers_refused"] = r.markers_refused;
    result_["markers_missed"] = r.markers_missed;
    std::cout << "marker Ack on " << o_.addr << " -> served by " << o_.follower << " (" << lag.count
              << " markers): p50 " << fmt(lag.p50 / 1000, 2) << " ms, p99 " << fmt(lag.p99 / 1000, 2)
              << " ms, max " << fmt(lag.max / 1000, 2) << " ms; marker Ack p50/p99 "
              << fmt(ack.p50 / 1000, 2) << " / " << fmt(ack.p99 / 1000, 2) << " ms; refused "
              << r.markers_refused << ", missed " << r.markers_missed << "\n";
    if (!r.error.empty()) std::cout << "first error: " << r.error << "\n";
    if (lag.count == 0) return fail_line("no marker was served by the follower: " + r.error);
    return r.markers_missed == 0 ? kExitOk : fail_line("markers never served by the follower");
  }

  /// LookupPDRoute beside LookupRoute over the (pre)filled index (tools/bench/pd_bench.hpp).
  int run_pd_mode() {
    const std::uint64_t chains = prefill();
    if (prefill_failed_) return fail_line("prefill failed: " + prefill_error_);
    if (chains == 0) return fail_line("--entries must be positive");
    pd_bench_options p;
    p.admin = o_.admin;
    p.token = o_.token;
    p.shape = o_.pd;
    p.rounds = o_.rounds;
    p.concurrency = o_.concurrency;
    p.lim = phase_limits();
    p.chains = chains;
    p.seed = o_.shape.seed;
    p.server_pid = o_.server_pid;
    pd_bench_result r = run_pd_bench(p, w_, channels_);
    for (const auto& [k, v] : r.result.items()) result_[k] = v;
    return r.error.empty() ? kExitOk : fail_line(r.error);
  }

  int fail_line(const std::string& msg) {
    std::cerr << "inferencecache-bench " << o_.mode << ": " << msg << "\n";
    result_["error"] = msg;
    return kExitFailed;
  }

  const options& o_;
  workload w_;
  double duration_s_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  json result_;
  bool prefill_failed_ = false;
  std::string prefill_error_;
};

int run(int argc, char** argv) {
  CLI::App app{"inferencecache-bench: gRPC load and benchmark generator for InferenceCache"};
  app.name("inferencecache-bench");
  app.require_subcommand(1);
  app.fallthrough();
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  options o;
  app.add_option("--addr", o.addr, "gRPC target host:port")->capture_default_str();
  app.add_flag("--allow-remote", o.allow_remote, "Allow a non-loopback target");
  app.add_option("--concurrency,-c", o.concurrency, "Calls in flight")->capture_default_str();
  app.add_option("--channels", o.channels, "TCP connections")->capture_default_str();
  app.add_option("--duration,-d", o.duration, "Length of each measured phase")->capture_default_str();
  app.add_option("--requests,-n", o.requests, "Calls (or messages) per phase; 0 = time only");
  app.add_option("--json", o.json_file, "Write all results as JSON to FILE");
  app.add_option("--tenants", o.shape.tenants, "Tenants")->capture_default_str();
  app.add_option("--replicas", o.shape.replicas, "Replicas per tenant")->capture_default_str();
  app.add_option("--chain-blocks", o.shape.chain_blocks, "Blocks per chain")->capture_default_str();
  app.add_option("--system-blocks", o.shape.system_blocks, "Shared system-prompt blocks")
      ->capture_default_str();
  app.add_option("--block-tokens", o.shape.block_tokens, "Tokens per block")->capture_default_str();
  app.add_option("--turns", o.shape.turns, "Turns per session (ingest, mixed)")->capture_default_str();
  app.add_option("--seed", o.shape.seed, "Hash seed")->capture_default_str();
  app.add_option("--model", o.shape.model, "Model id")->capture_default_str();
  app.add_option("--entries", o.entries, "(key x replica) entries to fill")->capture_default_str();
  app.add_flag("--skip-fill", o.skip_fill, "The index already holds --entries of this shape");
  app.add_option("--producers", o.producers, "Concurrent ReportCacheState streams")
      ->capture_default_str();
  app.add_option("--messages-per-stream", o.messages_per_stream, "Messages per stream")
      ->capture_default_str();
  app.add_option("--chains-per-message", o.chains_per_message, "Sessions per message (ingest)")
      ->capture_default_str();
  app.add_option("--batch-blocks", o.batch_blocks, "Blocks per message (fill)")->capture_default_str();
  app.add_option("--server-pid", o.server_pid, "Read this PID's VmRSS before and after a fill");

  app.add_subcommand("baseline", "Health/Check latency: the transport's floor");
  app.add_subcommand("lookup", "LookupRoute latency over a prefilled index, beside the baseline");
  app.add_option("--ingest-rate", o.ingest_rate, "mixed, lag: background ingest blocks/s")
      ->capture_default_str();
  app.add_subcommand("mixed", "Lookups while ingesting at --ingest-rate");
  app.add_subcommand("ingest", "ReportCacheState throughput and Ack latency");
  app.add_subcommand("fill", "Fill the index to --entries in big messages");
  auto* rec = app.add_subcommand("recovery", "Fill, stop, restart: time to /readyz and first match");
  rec->add_option("--server-binary", o.server_binary, "Path of inferencecache-server")->required();
  rec->add_option("--server-arg", o.server_args, "Extra server flag (repeatable)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  rec->add_option("--data-dir", o.data_dir, "Data dir (default: a fresh temporary one)");
  rec->add_option("--signal", o.signal_name, "term or kill")
      ->check(CLI::IsMember({"term", "kill"}))
      ->capture_default_str();
  rec->add_option("--restart-timeout", o.restart_timeout, "Give up waiting after this long")
      ->capture_default_str();
  auto* kl = app.add_subcommand(
      "killloop", "SIGKILL during streaming ingest, restart, verify every acknowledged update");
  kl->add_option("--server-binary", o.server_binary, "Path of inferencecache-server")->required();
  kl->add_option("--server-arg", o.server_args, "Extra server flag (repeatable)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  kl->add_option("--data-dir", o.data_dir, "Data dir (default: a fresh temporary one)");
  kl->add_option("--cycles", o.cycles, "SIGKILLs (each followed by a restart and a check)")
      ->capture_default_str();
  kl->add_option("--kill-after-max", o.kill_after_max,
                 "Kill at a random moment up to this long after ingest starts (from 50ms)")
      ->capture_default_str();
  kl->add_option("--restart-timeout", o.restart_timeout, "Give up waiting after this long")
      ->capture_default_str();

  auto* sk = app.add_subcommand(
      "soak", "Mixed workload with restarts and a full journal, checked against a model");
  sk->add_option("--server-binary", o.server_binary, "Path of inferencecache-server")->required();
  sk->add_option("--server-arg", o.server_args, "Extra server flag (repeatable)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sk->add_option("--restart-every", o.restart_every,
                 "One SIGTERM (at 1/3) and one SIGKILL (at 2/3) restart per period")
      ->capture_default_str();
  sk->add_option("--lookup-rate", o.lookup_rate, "Checked lookups per second")->capture_default_str();
  sk->add_option("--policy-every", o.policy_every, "POST /policy this often")->capture_default_str();
  sk->add_option("--chains", o.chains, "Chains in the pool (0 = 256 per placement)");
  sk->add_option("--journal-fs-mb", o.journal_fs_mb, "tmpfs size for the data dir (0 = no tmpfs)")
      ->capture_default_str();
  sk->add_option("--fill-hold-max", o.fill_hold_max,
                 "Keep the tmpfs full until an update is refused, at most this long")
      ->capture_default_str();
  sk->add_option("--snapshot-every", o.snapshot_every,
                 "The server's --snapshot-interval (each snapshot truncates the journal)")
      ->capture_default_str();
  sk->add_option("--fill-at", o.fill_at,
                 "Fill the journal's tmpfs this long after the start (default: half of --restart-every)");
  sk->add_option("--warmup", o.warmup_minutes, "Minutes before the RSS baseline row")
      ->capture_default_str();
  sk->add_option("--max-rss-growth", o.max_rss_growth, "Fail when RSS grows this much after warm-up")
      ->capture_default_str();
  sk->add_option("--markdown", o.markdown_file, "Also write the per-minute table as Markdown");
  auto* frames = app.add_subcommand(
      "frames", "Write gRPC-framed Health/Check and LookupRoute bodies for h2load (prefills)");
  frames->add_option("--out-dir", o.out_dir, "Directory for health_check.bin and lookup_route.bin")
      ->required();

  auto* lag = app.add_subcommand(
      "lag", "JetStream: Ack on --addr -> served by --follower, while ingesting at --ingest-rate");
  lag->add_option("--follower", o.follower, "The other replica's gRPC host:port")->required();

  auto* pd = app.add_subcommand(
      "pd", "LookupPDRoute beside LookupRoute on one filled index (64 + 64 replica topology)");
  pd->add_option("--admin-addr", o.admin_addr, "The server's admin port host:port (/topology)")
      ->required();
  pd->add_option("--token", o.token, "Admin bearer token");
  pd->add_option("--token-file", o.token_file, "File holding the admin bearer token");
  pd->add_option("--decode-replicas", o.pd.decode, "Decode replicas per topology (prefill = --replicas)")
      ->capture_default_str();
  pd->add_flag("--explicit-ids", o.pd.explicit_ids, "Pools list every replica id (default: one pattern)");
  pd->add_option("--rounds", o.rounds, "Pairs of phases (LookupRoute, LookupPDRoute; swapped each round)")
      ->capture_default_str();

  if (auto code = parse_command_line(app, argc, argv, "inferencecache-bench")) return *code;
  o.mode = app.get_subcommands().front()->get_name();
  o.duration_given = app.get_option("--duration")->count() > 0;
  o.ingest_rate_given = app.get_option("--ingest-rate")->count() > 0;
  o.chain_blocks_given = app.get_option("--chain-blocks")->count() > 0;
  o.stream_shape_given = app.get_option("--messages-per-stream")->count() > 0 ||
                         app.get_option("--chains-per-message")->count() > 0;
  auto usage = [](const std::string& msg) {
    std::cerr << "inferencecache-bench: " << msg << " (see --help)\n";
    return kExitUsage;
  };
  std::string err;
  auto target = parse_host_port(o.addr, &err);
  if (!target) return usage(err);
  if (!o.allow_remote && !is_loopback_host(target->host))
    return usage("--addr " + o.addr + " is not a loopback address; pass --allow-remote to load it");
  auto d = parse_seconds(o.duration, &err);
  if (!d || *d <= 0) return usage(d ? "--duration must be positive" : err);
  if (*d > 3600) return usage("--duration must be at most 1h");
  if (!parse_seconds(o.restart_timeout, &err)) return usage(err);
  if (o.concurrency <= 0 || o.concurrency > 4096) return usage("--concurrency must be in [1, 4096]");
  if (o.channels <= 0 || o.channels > 256) return usage("--channels must be in [1, 256]");
  if (o.producers <= 0 || o.producers > 256) return usage("--producers must be in [1, 256]");
  if (o.messages_per_stream <= 0) return usage("--messages-per-stream must be positive");
  if (o.chains_per_message <= 0) return usage("--chains-per-message must be positive");
  if (o.batch_blocks <= 0) return usage("--batch-blocks must be positive");
  if (o.ingest_rate <= 0) return usage("--ingest-rate must be positive");
  if (o.cycles <= 0 || o.cycles > 10000) return usage("--cycles must be in [1, 10000]");
  auto kill_max = parse_seconds(o.kill_after_max, &err);
  if (!kill_max || *kill_max <= 0) return usage(kill_max ? "--kill-after-max must be positive" : err);
  if (auto bad = validate(o.shape); !bad.empty()) return usage(bad);
  if (o.mode == "soak") {
    auto every = parse_seconds(o.restart_every, &err);
    if (!every || *every <= 0) return usage(every ? "--restart-every must be positive" : err);
    auto pol = parse_seconds(o.policy_every, &err);
    if (!pol || *pol <= 0) return usage(pol ? "--policy-every must be positive" : err);
    auto hold = parse_seconds(o.fill_hold_max, &err);
    if (!hold || *hold <= 0) return usage(hold ? "--fill-hold-max must be positive" : err);
    if (!o.fill_at.empty() && !parse_seconds(o.fill_at, &err)) return usage(err);
    auto snap = parse_seconds(o.snapshot_every, &err);
    if (!snap || *snap < 1) return usage(snap ? "--snapshot-every must be at least 1s" : err);
    if (o.lookup_rate <= 0 || o.lookup_rate > 100000) return usage("--lookup-rate must be in (0, 100000]");
    if (o.warmup_minutes < 0) return usage("--warmup must not be negative");
    if (o.max_rss_growth <= 0) return usage("--max-rss-growth must be positive");
    if (o.journal_fs_mb > (1u << 20)) return usage("--journal-fs-mb is too large");
  }
  if (o.mode == "lag") {
    auto f = parse_host_port(o.follower, &err);
    if (!f) return usage("--follower: " + err);
    if (!o.allow_remote && !is_loopback_host(f->host))
      return usage("--follower " + o.follower + " is not a loopback address; pass --allow-remote");
  }
  if (o.mode == "pd") {
    auto admin = parse_host_port(o.admin_addr, &err);
    if (!admin) return usage("--admin-addr: " + err);
    if (!o.allow_remote && !is_loopback_host(admin->host))
      return usage("--admin-addr " + o.admin_addr + " is not a loopback address; pass --allow-remote");
    o.admin = *admin;
    if (!o.token_file.empty() && !read_token_file(o.token_file, &o.token, &err)) return usage(err);
    if (o.rounds <= 0 || o.rounds > 100) return usage("--rounds must be in [1, 100]");
    if (auto bad = validate(workload(o.shape), o.pd); !bad.empty()) return usage(bad);
  }
  std::signal(SIGPIPE, SIG_IGN);
  bench_run r(o);
  return r.run();
}

}  // namespace
}  // namespace ic::tools::bench

int main(int argc, char** argv) { return ic::tools::bench::run(argc, argv); }
