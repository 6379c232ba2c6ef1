#include "index/fingerprint.hpp"

#include <cstring>

#include <xxhash.h>

namespace ic::index {
namespace {

void store_le32(unsigned char* out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}

void store_le64(unsigned char* out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}

constexpr bool host_is_little_endian() {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  return true;
#else
  return false;
#endif
}

}  // namespace

std::uint64_t content_hash(const std::uint32_t* tokens, std::size_t n) {
  if constexpr (host_is_little_endian()) {
    return XXH3_64bits_withSeed(tokens, n * sizeof(std::uint32_t), fingerprint_seed);
  } else {
    std::vector<unsigned char> buf(n * 4);
    for (std::size_t i = 0; i < n; ++i) store_le32(buf.data() + 4 * i, tokens[i]);
    return XXH3_64bits_withSeed(buf.data(), buf.size(), fingerprint_seed);
  }
}

std::uint64_t chain_link(std::uint64_t parent, std::uint64_t content) {
  unsigned char buf[16];
  store_le64(buf, parent);
  store_le64(buf + 8, content);
  return XXH3_64bits_withSeed(buf, sizeof buf, fingerprint_seed);
}

std::vector<std::uint64_t> block_content_hashes(const std::uint32_t* tokens, std::size_t n,
                                                int block_size) {
  std::vector<std::uint64_t> out;
  if (block_size <= 0) return out;
  const auto bs = static_cast<std::size_t>(block_size);
  out.reserve(n / bs);
  for (std::size_t off = 0; off + bs <= n; off += bs) out.push_back(content_hash(tokens + off, bs));
  return out;
}

std::vector<std::uint64_t> fingerprint_chain(const std::uint32_t* tokens, std::size_t n,
                                             int block_size,
                                             std::optional<std::uint64_t> parent) {
  std::vector<std::uint64_t> out = block_content_hashes(tokens, n, block_size);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (i > 0) {
      out[i] = chain_link(out[i - 1], out[i]);
    } else if (parent) {
      out[i] = chain_link(*parent, out[i]);
    }
  }
  return out;
}

std::string to_wire(std::uint64_t h) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(h >> (8 * (7 - i)));
  return out;
}

std::optional<std::uint64_t> from_wire(std::string_view bytes) {
  if (bytes.size() != 8) return std::nullopt;
  std::uint64_t h = 0;
  for (unsigned char c : bytes) h = (h << 8) | c;
  return h;
}

}  // namespace ic::index
