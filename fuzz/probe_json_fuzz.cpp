// /probe bodies: strict decoding never crashes; an accepted body names its three fields.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_support.hpp"
#include "server/probe_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string body(reinterpret_cast<const char*>(data), size);
  auto parsed = ic::server::parse_probe_body(body);
  if (!parsed.ok()) {
    ic::fuzz::check(!parsed.error().empty(), "a refusal says why");
    return 0;
  }
  ic::fuzz::check(size <= ic::server::probe_max_body_bytes, "no body over the limit is accepted");
  ic::fuzz::check(!parsed.value().backend.empty() && !parsed.value().model.empty() &&
                      !parsed.value().hash_scheme.empty(),
                  "an accepted probe names backend, model and hashScheme");
  return 0;
}
