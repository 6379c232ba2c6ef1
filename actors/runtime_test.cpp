#include "actors/runtime.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "state/test_support.hpp"
#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "journal/fault_env.hpp"
#include "tests/support/server_process.hpp"

namespace ic::actors {
namespace {

namespace v1 = inferencecache::v1alpha1;
using namespace std::chrono_literals;

std::string update_bytes(const std::string& replica, const std::vector<std::string>& blocks,
                         const std::string& scheme = "vllm") {
  return state::testing::chain_update(replica, blocks, scheme).SerializeAsString();
}

using state::testing::chain_lookup;

std::optional<index::lookup_route_response> lookup_blocking(runtime& rt,
                                                            index::lookup_route_request req) {
  std::promise<std::optional<index::lookup_route_response>> p;
  auto f = p.get_future();
  rt.lookup(std::move(req), std::chrono::steady_clock::now() + 5s,
            [&p](std::optional<index::lookup_route_response> r) { p.set_value(std::move(r)); });
  return f.get();
}

class collecting_subscriber final : public event_subscriber {
 public:
  using event_subscriber::event_subscriber;
  bool offer(const index::cache_change& c) override {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(std::string(c.replica_id) + ":" + std::to_string(static_cast<int>(c.type)) +
                   ":" + c.prefix_hash);
    cv.notify_all();
    return true;
  }
  std::vector<std::string> snapshot() {
    std::lock_guard<std::mutex> lock(mu);
    return seen;
  }
  /// Waits until at least `n` changes arrived; false after `timeout`.
  bool wait_for(std::size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return seen.size() >= n; });
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> seen;
};

class RuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::make_temp_dir("ic_runtime");
    opts_.journal_dir = dir_ + "/journal";
  }
  void TearDown() override { test::remove_tree(dir_); }
  std::string dir_;
  runtime_options opts_;
};

TEST_F(RuntimeTest, AcknowledgedUpdateIsVisibleToTheNextLookup) {
  std::string err;
  auto rt = runtime::start(opts_, nullptr, &err);
  ASSERT_NE(rt, nullptr) << err;
  auto ack = rt->append_blocking(proto::record_kind::update, update_bytes("r1", {"a", "b"}), 5s);
  ASSERT_TRUE(ack.has_value());
  EXPECT_TRUE(ack->accepted);
  EXPECT_EQ(ack->reason_code, "");
  EXPECT_GT(ack->seq, 0u);
  auto resp = lookup_blocking(*rt, chain_lookup({"a", "b"}));
  ASSERT_TRUE(resp.has_value());
  EXPECT_EQ(resp->reason_code, "PREFIX_MATCH");
  rt->stop();
}

TEST_F(RuntimeTest, AnInjectedClockStampsRecordsAndDecidesFreshness) {
  std::atomic<index::micros> now{1'700'000'000'000'000};
  opts_.clock = [&now] { return now.load(); };
  opts_.state.default_ttl = std::chrono::seconds(60);
  std::string err;
  auto rt = runtime::start(opts_, nullptr, &err);
  ASSERT_NE(rt, nullptr) << err;
  ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("r1", {"a", "b"}), 5s));
  auto fresh = lookup_blocking(*rt, chain_lookup({"a", "b"}));
  ASSERT_TRUE(fresh.has_value());
  EXPECT_EQ(fresh->reason_code, "PREFIX_MATCH");
  now += 61'000'000;  // past the TTL on the injected clock only; no sleep
  auto stale = lookup_blocking(*rt, chain_lookup({"a", "b"}));
  ASSERT_TRUE(stale.has_value());
  EXPECT_NE(stale->reason_code, "PREFIX_MATCH");
  rt->stop();
}

