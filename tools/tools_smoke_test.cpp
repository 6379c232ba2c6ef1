// The real server driven by the two tools: every CLI verb once, and each quick bench mode for
// about a second. Checks exit codes and that the figures are present and non-zero; never a
// timing threshold.
#include <algorithm>
#include <fstream>
#include <sstream>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/server_process.hpp"
#include "tests/support/test_paths.hpp"

namespace ic::tools {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

class ToolsSmoke : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::make_temp_dir("ic_tools_smoke");
    server_ = test::server_process::start(
        ic::test::executable("inferencecache-server"),
        {"--insecure-disable-auth", "--data-dir=" + dir_ + "/data",
         "--grpc-bind-address=127.0.0.1:0", "--http-bind-address=127.0.0.1:0",
         "--snapshot-bind-address=127.0.0.1:0", "--metrics-stream-interval=200ms"});
    ASSERT_NE(server_, nullptr);
    ASSERT_TRUE(server_->wait_ready(30s)) << server_->logs();
    addr_ = "--addr=" + server_->grpc_target();
    admin_ = "--admin-addr=127.0.0.1:" + std::to_string(server_->snapshot_port());
  }
  void TearDown() override {
    if (server_) {
      EXPECT_EQ(server_->terminate(), 0);
    }
    server_.reset();
    test::remove_tree(dir_);
  }

  /// Runs the CLI with `args` after --addr/--admin-addr; returns {exit code, output}.
  std::pair<int, std::string> cli(std::vector<std::string> args) {
    args.insert(args.begin(), {addr_, admin_});
    return test::run_to_exit(ic::test::executable("inferencecache"), args, 20s);
  }

  /// Runs one bench mode for about a second and returns its --json document.
  /// `mode_args` follow the mode; `want` is the expected exit code.
  json bench(const std::string& mode, std::vector<std::string> extra = {},
             const std::vector<std::string>& mode_args = {}, int want = 0) {
    const std::string out = dir_ + "/" + mode + ".json";
    std::vector<std::string> args = {addr_, "--duration=1s", "--concurrency=4",
                                     "--entries=5000", "--json=" + out};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back(mode);
    args.insert(args.end(), mode_args.begin(), mode_args.end());
    auto [code, output] =
        test::run_to_exit(ic::test::executable("inferencecache-bench"), args, 60s);
    EXPECT_EQ(code, want) << output;
    std::ifstream in(out);
    std::stringstream ss;
    ss << in.rdbuf();
    auto j = json::parse(ss.str(), nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << output;
    return j.is_discarded() ? json::object() : j;
  }

  std::string dir_, addr_, admin_;
  std::unique_ptr<test::server_process> server_;
};

const std::vector<std::string> kChain = {"--tenant=team-a", "--model=llama", "--block-tokens=64",
                                         "--hashes=0x0000000000000001,0x0000000000000002,"
                                         "AAAAAAAAAAM="};

