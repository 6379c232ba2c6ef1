#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <string>
#include <vector>

#include "journal/format.hpp"
#include "journal/log.hpp"
#include "journal/test_util.hpp"

namespace ic::journal {
namespace {

using testing::temp_dir;

std::unique_ptr<log> open_ok(const std::string& dir) {
  auto r = log::open(dir);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(*r) : nullptr;
}

/// Chunk `i` of test snapshot `tag`: sizes vary so offsets are not multiples of anything.
std::string chunk(const std::string& tag, int i) {
  return tag + "#" + std::to_string(i) + std::string(100 + 37 * i, static_cast<char>('a' + i % 26));
}

result<snapshot_info> write_snapshot(log& l, std::uint64_t seq, const std::string& tag,
                                     int chunks) {
  auto w = l.begin_snapshot(seq);
  if (!w.ok()) return w.status();
  for (int i = 0; i < chunks; ++i) {
    if (auto s = w->add_chunk(chunk(tag, i)); !s.ok()) return s;
  }
  return w->finish();
}

std::vector<std::string> read_all(const log& l, std::uint64_t id, status* st) {
  std::vector<std::string> out;
  *st = l.read_snapshot(id, [&](std::string_view c) {
    out.emplace_back(c);
    return status{};
  });
  return out;
}

/// Overwrites a snapshot-CF value with plain RocksDB (the journal must be closed).
void raw_put_snapshot(const std::string& dir, const std::string& key, const std::string& value) {
  rocksdb::Options o;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
      {rocksdb::kDefaultColumnFamilyName, {}}, {format::meta_cf, {}},
      {format::records_cf, {}}, {format::snapshots_cf, {}}};
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(o, dir, cfs, &h, &db).ok());
  if (value.empty()) {
    ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(), h[3], key).ok());
  } else {
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), h[3], key, value).ok());
  }
  for (auto* x : h) db->DestroyColumnFamilyHandle(x);
  delete db;
}

TEST(JournalSnapshot, WritesListsAndReadsBackChunksInOrder) {
  temp_dir t;
  auto l = open_ok(t.path());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(l->append(1, "r").ok());
  auto info = write_snapshot(*l, 7, "A", 12);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->covering_seq, 7u);
  EXPECT_EQ(info->chunk_count, 12u);
  EXPECT_TRUE(info->complete);

  auto listed = l->list_snapshots();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].id, info->id);
  EXPECT_EQ((*listed)[0].covering_seq, 7u);
  EXPECT_TRUE((*listed)[0].complete);
  EXPECT_EQ((*listed)[0].total_bytes, info->total_bytes);

  status st;
  auto chunks = read_all(*l, info->id, &st);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(chunks.size(), 12u);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(chunks[i], chunk("A", i));
  EXPECT_TRUE(l->verify_snapshot(info->id).ok());
  EXPECT_EQ(l->begin_snapshot(11).status().code(), errc::invalid_argument);
}

TEST(JournalSnapshot, AnEmptySnapshotIsValid) {
  temp_dir t;
  auto l = open_ok(t.path());
  auto info = write_snapshot(*l, 0, "E", 0);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->chunk_count, 0u);
  EXPECT_TRUE(l->verify_snapshot(info->id).ok());
}

TEST(JournalSnapshot, UnfinishedSnapshotsAreIncompleteAndNeverLoaded) {
  temp_dir t;
  auto l = open_ok(t.path());
  ASSERT_TRUE(l->append(1, "r").ok());
  auto good = write_snapshot(*l, 1, "G", 3);
  ASSERT_TRUE(good.ok());
  auto w = l->begin_snapshot(1);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->add_chunk("partial").ok());
  {
    auto listed = l->list_snapshots();
    ASSERT_EQ(listed->size(), 2u);
    EXPECT_TRUE((*listed)[0].complete);
    EXPECT_FALSE((*listed)[1].complete);
    EXPECT_EQ(l->read_snapshot(w->id(), [](std::string_view) { return status{}; }).code(),
              errc::invalid_argument);
    EXPECT_EQ(l->delete_snapshot(w->id()).code(), errc::invalid_argument);  // being written
  }
  auto loaded = l->read_newest_snapshot([](const snapshot_info&) {},
                                        [](std::string_view) { return status{}; });
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->id, good->id);
  const std::uint64_t abandoned = w->id();
  ASSERT_TRUE(w->abandon().ok());
  EXPECT_EQ(l->list_snapshots()->size(), 1u);
  EXPECT_EQ(l->read_snapshot(abandoned, [](std::string_view) { return status{}; }).code(),
            errc::not_found);
  // Ids are never reused.
  auto next = l->begin_snapshot(1);
  EXPECT_GT(next->id(), abandoned);
}