// Spec §3.4: records apply at t_eff = max(previous, stamp). The clock steps back 30 s
// between two appends: "b" lives from the earlier record's time, and after a restart from
// the final snapshot a record stamped earlier still does (the snapshot carries t_eff).
TEST_F(RuntimeTest, AClockSteppedBackDoesNotMoveRecordTimeBackwards) {
  constexpr index::micros t0 = 1'700'000'000'000'000;
  std::atomic<index::micros> now{t0 + 30'000'000};
  opts_.clock = [&now] { return now.load(); };
  opts_.state.default_ttl = std::chrono::seconds(60);
  auto fresh = [](runtime& rt, const std::string& block) {
    auto r = lookup_blocking(rt, chain_lookup({block}));
    return r.has_value() && r->reason_code == "PREFIX_MATCH";
  };
  std::string err;
  {
    auto rt = runtime::start(opts_, nullptr, &err);
    ASSERT_NE(rt, nullptr) << err;
    ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("r1", {"a"}), 5s));
    now = t0;  // stepped back
    ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("r2", {"b"}), 5s));
    now = t0 + 70'000'000;  // 70 s after its stamp, 40 s after t_eff
    EXPECT_TRUE(fresh(*rt, "b"));
    now = t0 + 5'000'000;
    rt->stop();  // final snapshot
  }
  auto rt = runtime::start(opts_, nullptr, &err);  // start-up sweep stamped +5 s
  ASSERT_NE(rt, nullptr) << err;
  ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("r3", {"c"}), 5s));
  now = t0 + 70'000'000;
  EXPECT_TRUE(fresh(*rt, "b"));
  EXPECT_TRUE(fresh(*rt, "c"));
  rt->stop();
}

TEST_F(RuntimeTest, DropReasonReachesTheAck) {
  std::string err;
  auto rt = runtime::start(opts_, nullptr, &err);
  ASSERT_NE(rt, nullptr) << err;
  auto ack = rt->append_blocking(proto::record_kind::update, update_bytes("r1", {"a"}, ""), 5s);
  ASSERT_TRUE(ack.has_value());
  EXPECT_TRUE(ack->accepted);
  EXPECT_EQ(ack->reason_code, "DROPPED_EMPTY_HASH_SCHEME");
}

TEST_F(RuntimeTest, RestartRecoversTheIndexFromTheJournal) {
  opts_.snapshot_on_stop = false;  // recover by replaying the journal alone
  std::string err;
  {
    auto rt = runtime::start(opts_, nullptr, &err);
    ASSERT_NE(rt, nullptr) << err;
    ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("r1", {"a", "b"}), 5s));
    ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("r2", {"a"}), 5s));
    rt->stop();
  }
  recovery_info info;
  auto rt = runtime::start(opts_, nullptr, &err, &info);
  ASSERT_NE(rt, nullptr) << err;
  EXPECT_GE(info.records_replayed, 2u);
  EXPECT_EQ(info.entries, 3);
  auto resp = lookup_blocking(*rt, chain_lookup({"a", "b"}));
  ASSERT_TRUE(resp.has_value());
  EXPECT_EQ(resp->reason_code, "PREFIX_MATCH");
  ASSERT_FALSE(resp->replica_scores.empty());
  EXPECT_EQ(resp->replica_scores[0].replica_id, "r1");
  EXPECT_EQ(resp->replica_scores[0].matched_tokens, 128);
}

TEST_F(RuntimeTest, SubscribersSeeAddedEntriesInOrder) {
  std::string err;
  auto rt = runtime::start(opts_, nullptr, &err);
  ASSERT_NE(rt, nullptr) << err;
  auto sub = std::make_shared<collecting_subscriber>(event_filter{"t", "", {}});
  auto other = std::make_shared<collecting_subscriber>(event_filter{"other-tenant", "", {}});
  rt->subscribe(sub);
  rt->subscribe(other);
  ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("r1", {"a", "b"}), 5s));
  auto seen = sub->snapshot();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], "r1:1:a");
  EXPECT_EQ(seen[1], "r1:1:b");
  EXPECT_TRUE(other->snapshot().empty());
}

class ending_subscriber final : public event_subscriber {
 public:
  using event_subscriber::event_subscriber;
  bool offer(const index::cache_change&) override { return true; }
  bool alive() const override { return !ended.load(); }
  std::atomic<bool> ended{false};
};

