#include "index/fingerprint.hpp"

#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/test_paths.hpp"

namespace ic::index {
namespace {

std::vector<std::uint32_t> iota_tokens(std::uint32_t from, std::uint32_t to_inclusive) {
  std::vector<std::uint32_t> v;
  for (std::uint32_t t = from; t <= to_inclusive; ++t) v.push_back(t);
  return v;
}

std::string base64(const std::string& in) {
  static const char* tbl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8 | (unsigned char)in[i + 2];
    out += tbl[v >> 18 & 63];
    out += tbl[v >> 12 & 63];
    out += tbl[v >> 6 & 63];
    out += tbl[v & 63];
  }
  if (in.size() - i == 2) {
    unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8;
    out += tbl[v >> 18 & 63];
    out += tbl[v >> 12 & 63];
    out += tbl[v >> 6 & 63];
    out += '=';
  } else if (in.size() - i == 1) {
    unsigned v = (unsigned char)in[i] << 16;
    out += tbl[v >> 18 & 63];
    out += tbl[v >> 12 & 63];
    out += "==";
  }
  return out;
}

// Literal anchors from the golden vectors, so the test means something without ../shared.
TEST(Fingerprint, SingleFullBlockMatchesPinnedContentHash) {
  auto t = iota_tokens(1, 16);
  EXPECT_EQ(content_hash(t.data(), t.size()), 16863443419780771464ULL);
  auto chain = fingerprint_chain(t.data(), t.size(), 16);
  ASSERT_EQ(chain.size(), 1u);
  EXPECT_EQ(chain[0], 16863443419780771464ULL);
}

TEST(Fingerprint, MultiBlockChainMatchesPinnedPrefixes) {
  auto t = iota_tokens(0, 63);
  auto chain = fingerprint_chain(t.data(), t.size(), 16);
  ASSERT_EQ(chain.size(), 4u);
  EXPECT_EQ(chain[0], 15310707395893867146ULL);
  EXPECT_EQ(chain[1], 13769157705258532664ULL);
  EXPECT_EQ(chain[2], 11879827756109914528ULL);
  EXPECT_EQ(chain[3], 3888788807566526800ULL);
  auto contents = block_content_hashes(t.data(), t.size(), 16);
  ASSERT_EQ(contents.size(), 4u);
  EXPECT_EQ(contents[1], 15292316782987903195ULL);
  EXPECT_EQ(contents[3], 14928757266181269122ULL);
}

TEST(Fingerprint, ExplicitParentChainsFirstBlock) {
  auto t = iota_tokens(50, 81);
  auto chain = fingerprint_chain(t.data(), t.size(), 16, 0xDEADBEEFULL);
  ASSERT_EQ(chain.size(), 2u);
  EXPECT_EQ(chain[0], 13185224009891017151ULL);
  EXPECT_EQ(chain[1], 2998384554010166533ULL);
}

TEST(Fingerprint, PartialTailIsDropped) {
  auto t = iota_tokens(100, 119);
  auto chain = fingerprint_chain(t.data(), t.size(), 16);
  ASSERT_EQ(chain.size(), 1u);
  EXPECT_EQ(chain[0], 10823191264391160519ULL);
  auto none = iota_tokens(0, 9);
  EXPECT_TRUE(fingerprint_chain(none.data(), none.size(), 16).empty());
}

TEST(Fingerprint, NonPositiveBlockSizeGivesEmptyChain) {
  auto t = iota_tokens(1, 32);
  EXPECT_TRUE(fingerprint_chain(t.data(), t.size(), 0).empty());
  EXPECT_TRUE(fingerprint_chain(t.data(), t.size(), -16).empty());
}

TEST(Fingerprint, BlockSizeIsAParameter) {
  auto t = iota_tokens(1, 32);
  auto c8 = fingerprint_chain(t.data(), t.size(), 8);
  ASSERT_EQ(c8.size(), 4u);
  EXPECT_EQ(c8[0], content_hash(t.data(), 8));
  EXPECT_EQ(c8[1], chain_link(c8[0], content_hash(t.data() + 8, 8)));
}

TEST(Fingerprint, WireFormIsEightBytesBigEndian) {
  std::string w = to_wire(0x0102030405060708ULL);
  ASSERT_EQ(w.size(), 8u);
  EXPECT_EQ(w, std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
  EXPECT_EQ(from_wire(w), 0x0102030405060708ULL);
  EXPECT_EQ(from_wire("short"), std::nullopt);
  EXPECT_EQ(base64(to_wire(16863443419780771464ULL)), "6gb8caXubog=");
}

std::uint64_t parse_u64(const nlohmann::json& hash_obj) {
  return std::stoull(hash_obj.at("dec").get<std::string>());
}

// Every case of the canonical golden vectors, byte for byte (decimal and base64 wire form).
TEST(Fingerprint, GoldenVectorsFromSharedMatchByteForByte) {
  std::ifstream in(ic::test::shared_dir() + "/fingerprint/golden_vectors.json");
  if (!in) GTEST_SKIP() << "shared/fingerprint/golden_vectors.json not present";
  nlohmann::json doc = nlohmann::json::parse(in);
  ASSERT_EQ(doc.at("scheme").at("seed").get<int>(), 1337);
  const auto& vectors = doc.at("vectors");
  ASSERT_EQ(vectors.size(), 6u);
  for (const auto& v : vectors) {
    SCOPED_TRACE(v.at("name").get<std::string>());
    auto tokens = v.at("tokens").get<std::vector<std::uint32_t>>();
    int bs = v.at("block_size").get<int>();
    std::optional<std::uint64_t> parent;
    if (!v.at("parent_prefix").is_null()) parent = parse_u64(v.at("parent_prefix"));
    auto contents = block_content_hashes(tokens.data(), tokens.size(), bs);
    auto prefixes = fingerprint_chain(tokens.data(), tokens.size(), bs, parent);
    ASSERT_EQ(contents.size(), v.at("content_hashes").size());
    ASSERT_EQ(prefixes.size(), v.at("prefix_hashes").size());
    for (std::size_t i = 0; i < contents.size(); ++i) {
      EXPECT_EQ(contents[i], parse_u64(v["content_hashes"][i]));
      EXPECT_EQ(base64(to_wire(contents[i])), v["content_hashes"][i]["b64be"].get<std::string>());
    }
    for (std::size_t i = 0; i < prefixes.size(); ++i) {
      EXPECT_EQ(prefixes[i], parse_u64(v["prefix_hashes"][i]));
      EXPECT_EQ(base64(to_wire(prefixes[i])), v["prefix_hashes"][i]["b64be"].get<std::string>());
    }
  }
}

}  // namespace
}  // namespace ic::index