TEST(JournalSnapshot, ACrashMidSnapshotLeavesAnIncompleteOnePruneRemoves) {
  temp_dir t;
  {
    auto l = open_ok(t.path());
    ASSERT_TRUE(l->append(1, "r").ok());
    ASSERT_TRUE(write_snapshot(*l, 1, "G", 2).ok());
  }
  // What a crash after begin_snapshot() and one chunk leaves: a header and a chunk, no
  // footer, and a meta id counter that may lag behind.
  raw_put_snapshot(t.path(), format::snapshot_header_key(9), format::encode_snapshot_header(9, 1));
  std::string c;
  format::encode_snapshot_chunk(9, 0, "x", &c);
  raw_put_snapshot(t.path(), format::snapshot_chunk_key(9, 0), c);
  auto l = open_ok(t.path());
  auto listed = l->list_snapshots();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_FALSE(listed->back().complete);
  EXPECT_EQ(listed->back().id, 9u);
  auto pruned = l->prune_snapshots(1);
  ASSERT_TRUE(pruned.ok());
  EXPECT_EQ(*pruned, 1u);
  EXPECT_EQ(l->list_snapshots()->size(), 1u);
  EXPECT_GT(l->begin_snapshot(1)->id(), 9u);
}

TEST(JournalSnapshot, ACorruptChunkIsReportedWithSnapshotAndOffset) {
  temp_dir t;
  std::uint64_t id = 0;
  {
    auto l = open_ok(t.path());
    ASSERT_TRUE(l->append(1, "r").ok());
    auto info = write_snapshot(*l, 1, "C", 5);
    ASSERT_TRUE(info.ok());
    id = info->id;
  }
  std::string bad;
  format::encode_snapshot_chunk(id, 3, chunk("C", 3), &bad);
  bad[bad.size() / 2] ^= 0x01;
  raw_put_snapshot(t.path(), format::snapshot_chunk_key(id, 3), bad);

  auto l = open_ok(t.path());
  status st;
  auto chunks = read_all(*l, id, &st);
  ASSERT_EQ(st.code(), errc::corruption);
  EXPECT_EQ(chunks.size(), 3u);  // chunks before the bad one were handed over, never the bad one
  std::uint64_t offset = 0;
  for (int i = 0; i < 3; ++i) offset += chunk("C", i).size();
  EXPECT_NE(st.message().find("snapshot " + std::to_string(id) + " chunk 3"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("byte offset " + std::to_string(offset)), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("checksum mismatch"), std::string::npos);
  EXPECT_EQ(l->verify_snapshot(id).code(), errc::corruption);
}

TEST(JournalSnapshot, AMissingChunkIsCorruption) {
  temp_dir t;
  std::uint64_t id = 0;
  {
    auto l = open_ok(t.path());
    auto info = write_snapshot(*l, 0, "M", 4);
    id = info->id;
  }
  raw_put_snapshot(t.path(), format::snapshot_chunk_key(id, 3), "");  // the last one
  auto l = open_ok(t.path());
  auto s = l->verify_snapshot(id);
  ASSERT_EQ(s.code(), errc::corruption);
  EXPECT_NE(s.message().find("footer promises 4 chunks"), std::string::npos) << s.message();
}

TEST(JournalSnapshot, LoadingFallsBackToAnOlderSnapshotWhenTheNewestIsCorrupt) {
  temp_dir t;
  std::uint64_t old_id = 0, new_id = 0;
  {
    auto l = open_ok(t.path());
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(l->append(1, "r").ok());
    old_id = write_snapshot(*l, 2, "old", 3)->id;
    new_id = write_snapshot(*l, 4, "new", 3)->id;
  }
  raw_put_snapshot(t.path(), format::snapshot_chunk_key(new_id, 1), "\x01garbage-bytes");
  auto l = open_ok(t.path());
  std::vector<std::string> loaded;
  std::vector<std::uint64_t> begun;
  std::vector<status> skipped;
  auto r = l->read_newest_snapshot(
      [&](const snapshot_info& s) { begun.push_back(s.id); loaded.clear(); },
      [&](std::string_view c) { loaded.emplace_back(c); return status{}; }, &skipped);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->id, old_id);
  EXPECT_EQ(r->covering_seq, 2u);
  EXPECT_EQ(begun, (std::vector<std::uint64_t>{new_id, old_id}));
  ASSERT_EQ(loaded.size(), 3u);
  EXPECT_EQ(loaded[2], chunk("old", 2));
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].code(), errc::corruption);
  EXPECT_NE(skipped[0].message().find("snapshot " + std::to_string(new_id)), std::string::npos);
}