TEST_F(RuntimeTest, EndedSubscribersAreDroppedEvenWhenNothingMatchesThem) {
  std::string err;
  auto rt = runtime::start(opts_, nullptr, &err);
  ASSERT_NE(rt, nullptr) << err;
  auto sub = std::make_shared<ending_subscriber>(event_filter{"quiet-tenant", "", {}});
  std::weak_ptr<ending_subscriber> weak = sub;
  rt->subscribe(sub);
  sub->ended = true;
  sub.reset();
  // Changes for another tenant never reach its filter; the runtime drops it anyway.
  ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("r1", {"a"}), 5s));
  ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("r1", {"b"}), 5s));
  EXPECT_TRUE(weak.expired());
}

TEST_F(RuntimeTest, ShuttingDownRefusesAppends) {
  std::string err;
  auto rt = runtime::start(opts_, nullptr, &err);
  ASSERT_NE(rt, nullptr) << err;
  rt->begin_shutdown();
  auto ack = rt->append_blocking(proto::record_kind::update, update_bytes("r1", {"a"}), 5s);
  ASSERT_TRUE(ack.has_value());
  EXPECT_FALSE(ack->accepted);
  EXPECT_EQ(ack->reason_code, "SHUTTING_DOWN");
}

TEST_F(RuntimeTest, PolicyPushChangesTheLookupBudget) {
  std::string err;
  auto rt = runtime::start(opts_, nullptr, &err);
  ASSERT_NE(rt, nullptr) << err;
  EXPECT_EQ(rt->policy_of("t").lookup_timeout_ms, 0);
  auto ack = rt->append_blocking(
      proto::record_kind::policy,
      R"({"version":7,"policies":[{"namespace":"t","lookupTimeoutMs":40}],"tenants":[]})", 5s);
  ASSERT_TRUE(ack.has_value());
  EXPECT_TRUE(ack->accepted);
  EXPECT_EQ(rt->policy_of("t").lookup_timeout_ms, 40);
  auto json = rt->policy_json();
  EXPECT_NE(json.find("\"lookupTimeoutMs\":40"), std::string::npos) << json;
}

TEST_F(RuntimeTest, DiskFullRefusesWritesKeepsServingAndResumes) {
  journal::fault_env faults;
  opts_.journal_env = faults.env();
  std::string err;
  auto rt = runtime::start(opts_, nullptr, &err);
  ASSERT_NE(rt, nullptr) << err;
  ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("r1", {"a"}), 5s)->accepted);

  faults.set(journal::fault::no_space);
  auto refused = rt->append_blocking(proto::record_kind::update, update_bytes("r2", {"b"}), 5s);
  ASSERT_TRUE(refused.has_value());
  EXPECT_FALSE(refused->accepted);
  EXPECT_EQ(refused->reason_code, "JOURNAL_UNAVAILABLE");
  // Lookups are still served from memory, and the refused update was not applied.
  auto during = lookup_blocking(*rt, chain_lookup({"a"}));
  ASSERT_TRUE(during.has_value());
  EXPECT_EQ(during->reason_code, "PREFIX_MATCH");
  auto not_applied = lookup_blocking(*rt, chain_lookup({"b"}));
  ASSERT_TRUE(not_applied.has_value());
  EXPECT_NE(not_applied->reason_code, "PREFIX_MATCH");

  faults.set(journal::fault::none);
  auto resumed = rt->append_blocking(proto::record_kind::update, update_bytes("r2", {"b"}), 10s);
  ASSERT_TRUE(resumed.has_value());
  EXPECT_TRUE(resumed->accepted) << resumed->reason_code;
  auto after = lookup_blocking(*rt, chain_lookup({"b"}));
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->reason_code, "PREFIX_MATCH");
  rt->stop();

  // After a restart both acknowledged updates are back.
  opts_.journal_env = nullptr;
  auto again = runtime::start(opts_, nullptr, &err);
  ASSERT_NE(again, nullptr) << err;
  for (const char* block : {"a", "b"}) {
    auto recovered = lookup_blocking(*again, chain_lookup({block}));
    ASSERT_TRUE(recovered.has_value());
    EXPECT_EQ(recovered->reason_code, "PREFIX_MATCH") << block;
    ASSERT_EQ(recovered->replica_scores.size(), 1u);
    EXPECT_EQ(recovered->replica_scores[0].replica_id, block == std::string("a") ? "r1" : "r2");
  }
}

