// jetstream_log (the record_log seam over JetStream) against a real one-node nats-server:
// positions, read_after from inside an envelope, follow() delivering every replica's batches
// (own ones included) with their ids, local snapshots at replicated positions.
#include "journal/jetstream/jetstream_record_log.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "journal/jetstream/nats_fixture.hpp"
#include "tests/support/server_process.hpp"

namespace ic::journal::jetstream {
namespace {

using namespace std::chrono_literals;
using testing::nats_cluster;

jetstream_log_options log_options(const nats_cluster& c, const std::string& id,
                                  const std::string& dir) {
  jetstream_log_options o;
  o.nats.servers = c.urls();
  o.nats.replica_id = id;
  o.nats.replicas = 1;
  o.nats.max_bytes = std::int64_t{16} << 20;
  o.snapshot_dir = dir;
  o.catch_up_timeout = 10s;
  return o;
}

TEST(JetStreamRecordLog, TwoReplicasSeeOneOrderAndRecoveryResumesInsideAnEnvelope) {
  if (nats_cluster::binary().empty()) GTEST_SKIP() << "nats-server not installed";
  std::string why;
  auto c = nats_cluster::start(1, &why);
  ASSERT_TRUE(c) << why;
  const std::string tmp = ic::test::make_temp_dir("ic_jsrl");
  auto a = jetstream_log::open(log_options(*c, "ra", tmp + "/a"));
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  auto b = jetstream_log::open(log_options(*c, "rb", tmp + "/b"));
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_TRUE((*a)->replicated());

  // Nothing in the stream yet: recovery reads nothing and follow() starts at 1.
  ASSERT_TRUE((*b)->read_after(0, [](const record_view&) { return true; }).ok());
  std::vector<std::pair<std::string, std::uint64_t>> seen;  // (batch id, position)
  std::atomic<bool> stop{false};
  std::thread follower([&] {
    (void)(*b)->follow([&](const log_batch& lb) {
      for (const auto& r : *lb.records) seen.emplace_back(std::string(lb.batch_id), r.seq);
    }, stop);
  });
  const std::string id_a = (*a)->next_batch_id();
  auto p1 = (*a)->append({{1, "a1"}, {1, "a2"}, {1, "a3"}});
  ASSERT_TRUE(p1.ok()) << p1.status().to_string();
  EXPECT_EQ(*p1, record_position(1, 0));
  const std::string id_b = (*b)->next_batch_id();
  auto p2 = (*b)->append({{2, "b1"}});
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(*p2, record_position(2, 0));
  for (int i = 0; i < 200 && (*b)->stats().delivered_position < 2; ++i)
    std::this_thread::sleep_for(10ms);
  stop = true;
  follower.join();
  using P = std::pair<std::string, std::uint64_t>;
  EXPECT_EQ(seen, (std::vector<P>{{id_a, record_position(1, 0)}, {id_a, record_position(1, 1)},
                                  {id_a, record_position(1, 2)}, {id_b, record_position(2, 0)}}));
  EXPECT_NE(id_a, id_b);
  EXPECT_EQ((*b)->stats().log_position, 2u);

  // A snapshot taken between two records of envelope 1 covers record_position(1, 1):
  // recovery from it hands over exactly a3 and b1.
  auto w = (*a)->begin_snapshot(record_position(1, 1));
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  ASSERT_TRUE(w->finish().ok());
  ASSERT_TRUE((*a)->close().ok());
  auto again = jetstream_log::open(log_options(*c, "ra", tmp + "/a"));
  ASSERT_TRUE(again.ok());
  std::uint64_t covering = 0;
  ASSERT_TRUE((*again)
                  ->read_newest_snapshot([&](const snapshot_info& si) { covering = si.covering_seq; },
                                         [](std::string_view) { return status::success(); }, nullptr)
                  .ok());
  EXPECT_EQ(covering, record_position(1, 1));
  std::vector<std::string> tail;
  ASSERT_TRUE((*again)->read_after(covering, [&](const record_view& r) {
                  tail.emplace_back(r.payload);
                  return true;
                }).ok());
  EXPECT_EQ(tail, (std::vector<std::string>{"a3", "b1"}));
  EXPECT_EQ((*again)->last_position(), record_position(2, 0));
  ic::test::remove_tree(tmp);
}

// Policy pushes (spec §3.4): a conditional append expects the last policy message the
// caller applied; one that has not seen the newest loses with conflict and stores nothing. A replica recovering from a snapshot past the last policy message
// asks the stream for it.
TEST(JetStreamRecordLog, ConditionalAppendsLoseToANewerPushTheReplicaHasNotSeen) {
  if (nats_cluster::binary().empty()) GTEST_SKIP() << "nats-server not installed";
  std::string why;
  auto c = nats_cluster::start(1, &why);
  ASSERT_TRUE(c) << why;
  const std::string tmp = ic::test::make_temp_dir("ic_jsrl_cas");
  auto a = jetstream_log::open(log_options(*c, "ra", tmp + "/a"));
  auto b = jetstream_log::open(log_options(*c, "rb", tmp + "/b"));
  ASSERT_TRUE(a.ok() && b.ok());
  auto nothing = [](const record_view&) { return true; };
  ASSERT_TRUE((*a)->read_after(0, nothing).ok());
  ASSERT_TRUE((*b)->read_after(0, nothing).ok());
  EXPECT_EQ((*a)->scope_position(policy_scope), 0u);

  auto first = (*a)->append_conditional({{3, "p1"}}, policy_scope, 0);  // no policy yet: stored
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_EQ(*first, record_position(1, 0));
  auto lost = (*b)->append_conditional({{3, "p2"}}, policy_scope,
                                         (*b)->scope_position(policy_scope));  // b: none seen
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), errc::conflict) << lost.status().to_string();
  ASSERT_TRUE((*a)->append({{1, "update"}}).ok());  // seq 2, not a policy message

