#include "tokenizer/chat_template.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "index/fingerprint.hpp"
#include "tests/support/test_paths.hpp"
#include "tokenizer/bpe_tokenizer.hpp"
#include "tokenizer/test_fixtures.hpp"

namespace ic::tokenizer {
namespace {

/// The goldens' fixed local time: 2024-07-26 09:05:03 (a Friday).
std::tm fixed_time() {
  std::tm tm{};
  tm.tm_year = 124;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_hour = 9;
  tm.tm_min = 5;
  tm.tm_sec = 3;
  tm.tm_wday = 5;
  tm.tm_yday = 207;
  return tm;
}

std::string render_ok(const std::string& source, const std::string& content,
                      std::map<std::string, std::string> strings = {}) {
  auto t = chat_template::parse(source);
  EXPECT_TRUE(t) << (t ? "" : t.error());
  if (!t) return {};
  auto r = (*t)->render({{"user", content}}, strings, true, fixed_time);
  EXPECT_TRUE(r) << (r ? "" : r.error());
  return r ? *r : std::string();
}

/// Renders tokenizer/testdata/<file> for every golden's content and compares.
template <std::size_t N>
void expect_renders(const std::string& file, const testing::render_golden (&goldens)[N]) {
  const auto source = testing::read_file(ic::test::source_dir() + "/tokenizer/testdata/" + file);
  ASSERT_FALSE(source.empty()) << file;
  for (const auto& g : goldens)
    EXPECT_EQ(render_ok(source, g.content, {{"bos_token", "<s>"}, {"eos_token", "</s>"}}), g.rendered)
        << file << ", content: " << g.content;
}

// Found by fuzz_chat_template (session 10, 1.0 M executions): a namespace assigned into
// itself made a shared_ptr cycle that leaked each render (the ASan pass reports a leak).
TEST(ChatTemplate, ANamespaceHeldByItselfRendersAndIsFreed) {
  EXPECT_EQ(render_ok("{%- set ns = namespace(a=0, b=[]) %}{%- set ns.a = ns %}"
                      "{%- set ns2 = namespace(x=ns) %}{%- set ns.b = [ns2, ns] %}ok",
                      "hi"),
            "ok");
}

TEST(ChatTemplate, RendersTheFeatureTemplateLikePythonJinja2) {
  expect_renders("features.jinja", testing::features_renders);
}

TEST(ChatTemplate, RendersALlama31StyleTemplateLikePythonJinja2) {
  // The date line comes from strftime_now (the fixed clock), as engines render it.
  expect_renders("llama31_style.jinja", testing::llama31_style_renders);
}

TEST(ChatTemplate, AppliesTrimBlocksLstripBlocksAndDashControl) {
  // Expected strings are python3-jinja2's with trim_blocks and lstrip_blocks.
  EXPECT_EQ(render_ok("a\n  {% if true %}\n  b\n  {% endif %}\nc", ""), "a\n  b\nc");
  EXPECT_EQ(render_ok("a  {%- if true -%}  b  {%- endif %} c", ""), "ab c");
  EXPECT_EQ(render_ok("x {{ 1 }} \n{# note #}\ny", ""), "x 1 \ny");
  EXPECT_EQ(render_ok("  {{- 'v' }}\n", ""), "v");  // one trailing newline is dropped
  EXPECT_EQ(render_ok("a {%+ if true %}b{% endif %}", ""), "a b");
}

TEST(ChatTemplate, TagDelimitersInsideStringLiteralsDoNotEndTheTag) {
  EXPECT_EQ(render_ok("{{ '}}' }}|{% set x = '%}' %}{{ x }}|{{ \"a'}}\" }}", ""), "}}|%}|a'}}");
}

TEST(ChatTemplate, TojsonEscapesLikePythonJsonWithoutAsciiEscaping) {
  EXPECT_EQ(render_ok(R"({{ "a\x7fb\x01c\u00e9" | tojson }})", ""), "\"a\x7f" "b\\u0001c\xc3\xa9\"");
}

TEST(ChatTemplate, ReadsPythonStringEscapes) {
  EXPECT_EQ(render_ok(R"({{ '\x41\u00e9\U0001F600\t|' }})", ""), "A\xc3\xa9\xf0\x9f\x98\x80\t|");
  EXPECT_EQ(render_ok(R"({{ ('na\u00efve' | length) ~ ' ' ~ 'x'[0] }})", ""), "5 x");
}

TEST(ChatTemplate, PrintsNumbersAndContainersLikePython) {
  // Expected: python3-jinja2's render of the same source.
  EXPECT_EQ(render_ok("{{ 2.5 }} {{ 0.1 }} {{ 1e16 }} {{ 1e-5 }} {{ 100.0 }} {{ 1 / 3 }} "
                      "{{ 0.1 + 0.2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 123456789.5 * 1000 }} "
                      "{{ [1.5, 'a', none] }} {{ {'k': \"it's\"} }}",
                      ""),
            "2.5 0.1 1e+16 1e-05 100.0 0.3333333333333333 0.30000000000000004 -4 2 "
            "123456789500.0 [1.5, 'a', None] {'k': \"it's\"}");
}

TEST(ChatTemplate, RendersStrftimeNowFromTheGivenLocalClock) {
  EXPECT_EQ(render_ok("{{ strftime_now('%d %b %Y') }}", ""), "26 Jul 2024");
}

TEST(ChatTemplate, LeavesToolsAndDocumentsUndefined) {
  EXPECT_EQ(render_ok("{{ tools is defined }} {{ documents is defined }} {{ tools }}|", ""),
            "False False |");
}

TEST(ChatTemplate, RefusesUnsupportedSyntaxAtParseTimeNamingTheLine) {
  auto expect_refused = [](const std::string& src, const std::string& needle) {
    auto t = chat_template::parse(src);
    ASSERT_FALSE(t) << src;
    EXPECT_NE(t.error().find(needle), std::string::npos) << t.error();
  };
  expect_refused("ok\n{% macro m() %}{% endmacro %}", "line 2: unsupported tag 'macro'");
  expect_refused("{{ x | frobnicate }}", "unsupported filter 'frobnicate'");
  expect_refused("{{ x | indent(4) }}", "unsupported filter 'indent'");
  expect_refused("{{ x is frob }}", "unsupported test 'frob'");
  expect_refused("{{ x.frob() }}", "unsupported method 'frob'");
  expect_refused("{{ frob(1) }}", "unsupported function call 'frob'");
  expect_refused("{% if x %}never closed", "missing end tag");
  expect_refused("{{ 'open", "unclosed");
  expect_refused("{% include 'x' %}", "unsupported tag 'include'");
}

TEST(ChatTemplate, RaiseExceptionFailsTheRender) {
  auto t = chat_template::parse("{{ raise_exception('no system role') }}");
  ASSERT_TRUE(t) << t.error();
  auto r = (*t)->render({{"user", "x"}}, {}, true, fixed_time);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("no system role"), std::string::npos);
}

// ---- The real templates (tokenizer_config.json of the fixtures) ----------------------------

class RealTemplate : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (testing::fixture_dir(GetParam()).empty()) GTEST_SKIP() << testing::fixture_skip_reason();
    auto cfg = nlohmann::json::parse(
        testing::read_file(testing::fixture_dir(GetParam()) + "/tokenizer_config.json"));
    source_ = cfg.at("chat_template").get<std::string>();
    for (const char* k : {"bos_token", "eos_token", "unk_token", "pad_token"})
      if (cfg.contains(k) && cfg[k].is_string()) strings_[k] = cfg[k].get<std::string>();
  }
  const testing::chat_golden* begin() const {
    return GetParam() == "llama3" ? std::begin(testing::llama3_chat) : std::begin(testing::qwen3_chat);
  }
  const testing::chat_golden* end() const {
    return GetParam() == "llama3" ? std::end(testing::llama3_chat) : std::end(testing::qwen3_chat);
  }
  std::string source_;
  std::map<std::string, std::string> strings_;
};

