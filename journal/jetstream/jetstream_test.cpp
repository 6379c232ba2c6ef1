// The JetStream record log against real nats-server processes on loopback (label
// integration): one standalone node or a 3-node cluster per test, stopped by PID even when
// a test fails (nats_cluster's destructor). Skipped only when nats-server is not installed.
#include "journal/jetstream/jetstream_log.hpp"

#include <gtest/gtest.h>
#include <nats/nats.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "journal/jetstream/nats_fixture.hpp"
#include "journal/jetstream/shared_snapshot.hpp"

namespace ic::journal::jetstream {
namespace {

using namespace std::chrono_literals;
using testing::nats_cluster;
using steady = std::chrono::steady_clock;

options base_options(const nats_cluster& c, const std::string& replica) {
  options o;
  o.servers = c.urls();
  o.replica_id = replica;
  o.replicas = c.size() == 1 ? 1 : 3;
  o.max_bytes = std::int64_t{64} << 20;
  o.open_timeout = 20s;
  return o;
}

// Every message of the stream up to `until`, read by a fresh reader from `from`.
std::vector<delivered_batch> read_all(const options& o, std::uint64_t from, std::uint64_t until) {
  std::vector<delivered_batch> out;
  auto r = reader::open(o, from);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (!r.ok()) return out;
  status s = (*r)->follow(until, [&](const delivered_batch& b) {
    out.push_back(b);
    return true;
  }, 30s);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return out;
}

// Skips when nats-server is not installed; start() brings up the servers of one test,
// which the fixture's destructor stops by PID whatever the outcome.
class JetStreamLog : public ::testing::Test {
 protected:
  void SetUp() override {
    if (nats_cluster::binary().empty()) GTEST_SKIP() << "nats-server not installed";
  }
  // Starts `nodes` servers (1, or a 3-node cluster); false, with the logs, when they did not.
  bool start(int nodes) {
    std::string why;
    cluster_ = nats_cluster::start(nodes, &why);
    if (cluster_ == nullptr) ADD_FAILURE() << why;
    return cluster_ != nullptr;
  }
  std::unique_ptr<nats_cluster> cluster_;
};

class SharedSnapshots : public JetStreamLog {};

// Whether key `key` of KV bucket `bucket` holds a value, asked over a raw libnats connection
// (the public API has no chunk reader).
bool kv_has(const std::string& url, const char* bucket, const char* key) {
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  kvStore* kv = nullptr;
  kvEntry* e = nullptr;
  bool found = natsConnection_ConnectTo(&nc, url.c_str()) == NATS_OK &&
               natsConnection_JetStream(&js, nc, nullptr) == NATS_OK &&
               js_KeyValue(&kv, js, bucket) == NATS_OK && kvStore_Get(&e, kv, key) == NATS_OK;
  if (e != nullptr) kvEntry_Destroy(e);
  if (kv != nullptr) kvStore_Destroy(kv);
  if (js != nullptr) jsCtx_Destroy(js);
  if (nc != nullptr) natsConnection_Destroy(nc);
  return found;
}

std::string first_payload(const delivered_batch& b) {
  return b.records.empty() ? std::string() : std::string(b.records.front().payload);
}

TEST_F(JetStreamLog, AppendsReadBackInOrderWithIdsAndPositions) {
  ASSERT_TRUE(start(1));
  auto& c = cluster_;
  const options o = base_options(*c, "r1");
  auto w = writer::open(o);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  std::vector<append_ack> acks;
  std::vector<std::vector<std::string>> sent;
  for (int i = 0; i < 40; ++i) {
    std::vector<std::string> payloads;
    for (int k = 0; k <= i % 3; ++k) payloads.push_back("b" + std::to_string(i) + "r" + std::to_string(k));
    std::vector<record_in> recs;
    for (const auto& p : payloads) recs.push_back({static_cast<std::uint32_t>(10 + i % 3), p});
    auto a = (*w)->append(recs);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    EXPECT_EQ(a->attempts, 1);
    EXPECT_FALSE(a->duplicate);
    acks.push_back(*a);
    sent.push_back(payloads);
  }
  EXPECT_EQ(acks.front().position, 1u);
  auto got = read_all(o, 1, acks.back().position);
  ASSERT_EQ(got.size(), acks.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].position, acks[i].position);
    EXPECT_EQ(got[i].msg_id, acks[i].msg_id);
    EXPECT_EQ(got[i].subject, "ic.journal.b");
    ASSERT_TRUE(got[i].problem.ok()) << got[i].problem.to_string();
    EXPECT_EQ(got[i].id.origin, "r1");
    EXPECT_EQ(got[i].id.counter, i + 1);
    ASSERT_EQ(got[i].records.size(), sent[i].size());
    for (std::size_t k = 0; k < sent[i].size(); ++k) {
      EXPECT_EQ(got[i].records[k].payload, sent[i][k]);
      EXPECT_EQ(got[i].records[k].seq, acks[i].position);
      EXPECT_EQ(got[i].records[k].type, 10 + i % 3);
    }
  }
  // A reader that starts in the middle sees exactly the tail.
  auto tail = read_all(o, 21, acks.back().position);
  ASSERT_EQ(tail.size(), 20u);
  EXPECT_EQ(tail.front().position, 21u);
}

