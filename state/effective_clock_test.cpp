// The effective-time rule of spec/scaleout.md §3.4 (state/effective_clock.hpp): in log
// order, every record applies at max(previous, its stamp); replay, snapshot + tail and the
// live coordinator agree on it.
#include "state/effective_clock.hpp"

#include <gtest/gtest.h>

#include "state/snapshot_io.hpp"
#include "state/tenant_state.hpp"
#include "state/test_support.hpp"
#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::state {
namespace {

constexpr index::micros kT0 = 1'700'000'000'000'000;
constexpr index::micros kSecond = 1'000'000;

proto::decoded_record update_at(index::micros at, const std::string& replica,
                                const std::vector<std::string>& blocks) {
  return testing::as_record(testing::chain_update(replica, blocks), at);
}

proto::decoded_record sweep_at(index::micros at) {
  return *proto::decode_record(static_cast<std::uint32_t>(proto::record_kind::sweep),
                               proto::encode_record(proto::record_kind::sweep, at, {}));
}

state_options ttl_options() {
  state_options o;
  o.default_ttl = std::chrono::seconds(60);
  return o;
}

bool fresh(tenant_set& set, const std::string& block, index::micros now) {
  return set.lookup(testing::chain_lookup({block}), now).reason_code == "PREFIX_MATCH";
}

TEST(EffectiveClock, NeverMovesBackwards) {
  effective_clock c;
  EXPECT_EQ(c.last(), 0);
  EXPECT_EQ(c.advance(kT0 + 5), kT0 + 5);
  EXPECT_EQ(c.advance(kT0), kT0 + 5);  // a skewed / stepped-back stamp
  EXPECT_EQ(c.advance(kT0 + 9), kT0 + 9);
  EXPECT_EQ(c.last(), kT0 + 9);
  EXPECT_EQ(effective_clock(kT0).advance(3), kT0);
}

// Replica A (clock +30 s) appends "a", then replica B (correct clock) appends "b": "b"
// lives from A's later time, and a sweep stamped by the slow clock removes nothing early.
TEST(EffectiveClock, ASkewedEarlierStampAppliesAtThePreviousTime) {
  tenant_set set(ttl_options());
  set.apply(update_at(kT0 + 30 * kSecond, "r1", {"a"}));
  set.apply(update_at(kT0, "r2", {"b"}));
  EXPECT_EQ(set.effective_time(), kT0 + 30 * kSecond);
  // At +70 s "b" is 40 s old by t_eff (its raw stamp would make it 70 s old: expired).
  EXPECT_TRUE(fresh(set, "b", kT0 + 70 * kSecond));
  auto out = set.apply(sweep_at(kT0 + 75 * kSecond));
  EXPECT_EQ(out.sweep.entries_removed_lru, 0);
  out = set.apply(sweep_at(kT0 + 95 * kSecond));  // 65 s after t_eff of both
  EXPECT_EQ(out.sweep.entries_removed_lru, 2);
}

// A replica that restarts from a snapshot continues from the snapshot's t_eff, so the tail
// (with stamps before it) applies exactly as on a replica that replayed everything.
TEST(EffectiveClock, SnapshotPlusTailEqualsTheFullReplayWithBackwardStamps) {
  const std::vector<proto::decoded_record> head = {update_at(kT0 + 40 * kSecond, "r1", {"a"}),
                                                   update_at(kT0 + 2 * kSecond, "r2", {"b"})};
  const std::vector<proto::decoded_record> tail = {update_at(kT0 + 10 * kSecond, "r2", {"c"}),
                                                   sweep_at(kT0 + 20 * kSecond),
                                                   update_at(kT0 + 45 * kSecond, "r1", {"d"})};
  tenant_set full(ttl_options());
  for (const auto& r : head) full.apply(r);
  std::vector<std::string> chunks;
  ASSERT_TRUE(write_state_snapshot(full, [&](std::string_view c) {
    chunks.emplace_back(c);
    return true;
  }));
  for (const auto& r : tail) full.apply(r);

  state_loader loader(ttl_options());
  std::string err;
  for (const auto& c : chunks) ASSERT_TRUE(loader.feed(c, &err)) << err;
  auto restored = loader.finish(&err);
  ASSERT_NE(restored, nullptr) << err;
  EXPECT_EQ(restored->effective_time(), kT0 + 40 * kSecond);
  for (const auto& r : tail) restored->apply(r);
  EXPECT_EQ(restored->effective_time(), full.effective_time());
  EXPECT_EQ(restored->canonical_dump(), full.canonical_dump());
  // "c" applied at t_eff +40 s on both: fresh at +90 s.
  EXPECT_TRUE(fresh(*restored, "c", kT0 + 90 * kSecond));
  EXPECT_TRUE(fresh(full, "c", kT0 + 90 * kSecond));
}

TEST(EffectiveClock, AVersion3SnapshotLoadsWithTimeZero) {
  tenant_set set(ttl_options());
  set.apply(update_at(kT0, "r1", {"a"}));
  std::vector<std::string> chunks;
  ASSERT_TRUE(write_state_snapshot(set, [&](std::string_view c) {
    chunks.emplace_back(c);
    return true;
  }));
  // Rewrite the header as version 3 wrote it: no effective time after the policy JSON.
  std::string& h = chunks.front();
  ASSERT_EQ(h[8], 4);
  h[8] = 3;
  h.resize(h.size() - 8);
  state_loader loader(ttl_options());
  std::string err;
  for (const auto& c : chunks) ASSERT_TRUE(loader.feed(c, &err)) << err;
  auto restored = loader.finish(&err);
  ASSERT_NE(restored, nullptr) << err;
  EXPECT_EQ(restored->effective_time(), 0);
  EXPECT_EQ(restored->canonical_dump(), set.canonical_dump());
  // A version-4 header cut short is refused, not misread.
  state_loader short_loader(ttl_options());
  std::string cut = h;
  cut[8] = 4;
  EXPECT_FALSE(short_loader.feed(cut, &err));
}

}  // namespace
}  // namespace ic::state
