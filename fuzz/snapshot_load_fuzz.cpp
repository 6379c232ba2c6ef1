// Index snapshot files: the loader refuses corrupt streams with a reason (never a crash),
// however the stream is split into chunks; a stream it accepts describes an index that
// writes back to a snapshot loading into the same canonical state.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_support.hpp"
#include "index/testing/combined_index.hpp"
#include "index/snapshot_codec.hpp"

namespace ix = ic::index;

namespace {

bool load(std::string_view bytes, std::size_t chunk, ix::combined_index& into, std::string* error) {
  auto loader = ix::combined_loader(into);
  for (std::size_t at = 0; at < bytes.size(); at += chunk)
    if (!loader.feed(bytes.substr(at, chunk), error)) return false;
  return loader.finish(error);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ic::fuzz::cursor in(data, size);
  const std::size_t chunk = 1 + in.byte() % 64;
  std::string_view bytes = in.rest();
  ix::combined_index idx;
  std::string error;
  if (!load(bytes, chunk, idx, &error)) {
    ic::fuzz::check(!error.empty(), "a refused snapshot says why");
    return 0;
  }
  std::string written;
  bool ok = ix::write_snapshot(
      idx,
      [&](std::string_view c) {
        written.append(c);
        return true;
      },
      4096);  // small chunks: the default 1 MiB buffer would dominate each run
  ic::fuzz::check(ok, "write_snapshot of a loaded index succeeds");
  ix::combined_index again;
  ic::fuzz::check(load(written, written.size() + 1, again, &error), "a written snapshot loads");
  ic::fuzz::check(again.canonical_dump() == idx.canonical_dump(), "snapshot round trip is identical");
  return 0;
}