TEST_F(ToolsSmoke, CliVerbsRoundTripAgainstTheRealServer) {
  std::vector<std::string> report = {"report", "--replica=r1"};
  report.insert(report.end(), kChain.begin(), kChain.end());
  auto [rc, out] = cli(report);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("accepted: true"), std::string::npos) << out;

  std::vector<std::string> lookup = {"lookup", "--json", "--fail-on-no-hint"};
  lookup.insert(lookup.end(), kChain.begin(), kChain.end());
  std::tie(rc, out) = cli(lookup);
  ASSERT_EQ(rc, 0) << out;
  auto j = json::parse(out.substr(out.find('{')), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["reasonCode"], "PREFIX_MATCH");
  EXPECT_EQ(j["replicaScores"][0]["replicaId"], "r1");
  EXPECT_EQ(j["replicaScores"][0]["matchedTokens"], 192);

  std::tie(rc, out) = cli({"lookup", "--tenant=team-a", "--model=llama", "--hashes=00000000000000ff",
                           "--fail-on-no-hint"});
  EXPECT_EQ(rc, 3) << out;

  std::tie(rc, out) = cli({"state", "--tenant=team-a", "--model=llama"});
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("total prefixes: 3"), std::string::npos) << out;

  std::tie(rc, out) = cli({"evict", "--replica=r1", "--tenant=team-a", "--model=llama",
                           "--hashes=0000000000000003"});
  EXPECT_EQ(rc, 0) << out;
  std::tie(rc, out) = cli({"clear", "--replica=r1", "--tenant=team-a", "--model=llama"});
  EXPECT_EQ(rc, 0) << out;
  std::tie(rc, out) = cli(lookup);
  EXPECT_EQ(rc, 3) << "no replica holds the chain after ALL_CLEARED: " << out;

  std::tie(rc, out) = cli({"health"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("SERVING"), std::string::npos);

  std::tie(rc, out) = cli({"metrics", "--names=inferencecache_server_up", "--count=1"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("inferencecache_server_up 1"), std::string::npos) << out;
  std::tie(rc, out) = cli({"watch", "--duration=300ms"});
  EXPECT_EQ(rc, 0) << out;

  const std::string policy = dir_ + "/policy.json";
  std::ofstream(policy) << R"({"version":7,"policies":[{"namespace":"team-a",)"
                        << R"("strategy":{"requireChain":true}}],"tenants":[]})";
  std::tie(rc, out) = cli({"policy", "push", policy});
  ASSERT_EQ(rc, 0) << out;
  std::tie(rc, out) = cli({"policy", "get"});
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"requireChain\": true"), std::string::npos) << out;
  std::ofstream(policy) << R"({"version":7,"bogus":1})";
  std::tie(rc, out) = cli({"policy", "push", policy});
  EXPECT_EQ(rc, 1) << "the server refuses an unknown field: " << out;
}

TEST_F(ToolsSmoke, CliReportsFromAJsonLinesFile) {
  const std::string file = dir_ + "/updates.jsonl";
  std::ofstream(file)
      << R"({"replicaId":"r7","tenantId":"team-a","modelId":"llama","hashScheme":"vllm",)"
      << R"("prefixes":[{"blockHashes":["AAAAAAAAAAE=","AAAAAAAAAAI="],"blockTokenCounts":[64,64]}]})"
      << "\n";
  auto [rc, out] = cli({"report", "--file=" + file});
  ASSERT_EQ(rc, 0) << out;
  std::tie(rc, out) = cli({"lookup", "--tenant=team-a", "--model=llama", "--block-tokens=64",
                           "--hashes=0000000000000001,0000000000000002"});
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("PREFIX_MATCH"), std::string::npos) << out;
  EXPECT_NE(out.find("r7"), std::string::npos) << out;
}

TEST_F(ToolsSmoke, CliUsageErrorsExitTwoWithOneLine) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"lookup"},                                     // nothing to look up
           {"lookup", "--hashes=xyz!"},                    // bad hash
           {"lookup", "--tokens=1,2", "--hashes=00"},      // both
           {"lookup", "--prompt=hi", "--tokens=1,2"},      // prompt with tokens
           {"report", "--replica=r", "--tokens=1,2", "--block-tokens=4"},  // no full block
           {"report", "--hashes=0001"},                    // no replica
           {"frobnicate"},                                 // unknown verb
           {"watch", "--types=sometimes"},                 // unknown event type
           {"policy", "push", "/nonexistent/policy.json"}}) {
    auto [rc, out] = cli(args);
    EXPECT_EQ(rc, 2) << args[0] << ": " << out;
    EXPECT_NE(out.find("inferencecache"), std::string::npos) << out;
  }
  auto [rc, out] =
      test::run_to_exit(ic::test::executable("inferencecache"), {"lookup", "--help"}, 20s);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("--fail-on-no-hint"), std::string::npos);
}

