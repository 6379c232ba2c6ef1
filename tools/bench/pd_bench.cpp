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

}  // namespace

pd_bench_result run_pd_bench(const pd_bench_options& o, const workload& w,
                             const std::vector<std::shared_ptr<grpc::Channel>>& channels) {
  pd_bench_result out;
  const int prefill = w.shape().replicas;
  out.result["topology"] = {{"tenants", w.shape().tenants},
                            {"prefill_replicas", prefill},
                            {"decode_replicas", o.shape.decode},
                            {"pools", o.shape.explicit_ids ? "replicaIds" : "replicaIdPatterns"},
                            {"rounds", o.rounds}};
  if (auto bad = push_topology(o, pd_topology_json(w, o.shape)); !bad.empty()) {
    out.error = bad;
    return out;
  }
  const std::shared_ptr<grpc::Channel>& ch = channels.front();
  if (auto bad = report_stats(w, o.shape, ch, true); !bad.empty()) {
    out.error = bad;
    return out;
  }
  std::cerr << "pd: pushed " << w.shape().tenants << " topologies of " << prefill << " prefill + "
            << o.shape.decode << " decode replicas; stats rows checked\n";

  struct phase {
    std::string name;
    bool pd;
    loop_result r;
    double cpu_s;  ///< the server's CPU time over the phase; < 0 unknown
  };
  std::vector<phase> phases;
  loop_result route_all, pd_all;
  double cpu_s[2] = {o.server_pid > 0 ? 0 : -1.0, o.server_pid > 0 ? 0 : -1.0};  // route, pd; < 0 unknown
  const auto server_cpu = [&] { return o.server_pid > 0 ? read_cpu_seconds(o.server_pid) : -1.0; };
  std::vector<double> route_server_us;
  for (int round = 0; round < o.rounds; ++round) {
    const std::uint64_t seed = o.seed * 7919 + static_cast<std::uint64_t>(round);
    const bool route_first = round % 2 == 0;
    for (int k = 0; k < 2; ++k) {
      const bool pd = (k == 0) != route_first;
      if (auto bad = report_stats(w, o.shape, ch, false); !bad.empty()) {  // same before each phase
        out.error = bad;
        return out;
      }
      const std::string name =
          std::string(pd ? "LookupPDRoute" : "LookupRoute") + " (round " + std::to_string(round + 1) + ")";
      loop_result r;
      const double cpu0 = server_cpu();
      if (pd) {
        pd_calls calls(channels, o.concurrency, w, o.shape, o.chains, seed);
        r = run_closed_loop(calls, o.concurrency, o.lim, name);
      } else {
        lookup_calls calls(channels, o.concurrency, w, o.chains, seed);
        r = run_closed_loop(calls, o.concurrency, o.lim, name);
        const auto srv = calls.server_latencies_us();
        route_server_us.insert(route_server_us.end(), srv.begin(), srv.end());
      }
      const double cpu1 = server_cpu();
      const double used = cpu0 >= 0 && cpu1 >= 0 ? cpu1 - cpu0 : -1;
      cpu_s[pd ? 1 : 0] = used >= 0 && cpu_s[pd ? 1 : 0] >= 0 ? cpu_s[pd ? 1 : 0] + used : -1;
      merge_into(pd ? &pd_all : &route_all, r);
      phases.push_back({name, pd, std::move(r), used});
    }
  }

  std::cout << "\nindex: " << o.chains << " chains of " << w.shape().chain_blocks << " blocks, "
            << w.shape().tenants << " tenants; topology per tenant: " << prefill << " prefill + "
            << o.shape.decode << " decode replicas ("
            << (o.shape.explicit_ids ? "replicaIds" : "replicaIdPatterns") << "); concurrency "
            << o.concurrency << ", " << channels.size() << " channels\n";
  print_latency_header();
  json rounds = json::array();
  for (auto& p : phases) {
    json j = latency_phase(p.name, p.r);
    j["name"] = p.name;
    j["rpc"] = p.pd ? "LookupPDRoute" : "LookupRoute";
    if (p.cpu_s >= 0 && p.r.ok > 0) j["server_cpu_us_per_call"] = p.cpu_s * 1e6 / static_cast<double>(p.r.ok);
    rounds.push_back(std::move(j));
  }
  json route = latency_phase("LookupRoute (all rounds)", route_all);
  json pd = latency_phase("LookupPDRoute (all rounds)", pd_all);
  out.result["phases"] = rounds;
  json ratio_j = ratio("LookupPDRoute / LookupRoute", pd, route);
  const double route_rate = route.value("calls_per_s", 0.0);
  ratio_j["calls_per_s"] = route_rate > 0 ? pd.value("calls_per_s", 0.0) / route_rate : 0;
  json per_round = json::array();
  for (std::size_t i = 0; i + 1 < rounds.size(); i += 2) {
    const json& a = rounds[i].value("rpc", "") == "LookupPDRoute" ? rounds[i] : rounds[i + 1];
    const json& b = rounds[i].value("rpc", "") == "LookupPDRoute" ? rounds[i + 1] : rounds[i];
    const double b50 = b.value("p50_us", 0.0);
    per_round.push_back(b50 > 0 ? a.value("p50_us", 0.0) / b50 : 0);
  }
  ratio_j["p50_per_round"] = per_round;
  std::cout << "  calls/s " << fmt(ratio_j["calls_per_s"].get<double>(), 2) << "x; p50 per round:";
  for (const auto& v : per_round) std::cout << " " << fmt(v.get<double>(), 2) << "x";
  std::cout << "\n";
  if (cpu_s[0] > 0 && cpu_s[1] >= 0 && route_all.ok > 0 && pd_all.ok > 0) {
    const double route_us = cpu_s[0] * 1e6 / static_cast<double>(route_all.ok);
    const double pd_us = cpu_s[1] * 1e6 / static_cast<double>(pd_all.ok);
    route["server_cpu_us_per_call"] = route_us;
    pd["server_cpu_us_per_call"] = pd_us;
    ratio_j["server_cpu"] = pd_us / route_us;
    std::cout << "server CPU per call (all its threads): LookupRoute " << fmt(route_us)
              << " us, LookupPDRoute " << fmt(pd_us) << " us: " << fmt(pd_us / route_us, 2) << "x\n";
  }
  out.result["lookup"] = route;
  out.result["pd_lookup"] = pd;
  out.result["ratio"] = ratio_j;
  latency_summary srv = summarize(route_server_us);
  out.result["lookup_server_reported"] = to_json(srv);
  std::cout << "LookupRoute server-reported lookup_latency_us p50/p99: " << fmt(srv.p50) << " / "
            << fmt(srv.p99) << "\n";
  for (const auto* t : {&route_all, &pd_all}) {
    std::cout << (t == &pd_all ? "LookupPDRoute" : "LookupRoute") << " answers:";
    for (const auto& [k, v] : t->labels) std::cout << " " << k << "=" << v;
    std::cout << "\n";
  }
  out.error = pd_verdict(tally_of(route_all), tally_of(pd_all));
  std::cout << "pd: " << (out.error.empty() ? "answers are real hits: ratio valid" : "FAILED: " + out.error) << "\n";
  return out;
}

}  // namespace ic::tools::bench
