// gRPC TLS against the real binary (spec/operations.md §3.5): TLS-only listener, a client that
// trusts the CA gets SERVING, plaintext fails, the certificate is re-read when its files
// change, a bad replacement keeps the last good certificate, and a bad pair at startup exits 1.
#include <sstream>
#include <thread>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "grpc/health/v1/health.grpc.pb.h"
#include "server/tls_test_support.hpp"
#include "tests/support/http_client.hpp"
#include "tests/support/server_process.hpp"
#include "tests/support/test_paths.hpp"

namespace ic {
namespace {

using namespace std::chrono_literals;
namespace tls = server::testing;

/// Health/Check on a fresh channel; true when it answered SERVING within `timeout`.
bool health_serving(const std::string& target, std::shared_ptr<grpc::ChannelCredentials> creds,
                    std::chrono::milliseconds timeout = 3s) {
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // never reuse another test's connection
  auto channel = grpc::CreateCustomChannel(target, creds, args);
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  grpc::health::v1::HealthCheckRequest req;
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status st = stub->Check(&ctx, req, &resp);
  return st.ok() && resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

std::shared_ptr<grpc::ChannelCredentials> trusting(const std::string& ca_pem) {
  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = ca_pem;
  return grpc::SslCredentials(opts);
}

/// Polls `ok` every 200 ms until it holds or `limit` passed.
template <class F>
bool eventually(F ok, std::chrono::milliseconds limit = 15s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (ok()) return true;
    std::this_thread::sleep_for(200ms);
  }
  return ok();
}

class GrpcTls : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!tls::have_openssl()) GTEST_SKIP() << "the openssl tool is not installed";
    dir_ = test::make_temp_dir("ic_tls");
    ASSERT_TRUE(tls::make_ca(dir_, "ca1"));
    ASSERT_TRUE(tls::make_ca(dir_, "ca2"));
    ASSERT_TRUE(tls::make_server_cert(dir_, "ca1", "server1"));
    ASSERT_TRUE(tls::make_server_cert(dir_, "ca2", "server2"));
    ASSERT_TRUE(tls::replace_file(cert_file(), tls::read_text(path("server1.crt"))));
    ASSERT_TRUE(tls::replace_file(key_file(), tls::read_text(path("server1.key"))));
  }
  void TearDown() override {
    server_.reset();
    if (!dir_.empty()) test::remove_tree(dir_);
  }

  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string cert_file() const { return path("tls.crt"); }
  std::string key_file() const { return path("tls.key"); }

  std::vector<std::string> args(const std::string& cert, const std::string& key) const {
    return {"--grpc-bind-address=127.0.0.1:0", "--http-bind-address=127.0.0.1:0",
            "--snapshot-bind-address=127.0.0.1:0", "--data-dir=" + dir_ + "/data",
            "--insecure-disable-auth", "--tls-cert-file=" + cert, "--tls-key-file=" + key};
  }

  void start() {
    server_ = test::server_process::start(ic::test::executable("inferencecache-server"),
                                          args(cert_file(), key_file()));
    ASSERT_NE(server_, nullptr);
    ASSERT_TRUE(server_->wait_ready(30s)) << server_->logs();
  }

  std::string dir_;
  std::unique_ptr<test::server_process> server_;
};

TEST_F(GrpcTls, ServesHealthToClientsTrustingTheCaAndRefusesPlaintext) {
  start();
  const std::string ca1 = tls::read_text(path("ca1.crt"));
  EXPECT_TRUE(health_serving(server_->grpc_target(), trusting(ca1)));
  EXPECT_FALSE(health_serving(server_->grpc_target(), grpc::InsecureChannelCredentials()));
  EXPECT_FALSE(health_serving(server_->grpc_target(),
                              trusting(tls::read_text(path("ca2.crt")))));

  auto metrics = test::http_call(server_->http_port(), "GET", "/metrics");
  EXPECT_NE(metrics.body.find("inferencecache_server_grpc_tls_enabled 1"), std::string::npos);
  EXPECT_NE(server_->logs().find("\"grpc_tls\":\"true\""), std::string::npos) << server_->logs();
  EXPECT_EQ(server_->terminate(), 0);
  // Failed handshakes are logged by gRPC core; they still come out as JSON lines.
  std::istringstream lines(server_->logs());
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("msg")) << line;
  }
}

TEST_F(GrpcTls, ReloadsTheCertificateWhenItsFilesChange) {
  start();
  const std::string ca1 = tls::read_text(path("ca1.crt"));
  const std::string ca2 = tls::read_text(path("ca2.crt"));
  ASSERT_TRUE(health_serving(server_->grpc_target(), trusting(ca1)));

  // A replacement that does not load is reported and the last good certificate stays.
  ASSERT_TRUE(tls::replace_file(cert_file(), "not a certificate\n"));
  ASSERT_TRUE(server_->wait_for_log("\"grpc_tls_reload\"", 15s)) << server_->logs();
  EXPECT_TRUE(health_serving(server_->grpc_target(), trusting(ca1)));

  // A good new pair from another CA takes over.
  ASSERT_TRUE(tls::replace_file(key_file(), tls::read_text(path("server2.key"))));
  ASSERT_TRUE(tls::replace_file(cert_file(), tls::read_text(path("server2.crt"))));
  EXPECT_TRUE(eventually([&] { return health_serving(server_->grpc_target(), trusting(ca2), 1s); }))
      << server_->logs();
  EXPECT_TRUE(server_->wait_for_log("\"grpc_tls_reloaded\"", 1s));
  EXPECT_FALSE(health_serving(server_->grpc_target(), trusting(ca1)));
  EXPECT_EQ(server_->terminate(), 0);
}

TEST_F(GrpcTls, NegotiatesTls12AndRefusesOlderVersions) {
  start();
  const std::string connect = "openssl s_client -connect " + server_->grpc_target() +
                              " -alpn h2 -CAfile '" + path("ca1.crt") + "' </dev/null";
  EXPECT_TRUE(tls::run_quiet(connect + " -tls1_2"));
  EXPECT_FALSE(tls::run_quiet(connect + " -tls1_1 -cipher 'DEFAULT:@SECLEVEL=0'"));
}

TEST_F(GrpcTls, ExitsOneWhenTheKeyPairCannotBeLoaded) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {path("server1.crt"), path("server2.key")},  // key of another certificate
      {path("missing.crt"), path("server1.key")},  // unreadable certificate
      {path("server1.crt"), path("ca1.crt")},      // not a key
  };
  for (const auto& [cert, key] : cases) {
    SCOPED_TRACE(cert + " + " + key);
    auto [code, out] =
        test::run_to_exit(ic::test::executable("inferencecache-server"), args(cert, key));
    EXPECT_EQ(code, 1) << out;
    EXPECT_NE(out.find("grpc_tls_load"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace ic