TEST_F(JetStreamLog, DuplicateMsgIdIsStoredOnce) {
  ASSERT_TRUE(start(1));
  auto& c = cluster_;
  const options o = base_options(*c, "r1");
  auto w = writer::open(o);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  const batch_id id = (*w)->peek_next_id();
  auto first = (*w)->append({{1, "original"}});
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  // The caller repeats an "outcome unknown" append with its old id: acked, not stored again.
  auto again = (*w)->append({{1, "repeat"}}, id);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(again->position, first->position);
  EXPECT_EQ(again->msg_id, first->msg_id);
  auto next = (*w)->append({{1, "next"}});
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->position, first->position + 1);
  auto st = (*w)->state();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->last_seq, next->position);
  EXPECT_EQ(st->msgs, 2u);
  auto got = read_all(o, 1, next->position);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(first_payload(got[0]), "original");
  EXPECT_EQ(first_payload(got[1]), "next");
  EXPECT_EQ((*w)->stats().duplicates, 1u);
}

TEST_F(JetStreamLog, TwoWritersInterleaveAndTwoReadersSeeTheIdenticalOrder) {
  ASSERT_TRUE(start(3));
  auto& c = cluster_;
  options o1 = base_options(*c, "r1");
  options o2 = base_options(*c, "r2");
  std::rotate(o2.servers.begin(), o2.servers.begin() + 2, o2.servers.end());  // on n3
  auto w1 = writer::open(o1);
  ASSERT_TRUE(w1.ok()) << w1.status().to_string() << c->logs();
  auto w2 = writer::open(o2);
  ASSERT_TRUE(w2.ok()) << w2.status().to_string();
  constexpr int per_writer = 150;
  std::mutex mu;
  std::map<std::string, std::uint64_t> acked;  // msg id -> position
  auto run = [&](writer* w, const std::string& tag) {
    for (int i = 0; i < per_writer; ++i) {
      const std::string p = tag + std::to_string(i);
      auto a = w->append({{1, p}});
      ASSERT_TRUE(a.ok()) << a.status().to_string();
      std::lock_guard<std::mutex> lock(mu);
      acked[a->msg_id] = a->position;
    }
  };
  std::thread t1(run, w1->get(), "a");
  std::thread t2(run, w2->get(), "b");
  t1.join();
  t2.join();
  ASSERT_EQ(acked.size(), 2u * per_writer);
  const std::uint64_t last = 2 * per_writer;
  options r2 = o1;
  std::rotate(r2.servers.begin(), r2.servers.begin() + 1, r2.servers.end());  // on n2
  auto a = read_all(o2, 1, last);
  auto b = read_all(r2, 1, last);
  ASSERT_EQ(a.size(), last);
  ASSERT_EQ(b.size(), last);
  std::uint64_t last_a = 0, last_b = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].position, b[i].position);
    EXPECT_EQ(a[i].msg_id, b[i].msg_id);
    EXPECT_EQ(first_payload(a[i]), first_payload(b[i]));
    EXPECT_EQ(acked.at(a[i].msg_id), a[i].position);  // each acked append exactly here
    // Each writer's own appends keep its order.
    auto& prev = a[i].id.origin == "r1" ? last_a : last_b;
    EXPECT_GT(a[i].id.counter, prev);
    prev = a[i].id.counter;
  }
}