TEST_F(RuntimeTest, SnapshotTruncatesTheJournalAndRestartReplaysOnlyTheTail) {
  opts_.snapshot_on_stop = false;
  std::string err;
  {
    auto rt = runtime::start(opts_, nullptr, &err);
    ASSERT_NE(rt, nullptr) << err;
    for (int i = 0; i < 10; ++i)
      ASSERT_TRUE(rt->append_blocking(proto::record_kind::update,
                                      update_bytes("r" + std::to_string(i), {"a", "b" + std::to_string(i)}), 5s));
    auto report = rt->snapshot_now_blocking(30s);
    ASSERT_TRUE(report.has_value());
    EXPECT_TRUE(report->ok) << report->error;
    EXPECT_FALSE(report->skipped);
    EXPECT_GT(report->bytes, 0u);
    const auto covered = report->covering_seq;
    EXPECT_GE(covered, 10u);
    // Nothing new: a second request is skipped.
    auto again = rt->snapshot_now_blocking(30s);
    ASSERT_TRUE(again.has_value());
    EXPECT_TRUE(again->skipped);
    ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("late", {"late-block"}), 5s));
    rt->stop();
  }
  recovery_info info;
  auto rt = runtime::start(opts_, nullptr, &err, &info);
  ASSERT_NE(rt, nullptr) << err;
  EXPECT_GT(info.snapshot_seq, 0u);
  EXPECT_EQ(info.records_replayed, 1u);  // only the update after the snapshot
  EXPECT_EQ(info.entries, 21);
  for (const char* block : {"b3", "late-block"}) {
    auto resp = lookup_blocking(*rt, chain_lookup({block}));
    ASSERT_TRUE(resp.has_value());
    EXPECT_EQ(resp->reason_code, "PREFIX_MATCH") << block;
  }
}

TEST_F(RuntimeTest, FinalSnapshotOnStopLeavesNothingToReplay) {
  std::string err;
  {
    auto rt = runtime::start(opts_, nullptr, &err);
    ASSERT_NE(rt, nullptr) << err;
    ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("r1", {"a", "b"}), 5s));
    rt->stop();
  }
  recovery_info info;
  auto rt = runtime::start(opts_, nullptr, &err, &info);
  ASSERT_NE(rt, nullptr) << err;
  EXPECT_GT(info.snapshot_seq, 0u);
  EXPECT_EQ(info.records_replayed, 0u);
  EXPECT_EQ(info.entries, 2);
}

TEST_F(RuntimeTest, RecordCountTriggersSnapshots) {
  opts_.snapshot_every_records = 5;
  opts_.snapshot_on_stop = false;
  std::string err;
  {
    auto rt = runtime::start(opts_, nullptr, &err);
    ASSERT_NE(rt, nullptr) << err;
    for (int i = 0; i < 12; ++i)
      ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("r1", {"k" + std::to_string(i)}), 5s));
    rt->stop();  // waits for the snapshot writer to finish what it started
  }
  recovery_info info;
  auto rt = runtime::start(opts_, nullptr, &err, &info);
  ASSERT_NE(rt, nullptr) << err;
  EXPECT_GE(info.snapshot_seq, 5u);
  EXPECT_LT(info.records_replayed, 12u);
  EXPECT_EQ(info.entries, 12);
}

