// The pd bench's topology body, stats and answer checks, against the server's own parser and
// selector (topology/: plain C++), so the bench measures what the server really answers.
#include "tools/bench/pd_workload.hpp"

#include <set>

#include <gtest/gtest.h>

#include "policy/resolved_policy.hpp"
#include "tools/common/codec.hpp"
#include "topology/pd_selector.hpp"
#include "topology/topology_json.hpp"
#include "topology/topology_store.hpp"

namespace ic::tools::bench {
namespace {

constexpr topology::micros kNow = 1'800'000'000'000'000;

workload_shape shape_64() {
  workload_shape s;
  s.replicas = 64;
  return s;
}

/// Every replica of `pd_replicas` reported stats at kNow; `holder` holds every key.
class bench_view : public topology::pd_state_view {
 public:
  bench_view(std::vector<pd_replica> replicas, std::string holder)
      : replicas_(std::move(replicas)), holder_(std::move(holder)) {}
  void stats_rows(std::string_view, std::string_view, std::vector<topology::replica_row>& out) const override {
    for (const auto& r : replicas_) out.push_back({r.id, r.pressure, kNow});
  }
  topology::prefix_probe probe(std::string_view, std::string_view, std::string_view, std::string_view,
                               const policy::resolved_policy&, topology::micros) const override {
    topology::prefix_probe p;
    if (!holder_.empty()) p.holders.push_back({holder_, 1024, 1.0f});
    return p;
  }

