// Snapshot codec: round trips must give an index that dumps, answers and evolves exactly like
// the original (journal truncation relies on it); corrupt input must be refused cleanly.
#include "index/snapshot_codec.hpp"

#include <malloc.h>

#include <cstring>
#include <map>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "index/testing/combined_index.hpp"
#include "index/route_lookup.hpp"
#include "index/test_support.hpp"

namespace ic::index {
namespace {

using namespace ic::index::testing;

/// Returns the snapshot of `idx` as one string, checking the chunking contract on the way.
std::string snapshot_bytes(const combined_index& idx, std::size_t chunk_bytes = 1 << 20) {
  std::vector<std::string> chunks;
  EXPECT_TRUE(write_snapshot(
      idx,
      [&](std::string_view c) {
        chunks.emplace_back(c);
        return true;
      },
      chunk_bytes));
  std::string all;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    if (i + 1 < chunks.size()) {
      EXPECT_EQ(chunks[i].size(), chunk_bytes) << "chunk " << i;
    } else {
      EXPECT_GE(chunks[i].size(), 1u);
      EXPECT_LE(chunks[i].size(), chunk_bytes);
    }
    all += chunks[i];
  }
  return all;
}

/// Feeds `bytes` to a loader into `target` in pieces of `piece`; returns the error or "".
std::string load(combined_index& target, std::string_view bytes, std::size_t piece) {
  auto loader = combined_loader(target);
  std::string error;
  for (std::size_t off = 0; off < bytes.size(); off += piece) {
    if (!loader.feed(bytes.substr(off, piece), &error)) {
      EXPECT_FALSE(error.empty());
      return error;
    }
  }
  if (!loader.finish(&error)) {
    EXPECT_FALSE(error.empty());
    return error;
  }
  return "";
}

/// Writes `idx` with chunks of `chunk_bytes` and loads them, chunk by chunk, into `target`.
void round_trip(const combined_index& idx, combined_index& target, std::size_t chunk_bytes) {
  auto loader = combined_loader(target);
  std::string error;
  bool ok = true;
  ASSERT_TRUE(write_snapshot(
      idx,
      [&](std::string_view c) {
        ok = loader.feed(c, &error);
        return ok;
      },
      chunk_bytes))
      << error;
  ASSERT_TRUE(ok) << error;
  ASSERT_TRUE(loader.finish(&error)) << error;
}

std::string describe_changes(const change_log& log) {
  std::ostringstream os;
  for (const auto& c : log) {
    os << static_cast<int>(c.type) << ',' << static_cast<int>(c.cause) << ',' << c.tenant_id << ','
       << c.model_id << ',' << c.hash_scheme << ',' << c.adapter_id << ',' << c.replica_id << ','
       << c.prefix_hash << ',' << c.timestamp_us << ';';
  }
  return os.str();
}

/// Policies and quotas a random run installed (the runtime's policy store).
struct policy_store {
  std::map<std::string, policy::resolved_policy> policies;
  std::map<std::string, policy::tenant_quota> quotas;

