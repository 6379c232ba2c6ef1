// Linear-time glob matching for pool membership patterns (pd-templates.md §2.3).
//
// Syntax: `*` matches any run of bytes (possibly empty), `?` exactly one byte, every other
// byte itself; the pattern is anchored over the whole id and matched bytewise (no
// character classes, no escapes, no regex, hence no ReDoS). A compiled pattern simulates
// the pattern's NFA with a 256-bit state set, so matching an id of n bytes costs O(n) word
// operations whatever the pattern (no backtracking at all); the common shapes `literal` and
// `prefix*` are answered by one comparison.
//
//   auto g = ic::topology::glob::compile("vllm-p-*");   // nullopt when longer than max_pattern_bytes
//   bool yes = g->matches("vllm-p-3");
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ic::topology {

/// A compiled glob pattern (immutable; cheap to match, ~300 bytes + 32 per distinct byte).
class glob {
 public:
  /// Longest accepted pattern after collapsing runs of `*` (the state set has 256 bits).
  static constexpr std::size_t max_pattern_bytes = 255;

  /// Compiles `pattern`; nullopt when it is longer than `max_pattern_bytes`.
  static std::optional<glob> compile(std::string_view pattern);

  /// Returns true when the whole of `id` matches the pattern.
  bool matches(std::string_view id) const;

  /// Returns the pattern as given to `compile`.
  const std::string& pattern() const { return pattern_; }

 private:
  using bits = std::array<std::uint64_t, 4>;

  std::string pattern_;
  /// The literal bytes before the first wildcard: every match starts with them.
  std::string prefix_;
  /// Shape shortcuts: no wildcard at all, or the literal prefix followed by one final `*`.
  enum class shape : std::uint8_t { literal, prefix_star, general } shape_ = shape::general;
  /// Number of pattern positions (after collapsing `**`); the accepting state is `length_`.
  std::size_t length_ = 0;
  /// Positions holding `*`.
  bits star_{};
  /// Positions holding `?` (they match every byte).
  bits any_{};
  /// byte -> index into `literal_` (0 = no literal position holds that byte).
  std::array<std::uint8_t, 256> literal_index_{};
  /// literal_[k]: positions holding the byte whose index is k (k = 0 is all-zero).
  std::vector<bits> literal_;
};

}  // namespace ic::topology
