// The topology / templates records: one apply rule for replay (tenant_set::apply) and the
// snapshot loader, refused bytes change nothing, and a snapshot round trip keeps both stores.
#include "state/pushed_stores.hpp"

#include <gtest/gtest.h>

#include "state/snapshot_io.hpp"
#include "state/tenant_state.hpp"

namespace ic::state {
namespace {

constexpr index::micros kT0 = 1'700'000'000'000'000;

const std::string kTopology =
    R"({"version":1,"topologies":[{"namespace":"serving","name":"pd","hashScheme":"vllm",)"
    R"("prefillPools":[{"name":"p","acceleratorType":"h","replicaIds":["p-0"]}],)"
    R"("decodePools":[{"name":"d","acceleratorType":"h","replicaIdPatterns":["d-*"]}],)"
    R"("acceleratorTypes":[{"name":"h","vendor":"nvidia"}]}]})";
const std::string kTemplates =
    R"({"version":1,"templates":[{"namespace":"serving","name":"t","body":"Hi {{ who }}",)"
    R"("slots":[{"name":"who","type":"Stable"}]}]})";

proto::decoded_record record_of(proto::record_kind kind, const std::string& json) {
  auto rec = proto::decode_record(static_cast<std::uint32_t>(kind),
                                  proto::encode_record(kind, kT0, json));
  EXPECT_TRUE(rec.has_value());
  return *rec;
}

TEST(PushedStores, ReplayAppliesTopologyAndTemplatesRecords) {
  tenant_set set;
  EXPECT_TRUE(set.apply(record_of(proto::record_kind::topology, kTopology)).ok);
  EXPECT_TRUE(set.apply(record_of(proto::record_kind::templates, kTemplates)).ok);
  ASSERT_NE(set.stores()->topologies.current()->find("serving", "pd"), nullptr);
  ASSERT_NE(set.stores()->templates.current()->find("serving", "t"), nullptr);
  // The canonical payloads are what GET answers.
  EXPECT_NE(set.stores()->topologies.to_json().find("\"hashScheme\":\"vllm\""), std::string::npos);
  // Replace-on-write.
  EXPECT_TRUE(set.apply(record_of(proto::record_kind::topology, R"({"version":1,"topologies":[]})")).ok);
  EXPECT_EQ(set.stores()->topologies.current()->find("serving", "pd"), nullptr);
}

TEST(PushedStores, AnUndecodableRecordChangesNothing) {
  pushed_stores stores;
  std::string why;
  ASSERT_TRUE(apply_store_record(stores, record_of(proto::record_kind::templates, kTemplates), &why));
  EXPECT_FALSE(apply_store_record(stores, record_of(proto::record_kind::templates, R"({"version":9})"),
                                  &why));
  EXPECT_NE(why.find("templates"), std::string::npos) << why;
  EXPECT_NE(stores.templates.current()->find("serving", "t"), nullptr);
  // Not a store record at all.
  EXPECT_FALSE(apply_store_record(stores, proto::decoded_record{kT0, proto::sweep_record{}}, &why));
}

TEST(PushedStores, SnapshotRoundTripKeepsBothStoresByteForByte) {
  tenant_set set;
  set.apply(record_of(proto::record_kind::topology, kTopology));
  set.apply(record_of(proto::record_kind::templates, kTemplates));
  std::vector<std::string> chunks;
  ASSERT_TRUE(write_state_snapshot(set, [&](std::string_view c) {
    chunks.emplace_back(c);
    return true;
  }));
  state_loader loader(set.options());
  std::string error;
  for (const auto& c : chunks) ASSERT_TRUE(loader.feed(c, &error)) << error;
  auto restored = loader.finish(&error);
  ASSERT_NE(restored, nullptr) << error;
  EXPECT_EQ(restored->stores()->topologies.to_json(), set.stores()->topologies.to_json());
  EXPECT_EQ(restored->stores()->templates.to_json(), set.stores()->templates.to_json());
  // Empty stores write no section.
  tenant_set empty;
  EXPECT_TRUE(store_sections(*empty.stores()).empty());
  EXPECT_EQ(store_sections(*set.stores()).size(), 2u);
}

}  // namespace
}  // namespace ic::state