  void apply(combined_index& idx) const {
    for (const auto& [t, p] : policies) idx.set_tenant_policy(t, p);
    for (const auto& [t, q] : quotas) idx.set_tenant_quota(t, q);
  }
};

/// Evictions seen by `random_step` (to check that the runs exercise them).
struct eviction_counts {
  std::int64_t cap = 0, quota = 0, ttl = 0, credited = 0;
};
eviction_counts evictions;

/// Applies one random operation to every index in `all` and checks they agree on it.
void random_step(generator& g, policy_store& store, const std::vector<combined_index*>& all,
                 const std::string& where) {
  const int op = g.pick(20);
  std::vector<std::string> seen;
  if (op < 10) {
    auto u = g.make_update(false);
    if (g.pick(40) == 0) u.tenant_id = std::string(reserved_tenant);
    for (combined_index* idx : all) {
      change_log log;
      auto r = idx->ingest(u, g.now, &log, input_origin::probe);
      evictions.cap += r.cap_evicted_lru + r.cap_evicted_lfu;
      evictions.quota += r.quota_evicted_keys;
      std::ostringstream os;
      os << r.entries_added << '|' << r.quota_evicted_keys << '|' << r.cap_evicted_lru << '|'
         << r.cap_evicted_lfu << '|' << r.first_drop_reason << '|' << describe_changes(log);
      seen.push_back(os.str());
    }
  } else if (op < 13) {
    auto e = g.make_event();
    for (combined_index* idx : all) {
      change_log log;
      auto r = idx->apply_event(e, g.now, &log);
      seen.push_back(std::to_string(r.entries_removed) + describe_changes(log));
    }
  } else if (op < 14) {
    for (combined_index* idx : all) {
      change_log log;
      auto r = idx->sweep(g.now, &log);
      evictions.ttl += r.entries_removed_lru + r.entries_removed_lfu;
      seen.push_back(std::to_string(r.entries_removed_lru + r.entries_removed_lfu) + "|" +
                     std::to_string(r.stats_rows_removed) + describe_changes(log));
    }
  } else if (op < 15) {
    policy::resolved_policy p;
    p.eviction = g.pick(2) ? policy::eviction_mode::lfu : policy::eviction_mode::lru;
    p.eviction_ttl = std::chrono::minutes(1 + g.pick(30));
    p.minimum_matched_tokens = g.pick(3) * 16;
    const std::string t = g.tenant();
    store.policies[t] = p;
    for (combined_index* idx : all) idx->set_tenant_policy(t, p);
    if (g.pick(3) == 0) {
      policy::tenant_quota q;
      if (g.pick(2)) q = g.pick(30);
      store.quotas[t] = q;
      for (combined_index* idx : all) idx->set_tenant_quota(t, q);
    }
  } else {
    auto r = g.make_request();
    auto it = store.policies.find(r.tenant_id);
    const auto pol = it == store.policies.end() ? policy::resolved_policy{} : it->second;
    for (combined_index* idx : all) {  // route_lookup credits LFU hits
      const auto resp = route_lookup(*idx, r, pol, g.now);
      if (pol.eviction == policy::eviction_mode::lfu && !resp.replica_scores.empty()) {
        ++evictions.credited;
      }
      seen.push_back(describe(resp) + "|" +
                     std::to_string(idx->get_cache_state(r.tenant_id, r.model_id).replicas.size()));
    }
  }
  for (std::size_t i = 1; i < seen.size(); ++i) ASSERT_EQ(seen[0], seen[i]) << where;
}

TEST(SnapshotCodec, EmptyIndexRoundTrips) {
  combined_index a;
  const std::string bytes = snapshot_bytes(a);
  EXPECT_EQ(bytes.size(), 8u + 37u);  // header + end record
  combined_index b;
  EXPECT_EQ(load(b, bytes, 1), "");
  EXPECT_EQ(a.canonical_dump(), b.canonical_dump());
  EXPECT_EQ(snapshot_bytes(b), bytes);
}

TEST(SnapshotCodec, KeepsReservedTenantOddHashLengthsAndStats) {
  combined_index a;
  // Reserved tenant (probe input), hashes of 0, 3, 8 and 40 bytes, several replicas per key,
  // unknown and negative tiers, adapters, stats rows, an LFU counter.
  a.ingest(update("probe-r", {legacy("12345678", 16)}, std::string(reserved_tenant)), t0, nullptr,
           input_origin::probe);
  a.ingest(update("r1", {legacy("", 5), legacy("abc", 7, 9), legacy(std::string(40, 'x'), 9, -2),
                         legacy("ABCDEFGH", 3, 2, "lora")}),
           t0 + 1);
  a.ingest(update("r2", {chain({"ABCDEFGH", "abc", "k2345678"}, 16, 3)}), t0 + 2);
  a.ingest(stats_only("r2", stats(0.5f, 0.25f, 1000)), t0 + 3);
  a.set_tenant_policy("t", lfu());
  const auto hit = a.lookup(chain_query({"ABCDEFGH", "abc"}, 16), lfu(), t0 + 4);
  ASSERT_EQ(hit.strategy, lookup_strategy::prefix_match);
  a.credit_lfu("t", hit.scores);
  ASSERT_EQ(a.find_entry("t", "m", "vllm", "", "abc", "r2")->access_count, 1);

  for (std::size_t piece : {std::size_t{1}, std::size_t{7}, std::size_t{4096}}) {
    combined_index b;
    round_trip(a, b, piece);
    EXPECT_EQ(a.canonical_dump(), b.canonical_dump());
    EXPECT_EQ(b.facts().reserved_entries, 1);
    EXPECT_EQ(b.find_entry("t", "m", "vllm", "", "abc", "r2")->access_count, 1);
    EXPECT_EQ(b.find_entry("t", "m", "vllm", "", "abc", "r1")->tier, 0);  // unknown tier 9
    EXPECT_EQ(b.get_cache_state("t", "m").replicas, a.get_cache_state("t", "m").replicas);
    b.set_tenant_policy("t", lfu());
    EXPECT_EQ(a.canonical_dump(), b.canonical_dump());
    EXPECT_EQ(snapshot_bytes(b), snapshot_bytes(a));
  }
}

// /snapshot picks one stats row per replica; on a full (last_seen, stats_reported) tie the
// smaller model name wins, independent of hash-map order, so a loaded copy shows the same.
TEST(SnapshotCodec, SnapshotViewAgreesWhenStatsRowsTie) {
  combined_index a;
  for (int m = 40; m-- > 0;) {  // many models: exercises hash-map rehashing
    auto u = stats_only("r", stats(static_cast<float>(m) / 100), "t", "model-" + std::to_string(m));
    u.timestamp_us = t0;
    a.ingest(u, t0);
  }
  combined_index b;
  round_trip(a, b, 4096);
  const auto va = a.snapshot();
  const auto vb = b.snapshot();
  ASSERT_EQ(va.replicas.size(), 1u);
  ASSERT_EQ(vb.replicas.size(), 1u);
  EXPECT_EQ(va.replicas[0].hit_rate, 0.0f);  // "model-0" is the smallest name
  EXPECT_EQ(vb.replicas[0].hit_rate, va.replicas[0].hit_rate);
}

TEST(SnapshotCodec, ChunksHaveTheRequestedSize) {
  combined_index a;
  for (int i = 0; i < 200; ++i) {
    a.ingest(update("r" + std::to_string(i % 7), {legacy("key-" + std::to_string(i), i)}), t0 + i);
  }
  for (std::size_t chunk :
       {std::size_t{1}, std::size_t{7}, std::size_t{4096}, std::size_t{1} << 20}) {
    const std::string bytes = snapshot_bytes(a, chunk);  // checks every chunk but the last
    EXPECT_EQ(bytes, snapshot_bytes(a));
  }
}

TEST(SnapshotCodec, SinkRefusalAbortsTheWrite) {
  combined_index a;
  for (int i = 0; i < 100; ++i) a.ingest(update("r", {legacy("key-" + std::to_string(i), i)}), t0);
  int calls = 0;
  EXPECT_FALSE(write_snapshot(
      a, [&](std::string_view) { return ++calls < 3; }, 64));
  EXPECT_EQ(calls, 3);
}

// The main property: after a round trip (at any chunk size, at any point of a random input
// history, policies and quotas re-applied afterwards), the copy dumps the same state, writes
// the same bytes, and answers and changes exactly like the original under the same further
// inputs: lookups with LFU credit, events, sweeps, quota and cap evictions, change logs.
TEST(SnapshotCodec, RandomHistoriesRoundTripAndEvolveIdentically) {
  struct run {
    std::uint64_t seed;
    std::int64_t cap;
    std::size_t chunk;
  };
  evictions = {};
  for (const run& c :
       {run{1, 60, 1}, run{2, 400, 7}, run{3, 0, 4096}, run{4, 200, 1 << 20}, run{5, 30, 13}}) {
    index_options o;
    o.max_entries = c.cap;
    o.default_ttl = std::chrono::minutes(2);
    combined_index a(o);
    generator g(c.seed);
    policy_store store;
    for (int step = 0; step < 1500; ++step) {
      random_step(g, store, {&a}, "warm-up");
      if (HasFatalFailure()) return;
    }
    // Two generations: a → b, then (after more inputs) b → d.
    combined_index b(o);
    round_trip(a, b, c.chunk);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ(a.canonical_dump(), b.canonical_dump()) << "seed " << c.seed;
    store.apply(b);  // the runtime re-applies its policy store: must not change anything
    ASSERT_EQ(a.canonical_dump(), b.canonical_dump()) << "seed " << c.seed;
    ASSERT_EQ(snapshot_bytes(a), snapshot_bytes(b)) << "seed " << c.seed;
    EXPECT_GT(b.facts().total_entries, 0);
    for (int step = 0; step < 1500; ++step) {
      random_step(g, store, {&a, &b},
                  "seed " + std::to_string(c.seed) + " step " + std::to_string(step));
      if (HasFatalFailure()) return;
      if (step % 250 == 0) {
        ASSERT_EQ(a.canonical_dump(), b.canonical_dump()) << step;
      }
    }
    combined_index d(o);
    round_trip(b, d, c.chunk);
    ASSERT_FALSE(HasFatalFailure());
    store.apply(d);
    for (int step = 0; step < 1000; ++step) {
      random_step(g, store, {&a, &b, &d}, "gen 2 seed " + std::to_string(c.seed));
      if (HasFatalFailure()) return;
    }
    EXPECT_EQ(a.canonical_dump(), d.canonical_dump());
    EXPECT_EQ(a.snapshot().tenants.size(), d.snapshot().tenants.size());
  }
  EXPECT_GT(evictions.cap, 100);
  EXPECT_GT(evictions.quota, 100);
  EXPECT_GT(evictions.ttl, 100);
  EXPECT_GT(evictions.credited, 100);
}

// Policies installed on the target before loading apply to the loaded tenants (LFU cap order
// rebuilt from the restored counters), exactly as if installed afterwards.
TEST(SnapshotCodec, PoliciesSetBeforeLoadingApply) {
  index_options o;
  o.max_entries = 50;
  combined_index a(o);
  generator g(21);
  policy_store store;
  for (int step = 0; step < 2000; ++step) random_step(g, store, {&a}, "warm-up");
  combined_index b(o);
  store.apply(b);
  round_trip(a, b, 4096);
  ASSERT_EQ(a.canonical_dump(), b.canonical_dump());
  for (int step = 0; step < 1500; ++step) {
    random_step(g, store, {&a, &b}, "step " + std::to_string(step));
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(a.canonical_dump(), b.canonical_dump());
}

std::string sample_snapshot() {
  combined_index a;
  generator g(7);
  policy_store store;
  for (int step = 0; step < 150; ++step) random_step(g, store, {&a}, "sample");
  return snapshot_bytes(a);
}

TEST(SnapshotCodec, RefusesUnknownVersionWithAClearError) {
  std::string bytes = sample_snapshot();
  bytes[4] = 2;  // version u32 at offset 4
  combined_index b;
  const std::string error = load(b, bytes, 4096);
  EXPECT_NE(error.find("unsupported snapshot format version 2"), std::string::npos) << error;
}

TEST(SnapshotCodec, RefusesBadMagicAndGarbage) {
  combined_index b;
  EXPECT_NE(load(b, "not a snapshot at all", 5).find("bad magic"), std::string::npos);
  std::mt19937_64 rng(5);
  for (int i = 0; i < 200; ++i) {
    std::string junk(1 + rng() % 300, '\0');
    for (char& ch : junk) ch = static_cast<char>(rng());
    if (i % 2 == 0) junk.replace(0, 8, sample_snapshot().substr(0, 8));  // valid header
    combined_index t;
    EXPECT_NE(load(t, junk, 1 + rng() % 17), "") << i;
  }
}

TEST(SnapshotCodec, RefusesEveryTruncation) {
  const std::string bytes = sample_snapshot();
  ASSERT_GT(bytes.size(), 500u);
  for (std::size_t len = 0; len < bytes.size(); ++len) {
    combined_index b;
    const std::string error = load(b, std::string_view(bytes).substr(0, len), len % 2 ? 3 : 64);
    ASSERT_NE(error, "") << len;
  }
  combined_index b;
  EXPECT_NE(load(b, std::string_view(bytes).substr(0, bytes.size() / 2), 4096).find("truncated"),
            std::string::npos);
}

TEST(SnapshotCodec, RefusesEverySingleByteFlipAndTrailingBytes) {
  const std::string bytes = sample_snapshot();
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ (1 << (i % 8)));
    combined_index b;
    ASSERT_NE(load(b, bad, i % 2 ? 1 : 4096), "") << "flip at " << i;
  }
  combined_index b;
  EXPECT_NE(load(b, bytes + "x", 4096).find("after the end record"), std::string::npos);
}

