// The stats path (spec §3.9, scenarios 65–70): profiles, hit-rate deltas, failures, staleness.
#include "tools/kvevent_subscriber/stats.hpp"

#include <cmath>

#include <gtest/gtest.h>

#include "tools/kvevent_subscriber/prom_text.hpp"

namespace ic::kvevent {
namespace {

stats_sample ok(std::variant<stats_sample, scrape_result> r) {
  EXPECT_TRUE(std::holds_alternative<stats_sample>(r));
  return std::holds_alternative<stats_sample>(r) ? std::get<stats_sample>(r) : stats_sample{};
}

std::string vllm_body(int hits, int queries) {
  return "# HELP vllm:kv_cache_usage_perc usage\n# TYPE vllm:kv_cache_usage_perc gauge\n"
         "vllm:kv_cache_usage_perc{model_name=\"m\"} 0.42\n"
         "vllm:num_requests_running{model_name=\"m\"} 2\n"
         "vllm:num_requests_waiting{model_name=\"m\"} 0\n"
         "vllm:num_requests_waiting{model_name=\"m\",priority=\"1\"} 50\n"
         "vllm:prefix_cache_hits_total{model_name=\"m\"} " + std::to_string(hits) + "\n"
         "vllm:prefix_cache_queries_total{model_name=\"m\"} " + std::to_string(queries) + " 1700000000000\n# EOF\n";
}

TEST(PromText, ParsesEscapesSpecialValuesAndTimestamps) {
  std::string err;
  auto s = parse_prom_text("a{l=\"x\\\"y\\\\z\\n\"} NaN\nb +Inf 123\nc -Inf\nd{} 1e3\n", &err);
  ASSERT_TRUE(s) << err;
  ASSERT_EQ(s->size(), 4u);
  EXPECT_EQ((*s)[0].labels.at("l"), "x\"y\\z\n");
  EXPECT_TRUE(std::isnan((*s)[0].value));
  EXPECT_TRUE(std::isinf((*s)[1].value));
  EXPECT_DOUBLE_EQ((*s)[3].value, 1000);
  EXPECT_FALSE(parse_prom_text("a{l=\"x} 1\n", &err));
  EXPECT_FALSE(parse_prom_text("a notanumber\n", &err));
}

// 65, 66: the vLLM profile, then a delta, then a counter reset.
TEST(Stats, S65S66VllmProfileAndHitRateDeltas) {
  stats_options o;
  o.cache_size_bytes = 1073741824;
  o.ceiling = 8;
  stats_computer sc(o);
  auto first = ok(sc.compute(vllm_body(10, 20)));
  EXPECT_EQ(first.cache_memory_bytes, 450971566);
  EXPECT_DOUBLE_EQ(first.hit_rate, 0);
  EXPECT_DOUBLE_EQ(first.pressure, 0.25);
  EXPECT_DOUBLE_EQ(ok(sc.compute(vllm_body(15, 30))).hit_rate, 0.5);
  EXPECT_DOUBLE_EQ(ok(sc.compute(vllm_body(1, 2))).hit_rate, 0);    // reset
  EXPECT_DOUBLE_EQ(ok(sc.compute(vllm_body(3, 6))).hit_rate, 0.5);  // new baseline
}

// 67, 69: a wrong engine and a filter that excludes the load gauges fail the scrape.
TEST(Stats, S67S69WrongEngineAndFilteredLoadFail) {
  stats_computer sc(stats_options{});
  auto r = sc.compute("sglang:token_usage 0.5\nsglang:num_running_reqs 1\nsglang:num_queue_reqs 1\n");
  EXPECT_EQ(std::get<scrape_result>(r), scrape_result::unrecognized);
  stats_options o;
  o.model_name = "other";
  stats_computer filtered(o);
  EXPECT_EQ(std::get<scrape_result>(filtered.compute(vllm_body(1, 2))), scrape_result::incomplete);
  EXPECT_EQ(std::get<scrape_result>(sc.compute("vllm:num_requests_running 1\n")), scrape_result::incomplete);
  EXPECT_EQ(std::get<scrape_result>(sc.compute("{{{\n")), scrape_result::parse_error);
}

// 68: the SGLang profile with per-rank series; priority series are skipped.
TEST(Stats, S68SglangProfile) {
  stats_options o;
  o.sglang = true;
  stats_computer sc(o);
  auto s = ok(sc.compute("sglang:token_usage 0.63\nsglang:cache_hit_rate 0.75\n"
                         "sglang:num_running_reqs{dp=\"0\",priority=\"\"} 1\nsglang:num_running_reqs{dp=\"1\"} 2\n"
                         "sglang:num_running_reqs{priority=\"0\"} 99\nsglang:num_queue_reqs 5\n"));
  EXPECT_DOUBLE_EQ(s.hit_rate, 0.75);
  EXPECT_DOUBLE_EQ(s.pressure, 8.0 / 256.0);
}

// 70: T2 counters pass through; legacy gpu/cpu gauges when kv is absent.
TEST(Stats, S70T2CountersAndLegacyUsage) {
  stats_options o;
  o.cache_size_bytes = 100;
  stats_computer sc(o);
  auto s = ok(sc.compute("vllm:gpu_cache_usage_perc 0.2\nvllm:cpu_cache_usage_perc 0.5\n"
                         "vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n"
                         "vllm:external_prefix_cache_hits_total 750\nvllm:external_prefix_cache_queries 1000\n"));
  EXPECT_EQ(s.t2_hit_tokens, 750);
  EXPECT_EQ(s.t2_query_tokens, 1000);
  EXPECT_EQ(s.cache_memory_bytes, 50);
}

// 67, 71: the stale escalation: WARN, WARN, one ERROR event=load_signal_stale, then DEBUG; recovery INFO.
TEST(Stats, S67StaleEscalation) {
  logger log(true, log_level::debug);
  std::vector<std::pair<log_level, std::string>> lines;
  log.set_sink([&](log_level l, const std::string&, const log_fields& f) {
    std::string ev;
    for (const auto& [k, v] : f)
      if (k == "event") ev = v;
    lines.emplace_back(l, ev);
  });
  stale_tracker st(&log);
  for (int i = 0; i < 5; ++i) st.failure("x");
  EXPECT_TRUE(st.stale());
  st.success();
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[0].first, log_level::warn);
  EXPECT_EQ(lines[1].first, log_level::warn);
  EXPECT_EQ(lines[2].first, log_level::error);
  EXPECT_EQ(lines[2].second, "load_signal_stale");
  EXPECT_EQ(lines[3].first, log_level::debug);
  EXPECT_EQ(lines[5].first, log_level::info);
  EXPECT_EQ(lines[5].second, "load_signal_recovered");
  EXPECT_FALSE(st.stale());
}

}  // namespace
}  // namespace ic::kvevent
