// /topology bodies (topology/topology_json): strict decoding never crashes, and every accepted
// set survives the canonical round trip: decode(encode(s)) == s and encode is stable.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_support.hpp"
#include "topology/topology_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  auto parsed = ic::topology::parse_topology_body(body);
  if (!parsed) {
    ic::fuzz::check(!parsed.error().empty(), "a refused body says why");
    return 0;
  }
  const std::string canonical = ic::topology::encode_topology_set(parsed.value());
  auto again = ic::topology::decode_topology_set(canonical);
  ic::fuzz::check(again.has_value(), "the canonical encoding of an accepted set decodes");
  ic::fuzz::check(again.value() == parsed.value(), "decode(encode(s)) == s");
  ic::fuzz::check(ic::topology::encode_topology_set(again.value()) == canonical, "encode is stable");
  return 0;
}
