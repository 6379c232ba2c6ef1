#include "proto/record_codec.hpp"

#include <gtest/gtest.h>

#include "inferencecache/journal/v1/journal.pb.h"
#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::proto {
namespace {

namespace v1 = inferencecache::v1alpha1;

TEST(RecordCodec, UpdateRoundTripsEveryFieldAndTheAppliedTime) {
  v1::CacheStateUpdate u;
  u.set_replica_id("r1");
  u.set_model_id("m");
  u.set_tenant_id("t");
  u.set_hash_scheme("vllm");
  u.set_timestamp_us(0);
  u.set_adapter_id("lora-a");
  auto* p = u.add_prefixes();
  p->set_prefix_hash("ph");
  p->set_token_count(32);
  p->add_block_hashes("b1");
  p->add_block_hashes("b2");
  p->add_block_token_counts(16);
  p->add_block_token_counts(16);
  p->set_tier(static_cast<v1::CacheTier>(99));
  u.mutable_stats()->set_hit_rate(0.5f);
  u.mutable_stats()->set_client_version("x");

  std::string bytes = encode_record(record_kind::update, 1234567, u.SerializeAsString());
  // The hand-written encoding is a valid journal.v1.Record.
  inferencecache::journal::v1::Record parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_EQ(parsed.applied_at_us(), 1234567);
  EXPECT_EQ(parsed.update().SerializeAsString(), u.SerializeAsString());

  auto rec = decode_record(1, bytes);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->applied_at_us, 1234567);
  const auto& d = std::get<index::cache_state_update>(rec->payload);
  EXPECT_EQ(d.replica_id, "r1");
  EXPECT_EQ(d.adapter_id, "lora-a");
  ASSERT_EQ(d.prefixes.size(), 1u);
  EXPECT_EQ(d.prefixes[0].block_hashes, (std::vector<std::string>{"b1", "b2"}));
  EXPECT_EQ(d.prefixes[0].block_token_counts, (std::vector<std::int32_t>{16, 16}));
  EXPECT_EQ(d.prefixes[0].tier, 99);
  ASSERT_TRUE(d.stats.has_value());
  EXPECT_FLOAT_EQ(d.stats->hit_rate, 0.5f);
}

TEST(RecordCodec, EventPolicyAndSweepRoundTrip) {
  v1::CacheEvent e;
  e.set_type(v1::CacheEvent::PREFIX_EVICTED);
  e.set_replica_id("r");
  e.set_prefix_hash(std::string("\0\1", 2));
  auto ev = decode_record(2, encode_record(record_kind::event, 7, e.SerializeAsString()));
  ASSERT_TRUE(ev.has_value());
  const auto& de = std::get<index::cache_event>(ev->payload);
  EXPECT_EQ(de.type, 2);
  EXPECT_EQ(de.prefix_hash, std::string("\0\1", 2));

  auto pol = decode_record(3, encode_record(record_kind::policy, 8, R"({"version":7})"));
  ASSERT_TRUE(pol.has_value());
  EXPECT_EQ(std::get<policy_record>(pol->payload).canonical_json, R"({"version":7})");

  auto sw = decode_record(4, encode_record(record_kind::sweep, 9, {}));
  ASSERT_TRUE(sw.has_value());
  EXPECT_EQ(sw->applied_at_us, 9);
  EXPECT_TRUE(std::holds_alternative<sweep_record>(sw->payload));
}

TEST(RecordCodec, TopologyAndTemplatesPushesRoundTripAsStorePushes) {
  const std::string topo = R"({"version":1,"topologies":[]})";
  const std::string tmpl = R"({"version":1,"templates":[]})";
  const std::string tb = encode_record(record_kind::topology, 11, topo);
  const std::string mb = encode_record(record_kind::templates, 12, tmpl);
  // Valid journal.v1.Records carrying StorePush in fields 16 / 17.
  inferencecache::journal::v1::Record parsed;
  ASSERT_TRUE(parsed.ParseFromString(tb));
  EXPECT_TRUE(parsed.has_topology());
  EXPECT_FALSE(parsed.has_templates());
  EXPECT_EQ(parsed.topology().canonical_json(), topo);
  ASSERT_TRUE(parsed.ParseFromString(mb));
  EXPECT_EQ(parsed.templates().canonical_json(), tmpl);

  auto t = decode_record(16, tb);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->applied_at_us, 11);
  EXPECT_EQ(std::get<topology_record>(t->payload).canonical_json, topo);
  auto m = decode_record(17, mb);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(std::get<templates_record>(m->payload).canonical_json, tmpl);
  // The tags are distinct payloads: one read as the other is refused.
  EXPECT_FALSE(decode_record(17, tb).has_value());
  EXPECT_FALSE(decode_record(16, mb).has_value());
  EXPECT_STREQ(kind_name(16), "topology");
  EXPECT_STREQ(kind_name(17), "templates");
}

TEST(RecordCodec, RefusesGarbageWrongKindAndUnknownKind) {
  std::string why;
  EXPECT_FALSE(decode_record(1, "\xff\xff\xff", &why).has_value());
  EXPECT_FALSE(why.empty());
  // An event record read as an update.
  EXPECT_FALSE(decode_record(1, encode_record(record_kind::event, 1, ""), &why).has_value());
  EXPECT_FALSE(decode_record(77, encode_record(record_kind::sweep, 1, ""), &why).has_value());
  EXPECT_NE(why.find("77"), std::string::npos);
}

}  // namespace
}  // namespace ic::proto
