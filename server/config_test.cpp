#include "server/config.hpp"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ic::server {
namespace {

std::variant<server_config, early_exit> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "inferencecache-server");
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

int exit_code(const std::variant<server_config, early_exit>& r) {
  auto* e = std::get_if<early_exit>(&r);
  return e ? e->code : -1;
}

std::string exit_message(const std::variant<server_config, early_exit>& r) {
  auto* e = std::get_if<early_exit>(&r);
  return e ? e->message : "";
}

TEST(ServerConfig, DefaultsMatchTheSpecWithInsecureAuth) {
  auto r = parse({"--insecure-disable-auth"});
  ASSERT_TRUE(std::holds_alternative<server_config>(r)) << exit_message(r);
  const auto& c = std::get<server_config>(r);
  EXPECT_EQ(c.grpc_bind_address, ":9090");
  EXPECT_EQ(c.http_bind_address, ":8080");
  EXPECT_EQ(c.snapshot_bind_address, ":8081");
  EXPECT_TRUE(c.insecure_disable_auth);
  EXPECT_EQ(c.engine_block_size, 16);
  EXPECT_EQ(c.format, log_format::json);
  EXPECT_EQ(c.log_level, "info");
  EXPECT_EQ(c.data_dir, "./data");
  EXPECT_FALSE(c.journal_fsync);
  EXPECT_EQ(c.max_index_entries, 1000000);
  EXPECT_EQ(c.default_ttl, std::chrono::minutes(30));
  EXPECT_EQ(c.sweep_interval, std::chrono::minutes(1));
  EXPECT_EQ(c.metrics_stream_interval, std::chrono::seconds(5));
  EXPECT_EQ(c.max_recv_message_bytes, 16777216);
  EXPECT_EQ(c.snapshot_interval, std::chrono::minutes(10));
  EXPECT_EQ(c.snapshot_every_records, 1000000u);
}

TEST(ServerConfig, SnapshotFlagsAcceptZeroAsNever) {
  auto r = parse({"--insecure-disable-auth", "--snapshot-interval=0", "--snapshot-every-records=0"});
  ASSERT_TRUE(std::holds_alternative<server_config>(r)) << exit_message(r);
  EXPECT_EQ(std::get<server_config>(r).snapshot_interval, std::chrono::nanoseconds::zero());
  EXPECT_EQ(std::get<server_config>(r).snapshot_every_records, 0u);
  EXPECT_EQ(exit_code(parse({"--insecure-disable-auth", "--snapshot-interval=-1m"})), 2);
  EXPECT_EQ(exit_code(parse({"--insecure-disable-auth", "--snapshot-every-records=-5"})), 2);
}