// --- pd-route, render, topology, templates ------------------------------------------------
//
// One row = one CLI call and what it must print and exit with: the verbs against the real
// server with the deploy/ samples pushed through /topology and /templates. The selection and
// rendering rules themselves are tested in topology/, templates/ and tests/pd_templates_test.cpp;
// these rows check that the CLI carries each answer and failure through correctly.

/// One CLI call: arguments (after --addr/--admin-addr), exit code, substrings of the output.
struct cli_row {
  std::vector<std::string> args;
  int exit_code = 0;
  std::vector<std::string> prints;
};

const std::string kDeployTopology = ic::test::source_dir() + "/deploy/pd/topology.json";
const std::string kDeployTemplates = ic::test::source_dir() + "/deploy/templates/templates.json";

/// The JSON object the CLI printed (the first line starting with '{'), or discarded.
json json_of(const std::string& out) {
  auto at = out.find('{');
  return at == std::string::npos ? json(json::value_t::discarded)
                                 : json::parse(out.substr(at, out.find('\n', at) - at), nullptr, false);
}

class ToolsPdTemplates : public ToolsSmoke {
 protected:
  void expect_rows(const std::vector<cli_row>& rows) {
    for (const auto& row : rows) {
      std::string joined;
      for (const auto& a : row.args) joined += a + " ";
      auto [rc, out] = cli(row.args);
      EXPECT_EQ(rc, row.exit_code) << joined << "\n" << out;
      for (const auto& p : row.prints) EXPECT_NE(out.find(p), std::string::npos) << joined << "\n" << out;
    }
  }
};

const std::vector<std::string> kPdRequest = {"--tenant=serving", "--model=m", "--topology=serving/pd",
                                             "--prefix=0102030405060708", "--prefix-tokens=256"};

TEST_F(ToolsPdTemplates, PdRoutePrintsUnknownTopologyThenAPushedTopologysAnswer) {
  std::vector<std::string> table = {"pd-route"}, as_json = {"pd-route", "--json"},
                           strict = {"pd-route", "--fail-on-no-hint"};
  for (auto* v : {&table, &as_json, &strict}) v->insert(v->end(), kPdRequest.begin(), kPdRequest.end());
  // Nothing pushed: the ref names no topology (spec §2.4), no pair; --fail-on-no-hint exits 3.
  expect_rows({
      {table, 0, {"reason: UNKNOWN_TOPOLOGY", "no prefill/decode pair"}},
      {strict, 3, {"reason: UNKNOWN_TOPOLOGY"}},
  });
  auto [rc, out] = cli(as_json);
  ASSERT_EQ(rc, 0) << out;
  auto j = json_of(out);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j, json::parse(R"({"prefillReplicaId":"","decodeReplicaId":"","transportHint":"",)"
                           R"("reasonCode":"UNKNOWN_TOPOLOGY"})"));
  // The sample topology pushed: the ref resolves, so the answer is no longer UNKNOWN_TOPOLOGY
  // (no replica has reported stats, so there is still no live pair).
  expect_rows({{{"topology", "push", kDeployTopology}, 0, {"topology applied"}}});
  std::tie(rc, out) = cli({"pd-route", "--tenant=serving", "--model=meta-llama/Llama-3.1-8B-Instruct",
                           "--topology=serving/llama3-pd", "--prefix=0102030405060708",
                           "--prefix-tokens=256"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out.find("UNKNOWN_TOPOLOGY"), std::string::npos) << out;
  EXPECT_NE(out.find("reason: "), std::string::npos) << out;
}

