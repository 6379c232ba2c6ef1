#include "topology/pd_selector.hpp"

#include <algorithm>
#include <cassert>

#include "admin_json/ref.hpp"

namespace ic::topology {

bool hint_used(std::string_view code) {
  return code == index::reason::prefix_match || code == index::reason::affinity_hint ||
         code == pd_reason::local_prefill;
}

// ---------------------------------------------------------------------------- index_pd_view

void index_pd_view::stats_rows(std::string_view tenant, std::string_view model,
                               std::vector<replica_row>& out) const {
  if (tenant_ != nullptr && tenant_->name() == tenant) tenant_->stats_rows(model, out);
}

prefix_probe index_pd_view::probe(std::string_view tenant, std::string_view model,
                                  std::string_view scheme, std::string_view key,
                                  const policy::resolved_policy& policy, micros now) const {
  index::index_lookup_request q;
  q.tenant = tenant;
  q.model = model;
  q.hash_scheme = scheme;
  q.exact_key = std::string(key);
  // A view serves one tenant: any other holds nothing here.
  const index::tenant_index* in = tenant_ != nullptr && tenant_->name() == tenant ? tenant_ : nullptr;
  auto result = index::lookup_tenant(in, total_keys_, q, policy, now);
  prefix_probe out;
  switch (result.strategy) {
    case index::lookup_strategy::prefix_match:
      out.holders.reserve(result.scores.size());
      for (auto& s : result.scores) {
        out.holders.push_back({std::move(s.score.replica_id), s.score.matched_tokens,
                               s.score.estimated_cache_hit_prob});
      }
      break;
    case index::lookup_strategy::unknown_tenant:
    case index::lookup_strategy::unknown_model:
    case index::lookup_strategy::unknown_hash_scheme:
      out.miss = result.strategy;
      break;
    case index::lookup_strategy::tenant_hot:
    case index::lookup_strategy::none:
      break;
  }
  return out;
}

// -------------------------------------------------------------------------------- selection

namespace {

/// A live, unsaturated member of one side.
struct candidate {
  const replica_row* row = nullptr;
  std::string_view id() const { return row->replica_id; }
};

pd_route_response code_only(std::string_view code) {
  pd_route_response r;
  r.reason_code = std::string(code);
  return r;
}

/// Returns the side's candidates: members (explicit ids + stats rows matching a pattern)
/// that are live and below `max_pressure`, sorted by id, unique (as the rows are).
std::vector<candidate> candidates(const std::vector<compiled_pool>& pools,
                                  const std::vector<replica_row>& rows, micros now,
                                  micros max_age_us, float max_pressure) {
  std::vector<candidate> out;
  for (const auto& row : rows) {
    // Live iff now − last_seen < statsMaxAgeMs (an explicit id without a row is never live);
    // the cheap checks go before the membership test.
    if (!(now - row.last_seen < max_age_us && row.pressure < max_pressure)) continue;
    for (const auto& p : pools) {
      if (p.contains(row.replica_id)) {
        out.push_back({&row});
        break;
      }
    }
  }
  // Rows are sorted and unique by id (select_pd_route ensures it), so the candidates are too.
  assert(std::is_sorted(out.begin(), out.end(),
                        [](const candidate& a, const candidate& b) { return a.id() < b.id(); }));
  return out;
}

std::size_t first_pool(const std::vector<compiled_pool>& pools, std::string_view id) {
  for (std::size_t i = 0; i < pools.size(); ++i) {
    if (pools[i].contains(id)) return i;
  }
  return 0;  // unreachable: candidates are members
}

/// §2.5 transport of a positive answer.
std::string transport_of(const compiled_topology& t, std::string_view prefill,
                         std::string_view decode) {
  if (prefill == decode) return std::string(transport::direct);
  return std::string(t.transport[first_pool(t.prefill, prefill)][first_pool(t.decode, decode)]);
}

/// Returns the holder entry of `replica`, or nullptr.
const prefix_holder* holder_of(const prefix_probe& probe, std::string_view replica) {
  for (const auto& h : probe.holders) {
    if (h.replica_id == replica) return &h;
  }
  return nullptr;
}

}  // namespace

pd_route_response select_pd_route(const pd_route_request& r, const topology_snapshot& topologies,
                                  const policy::resolved_policy& policy,
                                  const pd_state_view& state, const clock& clock,
                                  std::optional<micros> caller_deadline) {
  // S0: reserved tenant.
  if (r.tenant_id == index::reserved_tenant) return code_only(index::reason::no_hint);
  // S1: deadline.
  const micros now = clock.now();
  std::optional<micros> deadline = caller_deadline;
  if (policy.lookup_timeout_ms > 0) {
    const micros budget = now + static_cast<micros>(policy.lookup_timeout_ms) * 1000;
    deadline = deadline ? std::min(*deadline, budget) : budget;
  }
  if (deadline && now >= *deadline) return code_only(index::reason::timeout);
  const auto finish = [&](pd_route_response resp) {
    if (deadline && clock.now() >= *deadline) return code_only(index::reason::timeout);
    return resp;
  };
  // S2: a PD request cannot carry a chain.
  if (policy.require_chain) return finish(code_only(index::reason::policy_requires_chain));
  // S3: missing keys.
  if (r.tenant_id.empty() || r.model_id.empty() || r.pd_topology_ref.empty() ||
      r.prefix_hash.empty()) {
    return finish(code_only(index::reason::no_hint));
  }
  // S4: the topology.
  const auto ref = admin_json::resolve_ref(r.pd_topology_ref, r.tenant_id);
  const compiled_topology* topo = ref ? topologies.find(ref->first, ref->second) : nullptr;
  if (topo == nullptr || topo->spec->namespace_name != r.tenant_id ||
      (!topo->spec->models.empty() &&
       !std::binary_search(topo->spec->models.begin(), topo->spec->models.end(), r.model_id))) {
    return finish(code_only(pd_reason::unknown_topology));
  }
  const topology& t = *topo->spec;
  const selection_options& sel = t.selection;
  const std::string_view scheme = t.hash_scheme;
  const micros max_age_us = sel.stats_max_age_ms * 1000;
  thread_local std::vector<replica_row> rows;  // scratch: no allocation per call
  rows.clear();
  state.stats_rows(r.tenant_id, r.model_id, rows);
  // Views deliver rows sorted and unique by id; one pass checks it, and anything else is
  // put in that order (candidates, ties and affinity picks all read it).
  const auto row_order = [](const replica_row& a, const replica_row& b) {
    return a.replica_id < b.replica_id;
  };
  if (std::adjacent_find(rows.begin(), rows.end(), [&](const replica_row& a, const replica_row& b) {
        return !row_order(a, b);
      }) != rows.end()) {
    std::stable_sort(rows.begin(), rows.end(), row_order);
    rows.erase(std::unique(rows.begin(), rows.end(),
                           [](const replica_row& a, const replica_row& b) {
                             return a.replica_id == b.replica_id;
                           }),
               rows.end());
  }

  // S5: decode = lowest pressure, exact ties broken by SHA-256 affinity over the sorted ties.
  const auto decode = candidates(topo->decode, rows, now, max_age_us, sel.max_decode_pressure);
  if (decode.empty()) return finish(code_only(index::reason::no_hint));
  float lowest = decode.front().row->pressure;
  for (const auto& c : decode) lowest = std::min(lowest, c.row->pressure);
  std::vector<const candidate*> tied;
  for (const auto& c : decode) {
    if (c.row->pressure == lowest) tied.push_back(&c);
  }
  const std::string_view d =
      tied.size() == 1 ? tied.front()->id() : tied[index::affinity_index(r.prefix_hash, tied.size())]->id();
  // One index lookup answers S6, S8 and S9 (holders, or the miss classification).
  std::optional<prefix_probe> probe;
  const auto probed = [&]() -> const prefix_probe& {
    if (!probe) probe = state.probe(r.tenant_id, r.model_id, scheme, r.prefix_hash, policy, now);
    return *probe;
  };
  const auto answer = [&](std::string_view code, std::string_view prefill) {
    pd_route_response resp;
    resp.reason_code = std::string(code);
    resp.prefill_replica_id = std::string(prefill);
    resp.decode_replica_id = std::string(d);
    resp.transport_hint = transport_of(*topo, prefill, d);
    return finish(std::move(resp));
  };

  // S6: conditional local prefill.
  if (sel.local_prefill_max_uncached_tokens > 0 && r.prefix_token_count > 0) {
    const prefix_holder* on_d = holder_of(probed(), d);
    const std::int64_t cached = on_d != nullptr ? on_d->token_count : 0;
    const std::int64_t uncached = std::max<std::int64_t>(0, r.prefix_token_count - cached);
    if (uncached <= sel.local_prefill_max_uncached_tokens) {
      return answer(pd_reason::local_prefill, d);
    }
  }

  // S7: prefill candidates.
  const auto prefill = candidates(topo->prefill, rows, now, max_age_us, sel.max_prefill_pressure);
  if (prefill.empty()) {
    if (sel.local_prefill_when_prefill_busy) return answer(pd_reason::local_prefill, d);
    return finish(code_only(index::reason::no_hint));
  }

  // S8: exact prefix match restricted to the prefill candidates.
  const auto by_id = [](const candidate& c, std::string_view id) { return c.id() < id; };
  const prefix_holder* best = nullptr;
  float best_score = 0;
  for (const auto& h : probed().holders) {
    auto it = std::lower_bound(prefill.begin(), prefill.end(), h.replica_id, by_id);
    if (it == prefill.end() || it->id() != h.replica_id) continue;  // not a prefill candidate
    if (policy.minimum_matched_tokens > 0 && h.token_count < policy.minimum_matched_tokens) continue;
    const float score = static_cast<float>(h.token_count) * h.freshness *
                        std::clamp(1.0f - it->row->pressure, 0.0f, 1.0f);
    if (best == nullptr || score > best_score ||
        (score == best_score && h.replica_id < best->replica_id)) {
      best = &h;
      best_score = score;
    }
  }
  if (best != nullptr &&
      !(policy.routing_floor_score > 0 && best_score < policy.routing_floor_score)) {
    return answer(index::reason::prefix_match, best->replica_id);
  }

  // S9: diagnostics beat affinity.
  if (probed().miss != index::lookup_strategy::none) {
    return finish(code_only(index::reason_code_of(probed().miss)));
  }
  // S10: affinity over the sorted prefill candidates.
  if (policy.affinity_routing) {
    return answer(index::reason::affinity_hint,
                  prefill[index::affinity_index(r.prefix_hash, prefill.size())].id());
  }
  return finish(code_only(index::reason::no_hint));
}

}  // namespace ic::topology