TEST(ServerConfig, HttpBoundsDefaultAndRefuseNonPositiveValues) {
  auto d = parse({"--insecure-disable-auth"});
  ASSERT_TRUE(std::holds_alternative<server_config>(d)) << exit_message(d);
  EXPECT_EQ(std::get<server_config>(d).http_idle_timeout, std::chrono::seconds(10));
  EXPECT_EQ(std::get<server_config>(d).http_max_connections, 1024);
  auto r = parse({"--insecure-disable-auth", "--http-idle-timeout=1500ms", "--http-max-connections=8"});
  ASSERT_TRUE(std::holds_alternative<server_config>(r)) << exit_message(r);
  EXPECT_EQ(std::get<server_config>(r).http_idle_timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(std::get<server_config>(r).http_max_connections, 8);
  for (const char* bad : {"--http-idle-timeout=0", "--http-idle-timeout=-1s", "--http-idle-timeout=10",
                          "--http-max-connections=0", "--http-max-connections=-3"}) {
    auto e = parse({"--insecure-disable-auth", bad});
    EXPECT_EQ(exit_code(e), 2) << bad;
    EXPECT_NE(exit_message(e).find(std::string(bad).substr(0, std::string(bad).find('='))),
              std::string::npos)
        << exit_message(e);
  }
}

TEST(ServerConfig, NeitherAuthFlagExitsTwoWithOneLine) {
  auto r = parse({});
  EXPECT_EQ(exit_code(r), 2);
  EXPECT_NE(exit_message(r).find("--insecure-disable-auth"), std::string::npos);
  EXPECT_EQ(exit_message(r).find('\n'), std::string::npos);
}

TEST(ServerConfig, BothAuthFlagsExitTwo) {
  char path[] = "/tmp/ic_token_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ::write(fd, "s3cret\n", 7);
  ::close(fd);
  EXPECT_EQ(exit_code(parse({"--insecure-disable-auth", std::string("--admin-token-file=") + path})), 2);
  auto ok = parse({std::string("--admin-token-file=") + path});
  ASSERT_TRUE(std::holds_alternative<server_config>(ok)) << exit_message(ok);
  EXPECT_EQ(std::get<server_config>(ok).admin_token, "s3cret");
  std::remove(path);
}

TEST(ServerConfig, MissingOrEmptyTokenFileExitsTwo) {
  EXPECT_EQ(exit_code(parse({"--admin-token-file=/nonexistent/token"})), 2);
  char path[] = "/tmp/ic_token_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ::write(fd, "  \n", 3);
  ::close(fd);
  EXPECT_EQ(exit_code(parse({std::string("--admin-token-file=") + path})), 2);
  std::remove(path);
}

TEST(ServerConfig, UnknownFlagExitsTwo) {
  auto r = parse({"--insecure-disable-auth", "--no-such-flag=1"});
  EXPECT_EQ(exit_code(r), 2);
  EXPECT_NE(exit_message(r).find("no-such-flag"), std::string::npos);
}

TEST(ServerConfig, BadValuesExitTwo) {
  const std::vector<std::vector<std::string>> bad = {
      {"--log-format=xml"},
      {"--log-level=verbose"},
      {"--default-ttl=30"},
      {"--default-ttl=abc"},
      {"--sweep-interval=-"},
      {"--max-index-entries=-1"},
      {"--max-index-entries=lots"},
      {"--max-recv-message-bytes=0"},
      {"--engine-block-size=x"},
      {"--journal-fsync=maybe"},
      {"--grpc-bind-address=9090"},
      {"--http-bind-address=:99999"},
      {"--tls-cert-file=/tmp/cert.pem"},
      {"--allowed-controller-sa=system:serviceaccount:x:y"},
  };
  for (auto args : bad) {
    args.push_back("--insecure-disable-auth");
    auto r = parse(args);
    EXPECT_EQ(exit_code(r), 2) << args[0];
    EXPECT_EQ(exit_message(r).find('\n'), std::string::npos) << args[0];
  }
}

TEST(ServerConfig, AcceptsGoStyleSpellings) {
  auto r = parse({"-insecure-disable-auth", "--log-format", " TEXT ", "--log-level=warning",
                  "--journal-fsync", "--default-ttl=1h30m", "--sweep-interval=500ms",
                  "--engine-block-size=-3", "--grpc-bind-address=127.0.0.1:0",
                  "--max-index-entries=0"});
  ASSERT_TRUE(std::holds_alternative<server_config>(r)) << exit_message(r);
  const auto& c = std::get<server_config>(r);
  EXPECT_EQ(c.format, log_format::text);
  EXPECT_EQ(c.log_level, "warn");
  EXPECT_TRUE(c.journal_fsync);
  EXPECT_EQ(c.default_ttl, std::chrono::minutes(90));
  EXPECT_EQ(c.sweep_interval, std::chrono::milliseconds(500));
  EXPECT_EQ(c.engine_block_size, 16);
  EXPECT_EQ(c.max_index_entries, 0);
  auto f = parse({"--insecure-disable-auth=true", "--journal-fsync=false"});
  ASSERT_TRUE(std::holds_alternative<server_config>(f)) << exit_message(f);
  EXPECT_FALSE(std::get<server_config>(f).journal_fsync);
}

TEST(ServerConfig, HelpAndVersionExitZero) {
  auto h = parse({"--help"});
  EXPECT_EQ(exit_code(h), 0);
  EXPECT_NE(exit_message(h).find("--data-dir"), std::string::npos);
  EXPECT_EQ(exit_code(parse({"--version"})), 0);
}

// Every field of a parse result, to compare a reused parser's answers with fresh ones.
std::string summary(const std::variant<server_config, early_exit>& r) {
  if (auto* e = std::get_if<early_exit>(&r)) return "exit " + std::to_string(e->code) + " " + e->message;
  const auto& c = std::get<server_config>(r);
  std::string s;
  for (const std::string* f :
       {&c.grpc_bind_address, &c.http_bind_address, &c.snapshot_bind_address, &c.admin_token_file,
        &c.admin_token, &c.tls_cert_file, &c.tls_key_file, &c.log_level, &c.tokenizer_models_dir,
        &c.data_dir, &c.policy_file, &c.topology_file, &c.templates_file, &c.journal.replica_id,
        &c.journal.nats_stream, &c.journal.nats_creds_file})
    s += *f + "|";
  for (const auto& url : c.journal.nats_servers) s += url + ",";
  for (long long n : {static_cast<long long>(c.insecure_disable_auth),
                      static_cast<long long>(c.engine_block_size), static_cast<long long>(c.format),
                      static_cast<long long>(c.journal_fsync), static_cast<long long>(c.max_index_entries),
                      static_cast<long long>(c.default_ttl.count()),
                      static_cast<long long>(c.sweep_interval.count()),
                      static_cast<long long>(c.metrics_stream_interval.count()),
                      static_cast<long long>(c.snapshot_interval.count()),
                      static_cast<long long>(c.snapshot_every_records),
                      static_cast<long long>(c.max_recv_message_bytes),
                      static_cast<long long>(c.http_idle_timeout.count()),
                      static_cast<long long>(c.http_max_connections),
                      static_cast<long long>(c.journal.kind),
                      static_cast<long long>(c.journal.nats_replicas),
                      static_cast<long long>(c.journal.append_timeout.count()),
                      static_cast<long long>(c.journal.shared_snapshot_interval.count()),
                      static_cast<long long>(c.journal.max_apply_lag.count()),
                      static_cast<long long>(c.journal.lfu_credit_interval.count()),
                      static_cast<long long>(c.journal.lfu_credits_off),
                      static_cast<long long>(c.journal.journal_reset)})
    s += std::to_string(n) + "|";
  return s;
}

// One parser reused across command lines (the fuzz target does this) answers each exactly as
// a fresh parse does: nothing set, counted or refused by one command line reaches the next.
TEST(ServerConfig, AReusedParserAnswersEachCommandLineAsAFreshOne) {
  const std::vector<std::vector<std::string>> lines = {
      {"--insecure-disable-auth", "--log-format=text", "--log-level=debug", "--journal-fsync",
       "--default-ttl=1h", "--grpc-bind-address=127.0.0.1:1", "--max-index-entries=5",
       "--snapshot-every-records=7", "--http-idle-timeout=3s", "--journal=jetstream",
       "--nats-servers=nats://a:1,nats://b:2", "--replica-id=r1", "--nats-replicas=3",
       "--max-apply-lag=0", "--journal-reset"},
      {"--insecure-disable-auth"},
      {"--insecure-disable-auth", "--nats-replicas=3"},  // needs --journal=jetstream: refused
      {"--insecure-disable-auth", "--journal=jetstream", "--nats-servers=nats://c:3"},
      {"--insecure-disable-auth", "--no-such-flag=1"},
      {"--insecure-disable-auth", "--default-ttl=abc"},
      {"--help"},
      {"--insecure-disable-auth", "--sweep-interval=500ms", "--engine-block-size=-3"},
      {"--version"},
      {},
      {"--insecure-disable-auth"},
  };
  command_line_parser reused;
  for (int round = 0; round < 2; ++round) {
    for (auto args : lines) {
      args.insert(args.begin(), "inferencecache-server");
      std::vector<const char*> argv;
      for (auto& a : args) argv.push_back(a.c_str());
      const int argc = static_cast<int>(argv.size());
      EXPECT_EQ(summary(reused.parse(argc, argv.data())),
                summary(parse_command_line(argc, argv.data())))
          << "round " << round << ", " << (args.size() > 1 ? args[1] : "(no flags)");
    }
  }
  // The first and the second line differ in almost every field, so the check can fail.
  EXPECT_NE(summary(parse({"--insecure-disable-auth"})),
            summary(parse(std::vector<std::string>(lines[0].begin(), lines[0].end()))));
}

TEST(ServerConfig, BindAddressesTranslateForGrpcAndCivetweb) {
  EXPECT_EQ(grpc_listen_address(":9090"), "0.0.0.0:9090");
  EXPECT_EQ(grpc_listen_address("127.0.0.1:0"), "127.0.0.1:0");
  EXPECT_EQ(http_listen_address(":8080"), "8080");
  EXPECT_EQ(http_listen_address("127.0.0.1:8080"), "127.0.0.1:8080");
}

}  // namespace
}  // namespace ic::server