TEST_F(RuntimeTest, SnapshotIntervalIsMeasuredOnTheInjectedTimerClock) {
  auto seconds = std::make_shared<std::atomic<std::int64_t>>(1'000);
  opts_.timer_clock = [seconds] {
    return std::chrono::steady_clock::time_point{} + std::chrono::seconds(seconds->load());
  };
  opts_.snapshot_interval = std::chrono::hours(1);
  opts_.snapshot_every_records = 0;
  opts_.snapshot_on_stop = false;
  std::string err;
  {
    auto rt = runtime::start(opts_, nullptr, &err);
    ASSERT_NE(rt, nullptr) << err;
    ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("r1", {"a"}), 5s));
    *seconds += 3'599;  // one second short of the interval: not due
    ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("r1", {"b"}), 5s));
    // A snapshot queued by the batch above would run before this record is dispatched.
    ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("r1", {"b2"}), 5s));
    rt->stop();
  }
  recovery_info info;
  {
    auto rt = runtime::start(opts_, nullptr, &err, &info);
    ASSERT_NE(rt, nullptr) << err;
    EXPECT_EQ(info.snapshot_seq, 0u);
    *seconds += 3'600;  // the interval passed on the injected clock only; no sleep
    ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("r1", {"c"}), 5s));
    // The snapshot that batch queued runs at a quiescent point before `d` is dispatched.
    ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("r1", {"d"}), 5s));
    rt->stop();
  }
  auto rt = runtime::start(opts_, nullptr, &err, &info);
  ASSERT_NE(rt, nullptr) << err;
  EXPECT_GT(info.snapshot_seq, 0u);
  EXPECT_EQ(info.records_replayed, 1u);  // only `d`
  EXPECT_EQ(info.entries, 5);
}

TEST_F(RuntimeTest, SnapshotNowCoversEverythingAppliedEvenWhileAPeriodicOneRuns) {
  opts_.snapshot_every_records = 2;  // periodic snapshots keep starting
  opts_.snapshot_on_stop = false;
  std::string err;
  auto rt = runtime::start(opts_, nullptr, &err);
  ASSERT_NE(rt, nullptr) << err;
  for (int round = 0; round < 20; ++round) {
    std::optional<append_result> last;
    for (int i = 0; i < 3; ++i) {
      last = rt->append_blocking(proto::record_kind::update,
                                 update_bytes("r", {"k" + std::to_string(round * 3 + i)}), 5s);
      ASSERT_TRUE(last.has_value());
    }
    auto report = rt->snapshot_now_blocking(30s);
    ASSERT_TRUE(report.has_value());
    EXPECT_TRUE(report->ok) << report->error;
    EXPECT_GE(report->covering_seq, last->seq) << "round " << round;
  }
}

TEST_F(RuntimeTest, DeliveredLookupsCreditLfuAndTheCapSparesTheUsedEntry) {
  opts_.state.max_entries = 2;
  std::string err;
  auto rt = runtime::start(opts_, nullptr, &err);
  ASSERT_NE(rt, nullptr) << err;
  ASSERT_TRUE(rt->append_blocking(
      proto::record_kind::policy,
      R"({"version":7,"policies":[{"namespace":"t","eviction":"lfu"}],"tenants":[]})", 5s));
  ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("r1", {"used"}), 5s));
  ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("r2", {"idle"}), 5s));
  for (int i = 0; i < 3; ++i) {
    auto resp = lookup_blocking(*rt, chain_lookup({"used"}));
    ASSERT_TRUE(resp.has_value());
    ASSERT_EQ(resp->reason_code, "PREFIX_MATCH");
  }
  // Over the cap: the least-used entry goes, the credited one stays.
  ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("r3", {"new"}), 5s));
  auto used = lookup_blocking(*rt, chain_lookup({"used"}));
  ASSERT_TRUE(used.has_value());
  EXPECT_EQ(used->reason_code, "PREFIX_MATCH");
  auto idle = lookup_blocking(*rt, chain_lookup({"idle"}));
  ASSERT_TRUE(idle.has_value());
  EXPECT_NE(idle->reason_code, "PREFIX_MATCH");
}

