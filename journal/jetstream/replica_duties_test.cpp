// The plain decisions of journal/jetstream/replica_duties.hpp (no NATS).
#include "journal/jetstream/replica_duties.hpp"

#include <gtest/gtest.h>

#include "journal/record_log.hpp"

namespace ic::journal::jetstream {
namespace {

using namespace std::chrono_literals;

TEST(SnapshotBlob, RoundTripsChunksAndPosition) {
  const std::vector<std::string> chunks{"ICSNAP01header", std::string(1, '\0'), "", "T-tenant"};
  const std::uint64_t pos = record_position(42, 3);
  const std::string blob = encode_snapshot_blob(pos, chunks);
  std::uint64_t got_pos = 0;
  std::vector<std::string> got;
  ASSERT_TRUE(decode_snapshot_blob(blob, &got_pos, [&](std::string_view c) {
                got.emplace_back(c);
                return status::success();
              }).ok());
  EXPECT_EQ(got_pos, pos);
  EXPECT_EQ(got, chunks);
  // Pinned layout: magic, be32 version 1, be64 position, be32 length + bytes per chunk.
  EXPECT_EQ(blob.substr(0, 8), std::string("ICSB\0\0\0\1", 8));
  EXPECT_EQ(blob.size(), 16 + 4 * chunks.size() + 14 + 1 + 0 + 8);
}

TEST(SnapshotBlob, RefusesDamageAndNewerVersions) {
  const std::string blob = encode_snapshot_blob(7, {"abc", "defg"});
  std::uint64_t pos = 0;
  auto none = [](std::string_view) { return status::success(); };
  EXPECT_EQ(decode_snapshot_blob(blob.substr(0, blob.size() - 1), &pos, none).code(),
            errc::corruption);
  EXPECT_EQ(decode_snapshot_blob("XCSB" + blob.substr(4), &pos, none).code(), errc::corruption);
  std::string newer = blob;
  newer[7] = 2;
  EXPECT_EQ(decode_snapshot_blob(newer, &pos, none).code(), errc::incompatible);
  // The consumer's error stops the walk and comes back as it is.
  int seen = 0;
  auto st = decode_snapshot_blob(blob, &pos, [&](std::string_view) {
    ++seen;
    return status{errc::corruption, "loader said no"};
  });
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(st.message(), "loader said no");
}

TEST(ReplicaDuties, PositionsNameTheEnvelopeStillNeeded) {
  EXPECT_EQ(needed_from(0), 1u);
  EXPECT_EQ(not_needed_through(0), 0u);
  // Mid-envelope or at its end: the envelope is re-read, so the one before is the last not needed.
  EXPECT_EQ(needed_from(record_position(9, 0)), 9u);
  EXPECT_EQ(needed_from(record_position(9, 4095)), 9u);
  EXPECT_EQ(not_needed_through(record_position(9, 2)), 8u);
  // Its last possible record (a skipped envelope, or a reset's start): the next one.
  EXPECT_EQ(needed_from(record_position(9, max_records_per_batch - 1)), 10u);
  EXPECT_EQ(not_needed_through(record_position(10, 0) - 1), 9u);
}

// A reset is refused beside a replica that lost nothing: its mark reaches first − 2.
TEST(ReplicaDuties, AReplicaThatAppliedUpToTheStreamsFirstSequenceHoldsTheState) {
  // Halted replicas delivered through envelope 6 (mark 5); the stream starts at 10.
  const std::vector<std::pair<std::string, std::uint64_t>> halted = {{"ra", 5}, {"rb", 5}};
  EXPECT_FALSE(replica_holding_the_state(halted, "rb", 10).has_value());
  // One that applied envelope 9 (mark 8) or beyond lost nothing.
  auto with_live = halted;
  with_live.emplace_back("rc", not_needed_through(record_position(9, 0)));
  auto holder = replica_holding_the_state(with_live, "rb", 10);
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->first, "rc");
  EXPECT_FALSE(replica_holding_the_state({{"rb", 40}}, "rb", 10).has_value());  // itself
  // One lost record (stream starts at 8, halted applied through 6: mark 5 < 6).
  EXPECT_FALSE(replica_holding_the_state({{"ra", 5}}, "rb", 8).has_value());
}

TEST(ReplicaDuties, PurgeBoundNeverPassesTheManifestOrTheSlowestMark) {
  EXPECT_EQ(purge_bound_of(std::nullopt, 50, 0), 0u);  // no committed manifest: never
  EXPECT_EQ(purge_bound_of(100, std::nullopt, 0), 100u);
  EXPECT_EQ(purge_bound_of(100, 40, 0), 40u);   // the slowest live replica
  EXPECT_EQ(purge_bound_of(30, 40, 0), 30u);    // never above the manifest
  EXPECT_EQ(purge_bound_of(100, 40, 10), 30u);  // margin
  EXPECT_EQ(purge_bound_of(100, 5, 10), 0u);    // margin past zero: nothing
}

TEST(ReplicaDuties, StartPlanPrefersAFollowableLocalSnapshot) {
  const auto pos = record_position(20, 1);  // needs seq 20
  // Stream never purged (first 1) or purged below 20: the local snapshot follows.
  EXPECT_EQ(plan_start(pos, 1, std::nullopt).source, start_source::local);
  EXPECT_EQ(plan_start(pos, 20, 50).source, start_source::local);
  // Purged past it: a gap, the shared snapshot covers.
  auto p = plan_start(pos, 21, 60);
  EXPECT_EQ(p.source, start_source::shared);
  EXPECT_TRUE(p.gap);
  // Purged past it and the manifest too old (someone purged by hand past it): uncovered.
  p = plan_start(pos, 70, 60);
  EXPECT_EQ(p.source, start_source::uncovered);
  EXPECT_TRUE(p.gap);
  // The manifest covering everything of a stream purged empty (first = last + 1 = 61).
  EXPECT_EQ(plan_start(pos, 61, 60).source, start_source::shared);
}

TEST(ReplicaDuties, StartPlanOfAnEmptyDataDir) {
  EXPECT_EQ(plan_start(std::nullopt, 0, std::nullopt).source, start_source::stream);  // fresh
  EXPECT_EQ(plan_start(std::nullopt, 1, std::nullopt).source, start_source::stream);
  auto p = plan_start(std::nullopt, 1, 10);  // a shared snapshot saves the replay
  EXPECT_EQ(p.source, start_source::shared);
  EXPECT_FALSE(p.gap);  // a late joiner, not a gap
  EXPECT_EQ(plan_start(std::nullopt, 5, std::nullopt).source, start_source::uncovered);
  EXPECT_EQ(plan_start(std::nullopt, 5, 4).source, start_source::shared);
}

TEST(LeaseKeeper, AcquiresRenewsOnCadenceAndStepsDownAtOnce) {
  using clock = lease_keeper::clock;
  const auto t0 = clock::now();
  lease_keeper k(3000ms);
  EXPECT_EQ(k.next(t0), lease_keeper::action::acquire);
  k.acquired(std::nullopt, t0);  // held elsewhere
  EXPECT_FALSE(k.holder());
  EXPECT_EQ(k.next(t0 + 1s), lease_keeper::action::none);
  EXPECT_EQ(k.next(t0 + 3s), lease_keeper::action::acquire);
  k.acquired(lease{"r1", 5}, t0 + 3s);
  EXPECT_TRUE(k.holder());
  EXPECT_EQ(k.held()->revision, 5u);
  EXPECT_EQ(k.next(t0 + 4s), lease_keeper::action::none);
  EXPECT_EQ(k.next(t0 + 6s), lease_keeper::action::renew);
  k.renewed(lease{"r1", 9}, t0 + 6s);
  EXPECT_EQ(k.held()->revision, 9u);
  k.renewed(std::nullopt, t0 + 9s);  // refused (revision moved): step down
  EXPECT_FALSE(k.holder());
  EXPECT_EQ(k.next(t0 + 12s), lease_keeper::action::acquire);
  k.acquired(lease{"r1", 11}, t0 + 12s);
  k.failed(t0 + 15s);  // NATS unreachable while renewing: step down too
  EXPECT_FALSE(k.holder());
}

}  // namespace
}  // namespace ic::journal::jetstream
