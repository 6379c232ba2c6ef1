#include "server/probe_json.hpp"

#include <gtest/gtest.h>

namespace ic::server {
namespace {

TEST(ProbeJson, DecodesTheControllerBody) {
  auto r = parse_probe_body(
      R"({"backend":"team-a/b","model":"functional-self-test","hashScheme":"vllm","backendType":"LMCache"})");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().backend, "team-a/b");
  EXPECT_EQ(r.value().model, "functional-self-test");
  EXPECT_EQ(r.value().hash_scheme, "vllm");
  EXPECT_EQ(r.value().backend_type, "LMCache");
}

TEST(ProbeJson, MatchesKeysCaseInsensitivelyLikeGo) {
  auto r = parse_probe_body(R"({"Backend":"b","MODEL":"m","hashscheme":"vllm"})");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().hash_scheme, "vllm");
}

TEST(ProbeJson, AcceptsTrailingWhitespace) {
  EXPECT_TRUE(parse_probe_body("{\"backend\":\"b\",\"model\":\"m\",\"hashScheme\":\"v\"}\n  ").ok());
}

TEST(ProbeJson, RejectsUnknownFields) {
  auto r = parse_probe_body(R"({"backend":"b","model":"m","hashScheme":"v","extra":1})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "decode probe request: json: unknown field \"extra\"");
}

TEST(ProbeJson, RejectsTrailingValues) {
  EXPECT_FALSE(parse_probe_body(R"({"backend":"b","model":"m","hashScheme":"v"} {})").ok());
  EXPECT_FALSE(parse_probe_body(R"({"backend":"b","model":"m","hashScheme":"v"}x)").ok());
}

TEST(ProbeJson, RejectsMissingOrEmptyRequiredFields) {
  EXPECT_EQ(parse_probe_body(R"({"model":"m","hashScheme":"v"})").error(), "backend is required");
  EXPECT_EQ(parse_probe_body(R"({"backend":"b","hashScheme":"v"})").error(), "model is required");
  EXPECT_EQ(parse_probe_body(R"({"backend":"b","model":"m"})").error(), "hashScheme is required");
  EXPECT_FALSE(parse_probe_body(R"({"backend":"","model":"m","hashScheme":"v"})").ok());
  EXPECT_FALSE(parse_probe_body(R"({"backend":null,"model":"m","hashScheme":"v"})").ok());
}

TEST(ProbeJson, RejectsMalformedAndNonObjectBodies) {
  EXPECT_EQ(parse_probe_body("").error(), "decode probe request: EOF");
  EXPECT_FALSE(parse_probe_body("{").ok());
  EXPECT_FALSE(parse_probe_body("[]").ok());
  EXPECT_FALSE(parse_probe_body(R"({"backend":1,"model":"m","hashScheme":"v"})").ok());
}

TEST(ProbeJson, RejectsBodiesOver4KiB) {
  std::string big = R"({"backend":")" + std::string(probe_max_body_bytes, 'x') +
                    R"(","model":"m","hashScheme":"v"})";
  EXPECT_FALSE(parse_probe_body(big).ok());
}

TEST(ProbeJson, EncodesTheExactShapeWithoutErrorsWhenEmpty) {
  state::probe_outcome o;
  o.backend = "team-a/b";
  o.ingest = state::probe_stage_result::ok;
  o.routing = state::probe_stage_result::ok;
  o.t2 = state::probe_stage_result::skipped;
  EXPECT_EQ(encode_probe_outcome(o),
            R"({"backend":"team-a/b","ingest":"ok","routing":"ok","t2":"skipped"})");
}

TEST(ProbeJson, EncodesErrorsInStageOrder) {
  state::probe_outcome o;
  o.backend = "b";
  o.ingest = state::probe_stage_result::ok;
  o.routing = state::probe_stage_result::failed;
  o.errors.push_back({"routing", "lookup answered NO_HINT, want PREFIX_MATCH"});
  EXPECT_EQ(encode_probe_outcome(o),
            R"({"backend":"b","ingest":"ok","routing":"failed","t2":"skipped",)"
            R"("errors":[{"stage":"routing","message":"lookup answered NO_HINT, want PREFIX_MATCH"}]})");
}

}  // namespace
}  // namespace ic::server
