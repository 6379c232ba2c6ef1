// Benchmarks of the per-tenant index (`tenant_index`, what each tenant actor runs): memory
// per entry, 64-block chain lookup, ingest rate, over-cap ingest (its own cap). The 10 M-entry cases are registered only when IC_INDEX_BENCH_LARGE=1 (they take
// ~1 GiB and tens of seconds); see index/README.md "Benchmarks" for commands and figures.
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "index/bench_support.hpp"
#include "index/tenant_index.hpp"
#include "index/fingerprint.hpp"

namespace ic::index {
namespace {

using namespace ic::index::bench;

// ---------------------------------------------------------------------------- memory

void BM_BytesPerEntry(benchmark::State& state) {
  const std::int64_t entries = state.range(0);
  const int replicas = static_cast<int>(state.range(1));
  const bool cap_on = state.range(2) != 0;
  for (auto _ : state) {
    malloc_trim(0);
    const std::size_t before = heap_in_use();
    index_options o;
    o.max_entries = cap_on ? entries * 2 : 0;  // cap structures kept, never hit
    auto idx = std::make_unique<tenant_index>("tenant", o);
    fill(*idx, entries, replicas, base_ts);
    const std::size_t after = heap_in_use();
    const auto n = static_cast<double>(idx->facts().total_entries);
    state.counters["entries"] = n;
    state.counters["bytes_per_entry_malloc"] = static_cast<double>(after - before) / n;
    state.counters["bytes_per_entry_owned"] = static_cast<double>(idx->memory_usage().total()) / n;
    state.PauseTiming();
    idx.reset();
    state.ResumeTiming();
  }
}

// ------------------------------------------------------------------------ chain lookup

struct lookup_fixture {
  std::unique_ptr<tenant_index> idx;
  std::vector<index_lookup_request> requests;
};

lookup_fixture& lookup_fixture_for(std::int64_t entries, int replicas_per_key) {
  static std::map<std::pair<std::int64_t, int>, lookup_fixture> cache;
  auto& f = cache[{entries, replicas_per_key}];
  if (!f.idx) {
    index_options o;
    o.max_entries = 0;
    f.idx = std::make_unique<tenant_index>("tenant", o);
    auto chains = fill(*f.idx, entries, replicas_per_key, base_ts);
    std::uint64_t pick = 7;
    for (int i = 0; i < 1024; ++i) {
      index_lookup_request q;
      q.tenant = "tenant";
      q.model = "model";
      q.hash_scheme = "vllm";
      q.chain_hashes = chains[splitmix(pick) % chains.size()];
      q.chain_counts.assign(64, 16);
      f.requests.push_back(std::move(q));
    }
  }
  return f;
}

void BM_ChainLookup64(benchmark::State& state) {
  // range(1): replicas holding each chain (64 = every replica holds every block: 4096
  // entries visited per lookup; 4 = typical placement). range(2): distinct chains cycled
  // through (1024 = cache-cold, 4 = hot prompts).
  auto& f = lookup_fixture_for(state.range(0), static_cast<int>(state.range(1)));
  const std::size_t mask = static_cast<std::size_t>(state.range(2)) - 1;
  const auto want = static_cast<std::size_t>(state.range(1));
  const auto pol = policy::resolved_policy::no_policy();
  std::vector<double> ns;
  ns.reserve(1 << 20);
  std::size_t i = 0;
  for (auto _ : state) {
    const auto t = std::chrono::steady_clock::now();
    auto r = lookup_tenant(f.idx.get(), total_keys_of(*f.idx), f.requests[i++ & mask], pol,
                           base_ts + 1);
    benchmark::DoNotOptimize(r);
    if (ns.size() < ns.capacity()) {
      ns.push_back(
          std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t).count());
    }
    if (r.scores.size() != want) state.SkipWithError("unexpected number of scored replicas");
  }
  std::sort(ns.begin(), ns.end());
  if (!ns.empty()) {
    state.counters["p50_us"] = ns[ns.size() / 2] / 1000;
    state.counters["p99_us"] = ns[ns.size() * 99 / 100] / 1000;
  }
  state.counters["entries"] = static_cast<double>(f.idx->facts().total_entries);
}

// ------------------------------------------------------------------------------ ingest

void BM_IngestNewBlocks(benchmark::State& state) {
  const bool cap_on = state.range(0) != 0;
  index_options o;
  o.max_entries = cap_on ? 1'000'000'000 : 0;
  auto idx = std::make_unique<tenant_index>("tenant", o);
  std::uint64_t seed = 99;
  std::vector<cache_state_update> updates;
  for (int i = 0; i < 4096; ++i)
    updates.push_back(chain_update("replica-" + std::to_string(i % 8), random_chain(seed)));
  std::size_t i = 0;
  micros ts = base_ts;
  for (auto _ : state) {
    if (i == updates.size()) {  // refill with fresh hashes off the clock
      state.PauseTiming();
      for (auto& u : updates) u.prefixes[0].block_hashes = random_chain(seed);
      i = 0;
      state.ResumeTiming();
    }
    updates[i].timestamp_us = ++ts;
    auto r = idx->ingest(updates[i++], ts);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * 64);
  state.counters["entries"] = static_cast<double>(idx->facts().total_entries);
}

void BM_IngestRefresh(benchmark::State& state) {
  index_options o;
  auto idx = std::make_unique<tenant_index>("tenant", o);
  std::uint64_t seed = 5;
  std::vector<cache_state_update> updates;
  for (int i = 0; i < 4096; ++i)
    updates.push_back(chain_update("replica-" + std::to_string(i % 8), random_chain(seed)));
  micros ts = base_ts;
  for (auto& u : updates) idx->ingest(u, ++ts);
  std::size_t i = 0;
  for (auto _ : state) {
    updates[i & 4095].timestamp_us = ++ts;
    auto r = idx->ingest(updates[i++ & 4095], ts);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * 64);
}

void BM_IngestOverCap(benchmark::State& state) {
  const std::int64_t cap = state.range(0);
  const bool lfu = state.range(1) != 0;
  index_options o;
  o.max_entries = cap;
  auto idx = std::make_unique<tenant_index>("tenant", o);
  if (lfu) {
    policy::resolved_policy p;
    p.eviction = policy::eviction_mode::lfu;
    idx->set_policy(p);
  }
  fill(*idx, cap, 8, base_ts);
  std::uint64_t seed = 1234;
  micros ts = base_ts + cap;
  std::vector<cache_state_update> updates;
  for (int i = 0; i < 1024; ++i)
    updates.push_back(chain_update("replica-" + std::to_string(i % 8), random_chain(seed)));
  std::size_t i = 0;
  std::int64_t evicted = 0;
  for (auto _ : state) {
    if (i == updates.size()) {
      state.PauseTiming();
      for (auto& u : updates) u.prefixes[0].block_hashes = random_chain(seed);
      i = 0;
      state.ResumeTiming();
    }
    updates[i].timestamp_us = ++ts;
    auto r = idx->ingest(updates[i++], ts);
    evicted += r.cap_evicted_lru + r.cap_evicted_lfu;
  }
  state.counters["evicted_per_ingest"] =
      static_cast<double>(evicted) / static_cast<double>(state.iterations());
  state.counters["entries"] = static_cast<double>(idx->facts().total_entries);
  state.SetItemsProcessed(state.iterations() * 64);
}

BENCHMARK(BM_BytesPerEntry)
    ->Args({1'000'000, 1, 1})
    ->Args({1'000'000, 2, 1})
    ->Args({1'000'000, 64, 1})
    ->Args({1'000'000, 1, 0})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ChainLookup64)
    ->Args({1'000'000, 64, 1024})
    ->Args({1'000'000, 64, 4})
    ->Args({1'000'000, 4, 1024})
    ->Unit(benchmark::kMicrosecond);
