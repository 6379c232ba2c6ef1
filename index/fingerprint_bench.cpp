// Hashing throughput of the fingerprint: tokens -> block prefix chain.
//   ./build/index/ic_index_bench --benchmark_filter=Fingerprint
#include "index/fingerprint.hpp"

#include <benchmark/benchmark.h>

#include <numeric>
#include <vector>

namespace {

void BM_FingerprintChain(benchmark::State& state) {
  std::vector<std::uint32_t> tokens(static_cast<std::size_t>(state.range(0)));
  std::iota(tokens.begin(), tokens.end(), 1000u);
  for (auto _ : state) {
    auto chain = ic::index::fingerprint_chain(tokens.data(), tokens.size(), 16);
    benchmark::DoNotOptimize(chain.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(tokens.size() * 4));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(tokens.size() / 16));
}
BENCHMARK(BM_FingerprintChain)->Arg(16)->Arg(1024)->Arg(8192)->Arg(131072);

}  // namespace

BENCHMARK_MAIN();