TEST_F(ToolsPdTemplates, RenderAnswersNotFoundThenTheSampleTemplate) {
  const std::vector<std::string> request = {"render", "--namespace=serving", "--name=support-agent",
                                            "--var=product=Acme", "--var=history=user: hi"};
  auto with = [&](std::vector<std::string> extra) {
    auto args = request;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  // Nothing pushed: TEMPLATE_NOT_FOUND (spec §3.6), which the CLI reports with exit 1.
  expect_rows({{request, 1, {"reason: TEMPLATE_NOT_FOUND"}}});
  expect_rows({{{"templates", "push", kDeployTemplates}, 0, {"templates applied"}}});
  // spec §3.8 #1 over the wire: text, hash, namespace and revision.
  expect_rows({{request, 0, {"reason: OK   revision: 827a07b8803957c3e869357a82c0485f   namespace: serving",
                             "stable prefix hash: e814c61e33490731",
                             "You are a helpful support agent for Acme.\nConversation so far:\nuser: hi\n"}}});
  auto [rc, out] = cli(with({"--json"}));
  ASSERT_EQ(rc, 0) << out;
  auto j = json_of(out);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["reasonCode"], "OK");
  EXPECT_EQ(j["tenantNamespace"], "serving");
  std::tie(rc, out) = cli(with({"--prompt-only"}));
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "You are a helpful support agent for Acme.\nConversation so far:\nuser: hi\n");
}

