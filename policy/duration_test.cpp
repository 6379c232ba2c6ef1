#include "policy/duration.hpp"

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

#include <gtest/gtest.h>

namespace ic::policy {
namespace {

using std::chrono::nanoseconds;

constexpr std::int64_t ns = 1;
constexpr std::int64_t us = 1'000 * ns;
constexpr std::int64_t ms = 1'000 * us;
constexpr std::int64_t sec = 1'000 * ms;
constexpr std::int64_t min = 60 * sec;
constexpr std::int64_t hour = 60 * min;

struct valid_case {
  const char* text;
  std::int64_t want_ns;
};

TEST(ParseDuration, AcceptsGoGrammar) {
  const valid_case cases[] = {
      // The forms the command line documents (spec/extensions.md §2).
      {"500ms", 500 * ms},
      {"90s", 90 * sec},
      {"30m", 30 * min},
      {"1000h", 1000 * hour},
      {"1h30m", hour + 30 * min},
      {"1m", min},
      // Zero: only the bare "0" may omit a unit.
      {"0", 0},
      {"+0", 0},
      {"-0", 0},
      {"0s", 0},
      // Signs, fractions, every unit (Go's own table).
      {"5s", 5 * sec},
      {"-5s", -5 * sec},
      {"+5s", 5 * sec},
      {"5.0s", 5 * sec},
      {"5.6s", 5 * sec + 600 * ms},
      {"5.s", 5 * sec},
      {".5s", 500 * ms},
      {"1.004s", sec + 4 * ms},
      {"1.0040s", sec + 4 * ms},
      {"100.00100s", 100 * sec + 1 * ms},
      {"10ns", 10 * ns},
      {"11us", 11 * us},
      {"12\xc2\xb5s", 12 * us},  // U+00B5 micro sign
      {"12\xce\xbcs", 12 * us},  // U+03BC Greek mu
      {"13ms", 13 * ms},
      {"16h", 16 * hour},
      {"10.5s4m", 4 * min + 10 * sec + 500 * ms},
      {"-2m3.4s", -(2 * min + 3 * sec + 400 * ms)},
      {"1h2m3s4ms5us6ns", hour + 2 * min + 3 * sec + 4 * ms + 5 * us + 6 * ns},
      {"39h9m14.425s", 39 * hour + 9 * min + 14 * sec + 425 * ms},
      {"52763797000ns", 52763797000 * ns},
      {"0.3333333333333333333h", 20 * min},
      {"9007199254740993ns", (std::int64_t{1} << 53) + 1},
      {"0.100000000000000000000h", 6 * min},
      {"0.830103483285477580700h", 49 * min + 48 * sec + 372539827 * ns},
      // Limits of a signed 64-bit nanosecond count.
      {"9223372036854775807ns", std::numeric_limits<std::int64_t>::max()},
      {"9223372036854775.807us", std::numeric_limits<std::int64_t>::max()},
      {"9223372036s854ms775us807ns", std::numeric_limits<std::int64_t>::max()},
      {"-9223372036854775808ns", std::numeric_limits<std::int64_t>::min()},
      {"-9223372036854775.808us", std::numeric_limits<std::int64_t>::min()},
  };
  for (const auto& c : cases) {
    const auto got = parse_duration(c.text);
    ASSERT_TRUE(got.has_value()) << c.text << ": " << got.error();
    EXPECT_EQ(got->count(), c.want_ns) << c.text;
  }
}

struct invalid_case {
  const char* text;
  const char* want_error;
};

TEST(ParseDuration, RefusesMalformedInput) {
  const invalid_case cases[] = {
      {"", "invalid duration \"\""},
      {"3", "missing unit in duration \"3\""},  // a bare number other than 0
      {"100", "missing unit in duration \"100\""},
      {"1.5", "missing unit in duration \"1.5\""},
      {"1h30", "missing unit in duration \"1h30\""},
      {"-", "invalid duration \"-\""},
      {"s", "invalid duration \"s\""},
      {".", "invalid duration \".\""},
      {"-.", "invalid duration \"-.\""},
      {".s", "invalid duration \".s\""},
      {"+.s", "invalid duration \"+.s\""},
      {"1d", "unknown unit \"d\" in duration \"1d\""},
      {"1 h", "unknown unit \" h\" in duration \"1 h\""},
      {"1H", "unknown unit \"H\" in duration \"1H\""},
      {"1h ", "unknown unit \"h \" in duration \"1h \""},
      {"--1s", "invalid duration \"--1s\""},
      {"\x85\x85", "invalid duration \"\\x85\\x85\""},
      {"9223372036854775808ns", "invalid duration \"9223372036854775808ns\""},
      {"9223372036854775.808us", "invalid duration \"9223372036854775.808us\""},
      {"9223372036854ms775us808ns", "invalid duration \"9223372036854ms775us808ns\""},
      {"-9223372036854775809ns", "invalid duration \"-9223372036854775809ns\""},
      {"2562048h", "invalid duration \"2562048h\""},
      {"99999999999999999999s", "invalid duration \"99999999999999999999s\""},
  };
  for (const auto& c : cases) {
    const auto got = parse_duration(c.text);
    ASSERT_FALSE(got.has_value()) << c.text << " parsed as " << got->count();
    EXPECT_EQ(got.error(), c.want_error) << c.text;
  }
}

TEST(FormatDuration, MatchesGoString) {
  const valid_case cases[] = {
      {"0s", 0},
      {"1ns", 1 * ns},
      {"1.1\xc2\xb5s", 1100 * ns},
      {"2.2ms", 2200 * us},
      {"500ms", 500 * ms},
      {"3.3s", 3300 * ms},
      {"4m5s", 4 * min + 5 * sec},
      {"4m5.001s", 4 * min + 5001 * ms},
      {"5h6m7.001s", 5 * hour + 6 * min + 7001 * ms},
      {"8m0.000000001s", 8 * min + 1 * ns},
      {"30m0s", 30 * min},
      {"1h30m0s", hour + 30 * min},
      {"1000h0m0s", 1000 * hour},
      {"-1.5s", -1500 * ms},
      {"2562047h47m16.854775807s", std::numeric_limits<std::int64_t>::max()},
      {"-2562047h47m16.854775808s", std::numeric_limits<std::int64_t>::min()},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(format_duration(nanoseconds{c.want_ns}), c.text);
    // Every formatted value parses back to itself.
    const auto back = parse_duration(c.text);
    ASSERT_TRUE(back.has_value()) << c.text;
    EXPECT_EQ(back->count(), c.want_ns) << c.text;
  }
}

}  // namespace
}  // namespace ic::policy
