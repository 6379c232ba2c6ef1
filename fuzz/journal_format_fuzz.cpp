// Journal framing (journal/format): record values, record and snapshot keys, snapshot
// header, chunk and footer values. Any bytes decode or fail with a status; what decodes
// re-encodes to the same bytes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_support.hpp"
#include "journal/format.hpp"

namespace fmt = ic::journal::format;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ic::fuzz::cursor in(data, size);
  const std::uint8_t which = in.byte() % 6;
  const std::uint64_t id = in.u64();
  const std::uint64_t index = in.u64();
  std::string_view value = in.rest();
  switch (which) {
    case 0: {
      fmt::record_fields f;
      auto st = fmt::decode_record(id, value, &f);
      if (st.ok()) {
        std::string again;
        fmt::encode_record(id, f.type, f.payload, &again);
        ic::fuzz::check(again == value, "record value round trip");
      }
      break;
    }
    case 1: {
      std::uint64_t seq = 0;
      if (fmt::parse_record_key(value, &seq))
        ic::fuzz::check(fmt::record_key(seq) == value, "record key round trip");
      fmt::snapshot_key k;
      fmt::parse_snapshot_key(value, &k);
      break;
    }
    case 2: {
      std::uint64_t covering = 0;
      if (fmt::decode_snapshot_header(id, value, &covering).ok())
        ic::fuzz::check(fmt::encode_snapshot_header(id, covering) == value, "header round trip");
      break;
    }
    case 3: {
      std::string_view payload;
      if (fmt::decode_snapshot_chunk(id, index, value, &payload).ok()) {
        std::string again;
        fmt::encode_snapshot_chunk(id, index, payload, &again);
        ic::fuzz::check(again == value, "chunk round trip");
      }
      break;
    }
    case 4: {
      fmt::snapshot_footer footer;
      if (fmt::decode_snapshot_footer(id, value, &footer).ok())
        ic::fuzz::check(fmt::encode_snapshot_footer(id, footer) == value, "footer round trip");
      break;
    }
    default: {
      // Checksums and hex over arbitrary bytes.
      (void)fmt::checksum(value.substr(0, value.size() / 2), value.substr(value.size() / 2));
      (void)fmt::hex(value);
      break;
    }
  }
  return 0;
}