TEST_F(JetStreamLog, Kill9OfTheStreamLeaderLosesNoAcknowledgedAppend) {
  ASSERT_TRUE(start(3));
  auto& c = cluster_;
  options o = base_options(*c, "r1");
  o.append_timeout = 3s;  // shorter than the 4-6.5 s leader stall: some appends give up
  auto w = writer::open(o);
  ASSERT_TRUE(w.ok()) << w.status().to_string() << c->logs();
  auto st = (*w)->state();
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  const int leader = c->index_of(st->leader);
  ASSERT_GE(leader, 0) << "leader '" << st->leader << "'";

  // A replica's live reader, connected to a node that survives, follows throughout.
  options ro = o;
  ro.servers = {c->url((leader + 1) % 3), c->url((leader + 2) % 3)};
  auto live = reader::open(ro, 1);
  ASSERT_TRUE(live.ok()) << live.status().to_string();
  std::vector<std::pair<std::uint64_t, std::string>> live_seen;
  std::atomic<std::uint64_t> live_target{0};
  status live_status;
  int live_errors = 0;
  std::thread follower([&] {
    const auto deadline = steady::now() + 90s;
    while (steady::now() < deadline) {
      const std::uint64_t target = live_target.load();
      if (target != 0 && (*live)->expected() > target) return;
      auto b = (*live)->next(200ms);
      if (!b.ok()) {
        // As the server's follower does (jetstream_log::follow): only a gap ends it; any
        // other error is the connection or consumer being re-established, so ask again.
        if (b.status().code() == errc::out_of_range) { live_status = b.status(); return; }
        ++live_errors;
        std::this_thread::sleep_for(100ms);
        continue;
      }
      if (b->has_value()) live_seen.emplace_back((*b)->position, (*b)->msg_id);
    }
    live_status = status{errc::unavailable, "live reader did not reach the end in 90 s"};
  });

  std::map<std::string, std::uint64_t> acked;
  std::set<std::string> unknown;
  std::set<std::string> refused;  // "not published": refused before sending, never stored
  std::atomic<int> acked_count{0};
  std::atomic<bool> stop{false};
  std::thread appender([&] {
    const auto deadline = steady::now() + 40s;
    int i = 0;
    while (!stop.load() && steady::now() < deadline) {
      const batch_id id = (*w)->peek_next_id();
      auto a = (*w)->append({{1, "v" + std::to_string(i++)}});
      if (a.ok()) {
        acked[a->msg_id] = a->position;
        ++acked_count;
      } else {
        EXPECT_EQ(a.status().code(), errc::unavailable);
        const std::string& m = a.status().message();
        // After a give-up, while the connection is still re-established, appends are
        // refused at once without being sent (writer::publish): definitely not stored.
        if (m.rfind("journal unavailable: NATS is disconnected", 0) == 0) {
          EXPECT_NE(m.find(" not published"), std::string::npos) << m;
          refused.insert(msg_id(id));
          std::this_thread::sleep_for(20ms);
        } else {
          EXPECT_EQ(m.rfind("outcome unknown; retry", 0), 0u) << m;
          unknown.insert(msg_id(id));
        }
      }
    }
  });
  const auto wait_until = steady::now() + 20s;
  while (acked_count.load() < 100 && steady::now() < wait_until) std::this_thread::sleep_for(5ms);
  c->kill9(leader);
  const auto killed_at = steady::now();
  const int before = acked_count.load();
  // Appends resume once a new leader is elected (4-8 s typically on this box). 2.9.10
  // sometimes stays leaderless far longer (spec §2.4: 17 s, until the killed node returned;
  // seen here once: 29 s); after 20 s the node is restarted, as Kubernetes would.
  auto wait_acks = [&](int target, std::chrono::seconds bound) {
    const auto until = steady::now() + bound;
    while (acked_count.load() < target && steady::now() < until) std::this_thread::sleep_for(20ms);
    return acked_count.load() >= target;
  };
  bool restarted_early = false;
  if (!wait_acks(before + 50, 20s)) {
    restarted_early = true;
    ASSERT_TRUE(c->restart(leader)) << c->logs();
  }
  const bool resumed = wait_acks(before + 50, 30s);
  stop = true;
  appender.join();
  const auto stall_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - killed_at).count();
  ASSERT_TRUE(resumed) << "appends did not resume after the leader kill";
  auto after = (*w)->state();
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  if (!restarted_early) {
    EXPECT_NE(after->leader, st->leader);
  }
  // The killed node comes back (as a pod would). A consumer placed on it meanwhile can stall
  // the readers for 10-20 s on nats-server 2.9.10 (consumer create timing out while the dead
  // peer is still a placement candidate); the restart ends that.
  if (!restarted_early) {
    ASSERT_TRUE(c->restart(leader)) << c->logs();
  }
  live_target = after->last_seq;
  follower.join();
  ASSERT_TRUE(live_status.ok()) << live_status.to_string();

  // Every acknowledged append, once, at its position, for the live reader and a fresh one;
  // an unknown outcome may or may not be stored.
  const auto read_start = steady::now();
  auto got = read_all(o, 1, after->last_seq);
  const auto read_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      steady::now() - read_start).count();
  ASSERT_EQ(got.size(), after->last_seq);
  ASSERT_EQ(live_seen.size(), got.size());
  std::set<std::string> seen;
  std::vector<std::size_t> differ;  // indexes where the live and the fresh reader disagree
  for (std::size_t i = 0; i < got.size(); ++i) {
    const auto& b = got[i];
    EXPECT_EQ(live_seen[i].first, b.position);
    EXPECT_EQ(live_seen[i].second, b.msg_id);
    if (live_seen[i].second != b.msg_id) differ.push_back(i);
    EXPECT_TRUE(seen.insert(b.msg_id).second) << "delivered twice: " << b.msg_id;
    auto it = acked.find(b.msg_id);
    if (it != acked.end()) {
      EXPECT_EQ(it->second, b.position);
    } else {
      EXPECT_EQ(refused.count(b.msg_id), 0u) << "stored although refused: " << b.msg_id;
      EXPECT_EQ(unknown.count(b.msg_id), 1u) << "stored but neither acked nor unknown: " << b.msg_id;
    }
  }
  for (const auto& [id, pos] : acked) EXPECT_EQ(seen.count(id), 1u) << "lost acked " << id;
  // Seen once on nats-server 2.9.10 (journal/jetstream/README.md, "Findings"): the two readers
  // got different messages at one position. Fresh readers' consumers land on different
  // nodes, so a few more reads of that position tell copies that disagree from a reader bug.
  for (std::size_t k = 0; k < differ.size() && k < 3; ++k) {
    const std::uint64_t p = got[differ[k]].position;
    std::string ids;
    for (int n = 0; n < 4; ++n) {
      auto again = read_all(o, p, p);
      ids += " " + (again.empty() ? std::string("(none)") : again.front().msg_id);
    }
    std::printf("position %llu: live %s, fresh readers %s%s\n", static_cast<unsigned long long>(p),
                live_seen[differ[k]].second.c_str(), got[differ[k]].msg_id.c_str(), ids.c_str());
  }
  const writer_stats ws = (*w)->stats();
  std::printf("leader %s killed: %zu acked (%d before the kill), %zu unknown outcome, %llu "
              "retries, %zu refused unsent, %llu acked as duplicate; 50 more acks %lld ms after the "
              "kill%s; new leader %s; stream 1..%llu; live reader %llu resets, %d errors; fresh "
              "read %lld ms\n",
              st->leader.c_str(), acked.size(), before, unknown.size(),
              static_cast<unsigned long long>(ws.retries), refused.size(),
              static_cast<unsigned long long>(ws.duplicates), static_cast<long long>(stall_ms),
              restarted_early ? " (node restarted early)" : "",
              after->leader.c_str(), static_cast<unsigned long long>(after->last_seq),
              static_cast<unsigned long long>((*live)->resets()), live_errors,
              static_cast<long long>(read_ms));
}

