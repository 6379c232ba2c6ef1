// What a JetStream replica pays per LFU lookup to collect its credits (spec/scaleout.md
// §3.4): 64-block chains in an LFU tenant, each held by R replicas (the first 64, 56, ...
// blocks), asked in turn; decided alone, decided + collected into a credit_batch (taken
// every 25 000 lookups, about one --lfu-credit-interval at 25 k lookups/s), and, for
// comparison, collected by naming every hit (the way before add_hits).
// Run: build/state/ic_state_bench (docs/benchmarks.md "LFU credits in JetStream mode").
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "state/credit_batch.hpp"
#include "state/tenant_state.hpp"
#include "state/test_support.hpp"

namespace ic::state {
namespace {

constexpr index::micros kT0 = 1'700'000'000'000'000;

struct lfu_chain {
  tenant_set set;
  std::vector<index::lookup_route_request> requests;  // one per chain, asked in turn
  std::size_t next = 0;
  lfu_chain(int replicas, int chains) {
    const std::string policy =
        R"({"version":7,"policies":[{"namespace":"t","eviction":"lfu"}],"tenants":[]})";
    set.apply(*proto::decode_record(static_cast<std::uint32_t>(proto::record_kind::policy),
                                    proto::encode_record(proto::record_kind::policy, kT0, policy)));
    for (int c = 0; c < chains; ++c) {
      std::vector<std::string> blocks;
      for (int b = 0; b < 64; ++b)
        blocks.push_back("c" + std::to_string(c) + "-block-" + std::to_string(1000 + b));
      for (int r = 0; r < replicas; ++r) {  // replica r holds the first 64 - 8r blocks
        const std::vector<std::string> held(blocks.begin(), blocks.end() - 8 * r);
        set.apply(testing::as_record(testing::chain_update("vllm-" + std::to_string(r), held),
                                     kT0 + r));
      }
      requests.push_back(testing::chain_lookup(blocks));
    }
  }
  const index::lookup_route_request& request() {
    const auto& r = requests[next];
    next = (next + 1) % requests.size();
    return r;
  }
};

void BM_LfuChainDecide(benchmark::State& state) {
  lfu_chain c(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  const tenant_state* t = c.set.find("t");
  std::size_t hits = 0;
  for (auto _ : state) {
    auto out = t->decide(c.request(), kT0 + 100);
    for (const auto& r : out.credit) hits += r.hits.size();
    benchmark::DoNotOptimize(out);
  }
  state.counters["hits_per_lookup"] = static_cast<double>(hits) / state.iterations();
  state.SetLabel(t->decide(c.request(), kT0 + 100).response.reason_code);
}

/// Decides in turn and hands each lookup's credit to `collect`, taking the batch every
/// 25 000 lookups.
template <typename Collect>
void decide_and_collect(benchmark::State& state, Collect collect) {
  lfu_chain c(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  const tenant_state* t = c.set.find("t");
  credit_batch batch;
  std::int64_t n = 0;
  for (auto _ : state) {
    auto out = t->decide(c.request(), kT0 + 100);
    collect(*t, out.credit, batch);
    if (++n % 25'000 == 0) benchmark::DoNotOptimize(batch.take());
  }
}

void BM_LfuChainDecideAndCollect(benchmark::State& state) {
  decide_and_collect(state, [](const tenant_state& t, const auto& credit, credit_batch& batch) {
    t.collect_credit(credit, batch);
  });
}

// The same, collected as before add_hits (session 10): every hit named, then add()ed.
void BM_LfuChainDecideAndAddNamed(benchmark::State& state) {
  decide_and_collect(state, [](const tenant_state& t, const auto& credit, credit_batch& batch) {
    for (const auto& r : credit)
      for (const auto& h : r.hits)
        if (auto named = t.index().name_hit(h)) batch.add("t", std::move(*named));
  });
}

// Args: replicas, chains. One chain: the batch never fills; 1 000 chains (13 k-52 k
// entries): it holds its 4 096 entries after a few dozen lookups and drops the rest.
#define IC_LFU_ARGS ->Args({1, 1})->Args({4, 1})->Args({1, 1000})->Args({4, 1000})->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_LfuChainDecide) IC_LFU_ARGS;
BENCHMARK(BM_LfuChainDecideAndCollect) IC_LFU_ARGS;
BENCHMARK(BM_LfuChainDecideAndAddNamed) IC_LFU_ARGS;

}  // namespace
}  // namespace ic::state

BENCHMARK_MAIN();
