// The LookupRoute handler steps H0–H14 of spec/lookup.md §3.1 over one `tenant_index`.
//
// The decision is split so the caller can run the index part under a deadline and still
// honour the contract that a TIMEOUT never credits LFU:
//
//   auto plan = ic::index::plan_route(req, policy);            // H0, H2, H4–H8 (no index)
//   if (plan.early) return *plan.early;                          // reserved / gate / fail-open
//   auto decision = ic::index::decide_route(idx, req, plan, policy, now);  // H9–H12, H14
//   // caller: deadline passed? -> return ic::index::timeout_response(plan);
//   ic::index::commit_route(idx, decision);                      // H13: LFU credit
//   return decision.response;                                    // caller sets latency
//
// `route_lookup` runs all of it without a deadline. The tokenizer is not part of this layer:
// the caller tokenizes `prompt_text` when `needs_prompt_tokens` says the resolution will read
// it, and passes the result as `prompt_tokens` (absent = fail open, §3.2 step 3). Time is an
// input; `lookup_latency_us` is left for the caller, who owns the clock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "index/tenant_index.hpp"
#include "index/fingerprint.hpp"
#include "index/types.hpp"
#include "policy/resolved_policy.hpp"

namespace ic::index {

/// Handler constants (spec/lookup.md §2.5).
struct route_options {
  /// Engine KV block size for token_ids fingerprinting (`--engine-block-size`). Default 16.
  int block_size = default_block_size;
  /// Maximum token_ids accepted before failing open. Default 1,048,576.
  std::size_t max_lookup_tokens = 1u << 20;
  /// Maximum prompt_text bytes accepted before failing open. Default 1,048,576.
  std::size_t max_prompt_text_bytes = 1u << 20;
};

/// Outcome of the steps that run before the index is consulted (H0, H4–H8).
struct route_plan {
  /// Set when the answer is final without the index (reserved tenant, requireChain,
  /// fail-open, pre-lookup min-prefix gate).
  std::optional<lookup_route_response> early;
  /// The index request (H8); its string views point into the caller's request. Its chain is
  /// the resolved chain (empty unless chain matching is on); affinity seeds from it.
  index_lookup_request index_request;
  /// effectivePrefixTokens (H7).
  std::int64_t effective_prefix_tokens = 0;
  /// Tokens produced from prompt_text (the request's `prompt_tokens`), echoed.
  std::vector<std::uint32_t> echo_tokens;
  /// True when the caller should bound tokenisation by the default 5 s (H2).
  bool default_tokenize_bound = false;
};

/// Outcome of the index steps (H9–H12, H14), before LFU credit.
struct route_decision {
  lookup_route_response response;
  /// Replicas whose LFU hits are credited by `commit_route` (PREFIX_MATCH only).
  std::vector<scored_replica> credit;
};

/// Runs §3.2 dual-input resolution; exposed for tests (H24, H28).
struct resolved_input {
  bool fail_open = false;
  std::vector<std::string> chain;
  std::vector<std::int32_t> counts;
  std::string exact_key;
  std::int32_t exact_count = 0;
  std::vector<std::uint32_t> echo_tokens;
};
resolved_input resolve_input(const lookup_route_request& request, bool chain_on,
                             const route_options& options = {});

/// Returns true when §3.2 resolution reads `prompt_text` (no explicit fingerprint or
/// token_ids take precedence); H2's default 5 s bound applies exactly then.
bool reads_prompt_text(const lookup_route_request& request, bool chain_on);

/// Returns true when a lookup would reach resolution and read `prompt_text` (not the
/// reserved tenant, not stopped by the requireChain gate): only then is tokenizing worth it.
bool needs_prompt_tokens(const lookup_route_request& request, const policy::resolved_policy& policy);

/// Returns effectivePrefixTokens of a resolution (H7).
std::int64_t effective_prefix_tokens(const resolved_input& in);

/// Runs H0 and H2–H8.
route_plan plan_route(const lookup_route_request& request, const policy::resolved_policy& policy,
                      const route_options& options = {});

/// Runs H9–H12 and H14 on a plan without `early` over the request's tenant (`tenant`,
/// nullptr when it holds nothing) and every tenant's distinct keys `total_keys` (the miss
/// classifier's cold-start carve-out); does not mutate the index.
route_decision decide_route(const tenant_index* tenant, std::int64_t total_keys,
                            const lookup_route_request& request, const route_plan& plan,
                            const policy::resolved_policy& policy, micros now);
/// Runs H13: credits the LFU hits of a decision (no-op unless PREFIX_MATCH in an LFU tenant).
void commit_route(tenant_index& tenant, const route_decision& decision);
/// Returns the TIMEOUT response of a plan (token echo, no adapter echo, no scores).
lookup_route_response timeout_response(const route_plan& plan);

}  // namespace ic::index