TEST_F(JetStreamLog, UnreachableNatsFailsWithinTheBudgetAndRecoversAfterRestart) {
  ASSERT_TRUE(start(1));
  auto& c = cluster_;
  options o = base_options(*c, "r1");
  o.append_timeout = 1s;
  auto w = writer::open(o);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  auto before = (*w)->append({{1, "before"}});
  ASSERT_TRUE(before.ok()) << before.status().to_string();
  EXPECT_NE(c->stop(0), -1);  // stopped within the bound (nats-server exits 1 on SIGTERM)
  const auto t0 = steady::now();
  auto down = (*w)->append({{1, "while down"}});
  const auto took = steady::now() - t0;
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), errc::unavailable);
  EXPECT_EQ(down.status().message().rfind("outcome unknown; retry", 0), 0u)
      << down.status().message();
  EXPECT_LE(took, o.append_timeout + 300ms);
  std::printf("NATS down: %s (after %lld ms)\n", down.status().to_string().c_str(),
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  EXPECT_EQ((*w)->stats().unknown_outcomes, 1u);
  // Marked unavailable and still disconnected: refused at once, nothing published.
  const auto t1 = steady::now();
  auto refused = (*w)->append({{1, "refused"}});
  ASSERT_FALSE(refused.ok());
  EXPECT_LE(steady::now() - t1, 100ms);
  EXPECT_EQ(refused.status().message().rfind("journal unavailable", 0), 0u)
      << refused.status().message();
  ASSERT_TRUE(c->restart(0)) << c->logs();
  // The connection comes back by itself; appends succeed again (bounded).
  result<append_ack> again = status{errc::unavailable, "not tried"};
  const auto deadline = steady::now() + 20s;
  while (!again.ok() && steady::now() < deadline) again = (*w)->append({{1, "after"}});
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  auto got = read_all(o, 1, again->position);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(first_payload(got.front()), "before");
  EXPECT_EQ(first_payload(got.back()), "after");
}

