// Guards the public wire contract: every message, field number, name, type and label, every
// enum value, and the service's methods must match spec/lookup.md §1 exactly, so a
// renumbering can never land. The table below is a literal copy of §1.3; when ../shared is
// present the spec file itself is parsed and checked too.
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <google/protobuf/descriptor.pb.h>

#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "tests/support/test_paths.hpp"

namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;

// message|number|name|type, in the spec's notation.
constexpr const char* kContractTable = R"(
RenderTemplateRequest|1|template_ref|string
RenderTemplateRequest|2|variables|map<string,string>
RenderTemplateRequest|3|tenant_id|string
RenderTemplateResponse|1|rendered_prompt|bytes
RenderTemplateResponse|2|stable_prefix_hash|bytes
RenderTemplateResponse|3|tenant_namespace|bytes
RenderTemplateResponse|4|reason_code|string (OK / TEMPLATE_NOT_FOUND / RENDER_ERROR; only OK emitted)
RenderTemplateResponse|5|template_revision|string
SLO|1|ttft_ms|int32
SLO|2|tbt_ms|int32
LookupRouteRequest|1|model_id|string
LookupRouteRequest|2|tenant_id|string
LookupRouteRequest|3|prefix_hash|bytes
LookupRouteRequest|4|prefix_token_count|int32
LookupRouteRequest|5|hash_scheme|string
LookupRouteRequest|6|slo|SLO (message)
LookupRouteRequest|7|block_hashes|rep bytes
LookupRouteRequest|8|block_token_counts|rep int32 (packed)
LookupRouteRequest|9|token_ids|rep uint32 (packed)
LookupRouteRequest|10|prompt_text|string
LookupRouteRequest|11|adapter_id|string
ReplicaScore|1|replica_id|string
ReplicaScore|2|score|float (fixed32)
ReplicaScore|3|matched_tokens|int32
ReplicaScore|4|estimated_cache_hit_prob|float
ReplicaScore|5|tier|CacheTier
LookupRouteResponse|1|replica_scores|rep ReplicaScore
LookupRouteResponse|2|reason_code|string
LookupRouteResponse|3|lookup_latency_us|int64
LookupRouteResponse|4|token_ids|rep uint32 (packed)
LookupRouteResponse|5|adapter_id|string
LookupPDRouteRequest|1|model_id|string
LookupPDRouteRequest|2|tenant_id|string
LookupPDRouteRequest|3|prefix_hash|bytes
LookupPDRouteRequest|4|prefix_token_count|int32
LookupPDRouteRequest|5|pd_topology_ref|string
LookupPDRouteResponse|1|prefill_replica_id|string
LookupPDRouteResponse|2|decode_replica_id|string
LookupPDRouteResponse|3|transport_hint|string (Mooncake / NIXL / Direct — never set)
LookupPDRouteResponse|4|reason_code|string
PrefixEntry|1|prefix_hash|bytes
PrefixEntry|2|token_count|int32
PrefixEntry|3|block_hashes|rep bytes
PrefixEntry|4|block_token_counts|rep int32 (packed)
PrefixEntry|5|tier|CacheTier
PrefixEntry|6|adapter_id|string
ReplicaStats|1|replica_id|string
ReplicaStats|2|cache_memory_bytes|int64
ReplicaStats|3|hit_rate|float
ReplicaStats|4|pressure|float
ReplicaStats|5|client_version|string
ReplicaStats|6|t2_hit_tokens|int64
ReplicaStats|7|t2_query_tokens|int64
CacheStateUpdate|1|replica_id|string
CacheStateUpdate|2|model_id|string
CacheStateUpdate|3|tenant_id|string
CacheStateUpdate|4|hash_scheme|string
CacheStateUpdate|5|timestamp_us|int64
CacheStateUpdate|6|prefixes|rep PrefixEntry
CacheStateUpdate|7|stats|ReplicaStats (message)
CacheStateUpdate|8|adapter_id|string
CacheSummary|1|total_prefixes|int64
CacheSummary|2|hot_prefixes|int64
GetCacheStateRequest|1|model_id|string
GetCacheStateRequest|2|tenant_id|string
GetCacheStateResponse|1|replicas|rep ReplicaStats
GetCacheStateResponse|2|summary|CacheSummary (message)
CacheEvent|1|type|CacheEvent.Type
CacheEvent|2|replica_id|string
CacheEvent|3|model_id|string
CacheEvent|4|tenant_id|string
CacheEvent|5|prefix_hash|bytes
CacheEvent|6|timestamp_us|int64
CacheEvent|7|adapter_id|string
StreamEventsRequest|1|model_id|string
StreamEventsRequest|2|tenant_id|string
StreamEventsRequest|3|types|rep CacheEvent.Type (packed)
StreamMetricsRequest|1|names|rep string
Metric|1|name|string
Metric|2|type|string (gauge/counter/histogram)
Metric|3|labels|map<string,string>
Metric|4|value|double
Metric|5|timestamp_us|int64
Ack|1|accepted|bool
Ack|2|reason_code|string
)";

