#include "tokenizer/bpe_tokenizer.hpp"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "index/fingerprint.hpp"
#include "tokenizer/test_fixtures.hpp"

namespace ic::tokenizer {
namespace {

using json = nlohmann::json;
using ids = std::vector<std::uint32_t>;

using testing::tiny_byte_level;

std::shared_ptr<const bpe_tokenizer> load_ok(const json& doc) {
  auto t = bpe_tokenizer::load(doc.dump());
  EXPECT_TRUE(t) << (t ? "" : t.error());
  return t ? *t : nullptr;
}

ids encode_ok(const bpe_tokenizer& t, std::string_view text) {
  auto r = t.encode(text);
  EXPECT_TRUE(r) << (r ? "" : r.error());
  return r ? *r : ids{};
}

std::uint32_t byte_id(char c) { return static_cast<unsigned char>(c); }

TEST(ByteLevel, MapsPrintableBytesToThemselvesAndTheRestAboveU0100) {
  EXPECT_EQ(byte_level_char('a'), "a");
  EXPECT_EQ(byte_level_char(' '), "\xc4\xa0");   // U+0120 Ġ
  EXPECT_EQ(byte_level_char('\n'), "\xc4\x8a");  // U+010A Ċ
  EXPECT_EQ(byte_level_char(0xAD), "\xc5\x83");  // the 68th remapped byte: U+0143
  EXPECT_EQ(byte_level_char(0xFF), "\xc3\xbf");  // kept
}

TEST(BpeTokenizer, MergesByRankAndStopsWhenNoMergeApplies) {
  auto t = load_ok(tiny_byte_level());
  ASSERT_TRUE(t);
  // h e l l o -> he l l o -> he ll o -> hell o ("hell o" has no merge)
  EXPECT_EQ(encode_ok(*t, "hello"), (ids{258, byte_id('o')}));
  // the space is its own ByteLevel character inside the piece " hello"
  EXPECT_EQ(encode_ok(*t, " hell"), (ids{byte_id(' '), 258}));
  EXPECT_EQ(encode_ok(*t, ""), ids{});
}

TEST(BpeTokenizer, IgnoreMergesEmitsAWholePieceFoundInTheVocabulary) {
  auto doc = tiny_byte_level();
  doc["model"]["ignore_merges"] = true;
  auto t = load_ok(doc);
  ASSERT_TRUE(t);
  EXPECT_EQ(encode_ok(*t, "hello"), ids{259});
  EXPECT_EQ(encode_ok(*t, "hell"), ids{258});
}

TEST(BpeTokenizer, LongPiecesMergeLikeShortOnes) {
  // A 200-byte piece takes the heap path; each "hell" still merges the same way.
  auto t = load_ok(tiny_byte_level());
  ASSERT_TRUE(t);
  std::string word;
  ids want;
  for (int i = 0; i < 50; ++i) {
    word += "hell";
    want.push_back(258);
  }
  EXPECT_EQ(encode_ok(*t, word), want);
}

TEST(BpeTokenizer, AddedTokensSplitFirstAndKeepTheirIds) {
  auto t = load_ok(tiny_byte_level());
  ASSERT_TRUE(t);
  ids got = encode_ok(*t, "hello<|x|>hello");
  EXPECT_EQ(got, (ids{258, byte_id('o'), 300, 258, byte_id('o')}));
}

TEST(BpeTokenizer, LstripAndRstripAbsorbTheWhitespaceAroundAToken) {
  auto t = load_ok(tiny_byte_level());
  ASSERT_TRUE(t);
  EXPECT_EQ(encode_ok(*t, "a  [M] \n b"), (ids{byte_id('a'), 301, byte_id('b')}));
  // without the strip flags the spaces stay ordinary text
  EXPECT_EQ(encode_ok(*t, "a <|x|> b"),
            (ids{byte_id('a'), byte_id(' '), 300, byte_id(' '), byte_id('b')}));
}

TEST(BpeTokenizer, SingleWordTokensMatchOnlyAtWordBoundaries) {
  auto t = load_ok(tiny_byte_level());
  ASSERT_TRUE(t);
  ids got = encode_ok(*t, "tok xtok tok");
  ids gap = encode_ok(*t, " xtok ");
  ids want{302};
  want.insert(want.end(), gap.begin(), gap.end());
  want.push_back(302);
  EXPECT_EQ(got, want);
  EXPECT_EQ(std::count(gap.begin(), gap.end(), 302u), 0);
}

TEST(BpeTokenizer, NfcNormalizerComposesBeforeTheModel) {
  auto doc = tiny_byte_level();
  doc["normalizer"] = {{"type", "NFC"}};
  auto t = load_ok(doc);
  ASSERT_TRUE(t);
  EXPECT_EQ(encode_ok(*t, "cafe\xcc\x81"), encode_ok(*t, "caf\xc3\xa9"));
  auto raw = load_ok(tiny_byte_level());
  EXPECT_NE(encode_ok(*raw, "cafe\xcc\x81"), encode_ok(*raw, "caf\xc3\xa9"));
}

TEST(BpeTokenizer, ByteFallbackSpellsUnknownCharactersAsByteTokens) {
  json vocab = {{"a", 0}, {"b", 1}, {"ab", 2}, {"<unk>", 3}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 10 + b;
  }
  json doc = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"a b"})},
                         {"byte_fallback", true}, {"unk_token", "<unk>"}}}};
  auto t = load_ok(doc);
  ASSERT_TRUE(t);
  // "é" = C3 A9 is not in the vocabulary: two byte tokens
  EXPECT_EQ(encode_ok(*t, "ab\xc3\xa9" "a"), (ids{2, 10 + 0xC3, 10 + 0xA9, 0}));
  doc["model"]["byte_fallback"] = false;
  auto u = load_ok(doc);
  EXPECT_EQ(encode_ok(*u, "ab\xc3\xa9"), (ids{2, 3}));
}