TEST_F(JetStreamLog, FullStreamRefusesAppendsWithAClearError) {
  ASSERT_TRUE(start(1));
  auto& c = cluster_;
  options o = base_options(*c, "r1");
  o.max_bytes = 256 << 10;
  auto w = writer::open(o);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  const std::string payload(16 << 10, 'p');
  int stored = 0;
  status refused;
  for (int i = 0; i < 64 && refused.ok(); ++i) {
    auto a = (*w)->append({{1, payload}});
    if (a.ok()) ++stored; else refused = a.status();
  }
  ASSERT_FALSE(refused.ok()) << "never refused after " << stored << " appends";
  EXPECT_EQ(refused.code(), errc::unavailable);
  std::printf("after %d appends: %s\n", stored, refused.to_string().c_str());
  EXPECT_EQ(refused.message().rfind("stream full", 0), 0u) << refused.message();
  EXPECT_GE(stored, 10);
  EXPECT_LE(stored, 16);
  // A group larger than the server's max_payload (8 MB here) is refused before publishing.
  const std::string huge(9 << 20, 'h');
  auto too_big = (*w)->append({{1, huge}});
  EXPECT_EQ(too_big.status().code(), errc::invalid_argument) << too_big.status().to_string();
  auto st = (*w)->state();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->msgs, static_cast<std::uint64_t>(stored));  // nothing dropped (Discard=new)
  EXPECT_EQ(st->first_seq, 1u);
}