struct field_row {
  std::string message;
  int number;
  std::string name;
  std::string type;  // spec notation
};

std::vector<field_row> parse_rows(const std::string& text) {
  std::vector<field_row> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<std::string> parts;
    std::stringstream ls(line);
    std::string p;
    while (std::getline(ls, p, '|')) parts.push_back(p);
    if (parts.size() != 4) continue;
    rows.push_back({parts[0], std::stoi(parts[1]), parts[2], parts[3]});
  }
  return rows;
}

// Parses the §1.3 tables straight out of spec/lookup.md.
std::vector<field_row> parse_spec(const std::string& md) {
  std::vector<field_row> rows;
  auto begin = md.find("### 1.3");
  auto end = md.find("### 1.4");
  if (begin == std::string::npos || end == std::string::npos) return rows;
  std::istringstream in(md.substr(begin, end - begin));
  std::string line, msg;
  std::regex msg_re(R"(^\*\*(\w+)\*\*)");
  std::regex row_re(R"(^\|\s*(\d+)\s*\|\s*(\w+)\s*\|\s*([^|]+)\|)");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, msg_re)) {
      msg = m[1];
    } else if (!msg.empty() && std::regex_search(line, m, row_re)) {
      std::string type = m[3];
      while (!type.empty() && type.back() == ' ') type.pop_back();
      rows.push_back({msg, std::stoi(m[1]), m[2], type});
    }
  }
  return rows;
}

// Renders a descriptor field in the spec's notation (without the parenthesised notes).
std::string describe(const FieldDescriptor* f) {
  if (f->is_map()) return "map<string,string>";
  std::string base;
  switch (f->type()) {
    case FieldDescriptor::TYPE_STRING: base = "string"; break;
    case FieldDescriptor::TYPE_BYTES: base = "bytes"; break;
    case FieldDescriptor::TYPE_INT32: base = "int32"; break;
    case FieldDescriptor::TYPE_INT64: base = "int64"; break;
    case FieldDescriptor::TYPE_UINT32: base = "uint32"; break;
    case FieldDescriptor::TYPE_FLOAT: base = "float"; break;
    case FieldDescriptor::TYPE_DOUBLE: base = "double"; break;
    case FieldDescriptor::TYPE_BOOL: base = "bool"; break;
    case FieldDescriptor::TYPE_ENUM: {
      std::string full = f->enum_type()->full_name();
      base = full.substr(std::string("inferencecache.v1alpha1.").size());
      break;
    }
    case FieldDescriptor::TYPE_MESSAGE: {
      std::string full = f->message_type()->full_name();
      base = full.substr(std::string("inferencecache.v1alpha1.").size());
      if (!f->is_repeated()) base += " (message)";
      break;
    }
    default: base = std::string("?") + f->type_name();
  }
  if (f->is_repeated()) {
    std::string out = "rep " + base;
    if (f->is_packed()) out += " (packed)";
    return out;
  }
  return base;
}

// Drops the spec's explanatory notes, e.g. "string (OK / ...)" -> "string", but keeps the
// notes this test checks: "(packed)", "(message)" and "float (fixed32)" (= float).
std::string normalise(std::string t) {
  if (t == "float (fixed32)") return "float";
  auto paren = t.find(" (");
  if (paren != std::string::npos) {
    std::string note = t.substr(paren);
    if (note != " (packed)" && note != " (message)") t = t.substr(0, paren);
  }
  return t;
}

const DescriptorPool* pool() { return DescriptorPool::generated_pool(); }

void check_rows(const std::vector<field_row>& rows) {
  std::map<std::string, int> per_message;
  for (const auto& r : rows) {
    SCOPED_TRACE(r.message + "." + r.name);
    const Descriptor* d = pool()->FindMessageTypeByName("inferencecache.v1alpha1." + r.message);
    ASSERT_NE(d, nullptr) << "missing message " << r.message;
    const FieldDescriptor* f = d->FindFieldByNumber(r.number);
    ASSERT_NE(f, nullptr) << "missing field number " << r.number;
    EXPECT_EQ(f->name(), r.name);
    EXPECT_EQ(describe(f), normalise(r.type));
    EXPECT_FALSE(f->has_presence() && f->type() != FieldDescriptor::TYPE_MESSAGE)
        << "no explicit-presence scalars in the contract";
    EXPECT_EQ(f->containing_oneof(), nullptr);
    ++per_message[r.message];
  }
  // No field beyond those listed.
  for (const auto& [name, count] : per_message) {
    const Descriptor* d = pool()->FindMessageTypeByName("inferencecache.v1alpha1." + name);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->field_count(), count) << name << " has extra fields";
  }
}

TEST(WireContract, EveryFieldMatchesTheLiteralTable) {
  auto rows = parse_rows(kContractTable);
  ASSERT_EQ(rows.size(), 85u);
  check_rows(rows);
}

