// Tokenizer speed (spec/tokenizer.md; issue 17 targets): loading a 9–11 MB tokenizer.json
// (target ≤ 1 s) and encoding English text on one core (target ≥ 5 MB/s). Needs the fixtures
// of scripts/fetch_tokenizer_fixtures.sh; without them each benchmark reports an error.
//
//   ./build/tokenizer/ic_tokenizer_bench
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tokenizer/bpe_tokenizer.hpp"

namespace {

std::string fixture(const std::string& model) {
  return std::string(IC_TOKENIZER_FIXTURES) + "/" + model + "/tokenizer.json";
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// About 1 MiB of English prose with numbers and punctuation (no repeats of a short cycle:
/// 97 sentences in varying combinations).
std::string english_text() {
  static const char* words[] = {
      "the", "cache", "routing", "index", "answers", "which", "replica", "already", "holds",
      "a", "prompt's", "prefix", "in", "its", "memory", "and", "when", "in", "doubt", "it",
      "says", "nothing", "so", "the", "gateway", "routes", "as", "usual", "engines", "report",
      "blocks", "they", "store", "or", "evict", "every", "few", "milliseconds", "while",
      "operators", "watch", "metrics", "dashboards", "alerts", "tokens", "per", "second",
      "latency", "throughput", "isn't", "we're", "they'll", "Hello", "World", "Tokenizer",
      "benchmark", "measures", "loading", "encoding", "English"};
  const std::size_t n = sizeof words / sizeof *words;
  std::string s;
  std::uint64_t x = 88172645463325252ull;
  while (s.size() < (1u << 20)) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const std::size_t len = 6 + x % 14;
    for (std::size_t w = 0; w < len; ++w) {
      s += words[(x >> (w * 3)) % n];
      s += ' ';
    }
    if (x % 5 == 0) s += std::to_string(x % 100000) + " items, ";
    s.back() = x % 3 ? '.' : '?';
    s += x % 7 ? " " : "\n\n";
  }
  return s;
}

void load(benchmark::State& state, const std::string& model) {
  const auto text = read(fixture(model));
  if (text.empty()) {
    state.SkipWithError("fixtures missing: run scripts/fetch_tokenizer_fixtures.sh");
    return;
  }
  for (auto _ : state) {
    auto t = ic::tokenizer::bpe_tokenizer::load(text);
    if (!t) state.SkipWithError(t.error().c_str());
    benchmark::DoNotOptimize(t);
  }
  state.counters["file_MB"] = static_cast<double>(text.size()) / 1e6;
}

void encode(benchmark::State& state, const std::string& model) {
  auto t = ic::tokenizer::bpe_tokenizer::load_file(fixture(model));
  if (!t) {
    state.SkipWithError(t.error().c_str());
    return;
  }
  const auto text = english_text();
  std::size_t tokens = 0;
  for (auto _ : state) {
    auto ids = (*t)->encode(text);
    tokens = ids ? ids->size() : 0;
    benchmark::DoNotOptimize(ids);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
}

BENCHMARK_CAPTURE(load, llama3, std::string("llama3"))->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(load, qwen3, std::string("qwen3"))->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(encode, llama3, std::string("llama3"))->Unit(benchmark::kMillisecond)->MinTime(2);
BENCHMARK_CAPTURE(encode, qwen3, std::string("qwen3"))->Unit(benchmark::kMillisecond)->MinTime(2);

}  // namespace

BENCHMARK_MAIN();