TEST(JournalSnapshot, NoUsableSnapshotIsNotFound) {
  temp_dir t;
  auto l = open_ok(t.path());
  auto r = l->read_newest_snapshot([](const snapshot_info&) {},
                                   [](std::string_view) { return status{}; });
  EXPECT_EQ(r.status().code(), errc::not_found);
}

TEST(JournalSnapshot, AChunkCallbackErrorStopsTheReadAndIsReturned) {
  temp_dir t;
  auto l = open_ok(t.path());
  auto info = write_snapshot(*l, 0, "X", 4);
  int calls = 0;
  auto s = l->read_snapshot(info->id, [&](std::string_view) {
    return ++calls == 2 ? status{errc::internal, "decoder says no"} : status{};
  });
  EXPECT_EQ(s.code(), errc::internal);
  EXPECT_EQ(s.message(), "decoder says no");
  EXPECT_EQ(calls, 2);
}

TEST(JournalSnapshot, DeletionKeepsTheSnapshotTheTruncationNeeds) {
  temp_dir t;
  auto l = open_ok(t.path());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(l->append(1, "r").ok());
  auto a = write_snapshot(*l, 3, "a", 2);
  auto b = write_snapshot(*l, 6, "b", 2);
  auto c = write_snapshot(*l, 9, "c", 2);
  ASSERT_TRUE(l->truncate_through(9).ok());
  auto s = l->delete_snapshot(c->id);
  EXPECT_EQ(s.code(), errc::invalid_argument) << s.to_string();
  EXPECT_EQ(l->delete_snapshot(12345).code(), errc::not_found);
  EXPECT_TRUE(l->delete_snapshot(a->id).ok());
  auto pruned = l->prune_snapshots(1);
  ASSERT_TRUE(pruned.ok());
  EXPECT_EQ(*pruned, 1u);  // b
  auto listed = l->list_snapshots();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().id, c->id);
  EXPECT_EQ(l->prune_snapshots(0).status().code(), errc::invalid_argument);

  // Older than the truncation: skipped by the loader even if complete.
  std::vector<status> skipped;
  auto r = l->read_newest_snapshot([](const snapshot_info&) {},
                                   [](std::string_view) { return status{}; }, &skipped);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->id, c->id);
}

TEST(JournalSnapshot, ALargeSnapshotStreamsThroughInBoundedChunks) {
  temp_dir t;
  auto l = open_ok(t.path());
  auto w = l->begin_snapshot(0);
  std::string c(256 * 1024, '\0');
  for (int i = 0; i < 32; ++i) {  // 8 MiB
    for (std::size_t k = 0; k < c.size(); k += 8) c[k] = static_cast<char>(i + k);
    ASSERT_TRUE(w->add_chunk(c).ok());
  }
  auto info = w->finish();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->total_bytes, 32u * 256 * 1024);
  std::uint64_t bytes = 0;
  std::size_t largest = 0;
  ASSERT_TRUE(l->read_snapshot(info->id, [&](std::string_view ch) {
                 bytes += ch.size();
                 largest = std::max(largest, ch.size());
                 return status{};
               }).ok());
  EXPECT_EQ(bytes, info->total_bytes);
  EXPECT_EQ(largest, c.size());
}

}  // namespace
}  // namespace ic::journal
