// The CLI without a server: request building from flags, output formatting (table and
// JSON), and usage errors (exit 2, one line on stderr) through the real command line.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "index/fingerprint.hpp"
#include "tools/cli/args.hpp"
#include "tools/cli/format.hpp"
#include "tools/cli/verbs.hpp"
#include "tools/common/codec.hpp"

namespace ic::tools {
namespace {

/// Runs the whole command line; returns {exit code, stderr}.
std::pair<int, std::string> run(std::vector<std::string> args) {
  args.insert(args.begin(), "inferencecache");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  testing::internal::CaptureStderr();
  int rc = run_cli(static_cast<int>(argv.size()), argv.data());
  return {rc, testing::internal::GetCapturedStderr()};
}

std::string temp_file(const std::string& name, const std::string& content) {
  std::string path = testing::TempDir() + "/ic_cli_test_" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

// --- pd-route -------------------------------------------------------------------------------

TEST(CliPdRoute, PrefixFlagsMapOneToOneOntoTheRequest) {
  pd_route_options o;
  o.tenant = "serving";
  o.model = "m";
  o.topology = "serving/pd";
  o.prefix = "0x0102030405060708";
  o.prefix_tokens = 256;
  v1::LookupPDRouteRequest req;
  std::string err;
  ASSERT_TRUE(build_pd_route_request(o, &req, &err)) << err;
  EXPECT_EQ(req.tenant_id(), "serving");
  EXPECT_EQ(req.model_id(), "m");
  EXPECT_EQ(req.pd_topology_ref(), "serving/pd");
  EXPECT_EQ(req.prefix_hash(), std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
  EXPECT_EQ(req.prefix_token_count(), 256);
}

TEST(CliPdRoute, TokensBecomeTheDeepestFullBlockAndItsCumulativeCount) {
  pd_route_options o;
  o.topology = "pd";
  o.block_tokens = 4;
  o.tokens = "1,2,3,4,5,6,7,8,9,10";  // two full blocks; the partial third is not hashed
  v1::LookupPDRouteRequest req;
  std::string err;
  ASSERT_TRUE(build_pd_route_request(o, &req, &err)) << err;
  const std::vector<std::uint32_t> toks = {1, 2, 3, 4, 5, 6, 7, 8};
  auto chain = ic::index::fingerprint_chain(toks.data(), toks.size(), 4);
  ASSERT_EQ(chain.size(), 2u);
  EXPECT_EQ(req.prefix_hash(), ic::index::to_wire(chain[1]));
  EXPECT_EQ(req.prefix_token_count(), 8);
  EXPECT_EQ(req.tenant_id(), "default");
}

TEST(CliPdRoute, BadFlagCombinationsAreOneLineErrors) {
  auto error_of = [](pd_route_options o) {
    v1::LookupPDRouteRequest req;
    std::string err;
    return build_pd_route_request(o, &req, &err) ? std::string("<accepted>") : err;
  };
  pd_route_options base;
  base.topology = "serving/pd";
  base.prefix = "0102030405060708";
  EXPECT_EQ(error_of(base), "<accepted>");
  auto o = base;
  o.topology.clear();
  EXPECT_NE(error_of(o).find("--topology"), std::string::npos);
  o = base;
  o.tokens = "1,2";
  EXPECT_NE(error_of(o).find("one of --prefix or --tokens"), std::string::npos);
  o = base;
  o.prefix.clear();
  EXPECT_NE(error_of(o).find("one of --prefix or --tokens"), std::string::npos);
  o = base;
  o.prefix = "zz!";
  EXPECT_NE(error_of(o), "<accepted>");
  o = base;
  o.prefix_tokens = -1;
  EXPECT_NE(error_of(o).find("negative"), std::string::npos);
  o = base;
  o.prefix.clear();
  o.tokens = "1,2,3";  // no full block of 16
  EXPECT_NE(error_of(o).find("no full block"), std::string::npos);
  o.block_tokens = 0;
  EXPECT_NE(error_of(o).find("--block-tokens"), std::string::npos);
}

TEST(CliPdRoute, TableAndJsonOfAFailOpenAnswer) {
  v1::LookupPDRouteResponse resp;
  resp.set_reason_code("NO_HINT");  // what the reference stub answers
  EXPECT_FALSE(pd_route_has_pair(resp));
  EXPECT_EQ(format_pd_route_table(resp),
            "reason: NO_HINT\nno prefill/decode pair: route with the gateway's own default\n");
  EXPECT_EQ(to_json(resp),
            R"({"prefillReplicaId":"","decodeReplicaId":"","transportHint":"","reasonCode":"NO_HINT"})");
  resp.clear_reason_code();
  EXPECT_EQ(format_pd_route_table(resp).substr(0, 16), "reason: NO_HINT\n");
}

TEST(CliPdRoute, TableAndJsonOfAPair) {
  v1::LookupPDRouteResponse resp;
  resp.set_reason_code("PREFIX_MATCH");
  resp.set_prefill_replica_id("p-1");
  resp.set_decode_replica_id("d-1");
  resp.set_transport_hint("NIXL");
  EXPECT_TRUE(pd_route_has_pair(resp));
  EXPECT_EQ(format_pd_route_table(resp),
            "reason: PREFIX_MATCH\n"
            "PREFILL                 DECODE                  TRANSPORT\n"
            "p-1                     d-1                     NIXL\n");
  auto j = nlohmann::json::parse(to_json(resp));
  EXPECT_EQ(j["prefillReplicaId"], "p-1");
  EXPECT_EQ(j["transportHint"], "NIXL");
}

// --- render ---------------------------------------------------------------------------------

TEST(CliRender, NamespaceAndNameMakeTheRefAndTheTenant) {
  render_options o;
  o.namespace_name = "serving";
  o.name = "support-agent";
  o.vars = {"product=Acme", "history=user: a=b"};  // the value keeps later '='
  v1::RenderTemplateRequest req;
  std::string err;
  ASSERT_TRUE(build_render_request(o, &req, &err)) << err;
  EXPECT_EQ(req.template_ref(), "serving/support-agent");
  EXPECT_EQ(req.tenant_id(), "serving");
  EXPECT_EQ(req.variables().at("product"), "Acme");
  EXPECT_EQ(req.variables().at("history"), "user: a=b");
  EXPECT_EQ(req.variables().size(), 2u);
}

TEST(CliRender, BareNameResolvesInTheTenantAndEmptyValuesArePresent) {
  render_options o;
  o.name = "support-agent";
  o.tenant = "serving";
  o.vars = {"product="};
  v1::RenderTemplateRequest req;
  std::string err;
  ASSERT_TRUE(build_render_request(o, &req, &err)) << err;
  EXPECT_EQ(req.template_ref(), "support-agent");
  EXPECT_EQ(req.tenant_id(), "serving");
  ASSERT_EQ(req.variables().count("product"), 1u);
  EXPECT_EQ(req.variables().at("product"), "");
}

TEST(CliRender, VarFileReadsTheValueVerbatim) {
  const std::string path = temp_file("history.txt", "user: hi\nassistant: hello\n");
  render_options o;
  o.name = "t";
  o.var_files = {"history=" + path};
  v1::RenderTemplateRequest req;
  std::string err;
  ASSERT_TRUE(build_render_request(o, &req, &err)) << err;
  EXPECT_EQ(req.variables().at("history"), "user: hi\nassistant: hello\n");
}

TEST(CliRender, BadVariablesAndNamesAreOneLineErrors) {
  auto error_of = [](render_options o) {
    v1::RenderTemplateRequest req;
    std::string err;
    return build_render_request(o, &req, &err) ? std::string("<accepted>") : err;
  };
  render_options base;
  base.name = "t";
  EXPECT_EQ(error_of(base), "<accepted>");
  auto o = base;
  o.name.clear();
  EXPECT_NE(error_of(o).find("--name"), std::string::npos);
  o = base;
  o.name = "serving/t";
  EXPECT_NE(error_of(o).find("'/'"), std::string::npos);
  o = base;
  o.namespace_name = "a/b";
  EXPECT_NE(error_of(o).find("--namespace"), std::string::npos);
  o = base;
  o.vars = {"novalue"};
  EXPECT_NE(error_of(o).find("KEY=VALUE"), std::string::npos);
  o.vars = {"=x"};
  EXPECT_NE(error_of(o).find("KEY=VALUE"), std::string::npos);
  o.vars = {"a=1", "a=2"};
  EXPECT_NE(error_of(o).find("twice"), std::string::npos);
  o.vars = {"a=1"};
  o.var_files = {"a=" + temp_file("dup", "x")};
  EXPECT_NE(error_of(o).find("twice"), std::string::npos);
  o = base;
  o.var_files = {"a=/nonexistent/ic_cli_test"};
  EXPECT_NE(error_of(o).find("cannot read"), std::string::npos);
}

TEST(CliRender, TableOfTheStubAnswerSaysThereIsNoStableHash) {
  v1::RenderTemplateResponse resp;
  resp.set_reason_code("OK");  // the reference stub: OK and nothing else
  EXPECT_EQ(format_render_table(resp),
            "reason: OK   revision: -   namespace: -\n"
            "stable prefix hash: - (none: hash the raw prompt)\n"
            "rendered prompt (0 bytes):\n");
  EXPECT_EQ(render_to_json(resp),
            R"({"renderedPrompt":"","stablePrefixHash":"","tenantNamespace":"","reasonCode":"OK",)"
            R"("templateRevision":""})");
}

TEST(CliRender, TableAndJsonOfARenderedPrompt) {
  v1::RenderTemplateResponse resp;
  resp.set_reason_code("OK");
  resp.set_rendered_prompt("system: be brief\nuser: hello");
  resp.set_stable_prefix_hash(std::string("\xb0\x70\xfd\xf4\xc4\x78\x2b\x8e", 8));
  resp.set_tenant_namespace("serving");
  resp.set_template_revision("0123456789abcdef0123456789abcdef");
  EXPECT_EQ(format_render_table(resp),
            "reason: OK   revision: 0123456789abcdef0123456789abcdef   namespace: serving\n"
            "stable prefix hash: b070fdf4c4782b8e\n"
            "rendered prompt (28 bytes):\n"
            "system: be brief\nuser: hello\n");  // a final newline is added for the terminal
  auto j = nlohmann::json::parse(render_to_json(resp));
  EXPECT_EQ(j["stablePrefixHash"], "b070fdf4c4782b8e");
  EXPECT_EQ(j["renderedPrompt"], "system: be brief\nuser: hello");
  EXPECT_EQ(j["tenantNamespace"], "serving");
  resp.set_rendered_prompt("bad \xff byte");
  EXPECT_EQ(nlohmann::json::parse(render_to_json(resp))["renderedPrompt"], "bad \xEF\xBF\xBD byte");
}

// --- admin stores and lookup ----------------------------------------------------------------

TEST(CliAdmin, ReasonLineIsTheFirstLineOfTheBody) {
  http_response res;
  res.status = 400;
  res.body = "invalid topology: topologies[0].hashScheme: must not be empty\r\nmore\n";
  EXPECT_EQ(http_reason_line(res),
            "HTTP 400: invalid topology: topologies[0].hashScheme: must not be empty");
  res.status = 404;
  res.body = "404 page not found\n";
  EXPECT_EQ(http_reason_line(res), "HTTP 404: 404 page not found");
  res.body.clear();
  EXPECT_EQ(http_reason_line(res), "HTTP 404: (no body)");
}

TEST(CliAdmin, TablesNeedTheirDocumentShape) {
  EXPECT_EQ(format_topology_table("not json"), "");
  EXPECT_EQ(format_topology_table(R"({"templates":[]})"), "");
  EXPECT_EQ(format_templates_table(R"({"templates":[1]})"), "");
  EXPECT_EQ(format_topology_table(R"({"version":1,"topologies":[]})"), "topologies: 0\n");
  EXPECT_EQ(format_templates_table(R"({"version":1,"templates":[]})"), "templates: 0\n");
  EXPECT_EQ(pretty_json(R"({"a":1})"), "{\n  \"a\": 1\n}");
  EXPECT_EQ(pretty_json("plain"), "plain");
}

TEST(CliLookup, FlagsBuildTheRequestAsBefore) {
  lookup_options o;
  o.model = "llama";
  o.hashes = "00000000000000a1,AAAAAAAAAAI=";
  o.block_tokens = 64;
  v1::LookupRouteRequest req;
  std::string err;
  ASSERT_TRUE(build_lookup_request(o, &req, &err)) << err;
  ASSERT_EQ(req.block_hashes_size(), 2);
  EXPECT_EQ(to_hex(req.block_hashes(0)), "00000000000000a1");
  EXPECT_EQ(to_hex(req.block_hashes(1)), "0000000000000002");
  EXPECT_EQ(req.block_token_counts(1), 64);
  EXPECT_EQ(req.hash_scheme(), "vllm");
  lookup_options none;
  EXPECT_FALSE(build_lookup_request(none, &req, &err));
  EXPECT_NE(err.find("give --tokens"), std::string::npos);
}

TEST(CliLookup, TableColumns) {
  v1::LookupRouteResponse resp;
  resp.set_reason_code("PREFIX_MATCH");
  resp.set_lookup_latency_us(41);
  auto* s = resp.add_replica_scores();
  s->set_replica_id("vllm-0");
  s->set_score(128);
  s->set_matched_tokens(128);
  s->set_estimated_cache_hit_prob(1);
  s->set_tier(v1::CACHE_TIER_T1);
  EXPECT_EQ(format_lookup_table(resp),
            "reason: PREFIX_MATCH   server latency: 41 us\n"
            "REPLICA                 SCORE     MATCHED_TOKENS  HIT_PROB  TIER\n"
            "vllm-0                  128.0000  128             1.000     T1\n");
}

// --- the command line: usage errors exit 2 with one line, before any connection -------------

TEST(CliCommandLine, UsageErrorsExitTwoWithOneLine) {
  const std::string not_json = temp_file("not.json", "{nope");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"pd-route", "--prefix=0102030405060708"},                  // no --topology
           {"pd-route", "--topology=pd"},                              // no prefix
           {"pd-route", "--topology=pd", "--prefix=00", "--tokens=1"},  // both
           {"pd-route", "--topology=pd", "--prefix=00", "--bogus"},    // unknown flag
           {"pd-route", "--topology=pd", "--prefix=00", "--prefix-tokens=x"},  // not a number
           {"render"},                                                 // no --name
           {"render", "--name=t", "--var=novalue"},                    // not KEY=VALUE
           {"render", "--name=a/b"},                                   // '/' in the name
           {"topology"},                                               // no push/show
           {"topology", "push"},                                       // no file
           {"topology", "push", "/nonexistent/topology.json"},         // unreadable
           {"topology", "push", not_json},                             // not JSON
           {"topology", "push", not_json, "--method=PATCH"},           // bad method
           {"templates", "frobnicate"},                                // unknown sub-verb
           {"templates", "push", not_json},                            // not JSON
           {"--timeout=soon", "health"},                               // bad global value
       }) {
    auto [rc, err] = run(args);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(rc, 2) << joined << "-> " << err;
    EXPECT_EQ(err.rfind("inferencecache", 0), 0u) << joined << "-> " << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << joined << "-> " << err;
  }
}

TEST(CliCommandLine, EachVarTakesExactlyOneValue) {
  // `--var a=1 b=2`: b=2 is a stray argument, not a second variable (exit 2, one line).
  auto [rc, err] = run({"render", "--name=t", "--var", "a=1", "b=2"});
  EXPECT_EQ(rc, 2) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  // Repeated --var reaches the request; nothing listens on port 1, so the call fails (exit 1)
  // after the flags were accepted.
  std::tie(rc, err) = run({"--addr=127.0.0.1:1", "--timeout=2s", "render", "--name=t", "--var",
                           "a=1", "--var=b=2"});
  EXPECT_EQ(rc, 1) << err;
  EXPECT_NE(err.find("UNAVAILABLE"), std::string::npos) << err;
}

TEST(CliCommandLine, AdminVerbsReportAnUnreachablePortAsExitOne) {
  // Port 1 on loopback: nothing listens, so the connection is refused (exit 1, one line).
  const std::string body = temp_file("ok.json", R"({"version":1,"topologies":[]})");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--admin-addr=127.0.0.1:1", "topology", "push", body},
           {"--admin-addr=127.0.0.1:1", "templates", "show"}}) {
    auto [rc, err] = run(args);
    EXPECT_EQ(rc, 1) << err;
    EXPECT_NE(err.find("127.0.0.1:1"), std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  }
  auto [rc, err] = run({"--admin-addr=nohostport", "topology", "show"});
  EXPECT_EQ(rc, 2) << err;
}

}  // namespace
}  // namespace ic::tools
