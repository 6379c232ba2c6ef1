// prompt_text lookups against the real server binary (issue 17, spec/lookup.md §3.2 step 3):
// --tokenizer-models-dir loads nested model folders at startup; a prompt_text lookup routes
// like a token_ids lookup of the engine's tokenization of the same chat prompt, echoes the
// tokens, and fails open (NO_HINT, no echo) for an unknown or broken model, an unreadable
// directory, oversized text, and TIMEOUT when the tenant's budget passes.
#include <filesystem>
#include <fstream>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include "index/fingerprint.hpp"
#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "tests/support/http_client.hpp"
#include "tests/support/server_process.hpp"
#include "tests/support/test_paths.hpp"
#include "tokenizer/test_fixtures.hpp"

namespace ic {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
namespace v1 = inferencecache::v1alpha1;
using ids = std::vector<std::uint32_t>;

constexpr int kBlock = 4;  // --engine-block-size: short chat prompts still fill blocks
// Tenant "t" has a policy without the 64-token matched floor (these prompts are short);
// tenant "slow" has a 1 ms lookup budget.

class PromptText : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::make_temp_dir("ic_prompt");
    models_ = fs::path(dir_) / "models";
  }
  void TearDown() override {
    if (server_) {
      EXPECT_EQ(server_->terminate(), 0);
    }
    test::remove_tree(dir_);
  }

  /// Links a fixture model's two files into models/<id>/ (nested ids are folders).
  void link_fixture(const std::string& fixture, const std::string& id) {
    fs::create_directories(models_ / id);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
      fs::create_symlink(fs::path(tokenizer::testing::fixture_dir(fixture)) / f, models_ / id / f);
  }
  void write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
  }
  /// A tiny model (the unit tests' byte-level tokenizer) with a one-line template.
  void write_tiny_model(const std::string& id) {
    write(models_ / id / "tokenizer.json", tokenizer::testing::tiny_byte_level().dump());
    write(models_ / id / "tokenizer_config.json",
          R"({"chat_template": "{% for m in messages %}<|x|>{{ m.content }}{% endfor %}<|x|>"})");
  }

  void start(const std::string& models_dir,
             const std::string& binary = ic::test::executable("inferencecache-server")) {
    write(fs::path(dir_) / "policy.json",
          R"({"version":7,"policies":[{"namespace":"t","minimumMatchedTokens":0},)"
          R"({"namespace":"slow","lookupTimeoutMs":1},)"
          R"({"namespace":"budget","lookupTimeoutMs":300}],"tenants":[]})");
    server_ = test::server_process::start(
        binary,
        {"--grpc-bind-address=127.0.0.1:0", "--http-bind-address=127.0.0.1:0",
         "--snapshot-bind-address=127.0.0.1:0", "--data-dir=" + dir_ + "/data",
         "--insecure-disable-auth", "--engine-block-size=" + std::to_string(kBlock),
         "--tokenizer-models-dir=" + models_dir, "--policy-file=" + dir_ + "/policy.json"});
    ASSERT_TRUE(server_->wait_ready(60s)) << server_->logs();
    stub_ = v1::InferenceCache::NewStub(
        grpc::CreateChannel(server_->grpc_target(), grpc::InsecureChannelCredentials()));
  }

  /// Reports `tokens` (fingerprinted here, as the engine's adapter would) for `replica`.
  void report_tokens(const std::string& model, const std::string& replica, const ids& tokens,
                     const std::string& tenant = "t") {
    v1::CacheStateUpdate u;
    u.set_tenant_id(tenant);
    u.set_model_id(model);
    u.set_hash_scheme("vllm");
    u.set_replica_id(replica);
    auto* e = u.add_prefixes();
    for (auto h : index::fingerprint_chain(tokens.data(), tokens.size(), kBlock)) {
      e->add_block_hashes(index::to_wire(h));
      e->add_block_token_counts(kBlock);
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::Ack ack;
    auto w = stub_->ReportCacheState(&ctx, &ack);
    ASSERT_TRUE(w->Write(u));
    w->WritesDone();
    ASSERT_TRUE(w->Finish().ok());
    ASSERT_TRUE(ack.accepted()) << ack.reason_code();
  }

  v1::LookupRouteResponse lookup_text(const std::string& model, const std::string& text,
                                      const std::string& tenant = "t") {
    v1::LookupRouteRequest r;
    r.set_tenant_id(tenant);
    r.set_model_id(model);
    r.set_hash_scheme("vllm");
    r.set_prompt_text(text);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    v1::LookupRouteResponse resp;
    auto st = stub_->LookupRoute(&ctx, r, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp;
  }

  static ids echo(const v1::LookupRouteResponse& r) { return ids(r.token_ids().begin(), r.token_ids().end()); }

  double metric(const std::string& series) {
    auto body = test::http_call(server_->http_port(), "GET", "/metrics").body;
    auto p = body.find(series + " ");
    return p == std::string::npos ? -1 : std::stod(body.substr(p + series.size() + 1));
  }

  std::string dir_;
  fs::path models_;
  std::unique_ptr<test::server_process> server_;
  std::unique_ptr<v1::InferenceCache::Stub> stub_;
};

TEST_F(PromptText, RoutesLikeTheEnginesTokenizationOfTheSameChatPrompt) {
  if (tokenizer::testing::fixture_dir("llama3").empty() ||
      tokenizer::testing::fixture_dir("qwen3").empty())
    GTEST_SKIP() << tokenizer::testing::fixture_skip_reason();
  link_fixture("llama3", "meta-llama/Meta-Llama-3-8B-Instruct");
  link_fixture("qwen3", "Qwen/Qwen3-0.6B");
  write(models_ / "broken" / "tokenizer.json", "{not json");
  write(models_ / "broken" / "tokenizer_config.json", R"({"chat_template": "x"})");
  start(models_.string());
  EXPECT_TRUE(server_->wait_for_log("tokenizer_model_failed", 1s)) << server_->logs();
  struct model_case {
    std::string id;
    const tokenizer::testing::chat_golden* golden;
  };
  for (const auto& m : {model_case{"meta-llama/Meta-Llama-3-8B-Instruct", &tokenizer::testing::llama3_chat[0]},
                        model_case{"Qwen/Qwen3-0.6B", &tokenizer::testing::qwen3_chat[0]}}) {
    SCOPED_TRACE(m.id);
    // The engine tokenized the rendered chat prompt (golden ids from the package's own JS
    // tokenizer) and reported its blocks for r1.
    report_tokens(m.id, "r1", m.golden->ids);
    auto resp = lookup_text(m.id, m.golden->content);
    EXPECT_EQ(resp.reason_code(), "PREFIX_MATCH");
    ASSERT_EQ(resp.replica_scores_size(), 1);
    EXPECT_EQ(resp.replica_scores(0).replica_id(), "r1");
    EXPECT_EQ(resp.replica_scores(0).matched_tokens(),
              static_cast<int>(m.golden->ids.size() / kBlock * kBlock));
    EXPECT_EQ(echo(resp), m.golden->ids);
  }
  // The same text for another model's tokenizer, a broken model, an unknown one: fail open.
  auto broken = lookup_text("broken", "hello world");
  EXPECT_EQ(broken.reason_code(), "NO_HINT");
  EXPECT_EQ(broken.token_ids_size(), 0);
  auto unknown = lookup_text("meta-llama", "hello world");  // a folder, not a model
  EXPECT_EQ(unknown.reason_code(), "NO_HINT");
  EXPECT_EQ(unknown.token_ids_size(), 0);
  auto traversal = lookup_text("../models/Qwen/Qwen3-0.6B", "hello world");
  EXPECT_EQ(traversal.token_ids_size(), 0);
  EXPECT_GE(metric(R"(inferencecache_tokenizations_total{outcome="ok"})"), 2);
  EXPECT_GE(metric(R"(inferencecache_tokenizations_total{outcome="unknown_model"})"), 3);
}

TEST_F(PromptText, EchoesTokensAndFailsOpenOnOversizedTextAndTimesOut) {
  write_tiny_model("org/tiny");
  start(models_.string());
  auto bpe = tokenizer::bpe_tokenizer::load(tokenizer::testing::tiny_byte_level().dump());
  ASSERT_TRUE(bpe) << bpe.error();
  const std::string content = "hello hello hello";
  auto want = (*bpe)->encode("<|x|>" + content + "<|x|>");
  ASSERT_TRUE(want);
  // Nothing reported yet: no hint, but the tokens are echoed (prompt_text path only).
  auto first = lookup_text("org/tiny", content);
  EXPECT_NE(first.reason_code(), "PREFIX_MATCH");
  EXPECT_EQ(echo(first), *want);
  report_tokens("org/tiny", "r7", *want);
  auto hit = lookup_text("org/tiny", content);
  EXPECT_EQ(hit.reason_code(), "PREFIX_MATCH");
  EXPECT_EQ(echo(hit), *want);
  // A token_ids lookup of the same tokens routes the same way and echoes nothing.
  v1::LookupRouteRequest by_ids;
  by_ids.set_tenant_id("t");
  by_ids.set_model_id("org/tiny");
  by_ids.set_hash_scheme("vllm");
  for (auto t : *want) by_ids.add_token_ids(t);
  grpc::ClientContext ctx;
  v1::LookupRouteResponse ids_resp;
  ASSERT_TRUE(stub_->LookupRoute(&ctx, by_ids, &ids_resp).ok());
  EXPECT_EQ(ids_resp.reason_code(), "PREFIX_MATCH");
  EXPECT_EQ(ids_resp.token_ids_size(), 0);
  // Over 1 MiB: refused before the tokenizer.
  auto huge = lookup_text("org/tiny", std::string((1u << 20) + 1, 'a'));
  EXPECT_EQ(huge.reason_code(), "NO_HINT");
  EXPECT_EQ(huge.token_ids_size(), 0);
  // 1 MiB of text cannot be tokenized within the "slow" tenant's 1 ms budget.
  auto slow = lookup_text("org/tiny", std::string(1u << 20, 'h'), "slow");
  EXPECT_EQ(slow.reason_code(), "TIMEOUT");
  EXPECT_GE(metric(R"(inferencecache_tokenizations_total{outcome="text_too_large"})"), 1);
  EXPECT_GE(metric(R"(inferencecache_tokenizations_total{outcome="ok"})"), 2);
}

// The loop a new user tries by hand: lookup --prompt prints the server's tokens, report
// --tokens fingerprints them client-side, and the next lookup --prompt routes to the replica.
TEST_F(PromptText, CliLookupPromptAndReportTokensCloseTheLoop) {
  write_tiny_model("org/tiny");
  start(models_.string());
  auto cli = [&](std::vector<std::string> args) {  // args[0] is the verb
    args.insert(args.begin(), "--addr=" + server_->grpc_target());
    args.insert(args.end(), {"--tenant=t", "--model=org/tiny"});
    return test::run_to_exit(ic::test::executable("inferencecache"), args, 20s);
  };
  auto [rc, out] = cli({"lookup", "--prompt=hello hello hello"});
  ASSERT_EQ(rc, 0) << out;
  auto at = out.find("tokens (");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string list = out.substr(out.find(": ", at) + 2, out.find('\n', at) - out.find(": ", at) - 2);
  std::tie(rc, out) = cli({"report", "--replica=r9", "--tokens=" + list,
                           "--block-tokens=" + std::to_string(kBlock)});
  ASSERT_EQ(rc, 0) << out;
  std::tie(rc, out) = cli({"lookup", "--prompt=hello hello hello", "--fail-on-no-hint"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("r9"), std::string::npos) << out;
}

TEST_F(PromptText, ABudgetThatPassesInTheIndexAskAnswersTimeoutWithTheTokens) {
  // The test-hooks server stalls each lookup decision by 1.5 s; tenant "budget" allows 300 ms.
  // Tokenizing a short prompt takes microseconds, so the deadline passes in the index ask
  // and the TIMEOUT echoes the tokens (H9), never the adapter.
  write_tiny_model("org/tiny");
  ::setenv("IC_TEST_LOOKUP_DELAY_MS", "1500", 1);
  start(models_.string(), ic::test::executable("inferencecache-server-testhooks"));
  ::unsetenv("IC_TEST_LOOKUP_DELAY_MS");
  auto bpe = tokenizer::bpe_tokenizer::load(tokenizer::testing::tiny_byte_level().dump());
  auto want = (*bpe)->encode("<|x|>hello<|x|>");
  ASSERT_TRUE(want);
  report_tokens("org/tiny", "r1", *want, "budget");  // the tenant's actor now exists
  v1::LookupRouteRequest r;
  r.set_tenant_id("budget");
  r.set_model_id("org/tiny");
  r.set_hash_scheme("vllm");
  r.set_prompt_text("hello");
  r.set_adapter_id("lora-x");
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  v1::LookupRouteResponse resp;
  ASSERT_TRUE(stub_->LookupRoute(&ctx, r, &resp).ok());
  EXPECT_EQ(resp.reason_code(), "TIMEOUT");
  EXPECT_EQ(echo(resp), *want);
  EXPECT_TRUE(resp.adapter_id().empty());
}

TEST_F(PromptText, AnUnreadableModelsDirIsLoggedAndLookupsFailOpen) {
  start(dir_ + "/no-such-dir");
  EXPECT_TRUE(server_->wait_for_log("tokenizer_models_dir_error", 1s)) << server_->logs();
  auto resp = lookup_text("any", "hello world");
  EXPECT_EQ(resp.reason_code(), "NO_HINT");
  EXPECT_EQ(resp.token_ids_size(), 0);
  EXPECT_EQ(metric(R"(inferencecache_tokenizations_total{outcome="unknown_model"})"), 1);
}

}  // namespace
}  // namespace ic
