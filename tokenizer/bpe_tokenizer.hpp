// A byte-level BPE tokenizer loaded from a Hugging Face `tokenizer.json` (Llama-3.x,
// Qwen2/2.5/3, GPT-2 family), encoding like `tokenizer.encode(text, add_special_tokens=False)`.
//
//   auto tok = ic::tokenizer::bpe_tokenizer::load(json_text);
//   if (!tok) { log(tok.error()); return; }         // unsupported file: the model fails open
//   auto ids = tok->encode("hello world");          // result<std::vector<std::uint32_t>>
//
// Pipeline (spec/tokenizer.md §2), in HF's order: split the raw text on the added tokens
// (leftmost-longest; `normalized:false` ones on the raw text, `normalized:true` ones after
// normalization; lstrip/rstrip absorb neighbouring whitespace; single_word needs word
// boundaries) → normalizer (null, NFC/NFD/NFKC/NFKD or a Sequence of them) → pre-tokenizer
// (Split with a PCRE2 regex in UTF+UCP mode, behaviour Isolated; ByteLevel; or a Sequence) →
// BPE (merge ranks, `ignore_merges`, `unk_token`/`fuse_unk`, `byte_fallback`). The
// post-processor is never applied. Anything else in the file (WordPiece, Unigram, Metaspace,
// other normalizers, Split behaviours other than Isolated, ...) is refused by `load` with a
// one-line reason, so an unsupported model fails at startup, never at encode time.
//
// Thread-safety: an instance is immutable after `load`; `encode` may run on many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "policy/result.hpp"

namespace ic::tokenizer {

using ::ic::policy::error;
using ::ic::policy::result;
using ::ic::policy::status;

/// One entry of `added_tokens[]`.
struct added_token {
  std::uint32_t id = 0;
  std::string content;
  bool special = false;
  bool normalized = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

/// Returns the UTF-8 of the character GPT-2's bytes_to_unicode maps byte `b` to (the
/// ByteLevel alphabet: `Ġ` for a space, `Ċ` for a newline).
const std::string& byte_level_char(unsigned char b);

class bpe_tokenizer {
 public:
  /// Parses a `tokenizer.json` document; an error names the first unsupported or malformed
  /// part (e.g. `model.type "Unigram" is not supported`).
  static result<std::shared_ptr<const bpe_tokenizer>> load(std::string_view json_text);
  /// Reads and parses a `tokenizer.json` file.
  static result<std::shared_ptr<const bpe_tokenizer>> load_file(const std::string& path);

  ~bpe_tokenizer();
  bpe_tokenizer(const bpe_tokenizer&) = delete;
  bpe_tokenizer& operator=(const bpe_tokenizer&) = delete;

  /// Encodes `text` without special tokens added around it (special-token *text* inside it
  /// still maps to its id). Errors: invalid UTF-8, a regex engine failure, a character with
  /// no id (no unk, no byte fallback).
  result<std::vector<std::uint32_t>> encode(std::string_view text) const;

  /// Returns the id of an exact vocabulary or added-token string, or -1.
  std::int64_t token_to_id(std::string_view token) const;
  /// Returns the added tokens in file order.
  const std::vector<added_token>& added_tokens() const;
  /// Returns the number of vocabulary entries (added tokens not counted).
  std::size_t vocab_size() const;

  struct impl;

 private:
  explicit bpe_tokenizer(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace ic::tokenizer
