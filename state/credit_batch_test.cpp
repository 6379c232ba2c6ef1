// Journaled LFU credits (spec/scaleout.md §3.4, §3.10 check 9 "credit batch merge"): a
// batch merges credits by entry name, bounds its size, and applying the journaled record
// credits the named entries of every replica's index alike.
#include "state/credit_batch.hpp"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "state/tenant_state.hpp"
#include "state/test_support.hpp"
#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::state {
namespace {

constexpr index::micros kT0 = 1'700'000'000'000'000;

index::named_hit hit(const std::string& key, const std::string& replica = "r1") {
  return index::named_hit{"m", "vllm", "", key, replica};
}

proto::decoded_record credit_record_of(const std::vector<proto::lfu_credit>& credits,
                                       index::micros at) {
  const std::string bytes = proto::encode_record(proto::record_kind::lfu_credits, at,
                                                 proto::encode_credits(credits));
  return *proto::decode_record(static_cast<std::uint32_t>(proto::record_kind::lfu_credits), bytes);
}

proto::decoded_record policy_of(const std::string& json) {
  return *proto::decode_record(static_cast<std::uint32_t>(proto::record_kind::policy),
                               proto::encode_record(proto::record_kind::policy, kT0, json));
}

TEST(CreditBatch, MergesByEntryAndTakesInNameOrder) {
  credit_batch b;
  b.add("t", hit("b"));
  b.add("t", hit("a"));
  b.add("t", hit("b"), 2);
  b.add("u", hit("a"));
  b.add("t", hit("a", "r2"));
  auto due = b.take();
  ASSERT_EQ(due.size(), 4u);
  EXPECT_EQ(due[0].tenant, "t");
  EXPECT_EQ(due[0].hit.key, "a");
  EXPECT_EQ(due[0].hit.replica, "r1");
  EXPECT_EQ(due[1].hit.replica, "r2");
  EXPECT_EQ(due[2].hit.key, "b");
  EXPECT_EQ(due[2].count, 3u);
  EXPECT_EQ(due[3].tenant, "u");
  EXPECT_TRUE(b.take().empty());  // taken: the batch starts over
}

// Tenant actors add from any scheduler thread while the journal actor takes: no credit is
// lost or counted twice (also run under ThreadSanitizer, label tsan).
TEST(CreditBatch, AddsFromManyThreadsWhileTakingLoseNoCredit) {
  credit_batch b;
  constexpr int kThreads = 4, kAdds = 2000;
  std::atomic<bool> done{false};
  std::uint64_t taken = 0;
  std::thread taker([&] {
    while (!done.load()) {
      for (const auto& c : b.take()) taken += c.count;
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> adders;
  for (int t = 0; t < kThreads; ++t)
    adders.emplace_back([&b, t] {
      for (int i = 0; i < kAdds; ++i) b.add(t % 2 ? "t" : "u", hit("k" + std::to_string(i % 7)));
    });
  for (auto& a : adders) a.join();
  done = true;
  taker.join();
  for (const auto& c : b.take()) taken += c.count;
  EXPECT_EQ(taken, static_cast<std::uint64_t>(kThreads) * kAdds);
  EXPECT_EQ(b.dropped(), 0u);
}

TEST(CreditBatch, AFullBatchDropsNewEntriesButStillCountsHeldOnes) {
  credit_batch b(2);
  b.add("t", hit("a"));
  b.add("t", hit("b"));
  b.add("t", hit("c"));  // dropped
  b.add("t", hit("a"));  // held: adds up
  EXPECT_EQ(b.dropped(), 1u);
  auto due = b.take();
  ASSERT_EQ(due.size(), 2u);
  EXPECT_EQ(due[0].count, 2u);
  b.add("t", hit("c"));  // room again after take()
  EXPECT_EQ(b.take().size(), 1u);
}

// add_hits (the lookup path) gives what naming every hit and add()ing it gives: the same
// entries, counts and order, across takes, with a full batch's drops counted alike.
TEST(CreditBatch, AddHitsCountsWhatAddingEachNamedHitCounts) {
  tenant_set s;
  s.apply(policy_of(
      R"({"version":7,"policies":[{"namespace":"t","eviction":"lfu"}],"tenants":[]})"));
  s.apply(testing::as_record(testing::chain_update("r1", {"a", "b", "c"}), kT0));
  s.apply(testing::as_record(testing::chain_update("r2", {"a"}), kT0 + 1));
  const tenant_state& t = *s.find("t");
  for (std::size_t cap : {std::size_t{4096}, std::size_t{3}}) {
    credit_batch fast(cap), named(cap);
    for (int round = 0; round < 2; ++round) {  // a take() between: counted afresh
      for (const auto& blocks : std::vector<std::vector<std::string>>{
               {"a", "b", "c"}, {"a", "b"}, {"a", "b", "c"}, {"a", "b", "x"}}) {
        auto out = t.decide(testing::chain_lookup(blocks), kT0 + 10);
        ASSERT_EQ(out.response.reason_code, "PREFIX_MATCH");
        ASSERT_FALSE(out.credit.empty());
        t.collect_credit(out.credit, fast);
        for (const auto& r : out.credit)
          for (const auto& h : r.hits) named.add("t", *t.index().name_hit(h));
      }
      const auto a = fast.take(), b = named.take();
      ASSERT_EQ(a.size(), b.size()) << "cap " << cap;
      ASSERT_FALSE(a.empty());
      for (std::size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].hit.key, b[i].hit.key);
        EXPECT_EQ(a[i].hit.replica, b[i].hit.replica);
        EXPECT_EQ(a[i].count, b[i].count);
      }
      EXPECT_EQ(fast.dropped(), named.dropped());
    }
    if (cap == 3) EXPECT_GT(fast.dropped(), 0u);  // the small batch did fill up
  }
}

// An entry_ref means something only to the index that made it: a new index (a snapshot
// reload) may use the same slot and ids for another entry, which must get its own name.
TEST(CreditBatch, AddHitsNamesTheEntriesOfANewIndexAfresh) {
  tenant_set before, after;
  for (tenant_set* s : {&before, &after})
    s->apply(policy_of(
        R"({"version":7,"policies":[{"namespace":"t","eviction":"lfu"}],"tenants":[]})"));
  before.apply(testing::as_record(testing::chain_update("r1", {"a"}), kT0));
  after.apply(testing::as_record(testing::chain_update("r2", {"a"}), kT0));
  auto old_out = before.find("t")->decide(testing::chain_lookup({"a"}), kT0 + 10);
  auto new_out = after.find("t")->decide(testing::chain_lookup({"a"}), kT0 + 10);
  ASSERT_EQ(old_out.credit.size(), 1u);
  ASSERT_EQ(new_out.credit.size(), 1u);
  ASSERT_EQ(old_out.credit[0].hits.size(), 1u);
  ASSERT_EQ(new_out.credit[0].hits.size(), 1u);
  const index::entry_ref o = old_out.credit[0].hits[0], n = new_out.credit[0].hits[0];
  // The two refs are alike in every field: only the index instance tells them apart.
  ASSERT_EQ(o.key, n.key);
  ASSERT_EQ(o.replica, n.replica);
  ASSERT_EQ(o.key_hash, n.key_hash);
  ASSERT_EQ(o.key_part, n.key_part);
  credit_batch batch;
  before.find("t")->collect_credit(old_out.credit, batch);
  after.find("t")->collect_credit(new_out.credit, batch);
  const auto due = batch.take();
  ASSERT_EQ(due.size(), 2u);
  EXPECT_EQ(due[0].hit.replica, "r1");
  EXPECT_EQ(due[1].hit.replica, "r2");
  EXPECT_EQ(due[0].count, 1u);
  EXPECT_EQ(due[1].count, 1u);
}

TEST(CreditBatch, TheRecordRoundTripsAndSplitsByTenant) {
  const std::vector<proto::lfu_credit> credits = {{"t", hit("a"), 2}, {"u", hit("x", "r9"), 1},
                                                  {"t", hit("b"), 5}};
  auto rec = credit_record_of(credits, kT0);
  EXPECT_EQ(rec.applied_at_us, kT0);
  const auto& back = std::get<proto::credit_record>(rec.payload);
  ASSERT_EQ(back.credits.size(), 3u);
  EXPECT_EQ(back.credits[1].hit.replica, "r9");
  EXPECT_EQ(back.credits[2].count, 5u);
  auto split = credits_by_tenant(back);
  ASSERT_EQ(split.size(), 2u);
  EXPECT_EQ(split["t"].credits.size(), 2u);
  EXPECT_EQ(split["u"].credits.size(), 1u);
}

// Two replicas' indexes hold the same entries; lookups happen on replica A only. A collects
// the credits by name, the journaled record is applied on both: the cap then evicts the
// same entry on both (the uncredited one), as spec §3.4 requires of LFU tenants.
TEST(CreditBatch, AppliedFromTheRecordBothReplicasEvictTheSameEntry) {
  state_options o;
  o.max_entries = 2;
  tenant_set a(o), b(o);
  for (tenant_set* s : {&a, &b}) {
    s->apply(policy_of(
        R"({"version":7,"policies":[{"namespace":"t","eviction":"lfu"}],"tenants":[]})"));
    s->apply(testing::as_record(testing::chain_update("r1", {"used"}), kT0));
    s->apply(testing::as_record(testing::chain_update("r2", {"idle"}), kT0 + 1));
  }
  credit_batch batch;
  for (int i = 0; i < 3; ++i) {
    auto out = a.find("t")->decide(testing::chain_lookup({"used"}), kT0 + 10);
    ASSERT_EQ(out.response.reason_code, "PREFIX_MATCH");
    a.find("t")->collect_credit(out.credit, batch);  // collected, not applied
  }
  EXPECT_EQ(a.canonical_dump(), b.canonical_dump());  // collecting changed nothing yet
  auto due = batch.take();
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].count, 3u);
  EXPECT_EQ(due[0].hit.model, "m");
  EXPECT_EQ(due[0].hit.replica, "r1");
  const auto rec = credit_record_of(due, kT0 + 20);
  a.apply(rec);
  b.apply(rec);
  EXPECT_EQ(a.canonical_dump(), b.canonical_dump());
  for (tenant_set* s : {&a, &b}) {
    s->apply(testing::as_record(testing::chain_update("r3", {"new"}), kT0 + 30));  // over the cap
    EXPECT_EQ(s->lookup(testing::chain_lookup({"used"}), kT0 + 40).reason_code, "PREFIX_MATCH");
    EXPECT_NE(s->lookup(testing::chain_lookup({"idle"}), kT0 + 40).reason_code, "PREFIX_MATCH");
  }
  EXPECT_EQ(a.canonical_dump(), b.canonical_dump());
}

TEST(CreditBatch, CreditsOfEntriesThatAreGoneAreSkipped) {
  tenant_set s;
  s.apply(testing::as_record(testing::chain_update("r1", {"a"}), kT0));
  const auto before = s.canonical_dump();
  auto out = s.apply(credit_record_of({{"t", hit("zzz"), 4}, {"nobody", hit("a"), 1},
                                       {"t", hit("a", "r-gone"), 1}},
                                      kT0 + 1));
  EXPECT_TRUE(out.ok);
  EXPECT_EQ(s.canonical_dump(), before);
}

}  // namespace
}  // namespace ic::state