TEST_P(RealTemplate, RendersOneUserMessageLikePythonJinja2) {
  for (const auto* g = begin(); g != end(); ++g)
    EXPECT_EQ(render_ok(source_, g->content, strings_), g->rendered) << "content: " << g->content;
}

TEST_P(RealTemplate, RenderedPromptsEncodeToTheGoldenIdsAndBlockHashes) {
  auto tok = bpe_tokenizer::load_file(testing::fixture_dir(GetParam()) + "/tokenizer.json");
  ASSERT_TRUE(tok) << tok.error();
  for (const auto* g = begin(); g != end(); ++g) {
    auto ids = (*tok)->encode(render_ok(source_, g->content, strings_));
    ASSERT_TRUE(ids) << ids.error();
    EXPECT_EQ(*ids, g->ids) << "content: " << g->content;
    EXPECT_EQ(index::fingerprint_chain(ids->data(), ids->size(), 16), g->block_hashes);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, RealTemplate, ::testing::Values("llama3", "qwen3"));

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// Found by fuzz_chat_template: a few KB of nesting overflowed the recursive parser's stack.
TEST(ChatTemplateBounds, DeepNestingIsRefusedAtParseTimeInsteadOfOverflowingTheStack) {
  for (const std::string& deep : {"{{ " + repeat("(", 3000) + "1" + repeat(")", 3000) + " }}",
                                  "{{ " + repeat("not ", 3000) + "1 }}", "{{ " + repeat("-", 3000) + "1 }}",
                                  "{{ " + repeat("[", 3000) + repeat("]", 3000) + " }}",
                                  repeat("{% if true %}", 3000) + "x" + repeat("{% endif %}", 3000)}) {
    auto t = chat_template::parse(deep);
    ASSERT_FALSE(t);
    EXPECT_NE(t.error().find("nested deeper than 64 levels"), std::string::npos) << t.error();
  }
  EXPECT_EQ(render_ok("{{ " + repeat("(", 40) + "1" + repeat(")", 40) + " }}", "x"), "1");
  EXPECT_EQ(render_ok(repeat("{% if true %}", 40) + "x" + repeat("{% endif %}", 40), "x"), "x");
}

// Found by fuzz_chat_template (session 11, 1.79 M executions): `INT64_MAX + INT64_MAX` was a
// signed overflow (UB). Integer arithmetic past 64 bits fails the render, as do the other
// ways to overflow; a range() near the end of the 64-bit range stops at it.
TEST(ChatTemplateBounds, IntegerOverflowFailsTheRender) {
  for (const char* source :
       {"{{ 9223372036854775807 + 9223372036854775807 }}", "{{ -9223372036854775807 - 2 }}",
        "{{ 4294967296 * 4294967296 }}", "{{ 2 ** 64 }}", "{{ 3 ** 9223372036854775807 }}",
        "{{ (-9223372036854775807 - 1) // -1 }}", "{{ -(-9223372036854775807 - 1) }}",
        "{{ (-9223372036854775807 - 1) | abs }}", "{{ 1e300 | int }}"}) {
    auto t = chat_template::parse(source);
    ASSERT_TRUE(t) << source << ": " << t.error();
    auto r = (*t)->render({{"user", "x"}}, {}, true, fixed_time);
    ASSERT_FALSE(r) << source << " rendered " << *r;
    EXPECT_NE(r.error().find("integer overflow"), std::string::npos) << source << ": " << r.error();
  }
  // Inside the range the same operations still answer as Python does.
  EXPECT_EQ(render_ok("{{ 9223372036854775806 + 1 }} {{ 2 ** 62 }} {{ 1 ** 9223372036854775807 }} "
                      "{{ (-1) ** 9223372036854775807 }} {{ -7 // 2 }} {{ -9 | abs }} "
                      "{{ (-9223372036854775807 - 1) % -1 }} {{ 7 // -1 }}",
                      "x"),
            "9223372036854775807 4611686018427387904 1 -1 -4 9 0 -7");
  EXPECT_EQ(render_ok("{% for x in range(9223372036854775806, 9223372036854775807, 5) %}"
                      "{{ x }}{% endfor %}",
                      "x"),
            "9223372036854775806");
}

// Found by fuzz_chat_template: nested range() loops ran for 10^10 iterations.
TEST(ChatTemplateBounds, ARenderStopsAfterItsStepBound) {
  auto t = chat_template::parse(
      "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}");
  ASSERT_TRUE(t) << t.error();
  auto r = (*t)->render({{"user", "x"}}, {}, true, fixed_time);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("steps"), std::string::npos) << r.error();
  EXPECT_EQ(render_ok("{% for a in range(200) %}{% for b in range(200) %}{% endfor %}{% endfor %}ok", "x"), "ok");
}