// One TTL sweep over an index where nothing has expired (the common case every sweep
// interval): the time a tenant actor spends on it (in 64 k-key slices, lookups between).
void BM_SweepNothingExpired(benchmark::State& state) {
  index_options o;
  o.max_entries = 0;  // unbounded, so the index really holds range(0) entries
  tenant_index idx("tenant", o);
  fill(idx, state.range(0), static_cast<int>(state.range(1)), base_ts);
  micros now = base_ts + 1'000'000;
  for (auto _ : state) {
    auto r = idx.sweep(now);
    benchmark::DoNotOptimize(r);
    now += 1000;
  }
  state.counters["entries"] = static_cast<double>(idx.facts().total_entries);
}
BENCHMARK(BM_SweepNothingExpired)->Args({1'000'000, 1})->Args({1'000'000, 8})->Unit(benchmark::kMillisecond);

BENCHMARK(BM_IngestNewBlocks)->Arg(1)->Arg(0)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_IngestRefresh)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_IngestOverCap)
    ->Args({1'000'000, 0})
    ->Args({1'000'000, 1})
    ->Unit(benchmark::kMicrosecond);

/// Registers the 10 M-entry cases when IC_INDEX_BENCH_LARGE=1.
const bool large_registered = [] {
  const char* v = std::getenv("IC_INDEX_BENCH_LARGE");
  if (v == nullptr || std::string(v) != "1") return false;
  benchmark::RegisterBenchmark("BM_Large_BytesPerEntry", BM_BytesPerEntry)
      ->Args({10'000'000, 1, 1})
      ->Args({10'000'000, 2, 1})
      ->Args({10'000'000, 64, 1})
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Large_ChainLookup64", BM_ChainLookup64)
      ->Args({10'000'000, 64, 1024})
      ->Args({10'000'000, 64, 4})
      ->Args({10'000'000, 4, 1024})
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_Large_SweepNothingExpired", BM_SweepNothingExpired)
      ->Args({10'000'000, 1})
      ->Args({10'000'000, 8})
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Large_IngestOverCap", BM_IngestOverCap)
      ->Args({10'000'000, 0})
      ->Unit(benchmark::kMicrosecond);
  return true;
}();

}  // namespace
}  // namespace ic::index