// Regression (fuzz_snapshot_load): a tenant header whose counts claim 2^26 slab slots and
// 2^24 parts made the loader allocate ~830 MiB (key table, free list, per-part counters)
// before any key or part arrived, so a tiny corrupt stream per tenant could exhaust memory
// instead of being refused.
TEST(SnapshotCodec, ACorruptKeyCountIsRefusedWithoutAllocatingForKeysThatNeverCome) {
  combined_index a;
  const std::string tenant = "fuzz-regression-tenant";
  a.ingest(update("r", {legacy("p", 1)}, tenant), t0);
  std::string bytes = snapshot_bytes(a);
  const auto at = bytes.find(tenant);
  ASSERT_NE(at, std::string::npos);
  // After the name: n_names, n_parts, n_slab, n_free (u32 each, native order).
  const std::uint32_t huge_parts = 0x00FFFFFFu, huge_slab = (1u << 26) - 2, no_free = 0;
  std::memcpy(&bytes[at + tenant.size() + 4], &huge_parts, 4);
  std::memcpy(&bytes[at + tenant.size() + 8], &huge_slab, 4);
  std::memcpy(&bytes[at + tenant.size() + 12], &no_free, 4);
  auto in_use = [] {
    const struct mallinfo2 m = ::mallinfo2();
    return m.uordblks + m.hblkhd;
  };
  combined_index b;
  const std::size_t before = in_use();
  auto loader = combined_loader(b);
  std::string error;
  bool ok = loader.feed(bytes, &error) && loader.finish(&error);
  const std::size_t grown = in_use() - before;
  EXPECT_FALSE(ok);
  EXPECT_FALSE(error.empty());
  EXPECT_LT(grown, std::size_t{16} << 20) << "bytes allocated for a " << bytes.size() << "-byte stream";
}

