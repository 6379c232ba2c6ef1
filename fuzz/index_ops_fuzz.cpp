// Structured target (issue #16): random bytes become a sequence of index operations —
// ingest, events, lookups, policy and quota changes, time steps, sweeps, snapshot + reload —
// applied to a live index and to a twin that is rebuilt from the live one's snapshot at each
// snapshot step. After each step:
//   - both indexes hold the same facts and answer every lookup the same (a snapshot round
//     trip is identical and evolves identically); at a snapshot the dumps are equal;
//   - the facts agree with the per-tenant key counts;
//   - a lookup names only replicas that serve the scope (no stats are ingested, so no
//     TENANT_HOT answer may name a replica by its stats alone);
//   - after a sweep no entry ever ingested is still present past its tenant's TTL, and a
//     second sweep at the same time removes nothing.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "fuzz/fuzz_support.hpp"
#include "index/testing/combined_index.hpp"
#include "index/snapshot_codec.hpp"

namespace ix = ic::index;
namespace pol = ic::policy;
using ic::fuzz::check;

namespace {

const char* const kTenants[] = {"ta", "tb"};
const char* const kReplicas[] = {"r0", "r1", "r2", "r3"};
constexpr const char* kModel = "m";
constexpr const char* kScheme = "vllm";
constexpr ix::micros kStart = 1'700'000'000'000'000;

std::string block(std::uint8_t b) { return std::string("blk-000") + static_cast<char>('a' + b % 8); }

ix::index_options options() {
  ix::index_options o;
  o.max_entries = 24;  // small, so the global cap evicts
  // An input touches at most a few dozen keys per tenant: 64-record slab chunks (2 KiB)
  // instead of the default 4096 (128 KiB, which ASan serves by mmap/munmap per tenant index
  // per input: ~35 % of the time). Layout only: Replay.SameInputsGiveSameStateAndAnswers runs
  // small and default chunks side by side.
  o.key_chunk_bits = 6;
  return o;
}

struct model {
  std::unique_ptr<ix::combined_index> live = std::make_unique<ix::combined_index>(options());
  std::unique_ptr<ix::combined_index> twin = std::make_unique<ix::combined_index>(options());
  std::map<std::string, pol::resolved_policy> policies;
  std::map<std::string, pol::tenant_quota> quotas;
  // Every (tenant, key, replica) ever ingested, to check TTLs after sweeps.
  std::set<std::tuple<std::string, std::string, std::string>> seen;
  ix::micros now = kStart;

  const pol::resolved_policy& policy_of(const std::string& t) {
    static const pol::resolved_policy none = pol::resolved_policy::no_policy();
    auto it = policies.find(t);
    return it == policies.end() ? none : it->second;
  }

  template <typename F>
  void both(F f) {
    f(*live);
    f(*twin);
  }

