// Go-style durations: parsing never crashes, and every accepted value formats to a string
// that parses back to the same value.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz_support.hpp"
#include "policy/duration.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto d = ic::policy::parse_duration(text);
  if (!d) return 0;
  std::string formatted = ic::policy::format_duration(d.value());
  auto back = ic::policy::parse_duration(formatted);
  ic::fuzz::check(back.has_value(), "format_duration output parses");
  ic::fuzz::check(back.value() == d.value(), "parse(format(d)) == d");
  return 0;
}