 private:
  std::vector<pd_replica> replicas_;
  std::string holder_;
};

class fixed_clock : public topology::clock {
 public:
  topology::micros now() const override { return kNow; }
};

topology::pd_route_response select(const workload& w, const pd_shape& s, const std::string& body,
                                   const std::string& holder, std::uint64_t key) {
  auto set = topology::parse_topology_body(body);
  EXPECT_TRUE(set) << set.error();
  topology::topology_snapshot snap(*set);
  topology::pd_route_request req;
  req.tenant_id = w.tenant_name(1);
  req.model_id = w.shape().model;
  req.prefix_hash = be64(key);
  req.prefix_token_count = 1024;
  req.pd_topology_ref = kPdTopologyName;
  return topology::select_pd_route(req, snap, policy::resolved_policy::no_policy(),
                                   bench_view(pd_replicas(w, s), holder), fixed_clock());
}

TEST(PdWorkload, TopologyOf64Plus64IsAcceptedAndItsPoolsHoldExactlyTheReplicas) {
  workload w(shape_64());
  for (bool explicit_ids : {false, true}) {
    pd_shape s{64, explicit_ids};
    const std::string body = pd_topology_json(w, s);
    auto set = topology::parse_topology_body(body);
    ASSERT_TRUE(set) << set.error();
    ASSERT_EQ(set->topologies.size(), 4u);  // one per tenant, in the tenant's namespace
    topology::topology_snapshot snap(*set);
    const auto replicas = pd_replicas(w, s);
    ASSERT_EQ(replicas.size(), 128u);
    for (int t = 0; t < 4; ++t) {
      const auto* ct = snap.find(w.tenant_name(t), kPdTopologyName);
      ASSERT_NE(ct, nullptr);
      EXPECT_EQ(ct->spec->transport, kPdTransport);
      ASSERT_EQ(ct->prefill.size(), 1u);
      ASSERT_EQ(ct->decode.size(), 1u);
      EXPECT_EQ(ct->prefill[0].spec->replicas, 64);
      for (const auto& r : replicas) {
        EXPECT_EQ(ct->prefill[0].contains(r.id), !r.decode) << r.id;
        EXPECT_EQ(ct->decode[0].contains(r.id), r.decode) << r.id;
      }
      // A pattern pool admits any id of the shape; an id list only the listed ones.
      EXPECT_EQ(ct->prefill[0].contains("bench-replica-64"), !explicit_ids);
    }
  }
}

TEST(PdWorkload, ReplicaNamesAndPressuresFollowTheFill) {
  workload w(shape_64());
  const auto replicas = pd_replicas(w, pd_shape{64, false});
  std::set<std::string> ids;
  for (const auto& r : replicas) {
    ids.insert(r.id);
    EXPECT_GE(r.pressure, 0.0f);
    EXPECT_LT(r.pressure, 1.0f);  // under the default max pressures: every replica a candidate
  }
  EXPECT_EQ(ids.size(), 128u);
  EXPECT_EQ(replicas[5].id, w.replica_name(5));  // the fill's replica ids are the prefill side
  EXPECT_EQ(replicas[64 + 5].id, decode_replica_name(5));
  EXPECT_EQ(pd_pressure(true, 0), pd_pressure(true, 4));  // ties for the lowest decode pressure
  EXPECT_LT(pd_pressure(true, 0), pd_pressure(true, 1));
}

TEST(PdWorkload, TheServersSelectorGivesTheAnswerTheBenchCountsAsAHit) {
  workload w(shape_64());
  for (bool explicit_ids : {false, true}) {
    pd_shape s{64, explicit_ids};
    const std::string body = pd_topology_json(w, s);
    for (std::uint64_t key : {1ull, 2ull, 0xfeedull, 0x123456789ull}) {
      const auto hit = select(w, s, body, w.replica_name(17), key);
      EXPECT_EQ(hit.reason_code, "PREFIX_MATCH");
      EXPECT_EQ(pd_answer_label({hit.reason_code, hit.prefill_replica_id, hit.decode_replica_id,
                                 hit.transport_hint},
                                w.replica_name(17), s),
                "PREFIX_MATCH")
          << hit.prefill_replica_id << " " << hit.decode_replica_id;
      // No holder: an affinity pick, which the verdict does not count as a hit.
      const auto miss = select(w, s, body, "", key);
      EXPECT_EQ(miss.reason_code, "AFFINITY_HINT");
      EXPECT_EQ(pd_answer_label({miss.reason_code, miss.prefill_replica_id, miss.decode_replica_id,
                                 miss.transport_hint},
                                w.replica_name(17), s),
                "AFFINITY_HINT");
    }
  }
}

TEST(PdWorkload, AnswerLabelsCatchWrongPicks) {
  pd_shape s{64, false};
  const std::string holder = "bench-replica-3";
  EXPECT_EQ(pd_answer_label({"PREFIX_MATCH", holder, "bench-decode-8", "NIXL"}, holder, s), "PREFIX_MATCH");
  EXPECT_EQ(pd_answer_label({"PREFIX_MATCH", "bench-replica-4", "bench-decode-8", "NIXL"}, holder, s),
            "WRONG_PREFILL");
  EXPECT_EQ(pd_answer_label({"PREFIX_MATCH", holder, "bench-decode-9", "NIXL"}, holder, s),
            "WRONG_DECODE");  // pressure 3/8, not the lowest
  EXPECT_EQ(pd_answer_label({"PREFIX_MATCH", holder, "bench-decode-64", "NIXL"}, holder, s),
            "WRONG_DECODE");  // not in the topology
  EXPECT_EQ(pd_answer_label({"PREFIX_MATCH", holder, "bench-replica-0", "NIXL"}, holder, s),
            "WRONG_DECODE");
  EXPECT_EQ(pd_answer_label({"PREFIX_MATCH", holder, "bench-decode-x", "NIXL"}, holder, s), "WRONG_DECODE");
  EXPECT_EQ(pd_answer_label({"PREFIX_MATCH", holder, "bench-decode-0", "Direct"}, holder, s),
            "WRONG_TRANSPORT");
  EXPECT_EQ(pd_answer_label({"", "", "", ""}, holder, s), "NO_HINT");
  EXPECT_EQ(pd_answer_label({"UNKNOWN_TOPOLOGY", "", "", ""}, holder, s), "UNKNOWN_TOPOLOGY");
}

TEST(PdWorkload, VerdictRefusesFailOpenAnswersAndErrors) {
  const answer_tally good{1000, 0, {{"PREFIX_MATCH", 1000}}};
  EXPECT_EQ(pd_verdict(good, good), "");
  EXPECT_EQ(pd_verdict(good, {1000, 5, {{"PREFIX_MATCH", 995}, {"AFFINITY_HINT", 5}}}), "");
  // Mostly NO_HINT: the ratio would time fail-open answers.
  std::string why = pd_verdict(good, {1000, 0, {{"NO_HINT", 990}, {"PREFIX_MATCH", 10}}});
  EXPECT_NE(why.find("LookupPDRoute: only 10 of 1000 answers were PREFIX_MATCH"), std::string::npos) << why;
  EXPECT_NE(why.find("NO_HINT=990"), std::string::npos) << why;
  why = pd_verdict(good, {0, 7, {}});
  EXPECT_NE(why.find("no successful LookupPDRoute"), std::string::npos) << why;
  why = pd_verdict(good, {1000, 20, {{"PREFIX_MATCH", 1000}}});
  EXPECT_NE(why.find("20 of 1020 calls failed"), std::string::npos) << why;
  why = pd_verdict(good, {1000, 0, {{"PREFIX_MATCH", 999}, {"WRONG_PREFILL", 1}}});
  EXPECT_NE(why.find("WRONG_PREFILL"), std::string::npos) << why;
  // LookupRoute must hit too, or the comparison is between a miss and a hit.
  why = pd_verdict({1000, 0, {{"AFFINITY_HINT", 1000}}}, good);
  EXPECT_NE(why.find("LookupRoute: only 0 of 1000"), std::string::npos) << why;
}

TEST(PdWorkload, ValidateRefusesShapesTheStoreWouldRefuse) {
  workload w(shape_64());
  EXPECT_EQ(validate(w, pd_shape{64, false}), "");
  EXPECT_NE(validate(w, pd_shape{0, false}), "");
  EXPECT_NE(validate(w, pd_shape{1025, true}), "");
  workload_shape many = shape_64();
  many.tenants = 257;
  EXPECT_NE(validate(workload(many), pd_shape{64, false}), "");
}

}  // namespace
}  // namespace ic::tools::bench
