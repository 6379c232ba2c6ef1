// The status vocabulary: result<T> and status hold a value / success or one error line.
#include "policy/result.hpp"

#include <gtest/gtest.h>

#include <string>

namespace ic::policy {
namespace {

status check_positive(int v) {
  if (v <= 0) return error{"value must be positive, got " + std::to_string(v)};
  return {};
}

result<int> twice_positive(int v) {
  if (auto s = check_positive(v); !s) return error{s.error()};
  return 2 * v;
}

TEST(Status, DefaultIsSuccessAndAnErrorCarriesItsLine) {
  EXPECT_TRUE(check_positive(3).ok());
  EXPECT_TRUE(static_cast<bool>(check_positive(3)));
  const status bad = check_positive(-1);
  EXPECT_FALSE(bad.ok());
  EXPECT_FALSE(static_cast<bool>(bad));
  EXPECT_EQ(bad.error(), "value must be positive, got -1");
}

TEST(Result, HoldsTheValueOrTheErrorPassedUpFromAStatus) {
  const auto good = twice_positive(4);
  ASSERT_TRUE(good.has_value());
  EXPECT_EQ(*good, 8);
  const auto bad = twice_positive(0);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "value must be positive, got 0");
}

}  // namespace
}  // namespace ic::policy
