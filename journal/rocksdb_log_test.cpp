// The record_log seam over the RocksDB journal (journal/rocksdb_log.hpp) and the position
// helpers of journal/record_log.hpp.
#include "journal/rocksdb_log.hpp"

#include <atomic>

#include <gtest/gtest.h>

#include "journal/test_util.hpp"

namespace ic::journal {
namespace {

TEST(RecordPositions, PackTheStreamSequenceAndTheRecordIndex) {
  static_assert(record_position(1, 0) == 65536);
  EXPECT_EQ(stream_seq_of(record_position(77, 4095)), 77u);
  EXPECT_EQ(record_index_of(record_position(77, 4095)), 4095u);
  EXPECT_LT(record_position(5, max_records_per_batch - 1), record_position(6, 0));
}

TEST(ApplyLag, IsZeroWhenCaughtUpAndCountsFromTheLaterOfStoredAndBehindSince) {
  log_stats s;
  s.log_position = 10;
  s.delivered_position = 10;
  s.last_stored_at_ns = 1'000'000'000;
  EXPECT_EQ(apply_lag_seconds(s, 5'000'000'000), 0.0);
  s.log_position = 11;  // behind, but only since t = 4 s (idle before)
  s.behind_since_ns = 4'000'000'000;
  EXPECT_DOUBLE_EQ(apply_lag_seconds(s, 5'000'000'000), 1.0);
  s.behind_since_ns = 0;  // behind since unknown: the last delivered batch's age
  EXPECT_DOUBLE_EQ(apply_lag_seconds(s, 5'000'000'000), 4.0);
}

TEST(RocksdbLog, AppendsReadsSnapshotsAndTruncatesThroughTheSeam) {
  testing::temp_dir dir;
  auto opened = rocksdb_log::open(dir.sub("j"), options{});
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  std::unique_ptr<record_log> log = std::move(opened).value();
  EXPECT_FALSE(log->replicated());
  EXPECT_EQ(log->next_batch_id(), "");
  EXPECT_EQ(log->describe(), "journal " + dir.sub("j"));
  auto first = log->append({{1, "a"}, {2, "b"}});
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, 1u);
  ASSERT_EQ(*log->append({{3, "c"}}), 3u);
  EXPECT_EQ(log->last_position(), 3u);
  std::vector<std::uint64_t> seen;
  ASSERT_TRUE(log->read_after(1, [&](const record_view& r) {
                   seen.push_back(r.seq);
                   return true;
                 }).ok());
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{2, 3}));

  auto w = log->begin_snapshot(2);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->add_chunk("state").ok());
  ASSERT_TRUE(w->finish().ok());
  ASSERT_TRUE(log->truncate_through(2).ok());
  EXPECT_EQ(log->truncated_through(), 2u);
  EXPECT_EQ(log->read_after(0, [](const record_view&) { return true; }).code(), errc::out_of_range);
  std::string chunks;
  auto snap = log->read_newest_snapshot([](const snapshot_info&) {},
                                        [&](std::string_view c) {
                                          chunks += c;
                                          return status::success();
                                        },
                                        nullptr);
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->covering_seq, 2u);
  EXPECT_EQ(chunks, "state");
  EXPECT_EQ(log->stats().log_position, 3u);
  std::atomic<bool> stop{false};
  EXPECT_EQ(log->follow([](const log_batch&) {}, stop).code(), errc::invalid_argument);
  EXPECT_TRUE(log->close().ok());
}

TEST(RocksdbLog, ExternalPositionsLetASnapshotCoverAnyPosition) {
  testing::temp_dir dir;
  options o;
  o.external_positions = true;
  auto l = log::open(dir.sub("s"), o);
  ASSERT_TRUE(l.ok());
  auto w = (*l)->begin_snapshot(record_position(9, 3));
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  ASSERT_TRUE(w->finish().ok());
  options plain;
  auto l2 = log::open(dir.sub("p"), plain);
  EXPECT_EQ((*l2)->begin_snapshot(5).status().code(), errc::invalid_argument);
}

}  // namespace
}  // namespace ic::journal