  std::atomic<bool> stop{false};
  std::thread follower([&] { (void)(*b)->follow([](const log_batch&) {}, stop); });
  for (int i = 0; i < 300 && (*b)->stats().delivered_position < 2; ++i)
    std::this_thread::sleep_for(10ms);
  stop = true;
  follower.join();
  EXPECT_EQ((*b)->scope_position(policy_scope), 1u);  // the update did not move it
  auto won = (*b)->append_conditional({{3, "p2"}}, policy_scope, 1);  // b applied p1
  ASSERT_TRUE(won.ok()) << won.status().to_string();
  EXPECT_EQ(*won, record_position(3, 0));
  auto state = [&]() { return (*b)->stats().log_position; };
  EXPECT_EQ(state(), 3u);  // the lost push stored nothing

  ASSERT_TRUE((*a)->append({{1, "update-2"}}).ok());  // seq 4
  auto late = jetstream_log::open(log_options(*c, "rc", tmp + "/c"));
  ASSERT_TRUE(late.ok());
  // As after a local snapshot covering seq 4: the policy message at 3 is not delivered again.
  ASSERT_TRUE((*late)->read_after(record_position(4, 0), nothing).ok());
  EXPECT_EQ((*late)->scope_position(policy_scope), 3u);
  ic::test::remove_tree(tmp);
}

/// Writes a local snapshot of `chunks` covering `position` into `log`.
void local_snapshot(record_log& log, std::uint64_t position, const std::vector<std::string>& chunks) {
  auto w = log.begin_snapshot(position);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  for (const auto& c : chunks) ASSERT_TRUE(w->add_chunk(c).ok());
  ASSERT_TRUE(w->finish().ok());
}

