// Content fingerprint of token blocks: the contract's cache-key construction.
//
// A prompt's token ids are cut into full blocks of `block_size` tokens (a trailing partial
// block is dropped). Each block gets a content hash (XXH3-64, seed 1337, over the tokens as
// little-endian u32), and a rolling positional prefix hash chains the blocks together:
//
//   prefix[0] = content[0]                                     (no parent)
//   prefix[0] = XXH3(le64(parent) || le64(content[0]))        (explicit parent)
//   prefix[i] = XXH3(le64(prefix[i-1]) || le64(content[i]))   (i >= 1)
//
// On the wire every hash is 8 bytes big-endian. See spec/lookup.md §5; the golden vectors
// in shared/fingerprint/golden_vectors.json pin the construction byte for byte.
//
//   auto chain = ic::index::fingerprint_chain(tokens.data(), tokens.size(), 16);
//   std::string key = ic::index::to_wire(chain.back());
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ic::index {

/// The seed every fingerprint hash uses.
inline constexpr std::uint64_t fingerprint_seed = 1337;

/// The default engine KV block size in tokens (`--engine-block-size`).
inline constexpr int default_block_size = 16;

/// Returns XXH3-64(seed 1337) over `n` tokens encoded as little-endian u32.
std::uint64_t content_hash(const std::uint32_t* tokens, std::size_t n);

/// Returns XXH3-64(seed 1337) over le64(parent) || le64(content): one chain link.
std::uint64_t chain_link(std::uint64_t parent, std::uint64_t content);

/// Returns the content hash of every full block (partial tail dropped). Empty when
/// `block_size <= 0` or there is no full block.
std::vector<std::uint64_t> block_content_hashes(const std::uint32_t* tokens, std::size_t n,
                                                int block_size);

/// Returns the positional prefix hash of every full block, optionally chained onto an
/// explicit `parent`. Empty when `block_size <= 0` or there is no full block.
std::vector<std::uint64_t> fingerprint_chain(const std::uint32_t* tokens, std::size_t n,
                                             int block_size,
                                             std::optional<std::uint64_t> parent = std::nullopt);

/// Returns the 8-byte big-endian wire form of `h`.
std::string to_wire(std::uint64_t h);

/// Parses an 8-byte big-endian wire hash; nullopt when `bytes` is not exactly 8 bytes.
std::optional<std::uint64_t> from_wire(std::string_view bytes);

}  // namespace ic::index