// Lookups are decided on the asking threads while the tenant actor applies updates (the
// read gate): every answer shows whole updates only, never a replica's chain half-applied,
// and no thread ever sees the index go back.
TEST_F(RuntimeTest, LookupsFromSeveralThreadsDuringIngestSeeOnlyWholeUpdates) {
  std::string err;
  auto rt = runtime::start(opts_, nullptr, &err);
  ASSERT_NE(rt, nullptr) << err;
  const std::vector<std::string> chain{"b0", "b1", "b2", "b3", "b4", "b5"};
  std::atomic<bool> done{false};
  std::atomic<int> matches{0};
  std::atomic<int> torn{0};
  std::atomic<int> went_back{0};
  auto reader = [&] {
    int deepest = 0;
    while (!done.load()) {
      auto resp = lookup_blocking(*rt, chain_lookup(chain));
      if (!resp || resp->reason_code != "PREFIX_MATCH") continue;
      matches.fetch_add(1);
      int best = 0;
      for (const auto& s : resp->replica_scores) {
        // Replica r<i> was written in one update holding blocks 0..i.
        const int i = std::stoi(s.replica_id.substr(1));
        if (s.matched_tokens != 64 * (i + 1)) torn.fetch_add(1);
        best = std::max(best, s.matched_tokens);
      }
      if (best < deepest) went_back.fetch_add(1);
      deepest = std::max(deepest, best);
    }
  };
  std::thread a(reader), b(reader);
  for (std::size_t i = 0; i < chain.size(); ++i) {
    const std::vector<std::string> prefix(chain.begin(), chain.begin() + i + 1);
    ASSERT_TRUE(rt->append_blocking(proto::record_kind::update,
                                    update_bytes("r" + std::to_string(i), prefix), 5s));
    std::this_thread::sleep_for(2ms);
  }
  auto last = lookup_blocking(*rt, chain_lookup(chain));
  done = true;
  a.join();
  b.join();
  EXPECT_GT(matches.load(), 0);
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(went_back.load(), 0);
  ASSERT_TRUE(last.has_value());
  ASSERT_EQ(last->reason_code, "PREFIX_MATCH");
  ASSERT_FALSE(last->replica_scores.empty());
  EXPECT_EQ(last->replica_scores.front().replica_id, "r5");
  EXPECT_EQ(last->replica_scores.front().matched_tokens, 64 * 6);
}

TEST_F(RuntimeTest, PeriodicSweepRemovesExpiredEntriesAndTellsSubscribers) {
  auto seconds = std::make_shared<std::atomic<std::int64_t>>(1'000);
  opts_.timer_clock = [seconds] {
    return std::chrono::steady_clock::time_point{} + std::chrono::seconds(seconds->load());
  };
  opts_.state.default_ttl = std::chrono::seconds(5);
  opts_.sweep_interval = std::chrono::hours(1);  // on the injected clock only
  std::string err;
  auto rt = runtime::start(opts_, nullptr, &err);
  ASSERT_NE(rt, nullptr) << err;
  auto sub = std::make_shared<collecting_subscriber>(event_filter{"t", "", {2}});
  rt->subscribe(sub);
  const auto update_at = [](const std::string& tenant, const std::string& block,
                            std::int64_t ago_us) {
    v1::CacheStateUpdate u;
    u.set_replica_id("r1");
    u.set_model_id("m");
    u.set_tenant_id(tenant);
    u.set_hash_scheme("vllm");
    u.set_timestamp_us(std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count() -
                       ago_us);
    u.add_prefixes()->set_prefix_hash(block);
    return u.SerializeAsString();
  };
  const auto total_of_t = [&rt] {
    std::promise<std::int64_t> p;
    rt->cache_state("t", "m", std::chrono::steady_clock::now() + 5s,
                    [&p](std::optional<index::cache_state_view> v) {
                      p.set_value(v ? v->total_prefixes : -1);
                    });
    return p.get_future().get();
  };
  // Reported 10 s ago: already past the 5 s TTL, but no sweep is due yet.
  ASSERT_TRUE(
      rt->append_blocking(proto::record_kind::update, update_at("t", "old", 10'000'000), 5s));
  ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_at("u", "fresh", 0), 5s));
  EXPECT_EQ(total_of_t(), 1);
  *seconds += 3'600;  // the sweep interval passes on the timer clock; no sleep
  // The next append finds the sweep due and journals it ahead of itself (another tenant,
  // so `t`'s count below is the sweep's doing alone).
  ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_at("u", "fresh2", 0), 5s));
  // Its PREFIX_EVICTED is published after the removal, and the next ask of the tenant's
  // actor runs after that sweep slice.
  ASSERT_TRUE(sub->wait_for(1, 5s));
  EXPECT_EQ(total_of_t(), 0);
  auto seen = sub->snapshot();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], "r1:2:old");
}

