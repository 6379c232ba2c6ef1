// The journal flags of issue #15 through the real command-line parser.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/config.hpp"

namespace ic::server {
namespace {

using namespace std::chrono_literals;

std::variant<server_config, early_exit> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "--insecure-disable-auth");
  args.insert(args.begin(), "inferencecache-server");
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

std::string refusal(const std::variant<server_config, early_exit>& r) {
  auto* e = std::get_if<early_exit>(&r);
  if (!e) return "(accepted)";
  EXPECT_EQ(e->code, 2);
  EXPECT_EQ(e->message.find('\n'), std::string::npos) << e->message;
  return e->message;
}

TEST(JournalFlags, DefaultIsRocksdbWithTheSpecDefaults) {
  auto r = parse({});
  ASSERT_TRUE(std::holds_alternative<server_config>(r)) << refusal(r);
  const journal_config& j = std::get<server_config>(r).journal;
  EXPECT_EQ(j.kind, journal_kind::rocksdb);
  EXPECT_EQ(j.nats_stream, "IC_JOURNAL");
  EXPECT_EQ(j.nats_replicas, 3);
  EXPECT_EQ(j.append_timeout, 2s);
  EXPECT_EQ(j.shared_snapshot_interval, 2min);
  EXPECT_EQ(j.max_apply_lag, 10s);
  EXPECT_EQ(j.lfu_credit_interval, 1s);
  EXPECT_FALSE(j.lfu_credits_off);
  EXPECT_FALSE(j.journal_reset);
}

TEST(JournalFlags, JetstreamParsesEveryFlagAndDefaultsTheReplicaIdToTheHostName) {
  auto r = parse({"--journal=jetstream", "--nats-servers=nats://127.0.0.1:4222,nats://h2:4222",
                  "--nats-replicas=1", "--nats-stream=S1", "--journal-append-timeout=500ms",
                  "--shared-snapshot-interval=30s", "--max-apply-lag=0",
                  "--lfu-credit-interval=250ms", "--lfu-credit=local-off", "--journal-reset"});
  ASSERT_TRUE(std::holds_alternative<server_config>(r)) << refusal(r);
  const journal_config& j = std::get<server_config>(r).journal;
  EXPECT_EQ(j.kind, journal_kind::jetstream);
  EXPECT_EQ(j.nats_servers, (std::vector<std::string>{"nats://127.0.0.1:4222", "nats://h2:4222"}));
  EXPECT_EQ(j.nats_replicas, 1);
  EXPECT_EQ(j.nats_stream, "S1");
  EXPECT_EQ(j.append_timeout, 500ms);
  EXPECT_EQ(j.shared_snapshot_interval, 30s);
  EXPECT_EQ(j.max_apply_lag, 0s);
  EXPECT_EQ(j.lfu_credit_interval, 250ms);
  EXPECT_TRUE(j.lfu_credits_off);
  EXPECT_TRUE(j.journal_reset);
  EXPECT_FALSE(j.replica_id.empty());
  EXPECT_EQ(j.replica_id.find('.'), std::string::npos);
}

TEST(JournalFlags, InvalidValuesAndCombinationsExitTwoWithOneLine) {
  EXPECT_NE(refusal(parse({"--journal=kafka"})).find("want rocksdb or jetstream"), std::string::npos);
  EXPECT_NE(refusal(parse({"--journal=jetstream"})).find("needs --nats-servers"), std::string::npos);
  EXPECT_NE(refusal(parse({"--nats-servers=nats://h:1"})).find("needs --journal=jetstream"),
            std::string::npos);
  EXPECT_NE(refusal(parse({"--max-apply-lag=1s"})).find("--max-apply-lag needs --journal=jetstream"),
            std::string::npos);
  const std::string js = "--journal=jetstream", srv = "--nats-servers=nats://127.0.0.1:4222";
  EXPECT_NE(refusal(parse({js, "--nats-servers=http://h:1"})).find("want nats://"), std::string::npos);
  EXPECT_NE(refusal(parse({js, srv, "--replica-id=a.b"})).find("--replica-id"), std::string::npos);
  EXPECT_NE(refusal(parse({js, srv, "--nats-replicas=0"})).find("want 1..5"), std::string::npos);
  EXPECT_NE(refusal(parse({js, srv, "--nats-replicas=7"})).find("want 1..5"), std::string::npos);
  EXPECT_NE(refusal(parse({js, srv, "--nats-stream=a.b"})).find("--nats-stream"), std::string::npos);
  EXPECT_NE(refusal(parse({js, srv, "--journal-append-timeout=0s"})).find("must be positive"),
            std::string::npos);
  EXPECT_NE(refusal(parse({js, srv, "--max-apply-lag=-1s"})).find("--max-apply-lag"),
            std::string::npos);
  EXPECT_NE(refusal(parse({js, srv, "--shared-snapshot-interval=soon"})).find("--shared-snapshot-interval"),
            std::string::npos);
  EXPECT_NE(refusal(parse({js, srv, "--lfu-credit-interval=0s"})).find("must be positive"),
            std::string::npos);
  EXPECT_NE(refusal(parse({js, srv, "--lfu-credit-interval=often"})).find("--lfu-credit-interval"),
            std::string::npos);
  EXPECT_NE(refusal(parse({"--lfu-credit-interval=1s"})).find("needs --journal=jetstream"),
            std::string::npos);
  EXPECT_EQ(refusal(parse({"--journal-reset"})), "--journal-reset needs --journal=jetstream");
  EXPECT_EQ(refusal(parse({"--lfu-credit=local-off"})), "--lfu-credit needs --journal=jetstream");
  EXPECT_EQ(refusal(parse({js, srv, "--lfu-credit=off"})),
            "invalid --lfu-credit \"off\": want journal or local-off");
  auto journaled = parse({js, srv, "--lfu-credit=journal"});
  ASSERT_TRUE(std::holds_alternative<server_config>(journaled)) << refusal(journaled);
  EXPECT_FALSE(std::get<server_config>(journaled).journal.lfu_credits_off);
  EXPECT_NE(refusal(parse({js, srv, "--nats-creds-file=/nonexistent/x.creds"})).find("cannot read"),
            std::string::npos);
}

TEST(JournalFlags, DurationTextIsTheShortestForm) {
  EXPECT_EQ(duration_text(2min), "2m");
  EXPECT_EQ(duration_text(10s), "10s");
  EXPECT_EQ(duration_text(250ms), "250ms");
  EXPECT_EQ(duration_text(0s), "0s");
}

// An upload is the local snapshot read back: in JetStream mode local snapshots run at
// least as often as the shared interval; rocksdb mode keeps --snapshot-interval.
TEST(JournalFlags, LocalSnapshotsRunAtMostTheSharedIntervalInJetstreamMode) {
  journal_config js;
  js.kind = journal_kind::jetstream;
  js.shared_snapshot_interval = 2min;
  EXPECT_EQ(local_snapshot_interval(js, 10min), 2min);
  EXPECT_EQ(local_snapshot_interval(js, 30s), 30s);
  EXPECT_EQ(local_snapshot_interval(js, 0s), 2min);  // "never by time" would never upload
  journal_config rocks;
  EXPECT_EQ(local_snapshot_interval(rocks, 10min), 10min);
  EXPECT_EQ(local_snapshot_interval(rocks, 0s), 0s);
}

}  // namespace
}  // namespace ic::server
