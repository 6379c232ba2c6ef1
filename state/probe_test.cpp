#include "state/probe.hpp"

#include <gtest/gtest.h>

#include "index/test_support.hpp"

namespace ic::state {
namespace {

using index::testing::t0;

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 0xf]);
  }
  return out;
}

probe_request controller_request() {
  return probe_request{"team-a/vllm-backend", "functional-self-test", "vllm", ""};
}

index::cache_state_update producer_update(const std::string& replica, const std::string& block) {
  index::cache_state_update u;
  u.replica_id = replica;
  u.tenant_id = "team-a";
  u.model_id = "llama";
  u.hash_scheme = "vllm";
  index::prefix_entry p;
  p.block_hashes = {block};
  p.block_token_counts = {64};
  u.prefixes.push_back(p);
  return u;
}

TEST(ProbeHash, IsSha256OfMarkerAndLengthPrefixedFields) {
  // Pinned from an independent implementation (Python hashlib).
  EXPECT_EQ(hex(probe_hash(controller_request())),
            "9db42b1a3afa5826a49b8726f74d280da97cbff796db7b0574d8312a2c90aaf4");
  EXPECT_EQ(hex(probe_hash(probe_request{})),
            "7ce58732cf18635df8358c1925a9a89816e8efdc3b52ddc8cbc51ee57e27b3b6");
}

TEST(ProbeHash, DependsOnFieldBoundaries) {
  EXPECT_NE(probe_hash({"ab", "c", "vllm", ""}), probe_hash({"a", "bc", "vllm", ""}));
}

TEST(ProbeReplica, IsPrefixedBackend) {
  EXPECT_EQ(probe_replica_id("team-a/b"), "__probe-team-a/b");
}

TEST(Probe, PassesIngestAndRoutingAndSkipsT2OnAnEmptyIndex) {
  index::combined_index idx;
  auto out = run_probe(idx.tenant_or_add(index::reserved_tenant), controller_request(), t0);
  EXPECT_EQ(out.backend, "team-a/vllm-backend");
  EXPECT_EQ(out.ingest, probe_stage_result::ok);
  EXPECT_EQ(out.routing, probe_stage_result::ok);
  EXPECT_EQ(out.t2, probe_stage_result::skipped);
  EXPECT_TRUE(out.errors.empty());
  EXPECT_TRUE(out.passed());
}

TEST(Probe, SkipsT2EvenForLmcacheBackends) {
  index::combined_index idx;
  auto req = controller_request();
  req.backend_type = "LMCache";
  EXPECT_EQ(run_probe(idx.tenant_or_add(index::reserved_tenant), req, t0).t2, probe_stage_result::skipped);
}

TEST(Probe, ClearsTheProbeReplicaAfterwards) {
  index::combined_index idx;
  auto req = controller_request();
  run_probe(idx.tenant_or_add(index::reserved_tenant), req, t0);
  EXPECT_EQ(idx.facts().total_entries, 0);
  EXPECT_EQ(idx.facts().reserved_entries, 0);
  EXPECT_EQ(idx.facts().total_keys, 0);
  EXPECT_FALSE(idx.find_entry(index::reserved_tenant, req.model, req.hash_scheme, "",
                              probe_hash(req), probe_replica_id(req.backend)));
  EXPECT_TRUE(idx.serving(index::reserved_tenant, req.model, req.hash_scheme).empty());
}

TEST(Probe, RepeatsWithTheSameResult) {
  index::combined_index idx;
  for (int i = 0; i < 3; ++i) {
    auto out = run_probe(idx.tenant_or_add(index::reserved_tenant), controller_request(), t0 + i);
    EXPECT_TRUE(out.passed()) << i;
  }
  EXPECT_EQ(idx.facts().total_entries, 0);
}

TEST(Probe, LeavesProducerEntriesAndSnapshotUntouched) {
  index::combined_index idx;
  idx.ingest(producer_update("vllm-0", "b1"), t0);
  const auto before = idx.snapshot();
  auto out = run_probe(idx.tenant_or_add(index::reserved_tenant), controller_request(), t0 + 1);
  EXPECT_TRUE(out.passed());
  const auto after = idx.snapshot();
  ASSERT_EQ(after.replicas.size(), 1u);
  EXPECT_EQ(after.replicas[0].replica_id, "vllm-0");
  EXPECT_EQ(after.total_prefixes, before.total_prefixes);
  EXPECT_TRUE(idx.find_entry("team-a", "llama", "vllm", "", "b1", "vllm-0"));
  EXPECT_EQ(idx.facts().total_entries, 1);
}

TEST(Probe, PassesWithoutEvictingAnythingWhenTheGlobalCapIsFull) {
  index::index_options opts;
  opts.max_entries = 1;
  index::combined_index idx(opts);
  idx.ingest(producer_update("vllm-0", "b1"), t0);
  auto out = run_probe(idx.tenant_or_add(index::reserved_tenant), controller_request(), t0 + 1);
  EXPECT_TRUE(out.passed());
  EXPECT_TRUE(idx.find_entry("team-a", "llama", "vllm", "", "b1", "vllm-0"));
}

TEST(Probe, NamesItsStagesInTheOutcome) {
  EXPECT_EQ(to_string(probe_stage_result::ok), "ok");
  EXPECT_EQ(to_string(probe_stage_result::failed), "failed");
  EXPECT_EQ(to_string(probe_stage_result::skipped), "skipped");
}

}  // namespace
}  // namespace ic::state
