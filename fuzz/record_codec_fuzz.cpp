// Journal records (the record codec, proto/record_codec.hpp): any kind and bytes decode to a record or to
// an error with a reason; never a crash. A decoded policy record's payload is kept as is.
#include <cstddef>
#include <cstdint>
#include <string>

#include <google/protobuf/stubs/logging.h>

#include "proto/record_codec.hpp"
#include "fuzz/fuzz_support.hpp"

// Protobuf logs every invalid UTF-8 string it parses; that is expected here and only slows
// the run down.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ic::fuzz::cursor in(data, size);
  // Mostly the six real kinds (1..4, 16, 17), sometimes any value.
  constexpr std::uint32_t kinds[] = {1, 2, 3, 4, 16, 17};
  std::uint8_t selector = in.byte();
  std::uint32_t kind = selector < 240 ? kinds[selector % 6u] : in.u32();
  std::string error;
  auto rec = ic::proto::decode_record(kind, in.rest(), &error);
  if (!rec) {
    ic::fuzz::check(!error.empty(), "a refused record says why");
    return 0;
  }
  // Re-encoding a decoded sweep or policy record gives a record that decodes the same way.
  if (kind == static_cast<std::uint32_t>(ic::proto::record_kind::sweep)) {
    auto bytes = ic::proto::encode_record(ic::proto::record_kind::sweep, rec->applied_at_us, "");
    auto again = ic::proto::decode_record(kind, bytes, &error);
    ic::fuzz::check(again && again->applied_at_us == rec->applied_at_us, "sweep round trip");
  }
  return 0;
}