// A syntax error quotes template text by its first 40 bytes: a several-KB literal or name
// still gives a one-line message of bounded length, cut at a UTF-8 character boundary.
TEST(ChatTemplateBounds, ASyntaxErrorQuotesLongTextByItsPrefix) {
  const std::string digits(5000, '4');
  auto literal = chat_template::parse("{{ " + digits + " }}");
  ASSERT_FALSE(literal);
  EXPECT_NE(literal.error().find("integer literal " + digits.substr(0, 40) + "... is past the 64-bit range"),
            std::string::npos)
      << literal.error();
  EXPECT_LT(literal.error().size(), 120u) << literal.error();
  const std::string name = "x" + std::string(3000, 'y');
  auto filter = chat_template::parse("{{ 'a' | " + name + " }}");
  ASSERT_FALSE(filter);
  EXPECT_NE(filter.error().find("unsupported filter '" + name.substr(0, 40) + "...'"), std::string::npos)
      << filter.error();
  // "x" then "\xc3\xa9" (two bytes) 30 times: a cut at byte 40 would split the 20th "\xc3\xa9",
  // so the quote keeps "x" and 19 of them (39 bytes).
  std::string accented = "x";
  for (int i = 0; i < 30; ++i) accented += "\xc3\xa9";
  auto literal_string = chat_template::parse("{{ 1 '" + accented + "' }}");
  ASSERT_FALSE(literal_string);
  EXPECT_NE(literal_string.error().find("unexpected '" + accented.substr(0, 39) + "...' in expression"),
            std::string::npos)
      << literal_string.error();
  // Short text is quoted whole, as before.
  auto short_name = chat_template::parse("{{ 'a' | nosuch }}");
  ASSERT_FALSE(short_name);
  EXPECT_NE(short_name.error().find("unsupported filter 'nosuch'"), std::string::npos) << short_name.error();
}

