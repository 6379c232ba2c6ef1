// deploy/pd/topology.json and deploy/templates/templates.json are valid store bodies: the
// server's own parsers (topology/, templates/) accept them, and they mean what
// docs/pd-and-templates.md says (derived transport, rendered text, stable-prefix hash,
// revision). The CLI's `show` tables are checked on the canonical GET bodies of the samples.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "templates/template_json.hpp"
#include "templates/template_store.hpp"
#include "tests/support/test_paths.hpp"
#include "tools/cli/format.hpp"
#include "tools/common/codec.hpp"
#include "topology/topology_json.hpp"

namespace ic::tools {
namespace {

std::string read_sample(const std::string& rel) {
  std::ifstream in(ic::test::source_dir() + "/" + rel, std::ios::binary);
  EXPECT_TRUE(in) << rel;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(DeploySamples, TopologySampleParsesAndDerivesNixlForTheNvidiaPools) {
  auto set = topology::parse_topology_body(read_sample("deploy/pd/topology.json"));
  ASSERT_TRUE(set) << set.error();
  ASSERT_EQ(set->topologies.size(), 2u);
  const auto& llama = set->topologies[0];  // sorted by (namespace, name)
  EXPECT_EQ(llama.name, "llama3-pd");
  EXPECT_EQ(llama.hash_scheme, "vllm");
  EXPECT_TRUE(llama.transport.empty());
  auto t = topology::derive_transport(llama, llama.prefill_pools[0], llama.decode_pools[0]);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(*t, "NIXL");
  EXPECT_EQ(llama.selection.local_prefill_max_uncached_tokens, 256);
  const auto& qwen = set->topologies[1];
  EXPECT_EQ(qwen.name, "qwen3-sglang-pd");
  EXPECT_EQ(qwen.transport, "Mooncake");

  // The canonical GET body round-trips and `topology show` prints one row per topology.
  const std::string body = topology::encode_topology_set(*set);
  auto again = topology::parse_topology_body(body);
  ASSERT_TRUE(again) << again.error();
  EXPECT_EQ(*again, *set);
  const std::string table = format_topology_table(body);
  EXPECT_EQ(table.rfind("topologies: 2\n", 0), 0u) << table;
  EXPECT_NE(table.find("serving/llama3-pd"), std::string::npos) << table;
  EXPECT_NE(table.find("(derived)"), std::string::npos) << table;
  EXPECT_NE(table.find("prefill-h100[vllm-prefill-*]"), std::string::npos) << table;
  EXPECT_NE(table.find("Mooncake"), std::string::npos) << table;
  EXPECT_NE(table.find("decode[sglang-decode-0,sglang-decode-burst-?]"), std::string::npos) << table;
}

TEST(DeploySamples, TemplatesSampleRendersTheSpecScenarios) {
  auto set = templates::parse_templates_body(read_sample("deploy/templates/templates.json"));
  ASSERT_TRUE(set) << set.error();
  ASSERT_EQ(set->templates.size(), 2u);
  templates::template_snapshot snap(*set);

  // pd-templates §3.8 #1 (the sample's support-agent is the spec's T1).
  auto r = templates::render(snap, {"serving/support-agent",
                                    {{"product", "Acme"}, {"history", "user: hi"}}, "serving"});
  EXPECT_EQ(r.reason_code, "OK");
  EXPECT_EQ(r.rendered_prompt,
            "You are a helpful support agent for Acme.\nConversation so far:\nuser: hi\n");
  EXPECT_EQ(to_hex(r.stable_prefix_hash), "e814c61e33490731");
  EXPECT_EQ(r.template_revision, "827a07b8803957c3e869357a82c0485f");
  EXPECT_EQ(r.tenant_namespace, "serving");
  // §3.8 #12 (the kubebuilder `{{.name}}` sample, T2).
  auto s = templates::render(snap, {"sample", {{"system", "be brief"}, {"user", "hello"}}, "serving"});
  EXPECT_EQ(s.rendered_prompt, "system: be brief\nuser: hello\n");
  EXPECT_EQ(to_hex(s.stable_prefix_hash), "b070fdf4c4782b8e");

  // What `inferencecache render` prints for that answer once the server renders it.
  v1::RenderTemplateResponse wire;
  wire.set_rendered_prompt(r.rendered_prompt);
  wire.set_stable_prefix_hash(r.stable_prefix_hash);
  wire.set_tenant_namespace(r.tenant_namespace);
  wire.set_reason_code(r.reason_code);
  wire.set_template_revision(r.template_revision);
  EXPECT_EQ(format_render_table(wire),
            "reason: OK   revision: 827a07b8803957c3e869357a82c0485f   namespace: serving\n"
            "stable prefix hash: e814c61e33490731\n"
            "rendered prompt (72 bytes):\n"
            "You are a helpful support agent for Acme.\nConversation so far:\nuser: hi\n");

  // `templates show` over the GET body (with the computed revisions).
  const std::string table = format_templates_table(snap.listing());
  EXPECT_EQ(table.rfind("templates: 2\n", 0), 0u) << table;
  EXPECT_NE(table.find("serving/support-agent"), std::string::npos) << table;
  EXPECT_NE(table.find("827a07b8803957c3e869357a82c0485f"), std::string::npos) << table;
  EXPECT_NE(table.find("product:S,history:M"), std::string::npos) << table;
}

}  // namespace
}  // namespace ic::tools