// fuzz_tokenizer_json: an added token's id of 2.7e55 was cast to uint32 (undefined behaviour).
TEST(BpeTokenizer, RefusesTokenIdsThatAreNotIntegersInTheUint32Range) {
  for (const json bad : {json(2.6666666666666667e55), json(3.5), json(-1), json(4294967296LL)}) {
    auto d = tiny_byte_level();
    d["added_tokens"] = json::array({{{"id", bad}, {"content", "<|x|>"}, {"special", true}}});
    auto t = bpe_tokenizer::load(d.dump());
    ASSERT_FALSE(t) << bad.dump();
    EXPECT_NE(t.error().find("added token's id"), std::string::npos) << t.error();
    d = tiny_byte_level();
    d["model"]["vocab"]["a"] = bad;
    t = bpe_tokenizer::load(d.dump());
    ASSERT_FALSE(t) << bad.dump();
    EXPECT_NE(t.error().find("model.vocab id of \"a\""), std::string::npos) << t.error();
  }
  auto d = tiny_byte_level();
  d["added_tokens"] = json::array({{{"id", 4294967295LL}, {"content", "<|x|>"}, {"special", true}}});
  EXPECT_TRUE(bpe_tokenizer::load(d.dump())) << "the largest uint32 id is accepted";
}

