#include "server/admin_auth.hpp"

#include <gtest/gtest.h>

namespace ic::server {
namespace {

TEST(AdminAuth, AcceptsOnlyTheBearerToken) {
  admin_auth auth("s3cret", false);
  EXPECT_EQ(auth.check("Bearer s3cret"), auth_result::ok);
  EXPECT_EQ(auth.check("bearer   s3cret  "), auth_result::ok);
  EXPECT_EQ(auth.check("BEARER s3cret"), auth_result::ok);
  EXPECT_EQ(auth.check(""), auth_result::unauth);
  EXPECT_EQ(auth.check("Bearer"), auth_result::unauth);
  EXPECT_EQ(auth.check("Bearer "), auth_result::unauth);
  EXPECT_EQ(auth.check("Bearer s3cre"), auth_result::unauth);
  EXPECT_EQ(auth.check("Bearer s3cret2"), auth_result::unauth);
  EXPECT_EQ(auth.check("Basic s3cret"), auth_result::unauth);
  EXPECT_EQ(auth.check("Bearers3cret"), auth_result::unauth);
}

TEST(AdminAuth, DisabledLetsEverythingThrough) {
  admin_auth auth("", true);
  EXPECT_EQ(auth.check(""), auth_result::ok);
  EXPECT_EQ(auth.check("Bearer whatever"), auth_result::ok);
}

TEST(AdminAuth, ConstantTimeEqualComparesContentAndLength) {
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abd", "abc"));
  EXPECT_FALSE(constant_time_equal("ab", "abc"));
  EXPECT_FALSE(constant_time_equal("abcd", "abc"));
  EXPECT_TRUE(constant_time_equal("", ""));
}

}  // namespace
}  // namespace ic::server
