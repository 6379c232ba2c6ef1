// gRPC request translation (proto/translate): random bytes parsed as a LookupRouteRequest,
// CacheStateUpdate or CacheEvent, then translated into the index's plain structs.
#include <cstddef>
#include <cstdint>

#include <google/protobuf/stubs/logging.h>

#include "fuzz/fuzz_support.hpp"
#include "proto/translate.hpp"

namespace v1 = inferencecache::v1alpha1;

// Protobuf logs every invalid UTF-8 string it parses; that is expected here and only slows
// the run down.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ic::fuzz::cursor in(data, size);
  const std::uint8_t which = in.byte() % 3;
  auto bytes = in.rest();
  const int n = static_cast<int>(bytes.size());
  if (which == 0) {
    v1::LookupRouteRequest m;
    if (m.ParseFromArray(bytes.data(), n)) (void)ic::proto::from_proto(m);
  } else if (which == 1) {
    v1::CacheStateUpdate m;
    if (m.ParseFromArray(bytes.data(), n)) {
      auto u = ic::proto::from_proto(m);
      ic::fuzz::check(u.prefixes.size() == static_cast<std::size_t>(m.prefixes_size()),
                      "every PrefixEntry is translated");
    }
  } else {
    v1::CacheEvent m;
    if (m.ParseFromArray(bytes.data(), n)) (void)ic::proto::from_proto(m);
  }
  return 0;
}