// Producers on several threads feed many tenants under a small global cap: the live actors
// (headroom dispatch, exclusive updates with the cap merged over the tenants' orders, events,
// sweeps) must end in exactly the state a serial replay of the same journal rebuilds.
TEST_F(RuntimeTest, ManyTenantsUnderACapMatchTheSerialReplayOfTheJournal) {
  opts_.state.max_entries = 60;
  opts_.snapshot_on_stop = false;
  opts_.snapshot_every_records = 0;
  std::string err;
  std::vector<std::string> live;
  {
    auto rt = runtime::start(opts_, nullptr, &err);
    ASSERT_NE(rt, nullptr) << err;
    std::vector<std::thread> producers;
    std::atomic<int> refused{0};
    for (int p = 0; p < 4; ++p) {
      producers.emplace_back([&, p] {
        std::uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(p + 1);
        auto next = [&x] {
          x ^= x << 13;
          x ^= x >> 7;
          x ^= x << 17;
          return x;
        };
        std::vector<std::future<append_result>> acks;
        for (int i = 0; i < 150; ++i) {
          const std::string tenant = "t" + std::to_string(next() % 6);
          const std::string replica = "r" + std::to_string(next() % 3);
          if (next() % 10 == 0) {
            v1::CacheEvent e;
            e.set_type(next() % 3 != 0 ? v1::CacheEvent::PREFIX_EVICTED : v1::CacheEvent::ALL_CLEARED);
            e.set_tenant_id(tenant);
            e.set_replica_id(replica);
            e.set_model_id("m");
            e.set_prefix_hash("k" + std::to_string(next() % 40));
            auto r = rt->append_blocking(proto::record_kind::event, e.SerializeAsString(), 10s);
            if (!r || !r->accepted) ++refused;
            continue;
          }
          std::vector<std::string> blocks;
          const int n = 1 + static_cast<int>(next() % 6);
          for (int b = 0; b < n; ++b) blocks.push_back("k" + std::to_string(next() % 40));
          auto u = state::testing::chain_update(replica, blocks, "vllm", tenant);
          auto r = rt->append_blocking(proto::record_kind::update, u.SerializeAsString(), 10s);
          if (!r || !r->accepted) ++refused;
          if (i % 7 == 0) {
            auto q = chain_lookup(blocks);
            q.tenant_id = tenant;
            lookup_blocking(*rt, q);
          }
        }
      });
    }
    for (auto& t : producers) t.join();
    EXPECT_EQ(refused.load(), 0);
    auto dump = rt->canonical_dump_blocking(10s);
    ASSERT_TRUE(dump.has_value());
    live = *dump;
    auto snap = rt->snapshot_blocking(10s);
    ASSERT_TRUE(snap.has_value());
    std::int64_t entries = 0;
    for (const auto& line : live)
      if (line.rfind("G|", 0) == 0) entries = std::stoll(line.substr(2));
    EXPECT_LE(entries, 60);
    EXPECT_GT(entries, 40);
  }
  recovery_info info;
  auto rt = runtime::start(opts_, nullptr, &err, &info);
  ASSERT_NE(rt, nullptr) << err;
  EXPECT_GT(info.records_replayed, 500u);
  auto replayed = rt->canonical_dump_blocking(10s);
  ASSERT_TRUE(replayed.has_value());
  // The restart's own sweep removes nothing (default TTL 30 min).
  EXPECT_EQ(*replayed, live);
}

