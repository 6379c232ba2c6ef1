// Flag parsing and validation (spec §3.2, §4.2, scenarios 38 and 73).
#include "tools/kvevent_subscriber/config.hpp"

#include <gtest/gtest.h>

namespace ic::kvevent {
namespace {

std::variant<config, parse_exit> parse(std::vector<std::string> args) {
  std::vector<const char*> argv{"inferencecache-kvevent-subscriber"};
  for (auto& a : args) argv.push_back(a.c_str());
  return parse_config(static_cast<int>(argv.size()), argv.data());
}

int exit_code(std::vector<std::string> args) {
  auto r = parse(std::move(args));
  auto* e = std::get_if<parse_exit>(&r);
  return e ? e->code : -1;
}

TEST(Config, ReferenceDefaults) {
  auto r = parse({"--replica-id=r", "--model-id=m"});
  ASSERT_TRUE(std::holds_alternative<config>(r));
  const auto& c = std::get<config>(r);
  EXPECT_EQ(c.engine_endpoint, "tcp://127.0.0.1:5557");
  EXPECT_EQ(c.topic, "kv-events");
  EXPECT_EQ(c.server, "127.0.0.1:9090");
  EXPECT_EQ(c.hash_scheme, "vllm");
  EXPECT_EQ(c.window_ms, 100);
  EXPECT_EQ(c.stats_interval_ms, 10000);
  EXPECT_EQ(c.max_concurrency_ceiling, 256);
  EXPECT_FALSE(c.ignore_block_removed);
  EXPECT_EQ(c.max_tracked_blocks, 524288u);
  EXPECT_EQ(c.max_batch_entries, 4096u);
  EXPECT_EQ(c.http_bind_address, ":9465");
  EXPECT_TRUE(c.clear_on_start);
  EXPECT_EQ(c.engine_endpoints, std::vector<std::string>{"tcp://127.0.0.1:5557"});
}

TEST(Config, GoFlagForms) {
  auto r = parse({"-replica-id", "r", "--model-id", "m", "--ignore-block-removed", "--clear-on-start=false",
                  "--window=0s", "--topic="});
  ASSERT_TRUE(std::holds_alternative<config>(r));
  const auto& c = std::get<config>(r);
  EXPECT_TRUE(c.ignore_block_removed);
  EXPECT_FALSE(c.clear_on_start);
  EXPECT_EQ(c.window_ms, 100);  // <= 0 is clamped [REF]
  EXPECT_EQ(c.topic, "");
}

TEST(Config, InvalidValuesExitTwo) {
  EXPECT_EQ(exit_code({"--model-id=m"}), 2);
  EXPECT_EQ(exit_code({"--replica-id=r"}), 2);
  EXPECT_EQ(exit_code({"--replica-id=r", "--model-id=m", "--hash-scheme="}), 2);
  EXPECT_EQ(exit_code({"--replica-id=r", "--model-id=m", "--cache-tier=xyz"}), 2);
  EXPECT_EQ(exit_code({"--replica-id=r", "--model-id=m", "--dp-size=0"}), 2);
  EXPECT_EQ(exit_code({"--replica-id=r", "--model-id=m", "--routing-block-size=-1"}), 2);
  EXPECT_EQ(exit_code({"--replica-id=r", "--model-id=m", "--topic-match=fuzzy"}), 2);
  EXPECT_EQ(exit_code({"--replica-id=r", "--model-id=m", "--window=1x"}), 2);
  EXPECT_EQ(exit_code({"--replica-id=r", "--model-id=m", "--unknown-flag=1"}), 2);
  EXPECT_EQ(exit_code({"--replica-id=r", "--model-id=m", "--startup-replay=maybe"}), 2);
  EXPECT_EQ(exit_code({"--help"}), 0);
}

TEST(Config, LoraAdapterNames) {
  std::string err;
  auto ok = parse_lora_names(" 1=a , ,2=b,", &err);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->size(), 2u);
  EXPECT_EQ(ok->at(1), "a");
  EXPECT_EQ(ok->at(2), "b");
  EXPECT_TRUE(parse_lora_names("", &err)->empty());
  EXPECT_TRUE(parse_lora_names("1=sql-lora,2=chat-lora", &err));
  for (const char* bad : {"sql-lora", "x=sql-lora", "1=", "1=a,1=b"}) {
    EXPECT_FALSE(parse_lora_names(bad, &err)) << bad;
    EXPECT_EQ(exit_code({"--replica-id=r", "--model-id=m", std::string("--lora-adapter-names=") + bad}), 2) << bad;
  }
}

TEST(Config, DataParallelEndpoints) {
  auto r = parse({"--replica-id=r", "--model-id=m", "--dp-size=3", "--replay-endpoint=tcp://127.0.0.1:5558"});
  ASSERT_TRUE(std::holds_alternative<config>(r));
  const auto& c = std::get<config>(r);
  EXPECT_EQ(c.engine_endpoints,
            (std::vector<std::string>{"tcp://127.0.0.1:5557", "tcp://127.0.0.1:5558", "tcp://127.0.0.1:5559"}));
  EXPECT_EQ(c.replay_endpoints[2], "tcp://127.0.0.1:5560");
  EXPECT_EQ(endpoint_for_rank("inproc://kv", 1).value_or(""), "inproc://kv_dp1");
  EXPECT_FALSE(endpoint_for_rank("ipc:///tmp/kv", 1));
  EXPECT_EQ(exit_code({"--replica-id=r", "--model-id=m", "--dp-size=2", "--engine-endpoint=ipc:///tmp/x"}), 2);
}

}  // namespace
}  // namespace ic::kvevent