// The key table grows while keys arrive past the up-front sizing (1 << 16 keys).
TEST(SnapshotCodec, ATenantWithMoreKeysThanThePresizedTableRoundTrips) {
  index_options opts;
  opts.max_entries = 0;
  combined_index a(opts);
  std::vector<prefix_entry> prefixes;
  const int n = (1 << 20) + 5000;
  prefixes.reserve(n);
  for (int i = 0; i < n; ++i) prefixes.push_back(legacy("k" + std::to_string(i), 1));
  a.ingest(update("r", std::move(prefixes)), t0);
  ASSERT_EQ(a.facts().total_keys, n);
  combined_index b(opts);
  ASSERT_EQ(load(b, snapshot_bytes(a), 1 << 20), "");
  EXPECT_EQ(b.facts().total_keys, n);
  EXPECT_EQ(b.canonical_dump(), a.canonical_dump());
}

TEST(SnapshotCodec, LoadingIntoANonEmptyIndexIsAPreconditionViolation) {
  const std::string bytes = sample_snapshot();
  combined_index b;
  b.ingest(update("r", {legacy("p", 1)}), t0);
#ifdef NDEBUG
  EXPECT_NE(load(b, bytes, 4096).find("not empty"), std::string::npos);
#else
  EXPECT_DEATH(load(b, bytes, 4096), "empty");
#endif
}

}  // namespace
}  // namespace ic::index
