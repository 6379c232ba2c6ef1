// Recovery without actors: the journal's records come back through tenant_set, a sweep
// record is journaled at the start, and a record that cannot be decoded refuses the start.
#include "state/recover.hpp"

#include <gtest/gtest.h>

#include "journal/test_util.hpp"
#include "proto/record_codec.hpp"
#include "state/test_support.hpp"

namespace ic::state {
namespace {

constexpr index::micros t0 = 1'700'000'000'000'000;

recovery_options options_for(const journal::testing::temp_dir& dir) {
  recovery_options o;
  o.journal_dir = dir.sub("journal");
  return o;
}

TEST(Recover, AnEmptyJournalGivesNoTenantsAndJournalsOneSweep) {
  journal::testing::temp_dir dir;
  std::string error;
  auto rec = recover(options_for(dir), t0, &error);
  ASSERT_TRUE(rec.has_value()) << error;
  EXPECT_TRUE(rec->set->tenants().empty());
  EXPECT_EQ(rec->info.records_replayed, 0u);
  EXPECT_EQ(rec->info.snapshot_seq, 0u);
  EXPECT_EQ(rec->info.last_sequence, 1u);  // the start-up sweep
  EXPECT_EQ(rec->log->last_position(), 1u);
}

TEST(Recover, ReplaysTheJournalTailLikeTheSerialTenantSet) {
  journal::testing::temp_dir dir;
  tenant_set oracle;
  {
    auto log = journal::log::open(dir.sub("journal")).value();
    for (int i = 0; i < 3; ++i) {
      auto u = testing::chain_update("r" + std::to_string(i), {"b" + std::to_string(i), "c"});
      const std::string bytes = proto::encode_record(proto::record_kind::update, t0 + i,
                                                     u.SerializeAsString());
      ASSERT_TRUE(log->append(static_cast<std::uint32_t>(proto::record_kind::update), bytes).ok());
      oracle.apply(testing::as_record(u, t0 + i));
    }
  }
  std::string error;
  auto rec = recover(options_for(dir), t0 + 10, &error);
  ASSERT_TRUE(rec.has_value()) << error;
  EXPECT_EQ(rec->info.records_replayed, 3u);
  EXPECT_EQ(rec->info.last_sequence, 4u);
  EXPECT_EQ(rec->info.entries, 6);
  oracle.apply(proto::decoded_record{t0 + 10, proto::sweep_record{}});
  EXPECT_EQ(rec->set->canonical_dump(), oracle.canonical_dump());
}

TEST(Recover, AnUndecodableRecordRefusesTheStart) {
  journal::testing::temp_dir dir;
  {
    auto log = journal::log::open(dir.sub("journal")).value();
    ASSERT_TRUE(log->append(static_cast<std::uint32_t>(proto::record_kind::update), "\xff\xff").ok());
  }
  std::string error;
  auto rec = recover(options_for(dir), t0, &error);
  EXPECT_FALSE(rec.has_value());
  EXPECT_NE(error.find("record 1 cannot be decoded"), std::string::npos) << error;
}

}  // namespace
}  // namespace ic::state
