#include "tokenizer/prompt_tokenizer.hpp"

#include <filesystem>
#include <fstream>
#include <future>

#include <gtest/gtest.h>

#include "tests/support/server_process.hpp"
#include "tokenizer/test_fixtures.hpp"
#include "tokenizer/tokenize_service.hpp"

namespace ic::tokenizer {
namespace {

namespace fs = std::filesystem;
using ids = std::vector<std::uint32_t>;
using namespace std::chrono_literals;

constexpr const char* kTemplate =
    "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
    "{% if add_generation_prompt %}<|x|>{% endif %}";

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

/// Writes a small model folder (the tiny byte-level tokenizer and kTemplate) at `dir`.
void write_model(const fs::path& dir, const std::string& tmpl = kTemplate) {
  write(dir / "tokenizer.json", testing::tiny_byte_level().dump());
  nlohmann::json cfg = {{"chat_template", tmpl}, {"bos_token", {{"content", "tok"}}}};
  write(dir / "tokenizer_config.json", cfg.dump());
}

class ModelDir : public ::testing::Test {
 protected:
  void SetUp() override { root_ = test::make_temp_dir("ic_tok"); }
  void TearDown() override { test::remove_tree(root_); }
  fs::path root() const { return root_; }
  std::string root_;
};

TEST_F(ModelDir, TokenizeRendersTheTemplateThenEncodesWithoutAddedSpecialTokens) {
  write_model(root() / "m");
  auto m = prompt_tokenizer::load_dir((root() / "m").string());
  ASSERT_TRUE(m) << m.error();
  auto bpe = bpe_tokenizer::load(testing::tiny_byte_level().dump());
  auto want = (*bpe)->encode("tok<user>hello<|x|>");
  auto got = (*m)->tokenize("hello");
  ASSERT_TRUE(got) << got.error();
  EXPECT_EQ(*got, *want);
  EXPECT_EQ(got->front(), 302u);  // bos_token text "tok" is the added token, once
}

TEST_F(ModelDir, RegistryLoadsNestedIdsAndReportsEveryFolderThatFails) {
  write_model(root() / "org" / "model-a");
  write_model(root() / "model-b");
  write(root() / "broken" / "tokenizer.json", "{not json");
  write(root() / "broken" / "tokenizer_config.json", R"({"chat_template": "{{ 1 }}"})");
  write(root() / "tiktoken-only" / "tokenizer.tiktoken", "x");
  write_model(root() / "macro", "{% macro m() %}{% endmacro %}");
  write_model(root() / "raises", "{{ raise_exception('only system messages') }}");
  registry_report report;
  auto reg = model_registry::load(root_, report);
  EXPECT_TRUE(report.root_error.empty());
  EXPECT_EQ(reg.size(), 2u);
  EXPECT_NE(reg.find("org/model-a"), nullptr);
  EXPECT_NE(reg.find("model-b"), nullptr);
  EXPECT_EQ(reg.find("org"), nullptr);
  EXPECT_EQ(reg.find("org/../model-b"), nullptr);  // ids are map keys, never paths
  std::map<std::string, std::string> failed(report.failed.begin(), report.failed.end());
  ASSERT_EQ(failed.size(), 4u);
  EXPECT_NE(failed["broken"].find("tokenizer.json"), std::string::npos) << failed["broken"];
  EXPECT_NE(failed["tiktoken-only"].find("tiktoken"), std::string::npos);
  EXPECT_NE(failed["macro"].find("macro"), std::string::npos);
  EXPECT_NE(failed["raises"].find("only system messages"), std::string::npos);
}

TEST_F(ModelDir, RegistryOfAMissingRootIsEmptyWithAReason) {
  registry_report report;
  auto reg = model_registry::load(root_ + "/absent", report);
  EXPECT_EQ(reg.size(), 0u);
  EXPECT_NE(report.root_error.find("absent"), std::string::npos);
}

TEST(RealModels, LoadFromTheFixtureFoldersAndTokenizeLikeTheGoldens) {
  for (const char* name : {"llama3", "qwen3"}) {
    const auto dir = testing::fixture_dir(name);
    if (dir.empty()) GTEST_SKIP() << testing::fixture_skip_reason();
    auto m = prompt_tokenizer::load_dir(dir);
    ASSERT_TRUE(m) << m.error();
    const auto& g = std::string(name) == "llama3" ? testing::llama3_chat[0] : testing::qwen3_chat[0];
    auto got = (*m)->tokenize(g.content);
    ASSERT_TRUE(got) << got.error();
    EXPECT_EQ(*got, g.ids) << name;
  }
}

// ---- tokenize_service ----------------------------------------------------------------------

class Service : public ModelDir {
 protected:
  model_registry registry() {
    write_model(root() / "m");
    registry_report report;
    return model_registry::load(root_, report);
  }
  static tokenize_service::clock::time_point later() { return tokenize_service::clock::now() + 60s; }
};

tokenize_result wait(std::future<tokenize_result>& f) { return f.get(); }

TEST_F(Service, AnswersOutcomesDecidedAtOnceBeforeReturning) {
  tokenize_service::options o;
  o.max_text_bytes = 8;
  tokenize_service svc(registry(), o);
  std::vector<tokenize_outcome> seen;
  auto record = [&](tokenize_result r) { seen.push_back(r.outcome); };
  svc.tokenize("nope", "hello", later(), record);
  svc.tokenize("m", "123456789", later(), record);
  svc.tokenize("m", "hello", tokenize_service::clock::now() - 1ms, record);
  EXPECT_EQ(seen, (std::vector<tokenize_outcome>{tokenize_outcome::unknown_model,
                                                 tokenize_outcome::text_too_large,
                                                 tokenize_outcome::timeout}));
}

TEST_F(Service, TokenizesOnAWorkerThread) {
  tokenize_service svc(registry());
  std::promise<tokenize_result> p;
  auto f = p.get_future();
  const auto caller = std::this_thread::get_id();
  std::thread::id ran_on;
  svc.tokenize("m", "hello", later(), [&](tokenize_result r) {
    ran_on = std::this_thread::get_id();
    p.set_value(std::move(r));
  });
  auto r = wait(f);
  EXPECT_EQ(r.outcome, tokenize_outcome::ok);
  EXPECT_FALSE(r.tokens.empty());
  EXPECT_NE(ran_on, caller);
}

TEST_F(Service, RefusesPastTheConcurrencyLimitAndTimesOutQueuedWork) {
  tokenize_service::options o;
  o.workers = 1;
  o.max_concurrent = 2;
  // Declared before the service, so they outlive it: its destructor joins the worker, which
  // may still be inside released.wait() when the test body ends (ASan found the promise freed
  // under the waking worker when they were declared after it).
  std::promise<void> release, first_running;
  auto released = release.get_future().share();
  tokenize_service svc(registry(), o);
  // The first call's answer blocks the only worker, so its slot stays taken.
  svc.tokenize("m", "hello", later(), [&](tokenize_result) {
    first_running.set_value();
    released.wait();
  });
  first_running.get_future().wait();
  std::promise<tokenize_result> second;
  auto second_f = second.get_future();
  svc.tokenize("m", "hello", tokenize_service::clock::now() + 20ms,
               [&](tokenize_result r) { second.set_value(std::move(r)); });
  tokenize_outcome third = tokenize_outcome::ok;
  svc.tokenize("m", "hello", later(), [&](tokenize_result r) { third = r.outcome; });
  EXPECT_EQ(third, tokenize_outcome::busy);
  EXPECT_EQ(wait(second_f).outcome, tokenize_outcome::timeout);  // answered by the timer
  release.set_value();
}

TEST_F(Service, ShutdownAnswersEveryCallStillQueued) {
  tokenize_service::options o;
  o.workers = 1;
  std::promise<void> release, first_running;
  auto released = release.get_future().share();
  std::promise<tokenize_result> queued;
  auto queued_f = queued.get_future();
  std::thread releaser;
  {
    tokenize_service svc(registry(), o);
    svc.tokenize("m", "hello", later(), [&](tokenize_result) {
      first_running.set_value();
      released.wait();
    });
    first_running.get_future().wait();
    svc.tokenize("m", "hello", later(), [&](tokenize_result r) { queued.set_value(std::move(r)); });
    releaser = std::thread([&] { release.set_value(); });
  }
  releaser.join();
  // Answered exactly once (a second set_value would throw): by shutdown, or by the worker
  // when the release won the race with the destructor.
  auto r = wait(queued_f);
  if (r.outcome == tokenize_outcome::failed) EXPECT_EQ(r.error, "shutting down");
  else EXPECT_EQ(r.outcome, tokenize_outcome::ok);
}

}  // namespace
}  // namespace ic::tokenizer
