// Const lookups may run on several threads at once (the server's frozen reads run on the
// snapshot writer's thread beside the tenant actor's own lookups): every thread must get
// exactly the single-threaded answers.
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "index/testing/combined_index.hpp"

namespace ic::index {
namespace {

constexpr micros kT0 = 1'700'000'000'000'000;

std::string block(int tenant, int chain, int b) {
  return "t" + std::to_string(tenant) + "c" + std::to_string(chain) + "b" + std::to_string(b);
}

std::string describe(const index_lookup_result& r) {
  std::string out = std::to_string(static_cast<int>(r.strategy));
  for (const auto& s : r.scores)
    out += "|" + s.score.replica_id + ":" + std::to_string(s.score.matched_tokens) + ":" +
           std::to_string(s.score.score);
  return out;
}

TEST(ConcurrentLookup, ThreadsSeeTheSingleThreadedAnswers) {
  combined_index idx;
  // 3 tenants x 40 chains x 16 blocks, each chain held by 1-4 of 8 replicas (prefix lengths vary).
  for (int t = 0; t < 3; ++t) {
    for (int c = 0; c < 40; ++c) {
      for (int r = 0; r < 1 + c % 4; ++r) {
        cache_state_update u;
        u.tenant_id = "tenant-" + std::to_string(t);
        u.model_id = "m";
        u.hash_scheme = "vllm";
        u.replica_id = "replica-" + std::to_string((c + r) % 8);
        prefix_entry p;
        for (int b = 0; b < 16 - 2 * r; ++b) {
          p.block_hashes.push_back(block(t, c, b));
          p.block_token_counts.push_back(16);
        }
        u.prefixes.push_back(p);
        idx.ingest(u, kT0 + c);
      }
    }
  }
  std::vector<std::string> tenants = {"tenant-0", "tenant-1", "tenant-2"};
  std::vector<index_lookup_request> requests;
  for (int t = 0; t < 3; ++t) {
    for (int c = 0; c < 40; ++c) {
      index_lookup_request q;
      q.tenant = tenants[t];
      q.model = "m";
      q.hash_scheme = "vllm";
      for (int b = 0; b < 16; ++b) {
        q.chain_hashes.push_back(block(t, c, b));
        q.chain_counts.push_back(16);
      }
      requests.push_back(q);
    }
  }
  const auto policy = policy::resolved_policy::no_policy();
  std::vector<std::string> expected;
  for (const auto& q : requests) expected.push_back(describe(idx.lookup(q, policy, kT0 + 1000)));

  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&, th] {
      for (int round = 0; round < 50; ++round) {
        for (std::size_t i = 0; i < requests.size(); ++i) {
          std::size_t k = (i * 7 + static_cast<std::size_t>(th) * 13 + round) % requests.size();
          if (describe(idx.lookup(requests[k], policy, kT0 + 1000)) != expected[k]) ++mismatches[th];
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int th = 0; th < 4; ++th) EXPECT_EQ(mismatches[th], 0) << "thread " << th;
  // The answers are not trivial.
  int matches = 0;
  for (const auto& e : expected) matches += e.find('|') != std::string::npos;
  EXPECT_GT(matches, 100);
}

}  // namespace
}  // namespace ic::index