  void check_facts() {
    const auto& a = live->facts();
    const auto& b = twin->facts();
    check(a.total_entries == b.total_entries && a.total_keys == b.total_keys &&
              a.reserved_entries == b.reserved_entries,
          "live and reloaded twin hold the same facts");
    std::int64_t keys = 0;
    for (const char* t : kTenants) keys += live->tenant_keys(t);
    check(keys == a.total_keys, "total_keys is the sum of the tenants' keys");
    check(a.total_entries >= a.total_keys, "every key holds at least one entry");
  }
};

void ingest(model& m, ic::fuzz::cursor& in) {
  ix::cache_state_update u;
  u.tenant_id = kTenants[in.byte() % 2];
  u.replica_id = kReplicas[in.byte() % 4];
  u.model_id = kModel;
  u.hash_scheme = kScheme;
  const int n = 1 + in.byte() % 3;
  for (int i = 0; i < n; ++i) {
    ix::prefix_entry e;
    const std::uint8_t kind = in.byte();
    e.tier = kind % 4;
    if (kind & 0x80) {  // a chain of 1..4 blocks
      const int len = 1 + (kind >> 2) % 4;
      for (int j = 0; j < len; ++j) {
        e.block_hashes.push_back(block(in.byte()));
        e.block_token_counts.push_back(16 * (j + 1));
      }
      e.token_count = 16 * len;
      for (const auto& h : e.block_hashes) m.seen.emplace(u.tenant_id, h, u.replica_id);
    } else {
      e.prefix_hash = block(in.byte());
      e.token_count = 16 + in.byte() % 64;
      m.seen.emplace(u.tenant_id, e.prefix_hash, u.replica_id);
    }
    u.prefixes.push_back(std::move(e));
  }
  m.both([&](ix::combined_index& idx) { idx.ingest(u, m.now); });
}

void event(model& m, ic::fuzz::cursor& in) {
  ix::cache_event e;
  e.type = in.byte() % 6;
  e.tenant_id = kTenants[in.byte() % 2];
  e.replica_id = kReplicas[in.byte() % 4];
  e.model_id = kModel;
  e.prefix_hash = block(in.byte());
  m.both([&](ix::combined_index& idx) { idx.apply_event(e, m.now); });
}

void lookup(model& m, ic::fuzz::cursor& in) {
  const std::string tenant = kTenants[in.byte() % 2];
  ix::index_lookup_request q;
  q.tenant = tenant;
  q.model = kModel;
  q.hash_scheme = kScheme;
  const std::uint8_t kind = in.byte();
  if (kind & 1) {
    const int len = 1 + (kind >> 1) % 4;
    for (int j = 0; j < len; ++j) {
      q.chain_hashes.push_back(block(in.byte()));
      q.chain_counts.push_back(16 * (j + 1));
    }
  } else {
    q.exact_key = block(in.byte());
    q.exact_count = 16 + in.byte() % 64;
  }
  const auto& p = m.policy_of(tenant);
  auto a = m.live->lookup(q, p, m.now);
  auto b = m.twin->lookup(q, p, m.now);
  check(a.strategy == b.strategy && a.scores.size() == b.scores.size(),
        "live and reloaded twin answer alike");
  std::set<std::string> serving;
  for (const auto& [replica, keys] : m.live->serving(tenant, kModel, kScheme))
    if (keys > 0) serving.insert(replica);
  for (std::size_t i = 0; i < a.scores.size(); ++i) {
    check(a.scores[i].score.replica_id == b.scores[i].score.replica_id &&
              a.scores[i].score.matched_tokens == b.scores[i].score.matched_tokens,
          "live and reloaded twin name the same replicas");
    check(serving.count(a.scores[i].score.replica_id) == 1,
          "a lookup names only replicas that hold something in the scope");
  }
}

void set_policy(model& m, ic::fuzz::cursor& in) {
  const std::string tenant = kTenants[in.byte() % 2];
  const std::uint8_t b = in.byte();
  pol::resolved_policy p = pol::resolved_policy::no_policy();
  static const std::chrono::nanoseconds ttls[] = {std::chrono::seconds(1), std::chrono::seconds(10),
                                                  std::chrono::minutes(30)};
  p.eviction_ttl = ttls[b % 3];
  p.eviction = (b & 4) ? pol::eviction_mode::lfu : pol::eviction_mode::lru;
  p.minimum_matched_tokens = (b & 8) ? 0 : 16;
  m.policies[tenant] = p;
  m.both([&](ix::combined_index& idx) { idx.set_tenant_policy(tenant, p); });
}

void set_quota(model& m, ic::fuzz::cursor& in) {
  const std::string tenant = kTenants[in.byte() % 2];
  const std::uint8_t b = in.byte();
  pol::tenant_quota q = (b & 0x80) ? pol::tenant_quota{} : pol::tenant_quota{b % 16};
  m.quotas[tenant] = q;
  m.both([&](ix::combined_index& idx) { idx.set_tenant_quota(tenant, q); });
}

void sweep(model& m) {
  m.both([&](ix::combined_index& idx) { idx.sweep(m.now); });
  for (const auto& [tenant, key, replica] : m.seen) {
    auto e = m.live->find_entry(tenant, kModel, kScheme, "", key, replica);
    if (!e) continue;
    const auto ttl_us = std::chrono::duration_cast<std::chrono::microseconds>(
                            m.policy_of(tenant).eviction_ttl)
                            .count();
    check(m.now - e->last_seen < ttl_us, "no entry outlives its TTL after a sweep");
  }
  auto again = m.live->sweep(m.now);
  check(again.entries_removed_lru == 0 && again.entries_removed_lfu == 0,
        "a second sweep at the same time removes nothing");
  m.twin->sweep(m.now);
}

void snapshot_and_reload(model& m) {
  std::string bytes;
  check(ix::write_snapshot(
            *m.live,
            [&](std::string_view c) {
              bytes.append(c);
              return true;
            },
            1024),
        "write_snapshot succeeds");
  auto reloaded = std::make_unique<ix::combined_index>(options());
  for (const auto& [t, p] : m.policies) reloaded->set_tenant_policy(t, p);
  for (const auto& [t, q] : m.quotas) reloaded->set_tenant_quota(t, q);
  auto loader = ix::combined_loader(*reloaded);
  std::string error;
  check(loader.feed(bytes, &error) && loader.finish(&error), "a written snapshot loads");
  check(reloaded->canonical_dump() == m.live->canonical_dump(), "snapshot round trip is identical");
  m.twin = std::move(reloaded);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ic::fuzz::cursor in(data, size);
  model m;
  for (int step = 0; step < 64 && !in.empty(); ++step) {
    switch (in.byte() % 8) {
      case 0: ingest(m, in); break;
      case 1: event(m, in); break;
      case 2: lookup(m, in); break;
      case 3: set_policy(m, in); break;
      case 4: set_quota(m, in); break;
      case 5: m.now += static_cast<ix::micros>(in.byte()) * 100'000; break;
      case 6: sweep(m); break;
      default: snapshot_and_reload(m); break;
    }
    m.check_facts();
  }
  check(m.twin->canonical_dump() == m.live->canonical_dump(),
        "the reloaded twin evolved exactly like the live index");
  return 0;
}
