// Benchmarks of the snapshot codec: write and load throughput (snapshot bytes per second, one
// core) and snapshot bytes per (key × replica) entry. Entries come from 64-block chains
// (8-byte hashes) held by 1, 2 or 64 replicas per key; loads go into an index with the cap
// on (so the cap order is rebuilt, as in the server). The 10 M cases are registered only
// when IC_INDEX_BENCH_LARGE=1. Commands and figures: index/README.md "Benchmarks".
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "index/bench_support.hpp"
#include "index/tenant_index.hpp"
#include "index/snapshot_codec.hpp"

namespace ic::index {
namespace {

using namespace ic::index::bench;

struct snapshot_fixture {
  std::unique_ptr<tenant_index> idx;
  /// The snapshot of `idx` in 1 MiB chunks.
  std::vector<std::string> chunks;
  std::size_t bytes = 0;
};

index_options options_for(std::int64_t entries) {
  index_options o;
  o.max_entries = entries * 2;  // cap structures kept, never hit
  return o;
}

snapshot_fixture& fixture_for(std::int64_t entries, int replicas_per_key) {
  static std::map<std::pair<std::int64_t, int>, snapshot_fixture> cache;
  auto& f = cache[{entries, replicas_per_key}];
  if (!f.idx) {
    cache.clear();  // one fixture at a time keeps the 10 M cases within memory
    auto& g = cache[{entries, replicas_per_key}];
    g.idx = std::make_unique<tenant_index>("tenant", options_for(entries));
    fill(*g.idx, entries, replicas_per_key, base_ts);
    write_snapshot(*g.idx, [&](std::string_view c) {
      g.chunks.emplace_back(c);
      g.bytes += c.size();
      return true;
    });
    return g;
  }
  return f;
}

void BM_SnapshotWrite(benchmark::State& state) {
  auto& f = fixture_for(state.range(0), static_cast<int>(state.range(1)));
  std::size_t bytes = 0;
  for (auto _ : state) {
    bytes = 0;
    write_snapshot(*f.idx, [&](std::string_view c) {
      bytes += c.size();
      benchmark::DoNotOptimize(c.data());
      return true;
    });
  }
  const auto entries = static_cast<double>(f.idx->facts().total_entries);
  state.counters["entries"] = entries;
  state.counters["bytes_per_entry"] = static_cast<double>(bytes) / entries;
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}

void BM_SnapshotLoad(benchmark::State& state) {
  auto& f = fixture_for(state.range(0), static_cast<int>(state.range(1)));
  for (auto _ : state) {
    auto idx = std::make_unique<tenant_index>("tenant", options_for(state.range(0)));
    snapshot_loader loader(*idx);
    std::string error;
    for (const auto& c : f.chunks) {
      if (!loader.feed(c, &error)) state.SkipWithError(error.c_str());
    }
    if (!loader.finish(&error)) state.SkipWithError(error.c_str());
    state.PauseTiming();
    if (idx->facts().total_entries != f.idx->facts().total_entries) {
      state.SkipWithError("entry count differs");
    }
    idx.reset();
    state.ResumeTiming();
  }
  state.counters["entries"] = static_cast<double>(f.idx->facts().total_entries);
  state.counters["bytes_per_entry"] =
      static_cast<double>(f.bytes) / static_cast<double>(f.idx->facts().total_entries);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * f.bytes));
}

BENCHMARK(BM_SnapshotWrite)
    ->Args({1'000'000, 1})
    ->Args({1'000'000, 2})
    ->Args({1'000'000, 64})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SnapshotLoad)
    ->Args({1'000'000, 1})
    ->Args({1'000'000, 2})
    ->Args({1'000'000, 64})
    ->Unit(benchmark::kMillisecond);

/// Registers the 10 M-entry cases when IC_INDEX_BENCH_LARGE=1.
const bool large_registered = [] {
  const char* v = std::getenv("IC_INDEX_BENCH_LARGE");
  if (v == nullptr || std::string(v) != "1") return false;
  for (int replicas : {1, 2, 64}) {
    benchmark::RegisterBenchmark("BM_Large_SnapshotWrite", BM_SnapshotWrite)
        ->Args({10'000'000, replicas})
        ->Iterations(3)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("BM_Large_SnapshotLoad", BM_SnapshotLoad)
        ->Args({10'000'000, replicas})
        ->Iterations(3)
        ->Unit(benchmark::kMillisecond);
  }
  return true;
}();

}  // namespace
}  // namespace ic::index