// The group commit splits a group that one envelope could not carry (max_payload 8 MB in
// the fixture): fitting_prefix names how many leading records fit, at least one.
TEST_F(JetStreamLog, FittingPrefixKeepsEachEnvelopeUnderMaxPayload) {
  ASSERT_TRUE(start(1));
  auto w = writer::open(base_options(*cluster_, "r1"));
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  const std::string three_mb(3 << 20, 'x');
  const std::vector<record_in> group(4, record_in{1, three_mb});
  const std::size_t fit = (*w)->fitting_prefix(group);
  EXPECT_EQ(fit, 2u);  // 6 MB + headers fit; 9 MB would not
  const std::vector<record_in> first(group.begin(), group.begin() + static_cast<std::ptrdiff_t>(fit));
  EXPECT_TRUE((*w)->append(first).ok());
  const std::vector<record_in> small(100, record_in{1, "tiny"});
  EXPECT_EQ((*w)->fitting_prefix(small), small.size());
  const std::string nine_mb(9 << 20, 'h');
  EXPECT_EQ((*w)->fitting_prefix({record_in{1, nine_mb}}), 1u);  // alone; append refuses it
}

TEST_F(JetStreamLog, ReaderReportsAGapAfterAPurge) {
  ASSERT_TRUE(start(1));
  auto& c = cluster_;
  const options o = base_options(*c, "r1");
  auto w = writer::open(o);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE((*w)->append({{1, "x"}}).ok());
  ASSERT_TRUE((*w)->truncate_before(6).ok());
  auto r = reader::open(o, 3);  // covered by nothing: records 3..5 are gone
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  status s = (*r)->follow(10, [](const delivered_batch&) { return true; }, 10s);
  EXPECT_EQ(s.code(), errc::out_of_range) << s.to_string();
  EXPECT_NE(s.message().find("expected sequence 3, got 6"), std::string::npos) << s.message();
  auto ok = read_all(o, 6, 10);
  EXPECT_EQ(ok.size(), 5u);
}

TEST_F(JetStreamLog, OpenRefusesAnIncompatibleStream) {
  ASSERT_TRUE(start(1));
  auto& c = cluster_;
  options o = base_options(*c, "r1");
  ASSERT_TRUE(writer::open(o).ok());
  o.replicas = 3;  // the stream was created with 1
  o.open_timeout = 2s;
  auto again = writer::open(o);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), errc::incompatible) << again.status().to_string();
  EXPECT_NE(again.status().message().find("replicas=1"), std::string::npos);
  o.replica_id = "bad.id";
  EXPECT_EQ(writer::open(o).status().code(), errc::invalid_argument);
}

TEST_F(SharedSnapshots, PutGetCasAndOldChunksPurged) {
  ASSERT_TRUE(start(1));
  auto& c = cluster_;
  const options o = base_options(*c, "r1");
  shared_snapshot_config cfg;
  cfg.chunk_bytes = 64 << 10;
  auto s = shared_snapshots::open(o, cfg);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ((*s)->latest().status().code(), errc::not_found);
  std::string blob(300000, '\0');
  for (std::size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<char>(i * 131 + 7);
  auto first = (*s)->put(10, blob, 0, 1);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  ASSERT_TRUE(first->has_value());
  EXPECT_EQ((*first)->chunks, 5u);
  auto got = (*s)->get();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->first.covering_seq, 10u);
  EXPECT_EQ(got->first.writer, "r1");
  EXPECT_EQ(got->second, blob);
  // A second writer with a stale view (expects no manifest) loses the CAS.
  options o2 = o;
  o2.replica_id = "r2";
  auto s2 = shared_snapshots::open(o2, cfg);
  ASSERT_TRUE(s2.ok());
  auto stale = (*s2)->put(11, "other", 0);
  ASSERT_TRUE(stale.ok()) << stale.status().to_string();
  EXPECT_FALSE(stale->has_value());
  // The current holder commits a newer snapshot on the right revision.
  const std::string blob2(70000, 'z');
  EXPECT_FALSE(kv_has(c->url(0), "ic_snap", "snap.11.0"));  // the loser cleaned up
  EXPECT_TRUE(kv_has(c->url(0), "ic_snap", "snap.10.4"));
  auto second = (*s)->put(20, blob2, (*first)->revision);
  ASSERT_TRUE(second.ok() && second->has_value()) << second.status().to_string();
  EXPECT_FALSE(kv_has(c->url(0), "ic_snap", "snap.10.0"));  // the old set is purged
  EXPECT_FALSE(kv_has(c->url(0), "ic_snap", "snap.10.4"));
  EXPECT_TRUE(kv_has(c->url(0), "ic_snap", "snap.20.1"));
  auto got2 = (*s2)->get();
  ASSERT_TRUE(got2.ok()) << got2.status().to_string();
  EXPECT_EQ(got2->first.covering_seq, 20u);
  EXPECT_EQ(got2->second, blob2);
  // Empty state is a valid snapshot too.
  auto empty = (*s)->put(21, "", (*second)->revision);
  ASSERT_TRUE(empty.ok() && empty->has_value());
  auto got3 = (*s)->get();
  ASSERT_TRUE(got3.ok()) << got3.status().to_string();
  EXPECT_TRUE(got3->second.empty());
}

