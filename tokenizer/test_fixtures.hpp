// Test support: where the real tokenizer files are (scripts/fetch_tokenizer_fixtures.sh) and
// the golden records of tokenizer/golden_fixtures.inc.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/bpe_tokenizer.hpp"

namespace ic::tokenizer::testing {

/// One encoding golden: input text and the ids the package's JS tokenizer produced.
struct encode_golden {
  const char* name;
  const char* text;
  std::vector<std::uint32_t> ids;
};

/// The 10 KB input's golden: count, head, tail and the last block's prefix hash (block 16).
struct big_golden {
  std::size_t count;
  std::vector<std::uint32_t> head, tail;
  std::uint64_t last_block_hash;
};

/// A chat golden: user content, python3-jinja2's render, its ids, prefix hashes (block 16).
struct chat_golden {
  const char* content;
  const char* rendered;
  std::vector<std::uint32_t> ids;
  std::vector<std::uint64_t> block_hashes;
};

/// A render golden of tokenizer/testdata/features.jinja.
struct render_golden {
  const char* content;
  const char* rendered;
};

#include "tokenizer/golden_fixtures.inc"

/// Returns the fixture folder of `model` ("llama3", "qwen3"), or "" when not fetched.
inline std::string fixture_dir(const std::string& model) {
  std::filesystem::path p = std::filesystem::path(IC_TOKENIZER_FIXTURES) / model;
  return std::filesystem::exists(p / "tokenizer.json") ? p.string() : std::string();
}

/// The reason a fixture-based test is skipped.
inline std::string fixture_skip_reason() {
  return std::string("tokenizer fixtures not found in ") + IC_TOKENIZER_FIXTURES +
         " (run scripts/fetch_tokenizer_fixtures.sh, or set -DIC_TOKENIZER_FIXTURES=...)";
}

/// The 10 KB input of the goldens (scripts/tokenizer_goldens/make_goldens.py ten_kb()).
inline std::string ten_kb_text() {
  std::string s;
  for (int i = 0; s.size() < 10240; ++i)
    s += "Paragraph " + std::to_string(i) + ": The quick brown fox jumps over " +
         std::to_string(i * 7 % 1000) +
         " lazy dogs; na\xc3\xafve caf\xc3\xa9 \xe2\x80\x94 \xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x81  \n";
  return s;
}

inline constexpr const char* kLlamaPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

/// A small byte-level tokenizer.json: ids 0..255 are the ByteLevel alphabet, then merged
/// tokens; merges "h e" < "l l" < "he ll".
inline nlohmann::json tiny_byte_level() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level_char(static_cast<unsigned char>(b))] = b;
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab["hell"] = 258;
  vocab["hello"] = 259;
  nlohmann::json doc = {
      {"added_tokens", nlohmann::json::array({
           {{"id", 300}, {"content", "<|x|>"}, {"special", true}, {"normalized", false}},
           {{"id", 301}, {"content", "[M]"}, {"special", true}, {"normalized", false},
            {"lstrip", true}, {"rstrip", true}},
           {{"id", 302}, {"content", "tok"}, {"special", false}, {"normalized", false},
            {"single_word", true}},
       })},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers", nlohmann::json::array({
             {{"type", "Split"}, {"pattern", {{"Regex", kLlamaPattern}}}, {"behavior", "Isolated"},
              {"invert", false}},
             {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}},
         })}}},
      {"model",
       {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array({"h e", "l l", "he ll"})},
        {"ignore_merges", false}}},
  };
  return doc;
}


inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace ic::tokenizer::testing