TEST_F(ToolsPdTemplates, AdminStoresPushAndShowTheSamples) {
  expect_rows({{{"topology", "push", kDeployTopology}, 0, {"topology applied"}},
               {{"topology", "push", kDeployTopology, "--method=PUT"}, 0, {"topology applied"}},
               {{"topology", "show"}, 0, {"serving/llama3-pd"}},
               {{"topology", "show", "--json"}, 0, {"\"llama3-pd\""}},
               {{"templates", "push", kDeployTemplates}, 0, {"templates applied"}},
               {{"templates", "show"}, 0, {"templates: 2", "serving/support-agent",
                                           "827a07b8803957c3e869357a82c0485f"}},
               {{"templates", "show", "--json"}, 0, {"\"support-agent\""}}});
  // A body the server refuses: exit 1 with the server's one line, nothing else printed.
  const std::string bad = ::testing::TempDir() + "/bad_topology.json";
  { std::ofstream(bad) << R"({"version":1,"topologies":[{"namespace":"serving"}]})"; }
  auto [rc, out] = cli({"topology", "push", bad});
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("HTTP 400"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  // The refused push changed nothing.
  expect_rows({{{"topology", "show"}, 0, {"serving/llama3-pd"}}});
  // The policy verbs go through the same admin path and still work.
  expect_rows({{{"policy", "get"}, 0, {"{"}}});
}

TEST_F(ToolsSmoke, BenchBaselineMeasuresHealthCheck) {
  json base = bench("baseline");
  EXPECT_GT(base["baseline"]["ok"].get<long>(), 0);
  EXPECT_GT(base["baseline"]["p50_us"].get<double>(), 0);
}

TEST_F(ToolsSmoke, BenchLookupPrefillsMatchesAndPrintsTheRatio) {
  json look = bench("lookup");
  EXPECT_GT(look["prefill"]["blocks_acked"].get<long>(), 0);
  EXPECT_GT(look["lookup"]["ok"].get<long>(), 0);
  EXPECT_EQ(look["lookup"]["errors"].get<long>(), 0);
  EXPECT_GT(look["lookup"]["answers"]["PREFIX_MATCH"].get<long>(), 0);
  EXPECT_GT(look["ratio"]["p50"].get<double>(), 0);
  EXPECT_GT(look["ratio"]["p99"].get<double>(), 0);
}

TEST_F(ToolsSmoke, BenchMixedLooksUpWhileIngesting) {
  json mixed = bench("mixed", {"--ingest-rate=20000"});
  EXPECT_GT(mixed["lookup"]["ok"].get<long>(), 0);
  EXPECT_GT(mixed["ingest"]["blocks_acked"].get<long>(), 0);
  EXPECT_GT(mixed["ratio"]["p99"].get<double>(), 0);
  EXPECT_GT(mixed["ratio_vs_busy_baseline"]["p50"].get<double>(), 0);
}

TEST_F(ToolsSmoke, BenchIngestReportsThroughputAndAckLatency) {
  json ingest = bench("ingest", {"--turns=4"});
  EXPECT_GT(ingest["ingest"]["blocks_per_s"].get<double>(), 0);
  EXPECT_GT(ingest["ingest"]["ack_wait"]["p50_us"].get<double>(), 0);
  EXPECT_EQ(ingest["ingest"]["errors"].get<long>(), 0);
}

TEST_F(ToolsSmoke, BenchFillReachesTheEntryCountAndReadsServerMemory) {
  json fill = bench("fill", {"--entries=20000", "--server-pid=" + std::to_string(server_->pid())});
  EXPECT_GE(fill["fill"]["entries_estimated"].get<long>(), 20000);
  EXPECT_GT(fill["fill"]["rss_after_bytes"].get<long>(), 0);
}

TEST_F(ToolsSmoke, BenchPdComparesLookupPDRouteWithLookupRouteOnRealHits) {
  json pd = bench("pd", {"--replicas=64"}, {admin_, "--rounds=1"});
  EXPECT_EQ(pd["topology"]["prefill_replicas"], 64);
  EXPECT_EQ(pd["topology"]["decode_replicas"], 64);
  EXPECT_GT(pd["lookup"]["answers"]["PREFIX_MATCH"].get<long>(), 0);
  EXPECT_EQ(pd["lookup"]["answers"]["PREFIX_MATCH"], pd["lookup"]["ok"]);
  EXPECT_GT(pd["pd_lookup"]["answers"]["PREFIX_MATCH"].get<long>(), 0);
  EXPECT_EQ(pd["pd_lookup"]["answers"]["PREFIX_MATCH"], pd["pd_lookup"]["ok"]);
  EXPECT_EQ(pd["pd_lookup"]["errors"], 0);
  EXPECT_EQ(pd["phases"].size(), 2u);
  EXPECT_GT(pd["ratio"]["p50"].get<double>(), 0);
  EXPECT_GT(pd["ratio"]["calls_per_s"].get<double>(), 0);
  // The topology the bench pushed is the server's store now: 4 tenants, 64 + 64 each.
  auto [rc, out] = cli({"topology", "show", "--json"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("bench-tenant-3"), std::string::npos) << out;
  EXPECT_NE(out.find("bench-decode-*"), std::string::npos) << out;
  // Over an index that does not hold the chains, the run fails instead of timing misses.
  json miss = bench("pd", {"--replicas=64", "--model=not-filled", "--skip-fill"},
                    {admin_, "--rounds=1"}, 1);
  EXPECT_NE(miss.value("error", "").find("were PREFIX_MATCH"), std::string::npos) << miss.dump();
}

TEST_F(ToolsSmoke, BenchRecoveryRestartsItsOwnServer) {
  const std::string out = dir_ + "/recovery.json";
  auto [code, output] = test::run_to_exit(
      ic::test::executable("inferencecache-bench"),
      {"--entries=5000", "--json=" + out, "recovery",
       std::string("--server-binary=") + ic::test::executable("inferencecache-server"),
       "--signal=kill", "--restart-timeout=30s"},
      60s);
  ASSERT_EQ(code, 0) << output;
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = json::parse(ss.str());
  EXPECT_GT(j["recovery"]["ready_seconds"].get<double>(), 0);
  EXPECT_GT(j["recovery"]["first_match_seconds"].get<double>(), 0);
  EXPECT_EQ(j["recovery"]["stop_exit_code"], 137);
}

/// Runs `inferencecache-bench ... killloop` and returns {exit code, output, --json document}.
std::tuple<int, std::string, json> killloop(const std::string& dir, std::vector<std::string> extra) {
  const std::string out = dir + "/killloop.json";
  std::vector<std::string> args = {
      "--json=" + out, "killloop",
      std::string("--server-binary=") + ic::test::executable("inferencecache-server"),
      "--restart-timeout=30s"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto [code, output] = test::run_to_exit(ic::test::executable("inferencecache-bench"), args, 120s);
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  return {code, output, json::parse(ss.str(), nullptr, false)};
}

TEST(ToolsKillLoop, FiveSigkillsDuringStreamingIngestLoseNoAcknowledgedUpdate) {
  const std::string dir = test::make_temp_dir("ic_killloop");
  auto [code, output, j] = killloop(dir, {"--cycles=5"});
  test::remove_tree(dir);
  ASSERT_EQ(code, 0) << output;
  ASSERT_TRUE(j.is_object()) << output;
  const auto& k = j["killloop"];
  EXPECT_EQ(k["cycles_done"], 5);
  EXPECT_GT(k["acked_chains"].get<int>(), 0);
  EXPECT_GE(k["lookups"].get<int>(), k["acked_chains"].get<int>());
  EXPECT_EQ(k["lost"], 0);
  EXPECT_EQ(k["changed"], 0);
  ASSERT_EQ(k["cycles"].size(), 6u);
  for (int c = 0; c < 5; ++c) EXPECT_EQ(k["cycles"][c]["kill_exit_code"], 137) << c;
  EXPECT_EQ(k["cycles"][5]["exit_code"], 0);
}

// The check can fail: a global cap far below what the loop acknowledges evicts acknowledged
// chains, and the loop must report them lost (exit 1).
TEST(ToolsKillLoop, ReportsAcknowledgedUpdatesTheServerNoLongerHolds) {
  const std::string dir = test::make_temp_dir("ic_killloop_cap");
  auto [code, output, j] =
      killloop(dir, {"--cycles=2", "--kill-after-max=400ms", "--server-arg=--max-index-entries=64"});
  test::remove_tree(dir);
  EXPECT_EQ(code, 1) << output;
  ASSERT_TRUE(j.is_object()) << output;
  EXPECT_GT(j["killloop"]["lost"].get<int>(), 0) << output;
  EXPECT_NE(output.find("acknowledged chain"), std::string::npos) << output;
}

TEST_F(ToolsSmoke, BenchRefusesRemoteTargetsAndBadFlags) {
  EXPECT_EQ(test::run_to_exit(ic::test::executable("inferencecache-bench"),
                              {"--addr=10.1.2.3:9090", "baseline"}, 20s)
                .first,
            2);
  EXPECT_EQ(test::run_to_exit(ic::test::executable("inferencecache-bench"),
                              {"--duration=0s", "baseline"}, 20s)
                .first,
            2);
  EXPECT_EQ(test::run_to_exit(ic::test::executable("inferencecache-bench"),
                              {"lookup", "--concurrency=0"}, 20s)
                .first,
            2);
  EXPECT_EQ(test::run_to_exit(ic::test::executable("inferencecache-bench"), {}, 20s).first, 2);
  EXPECT_EQ(test::run_to_exit(ic::test::executable("inferencecache-bench"), {"pd"}, 20s).first,
            2);  // no --admin-addr
  EXPECT_EQ(test::run_to_exit(ic::test::executable("inferencecache-bench"),
                              {"pd", "--admin-addr=10.0.0.1:8081"}, 20s)
                .first,
            2);
  EXPECT_EQ(test::run_to_exit(ic::test::executable("inferencecache-bench"),
                              {"pd", "--admin-addr=127.0.0.1:1", "--decode-replicas=0"}, 20s)
                .first,
            2);
  EXPECT_EQ(test::run_to_exit(ic::test::executable("inferencecache-bench"),
                              {"killloop", "--server-binary=x", "--cycles=0"}, 20s)
                .first,
            2);
}

}  // namespace
}  // namespace ic::tools
