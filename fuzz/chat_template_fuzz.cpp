// Chat templates (tokenizer/chat_template): `parse` refuses unsupported Jinja with a reason
// and never crashes; a parsed template renders a fixed conversation with fixed strings and a
// fixed clock either to text or to an error, and the same way twice.
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_support.hpp"
#include "tokenizer/chat_template.hpp"

namespace tk = ic::tokenizer;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view source(reinterpret_cast<const char*>(data), size);
  auto parsed = tk::chat_template::parse(source);
  if (!parsed) {
    ic::fuzz::check(!parsed.error().empty(), "a refused template says why");
    return 0;
  }
  static const std::vector<tk::chat_message> messages = {
      {"system", "Be brief."}, {"user", "Hi {{ there }}"}, {"assistant", "Hello."}, {"user", "caf\xc3\xa9?"}};
  static const std::map<std::string, std::string> strings = {
      {"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}, {"date_string", "26 Jul 2024"}};
  const tk::local_clock clock = [] {
    std::tm t{};
    t.tm_year = 124;
    t.tm_mon = 6;
    t.tm_mday = 26;
    return t;
  };
  for (bool gen : {false, true}) {
    auto a = parsed.value()->render(messages, strings, gen, clock);
    auto b = parsed.value()->render(messages, strings, gen, clock);
    ic::fuzz::check(a.has_value() == b.has_value(), "render is deterministic");
    if (a) ic::fuzz::check(a.value() == b.value(), "render is deterministic");
    else ic::fuzz::check(!a.error().empty(), "a failed render says why");
  }
  return 0;
}
