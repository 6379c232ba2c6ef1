#include "tools/bench/pd_bench.hpp"

#include <chrono>
#include <iostream>
#include <set>

#include <grpcpp/client_context.h>

#include "tools/bench/report.hpp"
#include "tools/common/http_client.hpp"

namespace ic::tools::bench {
namespace {

using json = nlohmann::json;

std::int64_t unix_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

/// POST /topology; "" when the server answered 204.
std::string push_topology(const pd_bench_options& o, const std::string& body) {
  http_request req{"POST", "/topology", body, {{"Content-Type", "application/json"}}};
  add_bearer(o.token, &req);
  const http_response res = http_call(o.admin, req, 30.0);
  if (!res.error.empty()) return "POST /topology: " + res.error;
  if (res.status != 204)
    return "POST /topology answered HTTP " + std::to_string(res.status) + ": " + first_line(res.body);
  return "";
}

/// One ReportCacheState stream of `tenant`: a stats report (now) of every replica.
std::string report_tenant(v1::InferenceCache::Stub& stub, const workload& w, const std::string& tenant,
                          const std::vector<pd_replica>& replicas) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::Ack ack;
  auto writer = stub.ReportCacheState(&ctx, &ack);
  for (const auto& r : replicas) {
    v1::CacheStateUpdate u;
    u.set_replica_id(r.id);
    u.set_tenant_id(tenant);
    u.set_model_id(w.shape().model);
    u.set_hash_scheme(w.shape().scheme);
    u.set_timestamp_us(unix_us());
    u.mutable_stats()->set_replica_id(r.id);
    u.mutable_stats()->set_pressure(r.pressure);
    if (!writer->Write(u)) break;
  }
  writer->WritesDone();
  const grpc::Status st = writer->Finish();
  if (!st.ok()) return "stats report of " + tenant + ": " + st.error_message();
  if (!ack.accepted()) return "stats report of " + tenant + " refused: " + ack.reason_code();
  return "";
}

/// GetCacheState of `tenant` lists a stats row for every replica.
std::string check_tenant(v1::InferenceCache::Stub& stub, const workload& w, const std::string& tenant,
                         const std::vector<pd_replica>& replicas) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::GetCacheStateRequest req;
  req.set_tenant_id(tenant);
  req.set_model_id(w.shape().model);
  v1::GetCacheStateResponse resp;
  const grpc::Status st = stub.GetCacheState(&ctx, req, &resp);
  if (!st.ok()) return "GetCacheState of " + tenant + ": " + st.error_message();
  std::set<std::string> seen;
  for (const auto& r : resp.replicas()) seen.insert(r.replica_id());
  for (const auto& r : replicas)
    if (!seen.count(r.id)) return "GetCacheState of " + tenant + " has no stats row for " + r.id;
  return "";
}

/// Every prefill and decode replica of every tenant reports its stats now; with `check`,
/// GetCacheState must then show each one's row. "" when all is well, else the first problem.
std::string report_stats(const workload& w, const pd_shape& s,
                         const std::shared_ptr<grpc::Channel>& channel, bool check) {
  auto stub = v1::InferenceCache::NewStub(channel);
  const std::vector<pd_replica> replicas = pd_replicas(w, s);
  for (int t = 0; t < w.shape().tenants; ++t) {
    const std::string tenant = w.tenant_name(t);
    std::string bad = report_tenant(*stub, w, tenant, replicas);
    if (bad.empty() && check) bad = check_tenant(*stub, w, tenant, replicas);
    if (!bad.empty()) return bad;
  }
  return "";
}

answer_tally tally_of(const loop_result& r) { return {r.ok, r.errors, r.labels}; }

/// One measured phase.
struct phase {
  std::string name;
  bool pd = false;
  loop_result r;
  double cpu_s = -1;  ///< the server's CPU time over the phase; < 0 unknown
};

/// Both RPCs over all rounds.
struct totals {
  loop_result route, pd;
  double route_cpu_s = 0, pd_cpu_s = 0;  ///< < 0 unknown
  std::vector<double> route_server_us;   ///< LookupRoute's own lookup_latency_us
};

/// Runs `o.rounds` pairs of phases (LookupRoute first in odd rounds, LookupPDRoute first in
/// even ones), the stats refreshed before each; "" or the first problem.
std::string run_phases(const pd_bench_options& o, const workload& w,
                       const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                       std::vector<phase>* phases, totals* all) {
  const auto server_cpu = [&] { return o.server_pid > 0 ? read_cpu_seconds(o.server_pid) : -1.0; };
  if (o.server_pid <= 0) all->route_cpu_s = all->pd_cpu_s = -1;
  for (int round = 0; round < o.rounds; ++round) {
    const std::uint64_t seed = o.seed * 7919 + static_cast<std::uint64_t>(round);
    for (int k = 0; k < 2; ++k) {
      phase p;
      p.pd = (k == 0) == (round % 2 == 1);
      p.name = std::string(p.pd ? "LookupPDRoute" : "LookupRoute") + " (round " +
               std::to_string(round + 1) + ")";
      if (auto bad = report_stats(w, o.shape, channels.front(), false); !bad.empty()) return bad;
      const double cpu0 = server_cpu();
      if (p.pd) {
        pd_calls calls(channels, o.concurrency, w, o.shape, o.chains, seed);
        p.r = run_closed_loop(calls, o.concurrency, o.lim, p.name);
      } else {
        lookup_calls calls(channels, o.concurrency, w, o.chains, seed);
        p.r = run_closed_loop(calls, o.concurrency, o.lim, p.name);
        const auto srv = calls.server_latencies_us();
        all->route_server_us.insert(all->route_server_us.end(), srv.begin(), srv.end());
      }
      const double cpu1 = server_cpu();
      if (cpu0 >= 0 && cpu1 >= 0) p.cpu_s = cpu1 - cpu0;
      double& sum = p.pd ? all->pd_cpu_s : all->route_cpu_s;
      sum = p.cpu_s >= 0 && sum >= 0 ? sum + p.cpu_s : -1;
      merge_into(p.pd ? &all->pd : &all->route, p.r);
      phases->push_back(std::move(p));
    }
  }
  return "";
}