TEST(BpeTokenizer, RefusesWhatItDoesNotImplementAtLoadTime) {
  auto expect_refused = [](json doc, const std::string& needle) {
    auto t = bpe_tokenizer::load(doc.dump());
    ASSERT_FALSE(t) << needle;
    EXPECT_NE(t.error().find(needle), std::string::npos) << t.error();
  };
  auto d = tiny_byte_level();
  d["model"]["type"] = "Unigram";
  expect_refused(d, "Unigram");
  d = tiny_byte_level();
  d["pre_tokenizer"] = {{"type", "Metaspace"}};
  expect_refused(d, "Metaspace");
  d = tiny_byte_level();
  d["normalizer"] = {{"type", "Lowercase"}};
  expect_refused(d, "Lowercase");
  d = tiny_byte_level();
  d["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
  expect_refused(d, "Removed");
  d = tiny_byte_level();
  d["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  expect_refused(d, "regex");
  d = tiny_byte_level();
  d["model"]["merges"].push_back("q zz");
  expect_refused(d, "not in the vocabulary");
  auto bad = bpe_tokenizer::load("{not json");
  EXPECT_FALSE(bad);
}

TEST(BpeTokenizer, RejectsInvalidUtf8Text) {
  auto t = load_ok(tiny_byte_level());
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->encode("ab\xff"));
  EXPECT_FALSE(t->encode("\xc0\xaf"));      // overlong
  EXPECT_FALSE(t->encode("\xed\xa0\x80"));  // surrogate
}

// ---- Real tokenizer files (scripts/fetch_tokenizer_fixtures.sh) -----------------------------

class RealTokenizer : public ::testing::TestWithParam<std::string> {
 protected:
  static std::shared_ptr<const bpe_tokenizer> load(const std::string& model) {
    static std::map<std::string, std::shared_ptr<const bpe_tokenizer>> cache;
    auto& slot = cache[model];
    if (!slot) {
      auto t = bpe_tokenizer::load_file(testing::fixture_dir(model) + "/tokenizer.json");
      EXPECT_TRUE(t) << (t ? "" : t.error());
      if (t) slot = *t;
    }
    return slot;
  }
  void SetUp() override {
    if (testing::fixture_dir(GetParam()).empty()) GTEST_SKIP() << testing::fixture_skip_reason();
  }
};

TEST_P(RealTokenizer, EncodesEveryGoldenLikeThePackagesOwnTokenizer) {
  auto t = load(GetParam());
  ASSERT_TRUE(t);
  const bool llama = GetParam() == "llama3";
  const auto* begin = llama ? std::begin(testing::llama3_encode) : std::begin(testing::qwen3_encode);
  const auto* end = llama ? std::end(testing::llama3_encode) : std::end(testing::qwen3_encode);
  for (const auto* g = begin; g != end; ++g) EXPECT_EQ(encode_ok(*t, g->text), g->ids) << g->name;
}

TEST_P(RealTokenizer, EncodesTenKilobytesLikeThePackagesOwnTokenizer) {
  auto t = load(GetParam());
  ASSERT_TRUE(t);
  const auto& g = GetParam() == "llama3" ? testing::llama3_ten_kb : testing::qwen3_ten_kb;
  ids got = encode_ok(*t, testing::ten_kb_text());
  ASSERT_EQ(got.size(), g.count);
  EXPECT_EQ(ids(got.begin(), got.begin() + 16), g.head);
  EXPECT_EQ(ids(got.end() - 16, got.end()), g.tail);
  auto chain = index::fingerprint_chain(got.data(), got.size(), 16);
  ASSERT_FALSE(chain.empty());
  EXPECT_EQ(chain.back(), g.last_block_hash);
}

TEST_P(RealTokenizer, EncodesTheSameOnManyThreadsAtOnce) {
  auto t = load(GetParam());
  ASSERT_TRUE(t);
  const auto text = testing::ten_kb_text();
  const ids want = encode_ok(*t, text);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int n = 0; n < 4; ++n)
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        auto r = t->encode(text);
        if (!r || *r != want) ++mismatches;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST_P(RealTokenizer, KnowsItsSpecialTokens) {
  auto t = load(GetParam());
  ASSERT_TRUE(t);
  if (GetParam() == "llama3") {
    EXPECT_EQ(t->token_to_id("<|begin_of_text|>"), 128000);
    EXPECT_EQ(t->added_tokens().size(), 256u);
  } else {
    EXPECT_EQ(t->token_to_id("<|im_start|>"), 151644);
    EXPECT_EQ(t->added_tokens().size(), 26u);
  }
}

TEST(RealTokenizerQwen, MatchesTheReferenceGoldenFingerprint) {
  // The reference's public golden: "hello world" -> [14990,1879], block size 2 -> 238f33c07c1d869e.
  if (testing::fixture_dir("qwen3").empty()) GTEST_SKIP() << testing::fixture_skip_reason();
  auto t = bpe_tokenizer::load_file(testing::fixture_dir("qwen3") + "/tokenizer.json");
  ASSERT_TRUE(t) << t.error();
  ids got = encode_ok(**t, "hello world");
  ASSERT_EQ(got, (ids{14990, 1879}));
  auto chain = index::fingerprint_chain(got.data(), got.size(), 2);
  ASSERT_EQ(chain.size(), 1u);
  EXPECT_EQ(chain[0], 0x238f33c07c1d869eull);
}

INSTANTIATE_TEST_SUITE_P(Models, RealTokenizer, ::testing::Values("llama3", "qwen3"));

}  // namespace
}  // namespace ic::tokenizer
