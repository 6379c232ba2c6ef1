// Glob matcher: syntax of pd-templates.md §2.3 and its linear cost on hostile patterns.
#include "topology/glob.hpp"

#include <string>

#include <gtest/gtest.h>

namespace ic::topology {
namespace {

bool match(std::string_view pattern, std::string_view id) { return glob::compile(pattern)->matches(id); }

TEST(Glob, StarMatchesAnyRunIncludingEmpty) {
  EXPECT_TRUE(match("p-*", "p-"));
  EXPECT_TRUE(match("p-*", "p-9"));
  EXPECT_TRUE(match("p-*", "p-10-x"));
  EXPECT_TRUE(match("*", ""));
  EXPECT_TRUE(match("*-d-*", "vllm-d-3"));
  EXPECT_FALSE(match("p-*", "d-0"));
  EXPECT_FALSE(match("p-*", "xp-0"));
}

TEST(Glob, QuestionMarkMatchesExactlyOneByte) {
  EXPECT_TRUE(match("p-?", "p-1"));
  EXPECT_FALSE(match("p-?", "p-"));
  EXPECT_FALSE(match("p-?", "p-12"));
  EXPECT_TRUE(match("??", "\xff\x01"));
}

TEST(Glob, AnchoredOverTheWholeIdAndBytewise) {
  EXPECT_FALSE(match("p-0", "p-01"));
  EXPECT_FALSE(match("p-0", "xp-0"));
  EXPECT_TRUE(match("p-0", "p-0"));
  EXPECT_FALSE(match("P-0", "p-0"));
  EXPECT_TRUE(match("a*b*c", "aXXbYYc"));
  EXPECT_FALSE(match("a*b*c", "aXXcYYb"));
  EXPECT_TRUE(match("[x]", "[x]"));  // no character classes: brackets are literal
  EXPECT_FALSE(match("[x]", "x"));
}

TEST(Glob, RunsOfStarsCollapseAndLongPatternsAreRefused) {
  EXPECT_TRUE(match("a***b", "ab"));
  EXPECT_TRUE(glob::compile(std::string(255, 'a')).has_value());
  EXPECT_FALSE(glob::compile(std::string(256, 'a')).has_value());
  EXPECT_TRUE(glob::compile(std::string(254, 'a') + "***").has_value());  // collapses to 255
}

TEST(Glob, HostilePatternStaysCorrectWithoutBacktracking) {
  // a*a*a*...*b against aaaa...a: exponential for naive backtracking, linear here.
  std::string pattern;
  for (int i = 0; i < 100; ++i) pattern += "a*";
  pattern += "b";
  const std::string id(100000, 'a');
  EXPECT_FALSE(match(pattern, id));
  EXPECT_TRUE(match(pattern, id + "b"));
}

}  // namespace
}  // namespace ic::topology
