// /policy bodies: strict decoding never crashes, and every accepted set survives the
// canonical round trip (decode(encode(s)) == s, encode stable), as policy_json.hpp promises.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz_support.hpp"
#include "policy/policy_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  auto parsed = ic::policy::parse_policy_body(body);
  if (!parsed) return 0;
  std::string canonical = ic::policy::encode_policy_set(parsed.value());
  auto again = ic::policy::decode_policy_set(canonical);
  ic::fuzz::check(again.has_value(), "the canonical encoding of an accepted set decodes");
  ic::fuzz::check(again.value() == parsed.value(), "decode(encode(s)) == s");
  ic::fuzz::check(ic::policy::encode_policy_set(again.value()) == canonical, "encode is stable");
  return 0;
}