TEST_F(RuntimeTest, APolicyPushReachesExistingTenantActorsBeforeItsAck) {
  std::string err;
  auto rt = runtime::start(opts_, nullptr, &err);
  ASSERT_NE(rt, nullptr) << err;
  ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("r1", {"a"}), 5s));
  auto before = lookup_blocking(*rt, chain_lookup({"a"}));
  ASSERT_TRUE(before.has_value());
  ASSERT_EQ(before->reason_code, "PREFIX_MATCH");
  // A matched-tokens floor above the chain's 64 tokens turns the same lookup into a miss.
  auto ack = rt->append_blocking(
      proto::record_kind::policy,
      R"({"version":7,"policies":[{"namespace":"t","minimumMatchedTokens":1000,)"
      R"("affinityRouting":false}],"tenants":[]})",
      5s);
  ASSERT_TRUE(ack.has_value() && ack->accepted);
  auto after = lookup_blocking(*rt, chain_lookup({"a"}));
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->reason_code, "NO_HINT");
}

TEST_F(RuntimeTest, ManyTenantsComeBackFromASnapshotPlusTail) {
  opts_.snapshot_every_records = 0;
  opts_.snapshot_on_stop = false;
  std::string err;
  std::vector<std::string> live;
  {
    auto rt = runtime::start(opts_, nullptr, &err);
    ASSERT_NE(rt, nullptr) << err;
    auto append = [&](const std::string& tenant, const std::string& replica,
                      std::vector<std::string> blocks) {
      auto u = state::testing::chain_update(replica, blocks, "vllm", tenant);
      ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, u.SerializeAsString(), 5s));
    };
    for (int i = 0; i < 8; ++i) append("t" + std::to_string(i % 4), "r" + std::to_string(i), {"a", "b"});
    auto report = rt->snapshot_now_blocking(30s);
    ASSERT_TRUE(report.has_value() && report->ok);
    for (int i = 0; i < 5; ++i) append("u" + std::to_string(i), "r", {"c" + std::to_string(i)});
    live = *rt->canonical_dump_blocking(10s);
  }
  recovery_info info;
  auto rt = runtime::start(opts_, nullptr, &err, &info);
  ASSERT_NE(rt, nullptr) << err;
  EXPECT_GT(info.snapshot_seq, 0u);
  EXPECT_EQ(info.records_replayed, 5u);  // only the tail after the snapshot
  EXPECT_EQ(*rt->canonical_dump_blocking(10s), live);
  auto q = chain_lookup({"c1"});  // a tail record's tenant, one replica
  q.tenant_id = "u1";
  auto resp = lookup_blocking(*rt, q);
  ASSERT_TRUE(resp.has_value());
  EXPECT_EQ(resp->reason_code, "PREFIX_MATCH");
}

TEST_F(RuntimeTest, LookupsOfATenantWithoutAnActorSeeTheWholeIndex) {
  std::string err;
  auto rt = runtime::start(opts_, nullptr, &err);
  ASSERT_NE(rt, nullptr) << err;
  auto q = chain_lookup({"a"});
  q.tenant_id = "nobody";
  auto cold = lookup_blocking(*rt, q);
  ASSERT_TRUE(cold.has_value());
  EXPECT_EQ(cold->reason_code, "NO_HINT");  // cold-start carve-out
  ASSERT_TRUE(rt->append_blocking(proto::record_kind::update, update_bytes("r1", {"a"}), 5s));
  auto known = lookup_blocking(*rt, q);
  ASSERT_TRUE(known.has_value());
  EXPECT_EQ(known->reason_code, "UNKNOWN_TENANT");
}

TEST_F(RuntimeTest, UnopenableJournalFailsWithTheDirectoryNamed) {
  opts_.journal_dir = "/proc/ic-no-such-dir/journal";
  std::string err;
  auto rt = runtime::start(opts_, nullptr, &err);
  EXPECT_EQ(rt, nullptr);
  EXPECT_NE(err.find("/proc/ic-no-such-dir"), std::string::npos) << err;
}

}  // namespace
}  // namespace ic::actors