TEST_F(SharedSnapshots, LeaseIsExclusiveRenewableAndExpires) {
  ASSERT_TRUE(start(1));
  auto& c = cluster_;
  shared_snapshot_config cfg;
  cfg.lease_ttl = 1000ms;
  options oa = base_options(*c, "ra");
  options ob = base_options(*c, "rb");
  auto a = shared_snapshots::open(oa, cfg);
  auto b = shared_snapshots::open(ob, cfg);
  ASSERT_TRUE(a.ok() && b.ok());
  auto la = (*a)->acquire_lease();
  ASSERT_TRUE(la.ok() && la->has_value()) << la.status().to_string();
  auto lb = (*b)->acquire_lease();
  ASSERT_TRUE(lb.ok());
  EXPECT_FALSE(lb->has_value());
  auto renewed = (*a)->renew_lease(**la);
  ASSERT_TRUE(renewed.ok() && renewed->has_value());
  EXPECT_GT((*renewed)->revision, (*la)->revision);
  auto steal = (*b)->renew_lease(lease{"rb", (*la)->revision});  // a stale revision
  ASSERT_TRUE(steal.ok());
  EXPECT_FALSE(steal->has_value());
  // A stops renewing; after the TTL, B takes over (bounded wait for the expiry).
  std::optional<lease> taken;
  const auto deadline = steady::now() + 10s;
  while (!taken && steady::now() < deadline) {
    auto t = (*b)->acquire_lease();
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    if (t->has_value()) taken = **t; else std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->holder, "rb");
  auto late = (*a)->renew_lease(**renewed);  // A wakes up late: fenced off
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(late->has_value());
}

TEST_F(SharedSnapshots, PurgeBoundWaitsForTheManifestAndTheSlowestLiveReplica) {
  ASSERT_TRUE(start(1));
  auto& c = cluster_;
  shared_snapshot_config cfg;
  cfg.mark_ttl = 1000ms;
  auto a = shared_snapshots::open(base_options(*c, "ra"), cfg);
  auto b = shared_snapshots::open(base_options(*c, "rb"), cfg);
  ASSERT_TRUE(a.ok() && b.ok());
  auto none = (*a)->purge_bound(5);
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_EQ(*none, 0u);  // no manifest: never purge
  ASSERT_TRUE((*a)->put_mark(50).ok());
  ASSERT_TRUE((*b)->put_mark(30).ok());
  auto low = (*a)->min_live_mark();
  ASSERT_TRUE(low.ok() && low->has_value());
  EXPECT_EQ(**low, 30u);
  auto m = (*a)->put(40, "state", 0);
  ASSERT_TRUE(m.ok() && m->has_value());
  auto p = (*a)->purge_bound(5);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, 25u);  // min(40, 30) - 5: rb still needs 31..
  ASSERT_TRUE((*b)->put_mark(45).ok());
  p = (*a)->purge_bound(5);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, 35u);  // min(40, 45) - 5: never above the manifest
  // rb dies: its mark expires and only ra's counts (bounded wait for the TTL).
  const auto deadline = steady::now() + 10s;
  std::uint64_t seen = 0;
  while (steady::now() < deadline) {
    ASSERT_TRUE((*a)->put_mark(60).ok());
    low = (*a)->min_live_mark();
    ASSERT_TRUE(low.ok() && low->has_value());
    seen = **low;
    if (seen == 60) break;
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_EQ(seen, 60u);
}

}  // namespace
}  // namespace ic::journal::jetstream
