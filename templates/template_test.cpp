// /templates store and RenderTemplate: the scenarios of pd-templates.md §3.8 decidable
// without the server (named after their numbers), plus the push rules of §3.3 and §3.4.
#include "templates/template_store.hpp"

#include <string>

#include <gtest/gtest.h>

#include "admin_json/json_reader.hpp"
#include "templates/template_json.hpp"

namespace ic::templates {
namespace {

std::string hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

const std::string t1_body =
    "You are a helpful support agent for {{ product }}.\nConversation so far:\n{{ history }}\n";
const std::string t1_rev = "827a07b8803957c3e869357a82c0485f";

std::string json_string(const std::string& s) { return admin_json::json(s).dump(); }

std::string t1_json(const std::string& product_description = "fixed per deployment",
                    const std::string& body = t1_body) {
  return R"({"namespace":"serving","name":"support-agent","body":)" + json_string(body) +
         R"(,"slots":[{"name":"product","type":"Stable","required":true,"description":)" +
         json_string(product_description) + R"(},{"name":"history","type":"Mutable"}]})";
}

const std::string t2_json =
    R"({"namespace":"serving","name":"sample","body":"system: {{.system}}\nuser: {{.user}}\n",)"
    R"("slots":[{"name":"system","type":"Stable","required":true},{"name":"user","type":"Mutable","required":true}]})";
const std::string t3_json =
    R"({"namespace":"serving","name":"mut-first","body":"{{ q }} — answer briefly.",)"
    R"("slots":[{"name":"q","type":"Mutable","required":true}]})";
const std::string t4_json =
    R"({"namespace":"serving","name":"stable-only","body":"Policy: {{ policy }}",)"
    R"("slots":[{"name":"policy","type":"Stable","required":true}]})";

std::string set_of(std::initializer_list<std::string> templates) {
  std::string out = R"({"version":1,"templates":[)";
  bool first = true;
  for (const auto& t : templates) {
    if (!first) out += ",";
    out += t;
    first = false;
  }
  return out + "]}";
}

class RenderScenarios : public ::testing::Test {
 protected:
  void SetUp() override { push(set_of({t1_json(), t2_json, t3_json, t4_json})); }
  void push(const std::string& body) {
    auto set = parse_templates_body(body);
    ASSERT_TRUE(set) << set.error();
    store.apply(std::move(*set));
  }
  render_response call(std::string ref, std::vector<std::pair<std::string, std::string>> vars,
                       std::string tenant = "serving") {
    return render(*store.current(), {std::move(ref), std::move(vars), std::move(tenant)});
  }
  render_response t1(std::vector<std::pair<std::string, std::string>> vars) {
    return call("serving/support-agent", std::move(vars));
  }
  static void expect_empty(const render_response& r, std::string_view reason, std::string revision) {
    EXPECT_EQ(r.reason_code, reason);
    EXPECT_EQ(r.rendered_prompt, "");
    EXPECT_EQ(r.stable_prefix_hash, "");
    EXPECT_EQ(r.tenant_namespace, "");
    EXPECT_EQ(r.template_revision, revision);
  }
  template_store store;
};

TEST_F(RenderScenarios, Scenario01_RendersWithStablePrefixHashAndRevision) {
  auto r = t1({{"product", "Acme"}, {"history", "user: hi"}});
  EXPECT_EQ(r.reason_code, "OK");
  EXPECT_EQ(r.rendered_prompt, "You are a helpful support agent for Acme.\nConversation so far:\nuser: hi\n");
  EXPECT_EQ(hex(r.stable_prefix_hash), "e814c61e33490731");
  EXPECT_EQ(stable_prefix_hash("You are a helpful support agent for Acme.\nConversation so far:\n"),
            r.stable_prefix_hash);  // over the 63-byte stable text
  EXPECT_EQ(r.tenant_namespace, "serving");
  EXPECT_EQ(r.template_revision, t1_rev);
}

TEST_F(RenderScenarios, Scenario02_MutableValueDoesNotChangeTheHash) {
  auto a = t1({{"product", "Acme"}, {"history", "user: hi"}});
  auto b = t1({{"product", "Acme"}, {"history", "user: bye"}});
  EXPECT_EQ(a.stable_prefix_hash, b.stable_prefix_hash);
  EXPECT_NE(a.rendered_prompt, b.rendered_prompt);
}

TEST_F(RenderScenarios, Scenario03_StableValueChangesTheHash) {
  EXPECT_EQ(hex(t1({{"product", "Globex"}, {"history", "x"}}).stable_prefix_hash), "d0b76e077139dfce");
}

TEST_F(RenderScenarios, Scenario04_MissingRequiredSlotIsRenderError) {
  expect_empty(t1({{"history", "user: hi"}}), "RENDER_ERROR", t1_rev);
}

TEST_F(RenderScenarios, Scenario05_AbsentOptionalSlotRendersEmpty) {
  auto r = t1({{"product", "Acme"}});
  EXPECT_EQ(r.reason_code, "OK");
  EXPECT_EQ(r.rendered_prompt.substr(r.rendered_prompt.size() - 9), "so far:\n\n");
  EXPECT_EQ(hex(r.stable_prefix_hash), "e814c61e33490731");
}

TEST_F(RenderScenarios, Scenario06_UndeclaredVariableIsRenderError) {
  expect_empty(t1({{"product", "Acme"}, {"histroy", "typo"}}), "RENDER_ERROR", t1_rev);
}

TEST_F(RenderScenarios, Scenario07_UnknownRefIsNotFound) {
  expect_empty(call("serving/nope", {{"product", "Acme"}}), "TEMPLATE_NOT_FOUND", "");
}

TEST_F(RenderScenarios, Scenario08_BareNameResolvesInTheTenantNamespace) {
  EXPECT_EQ(call("support-agent", {{"product", "Acme"}, {"history", "user: hi"}}),
            t1({{"product", "Acme"}, {"history", "user: hi"}}));
}

TEST_F(RenderScenarios, Scenario09_ForeignNamespaceIsNotFound) {
  expect_empty(call("serving/support-agent", {{"product", "Acme"}}, "other"), "TEMPLATE_NOT_FOUND", "");
}

TEST_F(RenderScenarios, Scenario10_EmptyTenantIsNotFound) {
  expect_empty(call("support-agent", {{"product", "Acme"}}, ""), "TEMPLATE_NOT_FOUND", "");
}

TEST_F(RenderScenarios, Scenario11_ReservedTenantIsNotFound) {
  expect_empty(call("serving/support-agent", {{"product", "Acme"}}, "inferencecache.io/probe"),
               "TEMPLATE_NOT_FOUND", "");
}

TEST_F(RenderScenarios, Scenario12_KubebuilderAliasSample) {
  auto r = call("sample", {{"system", "be brief"}, {"user", "hello"}});
  EXPECT_EQ(r.reason_code, "OK");
  EXPECT_EQ(r.rendered_prompt, "system: be brief\nuser: hello\n");
  EXPECT_EQ(hex(r.stable_prefix_hash), "b070fdf4c4782b8e");
  EXPECT_EQ(r.stable_prefix_hash, stable_prefix_hash("system: be brief\nuser: "));
}

TEST_F(RenderScenarios, Scenario13_MutableFirstHasNoStablePrefix) {
  auto r = call("mut-first", {{"q", "why?"}});
  EXPECT_EQ(r.reason_code, "OK");
  EXPECT_EQ(r.rendered_prompt, "why? — answer briefly.");
  EXPECT_EQ(r.stable_prefix_hash, "");
}

TEST_F(RenderScenarios, Scenario14_StableOnlyHashesTheWholeText) {
  auto r = call("stable-only", {{"policy", "x"}});
  EXPECT_EQ(r.rendered_prompt, "Policy: x");
  EXPECT_EQ(r.stable_prefix_hash, stable_prefix_hash("Policy: x"));
  EXPECT_EQ(r.stable_prefix_hash.size(), 8u);
}

TEST_F(RenderScenarios, Scenario15_ValuesAreInsertedLiterally) {
  auto r = t1({{"product", "{{ history }}"}, {"history", "H"}});
  EXPECT_EQ(r.rendered_prompt, "You are a helpful support agent for {{ history }}.\nConversation so far:\nH\n");
}

TEST_F(RenderScenarios, Scenario16_RepeatedStableSlot) {
  push(set_of({R"({"namespace":"serving","name":"rep","body":"A {{ x }} B {{ x }}","slots":[{"name":"x","type":"Stable"}]})"}));
  auto r = call("rep", {{"x", "1"}});
  EXPECT_EQ(r.rendered_prompt, "A 1 B 1");
  EXPECT_EQ(r.stable_prefix_hash, stable_prefix_hash("A 1 B 1"));
}

TEST_F(RenderScenarios, Scenario17_EmptyValueSatisfiesRequired) {
  auto r = t1({{"product", ""}});
  EXPECT_EQ(r.reason_code, "OK");
  EXPECT_EQ(r.rendered_prompt, "You are a helpful support agent for .\nConversation so far:\n\n");
}

TEST_F(RenderScenarios, Scenario18_OutputOverOneMebibyteIsRenderError) {
  expect_empty(t1({{"product", "Acme"}, {"history", std::string(1'048'577, 'h')}}), "RENDER_ERROR", t1_rev);
  // Exactly at the limit is fine.
  const std::size_t fixed = t1({{"product", "Acme"}}).rendered_prompt.size();
  EXPECT_EQ(t1({{"product", "Acme"}, {"history", std::string(max_rendered_bytes - fixed, 'h')}}).reason_code, "OK");
}

TEST_F(RenderScenarios, Scenario19_MutableBeforeStableLeavesNoStableText) {
  push(set_of({R"({"namespace":"serving","name":"qs","body":"{{ q }} {{ sys }}","slots":[{"name":"q","type":"Mutable"},{"name":"sys","type":"Stable"}]})"}));
  auto r = call("qs", {{"q", "a"}, {"sys", "b"}});
  EXPECT_EQ(r.rendered_prompt, "a b");
  EXPECT_EQ(r.stable_prefix_hash, "");
}

TEST_F(RenderScenarios, Scenario20_PlaceholderSpellingsAreEquivalent) {
  std::string revisions;
  for (const char* ph : {"{{product}}", "{{  product  }}", "{{.product}}", "{{\tproduct }}"}) {
    push(set_of({R"({"namespace":"serving","name":"p","body":)" + json_string("P=" + std::string(ph) + ";") +
                 R"(,"slots":[{"name":"product","type":"Stable"}]})"}));
    auto r = call("p", {{"product", "Acme"}});
    EXPECT_EQ(r.rendered_prompt, "P=Acme;") << ph;
    EXPECT_EQ(revisions.find(r.template_revision), std::string::npos) << "revision differs per body";
    revisions += r.template_revision + " ";
  }
}

TEST_F(RenderScenarios, Scenario21_EscapeEmitsOpeningBraces) {
  push(set_of({R"({"namespace":"serving","name":"e","body":"a {{ '{{' }} b {{\"{{\"}} c }} {% {# }}","slots":[]})"}));
  EXPECT_EQ(call("e", {}).rendered_prompt, "a {{ b {{ c }} {% {# }}");
}

TEST(TemplatePush, Scenario22_PushRulesEachRefused) {
  const auto error_of = [](const std::string& t) {
    auto r = parse_templates_body(set_of({t}));
    return r ? std::string("<accepted>") : r.error();
  };
  const auto with = [](const std::string& body, const std::string& slots) {
    return R"({"namespace":"serving","name":"x","body":)" + json_string(body) + R"(,"slots":)" + slots + "}";
  };
  const std::string product = R"([{"name":"product","type":"Stable"}])";
  EXPECT_EQ(error_of(with("{{ nope }}", product)),
            R"(invalid templates: templates[0]: body: placeholder names undeclared slot "nope" at byte 0)");
  EXPECT_EQ(error_of(with("x", R"([{"name":"a","type":"Stable"},{"name":"a","type":"Mutable"}])")),
            R"(invalid templates: templates[0].slots[1].name: duplicate slot "a")");
  EXPECT_EQ(error_of(with("x", R"([{"name":"a","type":"stable"}])")),
            R"(decode templates: templates[0].slots[0].type: must be "Stable" or "Mutable", got "stable")");
  EXPECT_EQ(error_of(with("hi {{ product", product)),
            "invalid templates: templates[0]: body: unterminated placeholder at byte 3");
  EXPECT_EQ(error_of(with("{{ a.b }}", R"([{"name":"a","type":"Stable"}])")),
            "invalid templates: templates[0]: body: malformed placeholder (expected }} after the name) at byte 0");
  EXPECT_EQ(error_of(with("", "[]")), "invalid templates: templates[0].body: must not be empty");
  // More of §3.3 and the store mechanics.
  EXPECT_EQ(error_of(with("{{ product | upper }}", product)),
            "invalid templates: templates[0]: body: malformed placeholder (expected }} after the name) at byte 0");
  EXPECT_EQ(error_of(with("{{ 'x' }}", "[]")),
            "invalid templates: templates[0]: body: only '{{' may be quoted inside {{ }} at byte 0");
  EXPECT_EQ(error_of(with("{{ }}", "[]")),
            "invalid templates: templates[0]: body: malformed placeholder (expected an identifier after {{) at byte 0");
  EXPECT_EQ(error_of(with("x", R"([{"name":"9a","type":"Stable"}])")),
            R"(invalid templates: templates[0].slots[0].name: must match [A-Za-z_][A-Za-z0-9_]*, got "9a")");
  EXPECT_EQ(error_of(with("x", R"([{"name":"a"}])")), "decode templates: templates[0].slots[0].type: required");
  EXPECT_EQ(error_of(with("x", "[]") .replace(1, 0, R"("colour":1,)")),
            R"(decode templates: templates[0].colour: unknown field "colour")");
  EXPECT_EQ(error_of(with("declared but unused is fine", product)), "<accepted>");
  auto v2 = parse_templates_body(R"({"version":2,"templates":[]})");
  ASSERT_FALSE(v2);
  EXPECT_EQ(v2.error(), "decode templates: version: unsupported templates version 2 (accepted 1)");
  auto dup = parse_templates_body(set_of({with("a", "[]"), with("b", "[]")}));
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error(), R"(invalid templates: templates[1]: duplicate ref "serving/x")");
  auto big = parse_templates_body(std::string(max_templates_body_bytes + 1, ' '));
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error(), "decode templates: body larger than 8388608 bytes");
}

TEST_F(RenderScenarios, Scenario23_DescriptionDoesNotChangeTheRevision) {
  push(set_of({t1_json("something else entirely")}));
  EXPECT_EQ(t1({{"product", "Acme"}}).template_revision, t1_rev);
}

TEST_F(RenderScenarios, Scenario24_ChangedBodyHasANewRevision) {
  push(set_of({t1_json("d", t1_body + "Be kind.\n")}));
  const auto r = t1({{"product", "Acme"}});
  EXPECT_EQ(r.reason_code, "OK");
  EXPECT_NE(r.template_revision, t1_rev);
  for (int i = 0; i < 10; ++i) EXPECT_NE(t1({{"product", "Acme"}}).template_revision, t1_rev);
}

TEST_F(RenderScenarios, Scenario25_ReplaceOnWriteDropsTheTemplate) {
  push(set_of({t2_json}));
  expect_empty(t1({{"product", "Acme"}}), "TEMPLATE_NOT_FOUND", "");
  EXPECT_EQ(call("sample", {{"system", "s"}, {"user", "u"}}).reason_code, "OK");
}

TEST_F(RenderScenarios, Scenario26_RefusedPushKeepsTheOldStore) {
  // The journal-outage 503 is the wiring's; a refused push never reaches `apply`.
  const std::string before = store.to_json();
  ASSERT_FALSE(parse_templates_body(set_of({R"({"namespace":"serving","name":"x","body":"{{ y }}"})"})));
  EXPECT_EQ(store.to_json(), before);
  EXPECT_EQ(t1({{"product", "Acme"}}).reason_code, "OK");
}

TEST_F(RenderScenarios, Scenario27_JournalRoundTripIsByteEqualAndRendersTheSame) {
  auto set = template_store::from_bytes(store.to_bytes());
  ASSERT_TRUE(set) << set.error();
  template_store restored;
  restored.apply(std::move(*set));
  EXPECT_EQ(restored.to_json(), store.to_json());
  EXPECT_EQ(restored.to_bytes(), store.to_bytes());
  const render_request req{"serving/support-agent", {{"product", "Acme"}, {"history", "user: hi"}}, "serving"};
  EXPECT_EQ(render(*restored.current(), req), render(*store.current(), req));
  // The GET body can be pushed back unchanged (templateRevision is accepted and ignored).
  auto again = parse_templates_body(store.to_json());
  ASSERT_TRUE(again) << again.error();
  EXPECT_EQ(encode_template_set(*again), store.to_bytes());
}

TEST_F(RenderScenarios, Scenario28_RepeatedCallsAreByteIdentical) {
  const auto first = t1({{"product", "Acme"}, {"history", "user: hi"}});
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(t1({{"product", "Acme"}, {"history", "user: hi"}}), first);
}

TEST(TemplateRevision, ComputedValuesOfTheSpec) {
  template_def t1{"serving", "support-agent", t1_body,
                  {{"product", slot_type::stable, true, "d"}, {"history", slot_type::mutable_, false, ""}}};
  EXPECT_EQ(template_revision(t1), t1_rev);
  t1.slots[1].type = slot_type::stable;
  EXPECT_EQ(template_revision(t1), "deea4923592546c6910be87b9406dddd");
  t1.namespace_name = "elsewhere";  // independent of namespace and name
  t1.name = "other";
  EXPECT_EQ(template_revision(t1), "deea4923592546c6910be87b9406dddd");
}

TEST(TemplateListing, GetBodyIsSortedAndCarriesRevisions) {
  auto set = parse_templates_body(set_of({t4_json, t1_json()}));
  ASSERT_TRUE(set) << set.error();
  template_store store;
  store.apply(std::move(*set));
  const std::string listing = store.to_json();
  EXPECT_LT(listing.find("support-agent"), listing.size());
  EXPECT_LT(listing.find("stable-only"), listing.find("support-agent"));  // sorted bytewise by name
  EXPECT_NE(listing.find(R"("templateRevision":")" + t1_rev + "\""), std::string::npos);
  EXPECT_EQ(store.to_bytes().find("templateRevision"), std::string::npos);
  EXPECT_EQ(template_store().to_json(), R"({"version":1,"templates":[]})");
}

}  // namespace
}  // namespace ic::templates