/// Prints the table and the ratios; fills `out->result` and `out->error` (the verdict).
void summarise(std::vector<phase>& phases, totals& all, pd_bench_result* out) {
  print_latency_header();
  json rounds = json::array();
  for (auto& p : phases) {
    json j = latency_phase(p.name, p.r);
    j["name"] = p.name;
    j["rpc"] = p.pd ? "LookupPDRoute" : "LookupRoute";
    if (p.cpu_s >= 0 && p.r.ok > 0) j["server_cpu_us_per_call"] = p.cpu_s * 1e6 / static_cast<double>(p.r.ok);
    rounds.push_back(std::move(j));
  }
  json route = latency_phase("LookupRoute (all rounds)", all.route);
  json pd = latency_phase("LookupPDRoute (all rounds)", all.pd);
  json ratio_j = ratio("LookupPDRoute / LookupRoute", pd, route);
  const double route_rate = route.value("calls_per_s", 0.0);
  ratio_j["calls_per_s"] = route_rate > 0 ? pd.value("calls_per_s", 0.0) / route_rate : 0;
  json per_round = json::array();
  for (std::size_t i = 0; i + 1 < rounds.size(); i += 2) {  // a round's two phases are adjacent
    const bool pd_first = rounds[i].value("rpc", "") == "LookupPDRoute";
    const json& a = rounds[pd_first ? i : i + 1];
    const double b50 = rounds[pd_first ? i + 1 : i].value("p50_us", 0.0);
    per_round.push_back(b50 > 0 ? a.value("p50_us", 0.0) / b50 : 0);
  }
  ratio_j["p50_per_round"] = per_round;
  std::cout << "  calls/s " << fmt(ratio_j["calls_per_s"].get<double>(), 2) << "x; p50 per round:";
  for (const auto& v : per_round) std::cout << " " << fmt(v.get<double>(), 2) << "x";
  std::cout << "\n";
  if (all.route_cpu_s > 0 && all.pd_cpu_s >= 0 && all.route.ok > 0 && all.pd.ok > 0) {
    const double route_us = all.route_cpu_s * 1e6 / static_cast<double>(all.route.ok);
    const double pd_us = all.pd_cpu_s * 1e6 / static_cast<double>(all.pd.ok);
    route["server_cpu_us_per_call"] = route_us;
    pd["server_cpu_us_per_call"] = pd_us;
    ratio_j["server_cpu"] = pd_us / route_us;
    std::cout << "server CPU per call (all its threads): LookupRoute " << fmt(route_us)
              << " us, LookupPDRoute " << fmt(pd_us) << " us: " << fmt(pd_us / route_us, 2) << "x\n";
  }
  out->result["phases"] = rounds;
  out->result["lookup"] = route;
  out->result["pd_lookup"] = pd;
  out->result["ratio"] = ratio_j;
  latency_summary srv = summarize(all.route_server_us);
  out->result["lookup_server_reported"] = to_json(srv);
  std::cout << "LookupRoute server-reported lookup_latency_us p50/p99: " << fmt(srv.p50) << " / "
            << fmt(srv.p99) << "\n";
  for (const loop_result* t : {&all.route, &all.pd}) {
    std::cout << (t == &all.pd ? "LookupPDRoute" : "LookupRoute") << " answers:";
    for (const auto& [k, v] : t->labels) std::cout << " " << k << "=" << v;
    std::cout << "\n";
  }
  out->error = pd_verdict(tally_of(all.route), tally_of(all.pd));
  std::cout << "pd: " << (out->error.empty() ? "answers are real hits: ratio valid" : "FAILED: " + out->error)
            << "\n";
}

}  // namespace

pd_bench_result run_pd_bench(const pd_bench_options& o, const workload& w,
                             const std::vector<std::shared_ptr<grpc::Channel>>& channels) {
  pd_bench_result out;
  const int prefill = w.shape().replicas;
  const char* pools = o.shape.explicit_ids ? "replicaIds" : "replicaIdPatterns";
  out.result["topology"] = {{"tenants", w.shape().tenants}, {"prefill_replicas", prefill},
                            {"decode_replicas", o.shape.decode}, {"pools", pools},
                            {"rounds", o.rounds}};
  out.error = push_topology(o, pd_topology_json(w, o.shape));
  if (out.error.empty()) out.error = report_stats(w, o.shape, channels.front(), true);
  if (!out.error.empty()) return out;
  std::cerr << "pd: pushed " << w.shape().tenants << " topologies of " << prefill << " prefill + "
            << o.shape.decode << " decode replicas; stats rows checked\n";
  std::vector<phase> phases;
  totals all;
  out.error = run_phases(o, w, channels, &phases, &all);
  if (!out.error.empty()) return out;
  std::cout << "\nindex: " << o.chains << " chains of " << w.shape().chain_blocks << " blocks, "
            << w.shape().tenants << " tenants; topology per tenant: " << prefill << " prefill + "
            << o.shape.decode << " decode replicas (" << pools << "); concurrency "
            << o.concurrency << ", " << channels.size() << " channels\n";
  summarise(phases, all, &out);
  return out;
}

}  // namespace ic::tools::bench
