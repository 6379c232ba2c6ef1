// inferencecache-journal against a journal written by the real server.
#include <csignal>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "tests/support/server_process.hpp"
#include "tests/support/test_paths.hpp"

namespace ic {
namespace {

using namespace std::chrono_literals;
namespace v1 = inferencecache::v1alpha1;

TEST(JournalInspector, SummarisesListsAndVerifiesAServerJournal) {
  std::string dir = test::make_temp_dir("ic_inspector");
  {
    auto s = test::server_process::start(
        ic::test::executable("inferencecache-server"),
        {"--grpc-bind-address=127.0.0.1:0", "--http-bind-address=127.0.0.1:0",
         "--snapshot-bind-address=127.0.0.1:0", "--data-dir=" + dir, "--insecure-disable-auth"});
    ASSERT_TRUE(s->wait_ready(30s)) << s->logs();
    auto stub = v1::InferenceCache::NewStub(
        grpc::CreateChannel(s->grpc_target(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::Ack ack;
    auto w = stub->ReportCacheState(&ctx, &ack);
    v1::CacheStateUpdate u;
    u.set_replica_id("r1");
    u.set_tenant_id("t");
    u.set_model_id("m");
    u.set_hash_scheme("vllm");
    u.add_prefixes()->set_prefix_hash("p");
    ASSERT_TRUE(w->Write(u));
    ASSERT_TRUE(w->Write(u));
    w->WritesDone();
    ASSERT_TRUE(w->Finish().ok());
    // SIGKILL: no final snapshot, so the records stay in the journal.
    ASSERT_EQ(s->terminate(SIGKILL), 128 + SIGKILL);
  }
  auto [code, out] = test::run_to_exit(ic::test::executable("inferencecache-journal"),
                                       {"--data-dir=" + dir, "summary"});
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("update: 2"), std::string::npos) << out;
  EXPECT_NE(out.find("sweep: 1"), std::string::npos) << out;  // the recovery sweep
  EXPECT_NE(out.find("undecodable:        0"), std::string::npos) << out;

  auto [rc, records] = test::run_to_exit(ic::test::executable("inferencecache-journal"),
                                         {"--data-dir=" + dir, "records", "--json"});
  EXPECT_EQ(rc, 0) << records;
  EXPECT_NE(records.find("\"replica_id\":\"r1\""), std::string::npos) << records;
  EXPECT_NE(records.find("\"type\":\"update\""), std::string::npos) << records;

  auto [vc, verify] = test::run_to_exit(ic::test::executable("inferencecache-journal"),
                                        {"--data-dir=" + dir, "verify"});
  EXPECT_EQ(vc, 0) << verify;
  EXPECT_NE(verify.find("records: ok"), std::string::npos) << verify;

  // A graceful stop writes a snapshot and truncates the journal before it.
  {
    auto s = test::server_process::start(
        ic::test::executable("inferencecache-server"),
        {"--grpc-bind-address=127.0.0.1:0", "--http-bind-address=127.0.0.1:0",
         "--snapshot-bind-address=127.0.0.1:0", "--data-dir=" + dir, "--insecure-disable-auth"});
    ASSERT_TRUE(s->wait_ready(30s)) << s->logs();
    ASSERT_EQ(s->terminate(), 0);
  }
  auto [sc, snaps] = test::run_to_exit(ic::test::executable("inferencecache-journal"),
                                       {"--data-dir=" + dir, "snapshots"});
  EXPECT_EQ(sc, 0) << snaps;
  EXPECT_NE(snaps.find("complete"), std::string::npos) << snaps;
  auto [vc2, verify2] = test::run_to_exit(ic::test::executable("inferencecache-journal"),
                                          {"--data-dir=" + dir, "verify"});
  EXPECT_EQ(vc2, 0) << verify2;
  EXPECT_NE(verify2.find(": ok"), std::string::npos) << verify2;

  auto [mc, missing] = test::run_to_exit(ic::test::executable("inferencecache-journal"),
                                         {"--data-dir=" + dir + "/nope", "summary"});
  EXPECT_EQ(mc, 1) << missing;
  auto [uc, usage] = test::run_to_exit(ic::test::executable("inferencecache-journal"), {"--bogus"});
  EXPECT_EQ(uc, 2) << usage;
  test::remove_tree(dir);
}

}  // namespace
}  // namespace ic