/// The chunks read_newest_snapshot hands over, and its result.
std::pair<result<snapshot_info>, std::vector<std::string>> newest(const record_log& log) {
  std::vector<std::string> got;
  auto r = log.read_newest_snapshot([&](const snapshot_info&) { got.clear(); },
                                    [&](std::string_view c) {
                                      got.emplace_back(c);
                                      return status::success();
                                    },
                                    nullptr);
  return {std::move(r), std::move(got)};
}

template <class Pred>
bool eventually(Pred pred) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!pred() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(20ms);
  return pred();
}

// The duties end to end on one node: the lease holder uploads its local snapshot and purges
// below it; an empty dir and a stale local snapshot (a gap, counted) start from the shared
// one; a purge past the manifest leaves a replica uncovered (refused with one line), unless
// it accepts the loss (--journal-reset): then it starts empty and uploads at once.
TEST(JetStreamRecordLog, SharedSnapshotUploadPurgeAndStartPlans) {
  if (nats_cluster::binary().empty()) GTEST_SKIP() << "nats-server not installed";
  std::string why;
  auto c = nats_cluster::start(1, &why);
  ASSERT_TRUE(c) << why;
  const std::string tmp = ic::test::make_temp_dir("ic_jsrl_shared");
  auto shared_opts = [&](const std::string& id, bool journal_reset = false) {
    auto o = log_options(*c, id, tmp + "/" + id);
    o.shared_snapshot_interval = 10ms;
    o.mark_interval = 100ms;
    o.reset_uncovered = journal_reset;
    return o;
  };
  // C first (no duties, so no mark): a local snapshot at envelope 1, then C stops.
  {
    auto cl = jetstream_log::open(log_options(*c, "rc", tmp + "/rc"));
    ASSERT_TRUE(cl.ok()) << cl.status().to_string();
    ASSERT_TRUE((*cl)->append({{1, "e1"}}).ok());
    local_snapshot(**cl, record_position(1, 0), {"old"});
  }
  auto a = jetstream_log::open(shared_opts("ra"));
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_TRUE((*a)->read_after(0, [](const record_view&) { return true; }).ok());
  for (int i = 2; i <= 3; ++i) ASSERT_TRUE((*a)->append({{1, "e" + std::to_string(i)}}).ok());
  std::atomic<bool> stop{false};
  std::thread follower([&] { (void)(*a)->follow([](const log_batch&) {}, stop); });
  ASSERT_TRUE(eventually([&] { return (*a)->stats().delivered_position == 3; }));
  ASSERT_TRUE(eventually([&] { return (*a)->stats().lease_holder; }));
  const std::uint64_t pos = record_position(3, 0);
  local_snapshot(**a, pos, {"hdr", "tenant"});
  ASSERT_TRUE((*a)->truncate_through(pos).ok());
  // Covering 2 (envelope 3 is re-read after it), A's own mark 2: purged below 3.
  ASSERT_TRUE(eventually([&] { return (*a)->stats().first_position == 3; }))
      << (*a)->stats().first_position;
  EXPECT_GT((*a)->stats().shared_snapshot_bytes, 0u);
  ASSERT_TRUE((*a)->append({{1, "e4"}}).ok());

  // An empty dir: the shared snapshot, then the tail from envelope 3 on (records ≤ pos skipped).
  auto b = jetstream_log::open(shared_opts("rb"));
  ASSERT_TRUE(b.ok());
  auto [info, chunks] = newest(**b);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->covering_seq, pos);
  EXPECT_EQ(chunks, (std::vector<std::string>{"hdr", "tenant"}));
  EXPECT_EQ((*b)->stats().gaps, 0u);
  std::vector<std::string> tail;
  ASSERT_TRUE((*b)->read_after(pos, [&](const record_view& r) {
    tail.emplace_back(r.payload);
    return true;
  }).ok());
  EXPECT_EQ(tail, std::vector<std::string>{"e4"});

  // C's local snapshot needs envelope 1, purged: a gap, the shared snapshot instead.
  auto cl = jetstream_log::open(shared_opts("rc"));
  ASSERT_TRUE(cl.ok());
  auto [cinfo, cchunks] = newest(**cl);
  ASSERT_TRUE(cinfo.ok()) << cinfo.status().to_string();
  EXPECT_EQ(cchunks, (std::vector<std::string>{"hdr", "tenant"}));
  EXPECT_EQ((*cl)->stats().gaps, 1u);

  // Purged by hand past the manifest (covering 2): nothing covers an empty dir any more.
  stop = true;
  follower.join();
  auto w = writer::open(log_options(*c, "purger", "").nats);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->truncate_before(5).ok());
  auto d = jetstream_log::open(shared_opts("rd"));
  ASSERT_TRUE(d.ok());
  auto [dinfo, dchunks] = newest(**d);
  ASSERT_FALSE(dinfo.ok());
  EXPECT_EQ(dinfo.status().code(), errc::out_of_range);
  EXPECT_NE(dinfo.status().message().find("no shared snapshot covers it"), std::string::npos)
      << dinfo.status().to_string();

  // --journal-reset beside B, which applied envelope 4 (mark 3 ≥ first 5 − 2) and so lost
  // nothing: refused like a start without the flag.
  {
    auto rr = jetstream_log::open(shared_opts("rr", true));
    ASSERT_TRUE(rr.ok());
    EXPECT_EQ(newest(**rr).first.status().code(), errc::out_of_range);
    EXPECT_EQ((*rr)->stats().journal_resets, 0u);
  }

  // Purged past B too (e5 written and purged, e6 kept): E (not the lease holder: A still
  // holds it) accepts the loss, starts empty just before the first sequence (6), reads what
  // follows, and its next local snapshot is uploaded at once; F on an empty dir then starts
  // from it (no reset needed).
  ASSERT_TRUE((*w)->append({{1, "e5"}}).ok());
  ASSERT_TRUE((*w)->truncate_before(6).ok());
  ASSERT_TRUE((*w)->append({{1, "e6"}}).ok());
  auto e = jetstream_log::open(shared_opts("re", true));
  ASSERT_TRUE(e.ok());
  auto [einfo, echunks] = newest(**e);
  ASSERT_FALSE(einfo.ok());
  EXPECT_EQ(einfo.status().code(), errc::not_found) << einfo.status().to_string();
  EXPECT_EQ((*e)->reset_through(), record_position(6, 0) - 1);
  EXPECT_EQ((*e)->stats().journal_resets, 1u);
  std::vector<std::string> kept;
  ASSERT_TRUE((*e)->read_after((*e)->reset_through(), [&](const record_view& r) {
    kept.emplace_back(r.payload);
    return true;
  }).ok());
  EXPECT_EQ(kept, std::vector<std::string>{"e6"});
  EXPECT_FALSE((*e)->stats().lease_holder);
  local_snapshot(**e, record_position(6, 0), {"reset-state"});
  ASSERT_TRUE((*e)->truncate_through(record_position(6, 0)).ok());  // as the snapshot writer does
  ASSERT_TRUE(eventually([&] { return (*e)->stats().shared_snapshot_bytes > 0; }))
      << "the reset's snapshot was not uploaded";
  auto f = jetstream_log::open(shared_opts("rf", true));  // the flag, but a snapshot covers
  ASSERT_TRUE(f.ok());
  auto [finfo, fchunks] = newest(**f);
  ASSERT_TRUE(finfo.ok()) << finfo.status().to_string();
  EXPECT_EQ((*f)->stats().journal_resets, 0u);
  EXPECT_EQ(finfo->covering_seq, record_position(6, 0));
  EXPECT_EQ(fchunks, std::vector<std::string>{"reset-state"});
  // A second look on E (a reload) never resets again.
  auto [again, again_chunks] = newest(**e);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ((*e)->stats().journal_resets, 1u);
  ic::test::remove_tree(tmp);
}

}  // namespace
}  // namespace ic::journal::jetstream
