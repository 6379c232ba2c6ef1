#include "server/tls_credentials.hpp"

#include <gtest/gtest.h>

#include "server/tls_test_support.hpp"
#include "tests/support/server_process.hpp"

namespace ic::server {
namespace {

class TlsKeypair : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::have_openssl()) GTEST_SKIP() << "the openssl tool is not installed";
    dir_ = test::make_temp_dir("ic_tls_unit");
    ASSERT_TRUE(testing::make_ca(dir_, "ca"));
    ASSERT_TRUE(testing::make_server_cert(dir_, "ca", "a"));
    ASSERT_TRUE(testing::make_server_cert(dir_, "ca", "b"));
  }
  void TearDown() override {
    if (!dir_.empty()) test::remove_tree(dir_);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  std::string dir_;
};

TEST_F(TlsKeypair, LoadsAMatchingPair) {
  auto r = load_tls_keypair(path("a.crt"), path("a.key"));
  ASSERT_TRUE(std::holds_alternative<tls_keypair>(r)) << std::get<std::string>(r);
  EXPECT_EQ(std::get<tls_keypair>(r).cert_chain_pem, testing::read_text(path("a.crt")));
}

TEST_F(TlsKeypair, RefusesAKeyOfAnotherCertificate) {
  auto r = load_tls_keypair(path("a.crt"), path("b.key"));
  ASSERT_TRUE(std::holds_alternative<std::string>(r));
  EXPECT_NE(std::get<std::string>(r).find("does not match"), std::string::npos);
}

TEST_F(TlsKeypair, RefusesMissingAndGarbageFiles) {
  EXPECT_TRUE(std::holds_alternative<std::string>(load_tls_keypair(path("nope.crt"), path("a.key"))));
  EXPECT_TRUE(std::holds_alternative<std::string>(load_tls_keypair(path("a.crt"), path("nope.key"))));
  ASSERT_TRUE(testing::replace_file(path("junk.pem"), "not a pem\n"));
  EXPECT_TRUE(std::holds_alternative<std::string>(load_tls_keypair(path("junk.pem"), path("a.key"))));
  EXPECT_TRUE(std::holds_alternative<std::string>(load_tls_keypair(path("a.crt"), path("junk.pem"))));
}

TEST_F(TlsKeypair, CreatesCredentialsOnlyForAGoodPair) {
  std::string error;
  auto good = reloading_tls::create(path("a.crt"), path("a.key"), &error);
  ASSERT_NE(good, nullptr) << error;
  EXPECT_NE(good->credentials(), nullptr);
  good->stop();
  good->stop();  // idempotent

  auto bad = reloading_tls::create(path("a.crt"), path("b.key"), &error);
  EXPECT_EQ(bad, nullptr);
  EXPECT_NE(error.find("does not match"), std::string::npos);
}

}  // namespace
}  // namespace ic::server
