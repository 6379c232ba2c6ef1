// Durability of the real server: SIGKILL while producers stream, and a committed data
// directory written by an earlier build that every later build must still recover.
#include <csignal>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "tests/support/chain_requests.hpp"
#include "tests/support/http_client.hpp"
#include "tests/support/server_process.hpp"
#include "tests/support/test_paths.hpp"

namespace ic {
namespace {

using namespace std::chrono_literals;
namespace v1 = inferencecache::v1alpha1;
namespace fs = std::filesystem;

std::vector<std::string> server_args(const std::string& data_dir) {
  return {"--grpc-bind-address=127.0.0.1:0", "--http-bind-address=127.0.0.1:0",
          "--snapshot-bind-address=127.0.0.1:0", "--data-dir=" + data_dir,
          "--insecure-disable-auth"};
}

v1::CacheStateUpdate update(const std::string& tenant, const std::string& replica,
                            const std::vector<std::string>& blocks) {
  return test::chain_update_message(tenant, replica, blocks);
}

v1::LookupRouteResponse lookup(v1::InferenceCache::Stub& stub, const std::string& tenant,
                               const std::vector<std::string>& blocks) {
  return test::chain_lookup(stub, tenant, blocks, 10s);
}

// Producers stream one-message ReportCacheState calls (each acknowledged separately) until
// the server is killed; every block whose Ack arrived must be back after the restart.
TEST(Recovery, EveryAcknowledgedUpdateSurvivesSigkillMidStream) {
  std::string dir = test::make_temp_dir("ic_recovery");
  auto server =
      test::server_process::start(ic::test::executable("inferencecache-server"), server_args(dir));
  ASSERT_TRUE(server->wait_ready(30s)) << server->logs();
  auto channel = grpc::CreateChannel(server->grpc_target(), grpc::InsecureChannelCredentials());

  std::mutex mu;
  std::set<std::string> acked;
  std::atomic<bool> stop{false};
  std::vector<std::thread> producers;
  for (int p = 0; p < 3; ++p) {
    producers.emplace_back([&, p] {
      auto stub = v1::InferenceCache::NewStub(channel);
      for (int i = 0; i < 100000 && !stop.load(); ++i) {
        const std::string block = "p" + std::to_string(p) + "-" + std::to_string(i);
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + 5s);
        v1::Ack ack;
        auto writer = stub->ReportCacheState(&ctx, &ack);
        writer->Write(update("t", "r" + std::to_string(p), {block}));
        writer->WritesDone();
        if (!writer->Finish().ok()) break;  // the server is gone
        if (ack.accepted()) {
          std::lock_guard<std::mutex> lock(mu);
          acked.insert(block);
        }
      }
    });
  }
  // Kill once a few hundred updates were acknowledged (bounded wait).
  for (int i = 0; i < 400; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (acked.size() >= 300) break;
    }
    std::this_thread::sleep_for(25ms);
  }
  ASSERT_EQ(server->terminate(SIGKILL, 20s), 128 + SIGKILL);
  stop = true;
  for (auto& t : producers) t.join();
  ASSERT_GE(acked.size(), 1u);

  auto again =
      test::server_process::start(ic::test::executable("inferencecache-server"), server_args(dir));
  ASSERT_TRUE(again->wait_ready(30s)) << again->logs();
  auto stub = v1::InferenceCache::NewStub(
      grpc::CreateChannel(again->grpc_target(), grpc::InsecureChannelCredentials()));
  std::size_t missing = 0;
  for (const auto& block : acked) {
    auto resp = lookup(*stub, "t", {block});
    if (resp.reason_code() != "PREFIX_MATCH") ++missing;
  }
  EXPECT_EQ(missing, 0u) << "of " << acked.size() << " acknowledged updates";
  EXPECT_EQ(again->terminate(), 0);
  test::remove_tree(dir);
}

// tests/fixtures/datadir_v1 was written by tests/fixtures/make_datadir_fixture.sh with the
// first journal record schema and snapshot format: a policy with a 100-year TTL, updates
// covered by a snapshot, and updates in the journal tail after it.
TEST(Recovery, CommittedDataDirFromAnEarlierBuildStillRecovers) {
  const fs::path fixture = fs::path(ic::test::source_dir()) / "tests/fixtures/datadir_v1";
  ASSERT_TRUE(fs::exists(fixture / "journal")) << fixture;
  std::string dir = test::make_temp_dir("ic_fixture");
  fs::copy(fixture, dir, fs::copy_options::recursive);
  auto server =
      test::server_process::start(ic::test::executable("inferencecache-server"), server_args(dir));
  ASSERT_TRUE(server->wait_ready(30s)) << server->logs();
  auto logs = server->logs();
  EXPECT_EQ(logs.find("\"snapshot_seq\":\"0\""), std::string::npos) << logs;
  EXPECT_EQ(logs.find("\"records_replayed\":\"0\""), std::string::npos) << logs;
  auto stub = v1::InferenceCache::NewStub(
      grpc::CreateChannel(server->grpc_target(), grpc::InsecureChannelCredentials()));
  // From the snapshot.
  auto snap = lookup(*stub, "fixture", {"s1", "s2"});
  EXPECT_EQ(snap.reason_code(), "PREFIX_MATCH");
  ASSERT_EQ(snap.replica_scores_size(), 1);
  EXPECT_EQ(snap.replica_scores(0).replica_id(), "before-snapshot");
  EXPECT_EQ(snap.replica_scores(0).matched_tokens(), 128);
  // From the journal tail.
  auto tail = lookup(*stub, "fixture", {"t1"});
  EXPECT_EQ(tail.reason_code(), "PREFIX_MATCH");
  ASSERT_EQ(tail.replica_scores_size(), 1);
  EXPECT_EQ(tail.replica_scores(0).replica_id(), "after-snapshot");
  // The policy came back too.
  auto policy = test::http_call(server->snapshot_port(), "GET", "/policy");
  EXPECT_NE(policy.body.find("\"namespace\":\"fixture\""), std::string::npos) << policy.body;
  EXPECT_EQ(server->terminate(), 0);
  test::remove_tree(dir);
}

}  // namespace
}  // namespace ic
