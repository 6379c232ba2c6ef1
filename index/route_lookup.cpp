#include "index/route_lookup.hpp"

#include <algorithm>
#include <utility>

namespace ic::index {

namespace {

bool raw_chain_valid(const lookup_route_request& r) {
  return !r.block_hashes.empty() && r.block_hashes.size() == r.block_token_counts.size();
}

lookup_route_response no_hint(std::vector<std::uint32_t> echo) {
  lookup_route_response r;
  r.reason_code = std::string(reason::no_hint);
  r.token_ids = std::move(echo);
  return r;
}

/// Fingerprints token ids into (chain, counts); empty when no full block.
void fingerprint_tokens(const std::vector<std::uint32_t>& tokens, int block_size,
                        std::vector<std::string>& chain, std::vector<std::int32_t>& counts) {
  auto hashes = fingerprint_chain(tokens.data(), tokens.size(), block_size);
  chain.clear();
  counts.clear();
  for (auto h : hashes) {
    chain.push_back(to_wire(h));
    counts.push_back(block_size);
  }
}

}  // namespace

bool reads_prompt_text(const lookup_route_request& r, bool chain_on) {
  return !r.prompt_text.empty() &&
         (!chain_on || (r.block_hashes.empty() && r.block_token_counts.empty())) &&
         r.prefix_hash.empty() && r.token_ids.empty();
}

bool needs_prompt_tokens(const lookup_route_request& r, const policy::resolved_policy& pol) {
  return r.tenant_id != reserved_tenant && !(pol.require_chain && !raw_chain_valid(r)) &&
         reads_prompt_text(r, pol.enable_chain_matching);
}

resolved_input resolve_input(const lookup_route_request& r, bool chain_on,
                             const route_options& options) {
  resolved_input out;
  auto from_tokens = [&](bool keep_chain) {
    if (r.token_ids.size() > options.max_lookup_tokens) {
      out.fail_open = true;
      return;
    }
    std::vector<std::string> chain;
    std::vector<std::int32_t> counts;
    fingerprint_tokens(r.token_ids, options.block_size, chain, counts);
    if (chain.empty()) {
      out.fail_open = true;
      return;
    }
    std::int64_t sum = 0;
    for (auto c : counts) sum += c;
    out.exact_key = chain.back();
    out.exact_count = static_cast<std::int32_t>(sum);
    if (keep_chain) {
      out.chain = std::move(chain);
      out.counts = std::move(counts);
    }
  };
  // No tokens (no tokenizer, an error) or too many: fail open, no echo; no full block:
  // fail open with the echo.
  auto from_prompt = [&]() {
    if (!r.prompt_tokens || r.prompt_tokens->empty() ||
        r.prompt_tokens->size() > options.max_lookup_tokens) {
      out.fail_open = true;
      return;
    }
    const auto& tokens = *r.prompt_tokens;
    fingerprint_tokens(tokens, options.block_size, out.chain, out.counts);
    out.echo_tokens = tokens;
    if (out.chain.empty()) {
      out.fail_open = true;
      return;
    }
    std::int64_t sum = 0;
    for (auto c : out.counts) sum += c;
    out.exact_key = out.chain.back();
    out.exact_count = static_cast<std::int32_t>(sum);
    if (!chain_on) {
      out.chain.clear();
      out.counts.clear();
    }
  };

  if (chain_on) {
    if (!r.block_hashes.empty() || !r.block_token_counts.empty() || !r.prefix_hash.empty()) {
      if (r.block_hashes.size() != r.block_token_counts.size()) {
        out.fail_open = true;
        return out;
      }
      out.chain = r.block_hashes;
      out.counts = r.block_token_counts;
      out.exact_key = r.prefix_hash;
      out.exact_count = r.prefix_token_count;
      return out;
    }
    if (!r.token_ids.empty()) {
      from_tokens(true);
      return out;
    }
    if (!r.prompt_text.empty()) {
      from_prompt();
      return out;
    }
    out.exact_count = r.prefix_token_count;
    return out;
  }
  if (!r.prefix_hash.empty()) {
    out.exact_key = r.prefix_hash;
    out.exact_count = r.prefix_token_count;
    return out;
  }
  const bool chain_ignored = !r.block_hashes.empty() || !r.block_token_counts.empty();
  if (!r.token_ids.empty()) {
    from_tokens(false);
    return out;
  }
  if (!r.prompt_text.empty()) {
    from_prompt();
    return out;
  }
  if (chain_ignored) {
    out.fail_open = true;
    return out;
  }
  out.exact_count = r.prefix_token_count;
  return out;
}

std::int64_t effective_prefix_tokens(const resolved_input& in) {
  if (!in.chain.empty()) {
    std::int64_t sum = 0;
    for (auto c : in.counts) sum += c;
    return sum;
  }
  return in.exact_count;
}

route_plan plan_route(const lookup_route_request& r, const policy::resolved_policy& pol,
                      const route_options& options) {
  route_plan plan;
  // H0: reserved tenant.
  if (r.tenant_id == reserved_tenant) {
    plan.early = no_hint({});
    return plan;
  }
  const bool chain_on = pol.enable_chain_matching;
  // H2: default tokenize bound (the caller applies it when it has no other deadline).
  plan.default_tokenize_bound = reads_prompt_text(r, chain_on);
  // H4: requireChain gate on the raw request.
  if (pol.require_chain && !raw_chain_valid(r)) {
    lookup_route_response resp;
    resp.reason_code = std::string(reason::policy_requires_chain);
    plan.early = std::move(resp);
    return plan;
  }
  // H5/H6: dual-input resolution, fail-open.
  resolved_input in = resolve_input(r, chain_on, options);
  plan.echo_tokens = in.echo_tokens;
  if (in.fail_open) {
    plan.early = no_hint(in.echo_tokens);
    return plan;
  }
  // H7: pre-lookup size gate (only when affinity is off).
  plan.effective_prefix_tokens = effective_prefix_tokens(in);
  if (pol.minimum_prefix_tokens > 0 && plan.effective_prefix_tokens < pol.minimum_prefix_tokens &&
      !pol.affinity_routing) {
    plan.early = no_hint(in.echo_tokens);
    return plan;
  }
  // H8: index request.
  index_lookup_request& q = plan.index_request;
  q.tenant = r.tenant_id;
  q.model = r.model_id;
  q.hash_scheme = r.hash_scheme;
  q.adapter = r.adapter_id;
  q.exact_key = std::move(in.exact_key);
  q.exact_count = in.exact_count;
  if (chain_on) {  // moved, not copied: the chain is read from here on (index, affinity seed)
    q.chain_hashes = std::move(in.chain);
    q.chain_counts = std::move(in.counts);
  }
  if (r.slo_target) {
    q.ttft_ms = r.slo_target->ttft_ms;
    q.tbt_ms = r.slo_target->tbt_ms;
  }
  return plan;
}

route_decision decide_route(const tenant_index* tenant, std::int64_t total_keys,
                            const lookup_route_request& r, const route_plan& plan,
                            const policy::resolved_policy& pol, micros now) {
  route_decision d;
  // H9: index lookup.
  index_lookup_result res = lookup_tenant(tenant, total_keys, plan.index_request, pol, now);
  // H10: strategy gate.
  if (res.strategy == lookup_strategy::tenant_hot && !pol.enable_tenant_hot) {
    res = index_lookup_result{};
  }
  // H11.1: min-prefix downgrade.
  if (pol.minimum_prefix_tokens > 0 && plan.effective_prefix_tokens < pol.minimum_prefix_tokens &&
      (res.strategy == lookup_strategy::prefix_match ||
       res.strategy == lookup_strategy::tenant_hot)) {
    res = index_lookup_result{};
  }
  // H11.2: matched-tokens floor.
  if (res.strategy == lookup_strategy::prefix_match && pol.minimum_matched_tokens > 0) {
    auto& scores = res.scores;  // kept in order, in place (no second vector per lookup)
    scores.erase(std::remove_if(scores.begin(), scores.end(),
                                [&](const scored_replica& s) {
                                  return s.score.matched_tokens < pol.minimum_matched_tokens;
                                }),
                 scores.end());
    if (scores.empty()) res = index_lookup_result{};
  }
  // H11.3: routing floor on the top score.
  if (res.strategy == lookup_strategy::prefix_match && pol.routing_floor_score > 0 &&
      !res.scores.empty() && res.scores.front().score.score < pol.routing_floor_score) {
    res = index_lookup_result{};
  }
  // H12: affinity fallback.
  if (res.strategy == lookup_strategy::none && pol.affinity_routing && !r.tenant_id.empty() &&
      !r.model_id.empty() && !r.hash_scheme.empty() &&
      ((r.block_hashes.empty() && r.block_token_counts.empty()) ||
       r.block_hashes.size() == r.block_token_counts.size())) {
    std::string seed;
    if (!plan.index_request.chain_hashes.empty()) {
      seed = chain_affinity_seed(plan.index_request.chain_hashes);
    } else if (!plan.index_request.exact_key.empty()) {
      seed = plan.index_request.exact_key;
    }
    if (!seed.empty()) {
      if (auto pick = affinity_pick(tenant, r.model_id, r.hash_scheme, seed)) {
        d.response.reason_code = std::string(reason::affinity_hint);
        replica_score s;
        s.replica_id = std::move(*pick);
        d.response.replica_scores.push_back(std::move(s));
        d.response.token_ids = plan.echo_tokens;
        d.response.adapter_id = r.adapter_id;
        return d;
      }
    }
  }
  // H14: emit (H13 credit is the caller's `commit_route`).
  d.response.reason_code = std::string(reason_code_of(res.strategy));
  d.response.replica_scores.reserve(res.scores.size());
  for (const auto& s : res.scores) d.response.replica_scores.push_back(s.score);
  d.response.token_ids = plan.echo_tokens;
  d.response.adapter_id = r.adapter_id;
  if (res.strategy == lookup_strategy::prefix_match) d.credit = std::move(res.scores);
  return d;
}

void commit_route(tenant_index& tenant, const route_decision& decision) {
  if (!decision.credit.empty()) tenant.credit_lfu(decision.credit);
}

lookup_route_response timeout_response(const route_plan& plan) {
  lookup_route_response r;
  r.reason_code = std::string(reason::timeout);
  r.token_ids = plan.echo_tokens;
  return r;
}

}  // namespace ic::index