// Found by fuzz_chat_template (session 13, leg 2 of a 10 M run, at 9.71 M executions in all):
// `"%s-%d" % ('...', 444...443)` converted a double past the 64-bit range to an integer
// (UBSan, chat_template.cpp percent_format). `%d` / `%i` now print an int exactly (through a
// double, INT64_MAX was 2^63 and undefined too), truncate a float as Python's int() does, fail
// the render past the 64-bit range, and refuse a string as Python does; `| int` of an int no
// longer goes through a double either. The input's integer literal was past 64 bits and
// clamped to INT64_MAX by strtoll; such a literal is now a syntax error.
TEST(ChatTemplateBounds, PercentDOfAFloatPastTheRangeFailsTheRender) {
  for (const char* source : {"{{ '%d' % 1e19 }}", "{{ '%i' % -1e19 }}",
                             "{{ '%d' % (1e400 - 1e400) }}"}) {
    auto t = chat_template::parse(source);
    ASSERT_TRUE(t) << source << ": " << t.error();
    auto r = (*t)->render({{"user", "x"}}, {}, true, fixed_time);
    ASSERT_FALSE(r) << source << " rendered " << *r;
    EXPECT_NE(r.error().find("integer overflow"), std::string::npos) << source << ": " << r.error();
  }
  // The shape of the input as found: an integer literal past 64 bits no longer clamps to
  // INT64_MAX; the template is refused.
  auto found = chat_template::parse("{{ '%s-%d' % ('x', 4444444444444444444444) }}");
  ASSERT_FALSE(found);
  EXPECT_NE(found.error().find("past the 64-bit range"), std::string::npos) << found.error();
  auto t = chat_template::parse("{{ '%d' % 'x' }}");
  ASSERT_TRUE(t) << t.error();
  auto r = (*t)->render({{"user", "x"}}, {}, true, fixed_time);
  ASSERT_FALSE(r) << "rendered " << *r;
  EXPECT_NE(r.error().find("a number is required"), std::string::npos) << r.error();
  EXPECT_EQ(render_ok("{{ '%d' % 9223372036854775807 }} {{ '%i' % (-9223372036854775807 - 1) }} "
                      "{{ '%d' % 2.9 }} {{ '%d' % -2.9 }} {{ '%d' % true }} "
                      "{{ 9223372036854775807 | int }} {{ 4611686018427387905 | int }}",
                      "x"),
            "9223372036854775807 -9223372036854775808 2 -2 1 9223372036854775807 4611686018427387905");
}

TEST(ChatTemplateBounds, ValuesAndOutputOver16MiBAreRenderErrorsNotAnAllocation) {
  for (const char* src : {
           "{{ 'x' * 100000000000 }}",
           "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
           "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
           "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s|replace('x', 'xx') %}{% endfor %}",
           "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
           "{% for i in range(100000) %}{{ 'y' * 1000 }}{% endfor %}"}) {
    auto t = chat_template::parse(src);
    ASSERT_TRUE(t) << src << ": " << t.error();
    auto r = (*t)->render({{"user", "x"}}, {}, true, fixed_time);
    ASSERT_FALSE(r) << src;
    EXPECT_NE(r.error().find("over 16 MiB"), std::string::npos) << src << ": " << r.error();
  }
  EXPECT_EQ(render_ok("{{ ('ab' * 3)|length }}", "x"), "6");
}

}  // namespace
}  // namespace ic::tokenizer
