// tokenizer.json documents (tokenizer/bpe_tokenizer): `load` refuses what it does not support
// with a reason and never crashes; a loaded tokenizer encodes a fixed text (with special-token
// text and bytes outside ASCII) the same way twice, and finds every added token by its text.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz_support.hpp"
#include "tokenizer/bpe_tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  auto tok = ic::tokenizer::bpe_tokenizer::load(json);
  if (!tok) {
    ic::fuzz::check(!tok.error().empty(), "a refused tokenizer.json says why");
    return 0;
  }
  const auto& t = *tok.value();
  for (const auto& a : t.added_tokens())
    ic::fuzz::check(t.token_to_id(a.content) >= 0, "every added token has an id");
  constexpr std::string_view text = "Hello, world! 123 <|eot_id|> caf\xc3\xa9 \xe2\x82\xac\n\n  x";
  auto first = t.encode(text);
  auto second = t.encode(text);
  ic::fuzz::check(first.has_value() == second.has_value(), "encode is deterministic");
  if (first) ic::fuzz::check(first.value() == second.value(), "encode is deterministic");
  return 0;
}