TEST(WireContract, EveryFieldMatchesTheSpecFile) {
  std::ifstream in(ic::test::shared_dir() + "/spec/lookup.md");
  if (!in) GTEST_SKIP() << "shared/spec/lookup.md not present";
  std::stringstream ss;
  ss << in.rdbuf();
  auto rows = parse_spec(ss.str());
  ASSERT_GE(rows.size(), 85u);
  check_rows(rows);
}

TEST(WireContract, FileHasExactNamePackageOptionsAndNoImports) {
  const auto* file = inferencecache::v1alpha1::Ack::descriptor()->file();
  EXPECT_EQ(file->name(), "inferencecache/v1alpha1/inferencecache.proto");
  EXPECT_EQ(file->package(), "inferencecache.v1alpha1");
  EXPECT_EQ(file->syntax(), google::protobuf::FileDescriptor::SYNTAX_PROTO3);
  EXPECT_EQ(file->dependency_count(), 0);
  EXPECT_EQ(file->options().go_package(),
            "github.com/cachebox-project/inference-cache/gen/inferencecache/v1alpha1;"
            "inferencecachev1alpha1pb");
  EXPECT_FALSE(file->options().has_java_package());
  EXPECT_FALSE(file->options().has_cc_enable_arenas());
  EXPECT_EQ(file->message_type_count(), 19);
  EXPECT_EQ(file->enum_type_count(), 1);
}

TEST(WireContract, EnumsHaveExactValues) {
  const auto* tier = pool()->FindEnumTypeByName("inferencecache.v1alpha1.CacheTier");
  ASSERT_NE(tier, nullptr);
  std::vector<std::pair<std::string, int>> tiers = {{"CACHE_TIER_UNSPECIFIED", 0},
                                                    {"CACHE_TIER_T1", 1},
                                                    {"CACHE_TIER_T2", 2},
                                                    {"CACHE_TIER_T3", 3}};
  ASSERT_EQ(tier->value_count(), 4);
  for (const auto& [name, num] : tiers) {
    ASSERT_NE(tier->FindValueByName(name), nullptr) << name;
    EXPECT_EQ(tier->FindValueByName(name)->number(), num) << name;
  }
  const auto* type = pool()->FindEnumTypeByName("inferencecache.v1alpha1.CacheEvent.Type");
  ASSERT_NE(type, nullptr);
  std::vector<std::pair<std::string, int>> types = {{"TYPE_UNSPECIFIED", 0},
                                                    {"PREFIX_ADDED", 1},
                                                    {"PREFIX_EVICTED", 2},
                                                    {"REPLICA_UPDATED", 3},
                                                    {"ALL_CLEARED", 4}};
  ASSERT_EQ(type->value_count(), 5);
  for (const auto& [name, num] : types) {
    ASSERT_NE(type->FindValueByName(name), nullptr) << name;
    EXPECT_EQ(type->FindValueByName(name)->number(), num) << name;
  }
}

TEST(WireContract, ServiceHasEightMethodsInOrderWithExactShapes) {
  const auto* svc = pool()->FindServiceByName("inferencecache.v1alpha1.InferenceCache");
  ASSERT_NE(svc, nullptr);
  struct m {
    const char* name;
    const char* in;
    const char* out;
    bool client_stream;
    bool server_stream;
  };
  const m expected[] = {
      {"RenderTemplate", "RenderTemplateRequest", "RenderTemplateResponse", false, false},
      {"LookupRoute", "LookupRouteRequest", "LookupRouteResponse", false, false},
      {"LookupPDRoute", "LookupPDRouteRequest", "LookupPDRouteResponse", false, false},
      {"GetCacheState", "GetCacheStateRequest", "GetCacheStateResponse", false, false},
      {"ReportCacheState", "CacheStateUpdate", "Ack", true, false},
      {"PublishEvent", "CacheEvent", "Ack", false, false},
      {"StreamCacheEvents", "StreamEventsRequest", "CacheEvent", false, true},
      {"StreamMetrics", "StreamMetricsRequest", "Metric", false, true},
  };
  ASSERT_EQ(svc->method_count(), 8);
  for (int i = 0; i < 8; ++i) {
    const auto* md = svc->method(i);
    SCOPED_TRACE(expected[i].name);
    EXPECT_EQ(md->name(), expected[i].name);
    EXPECT_EQ(md->input_type()->name(), expected[i].in);
    EXPECT_EQ(md->output_type()->name(), expected[i].out);
    EXPECT_EQ(md->client_streaming(), expected[i].client_stream);
    EXPECT_EQ(md->server_streaming(), expected[i].server_stream);
  }
}

TEST(WireContract, PackedScalarsEncodeAsOneLengthDelimitedField) {
  inferencecache::v1alpha1::LookupRouteRequest req;
  req.add_token_ids(1);
  req.add_token_ids(2);
  std::string bytes = req.SerializeAsString();
  // field 9, wire type 2 (length-delimited) = 0x4a, length 2, values 1 and 2.
  EXPECT_EQ(bytes, std::string("\x4a\x02\x01\x02", 4));
}

}  // namespace
