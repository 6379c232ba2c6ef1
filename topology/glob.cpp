#include "topology/glob.hpp"

namespace ic::topology {
namespace {

using bits = std::array<std::uint64_t, 4>;

void set_bit(bits& b, std::size_t i) { b[i / 64] |= std::uint64_t{1} << (i % 64); }
bool test_bit(const bits& b, std::size_t i) { return (b[i / 64] >> (i % 64)) & 1u; }

bits shift_left_one(const bits& b) {
  bits out{};
  std::uint64_t carry = 0;
  for (std::size_t w = 0; w < b.size(); ++w) {
    out[w] = (b[w] << 1) | carry;
    carry = b[w] >> 63;
  }
  return out;
}

bits and_bits(const bits& a, const bits& b) {
  return {a[0] & b[0], a[1] & b[1], a[2] & b[2], a[3] & b[3]};
}

bits or_bits(const bits& a, const bits& b) {
  return {a[0] | b[0], a[1] | b[1], a[2] | b[2], a[3] | b[3]};
}

bool none(const bits& b) { return (b[0] | b[1] | b[2] | b[3]) == 0; }

}  // namespace

std::optional<glob> glob::compile(std::string_view pattern) {
  std::string collapsed;
  for (char c : pattern) {
    if (c == '*' && !collapsed.empty() && collapsed.back() == '*') continue;
    collapsed += c;
  }
  if (collapsed.size() > max_pattern_bytes) return std::nullopt;
  glob g;
  g.pattern_ = std::string(pattern);
  const auto wild = collapsed.find_first_of("*?");
  g.prefix_ = collapsed.substr(0, wild);
  if (wild == std::string::npos) {
    g.shape_ = shape::literal;
  } else if (wild + 1 == collapsed.size() && collapsed[wild] == '*') {
    g.shape_ = shape::prefix_star;
  }
  g.length_ = collapsed.size();
  g.literal_.emplace_back();  // index 0: no position
  for (std::size_t i = 0; i < collapsed.size(); ++i) {
    const auto c = static_cast<unsigned char>(collapsed[i]);
    if (c == '*') {
      set_bit(g.star_, i);
    } else if (c == '?') {
      set_bit(g.any_, i);
    } else {
      if (g.literal_index_[c] == 0) {
        g.literal_index_[c] = static_cast<std::uint8_t>(g.literal_.size());
        g.literal_.emplace_back();
      }
      set_bit(g.literal_[g.literal_index_[c]], i);
    }
  }
  return g;
}

bool glob::matches(std::string_view id) const {
  // Byte loop rather than memcmp: prefixes are a few bytes and this runs per stats row.
  if (id.size() < prefix_.size()) return false;
  for (std::size_t i = 0; i < prefix_.size(); ++i) {
    if (id[i] != prefix_[i]) return false;
  }
  if (shape_ == shape::literal) return id.size() == prefix_.size();
  if (shape_ == shape::prefix_star) return true;
  // State i = "the first i pattern positions matched". A `*` at i lets state i stay on any
  // byte and also enter i + 1 without consuming (closure); runs of `*` were collapsed, so
  // one closure step suffices.
  bits state{};
  set_bit(state, 0);
  state = or_bits(state, shift_left_one(and_bits(state, star_)));
  for (char ch : id) {
    const auto c = static_cast<unsigned char>(ch);
    const bits step = or_bits(any_, literal_[literal_index_[c]]);
    state = or_bits(shift_left_one(and_bits(state, step)), and_bits(state, star_));
    state = or_bits(state, shift_left_one(and_bits(state, star_)));
    if (none(state)) return false;
  }
  return test_bit(state, length_);
}

}  // namespace ic::topology
