// Reads the committed format-1 journal (journal/testdata/v1, written by
// testdata/make_fixture.cpp). Every later build must keep passing this test unchanged: an
// older journal stays readable (spec/extensions.md §3). Expectations are spelled out here,
// not shared with the generator.
#include <gtest/gtest.h>

#include <filesystem>

#include "journal/log.hpp"
#include "journal/test_util.hpp"
#include "tests/support/test_paths.hpp"

namespace ic::journal {
namespace {

namespace fs = std::filesystem;

/// Copies the fixture into a temp dir (opening a RocksDB directory writes to it).
std::string copy_fixture(const testing::temp_dir& t, const std::string& version) {
  const fs::path src = fs::path(ic::test::source_dir()) / "journal" / "testdata" / version;
  const std::string dst = t.sub(version);
  fs::copy(src, dst, fs::copy_options::recursive);
  return dst;
}

std::string expected_payload(std::uint64_t seq) {
  std::string p = "fixture record " + std::to_string(seq);
  if (seq % 10 == 0) p += std::string(300, '#');
  return p;
}

TEST(JournalFixture, FormatOneJournalIsReadable) {
  testing::temp_dir t;
  const std::string dir = copy_fixture(t, "v1");
  options o;
  o.verify_on_open = true;
  auto opened = log::open(dir, o);
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  log& l = **opened;
  EXPECT_FALSE(l.info().created);
  EXPECT_EQ(l.info().format_version, 1u);
  EXPECT_FALSE(l.info().dropped_torn_tail.has_value());
  EXPECT_EQ(l.truncated_through(), 10u);
  EXPECT_EQ(l.last_sequence(), 40u);

  // Records 11..40 (1..10 were truncated behind the snapshot at 10).
  EXPECT_EQ(l.read_range(1, 1).status().code(), errc::out_of_range);
  auto recs = l.read_range(11, 100);
  ASSERT_TRUE(recs.ok()) << recs.status().to_string();
  ASSERT_EQ(recs->size(), 30u);
  for (const auto& r : *recs) {
    EXPECT_EQ(r.type, 1 + r.seq % 3) << r.seq;
    EXPECT_EQ(r.payload, expected_payload(r.seq)) << r.seq;
  }

  // Two complete snapshots; the newest (covering 30) loads.
  auto snaps = l.list_snapshots();
  ASSERT_TRUE(snaps.ok());
  ASSERT_EQ(snaps->size(), 2u);
  EXPECT_EQ((*snaps)[0].covering_seq, 10u);
  EXPECT_EQ((*snaps)[0].chunk_count, 3u);
  EXPECT_EQ((*snaps)[1].covering_seq, 30u);
  EXPECT_TRUE((*snaps)[0].complete && (*snaps)[1].complete);
  std::vector<std::string> chunks;
  auto newest = l.read_newest_snapshot([&](const snapshot_info&) { chunks.clear(); },
                                       [&](std::string_view c) {
                                         chunks.emplace_back(c);
                                         return status{};
                                       });
  ASSERT_TRUE(newest.ok()) << newest.status().to_string();
  EXPECT_EQ(newest->covering_seq, 30u);
  EXPECT_EQ(chunks, (std::vector<std::string>{"fixture snapshot@30 chunk 0",
                                              "fixture snapshot@30 chunk 1"}));
  EXPECT_TRUE(l.verify_snapshot((*snaps)[0].id).ok());

  // And it keeps going in the current format.
  auto next = l.append(7, "written by a newer build");
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, 41u);
  auto w = l.begin_snapshot(41);
  ASSERT_TRUE(w.ok());
  EXPECT_GT(w->id(), (*snaps)[1].id);
}

}  // namespace
}  // namespace ic::journal
