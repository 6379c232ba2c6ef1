// key_table on its own: records are plain numbers whose hashes the test chooses, so probe
// chains, tag collisions, wrap-around and backward-shift deletion are forced deliberately.
#include "index/key_table.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

namespace ic::index {
namespace {

/// A record store for the table: record r has hash hashes[r] and value (its identity) r.
struct fake_records {
  std::vector<std::uint64_t> hashes;
  key_table table;

  std::uint64_t hash_of(std::uint32_t r) const { return hashes[r]; }
  /// Returns the record with hash `h` and identity `want`, or npos.
  std::uint32_t find(std::uint64_t h, std::uint32_t want) const {
    std::size_t at = 0;
    return table.find(h, [&](std::uint32_t r) { return r == want; }, at);
  }
  /// Adds a record with hash `h` (growing at 7/8 like tenant_index); returns it.
  std::uint32_t add(std::uint64_t h) {
    const auto r = static_cast<std::uint32_t>(hashes.size());
    hashes.push_back(h);
    std::size_t at = 0;
    EXPECT_EQ(table.find(h, [&](std::uint32_t x) { return x == r; }, at), key_table::npos);
    table.insert_at(at, h, r);
    if (table.over_load()) grow();
    return r;
  }
  void grow() {
    table.rehash(table.slot_count() * 2, [this](std::uint32_t r) { return hash_of(r); });
  }
  void erase(std::uint32_t r) {
    table.erase(r, [this](std::uint32_t x) { return hash_of(x); });
  }
};

// A hash with home slot `home` (in a 16-slot table) and tag `tag` (the top 6 bits).
std::uint64_t hash_at(std::uint64_t home, std::uint64_t tag, std::uint64_t salt = 0) {
  return (tag << 58) | (salt << 8) | home;
}

TEST(KeyTable, EmptyTableFindsNothingAndReportsTheEmptySlotOfTheHome) {
  key_table t;
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.slot_count(), 16u);
  std::size_t at = 99;
  EXPECT_EQ(t.find(hash_at(5, 1), [](std::uint32_t) { return true; }, at), key_table::npos);
  EXPECT_EQ(at, 5u);
  EXPECT_EQ(t.home_record(hash_at(5, 1)), key_table::npos);
}

TEST(KeyTable, FindsEveryRecordOfOneProbeChainWithEqualTags) {
  fake_records f;
  // Three records on the same home slot with the same tag: only `same` tells them apart.
  const auto a = f.add(hash_at(3, 7, 1));
  const auto b = f.add(hash_at(3, 7, 2));
  const auto c = f.add(hash_at(3, 7, 3));
  EXPECT_EQ(f.find(f.hashes[a], a), a);
  EXPECT_EQ(f.find(f.hashes[b], b), b);
  EXPECT_EQ(f.find(f.hashes[c], c), c);
  EXPECT_EQ(f.table.home_record(f.hashes[c]), a);  // the home slot holds the first one
  EXPECT_EQ(f.table.size(), 3u);
}

TEST(KeyTable, SkipsSlotsWhoseTagDiffersWithoutAskingSame) {
  fake_records f;
  f.add(hash_at(3, 1));
  f.add(hash_at(3, 2));
  std::size_t asked = 0;
  std::size_t at = 0;
  const std::uint32_t r = f.table.find(
      hash_at(3, 2), [&](std::uint32_t x) { ++asked; return x == 1; }, at);
  EXPECT_EQ(r, 1u);
  EXPECT_EQ(asked, 1u);  // record 0 (tag 1) was never looked at
  EXPECT_EQ(at, 4u);     // the slot after the home
}

TEST(KeyTable, EraseShiftsBackTheChainSoEveryOtherRecordStaysFindable) {
  fake_records f;
  // Homes 14, 14, 15, 15, 0: the chain wraps around the end of the 16 slots.
  const std::vector<std::uint32_t> r = {f.add(hash_at(14, 1)), f.add(hash_at(14, 2)),
                                        f.add(hash_at(15, 3)), f.add(hash_at(15, 4)),
                                        f.add(hash_at(0, 5))};
  f.erase(r[0]);
  EXPECT_EQ(f.table.size(), 4u);
  EXPECT_EQ(f.find(f.hashes[r[0]], r[0]), key_table::npos);
  for (std::size_t i = 1; i < r.size(); ++i) EXPECT_EQ(f.find(f.hashes[r[i]], r[i]), r[i]) << i;
  // No tombstone: the probe for a missing key on home 14 ends on the freed end of the chain.
  std::size_t at = 0;
  EXPECT_EQ(f.table.find(hash_at(14, 9), [](std::uint32_t) { return false; }, at),
            key_table::npos);
  EXPECT_EQ(at, 2u);  // 14, 15, 0, 1 hold the four others
  f.erase(r[2]);
  f.erase(r[4]);
  EXPECT_EQ(f.find(f.hashes[r[1]], r[1]), r[1]);
  EXPECT_EQ(f.find(f.hashes[r[3]], r[3]), r[3]);
}

TEST(KeyTable, GrowsPastSevenEighthsAndKeepsEveryRecord) {
  fake_records f;
  for (std::uint64_t i = 0; i < 14; ++i) f.add(hash_at(i, i % 3, i));
  EXPECT_EQ(f.table.slot_count(), 16u);  // 14 / 16 = 7/8: not over
  EXPECT_FALSE(f.table.over_load());
  EXPECT_TRUE(f.table.over_load(1));
  f.add(hash_at(14, 0, 99));
  EXPECT_EQ(f.table.slot_count(), 32u);
  for (std::uint32_t r = 0; r < 15; ++r) EXPECT_EQ(f.find(f.hashes[r], r), r);
}

TEST(KeyTable, SlotsForIsTheSmallestPowerOfTwoAtSevenEighths) {
  EXPECT_EQ(key_table::slots_for(0), 16u);
  EXPECT_EQ(key_table::slots_for(14), 16u);
  EXPECT_EQ(key_table::slots_for(15), 32u);
  EXPECT_EQ(key_table::slots_for(28), 32u);
  EXPECT_EQ(key_table::slots_for(29), 64u);
}

TEST(KeyTable, ResetEmptiesAndPresizes) {
  fake_records f;
  f.add(1);
  f.table.reset(key_table::slots_for(1000));
  EXPECT_EQ(f.table.size(), 0u);
  EXPECT_EQ(f.table.slot_count(), 2048u);
  EXPECT_EQ(f.find(1, 0), key_table::npos);
}

TEST(KeyTable, RandomInsertsAndErasesAgreeWithAHashMap) {
  std::mt19937_64 rng(11);
  fake_records f;
  std::unordered_map<std::uint32_t, bool> live;  // record -> in the table
  for (int step = 0; step < 8000; ++step) {
    const bool erase = !live.empty() && rng() % 3 == 0;
    if (erase) {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      f.erase(it->first);
      live.erase(it);
    } else {
      // Few distinct homes and tags, so chains are long and collide often.
      const std::uint64_t h = (rng() % 4) << 58 | (rng() & 0xFFFF00) | (rng() % 64);
      live[f.add(h)] = true;
    }
    if (step % 101 == 0) {
      ASSERT_EQ(f.table.size(), live.size());
      for (std::uint32_t r = 0; r < f.hashes.size(); ++r) {
        const bool in = live.count(r) != 0;
        ASSERT_EQ(f.find(f.hashes[r], r), in ? r : key_table::npos) << "step " << step;
      }
    }
  }
}

}  // namespace
}  // namespace ic::index
