// LookupPDRoute selection cost on 64 prefill + 64 decode replicas (pattern pools), in process.
//
//   ./build/topology/ic_topology_bench
#include <string>

#include <benchmark/benchmark.h>

#include "index/fingerprint.hpp"
#include "index/route_lookup.hpp"
#include "topology/pd_selector.hpp"
#include "topology/topology_json.hpp"

namespace {

using namespace ic;
constexpr topology::micros t0 = 1'700'000'000'000'000;

class fixed_clock : public topology::clock {
 public:
  topology::micros now() const override { return t0; }
};

struct bench_state {
  index::tenant_index idx{"t", index::index_options{0, std::chrono::minutes(30)}};
  topology::topology_store store;
  std::vector<std::string> keys;

  /// 64 prefill (`p-*`) and 64 decode (`d-*`) replicas; `keys` prefixes, each held by 4
  /// prefill replicas.
  /// A stats-only update of `replica` at t0.
  void report_stats(const std::string& replica, float pressure) {
    index::cache_state_update u;
    u.replica_id = replica;
    u.tenant_id = "t";
    u.model_id = "m";
    u.hash_scheme = "vllm";
    u.stats = index::replica_stats{};
    u.stats->pressure = pressure;
    idx.ingest(u, t0);
  }

  explicit bench_state(int n_keys) {
    auto set = topology::parse_topology_body(
        R"({"version":1,"topologies":[{"namespace":"t","name":"pd","hashScheme":"vllm",)"
        R"("prefillPools":[{"name":"p","acceleratorType":"h","replicaIdPatterns":["p-*"]}],)"
        R"("decodePools":[{"name":"d","acceleratorType":"h","replicaIdPatterns":["d-*"]}],)"
        R"("acceleratorTypes":[{"name":"h","vendor":"nvidia"}]}]})");
    store.apply(std::move(*set));
    for (int i = 0; i < 64; ++i) {
      report_stats("p-" + std::to_string(i), 0.01f * static_cast<float>(i % 50));
      report_stats("d-" + std::to_string(i), 0.01f * static_cast<float>((i * 7) % 50));
    }
    for (int k = 0; k < n_keys; ++k) {
      keys.push_back(index::to_wire(static_cast<std::uint64_t>(k) * 0x9e3779b97f4a7c15ull + 1));
      for (int r = 0; r < 4; ++r) {
        index::cache_state_update u;
        u.replica_id = "p-" + std::to_string((k + r * 16) % 64);
        u.tenant_id = "t";
        u.model_id = "m";
        u.hash_scheme = "vllm";
        u.prefixes.push_back({keys.back(), 256, {}, {}, 0, ""});
        idx.ingest(u, t0);
      }
    }
  }
};

void BM_SelectPdRoute(benchmark::State& st) {
  static bench_state s(100'000);
  topology::index_pd_view view(&s.idx, s.idx.facts().total_keys);
  fixed_clock clock;
  auto policy = policy::resolved_policy::no_policy();
  topology::pd_route_request req;
  req.model_id = "m";
  req.tenant_id = "t";
  req.prefix_token_count = 256;
  req.pd_topology_ref = "pd";
  const bool hit = st.range(0) == 1;
  std::size_t i = 0;
  for (auto _ : st) {
    req.prefix_hash = hit ? s.keys[i++ % s.keys.size()] : index::to_wire(++i);
    auto resp = topology::select_pd_route(req, *s.store.current(), policy, view, clock);
    benchmark::DoNotOptimize(resp);
  }
  st.SetLabel(hit ? "PREFIX_MATCH (4 holders)" : "miss -> AFFINITY_HINT");
}
BENCHMARK(BM_SelectPdRoute)->Arg(1)->Arg(0);

/// The same keys through LookupRoute (exact prefix_hash), for the 1.2× comparison.
void BM_LookupRouteExact(benchmark::State& st) {
  static bench_state s(100'000);
  auto policy = policy::resolved_policy::no_policy();
  index::lookup_route_request req;
  req.model_id = "m";
  req.tenant_id = "t";
  req.hash_scheme = "vllm";
  req.prefix_token_count = 256;
  const bool hit = st.range(0) == 1;
  std::size_t i = 0;
  for (auto _ : st) {
    req.prefix_hash = hit ? s.keys[i++ % s.keys.size()] : index::to_wire(++i);
    index::route_plan plan = index::plan_route(req, policy);
    auto d = index::decide_route(&s.idx, s.idx.facts().total_keys, req, plan, policy, t0);
    benchmark::DoNotOptimize(d);
  }
  st.SetLabel(hit ? "PREFIX_MATCH (4 holders)" : "miss -> AFFINITY_HINT");
}
BENCHMARK(BM_LookupRouteExact)->Arg(1)->Arg(0);

}  // namespace

BENCHMARK_MAIN();
