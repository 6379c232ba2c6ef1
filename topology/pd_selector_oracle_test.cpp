// Random topologies, stats and holders: `select_pd_route` against a brute-force reading of
// pd-templates.md §2.4–§2.5 written independently here (full sorts, no shortcuts), through a
// fake `pd_state_view`. Deterministic (fixed seed).
#include <algorithm>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "topology/pd_selector.hpp"

namespace ic::topology {
namespace {

constexpr micros now_us = 1'700'000'000'000'000;

class fake_view : public pd_state_view {
 public:
  std::vector<std::pair<std::string, std::pair<float, micros>>> rows;  // sorted by id
  std::vector<prefix_holder> holders;
  index::lookup_strategy miss = index::lookup_strategy::none;

  void stats_rows(std::string_view, std::string_view, std::vector<replica_row>& out) const override {
    for (const auto& [id, v] : rows) out.push_back({id, v.first, v.second});
  }
  prefix_probe probe(std::string_view, std::string_view, std::string_view, std::string_view,
                     const policy::resolved_policy&, micros) const override {
    prefix_probe p;
    p.holders = holders;
    if (holders.empty()) p.miss = miss;
    return p;
  }
};

class fixed_clock : public clock {
 public:
  micros now() const override { return now_us; }
};

/// The oracle: §2.4 S5–S11 for a request that passed S0–S4.
pd_route_response oracle(const compiled_topology& t, const fake_view& v,
                         const policy::resolved_policy& pol, const pd_route_request& r) {
  const auto& sel = t.spec->selection;
  auto side = [&](const std::vector<compiled_pool>& pools, float max_p) {
    std::vector<std::pair<std::string, float>> out;
    for (const auto& [id, s] : v.rows) {
      bool member = false;
      for (const auto& p : pools) {
        member = member || std::count(p.spec->replica_ids.begin(), p.spec->replica_ids.end(), id) > 0;
        for (const auto& g : p.patterns) member = member || g.matches(id);
      }
      if (member && now_us - s.second < sel.stats_max_age_ms * 1000 && s.first < max_p) {
        out.emplace_back(id, s.first);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  auto pool_index = [](const std::vector<compiled_pool>& pools, const std::string& id) {
    for (std::size_t i = 0; i < pools.size(); ++i) {
      if (std::count(pools[i].spec->replica_ids.begin(), pools[i].spec->replica_ids.end(), id)) return i;
      for (const auto& g : pools[i].patterns) {
        if (g.matches(id)) return i;
      }
    }
    return std::size_t{999};
  };
  pd_route_response none;
  none.reason_code = "NO_HINT";
  const auto decode = side(t.decode, sel.max_decode_pressure);
  if (decode.empty()) return none;
  float lo = decode[0].second;
  for (const auto& d : decode) lo = std::min(lo, d.second);
  std::vector<std::string> ties;
  for (const auto& d : decode) {
    if (d.second == lo) ties.push_back(d.first);
  }
  const std::string d = ties[index::affinity_index(r.prefix_hash, ties.size())];
  auto emit = [&](std::string code, const std::string& p) {
    pd_route_response out{p, d, "", std::move(code)};
    if (p == d) {
      out.transport_hint = "Direct";
    } else {
      out.transport_hint = std::string(t.transport[pool_index(t.prefill, p)][pool_index(t.decode, d)]);
    }
    return out;
  };
  if (sel.local_prefill_max_uncached_tokens > 0 && r.prefix_token_count > 0) {
    std::int64_t cached = 0;
    for (const auto& h : v.holders) {
      if (h.replica_id == d) cached = h.token_count;
    }
    if (std::max<std::int64_t>(0, r.prefix_token_count - cached) <= sel.local_prefill_max_uncached_tokens) {
      return emit("LOCAL_PREFILL", d);
    }
  }
  const auto prefill = side(t.prefill, sel.max_prefill_pressure);
  if (prefill.empty()) return sel.local_prefill_when_prefill_busy ? emit("LOCAL_PREFILL", d) : none;
  std::vector<std::pair<float, std::string>> scored;
  for (const auto& h : v.holders) {
    for (const auto& [id, pressure] : prefill) {
      if (id != h.replica_id) continue;
      if (pol.minimum_matched_tokens > 0 && h.token_count < pol.minimum_matched_tokens) continue;
      scored.emplace_back(static_cast<float>(h.token_count) * h.freshness *
                              std::clamp(1.0f - pressure, 0.0f, 1.0f),
                          id);
    }
  }
  std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  if (!scored.empty() && !(pol.routing_floor_score > 0 && scored[0].first < pol.routing_floor_score)) {
    return emit("PREFIX_MATCH", scored[0].second);
  }
  if (v.holders.empty() && v.miss != index::lookup_strategy::none) {
    pd_route_response out;
    out.reason_code = std::string(index::reason_code_of(v.miss));
    return out;
  }
  if (pol.affinity_routing) {
    return emit("AFFINITY_HINT", prefill[index::affinity_index(r.prefix_hash, prefill.size())].first);
  }
  return none;
}

TEST(PdSelectorOracle, RandomCasesMatchTheBruteForceReading) {
  std::mt19937 rng(14);
  auto pick = [&](auto const& options) { return options[rng() % options.size()]; };
  const std::vector<std::string> universe = {"p-0", "p-1", "p-2", "p-3", "d-0", "d-1", "d-2", "b-0", "x-9"};
  const std::vector<std::string> patterns = {"p-*", "d-?", "*-0", "b-*", "?-1"};
  const std::vector<float> pressures = {0.0f, 0.1f, 0.3f, 0.3f, 0.5f, 0.99f, 1.0f, 1.5f};
  const std::vector<std::int32_t> counts = {0, 32, 64, 128, 256, 1024};
  int positive = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    topology_set set;
    topology t;
    t.namespace_name = "serving";
    t.name = "pd";
    t.hash_scheme = "vllm";
    t.transport = pick(std::vector<std::string>{"", "NIXL", "Mooncake"});
    t.accelerator_types = {{"h", "nvidia", "", "", {}}, {"a", "ascend", "", "", {}}};
    const std::string type = t.transport.empty() ? "h" : pick(std::vector<std::string>{"h", "a"});
    for (auto* pools : {&t.prefill_pools, &t.decode_pools}) {
      const int n = 1 + static_cast<int>(rng() % 2);
      for (int i = 0; i < n; ++i) {
        pool p;
        p.name = "pool" + std::to_string(i);
        p.accelerator_type = type;
        for (int k = 0; k < 3; ++k) {
          if (rng() % 2) p.replica_ids.push_back(pick(universe));
        }
        if (p.replica_ids.empty() || rng() % 2) p.replica_id_patterns.push_back(pick(patterns));
        std::sort(p.replica_ids.begin(), p.replica_ids.end());
        p.replica_ids.erase(std::unique(p.replica_ids.begin(), p.replica_ids.end()), p.replica_ids.end());
        pools->push_back(std::move(p));
      }
    }
    t.selection.local_prefill_max_uncached_tokens = pick(std::vector<std::int64_t>{0, 0, 128, 512});
    t.selection.local_prefill_when_prefill_busy = rng() % 2;
    t.selection.max_decode_pressure = pick(std::vector<float>{1.0f, 0.5f, 2.0f});
    set.topologies.push_back(std::move(t));
    topology_snapshot snap(std::move(set));

    fake_view v;
    for (const auto& id : universe) {
      if (rng() % 4 == 0) continue;  // no stats row
      const micros age = pick(std::vector<micros>{0, 10'000'000, 59'999'999, 60'000'000, 90'000'000});
      v.rows.push_back({id, {pick(pressures), now_us - age}});
    }
    for (const auto& id : universe) {
      if (rng() % 3 == 0) v.holders.push_back({id, pick(counts), pick(std::vector<float>{1.0f, 0.5f, 0.25f})});
    }
    v.miss = pick(std::vector<index::lookup_strategy>{index::lookup_strategy::none,
                                                       index::lookup_strategy::unknown_tenant,
                                                       index::lookup_strategy::unknown_hash_scheme});
    auto pol = policy::resolved_policy::no_policy();
    pol.minimum_matched_tokens = pick(std::vector<std::int32_t>{0, 64, 200});
    pol.routing_floor_score = pick(std::vector<float>{0.0f, 0.1f, 100.0f});
    pol.affinity_routing = rng() % 4 != 0;
    pd_route_request r{"m", "serving", std::string(8, static_cast<char>(rng())), 0, "pd"};
    r.prefix_hash[3] = static_cast<char>(rng());
    r.prefix_token_count = pick(std::vector<std::int32_t>{0, 100, 256, 1024});

    const auto got = select_pd_route(r, snap, pol, v, fixed_clock{});
    const auto want = oracle(*snap.find("serving", "pd"), v, pol, r);
    ASSERT_EQ(got, want) << "iteration " << iteration << ": got " << got.reason_code << " "
                         << got.prefill_replica_id << "/" << got.decode_replica_id << "/"
                         << got.transport_hint << ", want " << want.reason_code << " "
                         << want.prefill_replica_id << "/" << want.decode_replica_id << "/"
                         << want.transport_hint;
    positive += hint_used(got.reason_code) ? 1 : 0;
  }
  EXPECT_GT(positive, 500);  // the cases exercise the positive paths, not only NO_HINT
}

}  // namespace
}  // namespace ic::topology
